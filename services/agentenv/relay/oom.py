"""The kernel's kills for memory in the computer's cgroup (issues 22, 40).

When Chromium's connection ends, the relay tells why if it can: a kill the
kernel made for memory since it last looked means a page (or a program)
took more than the container's limit. The count is read from cgroup v2's
``memory.events`` (``oom_kill N``) or, on a cgroup v1 engine, from the
memory controller's ``memory.oom_control`` (``oom_kill N``, Linux 4.13 and
later); ``memory.failcnt`` (times the limit was hit, kills or not) and
``memory.max_usage_in_bytes`` say only that the limit was reached, not
that anything was killed, so they are not read as kills.

:func:`oom_kills` reads the files' texts and :func:`why_exited` words a
kill (no I/O); :func:`read_oom_kills` reads the files.

:class:`OomWatch` holds what the relay has read. The count is read every few
seconds so that an exit names only a kill that came after the last look;
but a kill and the end of the connection it causes are not one moment, and
a look can fall between them (seen on a loaded machine: the exit then said
"killed or crashed"). So a rise the periodic look saw within
:data:`RECENT_S` of the exit is named too: a kill for memory that close to
the browser's end is its cause, or the pressure that led to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CGROUP",
    "RECENT_S",
    "OomKills",
    "OomWatch",
    "oom_kills",
    "read_oom_kills",
    "why_exited",
]

#: Where the container's cgroup file system is mounted.
CGROUP = Path("/sys/fs/cgroup")
#: The two files, each under :data:`CGROUP`: v2's, then v1's memory controller's.
V2_EVENTS = "memory.events"
V1_OOM_CONTROL = "memory/memory.oom_control"
#: How long before an exit a rise in the count still names it (seconds).
RECENT_S = 15.0


@dataclass(frozen=True)
class OomKills:
    """The kernel's OOM kills in the cgroup so far, and the file that says so."""

    count: int
    #: ``memory.events`` (cgroup v2) or ``memory.oom_control`` (cgroup v1).
    source: str


def _count(text: str, key: str) -> int | None:
    """The number after ``key`` in a flat-keyed cgroup file (``key N`` lines)."""
    for line in text.splitlines():
        name, _, value = line.strip().partition(" ")
        if name == key:
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def oom_kills(v2_events: str | None, v1_oom_control: str | None) -> OomKills | None:
    """The kill count from whichever file the engine has (``None``: not
    there, or without the count: a cgroup v1 kernel older than 4.13)."""
    if v2_events is not None:
        count = _count(v2_events, "oom_kill")
        if count is not None:
            return OomKills(count, "memory.events")
    if v1_oom_control is not None:
        count = _count(v1_oom_control, "oom_kill")
        if count is not None:
            return OomKills(count, "memory.oom_control")
    return None


def read_oom_kills(root: Path = CGROUP) -> OomKills | None:
    """:func:`oom_kills` of the files under ``root``."""

    def text(name: str) -> str | None:
        try:
            return (root / name).read_text()
        except OSError:
            return None

    return oom_kills(text(V2_EVENTS), text(V1_OOM_CONTROL))


def why_exited(before: OomKills | None, after: OomKills | None) -> str | None:
    """Why Chromium went, when the kernel killed for memory in between."""
    if before is None or after is None or after.count <= before.count:
        return None
    return (
        "out of memory: the kernel killed a process of the computer's "
        f"({after.source} oom_kill {before.count} -> {after.count}); the pages and "
        "programs together took more than the container's memory limit"
    )


@dataclass
class OomWatch:
    """The count last read, and the last rise a look saw (pure: readings
    and monotonic times are handed in)."""

    last: OomKills | None = None
    #: (before, after, when) of the last rise :meth:`looked` saw.
    rise: tuple[OomKills, OomKills, float] | None = None

    def looked(self, kills: OomKills | None, now: float) -> None:
        """A periodic reading, while Chromium runs."""
        if self.last is not None and kills is not None and kills.count > self.last.count:
            self.rise = (self.last, kills, now)
        self.last = kills

    def exited(self, kills: OomKills | None, now: float) -> str | None:
        """Chromium's connection ended with ``kills`` read: why, if memory."""
        why = why_exited(self.last, kills)
        if why is None and self.rise is not None and now - self.rise[2] <= RECENT_S:
            why = why_exited(self.rise[0], self.rise[1])
        self.last = kills
        self.rise = None
        return why
