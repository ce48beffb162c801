"""Each user's share of the action log (issue 22; docs/fair-shares.md). No I/O.

A user past ``AGENTENV_LOG_USER_MAX_BYTES`` in all, or past
``AGENTENV_LOG_USER_BYTES_PER_MINUTE`` this minute (of the writer's clock),
has their commands and actions refused with rule ``log-budget``; everyone
else's go on. The bytes are the writer's count of each user's action lines
(:attr:`~agentenv.log.writer.LogWriter.spent`). The computer's own lines
(``agentenv``) have no budget. A refusal is on the record once a minute per
user, with how many were refused since the last such line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentenv.log.writer import LogWriter
from agentenv.settings import AGENTENV_USER

__all__ = ["LogBudget"]


@dataclass
class LogBudget:
    """The budgets (0: none), and the refusals not yet on the record."""

    max_bytes: int = 0
    bytes_per_minute: int = 0
    #: user -> refusals since their last ``log-budget`` line, and its minute.
    _over: dict[str, int] = field(default_factory=dict)
    _over_minute: dict[str, int] = field(default_factory=dict)

    def over(self, writer: LogWriter, who: str) -> str | None:
        """Why ``who`` may write no more to the log now (None: they may)."""
        if who == AGENTENV_USER:
            return None
        if self.max_bytes and writer.spent.get(who, 0) >= self.max_bytes:
            return (
                f"blocked by agentenv guard log-budget: {who[:64]}'s entries reached their "
                f"share of the action log (AGENTENV_LOG_USER_MAX_BYTES={self.max_bytes}); "
                "nothing more is done for them on this computer: start a fresh one"
            )
        this_minute = writer.minute == int(writer.monotonic()) // 60
        if (
            self.bytes_per_minute
            and this_minute
            and writer.spent_this_minute(who) >= self.bytes_per_minute
        ):
            return (
                f"blocked by agentenv guard log-budget: {who[:64]}'s entries reached "
                f"{self.bytes_per_minute} bytes this minute "
                "(AGENTENV_LOG_USER_BYTES_PER_MINUTE): retry in a minute, and send less"
            )
        return None

    def to_tell(self, who: str, minute: int) -> int | None:
        """One more refusal of ``who``'s: how many to put on the record now
        (the first in ``minute``), else None (counted for the next line)."""
        self._over[who] = self._over.get(who, 0) + 1
        if self._over_minute.get(who) == minute:
            return None
        self._over_minute[who] = minute
        told, self._over[who] = self._over[who], 0
        return told
