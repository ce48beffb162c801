"""The scaling formula and the drain's choice (:mod:`agentenv.harness.scaling`):
one formula for the simulation, the Swarm pool and the Kubernetes rules."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from agentenv.harness import simulate
from agentenv.harness.scaling import (
    MARGIN,
    Member,
    ScalingError,
    drain_plan,
    may_scale_down,
    target_machines,
    wanted_computers,
)

ROOT = Path(__file__).resolve().parents[2]


def test_running_tasks_count_as_well_as_queued_ones() -> None:
    # docker-selenium #2808 the other way round: a full fleet with nothing
    # queued keeps its computers.
    assert wanted_computers(0, 16, k=4, margin=1.0, least=0, most=10) == 4
    assert wanted_computers(16, 0, k=4, margin=1.0, least=0, most=10) == 4
    assert wanted_computers(3, 5, k=4, margin=1.0, least=0, most=10) == 2
    # ceil(ceil(9 / 4) * 1.25) = ceil(3.75) = 4
    assert wanted_computers(4, 5, k=4, margin=1.25, least=0, most=10) == 4


def test_the_wanted_number_stays_within_the_bounds() -> None:
    assert wanted_computers(0, 0, k=4, margin=1.25, least=1, most=3) == 1
    assert wanted_computers(100, 100, k=4, margin=1.25, least=1, most=3) == 3
    assert wanted_computers(1, 0, k=4, margin=1.25, least=0, most=3) == 2


@pytest.mark.parametrize(
    ("k", "margin", "least", "most", "cause"),
    [
        (0, 1.25, 1, 3, "K"),
        (4, 0.5, 1, 3, "margin"),
        (4, 1.25, 4, 3, "bounds"),
        (4, 1.25, -1, 3, "bounds"),
    ],
)
def test_settings_that_cannot_work_are_refused(
    k: int, margin: float, least: int, most: int, cause: str
) -> None:
    with pytest.raises(ScalingError, match=cause):
        wanted_computers(0, 0, k=k, margin=margin, least=least, most=most)


def test_one_formula_in_one_place() -> None:
    # The simulation scales on the same function, and the Kubernetes rules'
    # margin is the default one.
    assert simulate.target_machines is target_machines
    rules = (ROOT / "deploy" / "kubernetes" / "prometheus" / "rules.yaml").read_text()
    found = re.search(r"\)\s*\*\s*([0-9.]+)\s*\n", rules)
    assert found is not None and float(found.group(1)) == MARGIN


def _removed_by_swarm(members: list[Member], drained: set[str], replicas: int) -> set[str]:
    """The slots swarmkit's reconcile may remove, over every way its unstable
    sorts could break a tie (services.go: running first, numbered per node,
    the highest numbers go): exactly ``len(members) - replicas`` of them when
    no tie is left to it, more when one is."""
    index: dict[str, int] = {}
    per_node: Counter[str] = Counter()
    for m in sorted(members, key=lambda m: m.key in drained):  # running first
        per_node[m.node] += 1
        index[m.key] = per_node[m.node]
    cut = len(members) - replicas
    ranked = sorted(index.values(), reverse=True)
    threshold = ranked[cut - 1]
    sure = {k for k, i in index.items() if i > threshold}
    maybe = {k for k, i in index.items() if i == threshold}
    return sure | maybe


def test_on_one_node_the_least_busy_leave() -> None:
    members = [Member("a", "n1", 2), Member("b", "n1", 0), Member("c", "n1", 1)]
    assert drain_plan(members, 2) == ["b"]
    assert sorted(drain_plan(members, 1)) == ["b", "c"]
    assert drain_plan(members, 3) == []
    assert drain_plan(members, 5) == []


@pytest.mark.parametrize(
    ("layout", "wanted"),
    [
        ({"n1": 3, "n2": 3, "n3": 1}, 6),
        ({"n1": 3, "n2": 3, "n3": 1}, 5),
        ({"n1": 4, "n2": 2}, 5),
        ({"n1": 4, "n2": 2}, 2),
        ({"n1": 2, "n2": 2, "n3": 2}, 4),
        ({"n1": 5}, 1),
        ({"n1": 1, "n2": 1}, 1),
    ],
)
def test_swarm_can_only_remove_the_drained_ones(layout: dict[str, int], wanted: int) -> None:
    """Whatever tie Swarm's sorts break, the slots it removes when scaled down by
    the drained count are the drained ones (on several nodes a cut that would
    leave a tie is not made: fewer leave this round)."""
    members = [
        Member(f"{node}-{i}", node, busy=i % 3) for node, n in layout.items() for i in range(n)
    ]
    drained = set(drain_plan(members, wanted))
    assert len(drained) <= len(members) - wanted
    if drained:
        removed = _removed_by_swarm(members, drained, len(members) - len(drained))
        assert removed == drained


def test_a_cut_that_would_leave_a_tie_waits() -> None:
    # Two nodes hold the most: removing one replica would be Swarm's pick of the two.
    members = [Member(f"{n}{i}", n, 0) for n in ("a", "b") for i in range(2)]
    assert drain_plan(members, 3) == []
    assert sorted(drain_plan(members, 2)) == ["a0", "b0"]


def test_a_scale_down_waits_until_the_stopped_replicas_alone_are_not_running() -> None:
    """Swarm removes the slots it does not see running: the stopped ones must
    be the only ones, or it may remove a starting or lent one instead."""
    assert may_scale_down(stopped=1, starting=0, stopping=0, lent_not_running=0)
    assert not may_scale_down(stopped=0, starting=0, stopping=0, lent_not_running=0)
    assert not may_scale_down(stopped=1, starting=1, stopping=0, lent_not_running=0)
    assert not may_scale_down(stopped=1, starting=0, stopping=1, lent_not_running=0)
    # Lent at its own /readyz while Swarm still lists it starting (its first
    # HEALTHCHECK not yet passed): it would tie with the stopped one.
    assert not may_scale_down(stopped=1, starting=0, stopping=0, lent_not_running=1)
