"""The scheduler's model (:mod:`agentenv.harness.simulate`): what it must never
do, whatever the figures: lose a task, pass its queue's bound, scale on the
queue alone, give two answers for one seed."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from agentenv.harness.simulate import (
    Figures,
    Load,
    ModelFleet,
    computer_cpu_s,
    scopes_per_core,
    simulate,
    target_machines,
)

FIGURES = Figures()
#: Chromium dying every few minutes on each machine, so retries and failures happen.
CRASHING = dataclasses.replace(FIGURES, crashes_per_hour=60.0)


def test_no_task_is_lost() -> None:
    # Too few machines for the load, a short queue and wait, and crashes: every
    # way out is taken, and each task leaves by exactly one.
    out = simulate(
        CRASHING,
        ModelFleet(k=4, pool=2, max_machines=6, queue_limit=50, queue_timeout_s=5.0),
        Load(tasks=3000, rate=20.0, seed=3),
    )
    assert out.completed + out.failed + out.refused == out.submitted == 3000
    assert out.completed > 0 and out.failed > 0 and out.refused > 0 and out.retried > 0


def test_a_task_fails_only_after_its_retry() -> None:
    # With a queue that never gives up, a task fails only when it crashed on
    # two machines: every failure had been retried.
    fleet = ModelFleet(k=4, pool=10, max_machines=10, queue_timeout_s=math.inf, queue_limit=10**6)
    out = simulate(CRASHING, fleet, Load(tasks=3000, rate=8.0, seed=5))
    assert out.crashes > 0 and out.retried > 0
    assert out.failed <= out.retried
    once = simulate(CRASHING, dataclasses.replace(fleet, retries=0), Load(3000, 8.0, seed=5))
    assert once.retried == 0 and once.failed > 0


def test_a_crash_fails_only_its_machines_tasks_and_they_run_again_elsewhere() -> None:
    # Back at once, and every other scope busy: its own machine is the first
    # place a retry could go.
    figures = dataclasses.replace(CRASHING, chromium_restart_s=0.0)
    fleet = ModelFleet(k=4, pool=6, max_machines=6, queue_timeout_s=math.inf, queue_limit=10**6)
    out = simulate(figures, fleet, Load(tasks=3000, rate=8.0, seed=5))
    placed = set(out.placed)
    lost = [(machine, ids) for machine, ids in out.lost if ids]
    assert len(lost) > 5
    for machine, ids in lost:
        assert len(ids) <= fleet.k
        for task, attempt in ids:
            # It was running there, and its retry ran on another machine.
            assert (task, attempt, machine) in placed
            retry = [m for t, a, m in out.placed if t == task and a == attempt + 1]
            assert attempt == fleet.retries or (retry and retry[0] != machine)


def test_the_queue_bound_is_kept() -> None:
    out = simulate(
        FIGURES,
        ModelFleet(k=2, pool=1, max_machines=2, queue_limit=40),
        Load(tasks=2000, rate=30.0, seed=2),
    )
    # It was reached (so the bound was tested), never passed, and what came
    # past it was refused.
    assert out.peak_queue == 40
    assert out.refused > 0


def test_a_wait_past_its_timeout_is_refused() -> None:
    out = simulate(
        FIGURES,
        ModelFleet(k=1, pool=1, max_machines=1, queue_limit=10**6, queue_timeout_s=3.0),
        Load(tasks=500, rate=5.0, seed=2),
    )
    assert out.refused > 0
    assert max(out.waits) <= 3.0


def test_the_scaling_formula_counts_running_tasks() -> None:
    # Counting the queue alone (issue 41 cites docker-selenium #2808) would ask
    # for no machine here, with 16 tasks running and none waiting.
    assert target_machines(queued=0, running=16, k=4, margin=1.0) == 4
    assert target_machines(queued=3, running=5, k=4, margin=1.0) == 2
    assert target_machines(queued=1, running=0, k=4, margin=1.25) == 2
    assert target_machines(queued=0, running=0, k=4, margin=1.25) == 0


def test_the_autoscaler_keeps_machines_for_running_tasks() -> None:
    fleet = ModelFleet(k=4, pool=0, max_machines=100, margin=1.0)
    out = simulate(FIGURES, fleet, Load(tasks=2000, rate=10.0, seed=4))
    # The case #2808 gets wrong happened: tasks running, nothing queued.
    assert any(s.queued == 0 and s.running > 0 for s in out.samples)
    for sample in out.samples:
        assert sample.target >= math.ceil((sample.queued + sample.running) / fleet.k)
    assert out.completed == 2000


def test_the_same_seed_gives_the_same_run() -> None:
    fleet = ModelFleet(k=8, pool=3)
    first = simulate(CRASHING, fleet, Load(tasks=2000, seed=7))
    again = simulate(CRASHING, fleet, Load(tasks=2000, seed=7))
    other = simulate(CRASHING, fleet, Load(tasks=2000, seed=8))
    assert first == again
    assert first.waits != other.waits


def test_one_scope_a_computer_is_one_computer_a_task() -> None:
    out = simulate(FIGURES, ModelFleet(k=1, pool=5, max_machines=40), Load(2000, rate=5.0, seed=1))
    assert out.completed == 2000
    assert out.peak_on_machine == 1
    # A task alone on its computer waits for no other's CPU.
    assert len(out.added) >= 2000 * FIGURES.steps
    assert max(out.added) == pytest.approx(0.0, abs=1e-9)
    assert all(s.target >= s.queued + s.running for s in out.samples if s.target < 40)


def test_bursts_share_the_cores() -> None:
    # Two one-second bursts at once on one core take two seconds each.
    figures = dataclasses.replace(
        FIGURES,
        cores=1,
        steps=1,
        think_s=0.0,
        scope_open_s=0.0,
        crashes_per_hour=0.0,
        cpu_a_task=((1, 1.0), (2, 1.0)),
    )
    out = simulate(
        figures, ModelFleet(k=2, pool=1, max_machines=1), Load(tasks=2, all_at_once=True)
    )
    assert out.added == pytest.approx([1.0, 1.0])
    assert out.makespan_s == pytest.approx(2.0)
    # On two cores they do not wait for each other.
    two = simulate(
        dataclasses.replace(figures, cores=2),
        ModelFleet(k=2, pool=1, max_machines=1),
        Load(tasks=2, all_at_once=True),
    )
    assert two.added == [0.0, 0.0]


def test_a_computers_cpu_a_task_follows_the_measured_points() -> None:
    assert computer_cpu_s(FIGURES, 1) == 1.17
    assert computer_cpu_s(FIGURES, 8) == 0.34
    values = [computer_cpu_s(FIGURES, k) for k in range(1, 33)]
    assert all(a > b for a, b in itertools.pairwise(values))
    assert 0.54 < computer_cpu_s(FIGURES, 3) < 1.17
    with pytest.raises(ValueError, match="at least one scope"):
        computer_cpu_s(FIGURES, 0)


def test_more_think_time_holds_more_scopes() -> None:
    few, at = scopes_per_core(FIGURES, 0.05, most=64)
    many, _ = scopes_per_core(dataclasses.replace(FIGURES, think_s=5.0), 0.05, most=64)
    assert 1 <= few < many
    assert at <= 0.05


def test_a_fleet_without_scopes_is_refused() -> None:
    with pytest.raises(ValueError, match="k must be 1 or more"):
        simulate(FIGURES, ModelFleet(k=0, pool=1), Load(tasks=1))
