"""The relay's aiohttp application: discovery over HTTP, CDP over WebSocket.

Every request passes the ``Host`` and ``Origin`` checks first, then the token
check (``/json/version`` answers without a token); refusals come before any
WebSocket upgrade. Each WebSocket client gets its own upstream connection to
Chromium (:mod:`agentenv.relay.proxy`).

``/devtools/browser/<id>`` reaches Chromium's current browser endpoint
whatever ``<id>`` says, so a client holding the URL from before a Chromium
restart can reconnect with it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from weakref import WeakSet

import aiohttp
from aiohttp import web

from agentenv.access import (
    AccessDenied,
    Identity,
    bearer_token,
    check_host,
    check_origin,
    identify,
)
from agentenv.log.writer import LogWriter
from agentenv.process import log_dir
from agentenv.relay import discovery, guard
from agentenv.relay.errors import RelayError, UpstreamError
from agentenv.relay.logbook import Logbook
from agentenv.relay.proxy import Connection, bridge
from agentenv.relay.watcher import Watcher
from agentenv.settings import Settings

__all__ = ["make_app", "settings_key"]

log = logging.getLogger("agentenv.relay")

settings_key = web.AppKey("settings", Settings)
client_key = web.AppKey("client", aiohttp.ClientSession)
sockets_key: web.AppKey[WeakSet[web.WebSocketResponse]] = web.AppKey("sockets")
numbers_key: web.AppKey[itertools.count[int]] = web.AppKey("numbers")
logbook_key = web.AppKey("logbook", Logbook)
watcher_key = web.AppKey("watcher", Watcher)

_KNOWN = (
    "/json/version, /json/list, /json, /json/protocol, /json/new?<url>, "
    "/json/close/<id>, /json/activate/<id>, /devtools/browser/<id>, /devtools/page/<id>"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[settings_key]
    try:
        check_host(settings, request.headers.get("Host"))
        check_origin(settings, request.headers.get("Origin"))
        return await handler(request)
    except (RelayError, AccessDenied) as exc:
        return _error(exc.status, exc.message)
    except web.HTTPNotFound:
        return _error(404, f"no such path here; the relay serves {_KNOWN}")
    except web.HTTPMethodNotAllowed as exc:
        return _error(
            405, f"{request.method} is not allowed here; use {', '.join(exc.allowed_methods)}"
        )


def _identity(request: web.Request, *, open_path: bool = False) -> Identity:
    settings = request.app[settings_key]
    token = bearer_token(request.headers.get("Authorization")) or request.query.get("token")
    return identify(settings, token, request.query.get("user"), open_path=open_path)


def _client_address(request: web.Request) -> discovery.ClientAddress:
    forwarded = request.headers.get("X-Forwarded-Proto", "").lower()
    return discovery.ClientAddress(
        host=request.headers["Host"],
        secure=forwarded == "https",
        token=request.query.get("token"),
        user=request.query.get("user"),
    )


async def _upstream_json(request: web.Request, path: str, method: str = "GET") -> Any:
    settings = request.app[settings_key]
    client = request.app[client_key]
    url = settings.chromium_http + path
    try:
        async with client.request(method, url) as answer:
            body = await answer.read()
            if answer.status != 200:
                text = body.decode(errors="replace")[:500]
                raise UpstreamError(f"Chromium answered {answer.status}: {text}", answer.status)
    except (aiohttp.ClientError, OSError, TimeoutError):
        raise UpstreamError(
            f"Chromium is not answering on {settings.chromium_host}:{settings.chromium_port} "
            "(starting or restarting); retry when /readyz says ready"
        ) from None
    try:
        return json.loads(body)
    except ValueError:
        raise UpstreamError(f"Chromium's {path} answer is not JSON", 502) from None


async def _discovery(request: web.Request, path: str, *, open_path: bool = False) -> web.Response:
    _identity(request, open_path=open_path)
    settings = request.app[settings_key]
    body = await _upstream_json(request, path, request.method)
    upstream = f"{settings.chromium_host}:{settings.chromium_port}"
    return web.json_response(discovery.rewrite(body, upstream, _client_address(request)))


async def json_version(request: web.Request) -> web.Response:
    return await _discovery(request, "/json/version", open_path=True)


async def json_list(request: web.Request) -> web.Response:
    return await _discovery(request, "/json/list")


async def json_protocol(request: web.Request) -> web.Response:
    return await _discovery(request, "/json/protocol")


def _http_entry(
    request: web.Request, identity: Identity, method: str, params: dict[str, Any]
) -> int:
    """An entry for a discovery call that acts, logged as the command it stands for."""
    numbers = request.app[numbers_key]
    tab = params.get("targetId")
    return request.app[logbook_key].begin_command(
        identity,
        next(numbers),
        request.query.get("tag"),
        method,
        params,
        tab if isinstance(tab, str) else None,
    )


def _without_own_params(query: str) -> str:
    """``/json/new``'s URL without the ``token=``/``user=``/``tag=`` pairs the
    relay read (they are the caller's, not the page's)."""
    kept = [p for p in query.split("&") if p.split("=", 1)[0] not in ("token", "user", "tag")]
    return "&".join(kept)


async def json_new(request: web.Request) -> web.Response:
    # Chromium accepts /json/new only as PUT; clients that still send GET work too.
    identity = _identity(request)
    settings = request.app[settings_key]
    logbook = request.app[logbook_key]
    url = _without_own_params(request.query_string)  # /json/new?<url>, as Chromium takes it
    params = {"url": url} if url else {}
    entry = _http_entry(request, identity, "Target.createTarget", params)
    verdict = guard.check_url(url)
    if verdict is not None:
        logbook.end_command(entry, False, verdict.message, guard=verdict.as_entry())
        raise RelayError(verdict.message, 403)
    query = f"?{url}" if url else ""
    try:
        body = await _upstream_json(request, "/json/new" + query, "PUT")
    except RelayError as exc:
        logbook.end_command(entry, False, exc.message)
        raise
    opened = body.get("id") if isinstance(body, dict) else None
    logbook.end_command(entry, True, opened=opened if isinstance(opened, str) else None)
    upstream = f"{settings.chromium_host}:{settings.chromium_port}"
    return web.json_response(discovery.rewrite(body, upstream, _client_address(request)))


async def _json_target_op(request: web.Request, op: str, method: str) -> web.Response:
    identity = _identity(request)
    settings = request.app[settings_key]
    logbook = request.app[logbook_key]
    target = request.match_info["id"]
    entry = _http_entry(request, identity, method, {"targetId": target})
    url = f"{settings.chromium_http}/json/{op}/{target}"
    try:
        async with request.app[client_key].get(url) as answer:
            text = await answer.text()
    except (aiohttp.ClientError, OSError, TimeoutError):
        logbook.end_command(entry, False, "Chromium is not answering")
        raise UpstreamError("Chromium is not answering; retry when /readyz says ready") from None
    logbook.end_command(entry, answer.status == 200, None if answer.status == 200 else text)
    return web.Response(status=answer.status, text=text, content_type="text/plain")


async def json_close(request: web.Request) -> web.Response:
    return await _json_target_op(request, "close", "Target.closeTarget")


async def json_activate(request: web.Request) -> web.Response:
    return await _json_target_op(request, "activate", "Target.activateTarget")


async def _upstream_ws_url(request: web.Request, kind: str, target: str) -> str:
    settings = request.app[settings_key]
    if kind == "browser":
        version = await _upstream_json(request, "/json/version")
        url = version.get("webSocketDebuggerUrl") if isinstance(version, dict) else None
        if not isinstance(url, str):
            raise UpstreamError("Chromium's /json/version has no webSocketDebuggerUrl", 502)
        return url
    return f"ws://{settings.chromium_host}:{settings.chromium_port}/devtools/page/{target}"


async def devtools(request: web.Request) -> web.StreamResponse:
    identity = _identity(request)
    settings = request.app[settings_key]
    client = web.WebSocketResponse(
        max_msg_size=settings.max_message_bytes,
        compress=False,
        heartbeat=None,
        autoping=True,
    )
    if not client.can_prepare(request).ok:
        return _error(
            400,
            "this path takes a WebSocket upgrade: connect a CDP client to "
            f"ws://{request.headers['Host']}{request.path}",
        )
    kind = request.match_info["kind"]
    target = request.match_info.get("id", "")
    url = await _upstream_ws_url(request, kind, target)
    try:
        upstream = await request.app[client_key].ws_connect(
            url,
            max_msg_size=settings.max_message_bytes,
            compress=0,
            autoping=True,
            heartbeat=None,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0),
        )
    except aiohttp.WSServerHandshakeError as exc:
        if kind == "page":
            return _error(404, f"no page {target!r}: list pages with /json/list")
        return _error(502, f"Chromium refused the connection ({exc.status})")
    except (aiohttp.ClientError, OSError, TimeoutError):
        return _error(503, "Chromium is not answering; retry when /readyz says ready")
    numbers = request.app[numbers_key]
    tag = request.headers.get("AgentEnv-Tag") or request.query.get("tag")
    conn = Connection(
        next(numbers), identity, request.path, tag, target if kind == "page" else None
    )
    try:
        await client.prepare(request)
    except BaseException:
        await upstream.close()
        raise
    sockets = request.app[sockets_key]
    sockets.add(client)
    log.info("conn %d: %s opened %s", conn.number, identity.user, request.path)
    try:
        await bridge(
            client,
            upstream,
            conn,
            request.app[logbook_key],
            request.app[watcher_key],
            str(settings.downloads_dir),
        )
    finally:
        sockets.discard(client)
        log.info("conn %d: closed", conn.number)
    return client


async def _client_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[settings_key]
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.upstream_timeout_s)
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    app[client_key] = aiohttp.ClientSession(
        timeout=timeout, connector=connector, auto_decompress=False
    )
    yield
    await app[client_key].close()


async def _log_ctx(app: web.Application) -> AsyncIterator[None]:
    """The log writer, the watcher and the once-a-second tick."""
    settings = app[settings_key]
    folder, warning = log_dir(settings)
    if warning:
        log.warning(warning)
    writer = LogWriter.open(folder / settings.log_file.name)
    logbook = Logbook(writer)
    app[logbook_key] = logbook
    watcher = Watcher(settings, app[client_key], logbook)
    app[watcher_key] = watcher

    async def tick() -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                logbook.tick()
            except Exception:
                log.exception("log tick failed")

    tasks = [asyncio.create_task(watcher.run()), asyncio.create_task(tick())]
    log.info("writing the action log to %s (next entry %d)", writer.path, writer.next_seq)
    yield
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    logbook.ended("stop")
    writer.close()


async def _close_sockets(app: web.Application) -> None:
    open_sockets = app[sockets_key]
    sockets = list(open_sockets)
    await asyncio.gather(
        *(
            ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"relay stopping")
            for ws in sockets
        ),
        return_exceptions=True,
    )


def make_app(settings: Settings) -> web.Application:
    """The relay application for ``settings``."""
    app = web.Application(middlewares=[_guard], client_max_size=1024 * 1024)
    app[settings_key] = settings
    app[sockets_key] = WeakSet()
    app[numbers_key] = itertools.count(1)
    app.cleanup_ctx.append(_client_ctx)
    app.cleanup_ctx.append(_log_ctx)
    app.on_shutdown.append(_close_sockets)
    app.router.add_get("/json/version", json_version)
    app.router.add_get("/json/version/", json_version)
    for path in ("/json/list", "/json/list/", "/json", "/json/"):
        app.router.add_get(path, json_list)
    app.router.add_get("/json/protocol", json_protocol)
    app.router.add_get("/json/protocol/", json_protocol)
    app.router.add_route("PUT", "/json/new", json_new)
    app.router.add_get("/json/new", json_new)
    app.router.add_get("/json/close/{id}", json_close)
    app.router.add_get("/json/activate/{id}", json_activate)
    app.router.add_get("/devtools/{kind:browser}", devtools)
    app.router.add_get("/devtools/{kind:browser}/{id}", devtools)
    app.router.add_get("/devtools/{kind:page}/{id}", devtools)
    return app
