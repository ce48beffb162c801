"""What the relay does with each message of one client connection. No I/O.

The socket loops (:mod:`agentenv.relay.proxy`) hand every text message to
:func:`receive` (client to Chromium) or :func:`from_upstream` (Chromium to
client) with the connection's :class:`ClientState`, and carry out the
:class:`Step` or :class:`Downstream` they get back: forward, answer, refuse,
rewrite, wait for a password check, report to the log. Nothing here touches
a socket or the log file, so every rule is unit-tested on recorded traffic of
real clients (``tests/unit/traffic/``).

Client to Chromium:

1. The message must be a JSON object with an integer ``id`` from 0 to
   2**31 - 1 (Chromium's own range; the relay's own commands on a client's
   upstream connection use negative ids, so they never clash), a ``method``
   string, ``params`` an object if given, ``sessionId`` a string if given,
   and an id not already in flight on that session. Otherwise: ``INVALID``,
   an error answer at once (the entry is written at once too).
2. ``AgentEnv.*``: ``CONTROL`` with its params parsed (control token only;
   from anyone else it is refused by the guard as ``not-allowed``).
3. A command on a session the relay closed (attached to a target that is not
   web content) is refused (``not-a-web-target``); after the guard (4), one
   on a session this connection never attached, or that has detached, is
   answered at once as Chromium would (``INVALID``, -32001). Chromium
   answers such a command without its ``sessionId``, so an answer could only
   be matched on its id, and a reused id made one command's answer end
   another's entry.
4. The guard (:mod:`agentenv.relay.guard`): ``BLOCK`` or ``REWRITE``.
5. ``Target.setAutoAttach`` is sent with a filter that leaves out the
   browser's own UI and other targets that are not web content.
6. Else ``FORWARD``, with ``typing`` set when the password check must run
   first.

Chromium to client: ``Target.attachedToTarget`` of a target that is not web
content is dropped and its session detached (``DETACH``); other attach and
detach events keep the session map, and a detach ends the commands still in
flight on that session (Chromium never answers them once its target is
gone); answers to the relay's own commands never reach the client
(``DROP``); the client's answers end their entries. An answer is handed to
the client before it is read (:func:`answer_first`) unless reading it changes
how the relay treats what comes next (a new session, a new tab, the
downloads folder): reading it is then off the agent's round trip.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from pydantic import ValidationError

from agentenv.access import Identity
from agentenv.protocol import MAX_DEPTH, problems, too_deep
from agentenv.protocol.control import CONTROL_METHODS, ControlParams
from agentenv.relay import guard, password, scopes
from agentenv.relay.scopes import Scope
from agentenv.relay.worlds import RelayWorlds

__all__ = [
    "BY_TAB",
    "MAX_ID",
    "READ_FIRST",
    "ClientState",
    "Downstream",
    "Kind",
    "Pending",
    "SessionInfo",
    "Step",
    "answer_first",
    "auto_attach_filter",
    "from_upstream",
    "receive",
]

#: The largest command id Chromium accepts (a 32-bit signed integer).
MAX_ID = 2**31 - 1

#: Target types left out of every auto-attach (the first matching filter
#: entry decides; the relay's check of each attach catches any other type).
_DENIED_TYPES = ("browser", "browser_ui", "other", "webview", "background_page", "app")


class Kind(enum.Enum):
    FORWARD = "forward"
    BLOCK = "block"
    REWRITE = "rewrite"
    CONTROL = "control"
    INVALID = "invalid"
    #: Answered by the relay, its effect kept to the sender's scope (the
    #: relay's own commands in :attr:`Step.upstream` carry it out).
    ANSWER = "answer"


@dataclass
class Pending:
    """A command sent to Chromium and not yet answered."""

    entry: int  # its log entry (negative: the computer's own, not on the record)
    method: str
    params: Any
    tab: str | None = None
    acting: bool = False


@dataclass
class SessionInfo:
    tab: str | None
    web: bool = True
    #: The session's target is its tab (not one of its frames or workers):
    #: a Page.navigate there navigates the tab.
    own: bool = True
    #: A service or shared worker's: it belongs to no tab and can act on all
    #: (clients.navigate()), so its acting commands count on every tab.
    everywhere: bool = False
    #: A page's or frame's (not a worker's): its certificate errors are its own.
    framed: bool = True


@dataclass
class ClientState:
    """One client connection: its number (from 1 per relay boot), who it is,
    an optional tag (``AgentEnv-Tag``), and the tab of a page endpoint."""

    number: int
    identity: Identity
    tag: str | None = None
    page: str | None = None
    sessions: dict[str, SessionInfo] = field(default_factory=dict)
    pending: dict[tuple[str | None, int], Pending] = field(default_factory=dict)
    #: Ids of the relay's own commands on this connection (negative).
    own: set[int] = field(default_factory=set)
    next_own: int = -1
    #: The client changed where downloads go: set it back when it leaves.
    downloads_changed: bool = False
    #: ``Security.setIgnoreCertificateErrors`` on the browser's own session of
    #: a computer of two scopes or more (Puppeteer's ``acceptInsecureCerts``):
    #: kept to this connection's pages and frames, each told on its session.
    ignore_certificates: bool = False
    #: Sessions the client set certificate errors on itself: the relay's
    #: browser-level setting leaves them as the client set them.
    certificates_own: set[str] = field(default_factory=set)
    #: The tab a target belongs to (an iframe's page), as the relay's watcher
    #: knows; a session attached straight to an iframe acts on that tab.
    owner: Callable[[str], str] = field(default=lambda target: target, repr=False)
    #: A target's (type, url), as the relay's watcher knows.
    kinds: Callable[[str], tuple[str, str] | None] = field(default=lambda target: None, repr=False)
    #: A page endpoint's target is its tab (not a frame of one).
    page_own: bool = True
    #: The relay's own worlds (the watcher's): never listed, never named.
    worlds: RelayWorlds = field(default_factory=RelayWorlds, repr=False)
    #: Sessions a pause in a relay world was undone on (its resume is due).
    resumed: set[str | None] = field(default_factory=set)
    #: The scope it acts in (None: it sees every scope, or there is one).
    scope: Scope | None = None
    #: A target's browser context, as the relay's watcher knows.
    context_of: Callable[[str], str | None] = field(default=lambda target: None, repr=False)
    #: The page of a tab-type target, when the watcher found it.
    tab_page: Callable[[str], str | None] = field(default=lambda target: None, repr=False)
    #: Targets this client was shown (their destruction is its news too).
    visible: set[str] = field(default_factory=set)
    #: Downloads this client was told of (their progress is its news too).
    downloads: set[str] = field(default_factory=set)
    #: Windows of its scope's tabs it asked for (Browser.getWindowForTarget).
    windows: set[int] = field(default_factory=set)
    #: Frames it heard load on its own sessions (an in-process iframe has no
    #: target of its own): frame -> its tab, the oldest forgotten past
    #: :data:`MAX_FRAMES`. A download from one is its news too.
    frames: dict[str, str] = field(default_factory=dict)

    def tab_of(self, session: str | None, method: str, params: dict[str, Any] | None) -> str | None:
        if params is not None and method.startswith("Target."):
            target = params.get("targetId")
            if isinstance(target, str):
                return target
        if session is not None:
            info = self.sessions.get(session)
            return info.tab if info is not None else None
        return self.page

    def own_tab(self, session: str | None) -> str | None:
        """The tab whose own target ``session`` is on (its page endpoint's, for
        no session): the id space of the relay's worlds in that tab."""
        if session is None:
            return self.page if self.page_own else None
        info = self.sessions.get(session)
        return info.tab if info is not None and info.own else None

    def own_id(self) -> int:
        call = self.next_own
        self.next_own -= 1
        self.own.add(call)
        return call


@dataclass(slots=True)
class Step:
    """What to do with one client message."""

    kind: Kind
    call: int | None = None
    session: str | None = None
    method: str = "(invalid)"
    params: dict[str, Any] | None = None
    tab: str | None = None
    verdict: guard.Verdict | None = None
    #: INVALID and refused CONTROL: the CDP error code and text.
    code: int = 0
    error: str = ""
    #: FORWARD: the password check must clear first; where it looks.
    typing: bool = False
    point: tuple[float, float] | None = None
    #: FORWARD and REWRITE: the text to send (the client's own bytes when unchanged).
    data: str = ""
    #: CONTROL: the params, parsed.
    control: ControlParams | None = None
    #: A Page.navigate of a frame, not of its tab: it claims no tab navigation.
    frame_only: bool = False
    #: Sent on a service or shared worker's session: it acts on every tab.
    everywhere: bool = False
    #: The params as sent in the sender's scope (its context for the default).
    scoped: dict[str, Any] | None = None
    #: It names an execution context while the relay is making its world in
    #: the tab (whose number is not known yet): wait for it, then check again
    #: (:func:`relay_world_verdict`).
    hold: bool = False
    #: ANSWER: the relay's own commands to send to Chromium first (negative ids).
    upstream: list[str] = field(default_factory=list)

    def error_answer(self) -> dict[str, Any]:
        """The CDP error answer for an INVALID, BLOCK or refused CONTROL step."""
        code, text = self.code, self.error
        if self.verdict is not None and self.kind is Kind.BLOCK:
            code, text = self.verdict.code, self.verdict.message
        message: dict[str, Any] = {"error": {"code": code, "message": text}}
        if self.call is not None:
            message = {"id": self.call, **message}
        if self.session is not None:
            message["sessionId"] = self.session
        return message


def _invalid(code: int, text: str, message: object) -> Step:
    call = message.get("id") if isinstance(message, dict) else None
    session = message.get("sessionId") if isinstance(message, dict) else None
    method = message.get("method") if isinstance(message, dict) else None
    return Step(
        Kind.INVALID,
        call=call if _valid_id(call) else None,
        session=session if isinstance(session, str) else None,
        method=method[:200] if isinstance(method, str) and method else "(invalid)",
        code=code,
        error=text,
    )


def _valid_id(call: object) -> bool:
    return isinstance(call, int) and not isinstance(call, bool) and 0 <= call <= MAX_ID


def auto_attach_filter(params: dict[str, Any]) -> dict[str, Any]:
    """``Target.setAutoAttach`` params with the relay's exclusions first, and
    flattened: unflattened sessions' traffic would come wrapped in
    ``Target.receivedMessageFromTarget``, past the record and the rules."""
    theirs = params.get("filter")
    if not isinstance(theirs, list):
        theirs = [{"type": "browser", "exclude": True}, {"type": "tab", "exclude": True}, {}]
    ours = [{"type": t, "exclude": True} for t in _DENIED_TYPES]
    return {**params, "filter": ours + theirs, "flatten": True}


def receive(
    state: ClientState, data: str, downloads: str, targets: guard.Targets | None = None
) -> Step:
    """What to do with one text message from the client."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _invalid(-32700, "malformed JSON: send one CDP command object per message", None)
    if not isinstance(message, dict):
        return _invalid(-32600, "a CDP command is a JSON object with an id and a method", message)
    call = message.get("id")
    method = message.get("method")
    if not _valid_id(call):
        return _invalid(-32600, f"a CDP command needs an integer id from 0 to {MAX_ID}", message)
    if not isinstance(method, str) or not method:
        return _invalid(-32600, "a CDP command needs a method name", message)
    session = message.get("sessionId")
    if session is not None and not isinstance(session, str):
        return _invalid(-32600, "sessionId must be a string", message)
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return _invalid(-32602, "params must be a JSON object", message)
    if params and (data.count("{") + data.count("[")) > MAX_DEPTH and too_deep(params):
        return _invalid(-32602, f"params nest deeper than {MAX_DEPTH} levels", message)
    assert isinstance(call, int)
    if (session, call) in state.pending:
        return _invalid(
            -32600,
            f"id {call} is already in flight on this connection and session; use a new id",
            message,
        )
    tab = state.tab_of(session, method, params)
    step = Step(Kind.FORWARD, call, session, method, params, tab, data=data)

    if method.startswith("AgentEnv."):
        return _control(state, step)
    info = state.sessions.get(session) if session is not None else None
    if info is not None and not info.web:
        step.kind, step.verdict = Kind.BLOCK, guard.web_target_verdict()
        return step
    # The browser's own session: what is sent there reaches every scope's
    # pages. With one scope there is no other to reach (a client may do what
    # it could on its own Chromium); with two or more it is browser-wide.
    browser_level = session is None and state.page is None and state.scope is not None
    if method == IGNORE_CERTIFICATES:
        if browser_level:
            return _ignore_certificates(state, step, message)
        if session is not None and state.scope is not None:
            state.certificates_own.add(session)
    by_tab = _tab_target(state, method, params)
    if by_tab is not None:
        params = by_tab.params
    verdict = guard.check(method, params, downloads, targets, browser_level) or by_tab
    if verdict is None:
        verdict = _relay_world(state, session, method, params, step)
    rewritten = verdict is not None and verdict.action == "rewritten"
    if state.scope is not None and (verdict is None or rewritten):
        sent = verdict.params if verdict is not None and rewritten else params
        refused = _in_scope(state.scope, state, browser_level, method, sent, step)
        verdict = refused or verdict
    if verdict is not None and not (verdict.action == "rewritten" and verdict.params is not None):
        step.kind, step.verdict = Kind.BLOCK, verdict
        return step
    if session is not None and info is None:
        return _invalid(
            -32001,
            "Session with given id not found: this connection has no such session "
            "(attach with Target.attachToTarget, flatten: true, and use its sessionId)",
            message,
        )
    if verdict is not None:
        assert verdict.params is not None
        sent = step.scoped if step.scoped is not None else verdict.params
        step.kind, step.verdict, step.params = Kind.REWRITE, verdict, sent
        step.data = _with_params(message, sent)
        return step
    if step.scoped is not None:  # the scope's context for the default one
        step.params = step.scoped
        step.data = _with_params(message, step.scoped)
    step.everywhere = info is not None and info.everywhere
    if method == "Page.navigate":
        own = info.own if info is not None else state.page_own
        frame = params.get("frameId") if params else None
        step.frame_only = not own or (isinstance(frame, str) and frame != step.tab)
    if method == "Target.setAutoAttach" and params is not None and params.get("autoAttach"):
        step.data = _with_params(message, auto_attach_filter(params))
    elif password.is_typing(method, params):
        step.typing = True
        step.point = password.drop_point(method, params)
    return step


#: Chromium's browser-wide switch for certificate errors (kept to a scope).
IGNORE_CERTIFICATES = "Security.setIgnoreCertificateErrors"


def _ignore_certificates(state: ClientState, step: Step, message: dict[str, Any]) -> Step:
    """``Security.setIgnoreCertificateErrors`` on the browser's own session,
    with two scopes or more: on Chromium it is the whole browser's, and
    Puppeteer's ``acceptInsecureCerts`` sends it at connect. The relay
    answers it and sends it on each page and frame session this connection
    has, and on each it attaches later before the client hears of it (an
    auto-attached target waiting for its debugger runs only after), so the
    client's pages ignore certificate errors and no other scope's do."""
    params = step.params or {}
    ignore = params.get("ignore")
    if set(params) != {"ignore"} or not isinstance(ignore, bool):
        return _invalid(
            -32602, f"{IGNORE_CERTIFICATES} takes one parameter, ignore (a boolean)", message
        )
    state.ignore_certificates = ignore
    step.kind = Kind.ANSWER
    step.upstream = [
        _certificates_command(state, session, ignore)
        for session, info in state.sessions.items()
        if info.web and info.framed and session not in state.certificates_own
    ]
    return step


def _certificates_command(state: ClientState, session: str, ignore: bool) -> str:
    """The relay's own ``Security.setIgnoreCertificateErrors`` on ``session``."""
    command = {
        "id": state.own_id(),
        "method": IGNORE_CERTIFICATES,
        "params": {"ignore": ignore},
        "sessionId": session,
    }
    return orjson.dumps(command).decode()


def _tab_target(
    state: ClientState, method: str, params: dict[str, Any] | None
) -> guard.Verdict | None:
    """``Target.activateTarget``/``closeTarget`` by a tab-type target's id
    (chromedriver's window handles): sent for the tab's page, so the log and
    the tabs name the page."""
    if method not in BY_TAB or not params:
        return None
    target = params.get("targetId")
    page = state.tab_page(target) if isinstance(target, str) else None
    if page is None:
        return None
    return guard.tab_target_verdict(params, page)


#: Commands that take a tab-type target's id for its page.
BY_TAB = frozenset({"Target.activateTarget", "Target.closeTarget"})


def _relay_world(
    state: ClientState,
    session: str | None,
    method: str,
    params: dict[str, Any] | None,
    step: Step,
) -> guard.Verdict | None:
    """The ``relay-world`` rule (:mod:`agentenv.relay.worlds`)."""
    worlds = state.worlds
    tab = state.own_tab(session)
    if not worlds.any_in(tab):
        return None
    if method == "Debugger.setReturnValue" and session in state.resumed:
        return relay_world_verdict("the pause")
    if method in _HEAP_OBJECTS:
        # A heap object id names any object of the renderer, the relay's
        # world's included (its Function constructor runs code there).
        return relay_world_verdict(f"{method} (a heap object may be the computer's own)")
    named = worlds.named_in(tab, params)
    if named is not None:
        return relay_world_verdict(named)
    if tab in worlds.making and worlds.names_a_context(params):
        step.hold = True
    return None


def _in_scope(
    scope: Scope,
    state: ClientState,
    browser_level: bool,
    method: str,
    params: dict[str, Any] | None,
    step: Step,
) -> guard.Verdict | None:
    """The ``scope`` rule (:mod:`agentenv.relay.scopes`): what names another
    scope is answered as Chromium answers an id it does not know; what means
    the default context means the scope's."""
    if method in scopes.BY_TARGET:
        target = params.get("targetId") if params else None
        if isinstance(target, str):
            # Fail closed: the scope's by what the watcher knows, or shown to
            # this client (a tab it just opened, before the watcher hears of it).
            context = state.context_of(target)
            mine = scope.holds(context) if context is not None else target in state.visible
            if not mine:
                return _scope_verdict("No target with given id found", -32602)
        return None
    if method in scopes.BY_CONTEXT:
        context = params.get("browserContextId") if params else None
        if context is None:
            step.scoped = {**(params or {}), "browserContextId": scope.context}
        elif context is not None and not scope.holds(context):
            return _scope_verdict("Failed to find browser context for id " + str(context)[:64])
        return None
    if method in scopes.BY_WINDOW:
        # Window ids are small numbers: only one of its own tabs' windows.
        window = params.get("windowId") if params else None
        if window not in state.windows:
            return _scope_verdict("Browser window not found", -32602)
        return None
    if method == "Target.disposeBrowserContext":
        context = params.get("browserContextId") if params else None
        if isinstance(context, str) and context in scope.made:
            return None
        if context == scope.context:
            return _scope_verdict(
                "the default browser context cannot be disposed; close its tabs instead"
            )
        return _scope_verdict("Failed to find context with id " + str(context)[:64])
    if browser_level and method in scopes.NO_BROWSER_LEVEL:
        return guard.Verdict(
            "browser-wide",
            f"blocked by agentenv guard browser-wide: {method} on the browser's own session "
            "acts on no agent's browser; send it on a page's session, or use Storage.getCookies, "
            "setCookies or clearCookies (kept to your browser)",
        )
    return None


def _scope_verdict(text: str, code: int = -32000) -> guard.Verdict:
    return guard.Verdict("scope", text, code=code)


#: Commands that turn a heap snapshot's object id into an object of any world.
_HEAP_OBJECTS = frozenset(
    {"HeapProfiler.addInspectedHeapObject", "HeapProfiler.getObjectByHeapObjectId"}
)


def relay_world_verdict(named: str) -> guard.Verdict:
    return guard.Verdict(
        "relay-world",
        f"blocked by agentenv guard relay-world: {named} names the computer's own world in "
        "this tab (where it checks for password fields); name your own contexts and objects, "
        "as Runtime.executionContextCreated lists them",
    )


def _with_params(message: dict[str, Any], params: dict[str, Any]) -> str:
    return orjson.dumps({**message, "params": params}).decode()


def _control(state: ClientState, step: Step) -> Step:
    if not state.identity.control:
        step.kind = Kind.BLOCK
        step.verdict = guard.Verdict(
            "not-allowed",
            "blocked by agentenv guard not-allowed: AgentEnv.* commands need the control "
            "token (AGENTENV_CONTROL_TOKEN); they are the computer's own reports",
        )
        return step
    model = CONTROL_METHODS.get(step.method)
    step.kind = Kind.CONTROL
    if model is None:
        step.code = -32601
        step.error = f"unknown {step.method}; the relay knows {', '.join(CONTROL_METHODS)}"
        return step
    try:
        step.control = model.model_validate(step.params or {})
    except ValidationError as exc:
        step.code = -32602
        step.error = f"{step.method}: {'; '.join(problems(exc, 'params'))}"
    return step


# -- Chromium to client ----------------------------------------------------------------


class Down(enum.Enum):
    PASS = "pass"  # send to the client as it came
    DROP = "drop"  # an answer to the relay's own command: never the client's
    DETACH = "detach"  # drop it and detach the session it names
    RESUME = "resume"  # drop it and resume the session (paused in a relay world)


@dataclass(slots=True)
class Downstream:
    kind: Down
    #: An answer to a client's command: the command, and how it ended.
    pending: Pending | None = None
    ok: bool = True
    error: str | None = None
    #: ``Target.createTarget``: the tab it opened.
    opened: str | None = None
    #: DETACH: the session to detach, and the session it was attached on.
    session: str | None = None
    parent: str | None = None
    #: Commands on a session that just detached: Chromium will not answer them.
    orphans: list[Pending] = field(default_factory=list)
    #: A tab's main frame started (True) or stopped (False) loading, as a
    #: client with the Page domain on hears it (recordings wait for it).
    loading: tuple[str, bool] | None = None
    #: PASS: what the client gets instead (an answer kept to its scope).
    data: str | None = None
    #: DETACH: the target waits for a debugger: let it run first.
    resume: bool = False
    #: ``Target.createBrowserContext`` by a scoped client: the context it made
    #: (its downloads go to the scope's folder).
    made_context: str | None = None
    #: PASS: the relay's own commands to send to Chromium before the client
    #: has this message (a new session's certificate setting).
    upstream: list[str] = field(default_factory=list)


_PASS = Downstream(Down.PASS)


#: Commands whose answer the relay reads for more than the log (a session
#: the client's next command may use, a tab it opened, the downloads folder
#: changed): :func:`from_upstream` reads these, and only these, that way, and
#: their answers are read before the client has them.
READ_FIRST = frozenset(
    {
        "Target.attachToTarget",
        "Target.createTarget",
        "Browser.setDownloadBehavior",
        "Page.setDownloadBehavior",
        # Kept to the sender's scope (agentenv.relay.scopes).
        "Browser.getWindowForTarget",
        "Target.getTargets",
        "Target.getBrowserContexts",
        "Target.createBrowserContext",
    }
)


def answer_first(state: ClientState, data: str) -> bool:
    """Whether this message from Chromium may go to the client before
    :func:`from_upstream` reads it: an answer to one of the client's commands
    (not the relay's own, whose ids are negative) while none in flight is in
    :data:`READ_FIRST`. Reading it then ends its entry and takes its command
    out of ``state.pending``, nothing more; the socket loop reads it before it
    reads anything else, so no later message can find it still pending.
    Scans what is in flight: a handful of commands for every client seen."""
    return (
        data.startswith('{"id":')
        and not data.startswith('{"id":-')
        and not any(p.method in READ_FIRST for p in state.pending.values())
    )


def from_upstream(state: ClientState, data: str) -> Downstream:
    """What to do with one text message from Chromium to this client.

    Events are told apart by how Chromium writes them (``{"method":"…"`` first,
    no spaces), so most are never parsed. A message in any other shape (keys in
    another order, spaces) is parsed and written that way first, so the rules
    read it as they read Chromium's own: none slips past them by its shape.
    What is not a JSON object reaches no client."""
    if not data.startswith(('{"method":"', '{"id":')):
        canonical = _canonical(data)
        if canonical is None:
            return Downstream(Down.DROP)
        if canonical == data:
            return _from_chromium(state, data)
        down = _from_chromium(state, canonical)
        return replace(down, data=canonical) if down.kind is Down.PASS and not down.data else down
    return _from_chromium(state, data)


def _canonical(data: str) -> str | None:
    """``data`` written as Chromium writes it (``method``, else ``id``, first;
    no spaces); None when it is not a JSON object."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict):
        return None
    for first in ("method", "id"):
        if first in message:
            rest = {k: v for k, v in message.items() if k != first}
            return orjson.dumps({first: message[first], **rest}).decode()
    return data  # neither an event nor an answer (an error with no id): as it came


def _from_chromium(state: ClientState, data: str) -> Downstream:
    if data.startswith('{"method":'):
        if data.startswith('{"method":"Target.attachedToTarget"') or data.startswith(
            '{"method":"Target.detachedFromTarget"'
        ):
            return _session_event(state, orjson.loads(data))
        if data.startswith(_LOADING):
            return _loading_event(state, data)
        if state.scope is not None and data.startswith(_SCOPED_EVENTS):
            return _scoped_event(state, state.scope, data)
        if (data.startswith(_WORLD_EVENTS) and state.worlds.contexts) or data.startswith(_CREATED):
            return _world_event(state, data)
        return _PASS
    if not state.pending and not state.own:
        return _PASS  # nothing awaits an answer: do not parse it (screenshots are MBs)
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _PASS
    call = message.get("id")
    if isinstance(call, int) and call < 0:
        state.own.discard(call)
        return Downstream(Down.DROP)
    session = message.get("sessionId")
    pending = state.pending.pop((session if isinstance(session, str) else None, call), None)
    if pending is None:
        # An answer without the sessionId of a command sent with one: Chromium
        # had no such session (it detached while the command was on its way;
        # its entry ended with the detach). Matched on the id alone it would
        # end another session's command of the same id: it goes as it came.
        return _PASS
    error = message.get("error")
    ok = error is None
    result = message.get("result") if ok else None
    out = Downstream(Down.PASS, pending, ok)
    if not ok:
        out.error = str(error.get("message") if isinstance(error, dict) else error)
    elif isinstance(result, dict) and pending.method in READ_FIRST:
        _read_result(state, pending, message, result, out)
    return out


def _read_result(
    state: ClientState,
    pending: Pending,
    message: dict[str, Any],
    result: dict[str, Any],
    out: Downstream,
) -> None:
    """What an answer to a :data:`READ_FIRST` command changes."""
    scope = state.scope
    if pending.method == "Target.createTarget":
        opened = result.get("targetId")
        out.opened = opened if isinstance(opened, str) else None
        if out.opened is not None:
            state.visible.add(out.opened)
    elif pending.method == "Target.getTargets":
        if scope is not None:
            kept = scopes.targets_answer(scope, result)
            state.visible.update(
                str(i.get("targetId")) for i in kept["targetInfos"] if isinstance(i, dict)
            )
            out.data = _answer(message, kept)
    elif pending.method == "Browser.getWindowForTarget":
        window = result.get("windowId")
        if isinstance(window, int):
            state.windows.add(window)
    elif pending.method == "Target.getBrowserContexts":
        if scope is not None:
            out.data = _answer(message, scopes.contexts_answer(scope, result))
    elif pending.method == "Target.createBrowserContext":
        made = result.get("browserContextId")
        if scope is not None and isinstance(made, str):
            scope.made.add(made)
            out.made_context = made
    elif pending.method == "Target.attachToTarget":
        new = result.get("sessionId")
        target = pending.params.get("targetId") if isinstance(pending.params, dict) else None
        if isinstance(new, str) and isinstance(target, str) and new not in state.sessions:
            known = state.kinds(target)
            kind = known[0] if known is not None else "page"
            state.sessions[new] = _session_info(state.owner(target), target, kind)
    else:  # Browser. or Page.setDownloadBehavior
        state.downloads_changed = True


_LOADING = '{"method":"Page.frameSt'  # frameStartedLoading, frameStoppedLoading
_SCOPED_EVENTS = (
    '{"method":"Target.targetCreated"',
    '{"method":"Target.targetInfoChanged"',
    '{"method":"Target.targetDestroyed"',
    '{"method":"Target.targetCrashed"',
    '{"method":"Browser.download',
)


def _answer(answer: dict[str, Any], result: dict[str, Any]) -> str:
    """Chromium's answer to a client's command, with ``result`` in place of its own."""
    return orjson.dumps({**answer, "result": result}).decode()


def _event(data: str) -> tuple[str, dict[str, Any], str | None] | None:
    """An event's method, params and session, or None if it is not one."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    method, params, session = message.get("method"), message.get("params"), message.get("sessionId")
    if not isinstance(method, str) or not isinstance(params, dict):
        return None
    return method, params, session if isinstance(session, str) else None


def _scoped_event(state: ClientState, scope: Scope, data: str) -> Downstream:
    """Target and download events, kept to the client's scope."""
    found = _event(data)
    if found is None:
        return _PASS
    method, params, _ = found
    if method in ("Target.targetCreated", "Target.targetInfoChanged"):
        info = params.get("targetInfo")
        target = info.get("targetId") if isinstance(info, dict) else None
        if not isinstance(info, dict) or not scope.holds(info.get("browserContextId")):
            return Downstream(Down.DROP)
        if isinstance(target, str):
            state.visible.add(target)
        return _PASS
    if method in ("Target.targetDestroyed", "Target.targetCrashed"):
        target = params.get("targetId")
        if target not in state.visible:
            return Downstream(Down.DROP)
        if method == "Target.targetDestroyed":
            state.visible.discard(target)
        return _PASS
    guid = params.get("guid")
    if method == "Browser.downloadWillBegin":
        frame = params.get("frameId")
        if isinstance(frame, str):
            tab = state.frames.get(frame) or state.owner(frame)
            context = state.context_of(tab)
        else:
            context = None
        if not scope.holds(context) or not isinstance(guid, str):
            return Downstream(Down.DROP)
        state.downloads.add(guid)
        return _PASS
    if method == "Browser.downloadProgress":
        if guid not in state.downloads:
            return Downstream(Down.DROP)
        if params.get("state") in ("completed", "canceled"):
            state.downloads.discard(guid)
        return _PASS
    return _PASS


_CREATED = '{"method":"Runtime.executionContextCreated"'
_WORLD_EVENTS = (
    '{"method":"Runtime.executionContextDestroyed"',
    '{"method":"Debugger.scriptParsed"',
    '{"method":"Debugger.scriptFailedToParse"',
    '{"method":"Debugger.paused"',
    '{"method":"Debugger.resumed"',
)


def _world_event(state: ClientState, data: str) -> Downstream:
    """An event that may be about a relay world: dropped if it is, and a
    pause in one undone (:mod:`agentenv.relay.worlds`)."""
    found = _event(data)
    if found is None:
        return _PASS
    method, params, session = found
    tab = state.own_tab(session)
    if method == "Debugger.paused":
        if state.worlds.paused_in(tab, params):
            state.resumed.add(session)
            return Downstream(Down.RESUME, session=session)
        return _PASS
    if method == "Debugger.resumed":
        if session in state.resumed:
            state.resumed.discard(session)
            return Downstream(Down.DROP)
        return _PASS
    return Downstream(Down.DROP) if state.worlds.hides(tab, method, params) else _PASS


def _loading_event(state: ClientState, data: str) -> Downstream:
    """A main frame's loading starting or stopping (its frame id is its target's)."""
    started = data.startswith('{"method":"Page.frameStartedLoading"')
    if not started and not data.startswith('{"method":"Page.frameStoppedLoading"'):
        return _PASS
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _PASS
    session = message.get("sessionId")
    info = state.sessions.get(session) if isinstance(session, str) else None
    tab = info.tab if info is not None else (state.page if session is None else None)
    frame = (message.get("params") or {}).get("frameId")
    if tab is None:
        return _PASS
    if frame != tab:
        if started and isinstance(frame, str) and state.scope is not None:
            state.frames[frame] = tab
            if len(state.frames) > MAX_FRAMES:
                del state.frames[next(iter(state.frames))]
        return _PASS
    return Downstream(Down.PASS, loading=(tab, started))


#: Frames a connection keeps for its downloads' news (:attr:`ClientState.frames`).
MAX_FRAMES = 10_000


def _session_event(state: ClientState, message: dict[str, Any]) -> Downstream:
    params = message.get("params") or {}
    session = params.get("sessionId")
    if not isinstance(session, str):
        return _PASS
    if message.get("method") == "Target.detachedFromTarget":
        info = state.sessions.pop(session, None)
        state.certificates_own.discard(session)
        if info is not None and not info.web:
            return Downstream(Down.DROP)  # the relay's own detach: the client never saw it
        orphans = [key for key in state.pending if key[0] == session]
        if not orphans:
            return _PASS
        return Downstream(Down.PASS, orphans=[state.pending.pop(key) for key in orphans])
    target_info = params.get("targetInfo") or {}
    target = target_info.get("targetId")
    kind, url = target_info.get("type"), target_info.get("url")
    parent = message.get("sessionId")
    elsewhere = state.scope is not None and not state.scope.holds(
        target_info.get("browserContextId")
    )
    if elsewhere or not guard.web_target(
        (kind, url) if isinstance(kind, str) and isinstance(url, str) else None
    ):
        # Not web content, or another scope's: the client never sees it.
        state.sessions[session] = SessionInfo(target if isinstance(target, str) else None, False)
        return Downstream(
            Down.DETACH,
            session=session,
            parent=parent if isinstance(parent, str) else None,
            resume=params.get("waitingForDebugger") is True,
        )
    if isinstance(target, str):
        state.visible.add(target)
    if kind in ("page", "tab") or not isinstance(parent, str):
        tab = state.owner(target) if isinstance(target, str) else target
    else:  # a frame or worker inside a page: its tab is the page's
        owner = state.sessions.get(parent)
        tab = owner.tab if owner is not None else target
    info = _session_info(
        tab if isinstance(tab, str) else None, target, kind if isinstance(kind, str) else ""
    )
    state.sessions[session] = info
    if state.ignore_certificates and info.framed:
        return Downstream(Down.PASS, upstream=[_certificates_command(state, session, True)])
    return _PASS


def _session_info(tab: str | None, target: object, kind: str) -> SessionInfo:
    if kind in ("service_worker", "shared_worker"):
        return SessionInfo(tab, own=False, everywhere=True, framed=False)
    framed = kind in ("page", "iframe")
    return SessionInfo(tab, own=tab is not None and tab == target, framed=framed)
