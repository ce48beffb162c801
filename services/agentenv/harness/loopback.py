"""A loopback door for a client that cannot send a token: chromedriver.

Selenium drives a running browser through chromedriver's ``debuggerAddress``,
a bare ``host:port``: chromedriver asks ``/json/version`` and ``/json/list``
and opens the browser's WebSocket with no header of the caller's, so a
computer with users configured takes none of it. A :class:`Loopback` listens
on ``127.0.0.1`` of the agent's own machine, on a port of its own, and
carries each request to the computer's relay with the agent's token added
(``Authorization: Bearer``): to the relay it is that agent, in that agent's
scope, and every command is on the record as the agent's.

Why here and not on the computer (decided for issue 21): a token-less port on
the computer would take anyone who reaches it (another container on the
same network, a published port), and chromedriver has no way to prove who it
is. On the agent's machine the door reaches only what the agent's token
already reaches, for as long as the agent runs; what it widens is who on
that machine can use it: any local user who finds the port, as with any
loopback debugging port. The harness opens one only when a task asks for it
(``browser_connect_cdp`` with ``debugger_address: true``), and closes it when
the agent ends. ``agentenv loopback`` opens one by hand, taking the token
from ``AGENTENV_TOKEN`` (never from its command line).

The ``Host`` header is the loopback's own, so the relay answers with
WebSocket addresses back through the door (it writes them from ``Host``).
Every wait is bounded; a side that ends ends the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
from aiohttp import WSMsgType, web

from agentenv.errors import AgentEnvError

__all__ = ["Loopback", "LoopbackError"]

#: How long the door waits for the relay to answer a request or a handshake.
UPSTREAM_S = 30.0
#: Largest message either way (as the relay's own limit).
MAX_MESSAGE = 256 * 1024 * 1024
#: Request headers carried to the relay (chromedriver sends few; none of the
#: client's own credentials or hop-by-hop headers).
_CARRIED = ("Accept", "Content-Type", "User-Agent")


class LoopbackError(AgentEnvError, RuntimeError):
    """The door could not open (a bad relay address, no free port)."""


@dataclass
class Loopback:
    """A door on ``127.0.0.1`` to the relay at ``relay`` as the holder of ``token``."""

    relay: str
    token: str = field(repr=False)
    address: str = ""
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stop: asyncio.Event | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.relay)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
            raise LoopbackError(
                f"the relay's address must be http://host:port (got {parts.scheme}://…)"
            )
        scheme = "https" if parts.scheme in ("https", "wss") else "http"
        self.relay = f"{scheme}://{parts.netloc}"

    # -- in a thread of its own (the harness is synchronous) --------------------

    def open(self, timeout_s: float = 10.0) -> str:
        """Start serving in a thread; the ``host:port`` to hand chromedriver."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def serve() -> None:
            try:
                asyncio.run(self._serve(ready))
            except BaseException as exc:  # reported to open()'s caller
                failed.append(exc)
                ready.set()

        self._thread = threading.Thread(target=serve, name="agentenv-loopback", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s) or failed or not self.address:
            self.close()
            why = f": {failed[0]}" if failed else ""
            raise LoopbackError(f"the loopback door did not open{why}")
        return self.address

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop serving: open connections are closed; bounded."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def __enter__(self) -> Loopback:
        self.open()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the server ------------------------------------------------------------

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self._running() as address:
            self.address = address
            ready.set()
            await self._stop.wait()

    @contextlib.asynccontextmanager
    async def _running(self) -> AsyncIterator[str]:
        timeout = aiohttp.ClientTimeout(total=UPSTREAM_S)
        sockets: set[web.WebSocketResponse] = set()
        async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as http:
            app = web.Application()

            async def carry(request: web.Request) -> web.StreamResponse:
                return await self._carry(request, http, sockets)

            app.router.add_route("*", "/{path:.*}", carry)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            port = runner.addresses[0][1]
            try:
                yield f"127.0.0.1:{port}"
            finally:
                for ws in list(sockets):
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(ws.close(), 5.0)
                await runner.cleanup()

    def _headers(self, request: web.Request) -> dict[str, str]:
        headers = {k: request.headers[k] for k in _CARRIED if k in request.headers}
        headers["Authorization"] = f"Bearer {self.token}"
        headers["Host"] = request.host  # the relay writes its ws addresses from it
        return headers

    async def _carry(
        self,
        request: web.Request,
        http: aiohttp.ClientSession,
        sockets: set[web.WebSocketResponse],
    ) -> web.StreamResponse:
        url = self.relay + request.rel_url.path_qs
        client = web.WebSocketResponse(max_msg_size=MAX_MESSAGE, autoping=True)
        if client.can_prepare(request).ok:
            return await self._bridge(request, client, http, url, sockets)
        try:
            async with http.request(
                request.method,
                url,
                headers=self._headers(request),
                data=await request.read() if request.can_read_body else None,
                allow_redirects=False,
            ) as answer:
                body = await answer.read()
                kind = answer.headers.get("Content-Type")
                headers = {"Content-Type": kind} if kind else {}
                return web.Response(body=body, status=answer.status, headers=headers)
        except (aiohttp.ClientError, OSError, TimeoutError):
            return web.Response(
                status=502, text="the computer's relay is not answering; retry when it is up\n"
            )

    async def _bridge(
        self,
        request: web.Request,
        client: web.WebSocketResponse,
        http: aiohttp.ClientSession,
        url: str,
        sockets: set[web.WebSocketResponse],
    ) -> web.StreamResponse:
        try:
            upstream = await http.ws_connect(
                url.replace("http", "ws", 1),
                headers=self._headers(request),
                max_msg_size=MAX_MESSAGE,
                heartbeat=None,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0),
            )
        except aiohttp.WSServerHandshakeError as exc:
            return web.Response(status=exc.status, text=f"the relay refused: {exc.message}\n")
        except (aiohttp.ClientError, OSError, TimeoutError):
            return web.Response(status=502, text="the computer's relay is not answering\n")
        await client.prepare(request)
        sockets.add(client)
        try:
            await _pump_both(client, upstream)
        finally:
            sockets.discard(client)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(upstream.close(), 5.0)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 5.0)
        return client


async def _pump_both(
    client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse
) -> None:
    """Carry messages both ways until either side ends."""

    async def pump(
        source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
        sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    ) -> None:
        async for msg in source:
            if msg.type is WSMsgType.TEXT:
                await sink.send_str(msg.data)
            elif msg.type is WSMsgType.BINARY:
                await sink.send_bytes(msg.data)
            elif msg.type is WSMsgType.ERROR:
                return

    tasks = {
        asyncio.create_task(pump(client, upstream)),
        asyncio.create_task(pump(upstream, client)),
    }
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
