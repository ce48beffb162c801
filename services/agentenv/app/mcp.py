"""``/mcp``: Playwright MCP's tools for agents, every call on the record.

Streamable HTTP served by the ``mcp`` SDK (v2) low-level ``Server``, mounted
in the app server through ``aiohttp-asgi``. Each MCP session gets its own
Playwright MCP (``python -m playwright mcp``, bundled in the playwright
wheel), started on first use over stdio in a private temporary folder, and
connected to the relay with a token the relay granted for that session's
caller (``AgentEnv.grant``, in its environment: never on a command line) and
a connection tag of its own: never the
control token, so its commands pass the guard like any agent's. It ends
when the MCP session ends (DELETE) or idles out. Clients of the sessionless
2026-07-28 protocol get one per caller (see :meth:`McpProxy._session_of`).

Answers are JSON (the SDK's ``json_response`` mode, a form streamable HTTP
allows): through ``aiohttp-asgi`` an SSE answer's events were not flushed to
the client. No tool here streams progress, so nothing is lost.

``tools/list`` is Playwright MCP's list minus :data:`REMOVED` (tools that
would break the computer), with the ``vision`` (x, y) tools, and the
computer's own :data:`FILL_TOOL` (``fill_credential {name, field}``: the
vault's fill of the focused field of the scope's active tab, served here,
not by Playwright MCP: app/credential_ops.py) and :data:`HUMAN_TOOL`
(``request_human {reason, timeout_s?}``: app/handoff.py). Each
``tools/call`` is an action (via ``mcp``, who as :mod:`agentenv.app.caller` says, the tool,
the call id, the arguments redacted; acting unless ``readOnlyHint``) whose
scope is that Playwright MCP's connection, so its CDP commands and the tab
events they cause are credited to the call. A tool's result is never logged:
Playwright MCP echoes typed text in its results, passwords included.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError

from agentenv.access import AccessDenied, Identity, bearer_token, identify
from agentenv.app.app_errors import OpError, failure
from agentenv.app.caller import Caller, caller_of
from agentenv.app.credential_ops import FillArgs, fill_args, fill_on_link
from agentenv.app.handoff import request_human
from agentenv.app.mcp_session import REMOVED, PlaywrightSession
from agentenv.app.op_browser import Browser
from agentenv.app.scope_ops import refusal
from agentenv.app.toolcall import ToolCall, ToolCallError, role
from agentenv.http import asgi_error
from agentenv.log.argpaths import READ_ARGS, file_args, rooted
from agentenv.paths import inside
from agentenv.protocol import problems
from agentenv.protocol.browser import RequestHuman
from agentenv.protocol.control import TabOrder, Tabs
from agentenv.protocol.log import ACTING, READING
from agentenv.relay_link import BrowserError, BrowserLink, CdpError
from agentenv.scopes import Scopes
from agentenv.settings import Settings

__all__ = ["FILL_TOOL", "REMOVED", "TYPING_ARGS", "McpProxy"]

log = logging.getLogger("agentenv.app.mcp")

#: Arguments holding typed text, per tool: withheld unless every password check cleared.
TYPING_ARGS: dict[str, list[str]] = {
    "browser_type": ["text"],
    "browser_fill_form": ["fields.*.value"],
    "browser_press_key": ["key"],
    "browser_press_sequentially": ["text"],
    "browser_drop": ["data.*"],
}
# The bounds (settings.py): an MCP session's idle time (mcp_idle_s), the
# Playwright MCPs on the computer (mcp_sessions: about 90 MiB each, what the
# memory budget holds; issue 40: one user's 8 took 58 % of what it leaves
# Chromium, two users' passed it) and one caller's share of them
# (Settings.mcp_share), the transport sessions one caller may have
# (mcp_transports_per_caller), and how long a transport session nobody uses
# lives (mcp_unused_s). The SDK's own cap on transport sessions is every
# caller's together (issue 22: one caller's 10,000 bare initialize calls
# filled it for everyone, for the 30-minute expiry).

#: The computer's own tool: a credential of the vault typed into the focused
#: field of the scope's active tab (the one in front, where Playwright MCP
#: acts once ``browser_tabs`` selected it), never shown to the agent.
FILL_TOOL = types.Tool(
    name="fill_credential",
    description=(
        "Type a stored credential's username, password or current TOTP code into the "
        "focused field of the active tab, without seeing it. Focus (click) the field "
        "first. Only works on a page of the credential's own origin."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the credential's name"},
            "field": {"type": "string", "enum": ["username", "password", "totp"]},
        },
        "required": ["name", "field"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
)

#: The computer's own tool: an agent asks a person to step in (app/handoff.py).
HUMAN_TOOL = types.Tool(
    name="request_human",
    description=(
        "Ask a person to step in (a CAPTCHA, a second factor, a page you cannot handle) and "
        "wait for them to hand back: answers 'done' or 'cannot' and their note, or an error "
        "when no person answered within timeout_s seconds."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "reason": {"type": "string", "description": "what the person should do, and why"},
            "timeout_s": {"type": "number", "minimum": 1, "maximum": 3600, "default": 300},
        },
        "required": ["reason"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
)

AsgiScope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _outside(value: Any, *roots: str) -> bool:
    """Whether a file argument names a path outside ``roots`` (relative paths
    are taken from the first, Playwright MCP's workspace)."""
    names = value if isinstance(value, list) else [value]
    return any(isinstance(name, str) and not inside(name, *roots, base=roots[0]) for name in names)


class McpProxy:
    def __init__(
        self,
        settings: Settings,
        link: BrowserLink,
        scoped: Callable[[str | None], BrowserLink] | None = None,
        browser_of: Callable[[str | None], Browser] | None = None,
    ) -> None:
        self.settings = settings
        self.link = link
        #: A session's scope's browser, as the ops see it (request_human waits there).
        self.browser_of = browser_of
        #: The link a session's tool calls begin their actions on: one of the
        #: session's scope (None: the home scope's), so the entry carries it.
        self.scoped = scoped or (lambda scope: link)
        #: Where each caller acts (scopes.py), and which scopes are open.
        self.scopes = Scopes.of(settings)
        self.sessions: dict[str, PlaywrightSession] = {}
        #: Mcp-Session-Id -> the caller who made it (initialize).
        self.owners: dict[str, str] = {}
        #: Transport sessions that saw no request since the one that opened
        #: them: Mcp-Session-Id -> when it opened (they expire after mcp_unused_s).
        self.unused: dict[str, float] = {}
        #: Each caller's refused sessions: (when the last line was written, how many since).
        self.refused: dict[str, tuple[float, int]] = {}
        server: Server[Any] = Server(
            "agentenv-browser",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.manager = StreamableHTTPSessionManager(
            server,
            # The app server checks Host and Origin itself, as the relay does.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=settings.mcp_idle_s,
            json_response=True,
        )

    # -- sessions ----------------------------------------------------------------

    def _session_of(self, ctx: Any) -> PlaywrightSession:
        """The Playwright MCP serving this request's MCP session.

        A legacy (handshake) client has an ``Mcp-Session-Id``. Under the
        2026-07-28 protocol there are no sessions: a request is served by the
        Playwright MCP of its caller (its credential, hashed, and the name it
        is on the record as), or of the ``AgentEnv-Session`` it names, so one
        agent keeps its page snapshot and refs from call to call. A session
        serves one caller: another caller's request on it is refused.
        """
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None) or {}
        identity = self._identity(headers)
        who = self._caller(headers, identity)
        key = self._key(headers, who.who)
        session = self.sessions.get(key)
        if session is None:
            full = self.no_room(who.who)
            if full is not None:
                raise AccessDenied(*full)
            # The control token's own MCP, or a role it named: where the relay
            # puts the token granted for that name (the home scope, unless the
            # name is a scope's).
            scope = self.scopes.name_for(Identity(who.who) if identity.control else identity)
            opened = None if identity.control or identity.user in self.scopes.by_user else scope
            session = self.sessions[key] = PlaywrightSession(
                self.settings,
                self.link,
                who,
                downloads=self.settings.downloads_for(scope),
                scope=None if scope == self.scopes.home else scope,
                opened=opened if self.scopes.on_demand else None,
            )
        elif session.caller.who != who.who:
            raise AccessDenied("this MCP session belongs to another caller: start your own")
        return session

    def _closed(self, session: PlaywrightSession) -> bool:
        """Whether ``session`` was made by an opened scope's agent whose scope
        is closing or closed now: it acts nowhere (scopes.py ``closed``)."""
        return session.opened is not None and not self.scopes.still_open(session.opened)

    def _key(self, headers: Any, who: str) -> str:
        """The Playwright MCP a request is served by (:meth:`_session_of`)."""
        key = headers.get("mcp-session-id")
        if key:
            return str(key)
        credential = hashlib.sha256(headers.get("authorization", "").encode()).hexdigest()[:16]
        chosen = headers.get("agentenv-session", "")[:200]
        return f"caller:{credential}:{who}:{chosen}"

    def no_room(self, who: str) -> tuple[str, int] | None:
        """Why no new Playwright MCP may start for ``who`` now, and the
        status to answer (None: one may): the caller's share is taken (429),
        or the computer's (503)."""
        settings = self.settings
        mine = sum(1 for s in self.sessions.values() if s.caller.who == who)
        share = settings.mcp_share
        ending = (
            "end one of yours (DELETE /mcp with its Mcp-Session-Id) or let one go idle "
            f"({settings.mcp_idle_s:.0f} s)"
        )
        if mine >= share:
            return (
                f"{who[:64]} has {mine} Playwright MCP sessions, as many as one caller may "
                f"have ({share}: AGENTENV_MCP_SESSIONS_PER_CALLER, and with users configured "
                f"their share of AGENTENV_MCP_SESSIONS={settings.mcp_sessions}): {ending}",
                429,
            )
        if len(self.sessions) >= settings.mcp_sessions:
            return (
                f"this computer runs {len(self.sessions)} Playwright MCP sessions, as many as "
                f"its memory holds (AGENTENV_MCP_SESSIONS={settings.mcp_sessions}, about 90 MiB "
                f"each): retry when one ends or goes idle ({settings.mcp_idle_s:.0f} s), or "
                "drive the browser over CDP or the browser/v1 ops, which need none",
                503,
            )
        return None

    def _identity(self, headers: Any) -> Identity:
        token = bearer_token(headers.get("authorization")) or None
        return identify(self.settings, token, None)

    def _caller(self, headers: Any, identity: Identity | None = None) -> Caller:
        identity = identity or self._identity(headers)
        try:
            named = role(headers.get("agentenv-role"))
        except ToolCallError:
            named = None  # a malformed role names nobody
        return caller_of(identity, named, None, users=self.settings.tokens_required)

    async def end(self, key: str) -> None:
        session = self.sessions.pop(key, None)
        if session is not None:
            await session.stop()

    def _live(self) -> dict[str, Any] | None:
        """The SDK's open transport sessions (its own table, in the pinned SDK;
        None if it has none by that name: then nothing is forgotten early)."""
        found = getattr(self.manager, "_server_instances", None)
        return found if isinstance(found, dict) else None

    async def _on_the_record(self, who: str, why: str) -> None:
        """A caller's refused sessions, on the record once a minute each
        (rule mcp-sessions, with how many since the last line): a flood of
        them writes no more than that."""
        now = time.monotonic()
        since, count = self.refused.get(who, (0.0, 0))
        if count and now - since < 60.0:
            self.refused[who] = (since, count + 1)
            return
        self.refused[who] = (now, 1)
        with contextlib.suppress(BrowserError, CdpError):
            async with self.link.action(
                via="mcp",
                who=who,
                op="mcp/initialize",
                args={"refused": max(1, count)},
                acts="reading",
            ) as action:
                action.ok = False
                action.error = f"refused by agentenv guard mcp-sessions: {why}"
                action.guard = {"rule": "mcp-sessions", "action": "blocked"}

    def _open_for(self, who: str) -> int:
        """How many transport sessions ``who`` has open (ended ones forgotten)."""
        live = self._live()
        if live is not None:
            for key in [k for k in self.owners if k not in live]:
                self.owners.pop(key, None)
                self.unused.pop(key, None)
        return sum(1 for owner in self.owners.values() if owner == who)

    async def end_caller(self, who: str) -> int:
        """End every MCP session of ``who`` (a scope closed or reset): its
        transport sessions and its Playwright MCPs; how many of the latter."""
        live = self._live() or {}
        for key in [k for k, owner in self.owners.items() if owner == who]:
            self.owners.pop(key, None)
            self.unused.pop(key, None)
            transport = live.pop(key, None)
            if transport is not None:
                with contextlib.suppress(Exception):  # it may be ending already
                    await transport.terminate()
        mine = [key for key, session in self.sessions.items() if session.caller.who == who]
        for key in mine:
            await self.end(key)
        return len(mine)

    async def expire_unused(self, now: float) -> None:
        """End transport sessions that saw no request after their opening one."""
        live = self._live() or {}
        for key, opened in list(self.unused.items()):
            if now - opened < self.settings.mcp_unused_s:
                continue
            self.unused.pop(key, None)
            self.owners.pop(key, None)
            transport = live.get(key)
            if transport is not None:
                with contextlib.suppress(Exception):  # it may be ending already
                    await transport.terminate()
                live.pop(key, None)
            await self.end(key)

    async def reap(self) -> None:
        """End Playwright MCPs idle longer than the MCP sessions' idle limit,
        and transport sessions never used after they opened."""
        while True:
            await asyncio.sleep(min(30.0, max(1.0, self.settings.mcp_unused_s / 3)))
            now = time.monotonic()
            await self.expire_unused(now)
            for key, session in list(self.sessions.items()):
                if now - session.used > self.settings.mcp_idle_s:
                    log.info("ending idle Playwright MCP %s", session.tag)
                    await self.end(key)

    # -- handlers ------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        session = self._session_of(ctx)
        if self._closed(session):
            raise AccessDenied(SCOPE_CLOSED, status=401)
        own = [FILL_TOOL, HUMAN_TOOL] if self.browser_of is not None else [FILL_TOOL]
        return types.ListToolsResult(tools=[*await session.tools(), *own])

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        session = self._session_of(ctx)
        if self._closed(session):  # no Playwright MCP is started for it either
            return _error(SCOPE_CLOSED)
        who = session.caller
        name = params.name
        args = dict(params.arguments or {})
        if name == FILL_TOOL.name:
            return await self._fill(ctx, session, args)
        if name == HUMAN_TOOL.name and self.browser_of is not None:
            return await self._ask(ctx, session, args, self.browser_of(session.scope))
        tools = {t.name: t for t in await session.tools()}
        if name in REMOVED or name not in tools:
            return _error(
                f"tool {name!r} is not served here"
                + (
                    ": it would break the computer"
                    if name in REMOVED
                    else "; tools/list shows them"
                )
            )
        downloads = str(session.downloads or self.settings.downloads_for(session.scope))
        own = str(session.folder or session.prepare())
        # What Playwright MCP writes goes to the session's own folder, never
        # the downloads folder: that one is Chromium's user's to write in,
        # and a link put there would have this user write where it points.
        args = rooted(args, own)
        for key, value in file_args(args):
            if key in READ_ARGS and _outside(value, own, downloads):
                return _error(
                    f"{name}: {key} must be files of this session's or in the downloads "
                    f"folder {downloads}"
                )
            if key not in READ_ARGS and _outside(value, own):
                return _error(
                    f"{name}: {key} must be a file of this session's own folder {own} "
                    "(give a name alone): what it writes never goes to the downloads folder"
                )
        annotations = tools[name].annotations
        read_only = getattr(annotations, "read_only_hint", None) if annotations else None
        typing = TYPING_ARGS.get(name)
        call = str(getattr(ctx, "request_id", None) or uuid.uuid4().hex)
        client = await session.start()
        if self._closed(session):
            # Its scope closed while the call came (Playwright MCP starting):
            # the call acts nowhere, never in the home scope.
            return _error(SCOPE_CLOSED)
        try:
            async with self.scoped(session.scope).action(
                via="mcp",
                who=who.who,
                role=who.role,
                tool=name,
                call=call,
                args=args,
                acts=READING if read_only else ACTING,  # acting unless it says it reads
                typing=typing,
                scope=[session.tag],
            ) as action:
                result = await client.call_tool(name, args)
                if result.is_error:
                    action.ok = False
                    # Never the result's text: it may echo what was typed.
                    action.error = f"{name} reported an error (its text is not logged)"
        except BrowserError as exc:
            return _error(f"{name}: the computer could not record or run it: {exc}")
        except Exception:
            # The SDK's or Playwright MCP's own failure: its text may echo what was
            # typed, so the log keeps a fixed one (the action ended not ok).
            session.used = time.monotonic()
            raise
        finally:
            session.used = time.monotonic()
        return result

    async def _fill(
        self, ctx: Any, session: PlaywrightSession, args: dict[str, Any]
    ) -> types.CallToolResult:
        """``fill_credential``: the vault's fill in the session's scope, on
        its active tab; an action like any tool call's, its value withheld."""
        try:
            asked = FillArgs.model_validate(args)
        except ValidationError as exc:
            return _error(f"fill_credential: {'; '.join(problems(exc))}")
        who = session.caller
        call = str(getattr(ctx, "request_id", None) or uuid.uuid4().hex)
        link = self.scoped(session.scope)
        try:
            tab = (await link.control(Tabs(), TabOrder)).active
            if tab is None:
                return _error("fill_credential: no tab is open in this browser")
            async with link.action(
                via="mcp",
                who=who.who,
                role=who.role,
                tool=FILL_TOOL.name,
                call=call,
                args=fill_args(asked.name, asked.field),
                tab=tab,
                acts=ACTING,
            ):
                done = await fill_on_link(link, asked.name, asked.field, tab)
        except BrowserError as exc:
            said = refusal(exc)
            return _error(f"fill_credential: {said.message}")
        finally:
            session.used = time.monotonic()
        text = f"filled the {done.field} of credential {done.name!r} into the focused field"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def _ask(
        self, ctx: Any, session: PlaywrightSession, args: dict[str, Any], browser: Browser
    ) -> types.CallToolResult:
        """``request_human``: the op's wait in the session's scope, on the
        record as this tool call (app/handoff.py)."""
        try:
            asked = RequestHuman.model_validate({k: v for k, v in args.items() if k != "scope"})
        except ValidationError as exc:
            return _error(f"request_human: {'; '.join(problems(exc))}")
        call = str(getattr(ctx, "request_id", None) or uuid.uuid4().hex)
        who = session.caller
        caller = Caller("mcp", who.who, who.role, ToolCall(HUMAN_TOOL.name, call, args))
        try:
            said = await request_human(browser, asked, caller)
        except (OpError, BrowserError) as exc:
            return _error(f"request_human: {failure(exc).message}")
        finally:
            session.used = time.monotonic()
        note = f": {said.note}" if said.note else ""
        text = f"{said.who} (a person) answered {said.word}{note}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    # -- ASGI ------------------------------------------------------------------------

    async def asgi(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        """The manager's ASGI app, ending a session's Playwright MCP on DELETE.

        ``GET`` (the stream of server messages a client may open after
        ``initialize``) is answered 405, as the transport allows a server
        that offers none: answers here are JSON, and the SDK's event stream
        through aiohttp-asgi spun the app's loop at full CPU for good once its
        client left (one agent stopped the app server for everyone)."""
        if scope.get("type") == "http" and scope.get("method") == "GET":
            message = (
                "this MCP server offers no event stream: POST requests get JSON answers "
                "(GET /mcp is not needed)"
            )
            await asgi_error(send, 405, message, ((b"allow", b"POST, DELETE"),))
            return
        if scope.get("type") != "http":
            await self.manager.handle_request(scope, receive, send)
            return
        asked = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", [])
        }
        who = self._caller(asked).who
        key = asked.get("mcp-session-id")
        if key is not None and self.owners.get(key, who) != who:
            # Another caller's session (its id learnt somehow): as if none, so
            # nobody drives or ends another's session (a DELETE ended it).
            await asgi_error(send, 404, "Session not found")
            return
        if key is None and scope.get("method") == "POST":
            mine = self._open_for(who)
            if mine >= self.settings.mcp_transports_per_caller:
                why = (
                    f"{who[:64]} has {mine} MCP sessions open, as many as one caller may "
                    "(AGENTENV_MCP_TRANSPORTS_PER_CALLER): end one (DELETE /mcp with its "
                    "Mcp-Session-Id), or wait: one that is never used expires in "
                    f"{self.settings.mcp_unused_s:.0f} s"
                )
                await asgi_error(send, 429, why)
                await self._on_the_record(who, why)
                return
        elif key is not None:
            self.unused.pop(key, None)
        if scope.get("method") == "POST" and self._key(asked, who) not in self.sessions:
            # A request that would start a Playwright MCP (now, or at its
            # session's first tool call): refused here, with an HTTP status,
            # when none may start.
            full = self.no_room(who)
            if full is not None:
                await asgi_error(send, full[1], full[0])
                await self._on_the_record(who, full[0])
                return

        async def claiming(message: MutableMapping[str, Any]) -> None:
            if key is None and message.get("type") == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":  # a new session: its caller's
                        if len(self.owners) > 10_000:
                            self.owners.pop(next(iter(self.owners)))
                        opened = value.decode("latin-1")
                        self.owners[opened] = who
                        self.unused[opened] = time.monotonic()
            await send(message)

        await self.manager.handle_request(scope, receive, claiming)
        if scope.get("method") == "DELETE" and key is not None:
            self.owners.pop(key, None)
            await self.end(key)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        reaper = asyncio.create_task(self.reap())
        try:
            async with self.manager.run():
                yield
        finally:
            reaper.cancel()
            for key in list(self.sessions):
                await self.end(key)


#: What a call of an opened scope's agent is told once its scope closed.
SCOPE_CLOSED = (
    "this scope was closed: its MCP sessions act nowhere (not in any other scope); "
    "open a new one with scopes/open and call with its token"
)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )
