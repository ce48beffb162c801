"""Which scope may open, under which name (``scopes/open``; docs/spec.md section 7). No I/O.

The relay keeps the scopes opened on demand here and writes them to the
open scopes' file (:mod:`agentenv.opened`). A scope opens under a name
given or one made up; a given name is a scope's name as ``AGENTENV_USERS``
takes one (1 to 64 letters, digits, ``.``, ``_`` or ``-``; its downloads
folder is the name itself), and names no fixed user or scope, no open or
closing scope, and nothing the computer keeps for itself. Past
``AGENTENV_MAX_SCOPES`` open at once, opening is refused: :meth:`Openings.admit`
is the one place that says so (a queue wraps it there).
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from agentenv.access import DEFAULT_USER
from agentenv.opened import OpenedScope, digest, mint_token, person_user
from agentenv.relay.relay_errors import RelayError
from agentenv.settings import AGENTENV_USER, scope_folder

__all__ = ["MAX_CLOSED", "Openings", "ScopeRefused"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

#: Names the computer keeps: ``agentenv`` (the control token's), ``default``
#: (a caller of an open path), and the dot folders.
_KEPT = frozenset({AGENTENV_USER, DEFAULT_USER, ".", ".."})

#: Closed scopes' names remembered (the relay grants no token for one).
MAX_CLOSED = 10_000


class ScopeRefused(RelayError):
    """A scope may not open, close or reset as asked; ``status`` is the HTTP
    status an op answers (400 a bad name, 404 no such scope, 409 a name taken
    or every scope open)."""

    status = 400


@dataclass
class Openings:
    """The scopes opened on demand, and the rules for opening one."""

    #: ``AGENTENV_MAX_SCOPES`` (0: none may be opened).
    max_scopes: int
    #: The fixed users' names and their scopes' names.
    fixed: frozenset[str]
    #: The fixed scopes' downloads folders (an opened scope's may not be one).
    folders: frozenset[str]
    open: dict[str, OpenedScope] = field(default_factory=dict)
    #: Names of scopes closed and not opened again, oldest first.
    closed: dict[str, None] = field(default_factory=dict)

    @classmethod
    def of(cls, max_scopes: int, users: Collection[str], scopes: Collection[str]) -> Openings:
        fixed = frozenset(users) | frozenset(scopes)
        return cls(max_scopes, fixed, frozenset(scope_folder(s) for s in scopes))

    def admit(self, asked: str | None, cap: bool = True) -> str:
        """The name a scope may open under now; :class:`ScopeRefused` why not
        (the one place that refuses; the queue for ``scopes/open``, in the
        watcher, asks first without the cap, then with it once let in)."""
        if not self.max_scopes:
            raise ScopeRefused(
                "no scope may be opened on this computer: start it with AGENTENV_MAX_SCOPES "
                "set to how many may be open at once",
                status=409,
            )
        if asked is not None:
            self.check_name(asked)
        if cap and len(self.open) >= self.max_scopes:
            raise ScopeRefused(
                f"{len(self.open)} scopes are open, as many as this computer holds "
                f"(AGENTENV_MAX_SCOPES={self.max_scopes}): close one with scopes/close, "
                "or retry when one closes",
                status=409,
            )
        if asked is not None:
            return asked
        while True:  # a made-up name taken is as rare as a token's collision
            name = "s" + secrets.token_hex(6)
            if name not in self.open and name not in self.fixed and name not in self.closed:
                return name

    def check_name(self, name: str) -> None:
        """:class:`ScopeRefused` unless ``name`` may be a new scope's."""
        if not _NAME.match(name) or name in _KEPT:
            raise ScopeRefused(
                "name: a scope's name is 1 to 64 letters, digits, '.', '_' or '-' (not "
                f"'.', '..', {AGENTENV_USER!r} or {DEFAULT_USER!r}); or leave it out for one "
                "made up"
            )
        if name in self.fixed or scope_folder(name) in self.folders:
            raise ScopeRefused(
                f"name: {name!r} is a user's or a scope's of AGENTENV_USERS: pick another",
                status=409,
            )
        found = self.open.get(name)
        if found is not None:
            state = "being closed" if found.closing else "open"
            raise ScopeRefused(
                f"name: a scope {name!r} is {state}: pick another, or close it first", status=409
            )

    def add(self, name: str, now: float | None = None) -> tuple[OpenedScope, str]:
        """Open ``name`` (admitted): the scope and its token, minted now."""
        token = mint_token()
        scope = OpenedScope(name, digest(token), time.time() if now is None else now)
        self.open[name] = scope
        self.closed.pop(name, None)
        return scope, token

    def check_person(self, person: str) -> None:
        """:class:`ScopeRefused` unless ``person`` may name a scope's person."""
        if not _NAME.match(person) or person in _KEPT:
            raise ScopeRefused(
                "person: a person's name is 1 to 64 letters, digits, '.', '_' or '-' "
                f"(not {AGENTENV_USER!r} or {DEFAULT_USER!r})"
            )

    def add_person(self, name: str, person: str) -> str:
        """The open scope ``name`` gets a person (``scopes/open {person}``):
        their token, minted now; a person it had before loses theirs."""
        self.check_person(person)
        user = person_user(person, name)
        if user in self.fixed:
            raise ScopeRefused(f"person: {user!r} is a user of AGENTENV_USERS: pick another")
        token = mint_token()
        self.open[name] = dataclasses.replace(
            self.get(name), person=user, person_digest=digest(token)
        )
        return token

    def get(self, name: str) -> OpenedScope:
        """The open scope ``name``; :class:`ScopeRefused` (404) if none is
        (a fixed scope is not one: it cannot be closed)."""
        found = self.open.get(name)
        if found is not None:
            return found
        if name in self.fixed:
            raise ScopeRefused(
                f"scope: {name[:64]!r} is one of AGENTENV_USERS, which stay open: data/reset "
                "clears every scope",
                status=409,
            )
        raise ScopeRefused(
            f"scope: no scope {name[:64]!r} is open on this computer: scopes/list lists them",
            status=404,
        )

    def closing(self, name: str) -> OpenedScope:
        """``name`` is being closed: its token no longer admits anyone, its
        name is not yet free."""
        found = self.get(name)
        closing = dataclasses.replace(found, closing=True)
        self.open[name] = closing
        return closing

    def remove(self, name: str) -> None:
        """``name`` is closed: its name is free again (and remembered closed)."""
        if self.open.pop(name, None) is not None:
            self.closed[name] = None
            while len(self.closed) > MAX_CLOSED:
                del self.closed[next(iter(self.closed))]

    def was_closed(self, name: str) -> bool:
        """Whether ``name`` names a scope being closed, or closed and not open again."""
        found = self.open.get(name)
        return name in self.closed if found is None else found.closing
