"""A command as Chromium will read it (agentenv.relay.ids): its numbers, its
V8 ids, and the relay's own serialization of what it checked."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv.access import Identity
from agentenv.relay import core, ids
from agentenv.relay.core import ClientState, Kind, SessionInfo
from agentenv.relay.worlds import RelayWorlds

DOWNLOADS = "/var/lib/agentenv/downloads"
TAB = "TAB1"
WORLD = 2


def _state() -> ClientState:
    worlds = RelayWorlds()
    worlds.begin(TAB)
    worlds.made(TAB, WORLD)
    state = ClientState(7, Identity("alice"), worlds=worlds)
    state.sessions["S"] = SessionInfo(TAB)
    return state


def _text(method: str, params_text: str) -> str:
    return f'{{"id":1,"method":"{method}","params":{params_text},"sessionId":"S"}}'


# Each of these Chromium 156 read as context 2 (raw CDP, seen on 2026-12-04).
@pytest.mark.parametrize("number", ["2", "2.0", "2e0", "2E0", "20e-1", "2.0000000000000001"])
def test_a_number_chromium_reads_as_the_worlds_is_refused(number: str) -> None:
    data = _text("Runtime.evaluate", f'{{"expression":"1","contextId":{number}}}')
    step = core.receive(_state(), data, DOWNLOADS)
    assert step.kind is Kind.BLOCK and step.verdict is not None, number
    assert step.verdict.rule == "relay-world"


@pytest.mark.parametrize("number", ["2.5", '"2"', "true", "4294967298", "1e300", "-2147483649"])
def test_a_number_chromium_refuses_for_a_context_is_refused_before_it(number: str) -> None:
    data = _text("Runtime.evaluate", f'{{"expression":"1","contextId":{number}}}')
    step = core.receive(_state(), data, DOWNLOADS)
    assert step.kind is Kind.BLOCK and step.verdict is not None, number
    assert step.verdict.rule == "malformed-id"
    assert "contextId" in step.error_answer()["error"]["message"]


# Each of these V8 read as an object of context 2 (raw CDP, 2026-12-04).
@pytest.mark.parametrize(
    "remote",
    ["7.2\\u0000x.1", "7. 2.1", "7.+2.1", "7.02.1", "7.2.1\\u0000zz", "+7.2.1", "7.2.01"],
)
def test_an_object_id_v8_reads_loosely_is_refused(remote: str) -> None:
    data = _text("Runtime.getProperties", f'{{"objectId":"{remote}"}}')
    step = core.receive(_state(), data, DOWNLOADS)
    assert step.kind is Kind.BLOCK and step.verdict is not None, remote
    assert step.verdict.rule == "malformed-id"


def test_ids_in_v8s_own_form_pass_and_are_read_as_v8_reads_them() -> None:
    state = _state()
    for params in (
        {"objectId": "-6716011437574213106.3.1"},
        {"objectId": "480520747224531623.3.17"},
    ):
        step = core.receive(state, json.dumps(_message("Runtime.getProperties", params)), DOWNLOADS)
        assert step.kind is Kind.FORWARD, step.verdict
    assert ids.context_of("-6716011437574213106.2.1") == 2
    assert ids.context_of("7.02.1") is None and ids.context_of(7) is None


@pytest.mark.parametrize(
    ("method", "params", "where"),
    [
        ("Runtime.callFunctionOn", {"functionDeclaration": "f", "arguments": [{"objectId": "1"}]},
         "arguments.[].objectId"),
        ("Runtime.evaluate", {"expression": "1", "uniqueContextId": " -5.6"}, "uniqueContextId"),
        ("Debugger.setBreakpoint", {"location": {"scriptId": "012", "lineNumber": 0}},
         "location.scriptId"),
        ("Debugger.evaluateOnCallFrame", {"callFrameId": "1.2", "expression": "1"}, "callFrameId"),
        ("HeapProfiler.getObjectByHeapObjectId", {"objectId": "x1"}, "objectId"),
    ],
)  # fmt: skip
def test_every_place_the_protocol_reads_an_id_is_held_to_its_form(
    method: str, params: dict[str, Any], where: str
) -> None:
    found = ids.problem(method, params)
    assert found is not None and found[0] == where, found


def test_an_id_named_where_the_protocol_reads_none_is_not_an_id() -> None:
    """``WebAudio.getRealtimeData``'s ``contextId`` is an audio graph's string."""
    assert ids.problem("WebAudio.getRealtimeData", {"contextId": "graph-1"}) is None
    assert ids.problem("Runtime.evaluate", {"expression": "1", "meta": {"contextId": "x"}}) is None


def _message(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"id": 1, "method": method, "params": params, "sessionId": "S"}


def test_what_is_sent_is_what_was_checked() -> None:
    """Keys given twice, odd escapes and extra members never reach Chromium:
    the relay writes the command it read."""
    state = _state()
    twice = '{"id":1,"method":"Runtime.evaluate","params":{"contextId":2,"contextId":1,'
    twice += '"expression":"1"},"sessionId":"S","extra":{"contextId":2}}'
    step = core.receive(state, twice, DOWNLOADS)
    assert step.kind is Kind.FORWARD
    assert orjson.loads(step.data) == _message(
        "Runtime.evaluate", {"contextId": 1, "expression": "1"}
    )
    escaped = '{"id":1,"method":"Runtime.evaluate","params":{"context\\u0049d":2,"expression":"1"},'
    escaped += '"sessionId":"S"}'
    assert core.receive(state, escaped, DOWNLOADS).kind is Kind.BLOCK


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_METHODS = st.sampled_from(
    [
        "Runtime.evaluate",
        "Runtime.callFunctionOn",
        "DOM.resolveNode",
        "Input.dispatchMouseEvent",
        "Page.navigate",
        "Runtime.getProperties",
        "Debugger.setBreakpoint",
        "Emulation.setTimezoneOverride",
    ]
)


@settings(max_examples=400, deadline=None)
@given(method=_METHODS, params=st.dictionaries(st.text(max_size=12), _JSON, max_size=5))
def test_the_relay_sends_exactly_what_its_rules_read(method: str, params: dict[str, Any]) -> None:
    """Whatever a client writes, the forwarded text parses to the params the
    rules read, and every number there that Chromium reads as an int32 is an
    int to the rules too."""
    step = core.receive(_state(), json.dumps(_message(method, params)), DOWNLOADS)
    if not step.sent:
        return
    sent = orjson.loads(step.data)
    assert sent["params"] == step.params and sent["id"] == 1 and sent["sessionId"] == "S"
    for number in _numbers(step.params):
        if isinstance(number, float):
            assert not (number.is_integer() and ids.INT32[0] <= number <= ids.INT32[1]), number


def _numbers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else []
