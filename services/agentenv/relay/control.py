"""The control token's ``AgentEnv.*`` commands on a relay connection
(SPEC.md section 1): actions begun and ended, the tabs, a reset, granted
tokens, the entries still open. The proxy has parsed their params
(:mod:`agentenv.protocol.control`); each answers a result or raises
``ValueError`` for a -32602 answer."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentenv.protocol.control import (
    BeginAction,
    ControlParams,
    EndAction,
    Grant,
    OpenEntries,
    Reset,
    Revoke,
    Tabs,
    Whoami,
)
from agentenv.relay.connection import ClientState
from agentenv.relay.errors import RelayError
from agentenv.relay.logbook import Logbook
from agentenv.relay.tokens import Granted
from agentenv.relay.watcher import Watcher

__all__ = ["Control"]


class Control:
    """One connection's ``AgentEnv.*`` commands."""

    def __init__(
        self, state: ClientState, logbook: Logbook, watcher: Watcher, granted: Granted
    ) -> None:
        self.state = state
        self.logbook = logbook
        self.watcher = watcher
        self.granted = granted
        self._by: dict[type[ControlParams], Callable[[Any], Awaitable[dict[str, Any]]]] = {
            BeginAction: self._begin,
            EndAction: self._end,
            Whoami: self._whoami,
            Tabs: self._tabs,
            Reset: self._reset,
            Grant: self._grant,
            Revoke: self._revoke,
            OpenEntries: self._pending,
        }

    async def run(self, params: ControlParams) -> dict[str, Any]:
        """The result of the command ``params`` are of."""
        return await self._by[type(params)](params)

    async def _begin(self, params: BeginAction) -> dict[str, Any]:
        scope = self.state.scope
        name = scope.name if scope is not None else None
        return {"entry": self.logbook.begin_action(self.state.number, params, name)}

    async def _end(self, params: EndAction) -> dict[str, Any]:
        self.logbook.end_action(self.state.number, params)
        return {}

    async def _whoami(self, params: Whoami) -> dict[str, Any]:
        return {"conn": self.state.number, "user": self.state.identity.user}

    async def _tabs(self, params: Tabs) -> dict[str, Any]:
        causes = self.logbook.causes
        order = list(causes.front)
        active = causes.active
        scope = self.state.scope
        if scope is not None:  # a scoped control link: its scope's tabs only
            order = [t for t in order if scope.holds(self.watcher.context_of(t))]
            active = active if active in order else (order[0] if order else None)
        return {"active": active, "order": order, "loading": causes.loading_now(time.monotonic())}

    async def _reset(self, params: Reset) -> dict[str, Any]:
        # Every context an agent made, and every scope but the home one (its
        # own tabs and data the app has just reset), goes with its tabs.
        try:
            await self.watcher.reset_scopes()
        except RelayError as exc:
            raise ValueError(
                f"the browser contexts could not be disposed of: {exc.message}"
            ) from None
        return {"entry": self.logbook.reset(params.reason)}

    async def _grant(self, params: Grant) -> dict[str, Any]:
        return {"token": self.granted.grant(self.state.number, params.who, params.tag)}

    async def _pending(self, params: OpenEntries) -> dict[str, Any]:
        return {"entries": {str(k): v for k, v in self.logbook.writer.open_scopes().items()}}

    async def _revoke(self, params: Revoke) -> dict[str, Any]:
        self.granted.revoke(params.token)
        return {}
