"""The app server's aiohttp application.

- ``GET /healthz``: the process is up (always 200 while it serves).
- ``GET /readyz``: 200 when every path an agent uses works: Chromium answers
  through the relay, the log folder can be written, Playwright MCP's runtime
  starts (checked once at boot), the app's own relay connection (ops, MCP
  sessions' grants) is up to the relay running now, and the recorder
  answers; 503 with the reason otherwise. An MCP session whose grant died
  with an earlier relay is restarted on its next call with a fresh one.
- ``GET /card``: the computer's name, versions, the ops it serves and its
  public key (``attestation.key``, agentenv/signing.py).
- ``POST /v1/browser/<op>``: browser/v1 ops (:mod:`agentenv.app.optable`),
  ``log``, ``data/*``.
- ``POST /v1/browser-recording/<op>``: forwarded to the recorder.
- ``/mcp``: Playwright MCP's tools (:mod:`agentenv.app.mcp`).
- ``/live``, ``/live/frame``, ``/live/tabs``, ``/live/input``: the live view
  (:mod:`agentenv.app.live_doors`).

Every request passes the relay's ``Host`` and ``Origin`` checks. A request
refused for its token (401) is reported to the relay, which writes it to the
action log as an ``auth`` line (``AgentEnv.authFailed``; :mod:`agentenv.log.auth`). State, data
and recording ops need the control token (open on a developer's machine with
neither users nor a control token configured). Who each call is on the
record as: :mod:`agentenv.app.caller`. Bodies are capped per op (1 MiB;
``data/add`` takes an archive of up to 256 MiB, read off the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import quote

import aiohttp
from aiohttp import web
from aiohttp_asgi import ASGIResource

import agentenv
from agentenv.access import bearer_token, check_host, check_origin
from agentenv.app.app_errors import OpError, failure
from agentenv.app.app_requests import (
    acting_caller,
    answer,
    browser_for,
    browser_key,
    browsers_key,
    caller,
    client_key,
    link_key,
    lives_key,
    mcp_key,
    parse,
    reader_key,
    require_control,
    scopes_key,
    settings_key,
)
from agentenv.app.data_ops import data_op, log_op
from agentenv.app.download_ops import DownloadFile
from agentenv.app.live_doors import add_live_routes
from agentenv.app.mcp_loader import McpState, mcp_door, serve_mcp
from agentenv.app.op_browser import Browser, Browsers
from agentenv.app.optable import DATA_OPS, OPS, PROFILE_OPS, SCOPE_OPS, all_ops
from agentenv.app.peers import control_headers, recorder_call, recorder_url, relay_url
from agentenv.app.pixels import Image
from agentenv.app.playwright_door import (
    PlaywrightServers,
    playwright_door,
    playwright_share,
    servers_key,
)
from agentenv.app.profile_ops import profile_op
from agentenv.app.scope_ops import scope_op
from agentenv.http import (
    BODY_LIMIT,
    BodyError,
    auth_middleware,
    error_middleware,
    read_body,
    read_json,
)
from agentenv.log.auth import Failure, door_of_app_path
from agentenv.log.reader import LogReader
from agentenv.metrics import CONTENT_TYPE, AppCounts, render
from agentenv.process import log_dir
from agentenv.protocol import dump
from agentenv.protocol.attestation import key_text
from agentenv.protocol.card import BROWSER_RECORDING_V1, BROWSER_V1, Attestation, Card, Extension
from agentenv.protocol.control import AuthFailed, Done, Identified, Whoami
from agentenv.protocol.data import ARCHIVE_LIMIT
from agentenv.relay.pinned import CHROMIUM as PROTOCOL_TABLE
from agentenv.relay_link import BrowserError, BrowserLink, CdpError
from agentenv.scopes import Scopes
from agentenv.settings import Settings
from agentenv.signing import SigningKeyError, computer_key

log = logging.getLogger("agentenv.app")

#: The computer's public key on the card (made on the first card, kept).
attestation_key = web.AppKey("attestation", dict[str, str])
#: When this app server started (its /metrics' agentenv_app_start_time_seconds).
started_key = web.AppKey("started", float)

__all__ = ["Readiness", "make_app", "readiness"]

RECORDING_OPS = ("start", "end", "end_all")
RECORDING_PARAMS = [
    "max_duration_s",
    "max_frames",
    "frames",
    "scope",
    "downloads",
    "har",
    "video",
]
#: What browser/v1's ops take beyond their own params (every op but data/reset).
BROWSER_PARAMS = ["scope"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _checks(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Host, Origin and, for /mcp, the caller and the body's size: a refusal
    raised here or below is answered by the error middleware around it."""
    settings = request.app[settings_key]
    check_host(settings, request.headers.get("Host"))
    own = request.headers.get("Host") if request.path.startswith("/live") else None
    check_origin(settings, request.headers.get("Origin"), own_host=own)
    if request.path.startswith("/mcp"):
        caller(request)  # with users configured, MCP needs a token too
        if (request.content_length or 0) > BODY_LIMIT:
            raise BodyError(413, "an MCP message over 1 MiB is not taken")
    return await handler(request)


def _paths() -> str:
    ops = ", ".join(f"/v1/browser/{op}" for op in all_ops())
    return f"/card, /healthz, /readyz, /mcp, /live, /playwright, /metrics, {ops}"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str | None = None
    browser: str | None = None


async def readiness(
    settings: Settings,
    client: aiohttp.ClientSession,
    mcp_problem: str | None = None,
    link: BrowserLink | None = None,
) -> Readiness:
    """Whether every path an agent uses works (see the module's docstring)."""
    headers = control_headers(settings)
    timeout = aiohttp.ClientTimeout(total=settings.upstream_timeout_s)
    try:
        async with client.get(
            relay_url(settings, "/json/version"), headers=headers, timeout=timeout
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
    if mcp_problem is not None:
        return Readiness(False, f"Playwright MCP cannot start: {mcp_problem}", browser)
    if link is not None:
        # The app's own connection, the one ops use and MCP sessions' grants
        # come from: up to the relay running now (reconnected if it restarted).
        try:
            await link.control(Whoami(), Identified, deadline_s=settings.upstream_timeout_s)
        except BrowserError as exc:
            return Readiness(False, f"the app's relay connection is not up: {exc}", browser)
    try:
        async with client.get(recorder_url(settings, "/healthz"), timeout=timeout) as answer:
            if answer.status != 200:
                return Readiness(False, f"the recorder answered {answer.status}", browser)
    except (aiohttp.ClientError, OSError, TimeoutError):
        return Readiness(False, "the recorder is not answering", browser)
    return Readiness(True, browser=browser)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _ready(request: web.Request) -> Readiness:
    problem = request.app[mcp_key].why_not
    return await readiness(
        request.app[settings_key], request.app[client_key], problem, request.app[link_key]
    )


async def readyz(request: web.Request) -> web.Response:
    state = await _ready(request)
    body: dict[str, object] = {"ready": state.ready}
    if state.reason:
        body["reason"] = state.reason
    if state.browser:
        body["browser"] = state.browser
    return web.json_response(body, status=200 if state.ready else 503)


async def card(request: web.Request) -> web.Response:
    settings = request.app[settings_key]
    state = await readiness(settings, request.app[client_key])
    # The Chromium the relay's protocol table was made for (relay/commands.py).
    versions = {"agentenv": agentenv.__version__, "protocol_table": PROTOCOL_TABLE}
    if state.browser:
        versions["chromium"] = state.browser
    body = Card(
        name=settings.name,
        versions=versions,
        attestation=_attestation(request.app),
        extensions={
            BROWSER_V1: Extension(
                ops=all_ops(),
                params=BROWSER_PARAMS,
                # /mcp's Playwright MCPs: the computer's, and one caller's share.
                limits={
                    "mcp_sessions": settings.mcp_sessions,
                    "mcp_sessions_per_caller": settings.mcp_share,
                    # /playwright's servers: the computer's, and one caller's share.
                    "playwright_servers": settings.playwright_servers,
                    "playwright_servers_per_caller": playwright_share(settings),
                    # Scopes opened on demand at once (scopes/open; 0: none).
                    "max_scopes": settings.max_scopes,
                },
            ),
            BROWSER_RECORDING_V1: Extension(
                ops=list(RECORDING_OPS),
                params=RECORDING_PARAMS,
                limits={
                    "max_frames": settings.recording_max_frames,
                    "max_duration_s": settings.recording_max_duration_s,
                    "video_fps": 5,
                    "video_fps_max": settings.recording_video_fps_max,
                    "video_bytes_per_minute": settings.recording_video_bytes_per_minute,
                },
            ),
        },
    )
    return web.json_response(dump(body))


def _attestation(app: web.Application) -> Attestation | None:
    """The card's ``attestation``: the computer's public key, made on first
    need (agentenv/signing.py); None, and the reason in the app's output,
    when the key cannot be made."""
    known = app[attestation_key]
    if "key" not in known:
        try:
            known["key"] = key_text(computer_key(app[settings_key].key_file))
        except SigningKeyError as exc:
            log.error("the card names no key: %s", exc)
            return None
    return Attestation(key=known["key"])


async def browser_op(request: web.Request) -> web.StreamResponse:
    name = request.match_info["op"]
    try:
        if name == "log":
            return await log_op(request)
        if name in DATA_OPS:
            return await data_op(request, name)
        if name in PROFILE_OPS:
            return await profile_op(request, name)
        if name in SCOPE_OPS:
            identity = require_control(request)
            return await scope_op(request, name, acting_caller(request, identity))
        op = OPS.get(name)
        if op is None:
            raise OpError(404, f"unknown op {name!r}: browser/v1 serves {', '.join(all_ops())}")
        identity = require_control(request) if op.control else caller(request)
        who = acting_caller(request, identity)
        body = parse(op.model, await read_json(request, op.limit))
        browser = browser_for(request, identity, getattr(body, "scope", None))
        result = await op.handler(browser, body, who)
    except BrowserError as exc:
        raise failure(exc) from None
    if isinstance(result, Image):
        return web.Response(body=result.data, content_type=result.content_type)
    if isinstance(result, DownloadFile):
        name = quote(result.name, safe="")
        return web.Response(
            body=result.file,  # streamed, and closed once sent
            content_type="application/octet-stream",
            headers={
                "Content-Disposition": f"attachment; filename*=UTF-8''{name}",
                "Content-Length": str(result.size),
                "X-Content-Type-Options": "nosniff",
            },
        )
    return answer(name, result)


async def recording_op(request: web.Request) -> web.Response:
    op = request.match_info["op"]
    if op not in RECORDING_OPS:
        known = ", ".join(RECORDING_OPS)
        raise OpError(404, f"unknown op {op!r}: browser-recording/v1 serves {known}")
    require_control(request)
    return await recorder_call(request.app, op, await read_body(request, BODY_LIMIT))


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _metrics_reader(request: web.Request) -> bool:
    """Whether the caller holds the metrics token (compared in constant time)."""
    wanted = request.app[settings_key].metrics_token
    sent = bearer_token(request.headers.get("Authorization"))
    return wanted is not None and sent is not None and _same(sent, wanted)


async def metrics(request: web.Request) -> web.Response:
    """The computer's counts (Prometheus' text format): the app server's, the
    relay's and the recorder's, fetched with the control token. A program that
    does not answer is named in a comment; the others still are. The
    metrics token (AGENTENV_METRICS_TOKEN) reads this and nothing else."""
    if not _metrics_reader(request):
        require_control(request)
    app = request.app
    settings = app[settings_key]
    state = app[mcp_key]
    counts = AppCounts(
        sessions=lambda: len(state.proxy.sessions) if state.proxy else 0,
        waiting=app[browsers_key].waiting,
        started=app[started_key],
    )
    parts = [render(counts)]
    headers = control_headers(settings)
    for name, url in (
        ("relay", relay_url(settings, "/metrics")),
        ("recorder", recorder_url(settings, "/metrics")),
    ):
        try:
            async with app[client_key].get(
                url, headers=headers, timeout=aiohttp.ClientTimeout(total=5)
            ) as answer:
                if answer.status != 200:
                    raise aiohttp.ClientError(str(answer.status))
                parts.append(await answer.read())
        except (aiohttp.ClientError, OSError, TimeoutError):
            parts.append(f"# the {name} is not answering\n".encode())
    return web.Response(body=b"".join(parts), headers={"Content-Type": CONTENT_TYPE})


async def _client_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[settings_key]
    app[client_key] = aiohttp.ClientSession()
    # Ops act in the home scope unless told otherwise (scopes.py):
    # with one scope, everywhere.
    scopes = app[scopes_key] = Scopes.of(settings)
    home = scopes.home if scopes.isolated else None
    link = BrowserLink(settings, app[client_key], home)

    def make(scope: str | None, first: BrowserLink | None = None) -> Browser:
        return Browser(
            first or BrowserLink(settings, app[client_key], scope),
            str(settings.downloads_for(scope)),
            new_link=lambda: BrowserLink(settings, app[client_key], scope),
        )

    app[link_key] = link
    app[browser_key] = make(home, link)
    app[browsers_key] = Browsers(app[browser_key], make)
    app[lives_key] = {}
    state = app[mcp_key]

    def scoped(scope: str | None) -> BrowserLink:
        """A link in ``scope`` (None: the home scope), where a Playwright MCP
        session's calls act: the scope fixed when the session was made, never
        looked up again by its caller's name (a closed scope's would be the
        home scope's)."""
        return app[browsers_key].of(None if scope == scopes.home else scope).shared

    def browser_of(scope: str | None) -> Browser:
        """The ops' browser of ``scope`` (request_human waits there)."""
        return app[browsers_key].of(None if scope == scopes.home else scope)

    loading = asyncio.create_task(serve_mcp(state, settings, link, scoped, browser_of))
    yield
    state.stop.set()
    if not state.loaded.is_set():
        loading.cancel()  # never asked for (or still loading): nothing to end
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(loading, 30)
    await app[browsers_key].disconnect()
    await app[client_key].close()


#: How long a refused request waits for the relay to take its report.
AUTH_REPORT_S = 2.0


def _reporter(app: web.Application) -> Callable[[Failure], Awaitable[None]]:
    """Failed authentication at the app's doors, reported to the relay (the
    log's one writer, which bounds how many are written); a report that
    cannot be made is said in the app's output, at most once a minute."""
    said = [-60.0]

    async def report(failure: Failure) -> None:
        params = AuthFailed(
            door=failure.door if failure.door != "cdp" else "op",
            source=failure.source[:64] if failure.source else None,
            path=failure.path[:200],
            why=failure.why,
            claimed={k: v for k, v in failure.claimed.items() if k in ("user", "role")},
        )
        try:
            await app[link_key].control(params, Done, deadline_s=AUTH_REPORT_S)
        except (BrowserError, CdpError) as exc:
            now = asyncio.get_running_loop().time()
            if now - said[0] >= 60.0:
                said[0] = now
                log.warning("a failed authentication could not be put on the record: %s", exc)

    return report


def make_app(settings: Settings) -> web.Application:
    """The app server for ``settings``."""
    app = web.Application(client_max_size=ARCHIVE_LIMIT)
    # Inside the error middleware: a 401 (after Host and Origin pass) is
    # reported, then answered.
    recorded = auth_middleware(settings, door_of_app_path, _reporter(app))
    app.middlewares.extend([error_middleware(_paths), recorded, _checks])
    app[settings_key] = settings
    app[attestation_key] = {}
    app[started_key] = time.time()
    folder, _ = log_dir(settings)
    app[reader_key] = LogReader(folder / settings.log_file.name)
    app.cleanup_ctx.append(_client_ctx)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/card", card)
    app.router.add_post("/v1/browser/{op:.+}", browser_op)
    app.router.add_post("/v1/browser-recording/{op}", recording_op)
    app.router.add_get("/metrics", metrics)
    app[servers_key] = PlaywrightServers()
    app.router.add_get("/playwright", playwright_door)
    add_live_routes(app)

    # /mcp: the mcp SDK's streamable HTTP app, mounted through aiohttp-asgi
    # (the MCP server itself loads on the first request: app/mcp_loader.py).
    state = McpState()
    app[mcp_key] = state
    app.router.register_resource(ASGIResource(mcp_door(state), root_path="/mcp"))
    return app
