"""Which tab is in front, and which tabs are loading (docs/spec.md section 2,
``AgentEnv.tabs``). No I/O.

Chromium tells no client which tab is in front (and a page's visibility
lies once a client emulates focus), so the relay, which sees every command,
keeps the order itself: :class:`~agentenv.relay.causes.Causes` moves a tab
to the front for an open not in the background, a popup, or an activation,
and when the front tab closes the one in front before it comes back.

Loading marks come from clients with the Page domain on (every driver turns
it on); a recording's frame waits for the tabs loading. A mark heard more
than :data:`LOADING_STALE_S` ago no longer counts: its client left, or
turned Page off, before the stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LOADING_STALE_S", "Front"]

#: A loading mark heard this long ago no longer holds frames back (a frame
#: waits at most 5 s for a page anyway).
LOADING_STALE_S = 10.0


@dataclass
class Front:
    #: The tabs the relay knows, the one in front first.
    order: list[str] = field(default_factory=list)
    #: Tabs whose main frame is loading: tab -> when it started.
    loading: dict[str, float] = field(default_factory=dict)

    @property
    def active(self) -> str | None:
        return self.order[0] if self.order else None

    def add(self, tab: str) -> None:
        """A tab the relay learns of goes behind the others."""
        if tab not in self.order:
            self.order.append(tab)

    def to_front(self, tab: str) -> None:
        """Bring a known tab to the front (an unknown one is ignored)."""
        if tab in self.order:
            self.order.remove(tab)
            self.order.insert(0, tab)

    def before(self, tab: str) -> str | None:
        """The tab in front before ``tab`` opened (``tab`` may be in front now)."""
        return next((t for t in self.order if t != tab), None)

    def remove(self, tab: str) -> None:
        if tab in self.order:
            self.order.remove(tab)
        self.loading.pop(tab, None)

    def clear(self) -> None:
        self.order.clear()
        self.loading.clear()

    def loading_changed(self, tab: str, started: bool, now: float) -> None:
        if started and tab in self.order:
            self.loading[tab] = now
        else:
            self.loading.pop(tab, None)

    def loading_now(self, now: float) -> list[str]:
        """Tabs loading, as last heard, less the stale marks."""
        for tab in [t for t, at in self.loading.items() if now - at > LOADING_STALE_S]:
            del self.loading[tab]
        return sorted(self.loading)
