"""The hand-over a move of the relay to picows would rest on
(docs/decisions.md, "The relay's sockets stay on aiohttp": the move was
built and dropped for picows's read buffer, and is the plan again once
picows frees it): aiohttp serves the request and runs every check, then
gives the client's socket to a picows server protocol, which reads the
request head again and sends the 101 itself. Checked on the pinned aiohttp
and picows, on asyncio's loop and on uvloop, so an upgrade of either that
breaks it shows here first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import pytest
import uvloop
from aiohttp import web
from picows import WSAutoPingStrategy, WSFrame, WSListener, WSMsgType, WSTransport

# picows's own protocol class: public in its module, not in its stubs
# (ws_create_server makes one per connection the same way).
from picows.picows import WSProtocol  # type: ignore[attr-defined]

from tests.support.stack import free_port


class _Echo(WSListener):
    def __init__(self, ended: asyncio.Future[None]) -> None:
        self.ended = ended

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type == WSMsgType.TEXT:
            transport.send(WSMsgType.TEXT, b"echo:" + frame.get_payload_as_bytes())
        elif frame.msg_type == WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code())
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        if not self.ended.done():
            self.ended.set_result(None)


async def _upgrade(request: web.Request) -> web.StreamResponse:
    if request.query.get("token") != "good":
        return web.json_response({"error": "unknown token"}, status=401)
    transport = request.transport
    assert transport is not None
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    head = f"{request.method} {request.raw_path} HTTP/1.1\r\n".encode()
    head += b"".join(name + b": " + value + b"\r\n" for name, value in request.raw_headers)
    head += b"\r\n"
    picows = WSProtocol(
        None, None, False, lambda _: _Echo(ended), logging.getLogger("handover"), True, 5,
        False, 20, 20, WSAutoPingStrategy.PING_WHEN_IDLE, True, 1 << 20, None, 16384,
    )  # fmt: skip
    transport.set_protocol(picows)
    picows.connection_made(transport)
    buffer = picows.get_buffer(len(head))
    buffer[: len(head)] = head
    picows.buffer_updated(len(head))
    await asyncio.wait_for(ended, 10)
    raise asyncio.CancelledError  # the socket is picows's: aiohttp writes nothing more


async def _served() -> list[str]:
    app = web.Application()
    app.router.add_get("/devtools/{tail:.*}", _upgrade)
    app.router.add_get("/json/version", _version)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    seen: list[str] = []
    try:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"ws://127.0.0.1:{port}/devtools/browser/x?token=bad")
            seen.append(f"refused {refused.value.status}")
            # An HTTP request first: the upgrade comes on the kept-alive socket.
            async with http.get(f"http://127.0.0.1:{port}/json/version") as answer:
                seen.append(f"http {answer.status}")
            ws = await http.ws_connect(f"ws://127.0.0.1:{port}/devtools/browser/x?token=good")
            for n in range(3):
                await ws.send_str(f"hi{n}")
                seen.append(str((await ws.receive(timeout=10)).data))
            await ws.close()
            seen.append(f"closed {ws.close_code}")
        await asyncio.sleep(0.1)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        seen.append(f"tasks left {len(left)}")
    finally:
        await runner.cleanup()
    return seen


async def _version(request: web.Request) -> web.Response:
    return web.json_response({"Browser": "handover"})


RUNS: dict[str, Callable[[Coroutine[Any, Any, list[str]]], list[str]]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


@pytest.mark.parametrize("loop", sorted(RUNS))
def test_aiohttp_hands_a_checked_upgrade_to_picows(
    loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    assert RUNS[loop](_served()) == [
        "refused 401",
        "http 200",
        "echo:hi0",
        "echo:hi1",
        "echo:hi2",
        "closed 1000",
        "tasks left 0",
    ]
    # picows said the socket was its own; neither library logged a fault.
    assert any(r.name.startswith("handover") for r in caplog.records)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
