"""The scope ops (control token; docs/spec.md section 3): ``scopes/open``,
``scopes/close``, ``scopes/reset``, ``scopes/list``.

The relay decides and holds the scopes opened on demand (relay/opening.py;
docs/decisions.md): these ops ask it over the app's control link and do the
app's and the recorder's part. Each is an action on the record, whose
arguments are the scope's name; a token is never in it, nor in an error.

Closing, in this order: the relay revokes the scope's token (no door takes
it from then on) and ends its agents' connections; the app ends the scope's
MCP sessions; the recorder ends its open recordings, each with its manifest;
then the relay disposes of every context the scope made, ends the
connections still in it, empties its downloads folder and drops its
storage quotas and log share, and frees its name. A close that failed half
way is done again by asking again.
"""

from __future__ import annotations

import logging
import re

import orjson
from aiohttp import web

from agentenv.access import check_host
from agentenv.app.acting import acting
from agentenv.app.app_errors import OpError
from agentenv.app.app_requests import (
    answer,
    browser_key,
    browsers_key,
    link_key,
    lives_key,
    mcp_key,
    parse,
    scopes_key,
    settings_key,
)
from agentenv.app.caller import Caller
from agentenv.app.peers import recorder_call
from agentenv.http import BODY_LIMIT, read_json
from agentenv.protocol.answers import ScopeDone
from agentenv.protocol.browser import (
    Empty,
    ScopeList,
    ScopeOpened,
    ScopeRef,
    ScopesOpen,
    ScopeState,
)
from agentenv.protocol.control import (
    CloseScope,
    Done,
    ListScopes,
    OpenedScopes,
    OpenScope,
    ResetScope,
    RevokeScope,
    ScopeMade,
)
from agentenv.relay_link import BrowserError, CdpError

__all__ = ["refusal", "scope_op", "urls"]

log = logging.getLogger("agentenv.app")

#: How the relay words a refusal of its scope rules: ``<status>: <message>``.
_REFUSED = re.compile(r"^(\d{3}): (.+)$", re.DOTALL)

#: A close or reset waits this long for the relay (it disposes of contexts).
SCOPE_DEADLINE_S = 30.0


#: How long the relay's queue says to wait, in its refusal's words.
_RETRY = re.compile(r"\(retry after (\d+) s\)$")


def refusal(exc: BrowserError) -> OpError:
    """The op's answer for the relay's refusal (its status and words), or for
    a relay that did not answer (503)."""
    if isinstance(exc, CdpError) and exc.method.startswith("AgentEnv."):
        said = _REFUSED.match(exc.message.removeprefix(f"{exc.method}: "))
        if said is not None:
            refusal = OpError(int(said.group(1)), said.group(2))
            wait = _RETRY.search(said.group(2))
            if refusal.status == 429 and wait is not None:  # the queue's (agentenv.admission)
                refusal.headers = {"Retry-After": wait.group(1)}
            return refusal
    return OpError(503, f"the relay could not do it: {exc}; retry when /readyz says ready")


def urls(request: web.Request) -> tuple[str, str]:
    """Where a scope's agents connect: the relay's browser endpoint at the
    host this op was asked at, and this server's ``/mcp`` at the address it
    was asked at.

    The host is the ``Host`` header as :func:`~agentenv.access.check_host`
    passed it (an IP address, ``localhost`` or an ``AGENTENV_ALLOWED_HOSTS``
    name, ``host[:port]`` and nothing else), normalized: no other text of the
    request goes into a URL an agent then sends its token to. The relay's
    port is ``AGENTENV_PUBLISHED_RELAY_PORT`` where a port mapping fixed at
    start publishes it on another, else its port in the computer: the
    computer cannot see a mapping, so a caller that published the relay on
    a port chosen at run time (the harness: the engine's) connects at the
    address it published, with the answer's token (harness/scoped.py)."""
    settings = request.app[settings_key]
    host = check_host(settings, request.headers.get("Host"))
    name = host[: host.rindex("]") + 1] if host.startswith("[") else host.rsplit(":", 1)[0]
    port = settings.published_relay_port or settings.relay_port
    secure = request.headers.get("X-Forwarded-Proto", "").lower() == "https"
    ws, http = ("wss", "https") if secure else ("ws", "http")
    return f"{ws}://{name}:{port}/devtools/browser", f"{http}://{host}/mcp"


async def scope_op(request: web.Request, name: str, who: Caller) -> web.Response:
    """One scope op, the caller holding the control token."""
    app = request.app
    link = app[link_key]
    body = await read_json(request, BODY_LIMIT)
    home = app[browser_key]
    try:
        if name == "scopes/list":
            parse(Empty, body)
            found = await link.control(ListScopes(), OpenedScopes)
            listed = ScopeList(
                scopes=[ScopeState(**s.model_dump()) for s in found.scopes],
                max_scopes=found.max_scopes,
                fixed=sorted(app[scopes_key].fixed),
            )
            return answer(name, listed)
        if name == "scopes/open":
            ask: ScopesOpen = parse(ScopesOpen, body)
            async with acting(home, who, name, ask):
                # Past AGENTENV_MAX_SCOPES it waits in the relay's queue first.
                made = await link.control(
                    OpenScope(name=ask.name, person=ask.person),
                    ScopeMade,
                    deadline_s=SCOPE_DEADLINE_S + app[settings_key].queue_wait_s,
                )
            if _gone(request):
                # Its caller went while it waited in the queue: no one will
                # be told its token, so it closes again, its place to the next.
                await _close(app, made.scope)
                raise OpError(
                    408, "the caller went away while this scope opened: it was closed again"
                )
            cdp, mcp = urls(request)
            opened = ScopeOpened(
                scope=made.scope,
                token=made.token,
                cdp_url=cdp,
                mcp_url=mcp,
                person_token=made.person_token,
                live_url=mcp.removesuffix("/mcp") + "/live" if made.person_token else None,
            )
            return answer(name, opened)
        ref: ScopeRef = parse(ScopeRef, body)
        async with acting(home, who, name, ref):
            if name == "scopes/close":
                await _close(app, ref.scope)
            else:
                await _forget(app, ref.scope)
                await link.control(ResetScope(scope=ref.scope), Done, deadline_s=SCOPE_DEADLINE_S)
        return answer(name, ScopeDone(scope=ref.scope))
    except BrowserError as exc:
        raise refusal(exc) from None


def _gone(request: web.Request) -> bool:
    """Whether the caller of ``request`` went away (closed its connection)."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def _close(app: web.Application, scope: str) -> None:
    link = app[link_key]
    await link.control(RevokeScope(scope=scope), Done, deadline_s=SCOPE_DEADLINE_S)
    await _forget(app, scope)
    ask = orjson.dumps({"reason": "stopped", "scope": scope})
    ended = await recorder_call(app, "end_all", ask)
    if ended.status != 200:
        # Refused before anything is disposed of: asked again, the close
        # ends them then (the scope stays closing, its token revoked).
        raise OpError(
            503,
            "the recorder could not end this scope's recordings: scopes/close it again",
        )
    await link.control(CloseScope(scope=scope), Done, deadline_s=SCOPE_DEADLINE_S)


async def _forget(app: web.Application, scope: str) -> None:
    """What the app holds of ``scope``: its MCP sessions end, its browser's
    links and live view are let go (made again on its next op)."""
    proxy = app[mcp_key].proxy
    if proxy is not None:
        await proxy.end_caller(scope)
    browser = app[browsers_key].others.pop(scope, None)
    if browser is not None:
        await browser.disconnect()
    app[lives_key].pop(scope, None)
