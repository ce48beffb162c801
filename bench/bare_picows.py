"""A bare forwarding relay on picows (Cython WebSockets for asyncio) and
uvloop: ``bench/bare_relay.py``'s behaviour, a floor lower than aiohttp's.
In a process of its own, each client gets one upstream connection of its
own and frames move both ways as they come (text, binary and their
continuations, with their ``fin``), with no parsing, no checks and no
logging. ``bench/relay.py`` times it beside the aiohttp one and the relay.

    python -m bench.bare_picows UPSTREAM_WS_URL PORT

picows is a bench dependency only (requirements/dev.txt, the ``bench``
extra): the image does not carry it.
"""

from __future__ import annotations

import asyncio
import sys

from picows import (
    WSCloseCode,
    WSError,
    WSFrame,
    WSListener,
    WSMsgType,
    WSTransport,
    WSUpgradeRequest,
    ws_connect,
    ws_create_server,
)

#: As ``max_msg_size=0`` in the aiohttp relay: no limit of its own (picows
#: needs a number; a 1.4 MB screenshot's base64 is about 1.9 MB).
MAX_FRAME = 1 << 30
#: Frames that carry data; pings are answered by picows itself.
DATA = (WSMsgType.TEXT, WSMsgType.BINARY, WSMsgType.CONTINUATION)


class _Upstream(WSListener):
    """Chromium's side: every data frame goes to the client as it came."""

    def __init__(self, client: WSTransport) -> None:
        self.client = client

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type in DATA:
            self.client.send(frame.msg_type, frame.get_payload_as_memoryview(), frame.fin)
        elif frame.msg_type == WSMsgType.CLOSE:
            self.client.send_close(frame.get_close_code())
            self.client.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.client.disconnect()


class _Client(WSListener):
    """The client's side: opens its upstream when the client's handshake is
    done, holds the frames that come before it is open, then forwards."""

    def __init__(self, upstream: str) -> None:
        self.url = upstream
        self.up: WSTransport | None = None
        self.early: list[tuple[WSMsgType, bytes, bool]] = []
        self.closed = False

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.opening = asyncio.get_running_loop().create_task(self._open(transport))

    async def _open(self, client: WSTransport) -> None:
        try:
            up, _ = await ws_connect(lambda: _Upstream(client), self.url, max_frame_size=MAX_FRAME)
        except (OSError, TimeoutError, WSError):
            client.send_close(WSCloseCode.BAD_GATEWAY)
            client.disconnect()
            return
        if self.closed:
            up.disconnect()
            return
        self.up = up
        for kind, payload, fin in self.early:
            up.send(kind, payload, fin)
        self.early.clear()

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type in DATA:
            if self.up is None:
                self.early.append((frame.msg_type, frame.get_payload_as_bytes(), frame.fin))
            else:
                self.up.send(frame.msg_type, frame.get_payload_as_memoryview(), frame.fin)
        elif frame.msg_type == WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code())
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.closed = True
        if self.up is not None:
            self.up.disconnect()


async def serve(upstream: str, port: int) -> None:
    def listener(request: WSUpgradeRequest) -> _Client:
        return _Client(upstream)

    server = await ws_create_server(
        listener, "127.0.0.1", port, max_frame_size=MAX_FRAME, websocket_handshake_timeout=10
    )
    await server.serve_forever()


def main() -> None:
    import uvloop

    uvloop.run(serve(sys.argv[1], int(sys.argv[2])))


if __name__ == "__main__":
    main()
