"""The app server's aiohttp application.

- ``GET /healthz``: the process is up (always 200 while it serves).
- ``GET /readyz``: 200 when every path an agent uses works: Chromium answers
  through the relay, the log folder can be written, Playwright MCP's runtime
  starts (checked once at boot), the app's own relay connection (ops, MCP
  sessions' grants) is up to the relay running now, and the recorder
  answers; 503 with the reason otherwise. An MCP session whose grant died
  with an earlier relay is restarted on its next call with a fresh one.
- ``GET /card``: the computer's name, versions and the ops it serves.
- ``POST /v1/browser/<op>``: browser/v1 ops (:mod:`agentenv.app.optable`),
  ``log``, ``data/*``.
- ``POST /v1/browser-recording/<op>``: forwarded to the recorder.
- ``/mcp``: Playwright MCP's tools (:mod:`agentenv.app.mcp`).

Every request passes the relay's ``Host`` and ``Origin`` checks. State, data
and recording ops need the control token (open on a developer's machine with
neither users nor a control token configured). Who each call is on the
record as: :mod:`agentenv.app.caller`. Bodies are capped per op (1 MiB;
``data/add`` takes an archive of up to 256 MiB, read off the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp_asgi import ASGIResource
from pydantic import BaseModel, ValidationError

import agentenv
from agentenv.access import AccessDenied, Identity, bearer_token, check_host, check_origin, identify
from agentenv.app import data, toolcall
from agentenv.app.browser import Browser, Browsers
from agentenv.app.caller import Caller, caller_of
from agentenv.app.errors import OpError, failure
from agentenv.app.live import PAGE as LIVE_PAGE
from agentenv.app.live import Live
from agentenv.app.optable import DATA_OPS, OPS, all_ops
from agentenv.app.pixels import Image
from agentenv.app.runtime import runtime_problem
from agentenv.http import (
    BODY_LIMIT,
    BodyError,
    asgi_error,
    error_middleware,
    error_response,
    read_body,
    read_json,
)
from agentenv.log.reader import LogReader
from agentenv.metrics import CONTENT_TYPE, AppCounts, render
from agentenv.process import log_dir
from agentenv.protocol import dump, problems
from agentenv.protocol.browser import Empty, ScopeOnly
from agentenv.protocol.card import BROWSER_RECORDING_V1, BROWSER_V1, Card, Extension
from agentenv.protocol.control import Identified, Whoami
from agentenv.protocol.data import ARCHIVE_LIMIT, ArchiveError, pack, unpack
from agentenv.protocol.log import LogRequest
from agentenv.relay.pinned import CHROMIUM as PROTOCOL_TABLE
from agentenv.relay.scopes import Scopes
from agentenv.relay_link import BrowserError, BrowserLink
from agentenv.settings import Settings

log = logging.getLogger("agentenv.app")

__all__ = ["Readiness", "make_app", "readiness"]

settings_key = web.AppKey("settings", Settings)
client_key = web.AppKey("client", aiohttp.ClientSession)
reader_key = web.AppKey("reader", LogReader)
link_key = web.AppKey("link", BrowserLink)
browser_key = web.AppKey("browser", Browser)
browsers_key = web.AppKey("browsers", Browsers)
scopes_key = web.AppKey("scopes", Scopes)


@dataclass
class McpState:
    """/mcp: whether Playwright MCP's runtime starts (checked at boot), and the
    MCP server, loaded on the first /mcp request (the mcp SDK is the app's
    heaviest import: an idle computer never pays for it)."""

    proxy: Any = None  # an agentenv.app.mcp.McpProxy once loaded
    checked: bool = False
    problem: str | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # the runtime was checked
    wanted: asyncio.Event = field(default_factory=asyncio.Event)  # an /mcp request came
    loaded: asyncio.Event = field(default_factory=asyncio.Event)  # the MCP server runs
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def why_not(self) -> str | None:
        if not self.checked:
            return "its runtime is still being checked"
        return self.problem


mcp_key = web.AppKey("mcp", McpState)
#: The live view of each scope watched (None: the home scope's).
lives_key: web.AppKey[dict[str | None, Live]] = web.AppKey("lives")
#: How long an /mcp request waits for the MCP server to load at boot.
MCP_LOAD_S = 60.0

RECORDING_OPS = ("start", "end", "end_all")
RECORDING_PARAMS = ["max_duration_s", "max_frames", "frames", "scope"]
#: What browser/v1's ops take beyond their own params (every op but data/reset).
BROWSER_PARAMS = ["scope"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _checks(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Host, Origin and, for /mcp, the caller and the body's size: a refusal
    raised here or below is answered by the error middleware around it."""
    settings = request.app[settings_key]
    check_host(settings, request.headers.get("Host"))
    check_origin(settings, request.headers.get("Origin"))
    if request.path.startswith("/mcp"):
        caller(request)  # with users configured, MCP needs a token too
        if (request.content_length or 0) > BODY_LIMIT:
            raise BodyError(413, "an MCP message over 1 MiB is not taken")
    return await handler(request)


def _paths() -> str:
    ops = ", ".join(f"/v1/browser/{op}" for op in all_ops())
    return f"/card, /healthz, /readyz, /mcp, /live, /metrics, {ops}"


def _token(request: web.Request) -> str | None:
    return bearer_token(request.headers.get("Authorization")) or request.query.get("token")


def caller(request: web.Request) -> Identity:
    return identify(request.app[settings_key], _token(request), None)


def require_control(request: web.Request) -> Identity:
    """The caller, who must hold the control token when one is configured."""
    settings = request.app[settings_key]
    identity = caller(request)
    if identity.control or (
        (settings.control_token is None or settings.control_open) and not settings.users
    ):
        return identity  # the harness, or a developer's open computer
    if settings.control_token is None:
        raise AccessDenied(
            "this op needs the control token, and none is configured: "
            "start the computer with AGENTENV_CONTROL_TOKEN set"
        )
    raise AccessDenied(
        "this op needs the control token: send 'Authorization: Bearer <AGENTENV_CONTROL_TOKEN>'",
        status=401 if _token(request) is None else 403,
    )


def acting_caller(request: web.Request, identity: Identity) -> Caller:
    """Who a call is on the record as, from its token and headers."""
    try:
        tool = toolcall.parse(request.headers.get("AgentEnv-Tool-Call"))
        role = toolcall.role(request.headers.get("AgentEnv-Role"))
    except toolcall.ToolCallError as exc:
        raise OpError(400, str(exc)) from None
    users = bool(request.app[settings_key].users)
    return caller_of(identity, role, tool, users=users)


def op_scope(request: web.Request, identity: Identity, asked: str | None) -> str | None:
    """The scope an op acts in (None: the home scope, or the whole browser of a
    computer without scopes): the one the control token names, or the home
    scope; for a user's token, its own scope (SPEC.md section 7)."""
    scopes = request.app[scopes_key]
    own = scopes.name_for(identity)
    if own is not None and asked is not None and asked != own:
        # Whether the scope exists or not: an agent learns nothing of others.
        raise OpError(
            403,
            f"a user's token acts in its own scope ({own!r}) only: leave scope out, "
            "or call with the control token",
        )
    unknown = scopes.unknown(asked)
    if unknown is not None:
        raise OpError(400, unknown)
    chosen = own if own is not None else asked
    return None if not scopes.isolated or chosen == scopes.home else chosen


def browser_for(request: web.Request, identity: Identity, asked: str | None) -> Browser:
    """The browser an op acts on: its scope's (:func:`op_scope`)."""
    return request.app[browsers_key].of(op_scope(request, identity, asked))


def parse(model: type[BaseModel], body: dict[str, Any]) -> Any:
    """``body`` as ``model``; a 400 naming each bad field, never its value."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise OpError(400, "; ".join(problems(exc))) from None


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
    headers = {}
    if settings.control_token:
        headers["Authorization"] = f"Bearer {settings.control_token}"
    timeout = aiohttp.ClientTimeout(total=settings.upstream_timeout_s)
    try:
        async with client.get(
            settings.relay_http + "/json/version", headers=headers, timeout=timeout
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
        async with client.get(
            f"http://127.0.0.1:{settings.recorder_port}/healthz", timeout=timeout
        ) as answer:
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
        extensions={
            BROWSER_V1: Extension(ops=all_ops(), params=BROWSER_PARAMS),
            BROWSER_RECORDING_V1: Extension(
                ops=list(RECORDING_OPS),
                params=RECORDING_PARAMS,
                limits={
                    "max_frames": settings.recording_max_frames,
                    "max_duration_s": settings.recording_max_duration_s,
                },
            ),
        },
    )
    return web.json_response(dump(body))


async def log_op(request: web.Request) -> web.Response:
    require_control(request)
    ask: LogRequest = parse(LogRequest, await read_json(request, BODY_LIMIT))
    reader = request.app[reader_key]
    page = await asyncio.get_running_loop().run_in_executor(None, reader.read, ask.after, ask.limit)
    body = b'{"lines":[' + b",".join(page.lines) + b'],"last":' + str(page.last).encode() + b"}"
    return web.Response(body=body, content_type="application/json")


async def data_op(request: web.Request, name: str) -> web.StreamResponse:
    """data/get, data/add, data/reset (control token)."""
    identity = require_control(request)
    who = acting_caller(request, identity)
    loop = asyncio.get_running_loop()
    if name == "data/get":
        ask: ScopeOnly = parse(ScopeOnly, await read_json(request, BODY_LIMIT))
        scope = op_scope(request, identity, ask.scope)
        saved = await data.state(request.app[browsers_key].of(scope))
        scopes = request.app[scopes_key]
        # The scope's own lines (two scopes or more): its browser's record only.
        only = (scope or scopes.home) if scopes.isolated else None
        lines = await loop.run_in_executor(None, data.whole_log, request.app[reader_key], only)
        archive = await loop.run_in_executor(None, pack, saved, lines)
        return web.Response(
            body=archive,
            content_type="application/gzip",
            headers={"Content-Disposition": 'attachment; filename="browser-data.tar.gz"'},
        )
    if name == "data/add":
        raw = await read_body(request, ARCHIVE_LIMIT)
        try:
            state = await loop.run_in_executor(None, unpack, raw)
        except ArchiveError as exc:
            raise OpError(400, str(exc)) from None
        into = browser_for(request, identity, request.query.get("scope"))
        return web.json_response(await data.restore(into, state, who))
    # data/reset: every scope (the contexts of scopes other than home are
    # disposed of, and made again on their next connection).
    parse(Empty, await read_json(request, BODY_LIMIT))
    browser = request.app[browser_key]
    # The sites to clear first: a reset that would not clear them all is
    # refused before anything changes.
    seen = await loop.run_in_executor(
        None, data.visited_since, request.app[reader_key], browser.reset_seq
    )
    if len(seen) > data.MAX_RESET_ORIGINS:
        raise OpError(
            503,
            f"{len(seen)} sites were visited since the last reset, more than data/reset "
            f"clears ({data.MAX_RESET_ORIGINS}): start a fresh computer for the next task",
        )
    # Open recordings end first, so their log and manifest upload.
    ended = await recorder_call(request.app, "end_all", b'{"reason": "reset"}')
    if ended.status != 200:
        log.warning("data/reset: the recorder could not end its recordings")
    await request.app[browsers_key].forget_others()
    settings = request.app[settings_key]
    every = data.Downloads(str(settings.downloads_dir), settings.scope_folders)
    return web.json_response(await data.reset(browser, who, seen, every))


async def browser_op(request: web.Request) -> web.StreamResponse:
    name = request.match_info["op"]
    try:
        if name == "log":
            return await log_op(request)
        if name in DATA_OPS:
            return await data_op(request, name)
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
    return web.json_response(result)


async def recorder_call(app: web.Application, op: str, body: bytes) -> web.Response:
    """Forward a browser-recording/v1 op to the recorder (127.0.0.1)."""
    settings = app[settings_key]
    headers = {"Content-Type": "application/json"}
    if settings.control_token:
        headers["Authorization"] = f"Bearer {settings.control_token}"
    url = f"http://127.0.0.1:{settings.recorder_port}/{op}"
    try:
        async with app[client_key].post(
            url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=120)
        ) as answer:
            payload = await answer.read()
            return web.Response(body=payload, status=answer.status, content_type="application/json")
    except (aiohttp.ClientError, OSError, TimeoutError):
        raise OpError(503, "the recorder is not answering; retry when /readyz says ready") from None


async def recording_op(request: web.Request) -> web.Response:
    op = request.match_info["op"]
    if op not in RECORDING_OPS:
        known = ", ".join(RECORDING_OPS)
        raise OpError(404, f"unknown op {op!r}: browser-recording/v1 serves {known}")
    require_control(request)
    return await recorder_call(request.app, op, await read_body(request, BODY_LIMIT))


async def metrics(request: web.Request) -> web.Response:
    """The computer's counts (Prometheus' text format): the app server's, the
    relay's and the recorder's, fetched with the control token. A program that
    does not answer is named in a comment; the others still are."""
    require_control(request)
    app = request.app
    settings = app[settings_key]
    state = app[mcp_key]
    counts = AppCounts(sessions=lambda: len(state.proxy.sessions) if state.proxy else 0)
    parts = [render(counts)]
    headers = (
        {"Authorization": f"Bearer {settings.control_token}"} if settings.control_token else {}
    )
    for name, url in (
        ("relay", f"{settings.relay_http}/metrics"),
        ("recorder", f"http://127.0.0.1:{settings.recorder_port}/metrics"),
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


async def live_page(request: web.Request) -> web.Response:
    """The live view's page (an agent's token or the control token)."""
    caller(request)
    return web.Response(
        text=LIVE_PAGE,
        content_type="text/html",
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


async def live_frame(request: web.Request) -> web.Response:
    """The active tab now, as JPEG (captured only when asked): of the caller's
    scope for an agent's token; of the home scope, or ``?scope=``, for the
    control token."""
    identity = caller(request)
    scope = op_scope(request, identity, request.query.get("scope"))
    browser = request.app[browsers_key].of(scope)
    lives = request.app[lives_key]
    live = lives.get(scope)
    if live is None or live.browser is not browser:  # a scope's browser made again
        live = lives[scope] = Live(browser)
    try:
        data = await live.frame()
    except OpError as exc:
        return error_response(exc.status, exc.message)
    return web.Response(body=data, content_type="image/jpeg", headers={"Cache-Control": "no-store"})


async def _client_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[settings_key]
    app[client_key] = aiohttp.ClientSession()
    # Ops act in the home scope unless told otherwise (relay/scopes.py):
    # with one scope, everywhere.
    scopes = app[scopes_key] = Scopes(settings.scopes)
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
    state = app[mcp_key] = McpState()

    def scoped(user: str) -> BrowserLink:
        """A link in ``user``'s scope (Playwright MCP's callers)."""
        name = scopes.name_for(Identity(user))
        return app[browsers_key].of(None if name == scopes.home else name).shared

    loading = asyncio.create_task(_serve_mcp(state, settings, link, scoped))
    yield
    state.stop.set()
    if not state.loaded.is_set():
        loading.cancel()  # never asked for (or still loading): nothing to end
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(loading, 30)
    await app[browsers_key].disconnect()
    await app[client_key].close()


async def _serve_mcp(
    state: McpState,
    settings: Settings,
    link: BrowserLink,
    scoped: Callable[[str], BrowserLink],
) -> None:
    """Check Playwright MCP's runtime at boot; load the MCP server (the app's
    heaviest import) on the first /mcp request, and keep it running until the
    app stops (one task: the SDK's task group is entered and left in it)."""
    state.problem = await runtime_problem()
    state.checked = True
    if state.problem is not None:
        log.error("Playwright MCP cannot start: %s", state.problem)
    state.ready.set()
    await state.wanted.wait()
    module = await asyncio.to_thread(importlib.import_module, "agentenv.app.mcp")
    state.proxy = module.McpProxy(settings, link, scoped)
    async with state.proxy.running():
        state.loaded.set()
        await state.stop.wait()


def make_app(settings: Settings) -> web.Application:
    """The app server for ``settings``."""
    app = web.Application(
        middlewares=[error_middleware(_paths), _checks], client_max_size=ARCHIVE_LIMIT
    )
    app[settings_key] = settings
    folder, _ = log_dir(settings)
    app[reader_key] = LogReader(folder / settings.log_file.name)
    app.cleanup_ctx.append(_client_ctx)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/card", card)
    app.router.add_post("/v1/browser/{op:.+}", browser_op)
    app.router.add_post("/v1/browser-recording/{op}", recording_op)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/live", live_page)
    app.router.add_get("/live/frame", live_frame)

    # /mcp: the mcp SDK's streamable HTTP app, mounted through aiohttp-asgi
    # (the proxy itself is made at startup, with the browser link).
    async def mcp_asgi(scope: Any, receive: Any, send: Any) -> None:
        state = app[mcp_key]
        state.wanted.set()
        try:
            await asyncio.wait_for(state.loaded.wait(), MCP_LOAD_S)
        except TimeoutError:
            await asgi_error(send, 503, "the MCP server is not up; retry shortly")
            return
        await state.proxy.asgi(scope, receive, send)

    app.router.register_resource(ASGIResource(mcp_asgi, root_path="/mcp"))
    return app
