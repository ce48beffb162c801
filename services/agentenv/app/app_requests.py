"""What the app server's handlers read from a request: its keys (typed
``AppKey``s, set by :func:`agentenv.app.app_server.make_app`), who is calling
(:func:`caller`, :func:`live_caller`, :func:`require_control`,
:func:`acting_caller`), which scope
and browser an op acts in (:func:`op_scope`, :func:`browser_for`), a
body as its model (:func:`parse`), and an op's answer as its model writes it
(:func:`answer`)."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ValidationError

from agentenv.access import AccessDenied, Identity, bearer_token, identify
from agentenv.app import toolcall
from agentenv.app.app_errors import OpError
from agentenv.app.caller import Caller, caller_of
from agentenv.app.live import Live
from agentenv.app.mcp_loader import McpState
from agentenv.app.op_browser import Browser, Browsers
from agentenv.log.reader import LogReader
from agentenv.protocol import problems
from agentenv.protocol.answers import ANSWERS
from agentenv.relay_link import BrowserLink
from agentenv.scopes import Scopes
from agentenv.settings import Settings

__all__ = [
    "acting_caller",
    "answer",
    "browser_for",
    "browser_key",
    "browsers_key",
    "caller",
    "client_key",
    "link_key",
    "live_caller",
    "lives_key",
    "mcp_key",
    "op_scope",
    "parse",
    "reader_key",
    "require_control",
    "scopes_key",
    "settings_key",
]

settings_key = web.AppKey("settings", Settings)
client_key = web.AppKey("client", aiohttp.ClientSession)
reader_key = web.AppKey("reader", LogReader)
link_key = web.AppKey("link", BrowserLink)
browser_key = web.AppKey("browser", Browser)
browsers_key = web.AppKey("browsers", Browsers)
scopes_key = web.AppKey("scopes", Scopes)
mcp_key = web.AppKey("mcp", McpState)
#: The live view of each scope watched (None: the home scope's).
lives_key: web.AppKey[dict[str | None, Live]] = web.AppKey("lives")


def _token(request: web.Request) -> str | None:
    return bearer_token(request.headers.get("Authorization")) or request.query.get("token")


def caller(request: web.Request) -> Identity:
    return identify(request.app[settings_key], _token(request), None)


def live_caller(request: web.Request) -> Identity:
    """Who watches or drives the live view: any token, a person's too (which
    :func:`caller`, every other door's, refuses)."""
    return identify(request.app[settings_key], _token(request), None, live=True)


def require_control(request: web.Request) -> Identity:
    """The caller, who must hold the control token when one is configured."""
    settings = request.app[settings_key]
    identity = caller(request)
    if identity.control or (
        (settings.control_token is None or settings.control_open) and not settings.tokens_required
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
    users = request.app[settings_key].tokens_required
    relayed = request.headers.get("AgentEnv-Via") == "cdp"
    return caller_of(identity, role, tool, users=users, relayed=relayed)


def op_scope(request: web.Request, identity: Identity, asked: str | None) -> str | None:
    """The scope an op acts in (None: the home scope, or the whole browser of a
    computer without scopes): the one the control token names, or the home
    scope; for a user's token, its own scope (docs/spec.md section 7)."""
    scopes = request.app[scopes_key]
    if scopes.closed(identity):
        # An opened scope's agent, its token checked when the request came:
        # its scope may have closed since (while its body came). It acts in
        # no scope then: not in the home one, where name_for would put it.
        raise AccessDenied("unknown token: this scope was closed", status=401)
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


def answer(op: str, result: Any) -> web.Response:
    """``op``'s JSON answer, written by its model in
    :data:`agentenv.protocol.answers.ANSWERS` (the table the harness reads
    it back by)."""
    return web.Response(body=ANSWERS[op].dump_json(result), content_type="application/json")
