"""A bare relay with aiohttp's server on the client's side and picows on
Chromium's (``bench/bare_relay.py``'s behaviour otherwise): what moving only
the relay's Chromium link to picows could save.

    python -m bench.bare_hybrid UPSTREAM_WS_URL PORT
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

from bench.bare_relay import serve

MAX_FRAME = 1 << 30


class _Upstream(WSListener):
    def __init__(self, queue: asyncio.Queue[str | None]) -> None:
        self.queue = queue

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type == WSMsgType.TEXT:
            self.queue.put_nowait(frame.get_payload_as_utf8_text())

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.queue.put_nowait(None)


def make_app(upstream: str) -> web.Application:
    async def bridge(request: web.Request) -> web.WebSocketResponse:
        client = web.WebSocketResponse(max_msg_size=0, compress=False)
        await client.prepare(request)
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        up, _ = await ws_connect(lambda: _Upstream(queue), upstream, max_frame_size=MAX_FRAME)

        async def down() -> None:
            while (text := await queue.get()) is not None:
                await client.send_str(text)

        task = asyncio.create_task(down())
        async for msg in client:
            up.send(WSMsgType.TEXT, msg.data.encode())
        task.cancel()
        up.disconnect()
        return client

    app = web.Application()
    app.router.add_get("/{tail:.*}", bridge)
    return app


def main() -> None:
    serve(make_app)


if __name__ == "__main__":
    main()
