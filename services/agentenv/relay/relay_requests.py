"""What the relay's handlers read from a request and from the application:
its keys (typed ``AppKey``s, set by :func:`agentenv.relay.relay_server.make_app`),
who is calling, the address the client used, a call to Chromium's own HTTP
endpoints, the scope the caller acts in, and the log entry for an HTTP call
that acts."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

import aiohttp
from aiohttp import web

from agentenv.access import AccessDenied, Identity, bearer_token, identify
from agentenv.admission import Gate
from agentenv.metrics import RelayCounts
from agentenv.relay import discovery
from agentenv.relay.auth_log import AuthLog
from agentenv.relay.client_state import ClientState
from agentenv.relay.logbook import Logbook
from agentenv.relay.memory import InFlight
from agentenv.relay.proxy import Shared
from agentenv.relay.relay_errors import RelayError, UpstreamError
from agentenv.relay.tokens import Granted
from agentenv.relay.watcher import Watcher
from agentenv.scopes import Scope
from agentenv.settings import Settings

__all__ = [
    "TARGET_ID",
    "auth_key",
    "client_address",
    "client_key",
    "client_state",
    "controls_key",
    "gate_key",
    "granted_key",
    "identity_of",
    "in_scopes_key",
    "inflight_key",
    "logbook_key",
    "numbers_key",
    "reading_key",
    "scope_of",
    "settings_key",
    "sockets_key",
    "token_of",
    "upstream_json",
    "watcher_key",
]

settings_key = web.AppKey("settings", Settings)
client_key = web.AppKey("client", aiohttp.ClientSession)
sockets_key: web.AppKey[WeakSet[web.WebSocketResponse]] = web.AppKey("sockets")
#: Each open connection acting in a scope other than home, with its scope.
in_scopes_key: web.AppKey[WeakKeyDictionary[web.WebSocketResponse, Scope]] = web.AppKey("in_scopes")
#: Whether each such connection holds the control token (a link of the
#: app's or the recorder's in that scope), which a scope's revocation keeps.
controls_key: web.AppKey[WeakKeyDictionary[web.WebSocketResponse, bool]] = web.AppKey("controls")
#: Agents' connections open or connecting, and those waiting for a place
#: (AGENTENV_MAX_CONNECTIONS, AGENTENV_MAX_CONNECTIONS_PER_USER, the queue).
gate_key = web.AppKey("gate", Gate)
#: Bytes of agents' big messages being handled (relay/memory.py).
inflight_key = web.AppKey("inflight", InFlight)
#: Bytes agents' connections have read, each way, and not yet handed on.
reading_key = web.AppKey("reading", InFlight)
numbers_key: web.AppKey[itertools.count[int]] = web.AppKey("numbers")
logbook_key = web.AppKey("logbook", Logbook)
#: Failed authentication on the record (the relay's door and the app's reports).
auth_key = web.AppKey("auth", AuthLog)
watcher_key = web.AppKey("watcher", Watcher)
granted_key = web.AppKey("granted", Granted)
#: The relay's counts for ``/metrics``; the logbook holds the same object.
counts_key = web.AppKey("counts", RelayCounts)
#: The request's ``Host``, once checked (set by the relay's middleware).
host_key = web.RequestKey("host", str)
#: What every connection's bridge shares (set with the logbook and the watcher).
shared_key = web.AppKey("shared", Shared)

#: What a target id looks like (Chromium's are 32 hex digits; some are UUIDs).
TARGET_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


def token_of(request: web.Request) -> str | None:
    return bearer_token(request.headers.get("Authorization")) or request.query.get("token")


def identity_of(request: web.Request, *, open_path: bool = False) -> Identity:
    settings = request.app[settings_key]
    token = token_of(request)
    granted = request.app[granted_key].get(token)
    if granted is not None:
        if request.app[watcher_key].keeper.openings.was_closed(granted.identity.user):
            # Granted for a scope since closed (its grants went with it; one
            # in flight then is refused here): it must not act in another.
            raise AccessDenied("unknown token: this scope was closed", status=401)
        return granted.identity
    return identify(settings, token, request.query.get("user"), open_path=open_path)


def client_address(request: web.Request) -> discovery.ClientAddress:
    forwarded = request.headers.get("X-Forwarded-Proto", "").lower()
    return discovery.ClientAddress(
        host=request[host_key],
        secure=forwarded == "https",
        token=request.query.get("token"),
        user=request.query.get("user"),
    )


async def upstream_json(request: web.Request, path: str, method: str = "GET") -> Any:
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


async def scope_of(request: web.Request, identity: Identity) -> Scope | None:
    """The scope a connection acts in, its browser context made on first need
    (None: it sees every scope, or the computer has one). The control token
    may name one (``AgentEnv-Scope``: the app's ops act in the home scope)."""
    watcher = request.app[watcher_key]
    if not identity.control and watcher.keeper.openings.was_closed(identity.user):
        # An agent of a scope closed since its token was checked (a
        # connection that waited in the queue, a request in flight): it acts
        # in no scope, neither its closed one nor the home one.
        raise AccessDenied("unknown token: this scope was closed", status=401)
    name = watcher.scopes.name_for(identity)
    asked = request.headers.get("AgentEnv-Scope")
    if identity.control and asked and watcher.scopes.isolated:
        if asked not in watcher.scopes.names():
            raise RelayError(
                f"no scope {asked[:64]!r}: AgentEnv-Scope names a scope of AGENTENV_USERS "
                "or one open (scopes/list)",
                400,
            )
        name = asked
    return await watcher.keeper.scope(name) if name is not None else None


def still_good(request: web.Request, identity: Identity, scope: Scope | None) -> bool:
    """Whether a connection let in as ``identity`` in ``scope`` may go on now
    (checked once it is on the list a close or reset ends): its token still
    admits it as the same caller, and its scope was not closed or made new
    (reset) while it was connecting."""
    try:
        again = identity_of(request)
    except AccessDenied:
        return False
    if again != identity:
        return False
    return scope is None or request.app[watcher_key].scopes.made.get(scope.name) is scope


def client_state(
    request: web.Request,
    identity: Identity,
    tag: str | None,
    scope: Scope | None,
    page: str | None = None,
    page_own: bool = True,
) -> ClientState:
    """A client as the core sees it, numbered from the relay's count, knowing
    the watcher's targets, worlds and contexts: a CDP connection (``page``:
    its page endpoint's tab) or an HTTP command (on the browser's session)."""
    watcher = request.app[watcher_key]
    numbers = request.app[numbers_key]
    return ClientState(
        next(numbers),
        identity,
        tag,
        page,
        known=watcher.known,
        page_own=page_own,
        worlds=watcher.worlds,
        traces=watcher.traces,
        scope=scope,
    )
