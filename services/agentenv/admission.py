"""A queue instead of a refusal: who may take one of a bounded number of
places (agents' CDP connections on the relay; opened scopes on the app), and
who waits for one (issue 41, docs/spec.md section 6, "Capacity").

Past the computer's capacity, or past one key's own share of it (a user's
connections), a newcomer waits in a bounded FIFO queue for at most a wait
(``AGENTENV_QUEUE_WAIT_S``, default 60 s). When a place frees, the first
waiter whose key has room takes it: a waiter held by its own key's share does
not hold up the others behind it. When the queue is full, or a waiter's wait
runs out, or one key already has as many waiting as it may hold places
(so one agent cannot fill the queue for all), the answer is 429 with
``Retry-After``, as Browserless and Kernel
answer: the seconds until the queue's first waiter is let in or gives up, so
at least one place in the queue has freed by then (1 s at least).

:class:`Admission` is the pure rule: tickets, places and times in, decisions
out, no clock and no I/O. :class:`Gate` waits on it with asyncio, bounded.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

__all__ = ["Admission", "Full", "Gate", "Place"]


class Full(Exception):
    """Not let in: the queue was full, or the wait ran out. ``retry_after``
    is whole seconds (``Retry-After``); ``why`` says which limit was reached
    and what to do next."""

    def __init__(self, why: str, retry_after: int) -> None:
        super().__init__(why)
        self.why = why
        self.retry_after = retry_after


@dataclass(frozen=True)
class Place:
    """A place taken: give it back with :meth:`Admission.release`."""

    key: str


@dataclass
class _Waiter:
    key: str
    since: float


@dataclass
class Admission:
    """``capacity`` places in all and ``per_key`` for any one key (0: no
    bound), ``queue_length`` waiters at most (0: none wait, as before
    queues), each for ``wait_s``."""

    capacity: int
    per_key: int
    queue_length: int
    wait_s: float
    #: What the places are, and the settings that bound them (for errors).
    what: str = "places"
    capacity_setting: str = "the capacity"
    per_key_setting: str = "the share of one"
    taken: int = 0
    by_key: dict[str, int] = field(default_factory=dict)
    waiting: OrderedDict[int, _Waiter] = field(default_factory=OrderedDict)
    _tickets: int = 0

    def _room(self, key: str) -> bool:
        if self.capacity and self.taken >= self.capacity:
            return False
        return not (self.per_key and self.by_key.get(key, 0) >= self.per_key)

    def _take(self, key: str) -> Place:
        self.taken += 1
        self.by_key[key] = self.by_key.get(key, 0) + 1
        return Place(key)

    def ask(self, key: str, now: float) -> Place | int:
        """A place at once, or a ticket to wait with; raises :class:`Full`
        when the queue is full. Nobody jumps the queue: every waiter is
        let in as soon as there is room for it (:meth:`admit` runs on each
        release), so those still waiting are held by their own key's share,
        and a newcomer with room takes no place of theirs."""
        if self._room(key):
            return self._take(key)
        if len(self.waiting) >= self.queue_length:
            raise Full(self._why(key, "the queue is full"), self.retry_after(now))
        if self.per_key and sum(w.key == key for w in self.waiting.values()) >= self.per_key:
            # One key fills no more of the queue than it may hold places.
            raise Full(self._why(key, "as many of its own wait"), self.retry_after(now))
        self._tickets += 1
        self.waiting[self._tickets] = _Waiter(key, now)
        return self._tickets

    def hold(self, key: str) -> Place:
        """A place taken whatever the bounds (what was open before a restart)."""
        return self._take(key)

    def release(self, place: Place) -> list[tuple[int, Place]]:
        """Give a place back; the waiters let in, in queue order."""
        self.taken -= 1
        left = self.by_key[place.key] - 1
        if left:
            self.by_key[place.key] = left
        else:
            del self.by_key[place.key]
        return self.admit()

    def admit(self) -> list[tuple[int, Place]]:
        """Each waiter, first come first, that a place has room for now."""
        let_in: list[tuple[int, Place]] = []
        for ticket, waiter in list(self.waiting.items()):
            if self._room(waiter.key):
                del self.waiting[ticket]
                let_in.append((ticket, self._take(waiter.key)))
        return let_in

    def give_up(self, ticket: int, now: float) -> Full | None:
        """A waiter leaves the queue (its wait ran out, or its client went).
        What to answer it; None if it had been let in already."""
        waiter = self.waiting.pop(ticket, None)
        if waiter is None:
            return None
        why = f"waited {now - waiter.since:.0f} s in the queue (AGENTENV_QUEUE_WAIT_S)"
        return Full(self._why(waiter.key, why), self.retry_after(now))

    def length(self) -> int:
        return len(self.waiting)

    def oldest_wait(self, now: float) -> float:
        """How long the queue's first waiter has waited (0 when none)."""
        first = next(iter(self.waiting.values()), None)
        return 0.0 if first is None else max(0.0, now - first.since)

    def retry_after(self, now: float) -> int:
        """Seconds until the queue's first waiter is let in or gives up."""
        first = next(iter(self.waiting.values()), None)
        if first is None:
            return 1
        return max(1, math.ceil(first.since + self.wait_s - now))

    def _why(self, key: str, what: str) -> str:
        if self.per_key and self.by_key.get(key, 0) >= self.per_key:
            held = (
                f"{key[:64]} holds {self.per_key} {self.what}, as many as one may "
                f"({self.per_key_setting})"
            )
        else:
            held = f"all {self.capacity} {self.what} are taken ({self.capacity_setting})"
        return (
            f"{held}, and {what} (AGENTENV_QUEUE_LENGTH {self.queue_length}, "
            "AGENTENV_QUEUE_WAIT_S): retry after Retry-After seconds, or end one"
        )


@dataclass
class Gate:
    """:class:`Admission` with asyncio: :meth:`enter` waits for a place,
    bounded by the admission's wait, and gives it back on leaving."""

    admission: Admission
    clock: Callable[[], float] = field(default=lambda: asyncio.get_running_loop().time())
    _waiters: dict[int, asyncio.Future[Place]] = field(default_factory=dict)

    @asynccontextmanager
    async def enter(
        self, key: str, gone: Callable[[], bool] = lambda: False
    ) -> AsyncIterator[Place]:
        """A place for ``key``, held while the block runs. ``gone``: whether
        the waiting client went away (checked each second: it leaves the
        queue). Raises :class:`Full`."""
        place = await self.take(key, gone)
        try:
            yield place
        finally:
            self.give_back(place)

    async def take(self, key: str, gone: Callable[[], bool] = lambda: False) -> Place:
        """A place for ``key``, held until :meth:`give_back` (a scope's, from
        its open to its close). Raises :class:`Full`."""
        got = self.admission.ask(key, self.clock())
        return got if isinstance(got, Place) else await self._wait(got, gone)

    def give_back(self, place: Place) -> None:
        self._hand_on(self.admission.release(place))

    async def _wait(self, ticket: int, gone: Callable[[], bool]) -> Place:
        future: asyncio.Future[Place] = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = future
        end = self.clock() + self.admission.wait_s
        try:
            while not future.done():
                left = end - self.clock()
                if left <= 0 or gone():
                    refusal = self.admission.give_up(ticket, self.clock())
                    if refusal is not None:
                        raise refusal
                    break  # let in just now
                await asyncio.wait([future], timeout=min(1.0, left))
            return future.result()
        except BaseException:
            if future.done() and not future.cancelled() and future.exception() is None:
                # Let in but cancelled before it could go on: the place goes on.
                self._hand_on(self.admission.release(future.result()))
            else:
                self.admission.give_up(ticket, self.clock())
            raise
        finally:
            self._waiters.pop(ticket, None)

    def _hand_on(self, let_in: list[tuple[int, Place]]) -> None:
        for ticket, place in let_in:
            future = self._waiters.get(ticket)
            if future is None or future.done():  # its waiter is gone: the place goes on
                self._hand_on(self.admission.release(place))
            else:
                future.set_result(place)
