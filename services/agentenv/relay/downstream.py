"""What the relay does with each message from Chromium to one client. No I/O.

Chromium to client: ``Target.attachedToTarget`` of a target that is not web
content is dropped and its session detached (``DETACH``), but for the
browser target while the client's ``Target.attachToBrowserTarget`` is in
flight (a session served as the browser's own); other attach and detach
events keep the session map, and a detach ends the commands still in
flight on that session and on every session attached through it (Chromium
never answers them once its target is gone); answers to the relay's own
commands never reach the client (``DROP``); the client's answers end their
entries. An answer is handed to the client before it is read
(:func:`answer_first`) unless reading it changes how the relay treats what
comes next (a new session, a new tab, the downloads folder): reading it is
then off the agent's round trip.

A big answer (:data:`~agentenv.relay.memory.SCANNED` bytes or more) to a
command whose result no rule reads is never parsed: its id is read from its
head and its session from its tail, as Chromium writes them
(``{"id":N,"result":`` … ``,"sessionId":"S"}``). An agent could ask Chromium
for 30 MB of ``[],[],…`` by value: parsed, 900 MiB of lists and seconds of
the relay's loop that every agent waited through.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from agentenv import scopes
from agentenv.relay import guard, traces
from agentenv.relay.chromium_text import answer, answer_ends, canonical, event, loads
from agentenv.relay.client_state import (
    BROWSER_TARGET,
    MAX_PAUSED,
    WORKERS,
    ClientState,
    Pending,
    SessionInfo,
    certificates_command,
)
from agentenv.relay.memory import SCANNED
from agentenv.scopes import Scope

__all__ = [
    "MAX_FRAMES",
    "READ_FIRST",
    "Down",
    "Downstream",
    "answer_first",
    "from_upstream",
    "page_found",
]


class Down(enum.Enum):
    PASS = "pass"  # send to the client as it came
    DROP = "drop"  # an answer to the relay's own command: never the client's
    DETACH = "detach"  # drop it and detach the session it names
    RESUME = "resume"  # drop it and resume the session (paused in a relay world)


class Downstream(NamedTuple):
    """What becomes of one message from Chromium. Never changed once made
    (a NamedTuple, as :class:`agentenv.relay.core.Step`): a rule that learns
    more later makes a new one (:func:`page_found`)."""

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
    orphans: tuple[Pending, ...] = ()
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
    #: The relay's own commands to send to Chromium: before the client has
    #: this message (PASS: a new session's certificate setting), or in its
    #: place (DETACH: the detach, RESUME: the resume).
    upstream: tuple[str, ...] = ()
    #: DROP: a trace of this client's completed; what it gets instead comes
    #: from :func:`agentenv.relay.traces.finish`, run off the event loop.
    ending: traces.Ending | None = None
    #: This client's trace started: the relay ends it at its bound.
    traced: traces.Holder | None = None
    #: ``Target.createTarget{forTab}`` opened this tab-type target: its entry
    #: ends once the tab's page is known (the door has the watcher find it,
    #: bounded, then :func:`page_found`), so the tab it opened is tied to it
    #: as any other. The client has its answer meanwhile.
    page_of: str | None = None


_PASS = Downstream(Down.PASS)


#: Commands whose answer the relay reads for more than the log (a session
#: the client's next command may use, a tab it opened, the downloads folder
#: changed): :func:`from_upstream` reads these, and only these, that way, and
#: their answers are read before the client has them.
READ_FIRST = frozenset(
    {
        "Target.attachToTarget",
        BROWSER_TARGET,
        "Target.createTarget",
        "Browser.setDownloadBehavior",
        "Page.setDownloadBehavior",
        # Kept to the sender's scope (agentenv.scopes).
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
        and data[6:7].isdigit()
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
        written = canonical(data)
        if written is None:
            return Downstream(Down.DROP)
        if written == data:
            return _from_chromium(state, data)
        down = _from_chromium(state, written)
        return down._replace(data=written) if down.kind is Down.PASS and not down.data else down
    return _from_chromium(state, data)


def _from_chromium(state: ClientState, data: str) -> Downstream:
    if data.startswith('{"method":'):
        if data.startswith('{"method":"Target.attachedToTarget"') or data.startswith(
            '{"method":"Target.detachedFromTarget"'
        ):
            message = loads(data)
            if not isinstance(message, dict):
                return Downstream(Down.DROP)  # a rule's event it cannot read: not passed on
            return _session_event(state, message)
        if data.startswith(_LOADING):
            return _loading_event(state, data)
        if data.startswith(_PAUSED) and state.page is None:
            return _paused_event(state, data)
        if state.scope is not None and data.startswith(_SCOPED_EVENTS):
            return _scoped_event(state, state.scope, data)
        if data.startswith(_TARGET_EVENTS):  # a link that sees every scope
            return _unwithheld_event(state, data)
        if state.scope is not None and data.startswith('{"method":"Tracing.'):
            # Chromium's trace holds every scope's events: never passed on.
            return Downstream(Down.DROP, ending=traces.event(state.traces, state.number, data))
        if (
            data.startswith(_PAUSES)
            or (data.startswith(_WORLD_EVENTS) and state.worlds.contexts)
            or data.startswith(_CREATED)
        ):
            return _world_event(state, data)
        return _PASS
    if not state.pending and not state.own:
        return _PASS  # nothing awaits an answer: do not parse it (screenshots are MBs)
    if len(data) >= SCANNED:
        big = _big_answer(state, data)
        if big is not None:
            return big
    message = loads(data)
    if not isinstance(message, dict):
        return _PASS
    call: Any = message.get("id")
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
    traced = None
    if pending.method == "Tracing.start" and state.scope is not None and isinstance(call, int):
        traced = state.traces.answered(
            state.number, session if isinstance(session, str) else None, call, ok
        )
    if not ok:
        why = str(error.get("message") if isinstance(error, dict) else error)
        return Downstream(Down.PASS, pending, False, why, traced=traced)
    result = message.get("result")
    # Keywords cost a NamedTuple more: most answers have no trace.
    out = (
        Downstream(Down.PASS, pending, True)
        if traced is None
        else Downstream(Down.PASS, pending, True, traced=traced)
    )
    if isinstance(result, dict) and pending.method in READ_FIRST:
        return _read_result(state, pending, message, result, out)
    return out


def _big_answer(state: ClientState, data: str) -> Downstream | None:
    """A big result for a command whose result no rule reads: its entry
    ends, nothing of it parsed. None: it is read as any other."""
    key = answer_ends(data)
    if key is None:
        return None
    pending = state.pending.get(key)
    if pending is None:
        return _PASS  # as a parsed one would: no command of this client's awaits it
    if pending.method in READ_FIRST or pending.method == "Tracing.start":
        return None
    del state.pending[key]
    return Downstream(Down.PASS, pending, True)


def page_found(state: ClientState, down: Downstream, page: str | None) -> Downstream:
    """A ``createTarget{forTab}`` answer (:attr:`Downstream.page_of`) once the
    watcher has looked for its tab's page: the entry ends naming the page
    (None: none was found in time), which the client may now see."""
    if page is not None:
        state.visible.add(page)
    return down._replace(opened=page, page_of=None)


def _read_result(
    state: ClientState,
    pending: Pending,
    message: dict[str, Any],
    result: dict[str, Any],
    out: Downstream,
) -> Downstream:
    """What an answer to a :data:`READ_FIRST` command changes."""
    scope = state.scope
    if pending.method == "Target.createTarget":
        opened = result.get("targetId")
        if not isinstance(opened, str):
            return out
        state.visible.add(opened)
        params = pending.params
        if isinstance(params, dict) and params.get("forTab"):
            return out._replace(opened=opened, page_of=opened)
        return out._replace(opened=opened)
    elif pending.method == "Target.getTargets":
        if scope is not None:
            kept = scopes.targets_answer(scope, result)
            state.visible.update(
                str(i.get("targetId")) for i in kept["targetInfos"] if isinstance(i, dict)
            )
            return out._replace(data=answer(message, kept))
        return out._replace(
            data=answer(message, scopes.targets_without(state.known.withheld, result))
        )
    elif pending.method == "Browser.getWindowForTarget":
        window = result.get("windowId")
        if isinstance(window, int):
            state.windows.add(window)
    elif pending.method == "Target.getBrowserContexts":
        if scope is not None:
            return out._replace(data=answer(message, scopes.contexts_answer(scope, result)))
        withheld = scopes.contexts_without(state.known.withheld, result)
        return out._replace(data=answer(message, withheld))
    elif pending.method == "Target.createBrowserContext":
        made = result.get("browserContextId")
        if scope is not None and isinstance(made, str):
            scope.made.add(made)
            return out._replace(made_context=made)
    elif pending.method == "Target.attachToTarget":
        new = result.get("sessionId")
        target = pending.params.get("targetId") if isinstance(pending.params, dict) else None
        if isinstance(new, str) and isinstance(target, str) and new not in state.sessions:
            known = state.known.target(target)
            kind = known[0] if known is not None else "page"
            info = _session_info(state.known.tab_of(target), target, kind)
            info.parent = _parent(message)
            state.sessions[new] = info
    elif pending.method == BROWSER_TARGET:
        # Chromium announced it first (Target.attachedToTarget); if it did not.
        new = result.get("sessionId")
        if isinstance(new, str) and new not in state.sessions:
            state.sessions[new] = _browser_session(_parent(message))
    else:  # Browser. or Page.setDownloadBehavior
        state.downloads_changed = True
    return out


_LOADING = '{"method":"Page.frameSt'  # frameStartedLoading, frameStoppedLoading
_PAUSED = '{"method":"Fetch.requestPaused"'
_SCOPED_EVENTS = (
    '{"method":"Target.targetCreated"',
    '{"method":"Target.targetInfoChanged"',
    '{"method":"Target.targetDestroyed"',
    '{"method":"Target.targetCrashed"',
    '{"method":"Browser.download',
)


def _scoped_event(state: ClientState, scope: Scope, data: str) -> Downstream:
    """Target and download events, kept to the client's scope."""
    found = event(data)
    if found is None:
        return Downstream(Down.DROP)  # unreadable: it may be another scope's
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
            tab = state.frames.get(frame) or state.known.tab_of(frame)
            context = state.known.context_of(tab)
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


#: Target events a link that sees every scope is not passed for a warm
#: context no scope was handed yet (relay/warm.py).
_TARGET_EVENTS = (
    '{"method":"Target.targetCreated"',
    '{"method":"Target.targetInfoChanged"',
    '{"method":"Target.targetDestroyed"',
    '{"method":"Target.targetCrashed"',
)


def _unwithheld_event(state: ClientState, data: str) -> Downstream:
    """A target event, not passed on if its target is a warm context's."""
    found = event(data)
    if found is None:
        return _PASS
    _, params, _ = found
    info = params.get("targetInfo")
    if isinstance(info, dict):
        context = info.get("browserContextId")
    else:
        target = params.get("targetId")
        context = state.known.context_of(target) if isinstance(target, str) else None
    return Downstream(Down.DROP) if state.known.withheld(context) else _PASS


_CREATED = '{"method":"Runtime.executionContextCreated"'
#: A pause's start and end, read whether or not the relay has a world yet:
#: the frames a client was shown are the only ones it may name (worlds.shown).
_PAUSES = ('{"method":"Debugger.paused"', '{"method":"Debugger.resumed"')
_WORLD_EVENTS = (
    '{"method":"Runtime.executionContextDestroyed"',
    '{"method":"Debugger.scriptParsed"',
    '{"method":"Debugger.scriptFailedToParse"',
    '{"method":"Debugger.paused"',
    '{"method":"Debugger.resumed"',
    '{"method":"Runtime.bindingCalled"',
)


def _world_event(state: ClientState, data: str) -> Downstream:
    """An event that may be about a relay world: dropped if it is, and a
    pause in one undone (:mod:`agentenv.relay.worlds`)."""
    found = event(data)
    if found is None:
        return _PASS
    method, params, session = found
    tab = state.own_tab(session)
    if method == "Debugger.paused":
        if state.worlds.paused_in(tab, params):
            state.worlds.resumed(tab)
            state.resumed.add(session)
            # Undone: the client never saw it.
            resume = state.own_command("Debugger.resume", None, session)
            return Downstream(Down.RESUME, session=session, upstream=(resume,))
        state.worlds.pause_shown(tab, params)
        return _PASS
    if method == "Debugger.resumed":
        state.worlds.resumed(tab)
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
    message = loads(data)
    if not isinstance(message, dict):
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


def _paused_event(state: ClientState, data: str) -> Downstream:
    """A request paused on the browser's own session (interception of every
    tab): the tab it is for, by its frame, kept for the ``Fetch.*`` command
    that answers it (its entry names the tab). On a session, the session
    names the tab already."""
    message = loads(data)
    if not isinstance(message, dict) or not state.at_browser(_parent(message)):
        return _PASS
    params = message.get("params") or {}
    request, frame = params.get("requestId"), params.get("frameId")
    if not isinstance(request, str) or not isinstance(frame, str):
        return _PASS
    tab = state.frames.get(frame) or state.known.tab_of(frame)
    known = state.known.target(tab)
    if known is not None and known[0] == "page":
        state.paused[request] = tab
        if len(state.paused) > MAX_PAUSED:
            del state.paused[next(iter(state.paused))]
    return _PASS


#: Frames a connection keeps for its downloads' news (:attr:`ClientState.frames`).
MAX_FRAMES = 10_000


def _session_event(state: ClientState, message: dict[str, Any]) -> Downstream:
    params = message.get("params") or {}
    session = params.get("sessionId")
    if not isinstance(session, str):
        return _PASS
    if message.get("method") == "Target.detachedFromTarget":
        info = state.sessions.get(session)
        # Sessions attached through it end with it, and Chromium says nothing of them.
        gone = state.forget(session) or [session]
        for name in gone:
            state.traces.let_go(state.number, name)  # Chromium ends its trace
            state.certificates_own.discard(name)
            state.certificates_told.discard(name)
        if info is not None and not info.web:
            return Downstream(Down.DROP)  # the relay's own detach: the client never saw it
        orphans = [key for key in state.pending if key[0] in gone]
        if not orphans:
            return _PASS
        return Downstream(Down.PASS, orphans=tuple(state.pending.pop(key) for key in orphans))
    target_info = params.get("targetInfo") or {}
    target = target_info.get("targetId")
    kind, url = target_info.get("type"), target_info.get("url")
    parent = _parent(message)
    if kind == "browser" and _opening_browser_session(state, parent):
        # The client's own Target.attachToBrowserTarget: a session with the
        # powers of the browser's own, served as that one is (relay.core).
        state.sessions[session] = _browser_session(parent)
        return _PASS
    made_in = target_info.get("browserContextId")
    elsewhere = (
        not state.scope.holds(made_in) if state.scope is not None else state.known.withheld(made_in)
    )
    if elsewhere or not guard.web_target(
        (kind, url) if isinstance(kind, str) and isinstance(url, str) else None
    ):
        # Not web content, or another scope's: the client never sees it.
        state.sessions[session] = SessionInfo(
            target if isinstance(target, str) else None, False, parent=parent
        )
        waiting = params.get("waitingForDebugger") is True
        detach = state.own_command("Target.detachFromTarget", {"sessionId": session}, parent)
        leave: tuple[str, ...] = (detach,)
        if waiting:  # it waits for a debugger: let it run before leaving it
            leave = (state.own_command("Runtime.runIfWaitingForDebugger", None, session), detach)
        return Downstream(
            Down.DETACH, session=session, parent=parent, resume=waiting, upstream=leave
        )
    if isinstance(target, str):
        state.visible.add(target)
    if kind in ("page", "tab") or state.at_browser(parent):
        tab = state.known.tab_of(target) if isinstance(target, str) else target
    else:  # a frame or worker inside a page: its tab is the page's
        owner = state.sessions.get(parent) if parent is not None else None
        tab = owner.tab if owner is not None else target
    info = _session_info(
        tab if isinstance(tab, str) else None,
        target if isinstance(target, str) else None,
        kind if isinstance(kind, str) else "",
    )
    info.parent = parent
    state.sessions[session] = info
    if state.ignore_certificates and info.framed:
        state.certificates_told.add(session)
        return Downstream(Down.PASS, upstream=(certificates_command(state, session, True),))
    return _PASS


def _parent(message: dict[str, Any]) -> str | None:
    """The session a message of Chromium's came on (None: the connection's own)."""
    session = message.get("sessionId")
    return session if isinstance(session, str) else None


def _opening_browser_session(state: ClientState, parent: str | None) -> bool:
    """Whether the client's ``Target.attachToBrowserTarget`` on ``parent`` is
    in flight (the guard let it through: ``parent`` is on the browser target)."""
    return any(
        key[0] == parent and pending.method == BROWSER_TARGET
        for key, pending in state.pending.items()
    )


def _browser_session(parent: str | None) -> SessionInfo:
    """A session on the browser target: no tab, no frames of its own."""
    return SessionInfo(None, own=False, framed=False, browser=True, parent=parent)


def _session_info(tab: str | None, target: str | None, kind: str) -> SessionInfo:
    if kind in WORKERS:
        return SessionInfo(tab, own=False, everywhere=True, framed=False, worker=target)
    framed = kind in ("page", "iframe")
    return SessionInfo(tab, own=tab is not None and tab == target, framed=framed)
