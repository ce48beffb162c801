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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CGROUP", "OomKills", "oom_kills", "read_oom_kills", "why_exited"]

#: Where the container's cgroup file system is mounted.
CGROUP = Path("/sys/fs/cgroup")
#: The two files, each under :data:`CGROUP`: v2's, then v1's memory controller's.
V2_EVENTS = "memory.events"
V1_OOM_CONTROL = "memory/memory.oom_control"


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
