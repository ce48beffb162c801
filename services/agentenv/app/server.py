"""The app server's aiohttp application.

- ``GET /healthz``: the process is up (always 200 while it serves).
- ``GET /readyz``: 200 when Chromium answers through the relay and the log
  folder can be written; 503 with the reason otherwise.
- ``GET /card``: the computer's name, versions and the ops it serves.
- ``POST /v1/browser/log``: ``{after, limit}`` → ``{lines, last}``, read from
  the log file off the event loop.

Every request passes the relay's ``Host`` and ``Origin`` checks. Data ops
(``log``) need the control token when one is configured; with neither users
nor a control token configured (a developer's machine) they are open.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp_asgi import ASGIResource
from pydantic import ValidationError

import agentenv
from agentenv.access import AccessDenied, Identity, bearer_token, check_host, check_origin, identify
from agentenv.app import toolcall
from agentenv.app.keys import KeyError_
from agentenv.app.mcp import McpProxy
from agentenv.app.ops import OPS, Caller, Image, OpFailed, Ops, failure
from agentenv.cdp import BrowserError, BrowserLink, CdpError
from agentenv.log.reader import LogReader
from agentenv.process import log_dir
from agentenv.protocol import dump
from agentenv.protocol.card import BROWSER_RECORDING_V1, BROWSER_V1, Card, Extension
from agentenv.protocol.data import ARCHIVE_LIMIT, ArchiveError, pack, unpack
from agentenv.protocol.log import LogRequest
from agentenv.settings import Settings

log = logging.getLogger("agentenv.app")

__all__ = ["Readiness", "make_app", "readiness"]

settings_key = web.AppKey("settings", Settings)
client_key = web.AppKey("client", aiohttp.ClientSession)
reader_key = web.AppKey("reader", LogReader)
link_key = web.AppKey("link", BrowserLink)
ops_key = web.AppKey("ops", Ops)
mcp_key = web.AppKey("mcp", McpProxy)

DATA_OPS = ("data/get", "data/add", "data/reset")
#: browser/v1 ops this server answers.
BROWSER_V1_OPS: list[str] = [*OPS, "log", *DATA_OPS]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class OpError(Exception):
    """An op refused: ``status`` and a message that says what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


@web.middleware
async def _checks(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[settings_key]
    try:
        check_host(settings, request.headers.get("Host"))
        check_origin(settings, request.headers.get("Origin"))
        if request.path.startswith("/mcp"):
            caller(request)  # with users configured, MCP needs a token too
        return await handler(request)
    except AccessDenied as exc:
        return error_response(exc.status, exc.message)
    except OpError as exc:
        return error_response(exc.status, exc.message)
    except web.HTTPNotFound:
        ops = ", ".join(f"/v1/browser/{op}" for op in BROWSER_V1_OPS)
        return error_response(404, f"no such path; this server has /card, /healthz, /readyz, {ops}")
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        return error_response(405, f"{request.method} is not allowed here; use {allowed}")


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


async def body_of(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise OpError(400, "the body is not JSON: send a JSON object") from None
    if not isinstance(body, dict):
        raise OpError(400, "the body must be a JSON object")
    return body


def invalid(exc: ValidationError) -> OpError:
    """A 400 naming each bad field, never echoing its value."""
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    return OpError(400, "; ".join(problems))


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
        extensions={
            BROWSER_V1: Extension(ops=list(BROWSER_V1_OPS)),
            BROWSER_RECORDING_V1: Extension(ops=list(RECORDING_OPS), params=RECORDING_PARAMS),
        },
    )
    return web.json_response(dump(body))


async def log_op(request: web.Request) -> web.Response:
    require_control(request)
    try:
        ask = LogRequest.model_validate(await body_of(request))
    except ValidationError as exc:
        raise invalid(exc) from None
    reader = request.app[reader_key]
    page = await asyncio.get_running_loop().run_in_executor(None, reader.read, ask.after, ask.limit)
    body = b'{"lines":[' + b",".join(page.lines) + b'],"last":' + str(page.last).encode() + b"}"
    return web.Response(body=body, content_type="application/json")


async def data_op(request: web.Request, name: str) -> web.StreamResponse:
    """data/get, data/add, data/reset (control token)."""
    require_control(request)
    ops = request.app[ops_key]
    who = Caller("agentenv", "agentenv")
    try:
        if name == "data/get":
            await body_of(request)  # no params; refuses a body that is not JSON
            state = await ops.state()
            reader = request.app[reader_key]
            lines = await asyncio.get_running_loop().run_in_executor(None, _whole_log, reader)
            archive = pack(state, lines)
            return web.Response(
                body=archive,
                content_type="application/gzip",
                headers={"Content-Disposition": 'attachment; filename="browser-data.tar.gz"'},
            )
        if name == "data/add":
            try:
                state = unpack(await request.read())
            except ArchiveError as exc:
                raise OpError(400, str(exc)) from None
            return web.json_response(await ops.restore(state, who))
        await body_of(request)
        # Open recordings end first, so their log and manifest upload.
        ended = await recorder_call(request.app, "end_all", b'{"reason": "reset"}')
        if ended.status != 200:
            log.warning("data/reset: the recorder could not end its recordings")
        return web.json_response(await ops.reset(who))
    except (OpFailed, CdpError, BrowserError) as exc:
        failed = failure(exc)
        raise OpError(failed.status, failed.message) from None


def _whole_log(reader: LogReader) -> bytes:
    parts: list[bytes] = []
    last = 0
    while True:
        page = reader.read(last, 10000)
        if not page.lines:
            return b"".join(parts)
        parts.extend(line + b"\n" for line in page.lines)
        last = page.last


async def browser_op(request: web.Request) -> web.StreamResponse:
    name = request.match_info["op"]
    if name == "log":
        return await log_op(request)
    if name in DATA_OPS:
        return await data_op(request, name)
    op = OPS.get(name)
    if op is None:
        known = ", ".join(BROWSER_V1_OPS)
        raise OpError(404, f"unknown op {name!r}: browser/v1 serves {known}")
    if op.control:
        require_control(request)
    else:
        caller(request)
    try:
        tool = toolcall.parse(request.headers.get("AgentEnv-Tool-Call"))
        role = toolcall.role(request.headers.get("AgentEnv-Role"))
    except toolcall.ToolCallError as exc:
        raise OpError(400, str(exc)) from None
    try:
        body = op.model.model_validate(await body_of(request))
    except ValidationError as exc:
        raise invalid(exc) from None
    who = Caller("mcp", role, tool) if tool is not None else Caller("agentenv", "agentenv")
    handler = getattr(request.app[ops_key], op.handler)
    try:
        result = await handler(body, who)
    except (OpFailed, CdpError, BrowserError, KeyError_) as exc:
        failed = failure(exc)
        raise OpError(failed.status, failed.message) from None
    if isinstance(result, Image):
        return web.Response(body=result.data, content_type=result.content_type)
    return web.json_response(result)


RECORDING_OPS = ("start", "end", "end_all")
RECORDING_PARAMS = ["max_duration_s", "max_frames", "frames"]


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
    body = await request.read()
    return await recorder_call(request.app, op, body)


async def _client_ctx(app: web.Application) -> AsyncIterator[None]:
    app[client_key] = aiohttp.ClientSession()
    link = BrowserLink(app[settings_key], app[client_key])
    app[link_key] = link
    app[ops_key] = Ops(link, str(app[settings_key].downloads_dir))
    proxy = app[mcp_key] = McpProxy(app[settings_key], link)
    async with proxy.running():
        yield
    await link.close()
    await app[client_key].close()


def make_app(settings: Settings) -> web.Application:
    """The app server for ``settings``."""
    app = web.Application(middlewares=[_checks], client_max_size=ARCHIVE_LIMIT)
    app[settings_key] = settings
    folder, _ = log_dir(settings)
    app[reader_key] = LogReader(folder / settings.log_file.name)
    app.cleanup_ctx.append(_client_ctx)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/card", card)
    app.router.add_post("/v1/browser/{op:.+}", browser_op)
    app.router.add_post("/v1/browser-recording/{op}", recording_op)

    # /mcp: the mcp SDK's streamable HTTP app, mounted through aiohttp-asgi
    # (the proxy itself is made at startup, with the browser link).
    async def mcp_asgi(scope: Any, receive: Any, send: Any) -> None:
        await app[mcp_key].asgi(scope, receive, send)

    app.router.register_resource(ASGIResource(mcp_asgi, root_path="/mcp"))
    return app
