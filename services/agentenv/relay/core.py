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
   from anyone else it is refused by the guard as ``not-allowed``, but
   ``AgentEnv.fillCredential`` on a tab's session: the vault's fill of that
   tab, :mod:`agentenv.relay.filling`).
3. A command on a session the relay closed (attached to a target that is not
   web content) is refused (``not-a-web-target``); after the guard (4), one
   on a session this connection never attached, or that has detached, is
   answered at once as Chromium would (``INVALID``, -32001). Chromium
   answers such a command without its ``sessionId``, so an answer could only
   be matched on its id, and a reused id made one command's answer end
   another's entry.
4. The guard (:mod:`agentenv.relay.guard`): ``BLOCK`` or ``REWRITE``. A
   session on the browser target (``Target.attachToBrowserTarget``, opened
   only where the browser's own session is) is read as that session by
   every rule (:meth:`ClientState.at_browser`): same table, same scope.
5. ``Target.setAutoAttach`` is sent with a filter that leaves out the
   browser's own UI and other targets that are not web content.
6. Else ``FORWARD``, with ``typing`` set when the password check must run
   first.

Chromium to client is :mod:`agentenv.relay.downstream`; the connection's
state, which both halves keep, is :mod:`agentenv.relay.client_state`. This
module names all three parts' public names, so callers read one core.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from agentenv.protocol import MAX_DEPTH, problems, too_deep
from agentenv.protocol.control import (
    AGENT_METHODS,
    AGENT_MODELS,
    CONTROL_METHODS,
    ControlParams,
    FillCredential,
)
from agentenv.relay import guard, ids, password, scope_rule, traces, world_rule
from agentenv.relay.client_state import (
    BROWSER_TARGET,
    IGNORE_CERTIFICATES,
    ClientState,
    Pending,
    SessionInfo,
    certificates_command,
)
from agentenv.relay.downstream import (
    MAX_FRAMES,
    READ_FIRST,
    Down,
    Downstream,
    answer_first,
    from_upstream,
)
from agentenv.relay.effects import Begin

__all__ = [
    "BROWSER_TARGET",
    "BY_TAB",
    "MAX_FRAMES",
    "MAX_ID",
    "READ_FIRST",
    "ClientState",
    "Down",
    "Downstream",
    "Kind",
    "Pending",
    "SessionInfo",
    "Step",
    "answer_first",
    "auto_attach_filter",
    "begin_of",
    "from_upstream",
    "receive",
    "tab_page_wanted",
    "world_made",
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


class Step(NamedTuple):
    """What to do with one client message: built once, never changed (a
    rule that reads it again makes a new one, ``_replace``)."""

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
    #: (:func:`~agentenv.relay.world_rule.relay_world_verdict`).
    hold: bool = False
    #: ANSWER: the relay's own commands to send to Chromium first (negative ids).
    upstream: tuple[str, ...] = ()
    #: ANSWER: the result the client gets (``{}`` when None).
    result: dict[str, Any] | None = None

    @property
    def sent(self) -> bool:
        """Whether the client's command itself goes to Chromium (forwarded or
        rewritten): a refused, invalid or relay-answered one causes nothing there."""
        return self.kind is Kind.FORWARD or self.kind is Kind.REWRITE

    def failed(self, code: int, text: str) -> Step:
        """This command failed where the relay ran it (``AgentEnv.*``): its
        CDP error is ``code``, ``text`` (:meth:`error_answer`)."""
        return self._replace(code=code, error=text)

    def error_answer(self) -> dict[str, Any]:
        """The CDP error answer for an INVALID, BLOCK or refused CONTROL step."""
        code, text = self.code, self.error
        if self.verdict is not None and self.kind is Kind.BLOCK:
            code, text = self.verdict.code, self.verdict.told or self.verdict.message
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
    if params:
        ids.canonical(params)  # numbers as Chromium will read them (in place)
    tab = state.tab_of(session, method, params)
    # What is sent is what the rules read, written by the relay: never the
    # client's bytes (keys given twice, odd escapes or number spellings).
    data = ids.encode(call, method, params, session)
    given = params  # the Step's params, unless a rule sends others

    if method.startswith("AgentEnv."):
        return _control(state, Step(Kind.FORWARD, call, session, method, params, tab, data=data))
    wrong = ids.problem(method, params)
    if wrong is not None:
        malformed = _malformed_id(*wrong)
        return Step(Kind.BLOCK, call, session, method, params, tab, malformed, data=data)
    info = state.sessions.get(session) if session is not None else None
    if info is not None and not info.web:
        not_web = guard.web_target_verdict()
        return Step(Kind.BLOCK, call, session, method, params, tab, not_web, data=data)
    # The browser's own session (or one on the browser target, which has its
    # powers): what is sent there reaches every scope's pages. With one scope
    # there is no other to reach (a client may do what it could on its own
    # Chromium); with two or more it is browser-wide.
    at_browser = state.at_browser(session)
    browser_level = at_browser and state.scope is not None
    if method == IGNORE_CERTIFICATES and browser_level:
        step = Step(Kind.FORWARD, call, session, method, params, tab, data=data)
        return _ignore_certificates(state, step, message)
    by_tab = _tab_target(state, method, params)
    if by_tab is not None:
        params = by_tab.params
    verdict = guard.check(method, params, downloads, targets, browser_level) or by_tab
    if verdict is None and method == BROWSER_TARGET and not at_browser:
        verdict = _browser_target_verdict()
    hold = False
    if verdict is None:
        verdict, hold = world_rule.relay_world(state, session, method, params)
    rewritten = verdict is not None and verdict.action == "rewritten"
    scoped: dict[str, Any] | None = None
    if state.scope is not None and (verdict is None or rewritten):
        sent = verdict.params if verdict is not None and rewritten else params
        found = scope_rule.in_scope(state.scope, state, browser_level, method, sent)
        if isinstance(found, dict):
            scoped = found  # the scope's context for the default one
        else:
            verdict = found or verdict
    elif state.scope is None and (verdict is None or rewritten):
        sent = verdict.params if verdict is not None and rewritten else params
        verdict = scope_rule.warm(state, method, sent) or verdict
    if verdict is not None and not (verdict.action == "rewritten" and verdict.params is not None):
        if state.scope is not None and not scope_rule.shown(state.scope, state, tab):
            # A refusal naming another scope's tab is logged with no tab: its
            # line would carry that tab's URL to this scope's log readers.
            tab = None
        return Step(
            Kind.BLOCK,
            call,
            session,
            method,
            given,
            tab,
            verdict,
            data=data,
            scoped=scoped,
            hold=hold,
        )
    if session is not None and info is None:
        return _invalid(
            -32001,
            "Session with given id not found: this connection has no such session "
            "(attach with Target.attachToTarget, flatten: true, and use its sessionId)",
            message,
        )
    if state.scope is not None and method in traces.METHODS:
        done = traces.command(
            state.traces,
            state.number,
            state.identity.user,
            state.scope.name,
            session,
            tab,
            call,
            method,
            given,
        )
        if done is not None:
            if done.error is not None:
                return _invalid(*done.error, message)
            # As the Step it would have been, with the trace rule's word.
            base = Step(
                Kind.FORWARD, call, session, method, given, tab, data=data, scoped=scoped, hold=hold
            )
            if done.verdict is not None:
                return base._replace(kind=Kind.BLOCK, verdict=done.verdict)
            if done.result is not None:
                return base._replace(kind=Kind.ANSWER, result=done.result)
            if done.params is not None:  # the trace's params kept to its tab
                given = done.params
                data = ids.encode(call, method, given, session)
    if (
        method in _CERTIFICATE_SETTINGS
        and session is not None
        and info is not None
        and info.web
        and not info.browser
    ):
        # One of its own live sessions (so bounded by them): left as it set it.
        state.certificates_own.add(session)
        state.certificates_told.discard(session)
    if verdict is not None:
        assert verdict.params is not None
        sent = scoped if scoped is not None else verdict.params
        data = ids.encode(call, method, sent, session)
        return Step(
            Kind.REWRITE,
            call,
            session,
            method,
            sent,
            tab,
            verdict,
            data=data,
            scoped=scoped,
            hold=hold,
        )
    if scoped is not None:  # the scope's context for the default one
        given = scoped
        data = ids.encode(call, method, scoped, session)
    everywhere = info is not None and info.everywhere
    frame_only = typing = False
    point = None
    if method == "Page.navigate":
        own = info.own if info is not None else state.page_own
        frame = params.get("frameId") if params else None
        frame_only = not own or (isinstance(frame, str) and frame != tab)
    if method == "Target.setAutoAttach" and params is not None and params.get("autoAttach"):
        data = ids.encode(call, method, auto_attach_filter(params), session)
    elif password.is_typing(method, params):
        typing = True
        point = password.drop_point(method, params)
    # Positional, in the fields' order: one command each, and keywords
    # cost a NamedTuple 0.3 µs more.
    return Step(
        Kind.FORWARD,
        call,
        session,
        method,
        given,
        tab,
        None,  # verdict
        0,  # code
        "",  # error
        typing,
        point,
        data,
        None,  # control
        frame_only,
        everywhere,
        scoped,
        hold,
    )


def begin_of(state: ClientState, step: Step, typed: dict[str, Any] | None = None) -> Begin:
    """``step``'s entry as the log takes it, for every door (``typed``: its
    params as written, the text or value withheld)."""
    return Begin(
        state.identity,
        state.number,
        state.tag,
        step.method,
        step.params,
        step.tab,
        typed,
        step.frame_only,
        state.served(step.session) if step.everywhere or state.page_worker else None,
        state.scope.name if state.scope is not None else None,
        step.sent,
    )


def tab_page_wanted(step: Step) -> str | None:
    """The tab-type target whose page the rules must know to read ``step``
    again (chromedriver's window handles: :func:`_tab_target`), when it was
    refused for naming one: the :class:`~agentenv.relay.connection.Connection`
    asks its door to have the watcher find it (bounded, a ``TabPage`` need),
    then reads the message again. Only a refusal pays for this."""
    verdict = step.verdict
    if step.method not in BY_TAB or verdict is None or verdict.rule != "not-a-web-target":
        return None
    target = (step.params or {}).get("targetId")
    return target if isinstance(target, str) else None


def world_made(state: ClientState, step: Step) -> Step:
    """``step`` was held (:attr:`Step.hold`) until the relay's world in its
    tab was made, or the wait ran out: the relay-world rule reads it again."""
    verdict = world_rule.after_making(state, step.session, step.tab, step.method, step.params)
    if verdict is not None:
        return step._replace(kind=Kind.BLOCK, verdict=verdict, hold=False)
    return step._replace(hold=False)


def _browser_target_verdict() -> guard.Verdict:
    return guard.Verdict(
        "not-allowed",
        f"blocked by agentenv guard not-allowed: {BROWSER_TARGET} only on the browser's own "
        "session or a session on the browser target (ws://HOST:PORT/devtools/browser), "
        "never from a page's endpoint or session",
    )


#: What a client sets about certificate errors on a session of its own.
_CERTIFICATE_SETTINGS = frozenset({IGNORE_CERTIFICATES, "Security.setOverrideCertificateErrors"})


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
    if not isinstance(ignore, bool):  # other keys are passed over, as Chromium does
        return _invalid(-32602, f"{IGNORE_CERTIFICATES} takes ignore, a boolean", message)
    if ignore == state.ignore_certificates:
        return step._replace(kind=Kind.ANSWER)  # nothing changes: nothing is sent
    state.ignore_certificates = ignore
    if ignore:
        told = [
            session
            for session, info in state.sessions.items()
            if info.web and info.framed and session not in state.certificates_own
        ]
        state.certificates_told.update(told)
    else:
        told = [s for s in state.certificates_told if s in state.sessions]
        state.certificates_told.clear()
    upstream = tuple(certificates_command(state, session, ignore) for session in told)
    return step._replace(kind=Kind.ANSWER, upstream=upstream)


def _tab_target(
    state: ClientState, method: str, params: dict[str, Any] | None
) -> guard.Verdict | None:
    """``Target.activateTarget``/``closeTarget`` by a tab-type target's id
    (chromedriver's window handles): sent for the tab's page, so the log and
    the tabs name the page."""
    if method not in BY_TAB or not params:
        return None
    target = params.get("targetId")
    page = state.known.tab_page(target) if isinstance(target, str) else None
    if page is None:
        return None
    return guard.tab_target_verdict(params, page)


#: Commands that take a tab-type target's id for its page.
BY_TAB = frozenset({"Target.activateTarget", "Target.closeTarget"})


def _malformed_id(where: str, kind: str) -> guard.Verdict:
    form = {
        "context": "an integer (as Runtime.executionContextCreated gives it)",
        "remote-object": "'<isolate>.<context>.<n>', as Chromium gave it",
        "call-frame": "'<isolate>.<context>.<n>', as Debugger.paused gave it",
        "unique-context": "'<a>.<b>', as Runtime.executionContextCreated gave it",
    }.get(kind, "a plain decimal string, as Chromium gave it")
    return guard.Verdict(
        "malformed-id",
        f"blocked by agentenv guard malformed-id: params.{where} must be written as Chromium "
        f"writes it: {form}; send the id exactly as you received it",
        code=-32602,
    )


def _control(state: ClientState, step: Step) -> Step:
    if not state.identity.control and step.method in AGENT_METHODS:
        return _agent_control(state, step)
    if not state.identity.control:
        verdict = guard.Verdict(
            "not-allowed",
            "blocked by agentenv guard not-allowed: AgentEnv.* commands need the control "
            "token (AGENTENV_CONTROL_TOKEN); they are the computer's own reports",
        )
        return step._replace(kind=Kind.BLOCK, verdict=verdict)
    model = CONTROL_METHODS.get(step.method)
    step = step._replace(kind=Kind.CONTROL)
    if model is None:
        known = ", ".join(CONTROL_METHODS)
        return step.failed(-32601, f"unknown {step.method}; the relay knows {known}")
    try:
        return step._replace(control=model.model_validate(step.params or {}))
    except ValidationError as exc:
        return step.failed(-32602, f"{step.method}: {'; '.join(problems(exc, 'params'))}")


def _agent_control(state: ClientState, step: Step) -> Step:
    """An agent's ``AgentEnv.*`` command: ``requestHuman`` on any of its
    sessions; ``fillCredential`` on a tab's session only (the relay fills
    that tab, in the agent's scope), never naming a tab."""
    step = step._replace(kind=Kind.CONTROL)
    try:
        parsed = AGENT_MODELS[step.method].model_validate(step.params or {})
    except ValidationError as exc:
        return step.failed(-32602, f"{step.method}: {'; '.join(problems(exc, 'params'))}")
    if isinstance(parsed, FillCredential) and parsed.tab is not None:
        return step.failed(
            -32602,
            f"{step.method}: params.tab is not an agent's to name: send the command on the "
            "session of the tab to fill (its sessionId), without tab",
        )
    if isinstance(parsed, FillCredential) and step.tab is None:
        return step.failed(
            -32602,
            f"{step.method}: send it on the session of the tab to fill (attach to the page "
            "and use its sessionId), not on the browser's",
        )
    return step._replace(control=parsed)
