"""Where a batch on scopes puts its tasks (:mod:`agentenv.harness.scheduling`),
read from ``/metrics`` texts the computers' own collectors write."""

from __future__ import annotations

import pytest

from agentenv.harness.fleet import samples
from agentenv.harness.scheduling import (
    Schedule,
    StartComputer,
    Use,
    Wait,
    attempt_status,
    pool_size,
    retry,
    whole,
)
from agentenv.metrics import AppCounts, RelayCounts, render


def _metrics(
    open_: int,
    capacity: int,
    queued: int = 0,
    restarts: int = 0,
    relay: float = 1000.0,
    app: float = 999.0,
) -> str:
    """A computer's /metrics: its relay's counts (started at ``relay``) and
    its app server's (started at ``app``)."""
    counts = RelayCounts(
        scopes_open=lambda: open_,
        scopes_capacity=capacity,
        scopes_queued=lambda: queued,
        restarts=restarts,
        started=relay,
    )
    return (render(counts) + render(AppCounts(started=app))).decode()


def _pool(k: int = 4, parallel: int = 8, capacity: int | None = None) -> Schedule:
    return Schedule(k, pool_size(parallel, k), capacity if capacity is not None else k)


def _started(schedule: Schedule, key: str, image: str | None = None) -> None:
    schedule.starting(key, image)
    schedule.ready(key)


def test_the_pool_holds_ceil_parallel_over_k_computers() -> None:
    assert pool_size(8, 4) == 2
    assert pool_size(9, 4) == 3
    assert pool_size(1, 8) == 1
    assert pool_size(4, 1) == 4


def test_tasks_start_computers_up_to_the_pool_then_share_them() -> None:
    schedule = _pool(k=2, parallel=4)
    assert schedule.place(1, None) == StartComputer()
    schedule.starting("a", None)
    schedule.take("a", "t1", 1)
    # The pool holds 2: the second task starts the second computer...
    assert schedule.place(1, None) == StartComputer()
    schedule.starting("b", None)
    schedule.take("b", "t2", 1)
    # ...and the third waits on one still starting, the fewest tasks first.
    assert schedule.place(1, None) == Use("a")
    schedule.take("a", "t3", 1)
    assert schedule.place(1, None) == Use("b")
    schedule.take("b", "t4", 1)
    # Both full (K = 2): the fifth waits.
    assert schedule.place(1, None) == Wait()
    schedule.ready("a")
    schedule.end("a", "t1")
    assert schedule.place(1, None) == Use("a")


def test_a_ready_computer_with_room_goes_first() -> None:
    schedule = _pool(k=4, parallel=8)
    schedule.starting("a", None)
    schedule.take("a", "t1", 1)
    _started(schedule, "b")
    schedule.take("b", "t2", 1)
    schedule.take("b", "t3", 1)
    assert schedule.place(1, None) == Use("b")


def test_never_past_the_capacity_its_metrics_say() -> None:
    """The computer says it holds 2 scopes (K is 4): a third task waits."""
    schedule = _pool(k=4, parallel=4)
    _started(schedule, "a")
    assert schedule.seen("a", samples(_metrics(open_=0, capacity=2))) is None
    schedule.take("a", "t1", 1)
    schedule.take("a", "t2", 1)
    assert schedule.place(1, None) == Wait()


def test_scopes_others_opened_and_opens_queued_take_room() -> None:
    schedule = _pool(k=4, parallel=4)
    _started(schedule, "a")
    schedule.take("a", "t1", 1)
    # One of ours and two someone else's are open; one open is queued there.
    schedule.seen("a", samples(_metrics(open_=3, capacity=4, queued=0)))
    assert schedule.place(1, None) == Use("a")
    schedule.seen("a", samples(_metrics(open_=3, capacity=4, queued=1)))
    assert schedule.place(1, None) == Wait()
    # Ours closed since the reading: the others' two still count, no more.
    schedule.seen("a", samples(_metrics(open_=3, capacity=4, queued=0)))
    schedule.end("a", "t1")
    assert schedule.place(2, None) == Use("a")
    assert schedule.place(3, None) == Wait()


def test_a_task_of_several_agents_needs_a_scope_each() -> None:
    schedule = Schedule(2, 1, 4)
    _started(schedule, "a")
    schedule.take("a", "t1", 3)
    assert schedule.place(2, None) == Wait()
    assert schedule.place(1, None) == Use("a")
    with pytest.raises(ValueError, match="needs 5 scopes"):
        schedule.place(5, None)


def test_computers_of_another_image_are_not_used() -> None:
    schedule = _pool(k=4, parallel=8)
    _started(schedule, "a", image="one")
    assert schedule.place(1, "two") == StartComputer()


def test_a_computer_whose_chromium_restarted_is_broken_and_replaced() -> None:
    schedule = _pool(k=2, parallel=4)
    _started(schedule, "a")
    _started(schedule, "b")
    for task in ("t1", "t2"):
        schedule.take("a", task, 1)
    schedule.take("b", "t3", 1)
    assert schedule.seen("a", samples(_metrics(open_=2, capacity=2, restarts=0))) is None
    why = schedule.seen("a", samples(_metrics(open_=0, capacity=2, restarts=1)))
    assert why == "its Chromium restarted"
    assert schedule.is_broken("a")
    # No task goes there again; its replacement starts at once (it no longer counts).
    assert schedule.place(1, None) == Use("b")
    schedule.take("b", "t4", 1)
    assert schedule.place(1, None) == StartComputer()
    # Given back only when its last task in flight has ended.
    schedule.end("a", "t1")
    assert schedule.drained() == []
    schedule.end("a", "t2")
    assert schedule.drained() == ["a"]
    assert "a" not in schedule.hosts


@pytest.mark.parametrize(
    ("program", "why"), [("relay", "its relay restarted"), ("app", "its app server restarted")]
)
def test_a_computer_whose_relay_or_app_restarted_is_broken(program: str, why: str) -> None:
    """A relay that restarts closes the scopes opened before it (their tokens
    answer 401), and starts its count of Chromium restarts from 0 again; an
    app server's MCP sessions die with it: the start time says so."""
    schedule = _pool(k=2, parallel=4)
    _started(schedule, "a")
    _started(schedule, "b")
    schedule.take("a", "t1", 1)
    first = samples(_metrics(open_=1, capacity=2, restarts=1))
    assert schedule.seen("a", first) is None
    assert schedule.seen("a", samples(_metrics(open_=1, capacity=2, restarts=1))) is None
    assert not schedule.is_broken("a")
    later = {"relay": 1000.0, "app": 999.0, program: 2000.0}
    restarted = _metrics(open_=0, capacity=2, restarts=0, relay=later["relay"], app=later["app"])
    assert schedule.seen("a", samples(restarted)) == why
    assert schedule.is_broken("a")
    assert schedule.place(1, None) == Use("b")
    schedule.end("a", "t1")
    assert schedule.drained() == ["a"]


def test_a_reading_without_the_relays_counts_changes_nothing() -> None:
    """The app names a relay that does not answer (restarting) in a comment
    and gives its own counts: not a whole reading, so neither the room nor
    the start times are taken from it."""
    schedule = _pool(k=2, parallel=2, capacity=4)
    _started(schedule, "a")
    assert schedule.seen("a", samples(_metrics(open_=3, capacity=4))) is None
    partial = samples("# the relay is not answering\n" + render(AppCounts(started=999.0)).decode())
    assert not whole(partial)
    assert schedule.seen("a", partial) is None
    assert not schedule.is_broken("a")
    assert schedule.hosts["a"].open_seen == 3.0
    assert not schedule.hosts["a"].room(2, 2)  # 3 of 4 open, as last read whole
    assert schedule.seen("a", samples(_metrics(open_=3, capacity=4, relay=3000.0))) == (
        "its relay restarted"
    )


def test_a_restart_before_the_first_reading_is_not_counted() -> None:
    schedule = _pool()
    _started(schedule, "a")
    assert schedule.seen("a", samples(_metrics(open_=0, capacity=4, restarts=2))) is None
    assert schedule.seen("a", samples(_metrics(open_=0, capacity=4, restarts=2))) is None
    assert not schedule.is_broken("a")


def test_a_retry_goes_to_another_computer() -> None:
    schedule = _pool(k=4, parallel=8)
    _started(schedule, "a")
    _started(schedule, "b")
    assert schedule.place(1, None, avoid=frozenset({"a"})) == Use("b")
    # The only computer is the one to avoid: another starts, past the pool's size.
    lone = _pool(k=4, parallel=4)
    _started(lone, "a")
    assert lone.place(1, None, avoid=frozenset({"a"})) == StartComputer()


def test_only_infrastructure_failures_are_tried_again() -> None:
    assert retry("infrastructure", 1, 1)
    assert not retry("infrastructure", 2, 1)
    assert retry("infrastructure", 2, 2)
    assert not retry("failed", 1, 1)
    assert not retry("done", 1, 3)
    assert not retry("infrastructure", 1, 0)


def test_a_task_that_failed_on_a_computer_that_broke_is_infrastructure() -> None:
    assert attempt_status("failed", broke=True) == "infrastructure"
    assert attempt_status("done", broke=True) == "done"
    assert attempt_status("failed", broke=False) == "failed"


def test_a_tasks_steps_act_in_the_scopes_opened_for_its_agents() -> None:
    from agentenv.harness.computer import ComputerError
    from agentenv.harness.scoped import ScopedComputer

    one = ScopedComputer("http://a", "http://c", scopes={"scripted": "s1"})
    assert one._in(None) == "s1"  # the step names no agent: the task's one
    assert one._in("scripted") == "s1"
    with pytest.raises(ComputerError, match="no agent 'other'"):
        one._in("other")  # never the home scope, nor another task's
    two = ScopedComputer("http://a", "http://c", scopes={"a": "s1", "b": "s2"})
    assert two._in("b") == "s2"
    with pytest.raises(ComputerError, match="several agents"):
        two._in(None)


@pytest.mark.parametrize("whole", [["--reuse"], ["--store", "file"]])
def test_k_above_one_with_a_computer_per_task_is_refused(
    whole: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from agentenv.harness.cli import main

    status = main(["run", "a.yaml", "b.yaml", *whole, "--scopes-per-computer", "2"])
    assert status == 2
    assert "--scopes-per-computer 1; nothing was deployed" in capsys.readouterr().err


def test_idle_computers_the_tasks_left_do_not_need_are_given_back() -> None:
    schedule = _pool(k=2, parallel=6)
    for key in ("a", "b", "c"):
        _started(schedule, key)
    schedule.take("a", "t1", 1)
    schedule.take("b", "t2", 1)
    # 6 tasks left want the whole pool: none is spare, busy or idle.
    assert schedule.spare(6) == []
    # 4 left (2 running, 2 waiting) want 2: the idle one goes.
    assert schedule.spare(4) == ["c"]
    assert "c" not in schedule.hosts
    # 2 running want 1, but both are busy: none goes until one is idle.
    assert schedule.spare(2) == []
    schedule.end("b", "t2")
    assert schedule.spare(1) == ["b"]
    # A computer still starting or broken is never given back as a spare.
    _started(schedule, "d")
    schedule.starting("e", None)
    schedule.broke("d")
    schedule.end("a", "t1")
    assert schedule.spare(0) == ["a"]
    assert set(schedule.hosts) == {"d", "e"}
    # A task placed after (a retry) starts one again.
    assert schedule.place(1, None) == StartComputer()
