"""``agentenv run --reuse``: each worker keeps its computer between its
tasks, reset with ``data/reset`` before the next (one blank tab; no cookies,
granted permissions, downloads or HTTP cache; the storage of the origins the
computer knows of cleared, every site the log saw since the last reset among
them; the image keeps no history). A computer that cannot be reset is stopped and a
fresh one started in its place; the batch stops them all at its end.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agentenv.harness.computer import Computer, ComputerError
from agentenv.protocol.browser import Empty

__all__ = ["Reused"]

#: How long a reset computer may take to say it is ready again.
READY_S = 60.0


@dataclass
class Reused:
    """The computers ``--reuse`` keeps, one a worker thread and an image."""

    #: Starts a fresh computer for an image (every agent of the batch on it).
    start: Callable[[str | None], Computer]
    say: Callable[[str], None]
    #: The batch's lock: ``pool`` is read under it.
    lock: threading.Lock
    #: Every computer started, for the batch to read and stop.
    pool: list[Computer]
    #: Each reset's seconds.
    resets: list[float] = field(default_factory=list)
    _local: threading.local = field(default_factory=threading.local)

    def lend(self, image: str | None, wanted: list[str] | None = None) -> Computer:
        """This worker's computer for ``image``: started the first time, reset after."""
        mine: dict[str | None, Computer] = self._local.__dict__.setdefault("computers", {})
        computer = mine.get(image)
        if computer is None:
            computer = mine[image] = self.start(image)
            with self.lock:
                self.pool.append(computer)
            return computer
        began = time.monotonic()
        try:
            computer.op("data/reset", Empty)
            computer.wait_ready(READY_S)
        except ComputerError as exc:
            # A computer that cannot be reset is not lent again: a fresh one instead.
            self.say(f"a reused computer could not be reset ({exc}); starting another")
            del mine[image]
            with contextlib.suppress(Exception):
                computer.stop()
            return self.lend(image)
        with self.lock:
            self.resets.append(time.monotonic() - began)
        return computer
