"""A bare forwarding relay, the floor a CDP relay can reach: aiohttp on
uvloop, in a process of its own, moving WebSocket frames both ways with no
parsing, no checks and no logging. ``bench/relay.py`` times this relay's
round trips beside the real one's in the same run.

    python -m bench.bare_relay UPSTREAM_WS_URL PORT
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import aiohttp
from aiohttp import web


def make_app(upstream: str) -> web.Application:
    async def bridge(request: web.Request) -> web.WebSocketResponse:
        client = web.WebSocketResponse(max_msg_size=0, compress=False)
        await client.prepare(request)
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(upstream, max_msg_size=0, compress=0) as up,
        ):

            async def down() -> None:
                async for msg in up:
                    await client.send_str(msg.data)

            task = asyncio.create_task(down())
            async for msg in client:
                await up.send_str(msg.data)
            task.cancel()
        return client

    app = web.Application()
    app.router.add_get("/{tail:.*}", bridge)
    return app


def serve(make: Callable[[str], web.Application]) -> None:
    """``make(UPSTREAM_WS_URL)``'s app on uvloop at 127.0.0.1:PORT (the
    command line's), until the bench ends it."""
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    web.run_app(make(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]), print=None)


def main() -> None:
    serve(make_app)


if __name__ == "__main__":
    main()
