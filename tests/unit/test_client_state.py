"""One connection's state: the tab a command on the browser's own session
answers for (its paused request's)."""

from __future__ import annotations

import json

from agentenv.access import Identity
from agentenv.relay import core
from agentenv.relay.client_state import MAX_PAUSED, ClientState
from agentenv.relay.known import TargetSeen


def _paused(request: str, frame: str, session: str | None = None) -> str:
    message: dict[str, object] = {
        "method": "Fetch.requestPaused",
        "params": {"requestId": request, "frameId": frame, "request": {"url": "http://a/"}},
    }
    if session is not None:
        message["sessionId"] = session
    return json.dumps(message, separators=(",", ":"))


def test_a_request_paused_on_the_browsers_session_names_its_tab() -> None:
    """Interception on the browser's own session: Fetch.fulfillRequest named
    no tab (4th red team, shared scope); it names the tab of the frame whose
    request it answers, an out-of-process frame's page included."""
    state = ClientState(7, Identity("alice"))
    state.known.learn(TargetSeen("T", "page", "http://a/"))
    state.known.learn(TargetSeen("F", "iframe", "http://b/", parent="T"))
    for request, frame in (("R1", "T"), ("R2", "F"), ("R3", "in-process-frame")):
        core.from_upstream(state, _paused(request, frame))
    core.from_upstream(state, _paused("R4", "T", session="S"))  # its session names the tab
    assert state.paused == {"R1": "T", "R2": "T"}
    fulfil = {"method": "Fetch.fulfillRequest", "params": {"requestId": "R2", "responseCode": 200}}
    assert core.receive(state, json.dumps({"id": 1, **fulfil}), "/d").tab == "T"
    other = {"method": "Fetch.failRequest", "params": {"requestId": "R3", "errorReason": "Failed"}}
    assert core.receive(state, json.dumps({"id": 2, **other}), "/d").tab is None
    for n in range(MAX_PAUSED):  # bounded: the oldest are forgotten
        core.from_upstream(state, _paused(f"X{n}", "T"))
    assert len(state.paused) == MAX_PAUSED and "R1" not in state.paused


def test_a_page_endpoint_keeps_its_own_tab() -> None:
    state = ClientState(7, Identity("alice"), page="T")
    state.known.learn(TargetSeen("T", "page", "http://a/"))
    core.from_upstream(state, _paused("R1", "T"))
    assert state.paused == {}
    fulfil = {"method": "Fetch.fulfillRequest", "params": {"requestId": "R1", "responseCode": 200}}
    assert core.receive(state, json.dumps({"id": 1, **fulfil}), "/d").tab == "T"
