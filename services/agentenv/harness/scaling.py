"""How many computers a fleet wants, and which ones leave when it shrinks.

Pure: no I/O, no clock. The one home of the scaling formula, which the
simulation (:mod:`agentenv.harness.simulate`), the Swarm pool
(:mod:`agentenv.harness.swarm_pool`) and the Kubernetes manifests'
PromQL (``deploy/kubernetes/prometheus/rules.yaml``, held to this by a unit
test) all use:

    wanted = ceil(ceil((queued + running) / K) * margin), within [least, most]

``running`` counts the tasks in flight (one scope each), ``queued`` the ones
waiting for a scope. Counting running tasks as well as queued ones is the
point: a scaler that counts its queue alone (Selenium Grid's KEDA scaler,
docker-selenium #2808) asks for no computer while every scope is busy and
nothing waits, and shrinks a busy fleet under its own work.

Which computers leave is :func:`drain_plan`'s, chosen so that Docker Swarm's
own scale-down removes exactly them (see :mod:`agentenv.harness.swarm_pool`
for the evidence): on each node, Swarm numbers a service's tasks 1, 2, 3, ...
running ones first, and removes those with the highest numbers. A plan that
leaves every node it takes from at one level R, and no node above R, makes
the drained (stopped) tasks exactly the ones numbered above R: no tie for
Swarm to break its own way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MARGIN",
    "Member",
    "ScalingError",
    "drain_plan",
    "may_scale_down",
    "target_machines",
    "wanted_computers",
]

#: The margin's default: a quarter more computers than the load fills (the
#: Kubernetes rules' ``* 1.25``; a unit test holds them equal).
MARGIN = 1.25


class ScalingError(ValueError):
    """A scaling setting that cannot work (K below 1, a margin below 1, a
    floor above the ceiling)."""


def target_machines(queued: int, running: int, k: int, margin: float) -> int:
    """The machines the autoscaler asks for: ceil(ceil((queued + running) / k)
    * margin). Running tasks count: counting the queue alone (the failure
    issue 41 cites from docker-selenium #2808) asks for none while every scope
    is busy and nothing waits."""
    return math.ceil(math.ceil((queued + running) / k) * margin)


def wanted_computers(
    queued: int, running: int, *, k: int, margin: float, least: int, most: int
) -> int:
    """:func:`target_machines` within ``[least, most]``: the replicas a pool asks
    its engine for."""
    if k < 1:
        raise ScalingError(f"K (scopes a computer) is {k}: give 1 or more")
    if margin < 1.0:
        raise ScalingError(f"the margin is {margin}: give 1.0 or more (1.25: a quarter spare)")
    if not 0 <= least <= most:
        raise ScalingError(f"the pool's bounds are [{least}, {most}]: give 0 <= least <= most")
    if queued < 0 or running < 0:
        raise ScalingError(f"queued {queued} and running {running} cannot be negative")
    return max(least, min(most, target_machines(queued, running, k, margin)))


@dataclass(frozen=True)
class Member:
    """One computer of a pool as the drain sees it: its key, the node its task
    runs on, and how many tasks it holds now."""

    key: str
    node: str
    busy: int


def drain_plan(members: Sequence[Member], wanted: int) -> list[str]:
    """The keys of the computers to drain so that ``len(members)`` comes down
    towards ``wanted``: as many as can leave at one level (see the module's
    docstring), at most ``len(members) - wanted``, the least busy first on
    each node. Empty when none should or can leave this round (the next round
    takes more, as the load allows)."""
    surplus = len(members) - max(wanted, 0)
    if surplus <= 0:
        return []
    by_node: dict[str, list[Member]] = {}
    for member in members:
        by_node.setdefault(member.node, []).append(member)
    counts = sorted((len(group) for group in by_node.values()), reverse=True)
    # The lowest level R whose cut, sum(max(0, c - R)), is within the surplus:
    # every node above R comes down to R, and only those.
    level = counts[0]
    while level > 0 and sum(max(0, c - (level - 1)) for c in counts) <= surplus:
        level -= 1
    chosen: list[str] = []
    for node in sorted(by_node):
        group = sorted(by_node[node], key=lambda m: (m.busy, m.key))
        chosen.extend(m.key for m in group[: max(0, len(group) - level)])
    return chosen


def may_scale_down(stopped: int, starting: int, stopping: int, lent_not_running: int) -> bool:
    """Whether a pool may now scale its service down by its ``stopped``
    replicas (drained, their containers ended): only when those are the only
    slots Swarm does not see running. A replica starting, one whose container
    is still stopping, or one lent before Swarm lists its task running (it is
    ``starting`` to Swarm until the image's first HEALTHCHECK passes) would tie
    with them in Swarm's sort, and might be removed in their place."""
    return stopped > 0 and starting == 0 and stopping == 0 and lent_not_running == 0
