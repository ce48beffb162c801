"""Numbers taken when an action begins, lines written when it ends (no I/O).

- :class:`Numbering` hands out numbers and tracks the actions still open, so
  an action open longer than :data:`STALLED_S` can be written as unfinished
  in its place (it then holds back no reader) and its ``outcome`` later.
- :func:`recover` reads a log file's bytes after a restart: where numbering
  and the hash chain carry on, a half-written last line to move aside, and
  the numbers taken before the crash that never got a line (a ``break`` line
  names them, and each gets a ``lost`` line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentenv.log.lines import seq_of
from agentenv.protocol.chain import GENESIS, hash_written

__all__ = ["STALLED_S", "Numbering", "Open", "Recovery", "recover"]

#: An action still open after this long is written as unfinished.
STALLED_S = 60.0


#: An action whose number is taken and whose line is not final yet: when it
#: began (monotonic seconds), when it began as written, and its fields. A
#: tuple, not a class: one is made for every command on the record.
Open = tuple[float, str, dict[str, Any]]


@dataclass
class Numbering:
    """The writer's numbers and open actions. The writer adds an action to
    ``open`` at its begin and takes it out at its end itself (that runs for
    every command on the record, so it is not a call here)."""

    next_seq: int = 1
    open: dict[int, Open] = field(default_factory=dict)
    #: Open actions already written as unfinished (their end writes an outcome).
    unfinished: set[int] = field(default_factory=set)
    stalled_s: float = STALLED_S

    def take(self) -> int:
        """A number for a line written at once."""
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def stalled(self, now: float) -> list[tuple[int, Open]]:
        """Actions open longer than the limit and not yet written; marks them."""
        found = [
            (seq, o)
            for seq, o in self.open.items()
            if seq not in self.unfinished and now - o[0] >= self.stalled_s
        ]
        self.unfinished.update(seq for seq, _ in found)
        return found


@dataclass(frozen=True)
class Recovery:
    keep: int  # bytes of the file that end in a complete line
    partial: bytes  # a half-written last line, moved to <file>.partial
    highest: int  # the highest seq written
    missing: list[int]  # numbers below ``highest`` without a line
    head: str = GENESIS  # the hash of the last whole line: what the next chains from

    @property
    def crashed(self) -> bool:
        """Whether the writer before died with lines unwritten (a break to name)."""
        return bool(self.partial or self.missing)


def recover(data: bytes) -> Recovery:
    """What a restarted writer must do with a log file holding ``data``."""
    keep = data.rfind(b"\n") + 1
    partial = data[keep:]
    seen: set[int] = set()
    start = last = 0
    while start < keep:
        end = data.index(b"\n", start)
        seq = seq_of(data[start:end])
        if seq is not None:
            seen.add(seq)
        last, start = start, end + 1
    highest = max(seen, default=0)
    missing = [n for n in range(1, highest + 1) if n not in seen] if len(seen) < highest else []
    head = hash_written(data[last:keep]) if keep else GENESIS
    return Recovery(keep, partial, highest, missing, head)
