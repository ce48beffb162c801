"""The users a computer is configured with (``AGENTENV_USERS`` and its
file): ``name:token``, ``name:token:scope`` and ``…:role=human`` entries
(docs/spec.md section 7), and the folder name a scope's downloads go in.
Read by :func:`agentenv.settings.load`; apart from it so that the settings
module holds the settings. No I/O."""

from __future__ import annotations

import hashlib
import re

from agentenv.errors import AgentEnvError

__all__ = [
    "AGENTENV_USER",
    "SettingsError",
    "parse_humans",
    "parse_scopes",
    "parse_users",
    "scope_folder",
]

#: The name the computer's own actions (and the control token) carry.
AGENTENV_USER = "agentenv"


class SettingsError(AgentEnvError, ValueError):
    """A setting is malformed; the message names the variable to fix."""


_COMMENT = re.compile(r"(?:^|\s)#")


_SCOPE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def scope_folder(name: str) -> str:
    """The name of a scope's downloads folder: the scope's own name when it is
    a plain one, else a digest of it (a user's name, which a scope defaults
    to, may hold ``/`` or be ``..``)."""
    if _SCOPE.match(name) and name not in (".", ".."):
        return name
    return "scope-" + hashlib.sha256(name.encode()).hexdigest()[:16]


#: The roles a user may have (``role=…``, the last field); ``agent`` is the default.
_ROLES = ("agent", "human")


def parse_users(text: str, source: str = "AGENTENV_USERS") -> dict[str, str]:
    """Parse ``name:token`` pairs; raise :class:`SettingsError` naming ``source``.

    The error never quotes a token.
    """
    return {name: token for name, (token, _, _) in _entries(text, source).items()}


def parse_scopes(text: str, source: str = "AGENTENV_USERS") -> dict[str, str]:
    """Each user's scope: the third field of ``name:token:scope``, else the name."""
    return {name: scope for name, (_, scope, _) in _entries(text, source).items()}


def parse_humans(text: str, source: str = "AGENTENV_USERS") -> frozenset[str]:
    """The users whose last field is ``role=human``: people, not agents."""
    return frozenset(n for n, (_, _, role) in _entries(text, source).items() if role == "human")


def _entries(text: str, source: str) -> dict[str, tuple[str, str, str]]:
    users: dict[str, tuple[str, str, str]] = {}
    # Comments first (a comment may hold commas of its own). A comment starts
    # a line or follows a space: a token may hold a "#".
    lines = (_COMMENT.split(raw, 1)[0] for raw in text.splitlines())
    pairs = [pair for line in lines for pair in line.replace(",", " ").split()]
    for number, pair in enumerate(pairs, start=1):
        head, _, last = pair.rpartition(":")
        role = "agent"
        if last.startswith("role="):  # never a scope: a scope holds no "="
            pair, role = head, last.removeprefix("role=")
            if role not in _ROLES:
                raise SettingsError(
                    f"{source}: entry {number}'s role must be role=agent or role=human"
                )
        name, sep, token = pair.partition(":")
        scope = name
        if token.count(":"):
            token, _, scope = token.rpartition(":")
            if not _SCOPE.match(scope):
                raise SettingsError(
                    f"{source}: entry {number}'s scope (after the last colon) must be 1 to 64 "
                    "letters, digits, '.', '_' or '-'"
                )
        if not sep or not name or not token:
            raise SettingsError(
                f"{source}: entry {number} is not name:token; write users as "
                "name:token pairs (or name:token:scope) separated by commas"
            )
        if name == AGENTENV_USER:
            raise SettingsError(
                f"{source}: the user name {AGENTENV_USER!r} is reserved for the "
                "control token; set AGENTENV_CONTROL_TOKEN instead"
            )
        if name in users:
            raise SettingsError(f"{source}: user {name!r} is listed twice")
        users[name] = (token, scope, role)
    return users
