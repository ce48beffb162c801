"""Bursts of agent actions, and of a person's, and when to frame them (no I/O).

Each acting entry written for an agent (a CDP command, an MCP tool call, or
an op an agent called with its own token, ``via: api``; not the computer's
own, ``via``/``who: agentenv``) restarts a :data:`SETTLE_S` timer; when it
fires, one frame is due, keyed (``after``) to every such entry since the
previous frame, on the tab of the burst's last entry (else the active tab).
Typing a word is one frame.

A person's acts through the live view (``via: human``) make bursts of their
own the same way, framed as ``kind: person``: a recording shows what the
person did, and a grader can tell those pictures from the agent's. A burst
never mixes the two: an entry of the other kind makes the burst so far due
at once (a person holds the scope while driving, so the two meet only at a
handoff's edges).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentenv.protocol.log import LogLine, agent_act, person_act
from agentenv.protocol.recording import FrameKind

__all__ = ["SETTLE_S", "Bursts", "FrameDue"]

SETTLE_S = 0.5


@dataclass(frozen=True)
class FrameDue:
    after: list[int]
    tab: str | None  # None: the active tab
    kind: FrameKind = "action"  # or "person"


@dataclass
class Bursts:
    settle_s: float = SETTLE_S
    pending: list[int] = field(default_factory=list)
    tab: str | None = None
    last_at: float | None = None
    kind: FrameKind = "action"
    #: Bursts ended by an entry of the other kind: due now, in order.
    ready: list[FrameDue] = field(default_factory=list)

    def seen(self, line: LogLine, now: float) -> None:
        """A line appeared in the log at ``now``."""
        kind: FrameKind = "action"
        action = agent_act(line)
        if action is None:
            kind, action = "person", person_act(line)
        if action is None:
            return
        if self.pending and kind != self.kind:
            self.ready.append(self._take())
        self.kind = kind
        self.pending.append(line["seq"])
        tab = action.get("tab")
        self.tab = tab if isinstance(tab, str) else None
        self.last_at = now

    def due(self, now: float) -> FrameDue | None:
        """The frame due at ``now``: a burst ended by the other kind's, else
        the current one if it has settled."""
        if self.ready:
            return self.ready.pop(0)
        if not self.pending or self.last_at is None or now - self.last_at < self.settle_s:
            return None
        return self.flush()

    def flush(self) -> FrameDue | None:
        """The next frame now, settled or not (at the end: call it until None)."""
        if self.ready:
            return self.ready.pop(0)
        return self._take() if self.pending else None

    def _take(self) -> FrameDue:
        frame = FrameDue(sorted(self.pending), self.tab, self.kind)
        self.pending, self.tab, self.last_at = [], None, None
        return frame

    @property
    def waiting(self) -> bool:
        """Whether a frame is due or settling."""
        return bool(self.ready or self.pending)

    def wait_s(self, now: float) -> float | None:
        """How long until a frame is due (None: no burst)."""
        if self.ready:
            return 0.0
        if not self.pending or self.last_at is None:
            return None
        return max(0.0, self.settle_s - (now - self.last_at))
