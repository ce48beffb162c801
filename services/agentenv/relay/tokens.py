"""Tokens the relay grants for one agent's connection (``AgentEnv.grant``). No I/O.

The app server starts a Playwright MCP for each MCP session; it connects to
the relay with a token granted for that session's caller instead of the
control token, so its commands pass the guard and carry the caller's name
like any agent's. A granted token names its user and the connection tag its
commands are scoped by, and lives until the granting connection closes or
revokes it. Tokens are 256 random bits: looking one up in a table tells
nothing about another.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from agentenv.access import Identity
from agentenv.relay.relay_errors import ControlRefused

__all__ = ["Granted", "GrantedToken"]

#: A bound on live grants, so a misbehaving caller cannot grow the table.
MAX_GRANTS = 10_000


@dataclass(frozen=True)
class GrantedToken:
    identity: Identity
    tag: str
    owner: int  # the connection that granted it


@dataclass
class Granted:
    tokens: dict[str, GrantedToken] = field(default_factory=dict)

    def grant(self, owner: int, who: str, tag: str) -> str:
        if len(self.tokens) >= MAX_GRANTS:
            raise ControlRefused(f"more than {MAX_GRANTS} granted tokens are live; revoke some")
        token = "granted-" + secrets.token_urlsafe(32)
        self.tokens[token] = GrantedToken(Identity(who), tag, owner)
        return token

    def revoke(self, token: str) -> None:
        self.tokens.pop(token, None)

    def drop_owner(self, owner: int) -> None:
        for token in [t for t, g in self.tokens.items() if g.owner == owner]:
            del self.tokens[token]

    def drop_user(self, user: str) -> None:
        """Every token granted for ``user`` (a scope that was closed) ends."""
        for token in [t for t, g in self.tokens.items() if g.identity.user == user]:
            del self.tokens[token]

    def get(self, token: str | None) -> GrantedToken | None:
        return self.tokens.get(token) if token else None
