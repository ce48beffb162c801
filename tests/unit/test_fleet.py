"""A batch's sums of its computers' ``/metrics`` (:class:`agentenv.harness.fleet.Fleet`),
from texts the computers' own collectors write."""

from __future__ import annotations

from agentenv.harness.fleet import Fleet, samples
from agentenv.metrics import AppCounts, RecorderCounts, RelayCounts, render


def _computer(acting: int, frames: int, agents: int, missing: int = 0) -> str:
    relay = RelayCounts(agents=agents, acting=acting, reading=2 * acting, guard={"file": 1})
    relay.lines = lambda: 10 * acting
    recorder = RecorderCounts(frames={"first": 1, "action": frames - 2, "last": 1}, missing=missing)
    app = AppCounts(sessions=lambda: 1)
    return b"".join(render(c) for c in (relay, recorder, app)).decode()


def test_samples_read_the_format_the_computers_write() -> None:
    found = samples(_computer(acting=3, frames=5, agents=2))
    assert found[("agentenv_cdp_commands_total", frozenset({("acts", "acting")}))] == 3
    assert found[("agentenv_frames_total", frozenset({("kind", "action")}))] == 3
    assert found[("agentenv_cdp_connections", frozenset({("kind", "agent")}))] == 2


def test_counters_outlive_their_computer_and_gauges_do_not() -> None:
    fleet = Fleet()
    assert fleet.seen("a", _computer(acting=3, frames=5, agents=2))
    assert fleet.seen("b", _computer(acting=4, frames=6, agents=1, missing=1))
    fleet.round(["a", "b"])
    assert fleet.total("agentenv_cdp_commands_total", acts="acting") == 7
    assert fleet.total("agentenv_cdp_commands_total") == 21
    assert fleet.total("agentenv_cdp_connections", kind="agent") == 3
    # b stops: its counts stay, its open connections and sessions do not.
    fleet.round(["a"])
    assert fleet.total("agentenv_frames_total") == 11
    assert fleet.total("agentenv_cdp_connections", kind="agent") == 2
    line = fleet.line()
    assert line.startswith("fleet: 1 of 2 computers answering; 2 agent connections open;")
    assert "21 CDP commands (7 acting), 2 refused by the guard" in line
    assert "70 log lines; 11 frames, 1 missing; 1 MCP sessions" in line


def test_a_computer_that_does_not_answer_keeps_its_last_counts() -> None:
    fleet = Fleet()
    fleet.seen("a", _computer(acting=3, frames=5, agents=2))
    assert not fleet.seen("a", None)
    assert not fleet.seen("a", "this is { not the format")
    fleet.round([])
    assert fleet.total("agentenv_cdp_commands_total", acts="acting") == 3
    assert fleet.total("agentenv_cdp_connections") == 0


def test_a_round_in_flight_does_not_overwrite_a_computers_last_word() -> None:
    fleet = Fleet()
    fleet.seen("a", _computer(acting=3, frames=5, agents=1))
    assert fleet.seen("a", _computer(acting=9, frames=12, agents=0), final=True)
    # An older answer of the round that began before "a" stopped lands late.
    assert not fleet.seen("a", _computer(acting=3, frames=5, agents=1))
    fleet.round([])
    assert fleet.total("agentenv_cdp_commands_total", acts="acting") == 9
