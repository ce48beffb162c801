"""What the relay knows of Chromium's targets, as facts learned (no I/O).

The watcher hears Chromium (``Target.targetCreated``, ``targetInfoChanged``,
``targetDestroyed``, a tab's page found, a tab opened in a context) and
hands each fact to :meth:`Known.learn`. Every client connection's rules read
the same :class:`Known` (its :class:`agentenv.relay.client_state.ClientState`
holds it): a target's type and URL, the tab it belongs to, its browser
context, a tab-type target's page, and whether a context is a warm one no
scope was handed. Nothing but :meth:`Known.learn` writes it; the rules read
it through the queries, never through callbacks into the watcher (issue 42).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agentenv.protocol.urls import tab as is_tab

__all__ = [
    "Gone",
    "InContext",
    "Known",
    "Lost",
    "PageOfTab",
    "TargetSeen",
    "Withholding",
]

#: How far up a chain of parents a target's tab is looked for.
MAX_DEPTH = 32


class Withholding(Protocol):
    """The warm contexts (:class:`agentenv.relay.warm.Warm`)."""

    def withheld(self, context: object) -> bool: ...


class _NoneWarm:
    def withheld(self, context: object) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class TargetSeen:
    """``Target.targetCreated`` or ``targetInfoChanged``: what it is now."""

    target: str
    kind: str
    url: str
    context: str | None = None
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class InContext:
    """A tab the relay opened (or a warm one) is in ``context``."""

    target: str
    context: str


@dataclass(frozen=True, slots=True)
class PageOfTab:
    """A tab-type target's page (chromedriver's window handles)."""

    tab: str
    page: str


@dataclass(frozen=True, slots=True)
class Gone:
    """``Target.targetDestroyed``."""

    target: str


@dataclass(frozen=True, slots=True)
class Lost:
    """Chromium's connection ended: nothing known holds."""


Fact = TargetSeen | InContext | PageOfTab | Gone | Lost


@dataclass
class Known:
    """Chromium's targets as the watcher learned them."""

    #: The warm contexts; set once the watcher has them.
    warm: Withholding = field(default_factory=_NoneWarm)
    _targets: dict[str, tuple[str, str]] = field(default_factory=dict)
    _parents: dict[str, str] = field(default_factory=dict)
    _contexts: dict[str, str] = field(default_factory=dict)
    _tab_pages: dict[str, str] = field(default_factory=dict)

    def learn(self, fact: Fact) -> None:
        """The one way anything here changes."""
        match fact:
            case TargetSeen(target, kind, url, context, parent):
                self._targets[target] = (kind, url)
                if context is not None:
                    self._contexts[target] = context
                if parent:
                    self._parents[target] = parent
            case InContext(target, context):
                self._contexts[target] = context
            case PageOfTab(tab, page):
                self._tab_pages[tab] = page
            case Gone(target):
                self._targets.pop(target, None)
                self._tab_pages.pop(target, None)
                self._parents.pop(target, None)
                self._contexts.pop(target, None)
            case Lost():
                self._targets.clear()
                self._parents.clear()
                self._contexts.clear()
                self._tab_pages.clear()

    @property
    def targets(self) -> Mapping[str, tuple[str, str]]:
        """Every target: id -> (type, url), read-only."""
        return self._targets

    def target(self, target: str) -> tuple[str, str] | None:
        """A target's ``(type, url)``, None if unknown."""
        return self._targets.get(target)

    def tab_of(self, target: str) -> str:
        """The tab a target belongs to (an iframe's page, through nested
        frames), or the target itself when none is known."""
        found = target
        for _ in range(MAX_DEPTH):
            info = self._targets.get(found)
            if info is not None and is_tab(info):
                return found
            parent = self._parents.get(found)
            if parent is None:
                return target
            found = parent
        return target

    def context_of(self, target: str) -> str | None:
        """A target's browser context, None if unknown."""
        return self._contexts.get(target)

    def tab_page(self, target: str) -> str | None:
        """The page of a tab-type target, when it was found."""
        return self._tab_pages.get(target)

    def withheld(self, context: object) -> bool:
        """Whether ``context`` is a warm one no scope was handed: no link
        sees or reaches it, the control token's neither."""
        return self.warm.withheld(context)
