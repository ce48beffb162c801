"""The app server's connection to the browser: through the relay, as ``agentenv``.

One CDP connection to the relay with the control token, made on first use and
again after it drops. Its commands outside an action are the computer's own
reads and are not logged; an acting op opens an action first
(:meth:`BrowserLink.action`), whose scope is this connection, so its commands
and the tab events they cause are credited to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from agentenv.settings import Settings

__all__ = ["BrowserError", "BrowserLink", "CdpError"]

log = logging.getLogger("agentenv.app.browser")


class BrowserError(Exception):
    """The browser could not be reached (HTTP 503 for a caller)."""


class CdpError(Exception):
    """Chromium (or the relay's guard) refused a command."""

    def __init__(self, method: str, message: str) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method
        self.message = message


@dataclass
class ActionContext:
    entry: int
    ok: bool = True
    error: str | None = None


class BrowserLink:
    def __init__(self, settings: Settings, http: aiohttp.ClientSession) -> None:
        self.settings = settings
        self.http = http
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._calls: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._sessions: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._listeners: dict[tuple[str | None, str], asyncio.Queue[dict[str, Any]]] = {}
        self.conn = 0

    async def _connect(self) -> aiohttp.ClientWebSocketResponse:
        async with self._lock:
            if self._ws is not None and not self._ws.closed:
                return self._ws
            headers = {}
            if self.settings.control_token:
                headers["Authorization"] = f"Bearer {self.settings.control_token}"
            timeout = aiohttp.ClientTimeout(total=self.settings.upstream_timeout_s)
            try:
                async with self.http.get(
                    self.settings.relay_http + "/json/version", headers=headers, timeout=timeout
                ) as answer:
                    version = await answer.json(content_type=None)
                url = version["webSocketDebuggerUrl"]
                ws = await self.http.ws_connect(
                    url,
                    headers=headers,
                    max_msg_size=self.settings.max_message_bytes,
                    heartbeat=None,
                )
            except (aiohttp.ClientError, OSError, TimeoutError, KeyError, ValueError, TypeError):
                raise BrowserError(
                    "the browser is not reachable through the relay; retry when /readyz says ready"
                ) from None
            self._ws = ws
            self._sessions.clear()
            self._reader = asyncio.create_task(self._read(ws))
            who = await self._send(ws, "AgentEnv.whoami", {}, None, 10.0)
            self.conn = int(who.get("conn", 0))
            return ws

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    continue
                message = orjson.loads(msg.data)
                call = message.get("id")
                if isinstance(call, int):
                    future = self._calls.pop(call, None)
                    if future is not None and not future.done():
                        future.set_result(message)
                    continue
                method = message.get("method")
                queue = self._listeners.get((message.get("sessionId"), method))
                if queue is not None:
                    queue.put_nowait(message.get("params") or {})
                if method == "Target.detachedFromTarget":
                    session = message.get("params", {}).get("sessionId")
                    for tab, known in list(self._sessions.items()):
                        if known == session:
                            del self._sessions[tab]
        finally:
            for future in self._calls.values():
                if not future.done():
                    future.set_exception(BrowserError("the relay connection closed"))
            self._calls.clear()
            self._sessions.clear()

    async def _send(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        method: str,
        params: dict[str, Any],
        session: str | None,
        deadline_s: float,
    ) -> dict[str, Any]:
        call = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._calls[call] = future
        message: dict[str, Any] = {"id": call, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        try:
            await ws.send_str(orjson.dumps(message).decode())
            answer = await asyncio.wait_for(future, deadline_s)
        except TimeoutError:
            raise BrowserError(f"{method} got no answer within {deadline_s:.0f} s") from None
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            raise BrowserError("the relay connection closed") from None
        finally:
            self._calls.pop(call, None)
        error = answer.get("error")
        if error is not None:
            raise CdpError(method, str(error.get("message") if isinstance(error, dict) else error))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        deadline_s: float = 15.0,
    ) -> dict[str, Any]:
        ws = await self._connect()
        return await self._send(ws, method, params or {}, session, deadline_s)

    @contextlib.contextmanager
    def events(self, method: str, session: str | None) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of ``method`` events on ``session`` while the block runs."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._listeners[(session, method)] = queue
        try:
            yield queue
        finally:
            self._listeners.pop((session, method), None)

    async def session(self, tab: str) -> str:
        """A flattened session on ``tab`` for this connection (made once)."""
        await self._connect()
        known = self._sessions.get(tab)
        if known is not None:
            return known
        result = await self.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        session = str(result["sessionId"])
        self._sessions[tab] = session
        return session

    @contextlib.asynccontextmanager
    async def action(
        self,
        *,
        via: str,
        who: str,
        op: str | None = None,
        tool: str | None = None,
        call: str | None = None,
        args: Any = None,
        tab: str | None = None,
        typing: list[str] | None = None,
        acts: str = "acting",
        scope: list[int | str] | None = None,
    ) -> AsyncIterator[ActionContext]:
        """An action on the record around the commands made inside it.

        Its scope is this connection, unless ``scope`` names others (a
        Playwright MCP's connection tag).
        """
        await self._connect()
        params: dict[str, Any] = {"via": via, "who": who, "scope": scope or [self.conn]}
        for key, value in (
            ("op", op),
            ("tool", tool),
            ("call", call),
            ("args", args),
            ("tab", tab),
        ):
            if value is not None:
                params[key] = value
        if typing:
            params["typing"] = typing
        if acts != "acting":
            params["acts"] = acts
        begun = await self.call("AgentEnv.beginAction", params)
        context = ActionContext(int(begun["entry"]))
        try:
            yield context
        except BaseException as exc:
            context.ok = False
            context.error = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise
        finally:
            end: dict[str, Any] = {"entry": context.entry, "ok": context.ok}
            if context.error:
                end["error"] = context.error
            with contextlib.suppress(BrowserError, CdpError):
                await self.call("AgentEnv.endAction", end)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
