"""Where a batch's next task goes: the rules of ``--scopes-per-computer K``, no I/O.

A :class:`Schedule` holds the batch's pool of computers (:class:`Host`: one
a computer a :class:`~.provision.Provisioner` handed over, or is starting)
and decides, for a task that needs some scopes, where it goes
(:meth:`Schedule.place`):

1. on a ready computer with room, the one with the fewest tasks (tasks
   spread: the pool is warm whatever it holds);
2. else on a new computer, while the pool holds fewer than
   :attr:`Schedule.most` (``ceil(parallel / K)``; a broken computer does not
   count, so its replacement starts at once);
3. else on a computer still starting that has room;
4. else it waits (:class:`Wait`) for a task to end or a computer to be ready.

Room is counted in tasks (at most K a computer) and in scopes: never past
what the computer's ``/metrics`` says it holds (``agentenv_scopes_capacity``),
counting the scopes others opened there (``agentenv_scopes_open`` less the
batch's own when read) and the opens queued there (``agentenv_queue_length``),
so the batch never opens past capacity.

A computer whose Chromium restarted (``agentenv_chromium_restarts_total``
went up), whose relay or app server restarted (``agentenv_relay_start_time_seconds``
or ``agentenv_app_start_time_seconds`` changed: a relay that restarts closes
every scope opened before it, and their tokens answer 401; an app server's MCP
sessions and ops in flight die with it) or that stopped answering is
**broken**: it takes no task again;
the tasks in flight on it fail as infrastructure (:func:`attempt_status`),
each retried (:func:`retry`) on another computer, and it is given back to be
replaced once its last task has ended (:meth:`Schedule.drained`).

As the batch's queue drains near its end, a ready computer with no task that
the tasks left do not need (:meth:`Schedule.spare`) is given back at once,
rather than at the batch's end: an engine's pool (Swarm's service) shrinks
under the batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentenv.harness.fleet import Sample

__all__ = [
    "Host",
    "Schedule",
    "StartComputer",
    "Use",
    "Wait",
    "attempt_status",
    "pool_size",
    "retry",
    "whole",
]

SCOPES_OPEN = "agentenv_scopes_open"
SCOPES_CAPACITY = "agentenv_scopes_capacity"
QUEUE_LENGTH = "agentenv_queue_length"
RESTARTS = "agentenv_chromium_restarts_total"
RELAY_STARTED = "agentenv_relay_start_time_seconds"
APP_STARTED = "agentenv_app_start_time_seconds"
#: Each program whose start time a computer's /metrics gives, and what its
#: change means (:meth:`Schedule.seen`).
STARTED = {RELAY_STARTED: "its relay restarted", APP_STARTED: "its app server restarted"}


def pool_size(parallel: int, per_computer: int) -> int:
    """Computers a batch of ``parallel`` tasks at once keeps: ``ceil(parallel / K)``."""
    return max(1, math.ceil(parallel / per_computer))


def _value(found: Mapping[Sample, float], name: str) -> float | None:
    values = [v for (sample, _), v in found.items() if sample == name]
    return sum(values) if values else None


@dataclass
class Host:
    """One computer of the pool, as the schedule counts it."""

    key: str
    image: str | None
    #: ``AGENTENV_MAX_SCOPES`` it was started with.
    capacity: int
    state: Literal["starting", "ready", "broken"] = "starting"
    #: The task attempts in flight on it, and the scopes each holds.
    tasks: dict[str, int] = field(default_factory=dict)
    #: What its /metrics said last: capacity, scopes open, queued opens,
    #: and the batch's own scopes there when it was read.
    capacity_seen: float | None = None
    open_seen: float = 0.0
    queue_seen: float = 0.0
    ours_when_seen: int = 0
    #: Chromium restarts at its first reading: more later means it broke.
    restarts_at_first: float | None = None
    #: Its programs' start times at its first reading (:data:`STARTED`): a
    #: different one later means that program restarted under its tasks.
    started_at_first: dict[str, float] = field(default_factory=dict)

    @property
    def scopes(self) -> int:
        return sum(self.tasks.values())

    def room(self, per_computer: int, scopes: int) -> bool:
        """Whether a task needing ``scopes`` fits: below K tasks and within
        the scopes it holds, as its own /metrics last counted them."""
        if self.state == "broken" or len(self.tasks) >= per_computer:
            return False
        capacity = self.capacity
        if self.capacity_seen is not None:
            capacity = min(capacity, int(self.capacity_seen))
        others = max(0, int(self.open_seen) - self.ours_when_seen)
        queued = int(self.queue_seen)
        return self.scopes + others + queued + scopes <= capacity


@dataclass(frozen=True)
class Use:
    """Place the task on this computer (ready, or wait until it is)."""

    key: str


@dataclass(frozen=True)
class StartComputer:
    """Ask the provisioner for a new computer; the task goes on it."""


@dataclass(frozen=True)
class Wait:
    """No room now: wait for a task to end or a computer to be ready."""


@dataclass
class Schedule:
    """The pool of a batch on scopes (see the module's docstring)."""

    #: K: tasks a computer serves at once.
    per_computer: int
    #: Computers at once, broken ones not counted.
    most: int
    #: ``AGENTENV_MAX_SCOPES`` of a computer the provisioner starts.
    capacity: int
    hosts: dict[str, Host] = field(default_factory=dict)

    def place(
        self, scopes: int, image: str | None, avoid: frozenset[str] = frozenset()
    ) -> Use | StartComputer | Wait:
        """Where a task needing ``scopes`` scopes on ``image`` goes; ``avoid``
        the computers an earlier attempt of it failed on."""
        if scopes > self.capacity:
            raise ValueError(
                f"a task with {scopes} agents on one computer needs {scopes} scopes; "
                f"the computers take {self.capacity}"
            )
        alive = [h for h in self.hosts.values() if h.state != "broken"]
        fits = [
            h
            for h in alive
            if h.image == image and h.key not in avoid and h.room(self.per_computer, scopes)
        ]
        ready = [h for h in fits if h.state == "ready"]
        if ready:
            return Use(min(ready, key=lambda h: (len(h.tasks), h.key)).key)
        elsewhere = [h for h in alive if h.key not in avoid]
        if len(alive) < self.most or not elsewhere:
            return StartComputer()
        starting = [h for h in fits if h.state == "starting"]
        if starting:
            return Use(min(starting, key=lambda h: (len(h.tasks), h.key)).key)
        return Wait()

    def starting(self, key: str, image: str | None) -> Host:
        """A computer asked of the provisioner (counted from now on)."""
        host = Host(key, image, self.capacity)
        self.hosts[key] = host
        return host

    def ready(self, key: str) -> None:
        """The computer started as ``key`` is ready."""
        self.hosts[key].state = "ready"

    def failed(self, key: str) -> None:
        """The provisioner could not give the computer started as ``key``."""
        self.hosts.pop(key, None)

    def take(self, key: str, attempt: str, scopes: int) -> None:
        """Attempt ``attempt`` holds ``scopes`` scopes on ``key`` (placed there)."""
        self.hosts[key].tasks[attempt] = scopes

    def end(self, key: str, attempt: str) -> None:
        """Attempt ``attempt`` let go of its scopes on ``key``."""
        host = self.hosts.get(key)
        if host is not None:
            host.tasks.pop(attempt, None)

    def seen(self, key: str, found: Mapping[Sample, float] | None) -> str | None:
        """What ``key``'s /metrics answered (None: it did not answer). When
        this reading shows it broken, why (it is broken from now on): its
        Chromium restarted, or its relay or app server did. A reading without
        the relay's counts (the relay not answering the app: it may be
        restarting) changes nothing: :func:`whole` says whether to read again."""
        host = self.hosts.get(key)
        if host is None or found is None or host.state != "ready" or not whole(found):
            return None
        host.capacity_seen = _value(found, SCOPES_CAPACITY)
        host.open_seen = _value(found, SCOPES_OPEN) or 0.0
        host.queue_seen = _value(found, QUEUE_LENGTH) or 0.0
        host.ours_when_seen = host.scopes
        why = _restarted(host, found)
        if why is not None:
            host.state = "broken"
        return why

    def broke(self, key: str) -> None:
        """``key`` is broken (it stopped answering): no task goes there again."""
        host = self.hosts.get(key)
        if host is not None:
            host.state = "broken"

    def is_broken(self, key: str) -> bool:
        host = self.hosts.get(key)
        return host is None or host.state == "broken"

    def drained(self) -> list[str]:
        """Broken computers with no task left: to give back (forgotten here)."""
        found = [k for k, h in self.hosts.items() if h.state == "broken" and not h.tasks]
        for key in found:
            del self.hosts[key]
        return found

    def spare(self, unfinished: int) -> list[str]:
        """Ready computers with no task that the work left does not need: the
        ``unfinished`` tasks (waiting or running, retries included), K a
        computer, want ceil(unfinished / K) computers, at most :attr:`most`;
        the idle ones past that, forgotten here, to give back (the fewest
        first by key). So the pool shrinks as the batch's queue drains, not
        only at its end; a task placed later (a retry) starts one again."""
        alive = [h for h in self.hosts.values() if h.state != "broken"]
        wanted = min(self.most, math.ceil(max(0, unfinished) / self.per_computer))
        idle = sorted(h.key for h in alive if h.state == "ready" and not h.tasks)
        found = idle[: max(0, len(alive) - wanted)]
        for key in found:
            del self.hosts[key]
        return found


def whole(found: Mapping[Sample, float]) -> bool:
    """Whether a computer's /metrics reading holds its relay's counts (the
    app names a program that did not answer in a comment, and gives the rest)."""
    return _value(found, SCOPES_CAPACITY) is not None


def _restarted(host: Host, found: Mapping[Sample, float]) -> str | None:
    """Why ``host`` broke since its first reading (that reading is kept as
    the baseline), or None. A relay restart also starts its Chromium count
    from 0 again: the start time, not that count, says so."""
    restarts = _value(found, RESTARTS) or 0.0
    first = host.restarts_at_first is None
    if first:
        host.restarts_at_first = restarts
    why: str | None = None
    for name, what in STARTED.items():
        now = _value(found, name)
        if now is None:
            continue  # a computer that does not give it (an older image)
        was = host.started_at_first.setdefault(name, now)
        if now != was and why is None:
            why = what
    at_first = host.restarts_at_first
    if why is None and not first and at_first is not None and restarts > at_first:
        why = "its Chromium restarted"
    return why


def attempt_status(status: str, broke: bool) -> str:
    """An attempt's status: a task that failed when a computer it ran on
    broke under it is an infrastructure failure (its agent lost its browser);
    one done is done (its recording verified whole)."""
    return "infrastructure" if broke and status == "failed" else status


def retry(status: str, attempt: int, retries: int) -> bool:
    """Whether attempt ``attempt`` (1, 2, ...) of a task that ended ``status``
    is tried again: infrastructure failures only, ``retries`` times at most."""
    return status == "infrastructure" and attempt <= retries
