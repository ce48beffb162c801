"""The app server's peers inside the computer: the relay and the recorder,
reached on 127.0.0.1 with the control token. Their addresses and the header
are built here only."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from agentenv.app.app_errors import OpError
from agentenv.app.app_requests import client_key, settings_key
from agentenv.settings import Settings

__all__ = ["control_headers", "recorder_call", "recorder_url", "relay_url"]


def control_headers(settings: Settings) -> dict[str, str]:
    """The header that makes a peer's call the computer's own (none on a
    computer without a control token)."""
    if settings.control_token:
        return {"Authorization": f"Bearer {settings.control_token}"}
    return {}


def relay_url(settings: Settings, path: str) -> str:
    return f"{settings.relay_http}{path}"


def recorder_url(settings: Settings, path: str) -> str:
    return f"http://127.0.0.1:{settings.recorder_port}{path}"


async def recorder_call(app: web.Application, op: str, body: bytes) -> web.Response:
    """Forward a browser-recording/v1 op to the recorder (127.0.0.1)."""
    settings = app[settings_key]
    headers = {"Content-Type": "application/json", **control_headers(settings)}
    url = recorder_url(settings, f"/{op}")
    try:
        async with app[client_key].post(
            url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=120)
        ) as answer:
            payload = await answer.read()
            return web.Response(body=payload, status=answer.status, content_type="application/json")
    except (aiohttp.ClientError, OSError, TimeoutError):
        raise OpError(503, "the recorder is not answering; retry when /readyz says ready") from None
