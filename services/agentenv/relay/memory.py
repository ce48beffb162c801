"""Bytes of agents' messages the relay holds at once (issue 22). No I/O.

A message an agent sends is held while the relay reads it, checks it, logs
it and hands it to Chromium: as text, parsed, and as the frame it sends on.
Six 200 MB messages at once killed the relay for memory, and every agent's
connection with it. Two bounds now keep any one user's messages from
costing the others:

- a message is at most ``AGENTENV_AGENT_MESSAGE_BYTES`` (the connection is
  closed, 1009, before it is held: :mod:`agentenv.relay.server`);
- the big messages being handled at once are bounded per user
  (``AGENTENV_USER_INFLIGHT_BYTES``) and for the relay as a whole
  (``AGENTENV_RELAY_INFLIGHT_BYTES``): past either, the message is refused
  at once (rule ``memory``), its text dropped, and the sender's next ones
  go on as the others finish.

Only messages of :data:`COUNTED` bytes or more count: an ordinary command
costs nothing here. The control token's own links are not bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["COUNTED", "InFlight"]

#: Messages this big or bigger count against the bounds (smaller ones are
#: the ordinary traffic of every client, and cost a lookup nothing).
COUNTED = 1024 * 1024


@dataclass
class InFlight:
    """Bytes of big messages being handled, per user and in all."""

    per_user: int
    total: int
    held: dict[str, int] = field(default_factory=dict)
    everyone: int = 0

    def take(self, who: str, size: int) -> str | None:
        """Hold ``size`` bytes for ``who``; None if done, else why not."""
        mine = self.held.get(who, 0)
        if self.per_user and mine + size > self.per_user:
            return (
                f"blocked by agentenv guard memory: {who[:64]}'s messages being handled "
                f"would hold {mine + size} bytes, past AGENTENV_USER_INFLIGHT_BYTES="
                f"{self.per_user}: send big messages one at a time"
            )
        if self.total and self.everyone + size > self.total:
            return (
                f"blocked by agentenv guard memory: agents' messages being handled would "
                f"hold {self.everyone + size} bytes, past AGENTENV_RELAY_INFLIGHT_BYTES="
                f"{self.total}: retry when others finish"
            )
        self.held[who] = mine + size
        self.everyone += size
        return None

    def give(self, who: str, size: int) -> None:
        """Let go of ``size`` bytes ``who`` held."""
        left = self.held.get(who, 0) - size
        if left > 0:
            self.held[who] = left
        else:
            self.held.pop(who, None)
        self.everyone = max(0, self.everyone - size)
