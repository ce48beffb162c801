"""Chromium's side of the few messages the relay's unit tests need, served
in-process by aiohttp: ``/json/version``, ``/json/list`` and the browser
WebSocket. Targets it already has are reported on ``Target.setDiscoverTargets``
(as Chromium reports them, before its answer); ``Target.createTarget`` opens
one (its ``targetCreated`` event first, then the answer); any other command
is answered with an empty result. A test pushes events with :meth:`event`
and ends the connection with :meth:`drop` (Chromium exiting)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from types import TracebackType
from typing import Any

import orjson
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

__all__ = ["FakeChromium", "target_info"]


def target_info(
    target: str, url: str, kind: str = "page", opener: str | None = None
) -> dict[str, Any]:
    """A ``targetInfo`` as Chromium sends it (the fields the relay reads)."""
    info: dict[str, Any] = {
        "targetId": target,
        "type": kind,
        "title": "",
        "url": url,
        "attached": False,
        "canAccessOpener": False,
        "browserContextId": FakeChromium.CONTEXT,
    }
    if opener is not None:
        info["openerId"] = opener
    return info


class FakeChromium:
    CONTEXT = "CONTEXT-DEFAULT"

    def __init__(self, *targets: dict[str, Any]) -> None:
        self.targets: dict[str, dict[str, Any]] = {t["targetId"]: t for t in targets}
        #: Every command the relay sent, in order: (method, params).
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.socket: web.WebSocketResponse | None = None
        #: Set when a browser connection is open (cleared when it ends).
        self.connected = asyncio.Event()
        #: Browser contexts besides the default one (disposed of on command).
        self.contexts: list[str] = []
        self._ids = itertools.count(1)
        app = web.Application()
        app.router.add_get("/json/version", self._version)
        app.router.add_get("/json/list", self._list)
        app.router.add_get("/devtools/browser/{id}", self._browser)
        self.server = TestServer(app, host="127.0.0.1")

    @property
    def port(self) -> int:
        port = self.server.port
        assert port is not None, "the fake Chromium is not started"
        return port

    async def __aenter__(self) -> FakeChromium:
        await self.server.start_server()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.server.close()

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "Browser": "Chrome/140.0.0.0",
                "Protocol-Version": "1.3",
                "webSocketDebuggerUrl": f"ws://127.0.0.1:{self.port}/devtools/browser/B1",
            }
        )

    async def _list(self, request: web.Request) -> web.Response:
        listed = [
            {
                "id": t["targetId"],
                "type": t["type"],
                "title": t["title"],
                "url": t["url"],
                "webSocketDebuggerUrl": f"ws://127.0.0.1:{self.port}/devtools/page/{t['targetId']}",
                "devtoolsFrontendUrl": "/devtools/inspector.html?ws="
                f"127.0.0.1:{self.port}/devtools/page/{t['targetId']}",
            }
            for t in self.targets.values()
        ]
        return web.json_response(listed)

    async def _browser(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.socket = ws
        self.connected.set()
        try:
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    await self._command(ws, orjson.loads(msg.data))
        finally:
            if self.socket is ws:
                self.connected.clear()
                self.socket = None
        return ws

    async def _command(self, ws: web.WebSocketResponse, message: dict[str, Any]) -> None:
        method, params = message["method"], message.get("params") or {}
        self.received.append((method, params))
        result: dict[str, Any] = {}
        if method == "Target.setDiscoverTargets":
            for info in self.targets.values():
                await self._send(ws, "Target.targetCreated", {"targetInfo": info})
        elif method == "Target.getBrowserContexts":
            result = {
                "browserContextIds": list(self.contexts),
                "defaultBrowserContextId": self.CONTEXT,
            }
        elif method == "Target.disposeBrowserContext":
            with contextlib.suppress(ValueError):
                self.contexts.remove(str(params.get("browserContextId")))
        elif method == "Target.createTarget":
            target = f"OPENED{next(self._ids)}"
            info = target_info(target, params.get("url", "about:blank"))
            self.targets[target] = info
            await self._send(ws, "Target.targetCreated", {"targetInfo": info})
            result = {"targetId": target}
        answer: dict[str, Any] = {"id": message["id"], "result": result}
        if "sessionId" in message:
            answer["sessionId"] = message["sessionId"]
        await ws.send_str(orjson.dumps(answer).decode())

    async def _send(self, ws: web.WebSocketResponse, method: str, params: dict[str, Any]) -> None:
        await ws.send_str(orjson.dumps({"method": method, "params": params}).decode())

    async def event(self, method: str, params: dict[str, Any]) -> None:
        """An event on the browser connection (a target created, changed, gone)."""
        assert self.socket is not None, "no browser connection is open"
        if method == "Target.targetCreated" or method == "Target.targetInfoChanged":
            info = params["targetInfo"]
            self.targets[info["targetId"]] = info
        elif method == "Target.targetDestroyed":
            self.targets.pop(params["targetId"], None)
        await self._send(self.socket, method, params)

    async def drop(self) -> None:
        """Chromium exits: its browser connection ends (and :attr:`connected`
        is set again only by the next one)."""
        socket = self.socket
        assert socket is not None, "no browser connection is open"
        self.targets.clear()
        self.socket = None
        self.connected.clear()
        await socket.close()
