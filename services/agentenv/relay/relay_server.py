"""The relay's aiohttp application: discovery over HTTP, CDP over WebSocket.

Every request passes the ``Host`` and ``Origin`` checks first (``Host`` parsed
strictly: ``host[:port]`` and nothing else), then the token check
(``/json/version`` answers without a token); refusals come before any
WebSocket upgrade. Each WebSocket client gets its own upstream connection to
Chromium (:mod:`agentenv.relay.proxy`). ``HEAD`` works wherever ``GET`` does.

``/devtools/browser/<id>`` reaches Chromium's current browser endpoint
whatever ``<id>`` says, so a client holding the URL from before a Chromium
restart can reconnect with it; so does the root, ``ws://host:9222/?token=…``,
as Browserless and Steel users connect. ``/devtools/page/<id>`` reaches only
web pages, never the browser's own UI, and discovery lists only those.

The HTTP commands that act (``/json/new``, ``/json/close``, ``/json/activate``)
are :mod:`agentenv.relay.http_commands`; what every handler reads from a
request is :mod:`agentenv.relay.relay_requests`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from weakref import WeakKeyDictionary, WeakSet

import aiohttp
from aiohttp import web

from agentenv.access import (
    Identity,
    check_host,
    check_origin,
)
from agentenv.admission import Admission, Full, Gate
from agentenv.http import BODY_LIMIT, auth_middleware, error_middleware, error_response
from agentenv.log.auth import AuthRecord, Failure
from agentenv.log.writer import LogWriter
from agentenv.metrics import CONTENT_TYPE, RelayCounts, render
from agentenv.page_ports import open_to_pages
from agentenv.process import log_dir
from agentenv.protocol.urls import canonical_address, loopback
from agentenv.relay import core, discovery, guard, scope_rule
from agentenv.relay.auth_log import AuthLog
from agentenv.relay.client_state import WORKERS
from agentenv.relay.connection import Connection
from agentenv.relay.http_commands import json_activate, json_close, json_new, json_new_get
from agentenv.relay.log_budget import LogBudget
from agentenv.relay.logbook import Logbook
from agentenv.relay.memory import InFlight
from agentenv.relay.proxy import Shared, bridge
from agentenv.relay.relay_errors import RelayError, UpstreamError
from agentenv.relay.relay_requests import (
    TARGET_ID,
    auth_key,
    client_address,
    client_key,
    client_state,
    controls_key,
    counts_key,
    gate_key,
    granted_key,
    host_key,
    identity_of,
    in_scopes_key,
    inflight_key,
    logbook_key,
    numbers_key,
    reading_key,
    scope_of,
    settings_key,
    shared_key,
    sockets_key,
    still_good,
    token_of,
    upstream_json,
    watcher_key,
)
from agentenv.relay.tokens import Granted
from agentenv.relay.watcher import Watcher
from agentenv.settings import Settings

__all__ = ["make_app", "settings_key"]

log = logging.getLogger("agentenv.relay")

_KNOWN = (
    "/json/version, /json/list, /json, /json/protocol, /json/new?<url>, "
    "/json/close/<id>, /json/activate/<id>, /devtools/browser/<id>, /devtools/page/<id>, "
    "and / for a WebSocket to the browser"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_error = error_response


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[settings_key]
    request[host_key] = check_host(settings, request.headers.get("Host"))
    check_origin(settings, request.headers.get("Origin"))
    return await handler(request)


async def _discovery(request: web.Request, path: str, *, open_path: bool = False) -> web.Response:
    identity = identity_of(request, open_path=open_path)
    settings = request.app[settings_key]
    body = await upstream_json(request, path)
    if path == "/json/list":
        scope = await scope_of(request, identity)
        body = scope_rule.listing(request.app[watcher_key].known, scope, body)
    upstream = f"{settings.chromium_host}:{settings.chromium_port}"
    return web.json_response(discovery.rewrite(body, upstream, client_address(request)))


async def json_version(request: web.Request) -> web.Response:
    return await _discovery(request, "/json/version", open_path=True)


async def json_list(request: web.Request) -> web.Response:
    return await _discovery(request, "/json/list")


async def json_protocol(request: web.Request) -> web.Response:
    return await _discovery(request, "/json/protocol")


async def _upstream_ws_url(
    request: web.Request, kind: str, target: str, connection: Connection
) -> str:
    settings = request.app[settings_key]
    if kind == "browser":
        known = request.app[watcher_key].browser_url
        if known is not None:
            return known  # the watcher's, while it is connected
        version = await upstream_json(request, "/json/version")
        url = version.get("webSocketDebuggerUrl") if isinstance(version, dict) else None
        if not isinstance(url, str):
            raise UpstreamError("Chromium's /json/version has no webSocketDebuggerUrl", 502)
        return url
    if not TARGET_ID.match(target):
        raise RelayError("no such page: ids are letters, digits and dashes (/json/list)", 404)
    # A page endpoint reaches its scope's web pages only: Chromium's own
    # list says what it is, the connection's rules decide.
    refused = connection.page(target, await upstream_json(request, "/json/list"))
    if refused is not None:
        step, refusal = refused
        if refusal.logged:
            logbook = request.app[logbook_key]
            entry = logbook.begin(core.begin_of(connection.state, step))
            logbook.end_refused(entry, refusal.why, refusal.guard)
        raise RelayError(refusal.why, refusal.status)
    return f"ws://{settings.chromium_host}:{settings.chromium_port}/devtools/page/{target}"


async def devtools(request: web.Request) -> web.StreamResponse:
    identity = identity_of(request)
    settings = request.app[settings_key]
    client = web.WebSocketResponse(
        # An agent's message is held whole while it is read: bounded per
        # message, and per user by their connections (issue 22).
        max_msg_size=settings.max_message_bytes
        if identity.control
        else settings.agent_message_bytes,
        compress=False,
        heartbeat=None,
        autoping=True,
    )
    if not client.can_prepare(request).ok:
        return _error(
            400,
            "this path takes a WebSocket upgrade: connect a CDP client to "
            f"ws://{request[host_key]}{request.path}",
        )
    if identity.control:
        return await _bridge(request, client, identity)
    counts = request.app[counts_key]
    # Agents' connections, open or connecting, against AGENTENV_MAX_CONNECTIONS
    # and AGENTENV_MAX_CONNECTIONS_PER_USER: past either, a newcomer waits in
    # the queue (agentenv.admission), then gets 429 with Retry-After.
    transport = request.transport
    try:
        async with request.app[gate_key].enter(
            identity.user, gone=lambda: transport is None or transport.is_closing()
        ):
            return await _bridge(request, client, identity)
    except Full as full:
        counts.refused += 1
        return _error(429, full.why, {"Retry-After": str(full.retry_after)})


async def _bridge(
    request: web.Request, client: web.WebSocketResponse, identity: Identity
) -> web.StreamResponse:
    settings = request.app[settings_key]
    counts = request.app[counts_key]
    kind = request.match_info.get("kind", "browser")
    target = request.match_info.get("id", "")
    scope = await scope_of(request, identity)
    granted = request.app[granted_key].get(token_of(request))
    tag = (
        granted.tag
        if granted is not None
        else request.headers.get("AgentEnv-Tag") or request.query.get("tag")
    )
    watcher = request.app[watcher_key]
    page = watcher.tab_of(target) if kind == "page" else None
    state = client_state(request, identity, tag, scope, page, page is None or page == target)
    downloads = str(settings.downloads_for(scope.name if scope is not None else None))
    logbook, vault = request.app[logbook_key], request.app[shared_key].vault
    connection = Connection(state, downloads, logbook, watcher.holds, vault)
    url = await _upstream_ws_url(request, kind, target, connection)
    try:
        upstream = await request.app[client_key].ws_connect(
            url,
            # Chromium is trusted: no size check on what it sends (aiohttp's
            # reader is measurably slower per message with a limit set);
            # agents' messages keep theirs.
            max_msg_size=0,
            compress=0,
            autoping=True,
            heartbeat=None,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0),
        )
    except aiohttp.WSServerHandshakeError as exc:
        if kind == "page":
            return _error(404, f"no page {target[:64]!r}: list pages with /json/list")
        return _error(502, f"Chromium refused the connection ({exc.status})")
    except (aiohttp.ClientError, OSError, TimeoutError):
        return _error(503, "Chromium is not answering; retry when /readyz says ready")
    known = watcher.target(target) if kind == "page" else None
    if known is not None and known[0] in WORKERS:
        # A worker's own endpoint: what it runs reaches the pages it serves.
        state.page_worker = target
    try:
        await client.prepare(request)
    except BaseException:
        await upstream.close()
        raise
    sockets = request.app[sockets_key]
    sockets.add(client)
    if scope is not None and scope.name != watcher.scopes.home:
        request.app[in_scopes_key][client] = scope
        request.app[controls_key][client] = identity.control
    if not still_good(request, identity, scope):
        # Its scope was closed or reset (or its token revoked) while it
        # connected: a close that ended its scope's connections did not see
        # this one yet, so it ends here, before any command of it is read.
        sockets.discard(client)
        await upstream.close()
        await client.close(
            code=aiohttp.WSCloseCode.POLICY_VIOLATION,
            message=b"this scope was closed or reset while connecting: connect again",
        )
        return client
    log.info("conn %d: %s opened %s", state.number, identity.user, request.path)
    agent = not identity.control
    if agent:
        counts.agents += 1
    else:
        counts.own += 1
    try:
        await bridge(client, upstream, connection, request.app[shared_key], request.protocol)
    finally:
        sockets.discard(client)
        if agent:
            counts.agents -= 1
        else:
            counts.own -= 1
        log.info("conn %d: closed", state.number)
    return client


async def metrics(request: web.Request) -> web.Response:
    """The relay's counts, for the app server's /metrics (the control token)."""
    if not identity_of(request).control:
        return _error(403, "the relay's counts take the control token: read the app's /metrics")
    body = render(request.app[counts_key])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


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
    folder, _ = log_dir(settings)  # its fallback's one warning: setup_logging's
    writer = LogWriter.open(folder / settings.log_file.name)
    counts = app[counts_key]
    counts.lines = lambda: writer.next_seq - 1
    counts.log_write_s = lambda: writer.sampled_write_s
    counts.log_bytes = lambda: writer.size
    logbook = Logbook(
        writer,
        max_bytes=settings.log_max_bytes,
        budget=LogBudget(settings.log_user_max_bytes, settings.log_user_bytes_per_minute),
        counts=counts,
    )
    app[logbook_key] = logbook
    auth = app[auth_key] = AuthLog(
        writer, AuthRecord(window_s=settings.auth_window_s, per_source=settings.auth_per_source)
    )
    watcher = Watcher(settings, app[client_key], logbook)
    app[watcher_key] = watcher
    scopes = watcher.keeper.scope_gate
    counts.scopes_open = lambda: len(watcher.keeper.openings.open)
    counts.scopes_capacity = settings.max_scopes
    counts.scopes_warm = lambda: len(watcher.keeper.warm.ready)
    counts.scopes_warm_target = watcher.keeper.warm.size
    counts.scopes_queued = scopes.admission.length
    counts.scopes_oldest_wait_s = lambda: scopes.admission.oldest_wait(scopes.clock())
    app[shared_key] = Shared(
        logbook,
        watcher,
        app[granted_key],
        app[inflight_key],
        app[reading_key],
        auth,
        vault=watcher.vault,
    )
    watcher.after_reset = lambda: _close_reset(app)

    async def end_connections(scope: str, agents_only: bool, why: str) -> None:
        if agents_only:
            app[granted_key].drop_user(scope)
        await _close_scope(app, scope, agents_only, why)

    watcher.end_connections = end_connections

    async def tick() -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                logbook.tick()
                auth.tick()
            except Exception:
                log.exception("log tick failed")

    tasks = [asyncio.create_task(watcher.run()), asyncio.create_task(tick())]
    log.info("writing the action log to %s (next entry %d)", writer.path, writer.next_seq)
    for warning in open_to_pages(settings):
        log.warning(warning)
    yield
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    logbook.ended("stop")
    writer.close()


async def _close_reset(app: web.Application) -> None:
    """After data/reset: close each connection whose scope's browser context
    was disposed of (its tabs and data are gone); a client that connects
    again gets its scope's fresh browser."""
    made = {id(s) for s in app[watcher_key].scopes.made.values()}
    stale = [ws for ws, scope in list(app[in_scopes_key].items()) if id(scope) not in made]
    await asyncio.gather(
        *(
            ws.close(
                code=aiohttp.WSCloseCode.GOING_AWAY,
                message=b"data/reset disposed of this scope's browser: connect again",
            )
            for ws in stale
        ),
        return_exceptions=True,
    )


async def _close_scope(app: web.Application, scope: str, agents_only: bool, why: str) -> None:
    """Close each connection acting in ``scope`` (its agents', or the control
    token's links in it too), as a closed or reset scope's: the client reads
    ``why``, and a token revoked cannot connect again."""
    ending = [
        ws
        for ws, theirs in list(app[in_scopes_key].items())
        if theirs.name == scope and not (agents_only and app[controls_key].get(ws, False))
    ]
    await asyncio.gather(
        *(
            ws.close(code=aiohttp.WSCloseCode.POLICY_VIOLATION, message=why.encode())
            for ws in ending
        ),
        return_exceptions=True,
    )


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


def own_addresses() -> frozenset[str]:
    """The machine's own addresses other than its loopback, as a URL's host
    is read (:func:`agentenv.protocol.urls.canonical_address`): in a
    container, its address on the engine's network, where the doors listen
    too (a page loaded ``http://<its address>:9222/json/version``)."""
    found: set[str] = set()
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        return frozenset()
    for *_, sockaddr in infos:
        host = canonical_address(str(sockaddr[0]))
        if host is not None and not loopback(host):
            found.add(host)
    return frozenset(found)


def make_app(settings: Settings) -> web.Application:
    """The relay application for ``settings``."""
    guard.close_doors(settings.doors, own_addresses())  # no URL an agent opens goes to them

    async def refused(failure: Failure) -> None:
        app[auth_key].refused(failure)

    # Inside the error middleware: a 401 from the token check (after Host
    # and Origin pass) is on the record, then answered.
    recorded = auth_middleware(settings, lambda path: "cdp", refused)
    app = web.Application(
        middlewares=[error_middleware(lambda: _KNOWN), recorded, _guard],
        client_max_size=BODY_LIMIT,
    )
    app[settings_key] = settings
    app[sockets_key] = WeakSet()
    app[in_scopes_key] = WeakKeyDictionary()
    app[controls_key] = WeakKeyDictionary()
    app[numbers_key] = itertools.count(1)
    app[granted_key] = Granted()
    app[counts_key] = RelayCounts()
    gate = app[gate_key] = Gate(
        Admission(
            capacity=settings.max_connections,
            per_key=settings.max_connections_per_user,
            queue_length=settings.queue_length,
            wait_s=settings.queue_wait_s,
            what="agent connections",
            capacity_setting="AGENTENV_MAX_CONNECTIONS",
            per_key_setting="AGENTENV_MAX_CONNECTIONS_PER_USER",
        )
    )
    app[counts_key].capacity = settings.max_connections
    app[counts_key].queued = gate.admission.length
    app[counts_key].oldest_wait_s = lambda: gate.admission.oldest_wait(gate.clock())
    app[inflight_key] = InFlight(settings.user_inflight_bytes, settings.relay_inflight_bytes)
    # One message of the largest size an agent may send can always be read.
    reading_per_user = settings.user_inflight_bytes and max(
        settings.user_inflight_bytes, settings.agent_message_bytes
    )
    app[reading_key] = InFlight(
        reading_per_user,
        settings.relay_inflight_bytes,
        per_user_name="AGENTENV_USER_INFLIGHT_BYTES (or AGENTENV_AGENT_MESSAGE_BYTES if larger)",
    )
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
    app.router.add_get("/json/new", json_new_get)
    app.router.add_get("/json/close/{id}", json_close)
    app.router.add_get("/json/activate/{id}", json_activate)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", devtools)
    app.router.add_get("/devtools/{kind:browser}", devtools)
    app.router.add_get("/devtools/{kind:browser}/{id}", devtools)
    app.router.add_get("/devtools/{kind:page}/{id}", devtools)
    return app
