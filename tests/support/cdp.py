"""A bare CDP client over aiohttp for tests that need raw control."""

from __future__ import annotations

import itertools
from typing import Any

import aiohttp
import requests

__all__ = ["RawCdp", "browser_ws_url"]


def browser_ws_url(relay_http: str, query: str = "") -> str:
    url = requests.get(relay_http + "/json/version", timeout=10).json()["webSocketDebuggerUrl"]
    return f"{url}?{query}" if query else str(url)


class RawCdp:
    """Send commands one at a time and wait for their answers (events skipped)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        call = next(self.ids)
        await self.ws.send_json({"id": call, "method": method, "params": params or {}, **extra})
        while True:
            message = await self.ws.receive_json(timeout=30)
            if message.get("id") == call:
                return dict(message)
