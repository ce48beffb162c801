"""The relay's own worlds: never listed to a client, never named by one."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from agentenv.access import Identity
from agentenv.relay import core
from agentenv.relay.core import ClientState, Down, Kind, SessionInfo
from agentenv.relay.worlds import RelayWorlds

DOWNLOADS = "/var/lib/agentenv/downloads"
TAB = "TAB1"


def connection(worlds: RelayWorlds) -> ClientState:
    state = ClientState(7, Identity("alice"), worlds=worlds)
    state.sessions["S"] = SessionInfo(TAB)  # on the tab itself
    state.sessions["F"] = SessionInfo(TAB, own=False)  # an out-of-process frame of it
    return state


def made(context: int = 5) -> RelayWorlds:
    worlds = RelayWorlds()
    worlds.begin(TAB)
    worlds.made(TAB, context)
    return worlds


def send(state: ClientState, method: str, params: dict[str, Any], session: str = "S") -> core.Step:
    message = {"id": 1, "method": method, "params": params, "sessionId": session}
    return core.receive(state, json.dumps(message), DOWNLOADS)


def event(state: ClientState, method: str, params: dict[str, Any], session: str = "S") -> Down:
    data = orjson.dumps({"method": method, "params": params, "sessionId": session}).decode()
    return core.from_upstream(state, data).kind


def test_names_are_fresh_and_unpredictable() -> None:
    one, two = RelayWorlds(), RelayWorlds()
    assert one.prefix != two.prefix and len(one.prefix) > 20
    assert one.fresh_name() != one.fresh_name()
    assert one.ours(one.fresh_name()) and not one.ours(two.fresh_name())
    assert not one.ours("agentenv-relay")
    sealed = one.sealed(TAB, "1 + 1")
    assert sealed != one.sealed(TAB, "1 + 1")  # a fresh comment each time


def test_a_check_runs_only_where_the_worlds_mark_is() -> None:
    worlds = made()
    marking = worlds.made(TAB, 5)
    mark = worlds.marks[TAB]
    assert mark in marking and mark in worlds.sealed(TAB, "x")
    assert '"undecided"' in worlds.sealed(TAB, "x")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("Runtime.evaluate", {"expression": "1", "contextId": 5}),
        ("Runtime.evaluate", {"expression": "1", "uniqueContextId": "-8803.5005"}),
        ("Runtime.callFunctionOn", {"functionDeclaration": "f", "executionContextId": 5}),
        ("Runtime.callFunctionOn", {"functionDeclaration": "f", "objectId": "-77.5.1"}),
        (
            "Runtime.callFunctionOn",
            {
                "functionDeclaration": "f",
                "objectId": "-77.1.1",
                "arguments": [{"objectId": "-77.5.2"}],
            },
        ),
        ("Runtime.getProperties", {"objectId": "123.5.9"}),
        ("Runtime.queryObjects", {"prototypeObjectId": "1.5.3"}),
        ("Runtime.awaitPromise", {"promiseObjectId": "1.5.3"}),
        (
            "Runtime.compileScript",
            {"expression": "1", "sourceURL": "", "persistScript": True, "executionContextId": 5},
        ),
        ("Runtime.globalLexicalScopeNames", {"executionContextId": 5}),
        ("Runtime.addBinding", {"name": "b", "executionContextId": 5}),
        ("DOM.resolveNode", {"backendNodeId": 3, "executionContextId": 5}),
        ("Debugger.evaluateOnCallFrame", {"callFrameId": "0.5.-77", "expression": "1"}),
        ("Debugger.evaluateOnCallFrame", {"callFrameId": "-77.5.0", "expression": "1"}),
        (
            "Debugger.setVariableValue",
            {"callFrameId": "-77.5.0", "scopeNumber": 0, "variableName": "x", "newValue": {}},
        ),
        ("Debugger.setBreakpointOnFunctionCall", {"objectId": "-77.5.4"}),
        (
            "Debugger.setBreakpoint",
            {"location": {"scriptId": "88", "lineNumber": 0}, "condition": "p()"},
        ),
        ("Debugger.setScriptSource", {"scriptId": "88", "scriptSource": "x"}),
        ("HeapProfiler.addInspectedHeapObject", {"heapObjectId": "1"}),
        ("HeapProfiler.getObjectByHeapObjectId", {"objectId": "17"}),
    ],
)
def test_a_command_naming_the_world_is_refused(method: str, params: dict[str, Any]) -> None:
    worlds = made()
    state = connection(worlds)
    # What a client with Runtime and Debugger on would learn (and never sees).
    created = {"context": {"id": 5, "name": worlds.fresh_name(), "uniqueId": "-8803.5005"}}
    assert event(state, "Runtime.executionContextCreated", created) is Down.DROP
    parsed = {"scriptId": "88", "executionContextId": 5, "url": ""}
    assert event(state, "Debugger.scriptParsed", parsed) is Down.DROP
    step = send(state, method, params)
    assert step.kind is Kind.BLOCK and step.verdict is not None, step
    assert step.verdict.rule == "relay-world"
    assert "relay-world" in step.verdict.message  # the record says what it was


#: What Chromium 156 answers these commands for an id it does not know (seen
#: with raw CDP on a fresh tab): a refusal of the relay's world must read the
#: same, or it tells an agent which number is the world's.
CHROMIUM_UNKNOWN = {
    ("Runtime.evaluate", "contextId"): (-32000, "Cannot find context with specified id"),
    ("Runtime.evaluate", "uniqueContextId"): (-32602, "uniqueContextId not found"),
    ("Runtime.getProperties", "objectId"): (-32000, "Cannot find context with specified id"),
    ("Runtime.globalLexicalScopeNames", "executionContextId"): (
        -32000,
        "Cannot find context with specified id",
    ),
    ("Runtime.compileScript", "executionContextId"): (
        -32000,
        "Cannot find context with specified id",
    ),
    ("Runtime.addBinding", "executionContextId"): (
        -32602,
        "Cannot find execution context with given executionContextId",
    ),
    ("Runtime.releaseObject", "objectId"): (-32000, "Cannot find context with specified id"),
    ("DOM.describeNode", "objectId"): (-32000, "Cannot find context with specified id"),
    ("Debugger.getScriptSource", "scriptId"): (-32000, "No script for id: 88"),
}


@pytest.mark.parametrize(("method", "where"), sorted(CHROMIUM_UNKNOWN))
def test_a_refusal_of_the_world_reads_as_chromiums_unknown_id(method: str, where: str) -> None:
    """``Runtime.globalLexicalScopeNames`` refused exactly for the world's
    number told the red team which number to use."""
    worlds = made()
    state = connection(worlds)
    created = {"context": {"id": 5, "name": worlds.fresh_name(), "uniqueId": "-8803.5005"}}
    event(state, "Runtime.executionContextCreated", created)
    event(state, "Debugger.scriptParsed", {"scriptId": "88", "executionContextId": 5, "url": ""})
    value = {"contextId": 5, "executionContextId": 5, "uniqueContextId": "-8803.5005"}.get(
        where, "88" if where == "scriptId" else "-77.5.1"
    )
    params: dict[str, Any] = {"expression": "1", "name": "b", where: value}
    step = send(state, method, params)
    assert step.verdict is not None and step.verdict.rule == "relay-world", step
    code, message = CHROMIUM_UNKNOWN[(method, where)]
    assert step.error_answer()["error"] == {"code": code, "message": message}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("Runtime.evaluate", {"expression": "1", "contextId": 4}),
        ("Runtime.evaluate", {"expression": "1"}),
        ("Runtime.callFunctionOn", {"functionDeclaration": "f", "objectId": "-77.4.1"}),
        ("Debugger.setBreakpoint", {"location": {"scriptId": "87", "lineNumber": 0}}),
        ("DOM.resolveNode", {"backendNodeId": 5}),
    ],
)
def test_the_clients_own_contexts_are_its_own(method: str, params: dict[str, Any]) -> None:
    state = connection(made())
    step = send(state, method, params)
    assert step.kind is Kind.FORWARD, step.verdict


def test_auto_attach_is_always_flattened() -> None:
    """Unflattened children would talk through receivedMessageFromTarget,
    past the record and the rules."""
    state = connection(made())
    step = send(
        state,
        "Target.setAutoAttach",
        {"autoAttach": True, "flatten": False, "waitForDebuggerOnStart": False},
    )
    assert step.kind is Kind.FORWARD
    assert orjson.loads(step.data)["params"]["flatten"] is True


def test_another_targets_numbers_are_another_id_space() -> None:
    """An out-of-process frame numbers its contexts itself: 5 there is not ours."""
    state = connection(made())
    step = send(state, "Runtime.evaluate", {"expression": "1", "contextId": 5}, session="F")
    assert step.kind is Kind.FORWARD


def test_a_page_endpoint_is_the_tabs_own_session() -> None:
    state = ClientState(7, Identity("alice"), page=TAB, worlds=made())
    message = {"id": 1, "method": "Runtime.evaluate", "params": {"expression": "1", "contextId": 5}}
    step = core.receive(state, json.dumps(message), DOWNLOADS)
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "relay-world"


def test_the_worlds_events_never_reach_a_client() -> None:
    worlds = made()
    state = connection(worlds)
    created = {"context": {"id": 5, "name": worlds.fresh_name(), "uniqueId": "-8803.5005"}}
    assert event(state, "Runtime.executionContextCreated", created) is Down.DROP
    theirs = {"context": {"id": 4, "name": "", "uniqueId": "-8803.4004"}}
    assert event(state, "Runtime.executionContextCreated", theirs) is Down.PASS
    playwright = {
        "context": {"id": 6, "name": "__playwright_utility_world__", "uniqueId": "-8803.6006"}
    }
    assert event(state, "Runtime.executionContextCreated", playwright) is Down.PASS
    gone = {"executionContextId": 5, "executionContextUniqueId": "-8803.5005"}
    assert event(state, "Runtime.executionContextDestroyed", gone) is Down.DROP
    theirs_gone = {"executionContextId": 4, "executionContextUniqueId": "-8803.4004"}
    assert event(state, "Runtime.executionContextDestroyed", theirs_gone) is Down.PASS
    ours = {"scriptId": "88", "executionContextId": 5, "url": ""}
    assert event(state, "Debugger.scriptParsed", ours) is Down.DROP
    page = {"scriptId": "87", "executionContextId": 4, "url": "https://x/a.js"}
    assert event(state, "Debugger.scriptParsed", page) is Down.PASS


def test_a_name_seen_before_the_number_is_hidden_too() -> None:
    """The event may reach a client before the watcher has the world's number."""
    worlds = RelayWorlds()
    state = connection(worlds)
    worlds.begin(TAB)
    created = {"context": {"id": 9, "name": worlds.fresh_name(), "uniqueId": "-8803.9009"}}
    assert event(state, "Runtime.executionContextCreated", created) is Down.DROP


def test_a_pause_in_the_world_is_undone_and_never_seen() -> None:
    state = connection(made())
    paused = {"callFrames": [{"callFrameId": "-77.5.0", "location": {"scriptId": "88"}}]}
    data = orjson.dumps({"method": "Debugger.paused", "params": paused, "sessionId": "S"})
    down = core.from_upstream(state, data.decode())
    assert down.kind is Down.RESUME and down.session == "S"
    # The resume is the relay's own (a negative id), on the paused session.
    assert [orjson.loads(x) for x in down.upstream] == [
        {"id": state.next_own + 1, "method": "Debugger.resume", "sessionId": "S"}
    ] and state.next_own + 1 < 0
    # Until the resume lands, the paused frame's return value cannot be set.
    step = send(state, "Debugger.setReturnValue", {"newValue": {"value": "no"}})
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "relay-world"
    assert event(state, "Debugger.resumed", {}) is Down.DROP
    assert event(state, "Debugger.resumed", {}) is Down.PASS  # the client's own next time
    theirs = {"callFrames": [{"callFrameId": "-77.4.0", "location": {"scriptId": "87"}}]}
    assert event(state, "Debugger.paused", theirs) is Down.PASS


def test_a_command_naming_a_context_waits_while_the_world_is_made() -> None:
    worlds = RelayWorlds()
    state = connection(worlds)
    worlds.begin(TAB)
    step = send(state, "Runtime.evaluate", {"expression": "1", "contextId": 9})
    assert step.kind is Kind.FORWARD and step.hold
    plain = send(state, "Runtime.evaluate", {"expression": "1"})
    assert not plain.hold


def test_a_held_command_is_read_again_once_the_world_is_made_or_the_wait_ran_out() -> None:
    """The number known: naming it is refused as an unknown id, another
    passes; still unknown after the wait: refused, it might name the world."""
    for number, expected in ((9, "relay-world"), (8, None)):
        worlds = RelayWorlds()
        state = connection(worlds)
        worlds.begin(TAB)
        step = send(state, "Runtime.evaluate", {"expression": "1", "contextId": 9})
        assert step.hold
        worlds.made(TAB, number)
        step = core.world_made(state, step)
        assert not step.hold
        if expected is None:
            assert step.kind is Kind.FORWARD and step.verdict is None, step
        else:
            assert step.kind is Kind.BLOCK and step.verdict is not None
            assert step.verdict.rule == expected and step.verdict.told, step.verdict
    worlds = RelayWorlds()
    state = connection(worlds)
    worlds.begin(TAB)
    step = send(state, "Runtime.evaluate", {"expression": "1", "contextId": 9})
    step = core.world_made(state, step)  # the wait ran out: still being made
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "relay-world" and "the context" in step.verdict.message


def test_a_stale_number_is_forgotten_with_its_document() -> None:
    """A new renderer process numbers contexts from 1 again: the old world's
    number must not refuse the page's own context."""
    worlds = made(1)
    state = connection(worlds)
    assert send(state, "Runtime.evaluate", {"expression": "1", "contextId": 1}).kind is Kind.BLOCK
    worlds.forget(TAB)
    assert send(state, "Runtime.evaluate", {"expression": "1", "contextId": 1}).kind is Kind.FORWARD


def test_the_worlds_contexts_in_frames_are_refused_too() -> None:
    """A check that looks into a same-origin frame makes the relay's world
    there as well (and from it, ``parent`` is the main frame's world): the
    watcher hears of each on its own session, and each is refused."""
    worlds = made(5)
    state = connection(worlds)
    name = worlds.fresh_name()
    worlds.heard(TAB, "Runtime.executionContextCreated", {"context": {"id": 9, "name": name}})
    worlds.heard(TAB, "Runtime.executionContextCreated", {"context": {"id": 8, "name": ""}})
    for context in (5, 9):
        step = send(state, "Runtime.evaluate", {"expression": "parent", "contextId": context})
        assert step.kind is Kind.BLOCK, context
    assert send(state, "Runtime.evaluate", {"expression": "1", "contextId": 8}).kind is Kind.FORWARD
    gone = {"executionContextId": 9, "executionContextUniqueId": "-8803.9009"}
    assert event(state, "Runtime.executionContextDestroyed", gone) is Down.DROP
    # A pause anywhere in the stack in one of them is undone.
    frames = [
        {"callFrameId": "-7.8.0", "location": {"scriptId": "1"}},
        {"callFrameId": "-7.9.1", "location": {"scriptId": "2"}},
    ]
    assert event(state, "Debugger.paused", {"callFrames": frames}) is Down.RESUME
    worlds.heard(TAB, "Runtime.executionContextDestroyed", {"executionContextId": 9})
    assert send(state, "Runtime.evaluate", {"expression": "1", "contextId": 9}).kind is Kind.FORWARD
    # The main world, destroyed with its document, is given up; so is every
    # context when the tab's are cleared.
    worlds.heard(TAB, "Runtime.executionContextDestroyed", {"executionContextId": 5})
    assert TAB not in worlds.contexts
    worlds.heard(TAB, "Runtime.executionContextCreated", {"context": {"id": 11, "name": name}})
    worlds.heard(TAB, "Runtime.executionContextsCleared", {})
    assert not worlds.any_in(TAB)


def _paused(state: ClientState, frames: list[str], session: str = "S") -> Down:
    params = {"callFrames": [{"callFrameId": f, "location": {"scriptId": "87"}} for f in frames]}
    data = orjson.dumps({"method": "Debugger.paused", "params": params, "sessionId": session})
    return core.from_upstream(state, data.decode()).kind


def test_a_call_frame_must_be_one_a_client_was_shown_in_the_pause() -> None:
    """V8 runs evaluateOnCallFrame in the frame its id's last part numbers in
    whatever pause is current, whatever context its middle part names: a
    review reached a pause in the relay's world with ``<isolate>.1.0``."""
    worlds = made()
    state = connection(worlds)
    evaluate = {"callFrameId": "-77.4.0", "expression": "1"}
    step = send(state, "Debugger.evaluateOnCallFrame", evaluate)
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "relay-world"
    assert step.error_answer()["error"]["message"] == "Can only perform operation while paused."
    assert _paused(state, ["-77.4.0", "-77.4.1"]) is Down.PASS
    assert send(state, "Debugger.evaluateOnCallFrame", evaluate).kind is Kind.FORWARD
    other = send(state, "Debugger.evaluateOnCallFrame", {**evaluate, "callFrameId": "-77.4.7"})
    assert other.kind is Kind.BLOCK
    assert other.error_answer()["error"]["message"] == "Could not find call frame with given id"
    # Any client's resume ends the pause for all: its frames go at once.
    assert send(state, "Debugger.resume", {}).kind is Kind.FORWARD
    assert send(state, "Debugger.evaluateOnCallFrame", evaluate).kind is Kind.BLOCK
    # A pause in the relay's world is never shown, and shows no frame.
    assert _paused(state, ["-77.4.0"]) is Down.PASS
    assert _paused(state, ["-77.5.0"]) is Down.RESUME
    for method in ("Debugger.evaluateOnCallFrame", "Debugger.setVariableValue"):
        params = {**evaluate, "scopeNumber": 0, "variableName": "x", "newValue": {}}
        assert send(state, method, params).kind is Kind.BLOCK, method
    assert send(state, "Debugger.setReturnValue", {"newValue": {"value": 1}}).kind is Kind.BLOCK


def test_a_binding_called_in_the_relays_world_is_never_seen() -> None:
    """A binding added with no context is in the relay's world too: its
    calls there told a reviewer the world's number and what a check read."""
    state = connection(made())
    called = {"name": "String", "payload": "password", "executionContextId": 5}
    assert event(state, "Runtime.bindingCalled", called) is Down.DROP
    theirs = {"name": "String", "payload": "x", "executionContextId": 4}
    assert event(state, "Runtime.bindingCalled", theirs) is Down.PASS


def test_the_worlds_mark_is_fixed_for_good_and_read_without_globals() -> None:
    worlds = RelayWorlds()
    worlds.begin(TAB)
    marking = worlds.made(TAB, 5)
    assert "defineProperty" in marking and "globalThis" not in marking
    assert "globalThis" not in worlds.sealed(TAB, "1")


def test_a_pause_is_read_before_the_relay_has_any_world() -> None:
    """A page's pause shown to a client before any relay world exists: its
    frames may be named (the test that found it: a pay from a paused frame)."""
    state = connection(RelayWorlds())
    assert _paused(state, ["-77.1.0"]) is Down.PASS
    step = send(
        state, "Debugger.evaluateOnCallFrame", {"callFrameId": "-77.1.0", "expression": "1"}
    )
    assert step.kind is Kind.FORWARD, step.verdict
