"""A discrete-event model of the harness's scheduler of tasks onto computers
that hold K scopes each (issue 41, "Past one machine"). Pure: no I/O, no
clock, stdlib only; the same seed gives the same run.

What it models:

- **Machines**, each one computer with ``cores`` cores, serving up to ``k``
  tasks at once, each in a scope of its own. A machine is paid for from the
  moment it is asked for (its start, ``computer_start_s``) until it is stopped.
- **A bounded queue** in front of them: a task that finds every scope busy
  waits, first come first served; past ``queue_limit`` queued, or after
  ``queue_timeout_s`` of waiting, it is refused (the computer's 429 with
  ``Retry-After``). A refused task is not sent again: the model counts it.
  A retry, already admitted, is queued whatever the bound (so the queue can
  pass it by the retries in it); one that waits past the timeout has failed.
- **Placement**: a queued task goes to the ready machine with the most tasks
  that still has a free scope (packing, so idle machines can be stopped).
- **A task**: its scope opened (``scope_open_s``), then ``steps`` steps, each
  a burst of the computer's CPU (the measured computer CPU a task at this K,
  split evenly), with the agent's own time between two steps (``think_s``,
  exponential, spent off the machine: the agent runs in the harness, not in
  the computer). The task holds its scope from the open to its last step.
- **CPU contention**: the bursts on one machine share its cores as processor
  sharing (n bursts on c cores each run at min(1, c / n) of a core). A step's
  *added latency* is how much longer its burst took than it would alone: the
  wait contention puts in front of an agent's command.
- **Autoscaling**: every ``scale_interval_s`` the fleet is set to
  ``target_machines(queued, running, k, margin)`` = ceil(ceil((queued +
  running) / k) * margin) machines (:mod:`agentenv.harness.scaling`, the
  formula's one home: the Swarm pool and the Kubernetes rules scale on it),
  within ``[pool, max_machines]``. Running
  tasks count as well as queued ones (the failure issue 41 cites from
  docker-selenium #2808 is counting the queue alone). New machines are ready
  ``computer_start_s`` later; only idle machines are stopped.
- **Crashes**: each ready machine's Chromium dies at ``crashes_per_hour``
  (a Poisson process). Only the tasks in flight on it fail; each is retried
  ``retries`` times, ahead of new tasks, on another machine; after that it
  counts as failed. The machine is back ``chromium_restart_s`` later.

What it does not model: the relay's single event loop (one agent's flood
slows another's commands beyond what cores explain: ``bench fairness``), the
network between agents and computers, memory pressure (memory is counted,
``computer_mib``, never short), a cloud's VM start
(the provisioning delay is a computer's start on a node already running),
clients that send a refused task again, and tasks whose work varies by site.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentenv.harness.scaling import target_machines

__all__ = [
    "Figures",
    "Load",
    "ModelFleet",
    "Outcome",
    "Sample",
    "computer_cpu_s",
    "computer_mib",
    "cost_usd",
    "scopes_per_core",
    "simulate",
    "target_machines",
]


@dataclass(frozen=True)
class Figures:
    """This machine's measured figures, each with its source; *assumed*
    where nothing here measured it, with a value on the safe (costly) side."""

    #: This machine's cores (the 2-core CI machine of every bench row).
    cores: int = 2
    #: The computers' own CPU a task (s) at K scopes a computer, measured at
    #: K = 1, 4 and 8: ``python -m bench density``, 2026-12-04 (issue 41's
    #: table): N computers 1.17 s a task at N = 8 (1.04 at 4: the larger is
    #: taken), one computer with N scopes 0.54 s at N = 4, 0.34 s at N = 8.
    #: Each run started its computers, so a warm pool's figure is lower.
    cpu_a_task: tuple[tuple[int, float], ...] = ((1, 1.17), (4, 0.54), (8, 0.34))
    #: An idle computer's memory (MiB): ``container``'s ``_idle_memory``, 2026-12-04.
    computer_mib: float = 254.0
    #: Memory an added scope costs (MiB): 28-30 MiB, ``density``, 2026-12-04
    #: (issue 41); 19-28 on 2026-12-01. The high end.
    scope_mib: float = 30.0
    #: *Assumed*: a warm scope's open is not measured yet (issue 41's goal is
    #: 50 ms p50). A fresh context with its tab, answering ``Runtime.evaluate``
    #: through the relay, took 172 ms p50 (issue 41, 2026-12-04): that, cold.
    scope_open_s: float = 0.172
    #: ``docker run`` to ``/readyz``: ``fleet``, 2026-12-01.
    computer_start_s: float = 2.09
    #: *Assumed*: Chromium's restart inside a computer (supervisord, the
    #: relay's reconnection) is not measured. Chromium alone starts on this
    #: host in 0.118 s (median of 6, headless, to "DevTools listening",
    #: 2026-12-04); the model takes a whole computer's start instead.
    chromium_restart_s: float = 2.09
    #: *Assumed*: no run here has seen Chromium die under agents (the bench
    #: runs report 0 Chromium restarts). One crash a machine-hour, high on purpose.
    crashes_per_hour: float = 1.0
    #: The fleet bench's scripted agent: its tab, a click, typing, a click.
    steps: int = 4
    #: *Assumed*: the agent's own time between two steps (s), off the
    #: machine. The scripted agent's own CPU is 1.53 s a task (``density``,
    #: 2026-12-01), about 0.4 s a step; an agent that asks a model waits longer.
    think_s: float = 1.0
    #: An agent's ``Runtime.evaluate("1")`` through the relay, p50 (s):
    #: ``relay``, 2026-12-01. A command's own round trip, beside the added
    #: latency a step waits; the model does not stretch it.
    evaluate_s: float = 0.000935
    #: *Assumed*: the price of a core-hour (USD), a round on-demand cloud figure.
    core_hour_usd: float = 0.04


@dataclass(frozen=True)
class ModelFleet:
    """How the harness runs its computers."""

    k: int
    #: Machines warm from the start, and the floor scaling keeps.
    pool: int
    max_machines: int = 100
    margin: float = 1.25
    queue_limit: int = 2000
    queue_timeout_s: float = 60.0
    scale_interval_s: float = 5.0
    retries: int = 1
    #: Keep the whole ``max_machines`` (no scaling at all).
    fixed: bool = False


@dataclass(frozen=True)
class Load:
    """Tasks arriving as a Poisson process (``rate`` a second), or all at once."""

    tasks: int = 10_000
    rate: float = 25.0
    seed: int = 1
    all_at_once: bool = False


@dataclass(frozen=True)
class Sample:
    """The autoscaler's reading at one tick."""

    at: float
    queued: int
    running: int
    target: int
    machines: int


@dataclass
class Outcome:
    submitted: int = 0
    completed: int = 0
    failed: int = 0
    refused: int = 0
    retried: int = 0
    crashes: int = 0
    #: Each admitted task's wait from arrival to its scope, per attempt.
    waits: list[float] = field(default_factory=list)
    #: Each step's added latency (s): its burst's time less its CPU.
    added: list[float] = field(default_factory=list)
    makespan_s: float = 0.0
    machine_s: float = 0.0
    peak_queue: int = 0
    peak_machines: int = 0
    #: The most tasks one machine ever held at once.
    peak_on_machine: int = 0
    samples: list[Sample] = field(default_factory=list)
    #: Where each attempt ran: (task, attempt, machine), as results.jsonl says.
    placed: list[tuple[int, int, int]] = field(default_factory=list)
    #: Each crash: its machine and the (task, attempt) in flight on it.
    lost: list[tuple[int, list[tuple[int, int]]]] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        """Completed tasks a second over the run."""
        return self.completed / self.makespan_s if self.makespan_s else 0.0


def computer_cpu_s(figures: Figures, k: int) -> float:
    """The computer's CPU a task at ``k`` scopes a computer: linear in 1/k
    between the measured points, and past the last one along its last segment
    (an extrapolation: nothing past K = 8 is measured)."""
    if k < 1:
        raise ValueError(f"k is {k}: a computer holds at least one scope")
    points = sorted(figures.cpu_a_task)
    exact = dict(points)
    if k in exact:
        return exact[k]
    for (k0, c0), (k1, c1) in itertools.pairwise(points):
        if k0 < k < k1:
            return c0 + (c1 - c0) * (1 / k - 1 / k0) / (1 / k1 - 1 / k0)
    (k0, c0), (k1, c1) = points[-2], points[-1]
    return c1 + (c1 - c0) * (1 / k - 1 / k1) / (1 / k1 - 1 / k0)


def computer_mib(figures: Figures, k: int) -> float:
    """A computer's memory with ``k`` scopes open."""
    return figures.computer_mib + figures.scope_mib * k


def cost_usd(figures: Figures, outcome: Outcome) -> float:
    """Cost a completed task: the machine-seconds paid (started, warm, idle
    or restarting) times its cores at ``core_hour_usd``, over completed tasks."""
    if not outcome.completed:
        return math.inf
    return outcome.machine_s * figures.cores * figures.core_hour_usd / 3600 / outcome.completed


@dataclass(eq=False)
class _Task:
    id: int
    arrived: float
    attempt: int = 0
    queued_at: float = 0.0
    #: The machine a retry must not go back to.
    avoid: int = -1
    machine: int = -1
    step: int = 0
    #: CPU left in the current burst (s); its whole size.
    left: float = 0.0
    burst: float = 0.0
    burst_began: float = 0.0


@dataclass(eq=False)
class _Machine:
    id: int
    asked: float
    ready: bool = False
    stopped: float = -1.0
    #: Bumped on a crash, so events meant for the machine before it are dropped.
    epoch: int = 0
    tasks: set[_Task] = field(default_factory=set)
    bursting: set[_Task] = field(default_factory=set)
    #: When the bursts' ``left`` was last brought up to date.
    since: float = 0.0
    #: Bumped at every change of the bursts, so a stale completion is dropped.
    version: int = 0


# Event kinds, in the order equal times are handled.
_ARRIVE, _READY, _OPENED, _BURST_END, _THINK_END, _CRASH, _TIMEOUT, _SCALE = range(8)


class _Sim:
    def __init__(self, figures: Figures, fleet: ModelFleet, load: Load) -> None:
        if fleet.k < 1 or fleet.pool < 0 or fleet.max_machines < max(1, fleet.pool):
            raise ValueError(
                f"fleet {fleet}: k must be 1 or more and 0 <= pool <= max_machines (max >= 1)"
            )
        self.f, self.fleet, self.load = figures, fleet, load
        self.rng = random.Random(load.seed)
        self.burst_cpu = computer_cpu_s(figures, fleet.k) / figures.steps
        self.events: list[tuple[float, int, int, tuple[object, ...]]] = []
        self.seq = 0
        self.now = 0.0
        self.machines: list[_Machine] = []
        # Retries go first; dicts keep arrival order and drop in O(1).
        self.retry_queue: dict[int, _Task] = {}
        self.queue: dict[int, _Task] = {}
        self.running = 0
        self.arrived = 0
        # Kept as they change, not counted at each event.
        self.free = 0
        self.live = 0
        self.out = Outcome()

    def at(self, when: float, kind: int, *args: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, kind, self.seq, args))

    # Machines.

    def ask(self, ready_now: bool) -> None:
        machine = _Machine(id=len(self.machines), asked=self.now)
        self.machines.append(machine)
        self.live += 1
        self.out.peak_machines = max(self.out.peak_machines, self.live)
        if ready_now:
            self.ready(machine)
        else:
            self.at(self.now + self.f.computer_start_s, _READY, machine, machine.epoch)

    def ready(self, machine: _Machine) -> None:
        machine.ready = True
        machine.since = self.now
        self.free += self.fleet.k
        if self.f.crashes_per_hour > 0:
            self.at(
                self.now + self.rng.expovariate(self.f.crashes_per_hour / 3600),
                _CRASH,
                machine,
                machine.epoch,
            )

    def stop(self, machine: _Machine) -> None:
        machine.stopped = self.now
        machine.ready = False
        self.live -= 1
        self.free -= self.fleet.k

    # Processor sharing on one machine.

    def rate(self, machine: _Machine) -> float:
        return min(1.0, self.f.cores / len(machine.bursting)) if machine.bursting else 1.0

    def catch_up(self, machine: _Machine) -> None:
        done = (self.now - machine.since) * self.rate(machine)
        for task in machine.bursting:
            task.left -= done
        machine.since = self.now

    def reschedule(self, machine: _Machine) -> None:
        machine.version += 1
        if machine.bursting:
            first = min(machine.bursting, key=lambda t: (t.left, t.id))
            when = self.now + max(0.0, first.left) / self.rate(machine)
            self.at(when, _BURST_END, machine, machine.version, first)

    def begin_burst(self, task: _Task) -> None:
        machine = self.machines[task.machine]
        self.catch_up(machine)
        task.left = task.burst = self.burst_cpu
        task.burst_began = self.now
        machine.bursting.add(task)
        self.reschedule(machine)

    # Tasks.

    def admit(self, task: _Task) -> None:
        if len(self.queue) + len(self.retry_queue) >= self.fleet.queue_limit:
            self.out.refused += 1
            return
        self.enqueue(task)

    def enqueue(self, task: _Task) -> None:
        task.queued_at = self.now
        (self.retry_queue if task.attempt else self.queue)[task.id] = task
        self.out.peak_queue = max(self.out.peak_queue, len(self.queue) + len(self.retry_queue))
        self.at(self.now + self.fleet.queue_timeout_s, _TIMEOUT, task, task.attempt)

    def place(self, task: _Task) -> _Machine | None:
        # A retry goes elsewhere, unless its machine is the only one there is.
        avoid = task.avoid if self.live > 1 else -1
        best: _Machine | None = None
        for machine in self.machines:
            if (
                machine.ready
                and len(machine.tasks) < self.fleet.k
                and machine.id != avoid
                and (best is None or len(machine.tasks) > len(best.tasks))
            ):
                best = machine
        return best

    def dispatch(self) -> None:
        for queue in (self.retry_queue, self.queue):
            while self.free > 0 and queue:
                # The first task that has a place: only a retry kept off its
                # machine is passed over.
                found = next(
                    ((t, m) for t in queue.values() if (m := self.place(t)) is not None), None
                )
                if found is None:
                    break
                task, machine = found
                del queue[task.id]
                self.free -= 1
                self.out.waits.append(self.now - task.queued_at)
                task.machine, task.step = machine.id, 0
                self.out.placed.append((task.id, task.attempt, machine.id))
                machine.tasks.add(task)
                self.running += 1
                self.out.peak_on_machine = max(self.out.peak_on_machine, len(machine.tasks))
                self.at(self.now + self.f.scope_open_s, _OPENED, task, task.attempt, machine.epoch)

    def finish(self, task: _Task) -> None:
        machine = self.machines[task.machine]
        machine.tasks.discard(task)
        self.running -= 1
        self.free += 1
        self.out.completed += 1

    def crash(self, machine: _Machine) -> None:
        self.out.crashes += 1
        self.catch_up(machine)
        lost = sorted(machine.tasks, key=lambda t: t.id)
        self.out.lost.append((machine.id, [(t.id, t.attempt) for t in lost]))
        machine.tasks.clear()
        machine.bursting.clear()
        machine.epoch += 1
        machine.version += 1
        machine.ready = False
        self.free -= self.fleet.k - len(lost)
        self.running -= len(lost)
        for task in lost:
            if task.attempt < self.fleet.retries:
                task.attempt += 1
                task.avoid = machine.id
                self.out.retried += 1
                self.enqueue(task)
            else:
                self.out.failed += 1
        self.at(self.now + self.f.chromium_restart_s, _READY, machine, machine.epoch)

    def scale(self) -> None:
        queued = len(self.queue) + len(self.retry_queue)
        live = [m for m in self.machines if m.stopped < 0]
        if self.fleet.fixed:
            target = self.fleet.max_machines
        else:
            target = target_machines(queued, self.running, self.fleet.k, self.fleet.margin)
            target = max(self.fleet.pool, min(self.fleet.max_machines, target))
        self.out.samples.append(Sample(self.now, queued, self.running, target, len(live)))
        for _ in range(target - len(live)):
            self.ask(ready_now=False)
        extra = len(live) - target
        for machine in sorted(live, key=lambda m: -m.id):
            if extra <= 0:
                break
            if machine.ready and not machine.tasks:
                self.stop(machine)
                extra -= 1

    def idle(self) -> bool:
        return (
            self.arrived == self.load.tasks
            and not self.running
            and not self.queue
            and not self.retry_queue
        )

    def resolved(self) -> int:
        return self.out.completed + self.out.failed + self.out.refused

    def run(self) -> Outcome:
        first = self.fleet.max_machines if self.fleet.fixed else self.fleet.pool
        for _ in range(first):
            self.ask(ready_now=True)
        self.out.submitted = self.load.tasks
        arrival = 0.0
        for i in range(self.load.tasks):
            if not self.load.all_at_once:
                arrival += self.rng.expovariate(self.load.rate)
            self.at(arrival, _ARRIVE, _Task(id=i, arrived=arrival))
        self.at(0.0, _SCALE)
        while self.events and self.resolved() < self.load.tasks:
            self.now, kind, _, args = heapq.heappop(self.events)
            if kind == _SCALE and self.idle():
                break  # Every task arrived and none is left: ends a run that lost one.
            self.handle(kind, args)
        self.out.makespan_s = self.now
        self.out.machine_s = sum(
            (m.stopped if m.stopped >= 0 else self.now) - m.asked for m in self.machines
        )
        return self.out

    def handle(self, kind: int, args: tuple[object, ...]) -> None:
        if kind == _ARRIVE:
            task = args[0]
            assert isinstance(task, _Task)
            self.arrived += 1
            self.admit(task)
        elif kind == _READY:
            machine, epoch = args
            assert isinstance(machine, _Machine)
            if machine.epoch != epoch or machine.stopped >= 0:
                return
            self.ready(machine)
        elif kind == _OPENED:
            task, attempt, epoch = args
            assert isinstance(task, _Task)
            if task.attempt != attempt or self.machines[task.machine].epoch != epoch:
                return
            self.begin_burst(task)
        elif kind == _BURST_END:
            machine, version, task = args
            assert isinstance(machine, _Machine) and isinstance(task, _Task)
            if machine.version != version:
                return
            self.catch_up(machine)
            machine.bursting.discard(task)
            self.out.added.append(max(0.0, self.now - task.burst_began - task.burst))
            self.reschedule(machine)
            task.step += 1
            if task.step >= self.f.steps:
                self.finish(task)
            else:
                think = self.rng.expovariate(1 / self.f.think_s) if self.f.think_s > 0 else 0.0
                self.at(self.now + think, _THINK_END, task, task.attempt, machine.epoch)
        elif kind == _THINK_END:
            task, attempt, epoch = args
            assert isinstance(task, _Task)
            if task.attempt != attempt or self.machines[task.machine].epoch != epoch:
                return
            self.begin_burst(task)
        elif kind == _CRASH:
            machine, epoch = args
            assert isinstance(machine, _Machine)
            if machine.epoch != epoch or not machine.ready or machine.stopped >= 0:
                return
            self.crash(machine)
        elif kind == _TIMEOUT:
            task, attempt = args
            assert isinstance(task, _Task)
            queue = self.retry_queue if attempt else self.queue
            if task.attempt != attempt or queue.get(task.id) is not task:
                return
            del queue[task.id]
            # A task refused before it ran is the client's 429; a retry that
            # found no scope in time has failed.
            if attempt:
                self.out.failed += 1
            else:
                self.out.refused += 1
        elif kind == _SCALE:
            self.scale()
            self.at(self.now + self.fleet.scale_interval_s, _SCALE)
        self.dispatch()


def simulate(figures: Figures, fleet: ModelFleet, load: Load) -> Outcome:
    """Run ``load`` through ``fleet``; the same arguments give the same outcome."""
    return _Sim(figures, fleet, load).run()


def scopes_per_core(
    figures: Figures,
    target_s: float,
    percentile: float = 95.0,
    most: int = 512,
    seed: int = 1,
) -> tuple[int, float]:
    """The most scopes one computer holds with every scope busy (its queue
    never empty, so the worst steady load) while the ``percentile`` of a
    step's added latency stays within ``target_s``; with the percentile
    reached there. ``(0, inf)`` when not even one does. Searched by doubling,
    then halving: it takes the added latency to grow with K, as it does when
    the CPU a task falls slower than the scopes sharing the cores grow."""

    def reached(k: int) -> float:
        # Enough tasks that the start, when every scope bursts at once, is a
        # small part of the run, and the p95 steady: at 30 a scope it moved
        # by 10 ms from seed to seed at K = 9, at 200 by 2 ms.
        tasks = max(3000, 30 * k)
        out = simulate(
            figures,
            ModelFleet(k=k, pool=1, max_machines=1, queue_limit=tasks, queue_timeout_s=math.inf),
            Load(tasks=tasks, seed=seed, all_at_once=True),
        )
        return _percentile(out.added, percentile)

    low, low_at = 0, math.inf
    high = 1
    while high <= most:
        at = reached(high)
        if at > target_s:
            break
        low, low_at = high, at
        high *= 2
    else:
        return low, low_at
    while high - low > 1:
        mid = (low + high) // 2
        at = reached(mid)
        if at > target_s:
            high = mid
        else:
            low, low_at = mid, at
    return low, low_at


def _percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
