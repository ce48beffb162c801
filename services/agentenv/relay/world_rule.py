"""The ``relay-world`` rule: no client reaches the relay's own worlds
(:mod:`agentenv.relay.worlds`, where it checks for password fields and names
what a press lands on) by any id, pause or heap object. No I/O.

A command naming one of the relay's ids is answered as Chromium answers an id
it does not know, so no answer tells an agent which number is the world's; a
call frame of no pause shown to a client is answered as Chromium answers a
frame it does not know. A command naming a context while the relay is making
its world in the tab waits (bounded, by the socket layer) until the world's
number is known, and is read again (:func:`relay_world_verdict`).
"""

from __future__ import annotations

from typing import Any

from agentenv.relay import guard
from agentenv.relay.client_state import ClientState

__all__ = [
    "after_making",
    "relay_world",
    "relay_world_verdict",
    "unknown_id_verdict",
    "unshown_frame",
]


def relay_world(
    state: ClientState, session: str | None, method: str, params: dict[str, Any] | None
) -> tuple[guard.Verdict | None, bool]:
    """The ``relay-world`` rule for one command: its refusal (None: none), and
    whether it must wait (:data:`HOLD`): it names a context while the relay
    makes its world in the tab, whose number is not known yet."""
    worlds = state.worlds
    tab = state.own_tab(session)
    if method == "Target.detachFromTarget":
        # A debugger leaving may end the pause for every client.
        leaving = (params or {}).get("sessionId")
        worlds.resumed(state.own_tab(leaving if isinstance(leaving, str) else session))
    elif tab is not None and method in _PAUSE_METHODS:
        frame = (params or {}).get("callFrameId")
        shown = worlds.shown.get(tab)
        if method in _RESUMING:
            worlds.resumed(tab)  # its frames are gone for every client from now
        elif (frame is not None or method == "Debugger.setReturnValue") and (
            shown is None or (frame is not None and frame not in shown)
        ):
            return unshown_frame(shown is not None), False
    if not worlds.any_in(tab):
        return None, False
    if method == "Debugger.setReturnValue" and session in state.resumed:
        return relay_world_verdict("the pause"), False
    if method in _HEAP_OBJECTS:
        # A heap object id names any object of the renderer, the relay's
        # world's included (its Function constructor runs code there).
        return relay_world_verdict(f"{method} (a heap object may be the computer's own)"), False
    named = worlds.named_in(tab, method, params)
    if named is not None:
        return unknown_id_verdict(method, *named), False
    return None, tab in worlds.making and worlds.names_a_context(method, params)


def after_making(
    state: ClientState,
    session: str | None,
    tab: str | None,
    method: str,
    params: dict[str, Any] | None,
) -> guard.Verdict | None:
    """A command held while the relay made its world in ``tab``, read again
    once the world's number is known (or the wait ran out): refused if it
    names the world, or if the world is still being made (its number unknown,
    it might)."""
    worlds = state.worlds
    named = worlds.named_in(state.own_tab(session), method, params)
    if named is not None:
        return unknown_id_verdict(method, *named)
    if tab in worlds.making:
        return relay_world_verdict("the context")
    return None


#: Commands that name a frame of the current pause, or end it.
_RESUMING = frozenset(
    {
        "Debugger.resume",
        "Debugger.stepInto",
        "Debugger.stepOut",
        "Debugger.stepOver",
        "Debugger.continueToLocation",
        "Debugger.disable",
    }
)
_PAUSE_METHODS = _RESUMING | {
    "Debugger.evaluateOnCallFrame",
    "Debugger.setVariableValue",
    "Debugger.restartFrame",
    "Debugger.setReturnValue",
}


def unshown_frame(paused: bool) -> guard.Verdict:
    """A call frame (or the pause's return value) no client was shown in the
    pause now current on the tab: it may be a frame of the relay's own world
    (its pauses are undone, never shown). Answered as Chromium answers a
    frame it does not know, or a command sent while not paused."""
    return guard.Verdict(
        "relay-world",
        "blocked by agentenv guard relay-world: a call frame of no pause shown to a client "
        "(it may be the computer's own world's); name a frame of the Debugger.paused "
        "you were sent, before you resume",
        told="Could not find call frame with given id"
        if paused
        else "Can only perform operation while paused.",
    )


#: Commands that turn a heap snapshot's object id into an object of any world.
_HEAP_OBJECTS = frozenset(
    {"HeapProfiler.addInspectedHeapObject", "HeapProfiler.getObjectByHeapObjectId"}
)


def unknown_id_verdict(method: str, named: str, value: object) -> guard.Verdict:
    """A command naming the relay's own world by an id: on the record as the
    guard's (rule ``relay-world``), answered as Chromium answers an id it
    does not know, so that no answer tells an agent which number is the
    world's (a refusal of its own, given exactly there, did)."""
    code, told = _UNKNOWN_ANSWERS.get((method, named)) or _UNKNOWN_ANSWERS.get(
        ("", named.rpartition(".")[2]), (-32000, "Cannot find context with specified id")
    )
    return guard.Verdict(
        "relay-world",
        f"blocked by agentenv guard relay-world: {named} names the computer's own world in "
        "this tab; answered as Chromium answers an id it does not know",
        code=code,
        told=told.format(value=str(value)[:100]),
    )


#: How Chromium 156 answers an id it does not know, by (method, where) or by
#: ("", the parameter's name); the default: an unknown context.
_UNKNOWN_ANSWERS: dict[tuple[str, str], tuple[int, str]] = {
    ("", "uniqueContextId"): (-32602, "uniqueContextId not found"),
    ("Runtime.addBinding", "executionContextId"): (
        -32602,
        "Cannot find execution context with given executionContextId",
    ),
    ("", "scriptId"): (-32000, "No script with given id"),
    ("Debugger.getScriptSource", "scriptId"): (-32000, "No script for id: {value}"),
}


def relay_world_verdict(named: str) -> guard.Verdict:
    return guard.Verdict(
        "relay-world",
        f"blocked by agentenv guard relay-world: {named} names the computer's own world in "
        "this tab (where it checks for password fields); name your own contexts and objects, "
        "as Runtime.executionContextCreated lists them",
    )
