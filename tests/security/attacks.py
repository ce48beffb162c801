"""What the attack tests share: an agent's raw CDP connection to the computer
under attack, and the checks each attack ends with."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import requests

from tests.support.container import Computer
from tests.support.timing import deadline, wait_for

__all__ = [
    "Agent",
    "agent",
    "attempt",
    "clean",
    "closed_with",
    "fill_storage",
    "frame",
    "guarded",
    "raw_socket",
]


class Agent:
    """One agent's CDP connection: commands with their answers, events kept."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    async def _next(self, timeout_s: float) -> dict[str, Any]:
        """The next message on the connection (an AssertionError if it ended)."""
        got = await self.ws.receive(timeout=timeout_s)
        if got.type is not aiohttp.WSMsgType.TEXT:
            raise AssertionError(f"the connection ended: {got.type} {got.data!r} {got.extra!r}")
        return dict(got.json())

    async def send(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.ws.send_json(message)
        while True:
            answer = await self._next(deadline(30))
            if answer.get("id") == message.get("id") or (
                "id" not in message and "error" in answer and "id" not in answer
            ):
                return answer
            self.events.append(answer)

    async def raw(self, text: str, call: int) -> dict[str, Any]:
        """Send ``text`` as written (a spelling a JSON writer would not make)
        and wait for the answer to ``call``."""
        await self.ws.send_str(text)
        while True:
            answer = await self._next(deadline(30))
            if answer.get("id") == call:
                return answer
            self.events.append(answer)

    async def event(self, method: str, timeout_s: float = 30) -> dict[str, Any]:
        """The first event ``method`` not yet taken (kept ones first), waiting
        for it at most ``timeout_s`` (scaled) in all."""
        for kept in self.events:
            if kept.get("method") == method:
                self.events.remove(kept)
                return kept
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline(timeout_s)
        while True:
            left = end - loop.time()
            assert left > 0, f"no {method} within {deadline(timeout_s):.0f} s"
            message = await self._next(left)
            if message.get("method") == method:
                return message
            self.events.append(message)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"id": next(self.ids), "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        return await self.send(message)

    async def page(self, url: str) -> tuple[str, str]:
        """A new tab at ``url``, loaded, and a flattened session on it."""
        tab = (await self.call("Target.createTarget", {"url": url}))["result"]["targetId"]
        attached = await self.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        session = attached["result"]["sessionId"]
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline(20)
        check = "location.href + ' ' + document.readyState"
        while await self.evaluate(session, check) != f"{url} complete":
            if loop.time() > end:
                raise AssertionError(f"{url} did not load within {deadline(20):.0f} s")
            await asyncio.sleep(0.05)
        return tab, session

    async def evaluate(self, session: str, expression: str) -> Any:
        answer = await self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session,
        )
        return answer["result"]["result"].get("value")


def browser_url(target: Computer, user: str) -> str:
    version = requests.get(target.relay + "/json/version", timeout=10).json()
    return f"{version['webSocketDebuggerUrl']}?token={target.token(user)}"


@asynccontextmanager
async def agent(target: Computer, user: str = "alice") -> AsyncIterator[Agent]:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(browser_url(target, user), max_msg_size=0) as ws,
    ):
        yield Agent(ws)


def attempt(target: Computer) -> int:
    """The log's last entry now: what an attack writes comes after it."""
    return target.log()[1]


def guarded(
    target: Computer,
    after: int,
    method: str,
    rule: str,
    who: str = "alice",
    action: str = "blocked",
) -> dict[str, Any]:
    """The entry of the attempt (after ``after``), with what the guard did."""

    def found() -> dict[str, Any] | None:
        lines, _ = target.log(after)
        for line in lines:
            entry = line.get("action")
            if (
                entry
                and entry.get("method") == method
                and entry.get("who") == who
                and (entry.get("guard") or {}).get("rule") == rule
            ):
                return dict(entry)
        return None

    entry = wait_for(found, f"the log to hold {who}'s {method} with guard {rule}", timeout_s=20)
    assert entry["guard"] == {"rule": rule, "action": action}, entry
    if action == "blocked":
        assert entry["ok"] is False and "agentenv guard" in entry["error"], entry
    return entry


def entries(
    target: Computer,
    after: int,
    what: str,
    match: Callable[[dict[str, Any]], bool],
    count: int = 1,
) -> list[dict[str, Any]]:
    """The action entries after ``after`` that ``match`` holds for, once there
    are ``count`` of them (bounded): a check that a secret is not in the log
    also proves the entry that carried it is there."""

    def found() -> list[dict[str, Any]] | None:
        lines = target.log(after)[0]
        got = [x["action"] for x in lines if "action" in x and match(x["action"])]
        return got if len(got) >= count else None

    return wait_for(found, f"the log to hold {what}", timeout_s=20)


def by(**fields: Any) -> Callable[[dict[str, Any]], bool]:
    """An :func:`entries` match: the entries whose ``fields`` are these."""
    return lambda action: all(action.get(k) == v for k, v in fields.items())


def clean(target: Computer, *secrets: str) -> None:
    """No byte of any secret anywhere under /var/log/agentenv."""
    everything = target.all_log_bytes()
    for secret in (*secrets, *target.users.values(), target.control or ""):
        if secret:
            assert secret.encode() not in everything, "a secret reached /var/log/agentenv"


async def raw_socket(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket opened by hand, to send a message in fragments."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), deadline(10))
    assert b" 101 " in head.split(b"\r\n")[0], head
    return reader, writer


def frame(opcode: int, payload: bytes, fin: bool) -> bytes:
    """A client's frame, masked with a key of zeros (the payload as it is)."""
    size = len(payload)
    first = (0x80 if fin else 0) | opcode
    if size < 126:
        head = bytes([first, 0x80 | size])
    elif size < 65536:
        head = bytes([first, 0x80 | 126]) + size.to_bytes(2, "big")
    else:
        head = bytes([first, 0x80 | 127]) + size.to_bytes(8, "big")
    return head + b"\0\0\0\0" + payload


async def closed_with(reader: asyncio.StreamReader) -> int | None:
    """The close code the relay sent, reading past anything else (0: the
    connection was reset, which a sender still sending may see instead;
    None: still open)."""
    with contextlib.suppress(TimeoutError):
        while True:
            if reader.at_eof():
                return 0
            try:
                first, second = await asyncio.wait_for(reader.readexactly(2), deadline(10))
            except (ConnectionError, asyncio.IncompleteReadError):
                return 0
            size = second & 0x7F
            if size == 126:
                size = int.from_bytes(await reader.readexactly(2), "big")
            elif size == 127:
                size = int.from_bytes(await reader.readexactly(8), "big")
            body = await reader.readexactly(size)
            if first & 0x0F == 0x8:
                return int.from_bytes(body[:2], "big")
    return None


def fill_storage(db: str = "fill", most: int = 48, record: int = 8 * 1024 * 1024) -> str:
    """A page's script filling its origin's IndexedDB (database ``db``)
    with records of ``record`` random bytes until Chromium refuses one, or
    ``most`` went in; it answers ``{"n": records written, "error": name}``
    as JSON."""
    return f"""(async () => {{
  const db = await new Promise((ok, no) => {{ const r = indexedDB.open({db!r}, 1);
    r.onupgradeneeded = () => r.result.createObjectStore('s');
    r.onsuccess = () => ok(r.result); r.onerror = () => no(r.error); }});
  const chunk = new Uint8Array({record});
  for (let i = 0; i < chunk.length; i += 65536)
    crypto.getRandomValues(chunk.subarray(i, i + 65536));
  let n = 0;
  try {{
    for (; n < {most}; n++) {{
      chunk[0] = n;
      await new Promise((ok, no) => {{ const tx = db.transaction('s', 'readwrite');
        tx.objectStore('s').put(chunk.slice(), n);
        tx.oncomplete = ok; tx.onerror = () => no(tx.error); tx.onabort = () => no(tx.error); }});
    }}
  }} catch (e) {{ return JSON.stringify({{n, error: e.name}}); }}
  return JSON.stringify({{n}});
}})()"""
