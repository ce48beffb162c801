"""``AgentEnv.*`` pseudo-commands: how the computer's programs report to the relay.

They travel as CDP commands on a relay connection that holds the control
token, and are never forwarded to Chromium (ARCHITECTURE.md, "The one log").
Each method's params are one model here, and so is each result (the wire
both ways); :data:`CONTROL_METHODS` maps the method to its params' model and
:data:`CONTROL_RESULTS` to its result's; the relay answers a command whose
params do not fit with a CDP error naming the field.

- ``AgentEnv.beginAction`` → ``{entry}``: an action begins (an op, a tool call).
- ``AgentEnv.endAction``: it ended.
- ``AgentEnv.whoami`` → ``{conn, user}``: this connection's number.
- ``AgentEnv.tabs`` → ``{active, order, loading}``: which tab is in front and
  the order of the others, as the relay keeps it, and which are loading.
- ``AgentEnv.reset`` → ``{entry}``: writes a ``reset`` line.
- ``AgentEnv.grant`` → ``{token}``: a token for one agent's connection
  (Playwright MCP's), acting as ``who`` under the guard like any agent; it
  lives until the granting connection closes or ``AgentEnv.revoke``.
- ``AgentEnv.revoke``: ends a granted token.
- ``AgentEnv.pending`` → ``{entries}``: the log entries numbered and not yet
  written, each with the scope it acts in (``null``: none named). A scoped
  recording's end waits for its own scope's only: another agent's command
  Chromium never answers is no gap in it.
- ``AgentEnv.authFailed``: a request the app server refused for its token
  (its ops, ``/mcp``, the live view): the relay writes it as the ``auth``
  line of its own failures, under the same bound (:mod:`agentenv.log.auth`).
- ``AgentEnv.openScope {name?}`` → ``{scope, token}``: a scope opened on
  demand, its browser context made with one blank tab, its token minted
  (``scopes/open``; the answer is the only place the token is ever sent).
- ``AgentEnv.revokeScope {scope}``: the first half of ``scopes/close``: its
  token no longer admits anyone, its agents' connections are ended.
- ``AgentEnv.closeScope {scope}``: the second half: every context it made
  is disposed of, its remaining connections end, its downloads folder is
  emptied, its storage quotas and log share are dropped, its name is free.
- ``AgentEnv.resetScope {scope}``: that scope alone made new
  (its connections ended, its contexts disposed of, its downloads emptied,
  one blank tab in a fresh context); its token stays.
- ``AgentEnv.scopes`` → ``{scopes, max_scopes}``: the scopes opened on demand.
- ``AgentEnv.setCredential {name, origin, username, password, totp_secret?}``:
  a credential put into the link's scope (``credentials/set``), held in the
  relay's memory only (:mod:`agentenv.relay.vault`). The one command whose
  params carry secrets: sent with :data:`agentenv.protocol.credentials.REVEAL`,
  never logged, and refused without quoting them.
- ``AgentEnv.listCredentials`` → ``{credentials: [{name, origin, fields}]}``.
- ``AgentEnv.clearCredentials {name?}`` → ``{cleared}``.
- ``AgentEnv.fillCredential {name, field, tab?}`` → ``{name, field, tab}``:
  the relay types the value into the focused field of the tab, only where
  the focused field's frame is of the credential's origin
  (:mod:`agentenv.relay.filling`). The one ``AgentEnv.*`` command an agent's
  own connection may send too (on the tab's session, ``tab`` left out: the
  relay fills the tab of that session, in the agent's scope).
- ``AgentEnv.requestHuman {reason, timeout_s?}`` → ``{word, who, note}``:
  an agent's own only (any of its sessions): it asks a person to step in,
  as the ``request_human`` op does, and is answered when they hand back
  (:mod:`agentenv.relay.asking`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    SecretStr,
    StrictBool,
    StrictInt,
    field_serializer,
    field_validator,
    model_validator,
)

from agentenv.protocol.credentials import (
    CredentialField,
    CredentialInfo,
    CredentialName,
    SecretValue,
    check_origin,
    check_totp,
    revealed,
)

__all__ = [
    "AGENT_METHODS",
    "AGENT_MODELS",
    "CONTROL_METHODS",
    "CONTROL_RESULTS",
    "HELD_WAIT_S",
    "OTHER_SCOPE",
    "AskHuman",
    "AuthFailed",
    "BeginAction",
    "Begun",
    "ClearCredentials",
    "ClearedCredentials",
    "CloseScope",
    "ControlParams",
    "ControlResult",
    "Credentials",
    "Done",
    "EndAction",
    "FillCredential",
    "Filled",
    "GuardMark",
    "HoldScope",
    "Identified",
    "ListCredentials",
    "ListScopes",
    "Name",
    "Open",
    "OpenEntries",
    "OpenScope",
    "OpenedScopes",
    "Reset",
    "ResetScope",
    "Revoke",
    "RevokeScope",
    "ScopeListed",
    "ScopeMade",
    "SetCredential",
    "TabOrder",
    "Tabs",
    "Token",
    "TokenGrant",
    "Via",
    "Whoami",
    "Written",
]

#: How an action came in (docs/spec.md section 1, ``via``).
Via = Literal["mcp", "api", "human", "agentenv", "cdp"]
#: A name in the log: who acted, a role, a tool, a call id.
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class ControlParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BeginAction(ControlParams):
    via: Via
    who: Name
    #: The role a caller named when it was not theirs to name (kept beside who).
    role: Name | None = None
    op: Name | None = None
    tool: Name | None = None
    call: Name | None = None
    args: Any = None
    tab: Name | None = None
    acts: Literal["acting", "reading"] = "acting"
    #: Relay connections (numbers) or connection tags whose commands belong to it.
    scope: list[Annotated[StrictInt, Field(ge=1)] | Name] = Field(default_factory=list)
    #: Argument paths holding typed text (``text``, ``fields.*.value``).
    typing: list[Name] = Field(default_factory=list)

    @model_validator(mode="after")
    def _names_what(self) -> BeginAction:
        if self.op is None and self.tool is None:
            raise ValueError("op or tool must be given")
        return self


class GuardMark(ControlParams):
    """What a program's own guard did (the app refusing an MCP session)."""

    rule: Name
    action: Literal["blocked", "disconnected", "cancelled"] = "blocked"


class EndAction(ControlParams):
    entry: StrictInt
    ok: StrictBool
    error: str | None = None
    #: A refusal of the program's own, on the record like the relay's.
    guard: GuardMark | None = None


class Whoami(ControlParams):
    pass


class Tabs(ControlParams):
    pass


class Reset(ControlParams):
    reason: Name


class TokenGrant(ControlParams):
    """``AgentEnv.grant``: a token for one connection acting as ``who`` (an MCP
    session's Playwright MCP). Not a recording's upload grant
    (:class:`agentenv.protocol.recording.Grant`)."""

    who: Name
    #: The connection tag the granted connection must carry (AgentEnv-Tag).
    tag: Name


class OpenEntries(ControlParams):
    pass


class Revoke(ControlParams):
    token: Annotated[str, Field(min_length=1, max_length=200)]


class AuthFailed(ControlParams):
    """``AgentEnv.authFailed``: one request the app server refused for its
    token (never the token: :mod:`agentenv.log.auth`)."""

    door: Literal["op", "mcp", "live", "playwright"]
    source: Annotated[str, Field(max_length=64)] | None = None
    path: Annotated[str, Field(max_length=2000)]
    why: Literal["no token", "unknown token"]
    claimed: dict[Literal["user", "role"], Annotated[str, Field(max_length=64)]] = Field(
        default_factory=dict
    )


#: A scope's name on the wire (checked by the relay's rules, relay/opening.py).
ScopeName = Annotated[str, Field(min_length=1, max_length=256)]


class OpenScope(ControlParams):
    """``AgentEnv.openScope``: a scope opened on demand (``name``: made up if
    none), with a person of role human in it when ``person`` names one."""

    name: ScopeName | None = None
    person: ScopeName | None = None


class RevokeScope(ControlParams):
    scope: ScopeName


class CloseScope(ControlParams):
    scope: ScopeName


class ResetScope(ControlParams):
    scope: ScopeName


class ListScopes(ControlParams):
    pass


#: The longest an agent's acting command or op waits behind a person
#: holding its scope (relay/person_holds.py, app/acting.py).
HELD_WAIT_S = 120.0


class HoldScope(ControlParams):
    """``AgentEnv.holdScope``: a person holds the link's scope for
    ``seconds`` more (0: they let go); its agents' acting commands wait
    meanwhile (relay/person_holds.py)."""

    who: Annotated[str, Field(min_length=1, max_length=64)]
    seconds: Annotated[float, Field(ge=0, le=3600)]


class SetCredential(ControlParams):
    """``AgentEnv.setCredential``: a credential into the link's scope. Its
    values are :class:`~pydantic.SecretStr`; they are written out only when
    dumped with :data:`~agentenv.protocol.credentials.REVEAL` (the app's
    link, :meth:`agentenv.relay_link.BrowserLink.control`)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: CredentialName
    origin: Annotated[str, Field(min_length=1, max_length=2048)]
    username: SecretValue
    password: SecretValue
    totp_secret: SecretValue | None = None

    @field_validator("origin")
    @classmethod
    def _origin(cls, value: str) -> str:
        return check_origin(value)

    @field_validator("totp_secret")
    @classmethod
    def _totp(cls, value: SecretStr | None) -> SecretStr | None:
        return check_totp(value)

    @field_serializer("username", "password", "totp_secret")
    def _secret(self, value: SecretStr | None, info: FieldSerializationInfo) -> str | None:
        return revealed(value, info)


class ListCredentials(ControlParams):
    pass


class ClearCredentials(ControlParams):
    name: CredentialName | None = None


class FillCredential(ControlParams):
    """``AgentEnv.fillCredential``: ``tab`` is the control link's to name
    (the app's ``credentials/fill``); an agent sends it on the tab's session."""

    name: CredentialName
    field: CredentialField
    tab: Name | None = None


class AskHuman(ControlParams):
    """``AgentEnv.requestHuman``: an agent asks a person to step in, and waits
    (at most ``timeout_s``) for their word (the ``request_human`` op's)."""

    reason: str = Field(min_length=1, max_length=500)
    timeout_s: float = Field(300.0, ge=1, le=3600, allow_inf_nan=False)


class ControlResult(BaseModel):
    """What an ``AgentEnv.*`` command answers (extra fields are not taken)."""

    model_config = ConfigDict(extra="forbid")


class Begun(ControlResult):
    """``AgentEnv.beginAction``: the action's entry."""

    entry: StrictInt


class Done(ControlResult):
    """``AgentEnv.endAction``, ``AgentEnv.revoke``: nothing to say."""


class Identified(ControlResult):
    """``AgentEnv.whoami``: this connection's number and user."""

    conn: StrictInt
    user: str


class TabOrder(ControlResult):
    """``AgentEnv.tabs``: the tab in front, every tab front to back, and the
    tabs whose main frame is loading."""

    active: str | None
    order: list[str]
    loading: list[str] = Field(default_factory=list)


class Written(ControlResult):
    """``AgentEnv.reset``: the ``reset`` line's entry."""

    entry: StrictInt


class Token(ControlResult):
    """``AgentEnv.grant``: the token for one agent's connection."""

    token: str


#: What a scoped control link reads for an entry of another scope.
OTHER_SCOPE = "(another scope)"


class Open(ControlResult):
    """``AgentEnv.pending``: each entry numbered and not yet written, with
    the scope it acts in (null: none named; :data:`OTHER_SCOPE` for a scoped
    link asking about an entry not of its scope)."""

    entries: dict[str, str | None]


class ScopeMade(ControlResult):
    """``AgentEnv.openScope``: the scope's name and its token, and its
    person's when one was asked for (sent once, here)."""

    scope: str
    token: str
    person_token: str | None = None


class ScopeListed(ControlResult):
    """One scope opened on demand: its name, when it opened (seconds since
    the epoch), whether it is being closed."""

    scope: str
    opened: float
    closing: bool = False
    person: str | None = None


class OpenedScopes(ControlResult):
    """``AgentEnv.scopes``: the scopes opened on demand, and how many may be."""

    scopes: list[ScopeListed]
    max_scopes: StrictInt


class Credentials(ControlResult):
    """``AgentEnv.listCredentials``: names and origins, never a value."""

    credentials: list[CredentialInfo]


class ClearedCredentials(ControlResult):
    """``AgentEnv.clearCredentials``: how many went."""

    cleared: StrictInt


class Filled(ControlResult):
    """``AgentEnv.fillCredential``: what was typed where (never the value)."""

    name: str
    field: CredentialField
    tab: str


CONTROL_METHODS: dict[str, type[ControlParams]] = {
    "AgentEnv.beginAction": BeginAction,
    "AgentEnv.endAction": EndAction,
    "AgentEnv.whoami": Whoami,
    "AgentEnv.tabs": Tabs,
    "AgentEnv.reset": Reset,
    "AgentEnv.grant": TokenGrant,
    "AgentEnv.revoke": Revoke,
    "AgentEnv.pending": OpenEntries,
    "AgentEnv.authFailed": AuthFailed,
    "AgentEnv.openScope": OpenScope,
    "AgentEnv.revokeScope": RevokeScope,
    "AgentEnv.closeScope": CloseScope,
    "AgentEnv.resetScope": ResetScope,
    "AgentEnv.scopes": ListScopes,
    "AgentEnv.holdScope": HoldScope,
    "AgentEnv.setCredential": SetCredential,
    "AgentEnv.listCredentials": ListCredentials,
    "AgentEnv.clearCredentials": ClearCredentials,
    "AgentEnv.fillCredential": FillCredential,
}

#: The ``AgentEnv.*`` commands an agent's own connection may send, and their
#: params (``requestHuman`` is an agent's alone).
AGENT_MODELS: dict[str, type[ControlParams]] = {
    "AgentEnv.fillCredential": FillCredential,
    "AgentEnv.requestHuman": AskHuman,
}
AGENT_METHODS = frozenset(AGENT_MODELS)

#: Each method's result model.
CONTROL_RESULTS: dict[type[ControlParams], type[ControlResult]] = {
    BeginAction: Begun,
    EndAction: Done,
    Whoami: Identified,
    Tabs: TabOrder,
    Reset: Written,
    TokenGrant: Token,
    Revoke: Done,
    OpenEntries: Open,
    AuthFailed: Done,
    OpenScope: ScopeMade,
    RevokeScope: Done,
    CloseScope: Done,
    ResetScope: Done,
    ListScopes: OpenedScopes,
    HoldScope: Done,
    SetCredential: Done,
    ListCredentials: Credentials,
    ClearCredentials: ClearedCredentials,
    FillCredential: Filled,
}
