"""One client WebSocket bridged to its own upstream WebSocket to Chromium.

Messages move as they arrive, each way, up to the settings' size limit, with
compression off and no ping timeout (an idle agent is never dropped). When
Chromium goes away the client gets a close frame (1011) telling it to
reconnect once the computer is ready again; when the client goes, its
upstream connection is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import aiohttp
from aiohttp import WSMsgType, web

from agentenv.relay.access import Identity

__all__ = ["BROWSER_GONE", "Connection", "bridge"]

log = logging.getLogger("agentenv.relay")

#: The close frame a client gets when Chromium exits under it.
BROWSER_GONE = (1011, b"Chromium exited; reconnect when /readyz says ready")


@dataclass(frozen=True)
class Connection:
    """A client's relay connection: its number (from 1 per relay boot),
    identity, and the path it asked for."""

    number: int
    identity: Identity
    path: str


async def _pump(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    async for msg in source:
        if msg.type is WSMsgType.TEXT:
            await sink.send_str(msg.data)
        elif msg.type is WSMsgType.BINARY:
            await sink.send_bytes(msg.data)
        elif msg.type is WSMsgType.ERROR:
            break


async def bridge(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    conn: Connection,
) -> None:
    """Move messages until either side ends; then close the other."""
    to_upstream = asyncio.create_task(_pump(client, upstream), name=f"conn{conn.number}-up")
    to_client = asyncio.create_task(_pump(upstream, client), name=f"conn{conn.number}-down")
    try:
        done, _ = await asyncio.wait({to_upstream, to_client}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (to_upstream, to_client):
            task.cancel()
        for task in (to_upstream, to_client):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    upstream_ended = to_client in done and not client.closed
    if upstream_ended:
        code, message = BROWSER_GONE
        log.info("conn %d: Chromium closed its side; closing the client", conn.number)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(code=code, message=message), 5.0)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(upstream.close(), 5.0)
    if not client.closed:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 5.0)
