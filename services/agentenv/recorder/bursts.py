"""Bursts of agent actions and when to frame them (no I/O).

Each acting entry written for an agent (a CDP command, an MCP tool call, or
an op an agent called with its own token, ``via: api``; not the computer's
own, ``via``/``who: agentenv``) restarts a :data:`SETTLE_S` timer; when it
fires, one frame is due, keyed (``after``) to every such entry since the
previous frame, on the tab of the burst's last entry (else the active tab).
Typing a word is one frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentenv.protocol.log import LogLine, agent_act

__all__ = ["SETTLE_S", "Bursts", "FrameDue"]

SETTLE_S = 0.5


@dataclass(frozen=True)
class FrameDue:
    after: list[int]
    tab: str | None  # None: the active tab


@dataclass
class Bursts:
    settle_s: float = SETTLE_S
    pending: list[int] = field(default_factory=list)
    tab: str | None = None
    last_at: float | None = None

    def seen(self, line: LogLine, now: float) -> None:
        """A line appeared in the log at ``now``."""
        action = agent_act(line)
        if action is None:
            return
        self.pending.append(line["seq"])
        tab = action.get("tab")
        self.tab = tab if isinstance(tab, str) else None
        self.last_at = now

    def due(self, now: float) -> FrameDue | None:
        """The frame due at ``now``, if the burst has settled."""
        if not self.pending or self.last_at is None or now - self.last_at < self.settle_s:
            return None
        return self.flush()

    def flush(self) -> FrameDue | None:
        """The burst's frame now (at the end, a burst still settling)."""
        if not self.pending:
            return None
        frame = FrameDue(sorted(self.pending), self.tab)
        self.pending, self.tab, self.last_at = [], None, None
        return frame

    def wait_s(self, now: float) -> float | None:
        """How long until the current burst settles (None: no burst)."""
        if not self.pending or self.last_at is None:
            return None
        return max(0.0, self.settle_s - (now - self.last_at))
