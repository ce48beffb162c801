"""Warm scopes: browser contexts made ahead, each with its one blank tab and
its renderer started, handed over by ``scopes/open`` and ``scopes/reset``
(issue 41, item 2; docs/spec.md section 7). No I/O.

A fresh context with one tab answering its first ``Runtime.evaluate`` takes
Chromium about 150-200 ms here: starting the tab's renderer is most of it.
A task-ready browser in milliseconds has to exist before it is asked for,
so the relay keeps ``AGENTENV_WARM_SCOPES`` of them ready (never more than
``AGENTENV_MAX_SCOPES``: no more can be opened at once), refilled in the
background after each one taken. :class:`WarmPool` is the rule: how many to
make now, which to hand over, which to throw away; the watcher
(:mod:`agentenv.relay.watcher`) sends Chromium the commands.

What keeps a warm context safe to hand over:

- Until it is handed over it is no scope's: no agent's scope holds it, and
  the relay hides it from the control token's links too
  (:meth:`WarmPool.withheld`): no listing, event, attach or command by id
  reaches it. Only the watcher's own connection ever touched it.
- It is spoiled, thrown away and never handed over, when its tab goes,
  crashes or shows anything but ``about:blank``
  (:meth:`WarmPool.spoiled`).
- ``data/reset``, a lost connection to Chromium and a relay's restart start
  a new generation: every context made before is disposed of, and one still
  being made when the generation changed is disposed of when it arrives
  (:meth:`WarmPool.made` says so). A relay started again disposes of the
  contexts its predecessor listed in the warm file before it makes new ones.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["FAILURE_WAIT_MAX_S", "FAILURE_WAIT_S", "REFILL_AFTER_TAKE_S", "Warm", "WarmPool"]

#: After a failed make, the pool waits this long before it tries again,
#: doubled after each failure in a row up to :data:`FAILURE_WAIT_MAX_S`.
FAILURE_WAIT_S = 0.5
FAILURE_WAIT_MAX_S = 30.0
#: After a take, the pool waits this long before it makes the next: the
#: handed-over scope's agent connects and sends its first commands at once,
#: and a renderer starting meanwhile on the same two cores slowed them
#: (connect 42 ms p50 against 14 ms, bench ready).
REFILL_AFTER_TAKE_S = 0.25


@dataclass(frozen=True)
class Warm:
    """One warm context, ready: its id and its one blank tab's."""

    context: str
    tab: str


@dataclass
class WarmPool:
    """The warm contexts ready and being made, in one generation."""

    #: How many to keep ready (``min(AGENTENV_WARM_SCOPES, AGENTENV_MAX_SCOPES)``).
    size: int
    #: Ready to hand over, oldest first.
    ready: OrderedDict[str, Warm] = field(default_factory=OrderedDict)
    #: Makes under way (each ends in :meth:`made` or :meth:`failed`).
    making: int = 0
    #: Bumped by :meth:`reset`: a make begun in an older one is thrown away.
    generation: int = 0
    #: Makes that failed in a row (the wait before the next grows with them).
    failures: int = 0
    #: Contexts being made now whose ids are known (hidden as the ready ones).
    pending: set[str] = field(default_factory=set)

    def wanted(self) -> int:
        """How many makes to begin now to have :attr:`size` ready."""
        return max(0, self.size - len(self.ready) - self.making)

    def begin(self) -> int:
        """A make begins; its generation, to give back to :meth:`made`."""
        self.making += 1
        return self.generation

    def named(self, generation: int, context: str) -> None:
        """A make of ``generation`` got its context's id from Chromium (its tab
        is still being made): hidden from now on."""
        if generation == self.generation:
            self.pending.add(context)

    def made(self, generation: int, warm: Warm) -> bool:
        """A make of ``generation`` ended with ``warm`` ready. True: it is in
        the pool; False: it is stale (a reset or a lost connection came
        since) or spoiled before it was done, and must be disposed of."""
        if generation != self.generation:
            return False
        self.making -= 1
        self.failures = 0
        if warm.context not in self.pending:  # spoiled while it was being made
            return False
        self.pending.discard(warm.context)
        self.ready[warm.context] = warm
        return True

    def failed(self, generation: int, context: str | None = None) -> float:
        """A make of ``generation`` failed (``context``: its id, if it got one,
        which the caller disposes of); how long to wait before trying again."""
        if context is not None:
            self.pending.discard(context)
        if generation != self.generation:
            return 0.0
        self.making -= 1
        self.failures += 1
        return float(min(FAILURE_WAIT_MAX_S, FAILURE_WAIT_S * 2 ** (self.failures - 1)))

    def take(self) -> Warm | None:
        """The oldest ready context, handed over (no longer the pool's); None
        if none is ready (the caller makes one then)."""
        if not self.ready:
            return None
        _, warm = self.ready.popitem(last=False)
        return warm

    def spoiled(self, context: str | None) -> bool:
        """``context``'s tab went, crashed or navigated: if it is the pool's,
        it leaves the pool (True: the caller disposes of it). A make under
        way for it is thrown away when it ends."""
        if context is None:
            return False
        if self.ready.pop(context, None) is not None:
            return True
        if context in self.pending:
            self.pending.discard(context)
            return True
        return False

    def withheld(self, context: object) -> bool:
        """Whether ``context`` is a warm one no scope has been handed: no
        link may see or reach it."""
        return isinstance(context, str) and (context in self.ready or context in self.pending)

    def contexts(self) -> list[str]:
        """Every warm context now, ready or being made (the warm file's list)."""
        return [*self.ready, *sorted(self.pending)]

    def reset(self) -> list[str]:
        """A new generation (``data/reset``, Chromium's connection lost, the
        relay started): every context of the old one, for the caller to
        dispose of; makes under way are thrown away as they end."""
        gone = self.contexts()
        self.ready.clear()
        self.pending.clear()
        self.making = 0
        self.failures = 0
        self.generation += 1
        return gone
