"""The app server's aiohttp application.

- ``GET /healthz``: the process is up (always 200 while it serves).
- ``GET /readyz``: 200 when Chromium answers through the relay and the log
  folder can be written; 503 with the reason otherwise.
- ``GET /card``: the computer's name, versions and the ops it serves.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
from aiohttp import web

import agentenv
from agentenv.process import log_dir
from agentenv.protocol import dump
from agentenv.protocol.card import BROWSER_V1, Card, Extension
from agentenv.settings import Settings

__all__ = ["Readiness", "make_app", "readiness"]

settings_key = web.AppKey("settings", Settings)
client_key = web.AppKey("client", aiohttp.ClientSession)

#: browser/v1 ops this server answers; grows as ops land.
BROWSER_V1_OPS: list[str] = []


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str | None = None
    browser: str | None = None


async def readiness(settings: Settings, client: aiohttp.ClientSession) -> Readiness:
    """Whether Chromium answers through the relay and the log can be written."""
    headers = {}
    if settings.control_token:
        headers["Authorization"] = f"Bearer {settings.control_token}"
    try:
        async with client.get(
            settings.relay_http + "/json/version",
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=settings.upstream_timeout_s),
        ) as answer:
            if answer.status != 200:
                return Readiness(False, f"the relay answered {answer.status}: Chromium not ready")
            body = await answer.json()
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return Readiness(False, "the relay is not answering")
    browser = body.get("Browser") if isinstance(body, dict) else None
    if not isinstance(browser, str):
        return Readiness(False, "the relay's /json/version names no browser")
    folder, warning = log_dir(settings)
    if warning or not os.access(folder, os.W_OK):
        return Readiness(False, f"the log folder {settings.log_dir} cannot be written")
    return Readiness(True, browser=browser)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def readyz(request: web.Request) -> web.Response:
    state = await readiness(request.app[settings_key], request.app[client_key])
    body: dict[str, object] = {"ready": state.ready}
    if state.reason:
        body["reason"] = state.reason
    if state.browser:
        body["browser"] = state.browser
    return web.json_response(body, status=200 if state.ready else 503)


async def card(request: web.Request) -> web.Response:
    settings = request.app[settings_key]
    state = await readiness(settings, request.app[client_key])
    versions = {"agentenv": agentenv.__version__}
    if state.browser:
        versions["chromium"] = state.browser
    body = Card(
        name=settings.name,
        versions=versions,
        extensions={BROWSER_V1: Extension(ops=list(BROWSER_V1_OPS))},
    )
    return web.json_response(dump(body))


async def _client_ctx(app: web.Application) -> AsyncIterator[None]:
    app[client_key] = aiohttp.ClientSession()
    yield
    await app[client_key].close()


def make_app(settings: Settings) -> web.Application:
    """The app server for ``settings``."""
    app = web.Application()
    app[settings_key] = settings
    app.cleanup_ctx.append(_client_ctx)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/card", card)
    return app
