"""The control token's ``AgentEnv.*`` commands on a relay connection
(docs/spec.md section 1): actions begun and ended, the tabs, a reset, granted
tokens, the entries still open, the app server's failed authentication.
The proxy has parsed their params (:mod:`agentenv.protocol.control`); each
answers a result or raises :class:`~agentenv.relay.relay_errors.ControlRefused`
for a -32602 answer."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentenv.log.auth import Failure
from agentenv.protocol.control import (
    OTHER_SCOPE,
    AuthFailed,
    BeginAction,
    Begun,
    ClearCredentials,
    ClearedCredentials,
    CloseScope,
    ControlParams,
    ControlResult,
    Credentials,
    Done,
    EndAction,
    FillCredential,
    Filled,
    HoldScope,
    Identified,
    ListCredentials,
    ListScopes,
    Open,
    OpenedScopes,
    OpenEntries,
    OpenScope,
    Reset,
    ResetScope,
    Revoke,
    RevokeScope,
    ScopeListed,
    ScopeMade,
    SetCredential,
    TabOrder,
    Tabs,
    Token,
    TokenGrant,
    Whoami,
    Written,
)
from agentenv.relay.auth_log import AuthLog
from agentenv.relay.client_state import ClientState
from agentenv.relay.filling import fill
from agentenv.relay.logbook import Logbook
from agentenv.relay.relay_errors import ControlRefused, RelayError
from agentenv.relay.tokens import Granted
from agentenv.relay.vault import HOME, Credential, FillRefused
from agentenv.relay.watcher import Watcher

__all__ = ["Control"]


class Control:
    """One connection's ``AgentEnv.*`` commands."""

    def __init__(
        self,
        state: ClientState,
        logbook: Logbook,
        watcher: Watcher,
        granted: Granted,
        auth: AuthLog | None = None,
    ) -> None:
        self.state = state
        self.logbook = logbook
        self.watcher = watcher
        self.granted = granted
        self.auth = auth
        self._by: dict[type[ControlParams], Callable[[Any], Awaitable[ControlResult]]] = {
            BeginAction: self._begin,
            EndAction: self._end,
            Whoami: self._whoami,
            Tabs: self._tabs,
            Reset: self._reset,
            TokenGrant: self._grant,
            Revoke: self._revoke,
            OpenEntries: self._pending,
            AuthFailed: self._auth_failed,
            OpenScope: self._open_scope,
            RevokeScope: self._revoke_scope,
            CloseScope: self._close_scope,
            ResetScope: self._reset_scope,
            ListScopes: self._scopes,
            HoldScope: self._hold_scope,
            SetCredential: self._set_credential,
            ListCredentials: self._credentials,
            ClearCredentials: self._clear_credentials,
            FillCredential: self._fill,
        }

    async def run(self, params: ControlParams) -> ControlResult:
        """The result of the command ``params`` are of (its model in
        :data:`~agentenv.protocol.control.CONTROL_RESULTS`)."""
        return await self._by[type(params)](params)

    async def _begin(self, params: BeginAction) -> Begun:
        scope = self.state.scope
        name = scope.name if scope is not None else None
        return Begun(entry=self.logbook.begin_action(self.state.number, params, name))

    async def _end(self, params: EndAction) -> Done:
        self.logbook.end_action(self.state.number, params)
        return Done()

    async def _whoami(self, params: Whoami) -> Identified:
        return Identified(conn=self.state.number, user=self.state.identity.user)

    async def _tabs(self, params: Tabs) -> TabOrder:
        front = self.logbook.causes.front
        order = list(front.order)
        active = front.active
        loading = front.loading_now(time.monotonic())
        scope = self.state.scope
        if scope is not None:  # a scoped control link: its scope's tabs only
            order = [t for t in order if scope.holds(self.watcher.context_of(t))]
            active = active if active in order else (order[0] if order else None)
            loading = [t for t in loading if t in order]
        return TabOrder(active=active, order=order, loading=loading)

    async def _reset(self, params: Reset) -> Written:
        # Every context an agent made, and every scope but the home one (its
        # own tabs and data the app has just reset), goes with its tabs.
        try:
            await self.watcher.keeper.reset_scopes()
        except RelayError as exc:
            raise ControlRefused(
                f"the browser contexts could not be disposed of: {exc.message}"
            ) from None
        return Written(entry=self.logbook.reset(params.reason))

    async def _grant(self, params: TokenGrant) -> Token:
        if self.watcher.keeper.openings.was_closed(params.who):
            # A closed scope's MCP session still asking: it must not act in another.
            raise ControlRefused("this scope was closed: no token is granted for it")
        return Token(token=self.granted.grant(self.state.number, params.who, params.tag))

    async def _pending(self, params: OpenEntries) -> Open:
        entries = self.logbook.writer.open_scopes()
        scope = self.state.scope
        if scope is not None:  # a scoped link learns that others' entries are open, not whose
            entries = {k: v if v == scope.name else OTHER_SCOPE for k, v in entries.items()}
        return Open(entries={str(k): v for k, v in entries.items()})

    async def _revoke(self, params: Revoke) -> Done:
        self.granted.revoke(params.token)
        return Done()

    async def _auth_failed(self, params: AuthFailed) -> Done:
        if self.auth is not None:
            named = {str(key): value for key, value in params.claimed.items()}
            self.auth.refused(Failure(params.door, params.source, params.path, params.why, named))
        return Done()

    # -- scopes opened on demand (relay/opening.py) ---------------------------
    # A refusal is a -32602 answer whose message is the op's: the app answers
    # it with the status it starts with ("409: ...", relay/opening.py).

    async def _open_scope(self, params: OpenScope) -> ScopeMade:
        try:
            name, token, person_token = await self.watcher.keeper.open_scope(
                params.name, params.person
            )
        except RelayError as exc:
            raise ControlRefused(f"{exc.status}: {exc.message}") from None
        return ScopeMade(scope=name, token=token, person_token=person_token)

    async def _revoke_scope(self, params: RevokeScope) -> Done:
        try:
            await self.watcher.keeper.revoke_scope(params.scope)
        except RelayError as exc:
            raise ControlRefused(f"{exc.status}: {exc.message}") from None
        return Done()

    async def _close_scope(self, params: CloseScope) -> Done:
        try:
            await self.watcher.keeper.close_scope(params.scope)
        except RelayError as exc:
            raise ControlRefused(f"{exc.status}: {exc.message}") from None
        return Done()

    async def _reset_scope(self, params: ResetScope) -> Done:
        # No ``reset`` line: one forgets the sites every scope visited, which
        # data/reset must still clear (app/browser_data.py); the op is on the record.
        try:
            await self.watcher.keeper.reset_scope(params.scope)
        except RelayError as exc:
            raise ControlRefused(f"{exc.status}: {exc.message}") from None
        return Done()

    async def _scopes(self, params: ListScopes) -> OpenedScopes:
        listed = [
            ScopeListed(scope=s.name, opened=s.opened, closing=s.closing, person=s.person)
            for s in self.watcher.keeper.openings.open.values()
        ]
        return OpenedScopes(scopes=listed, max_scopes=self.watcher.keeper.openings.max_scopes)

    async def _hold_scope(self, params: HoldScope) -> Done:
        """A person holds the link's scope (relay/person_holds.py)."""
        self.watcher.holds.hold(self._vault_scope(), params.who, params.seconds)
        return Done()

    # -- the credential vault (relay/vault.py) ---------------------------------
    # Each acts in the link's scope (the app's link for the op's scope). A
    # refusal is "<status>: <message>", as the scope ops' are; never a value.

    def _vault_scope(self) -> str:
        scope = self.state.scope
        return scope.name if scope is not None else HOME

    async def _set_credential(self, params: SetCredential) -> Done:
        credential = Credential.of(
            params.name, params.origin, params.username, params.password, params.totp_secret
        )
        try:
            self.watcher.vault.set(self._vault_scope(), credential)
        except FillRefused as exc:
            raise ControlRefused(f"{exc.status}: {exc.message}") from None
        return Done()

    async def _credentials(self, params: ListCredentials) -> Credentials:
        return Credentials(credentials=self.watcher.vault.listed(self._vault_scope()))

    async def _clear_credentials(self, params: ClearCredentials) -> ClearedCredentials:
        return ClearedCredentials(
            cleared=self.watcher.vault.clear(self._vault_scope(), params.name)
        )

    async def _fill(self, params: FillCredential) -> Filled:
        tab = params.tab
        scope = self.state.scope
        if tab is None:
            raise ControlRefused("400: name the tab to fill (the scope's active tab)")
        if scope is not None and not scope.holds(self.watcher.context_of(tab)):
            raise ControlRefused("404: no such tab in this scope")
        try:
            await fill(self.watcher, self._vault_scope(), tab, params.name, params.field)
        except FillRefused as exc:
            raise ControlRefused(f"{exc.status}: {exc.message}") from None
        return Filled(name=params.name, field=params.field, tab=tab)
