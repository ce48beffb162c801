"""Past one machine: the scheduler's model (:mod:`agentenv.harness.simulate`),
fed with this machine's measured figures (:class:`Figures`, each with its
source), run at several K and pool sizes, and the sizing rule it gives.

- 10,000 tasks arriving at 25 a second (Poisson) over at most 100 machines of
  this machine's 2 cores: at K = 1, 4, 8 and 16 scopes a computer, with 5, 25
  and 100 machines warm (the floor the autoscaler keeps). Throughput, p99 queue
  wait, p95 added step latency, refusals (429), failures after a retry, and
  cost: machine-seconds paid a completed task, and dollars a thousand tasks at
  ``Figures.core_hour_usd`` a core-hour (assumed).
- The sizing rule: the most scopes one computer holds, every scope busy, with
  the p95 of a step's added latency within 50 ms; so scopes a core, and a GiB
  at that K, and how busy its cores are on average; for the scripted agent's
  think time and a slower agent's on this machine's 2 cores, and the scripted
  one's on 4 and 8.

No Docker, no browser: pure Python, in seconds.
"""

from __future__ import annotations

import dataclasses
import itertools
import time

from agentenv.harness.simulate import (
    Figures,
    Load,
    ModelFleet,
    computer_cpu_s,
    computer_mib,
    cost_usd,
    scopes_per_core,
    simulate,
)
from bench.stats import percentile, table

KS = (1, 4, 8, 16)
POOLS = (5, 25, 100)
LOAD = Load(tasks=10_000, rate=25.0, seed=1)
#: A step's p95 added latency the sizing holds to (s): issue 41's 50 ms.
TARGET_S = 0.050
#: (the agent's own time between steps (s), cores): the scripted agent's
#: think time (the figures' default) and an assumed agent that asks a model at
#: each step, on this machine's 2 cores; the scripted one on 4 and 8 cores.
SIZES = ((1.0, 2), (5.0, 2), (1.0, 4), (1.0, 8))
#: The sizing search stops here: nothing past K = 8 is measured, and a
#: computer's other limits (the relay's one event loop, its connections,
#: Chromium's processes) are not in the model.
MOST = 256


def _fleet(figures: Figures) -> str:
    rows: list[list[str]] = []
    for k in KS:
        for pool in POOLS:
            out = simulate(figures, ModelFleet(k=k, pool=pool, queue_limit=500), LOAD)
            rows.append(
                [
                    str(k),
                    str(pool),
                    str(out.peak_machines),
                    f"{out.completed}/{out.failed}/{out.refused}",
                    f"{out.retried} ({out.crashes})",
                    f"{out.throughput:.1f}",
                    f"{percentile(out.waits, 99):.2f} s",
                    f"{percentile(out.added, 95) * 1000:.0f} ms",
                    f"{out.machine_s / max(out.completed, 1):.2f}",
                    f"${cost_usd(figures, out) * 1000:.3f}",
                ]
            )
    return table(
        f"{LOAD.tasks:,} tasks at {LOAD.rate:g} a second over at most 100 machines of "
        f"{figures.cores} cores (queue 500, wait 60 s, margin 1.25, scaled every 5 s)",
        [
            "K",
            "warm",
            "peak machines",
            "done/failed/429",
            "retried (crashes)",
            "tasks/s",
            "p99 queue wait",
            "p95 added step latency",
            "machine-s a task",
            "$ a 1,000 tasks",
        ],
        rows,
    )


def _sizing(figures: Figures) -> str:
    rows: list[list[str]] = []
    # Nothing past K = 8 is measured: each size twice, the CPU a task
    # extrapolated (falling on) and held at K = 8's (a flat last segment).
    held_at_8 = (*figures.cpu_a_task, (9, computer_cpu_s(figures, 8)))
    for (think, cores), past_8 in itertools.product(SIZES, ("extrapolated", "held")):
        fed = dataclasses.replace(figures, think_s=think, cores=cores)
        if past_8 == "held":
            fed = dataclasses.replace(fed, cpu_a_task=held_at_8)
        k, reached = scopes_per_core(fed, TARGET_S, most=MOST)
        mib = computer_mib(fed, k)
        cpu = computer_cpu_s(fed, k)
        # A task's time holding its scope, alone: its open, its bursts, its thinking.
        held = fed.scope_open_s + cpu + (fed.steps - 1) * think
        rows.append(
            [
                f"{think:g} s",
                str(cores),
                f"{k}+" if k == MOST else str(k),
                f"{reached * 1000:.0f} ms",
                f"{k / cores:.1f}{'+' if k == MOST else ''}",
                f"{mib:.0f} MiB",
                f"{k / (mib / 1024):.1f}",
                f"{cpu:.2f} s ({past_8})",
                f"{k * cpu / held / cores:.0%}",
            ]
        )
    return table(
        f"sizing: the most scopes a computer holds, every scope busy, at a p95 added "
        f"step latency within {TARGET_S * 1000:.0f} ms",
        [
            "think",
            "cores",
            "scopes",
            "p95 added",
            "scopes a core",
            "memory",
            "scopes a GiB",
            "computer CPU a task (past K = 8)",
            "cores busy",
        ],
        rows,
    )


def run() -> str:
    figures = Figures()
    began = time.monotonic()
    fleet = _fleet(figures)
    sizing = _sizing(figures)
    took = time.monotonic() - began
    return f"{fleet}\n{sizing}\n\n(simulated in {took:.1f} s)"
