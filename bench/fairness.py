"""Fair shares (issue 22): what one agent's flood costs the others.

- **The relay's peak memory** while 8 agents, each a user of its own, send
  100 MB messages at once (in 1 MiB fragments, so the relay reads them
  rather than refusing a frame's header): the relay's peak RSS (VmHWM,
  reset first) against its idle RSS, the relay's own limit (640 MiB) and
  the agents' shares (256 MiB for the relay as a whole).
- **An ordinary command while another agent floods**: Bob's
  ``Runtime.evaluate("1")`` round trips, p50 and p99, with Alice idle (the
  anchor), then while Alice pipelines ``Runtime.evaluate`` on her own page
  as fast as the relay takes them (past her log share, refused), then while
  she sends 4 MB messages of unused parameters back to back, then 8 MiB
  messages of many small values (``[],[],…``: 200 MiB once parsed), then
  while she asks Chromium for 2 million empty arrays by value (6 MB).

``AGENTENV_BENCH_FAIRNESS`` names the floods to run (``commands,big,values,
answers``, the default) and skips the peak when set;
``AGENTENV_BENCH_FAIRNESS_CALLS`` is Bob's calls each time (2,000).

Needs a Docker engine and the image (make image).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from typing import Any

import aiohttp

from agentenv.harness.computer import Computer, agent_tokens, deploy
from agentenv.harness.hardening import RELAY_MEMORY_MB
from bench.fleet import IMAGE
from bench.stats import row, table
from tests.security.attacks import frame, raw_socket

MIB = 1024 * 1024
AGENTS = 8
CALLS = int(os.environ.get("AGENTENV_BENCH_FAIRNESS_CALLS", "2000"))
FLOODS = {
    "commands": "Alice pipelining commands",
    "big": "Alice sending 4 MB messages",
    "values": "Alice sending 8 MiB of small values",
    "answers": "Alice asking for 6 MB of small values",
}


def _relay_kib(computer: Computer, field: str) -> int:
    """The relay's ``field`` (VmRSS, VmHWM) from its /proc status, in KiB."""
    out = computer.container.exec_run(
        ["sh", "-c", f"grep {field} /proc/$(pgrep -f bin/agentenv-relay | head -1)/status"]
    ).output.decode()
    return int(out.split()[1])


async def _browser_url(http: aiohttp.ClientSession, computer: Computer, token: str) -> str:
    async with http.get(computer.cdp + "/json/version") as answer:
        version = await answer.json()
    return f"{version['webSocketDebuggerUrl']}?token={token}"


async def _send_in_parts(url: str, size: int) -> None:
    """A message of ``size`` bytes in 1 MiB fragments, on a socket opened by hand."""
    reader, writer = await raw_socket(url)
    chunk = b"x" * MIB
    writer.write(frame(0x1, b'{"id":1,"method":"Runtime.evaluate","params":{"expression":"', False))
    with contextlib.suppress(ConnectionError):
        for _ in range(size // MIB):
            writer.write(frame(0x0, chunk, False))
            await writer.drain()
        writer.write(frame(0x0, b'"}}', True))
        await writer.drain()
        await asyncio.wait_for(reader.read(1), 30)
    writer.close()


async def _peak(computer: Computer, tokens: dict[str, str]) -> list[str]:
    computer.container.exec_run(
        ["sh", "-c", "echo 5 > /proc/$(pgrep -f bin/agentenv-relay | head -1)/clear_refs"]
    )
    idle = _relay_kib(computer, "VmRSS") / 1024
    async with aiohttp.ClientSession() as http:
        urls = [await _browser_url(http, computer, t) for t in tokens.values()]
    began = time.monotonic()
    await asyncio.gather(*(_send_in_parts(url, 100 * MIB) for url in urls))
    took = time.monotonic() - began
    peak = _relay_kib(computer, "VmHWM") / 1024
    after = _relay_kib(computer, "VmRSS") / 1024
    return [
        f"{AGENTS} agents each 100 MB in parts ({took:.1f} s)",
        f"{peak:.0f} MiB",
        f"idle {idle:.0f} MiB, after {after:.0f} MiB; limit {RELAY_MEMORY_MB} MiB: "
        f"{peak / RELAY_MEMORY_MB:.2f} of it",
    ]


class _Link:
    """One agent's connection, with a page and a session on it."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = iter(range(1, 10**9))

    async def call(self, method: str, params: dict[str, Any], session: str | None = None) -> Any:
        message: dict[str, Any] = {"id": next(self.ids), "method": method, "params": params}
        if session:
            message["sessionId"] = session
        await self.ws.send_json(message)
        while True:
            got = await self.ws.receive_json(timeout=60)
            if got.get("id") == message["id"]:
                return got

    async def page(self) -> str:
        tab = (await self.call("Target.createTarget", {"url": "about:blank"}))["result"]
        attached = await self.call(
            "Target.attachToTarget", {"targetId": tab["targetId"], "flatten": True}
        )
        return str(attached["result"]["sessionId"])


async def _round_trips(bob: _Link, session: str) -> list[float]:
    took = []
    for _ in range(CALLS):
        began = time.perf_counter()
        await bob.call("Runtime.evaluate", {"expression": "1"}, session)
        took.append((time.perf_counter() - began) * 1000)
    return took


async def _flood(url: str, kind: str, seconds: float) -> None:
    """Alice's flood, in a process of her own (so the bench's own loop is
    Bob's alone): commands pipelined as fast as the relay takes them, or
    4 MB messages of unused parameters back to back."""
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(url, max_msg_size=0)
        alice = _Link(ws)
        session = await alice.page()
        end = time.monotonic() + seconds
        if kind == "commands":

            async def drain() -> None:
                while time.monotonic() < end:
                    with contextlib.suppress(TimeoutError):
                        await ws.receive(timeout=0.5)

            reader = asyncio.create_task(drain())
            n = 10**6
            expression = "'" + "z" * 1500 + "'.length"
            while time.monotonic() < end:
                for _ in range(200):
                    n += 1
                    await ws.send_json(
                        {
                            "id": n,
                            "method": "Runtime.evaluate",
                            "params": {"expression": expression},
                            "sessionId": session,
                        }
                    )
                await asyncio.sleep(0)
            await reader
        elif kind == "answers":
            many = {"expression": "Array(2e6).fill([])", "returnByValue": True}
            while time.monotonic() < end:
                await alice.call("Runtime.evaluate", many, session)
        else:
            params: dict[str, Any] = (
                {"pad": [[]] * (8 * MIB // 3)}  # sent as [[],[],…]
                if kind == "values"
                else {f"u{i}": "p" * 2048 for i in range(2000)}
            )
            params["expression"] = "1"
            while time.monotonic() < end:
                await alice.call("Runtime.evaluate", params, session)
        await ws.close()


def _flooding(url: str, kind: str, seconds: float) -> None:
    asyncio.run(_flood(url, kind, seconds))


async def _under_flood(computer: Computer, tokens: dict[str, str]) -> list[list[str]]:
    rows = []
    async with aiohttp.ClientSession() as http:
        bob_ws = await http.ws_connect(await _browser_url(http, computer, tokens["a1"]))
        alice_url = await _browser_url(http, computer, tokens["a0"])
        bob = _Link(bob_ws)
        bob_session = await bob.page()
        await _round_trips(bob, bob_session)  # warm
        quiet = await _round_trips(bob, bob_session)
        rows.append(row("Bob, Alice idle", quiet))
        kinds = os.environ.get("AGENTENV_BENCH_FAIRNESS", ",".join(FLOODS)).split(",")
        for kind in kinds:
            name = FLOODS[kind]
            seconds = 2 + len(quiet) * 0.03  # past Bob's calls even when slowed
            alice = multiprocessing.get_context("spawn").Process(
                target=_flooding, args=(alice_url, kind, seconds)
            )
            alice.start()
            await asyncio.sleep(2)  # her page open and her flood under way
            loud = await _round_trips(bob, bob_session)
            alice.join(seconds + 60)
            if alice.is_alive():
                alice.kill()
            rows.append(row(f"Bob, {name}", loud))
        await bob_ws.close()
    p50 = float(rows[0][1].split()[0])
    for r in rows[1:]:
        r.append(f"{float(r[1].split()[0]) / p50:.2f}x p50")
    rows[0].append("anchor")
    return rows


def run() -> str:
    tokens = agent_tokens([f"a{i}" for i in range(AGENTS)])
    computer = deploy(IMAGE, None, None, agents=tokens)
    try:
        peak = (
            None
            if "AGENTENV_BENCH_FAIRNESS" in os.environ
            else asyncio.run(_peak(computer, tokens))
        )
        flood = asyncio.run(_under_flood(computer, tokens))
    finally:
        computer.stop()
    tables = (
        []
        if peak is None
        else [table("relay peak memory, agents flooding", ["work", "peak RSS", "anchor"], [peak])]
    )
    tables.append(
        table(
            "an ordinary command while another agent floods",
            ["who", "p50", "p99", "mean", "n", "vs quiet"],
            flood,
        )
    )
    return "\n".join(tables)


if __name__ == "__main__":
    print(run())
