"""What the watcher's parts (:mod:`.scope_downloads`, :mod:`.quotas`,
:mod:`.probes`) ask of the watcher: a protocol, so that each part imports
this module and never :mod:`.watcher`, which makes them (no import circle).
No I/O; :class:`~agentenv.relay.watcher.Watcher` is the one implementation.

Every member is read-only here: a part reads the watcher's state and calls
it, and never rebinds its attributes.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol

from agentenv.relay.known import Known
from agentenv.relay.logbook import Logbook
from agentenv.relay.worlds import RelayWorlds
from agentenv.scopes import Scopes
from agentenv.settings import Settings

__all__ = ["HeldSessions", "TabSessions", "Watching"]


class TabSessions(Protocol):
    """The probes' sessions: one of the watcher's on a tab, attached on need."""

    async def session(self, tab: str) -> str | None: ...


class HeldSessions(Protocol):
    """The quotas' sessions on tabs, by tab."""

    @property
    def sessions(self) -> dict[str, str]: ...


class Watching(Protocol):
    """The watcher, as its parts see it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def logbook(self) -> Logbook: ...

    @property
    def worlds(self) -> RelayWorlds: ...

    @property
    def scopes(self) -> Scopes: ...

    @property
    def known(self) -> Known:
        """Chromium's targets as learned (relay/known.py)."""

    @property
    def default_context(self) -> str | None: ...

    @property
    def probes(self) -> TabSessions: ...

    @property
    def quotas(self) -> HeldSessions: ...

    def scope_name(self, context: str | None) -> str | None: ...

    def spawn(self, work: Coroutine[Any, Any, None]) -> None: ...

    async def call(
        self,
        method: str,
        params: dict[str, Any],
        session: str | None = None,
        deadline_s: float = 5.0,
    ) -> dict[str, Any]: ...
