"""Traces (relay/traces.py): the browser's one trace is one scope's at a
time, and what its holder reads is its own tab's alone.

``traces/two-scopes.json.gz`` is a trace recorded on Chromium 156 (the
image's), cut down: alice's tab traced (``Tracing.start`` on its session,
ReportEvents, Puppeteer's categories plus ``*`` and navigation) while bob,
in another browser context, loaded ``/next?bob&token=SECRET-BOB`` and set
his title to ``BOBTITLE2``. Chromium's trace holds bob's renderer whole and
the browser process's events about his tab."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentenv.access import Identity
from agentenv.relay import core, trace_filter, traces
from agentenv.relay.core import ClientState, Down, Kind, Pending, SessionInfo
from agentenv.relay.traces import Ending, Trace, Traces
from agentenv.scopes import Scope

RECORDED = Path(__file__).parent / "traces" / "two-scopes.json.gz"
DOWNLOADS = "/var/lib/agentenv/downloads"


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(RECORDED.read_bytes()))
    return data


def _bobs(info: dict[str, Any]) -> list[str]:
    """What of bob's scope a trace of alice's must not hold."""
    return [info["tB"], info["ctxB"], "bob", "BOB", "SECRET-BOB", "BOBTITLE2"]


def _kept(recorded: dict[str, Any]) -> list[dict[str, Any]]:
    info = recorded["info"]
    kept = trace_filter.keep_own([c.encode() for c in recorded["chunks"]], info["tA"])
    return [e for chunk in kept.chunks for e in json.loads(chunk)]


def test_the_recording_holds_the_other_scopes_tab(recorded: dict[str, Any]) -> None:
    """What Chromium hands over: bob's pages, his tokens, his title, his
    context's id, his renderer."""
    whole = "".join(recorded["chunks"])
    info = recorded["info"]
    for bobs in _bobs(info):
        assert bobs in whole, bobs
    assert f'"pid":{info["bob_pid"]}' in whole


def test_a_trace_keeps_the_traced_tabs_events_alone(recorded: dict[str, Any]) -> None:
    info = recorded["info"]
    events = _kept(recorded)
    text = json.dumps(events)
    for bobs in _bobs(info):
        assert bobs not in text, bobs
    pids = {e["pid"] for e in events}
    assert pids == {info["alice_pid"], info["browser_pid"]}, pids
    # Alice's own: her renderer's events, her navigation with its token.
    mine = [e for e in events if e["pid"] == info["alice_pid"]]
    assert len(mine) > 300, len(mine)
    assert "SECRET-ALICE" in text and info["tA"] in text
    # Of the browser process, only what names her tab's frames.
    browser = {e["name"] for e in events if e["pid"] == info["browser_pid"]}
    assert browser <= trace_filter.BROWSER_KEPT | {"process_name", "thread_name"}, browser
    assert {"TracingStartedInBrowser", "FrameCommittedInBrowser", "Screenshot"} <= browser
    started = next(e for e in events if e["name"] == "TracingStartedInBrowser")
    frames = started["args"]["data"]["frames"]
    assert frames and frames[0]["frame"] == info["tA"], frames
    committed = [e for e in events if e["name"] == "FrameCommittedInBrowser"]
    assert all("alice" in e["args"]["data"]["url"] for e in committed), committed


def test_every_other_process_is_dropped(recorded: dict[str, Any]) -> None:
    whole = [e for c in recorded["chunks"] for e in orjson.loads(c)["params"]["value"]]
    gpu = {e["pid"] for e in whole if e.get("name") == "process_name"} - {
        recorded["info"][k] for k in ("alice_pid", "bob_pid", "browser_pid")
    }
    assert gpu, "the recording has a GPU process"
    assert not {e["pid"] for e in _kept(recorded)} & gpu


def test_a_page_naming_its_marks_like_the_browser_gains_nothing(recorded: dict[str, Any]) -> None:
    """A page names its own marks (``performance.mark``): a mark named like
    the browser's events, from bob's renderer, claiming alice's tab, does
    not make his process hers (only the process Chromium names the browser
    is read)."""
    info = recorded["info"]
    fake = [
        {
            "name": name,
            "ph": "R",
            "pid": info["bob_pid"],
            "args": {"data": {"frame": info["tA"], "processId": info["bob_pid"], "frames": []}},
        }
        for name in ("TracingStartedInBrowser", "FrameCommittedInBrowser")
    ]
    message = {"method": "Tracing.dataCollected", "params": {"value": fake}}
    chunks = [orjson.dumps(message), *(c.encode() for c in recorded["chunks"])]
    kept = trace_filter.keep_own(chunks, info["tA"])
    assert info["bob_pid"] not in kept.renderers
    assert kept.browser == info["browser_pid"]


def test_unreadable_chunks_are_dropped() -> None:
    kept = trace_filter.keep_own([b"{not json", b'{"params":{"value":"x"}}'], "T")
    assert kept.chunks == [b"[]", b"[]"]


def _ending(recorded: dict[str, Any], stream: bool, packed: bool = False) -> Ending:
    info = recorded["info"]
    trace = Trace(info["tA"], info["sA"], stream=stream, gzip=packed)
    for chunk in recorded["chunks"]:
        trace.collect(chunk)
    return Ending(trace, json.loads(recorded["complete"]))


def test_events_come_as_data_collected_then_complete(recorded: dict[str, Any]) -> None:
    info = recorded["info"]
    finished = traces.finish(_ending(recorded, stream=False))
    messages = [json.loads(m) for m in finished.deliver(Traces(), 7)]
    *data, done = messages
    assert data and all(m["method"] == "Tracing.dataCollected" for m in data)
    assert all(m["sessionId"] == info["sA"] for m in messages)
    assert done == {
        "method": "Tracing.tracingComplete",
        "params": {"dataLossOccurred": False},
        "sessionId": info["sA"],
    }
    events = [e for m in data for e in m["params"]["value"]]
    assert events == _kept(recorded)


@pytest.mark.parametrize("packed", [False, True])
def test_a_stream_is_served_by_the_relay(recorded: dict[str, Any], packed: bool) -> None:
    finished = traces.finish(_ending(recorded, stream=True, packed=packed))
    shared = Traces()
    (done,) = [json.loads(m) for m in finished.deliver(shared, 7)]
    handle = done["params"]["stream"]
    assert handle.startswith(traces.STREAM_PREFIX)
    assert done["params"]["traceFormat"] == "json"
    assert done["params"]["streamCompression"] == ("gzip" if packed else "none")
    stream = shared.stream(7, handle)
    assert stream is not None and shared.stream(8, handle) is None  # its connection's alone
    read = b""
    while True:
        piece = stream.read(None, 100_000)
        read += base64.b64decode(piece["data"]) if packed else piece["data"].encode()
        if piece["eof"]:
            break
    body = json.loads(gzip.decompress(read) if packed else read)
    assert body["traceEvents"] == _kept(recorded)


def test_a_stream_reads_from_an_offset_and_cuts_on_characters() -> None:
    stream = traces.TraceStream("aé€z".encode(), base64=False)
    assert stream.read(None, 2) == {"data": "aé", "eof": False}  # not half of é
    assert stream.read(None, 1) == {"data": "€", "eof": False}
    assert stream.read(None, None) == {"data": "z", "eof": True}
    assert stream.read(0, None) == {"data": "aé€z", "eof": True}


def test_past_its_bytes_a_trace_says_data_was_lost(recorded: dict[str, Any]) -> None:
    info = recorded["info"]
    trace = Trace(info["tA"], info["sA"], max_bytes=len(recorded["chunks"][0]) + 1)
    for chunk in recorded["chunks"]:
        trace.collect(chunk)
    assert trace.lost and len(trace.chunks) == 1
    messages = traces.finish(Ending(trace, json.loads(recorded["complete"]))).deliver(Traces(), 7)
    assert json.loads(messages[-1])["params"]["dataLossOccurred"] is True


# -- the hold ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _start(
    shared: Traces, number: int, session: str | None, scope: str, params: dict[str, Any]
) -> traces.TraceCommand | None:
    return traces.command(
        shared, number, "alice", scope, session, "T-A", 3, "Tracing.start", params
    )


def test_one_agent_holds_the_trace_and_others_hear_until_when() -> None:
    clock = Clock()
    shared = Traces(max_s=60, clock=clock)
    started = _start(shared, 7, "S", "alice", {"transferMode": "ReturnAsStream"})
    assert started is not None and started.params == {"transferMode": "ReportEvents"}
    assert shared.holder is not None and shared.holder.trace.stream
    # Another scope's agent: told that another agent holds it, since and until when.
    refused = traces.command(shared, 9, "bob", "bob", "B", "T-B", 1, "Tracing.start", {})
    assert refused is not None and refused.verdict is not None
    text = refused.verdict.message
    assert refused.verdict.rule == "trace"
    assert "another agent's trace holds it" in text and "alice" not in text, text
    assert "since 2027-01-15T08:00:00Z, until 2027-01-15T08:01:00Z at the latest" in text, text
    # A grouped user of the same scope is told whose; the holder's other tab is its own.
    same = traces.command(shared, 8, "carol", "alice", "C", "T-C", 1, "Tracing.start", {})
    assert same is not None and same.verdict is not None
    assert "alice's trace (in your scope)" in same.verdict.message
    other_tab = traces.command(shared, 7, "alice", "alice", "S2", "T-A2", 4, "Tracing.start", {})
    assert other_tab is not None and other_tab.verdict is not None
    assert "your own trace on another of your tabs" in other_tab.verdict.message
    # Markers and memory dumps land in the holder's trace: others' are refused too.
    for method in ("Tracing.recordClockSyncMarker", "Tracing.requestMemoryDump"):
        marked = traces.command(shared, 9, "bob", "bob", "B", "T-B", 2, method, {})
        assert marked is not None and marked.verdict is not None
        assert traces.command(shared, 7, "alice", "alice", "S", "T-A", 2, method, {}) is None
    # The holder's own second start goes to Chromium as sent (it says it is started).
    assert _start(shared, 7, "S", "alice", {}) is None


def test_the_hold_ends_with_the_trace_the_session_or_the_connection() -> None:
    shared = Traces()
    _start(shared, 7, "S", "alice", {})
    assert shared.answered(7, "S", 3, ok=True) is shared.holder
    assert shared.completed(7, "S") is not None and shared.holder is None
    _start(shared, 7, "S", "alice", {})
    assert shared.answered(7, "S", 3, ok=False) is None and shared.holder is None
    _start(shared, 7, "S", "alice", {})
    shared.let_go(7, "OTHER")
    assert shared.holder is not None
    shared.let_go(7, "S")
    assert shared.holder is None
    _start(shared, 7, "S", "alice", {})
    shared.let_go(7, every=True)
    assert shared.holder is None


def test_the_relay_ends_a_trace_at_its_bound_once() -> None:
    clock = Clock()
    shared = Traces(max_s=60, clock=clock)
    _start(shared, 7, "S", "alice", {})
    holder = shared.holder
    assert holder is not None
    assert json.loads(shared.overdue(holder, -5) or "") == {
        "id": -5,
        "method": "Tracing.end",
        "sessionId": "S",
    }
    assert shared.overdue(holder, -6) is None
    # Chromium never completes it: past the grace, others may start.
    clock.now += 60 + traces.GRACE_S + 1
    assert shared.held(9, "B", "bob") is None and shared.holder is None


def test_a_finished_trace_is_not_ended_again() -> None:
    shared = Traces()
    _start(shared, 7, "S", "alice", {})
    holder = shared.holder
    assert holder is not None
    shared.completed(7, "S")
    assert shared.overdue(holder, -5) is None


@pytest.mark.parametrize(
    ("params", "wanted"),
    [
        ({"transferMode": "ReturnAsStream", "streamFormat": "proto"}, "proto trace"),
        ({"transferMode": "Elsewhere"}, "transferMode is ReportEvents or ReturnAsStream"),
        ({"streamCompression": "zstd"}, "streamCompression none or gzip"),
    ],
)
def test_what_cannot_be_kept_to_a_tab_is_refused(params: dict[str, Any], wanted: str) -> None:
    shared = Traces()
    refused = _start(shared, 7, "S", "alice", params)
    assert refused is not None and shared.holder is None
    text = refused.verdict.message if refused.verdict else (refused.error or (0, ""))[1]
    assert wanted in text, text


def test_a_trace_needs_a_tab() -> None:
    refused = traces.command(Traces(), 7, "alice", "alice", "W", None, 3, "Tracing.start", {})
    assert refused is not None and refused.verdict is not None
    assert "page's session" in refused.verdict.message


def test_streams_are_read_and_closed_on_their_connection_only() -> None:
    shared = Traces()
    handle = shared.keep_stream(7, traces.TraceStream(b"{}", base64=False))

    def io(number: int, method: str, params: dict[str, Any]) -> traces.TraceCommand | None:
        return traces.command(shared, number, "a", "alice", "S", "T", 1, method, params)

    assert io(7, "IO.read", {"handle": "1"}) is None  # Chromium's own stream
    mine = io(7, "IO.read", {"handle": handle})
    assert mine is not None and mine.result == {"data": "{}", "eof": True}
    theirs = io(8, "IO.read", {"handle": handle})
    assert theirs is not None and theirs.error == (-32602, "Invalid stream handle")
    closed = io(7, "IO.close", {"handle": handle})
    assert closed is not None and closed.result == {}
    gone = io(7, "IO.read", {"handle": handle})
    assert gone is not None and gone.error is not None


def test_a_connection_keeps_few_unread_streams() -> None:
    shared = Traces()
    handles = [shared.keep_stream(7, traces.TraceStream(b"x", base64=False)) for _ in range(4)]
    assert [shared.stream(7, h) is not None for h in handles] == [False, False, True, True]


# -- through the relay's core ------------------------------------------------------------


def _client(number: int, user: str, shared: Traces, session: str, tab: str) -> ClientState:
    state = ClientState(number, Identity(user), scope=Scope(user, "CTX-" + user), traces=shared)
    state.sessions[session] = SessionInfo(tab)
    return state


def _send(state: ClientState, method: str, params: dict[str, Any], session: str) -> core.Step:
    message = {"id": 3, "method": method, "params": params, "sessionId": session}
    return core.receive(state, json.dumps(message), DOWNLOADS)


def _down(state: ClientState, message: dict[str, Any]) -> core.Downstream:
    return core.from_upstream(state, orjson.dumps(message).decode())


def test_two_scopes_trace_one_after_the_other(recorded: dict[str, Any]) -> None:
    info = recorded["info"]
    shared = Traces()
    alice = _client(7, "alice", shared, info["sA"], info["tA"])
    bob = _client(9, "bob", shared, "SB", info["tB"])
    step = _send(alice, "Tracing.start", {"transferMode": "ReturnAsStream"}, info["sA"])
    assert step.kind is Kind.FORWARD
    assert json.loads(step.data)["params"] == {"transferMode": "ReportEvents"}
    alice.pending[(info["sA"], 3)] = Pending(1, "Tracing.start", step.params)
    started = _down(alice, {"id": 3, "result": {}, "sessionId": info["sA"]})
    assert started.traced is shared.holder and started.traced is not None

    refused = _send(bob, "Tracing.start", {}, "SB")
    assert refused.kind is Kind.BLOCK and refused.verdict is not None
    assert refused.verdict.rule == "trace"
    assert refused.error_answer()["error"]["code"] == -32000

    # Chromium's events: collected for alice, never passed on; bob gets none.
    for chunk in recorded["chunks"]:
        assert _down(alice, orjson.loads(chunk)).kind is Down.DROP
        assert _down(bob, orjson.loads(chunk)).kind is Down.DROP
    usage = {"method": "Tracing.bufferUsage", "params": {"percentFull": 0.5}}
    assert _down(alice, usage).kind is Down.DROP
    done = _down(alice, json.loads(recorded["complete"]))
    assert done.kind is Down.DROP and done.ending is not None
    assert shared.holder is None
    assert len(done.ending.trace.chunks) == len(recorded["chunks"])

    # Alice reads her stream through the relay; then bob may trace.
    (complete,) = traces.finish(done.ending).deliver(shared, alice.number)
    handle = json.loads(complete)["params"]["stream"]
    read = _send(alice, "IO.read", {"handle": handle}, info["sA"])
    assert read.kind is Kind.ANSWER and read.result is not None and read.result["eof"]
    assert "SECRET-BOB" not in read.result["data"] and "SECRET-ALICE" in read.result["data"]
    assert _send(bob, "Tracing.start", {}, "SB").kind is Kind.FORWARD


def test_a_failed_start_or_a_detach_lets_the_trace_go() -> None:
    shared = Traces()
    alice = _client(7, "alice", shared, "SA", "TA")
    bob = _client(9, "bob", shared, "SB", "TB")
    step = _send(alice, "Tracing.start", {}, "SA")
    alice.pending[("SA", 3)] = Pending(1, "Tracing.start", step.params)
    failed = {"id": 3, "error": {"code": -32000, "message": "Tracing has already been started"}}
    _down(alice, {**failed, "sessionId": "SA"})
    assert shared.holder is None
    _send(alice, "Tracing.start", {}, "SA")
    assert _send(bob, "Tracing.start", {}, "SB").kind is Kind.BLOCK
    _down(alice, {"method": "Target.detachedFromTarget", "params": {"sessionId": "SA"}})
    assert _send(bob, "Tracing.start", {}, "SB").kind is Kind.FORWARD


def test_with_one_scope_nothing_changes() -> None:
    state = ClientState(7, Identity("alice"))
    state.sessions["S"] = SessionInfo("T")
    params = {"transferMode": "ReturnAsStream"}
    step = _send(state, "Tracing.start", params, "S")
    assert step.kind is Kind.FORWARD and json.loads(step.data)["params"] == params
    data = {"method": "Tracing.dataCollected", "params": {"value": []}, "sessionId": "S"}
    assert _down(state, data).kind is Down.PASS


def test_a_pages_lone_surrogates_do_not_break_the_trace(recorded: dict[str, Any]) -> None:
    """Chromium writes a page's lone surrogate (a mark's name) as ``\\ud800``:
    read, kept and written back as an escape."""
    info = recorded["info"]
    mark = {"name": "mark\ud800", "ph": "R", "pid": info["alice_pid"], "args": {}}
    chunk = json.dumps({"method": "Tracing.dataCollected", "params": {"value": [mark]}})
    trace = Trace(info["tA"], None, stream=False)
    for raw in [*recorded["chunks"], chunk]:
        trace.collect(raw)
    messages = traces.finish(Ending(trace, {"params": {}})).deliver(Traces(), 7)
    assert "mark\\ud800" in messages[-2] and "sessionId" not in messages[-1]


def test_a_holder_others_waited_on_waits_its_turn() -> None:
    """A red team's agent started again at each completion and held the
    trace for good: after a hold another scope waited on, its scope waits
    TURN_S while others may start."""
    now = [1000.0]
    shared = Traces(max_s=60, clock=lambda: now[0])
    shared.take(1, "S", 1, "alice", "a", Trace("T", "S"))
    assert shared.held(2, "B", "b") is not None  # bob waits
    assert shared.completed(1, "S") is not None
    refused = shared.held(1, "S", "a")
    assert refused is not None and "go first" in refused.message
    assert shared.held(2, "B", "b") is None  # bob's turn
    shared.take(2, "B", 1, "bob", "b", Trace("U", "B"))
    assert shared.turn is None
    assert shared.completed(2, "B") is not None
    assert shared.held(1, "S", "a") is None  # no one waited on bob
    now[0] += traces.TURN_S + 1
    assert shared.held(1, "S", "a") is None


def test_unread_streams_fit_one_budget_across_connections() -> None:
    shared = Traces()
    big = traces.STREAMS_BUDGET // 3 + 1
    handles = [
        shared.keep_stream(n, traces.TraceStream(b"x" * big, base64=False)) for n in (1, 2, 3)
    ]
    assert shared.stream(1, handles[0]) is None  # the oldest, let go
    assert shared.stream(2, handles[1]) is not None and shared.stream(3, handles[2]) is not None


def test_the_filter_lets_each_chunk_go_once_read(recorded: dict[str, Any]) -> None:
    chunks = [c.encode() for c in recorded["chunks"]]
    trace_filter.keep_own(chunks, recorded["info"]["tA"])
    assert chunks == [b""] * len(chunks)
