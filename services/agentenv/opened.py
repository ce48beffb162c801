"""Scopes opened on demand (``scopes/open``) and their tokens, as every
program that checks a token reads them (docs/spec.md section 7; docs/decisions.md).

The relay is the one writer: it mints a scope's token, hands it to the
control token's op once, and keeps only its SHA-256 digest, written with
the scope's name to :attr:`~agentenv.settings.Settings.scopes_file` (0600,
in the folder the service user alone enters: Chromium's user cannot read
it). The relay, the app server and the recorder read that file again
whenever it changed (one ``stat`` a check), so a token the relay revoked is
refused at every door at once, and an app server or recorder that
restarts knows every open scope. A relay that restarts closes the scopes it
finds there (it cannot know their contexts again: relay/watcher.py). A
token is 256 random bits: its digest finds it as well as the token would,
and is worth nothing to a reader of the file.

A scope may be opened with a person (``scopes/open {person}``, issue 44): a
second token, minted the same way, whose holder is a person of role human
in that scope alone, named ``<person>@<scope>`` (``@`` is in no scope's
name, so no opened scope's agent is ever mistaken for one). Its digest is
kept beside the scope's; closing the scope revokes both.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MINTED",
    "REVOKED",
    "TOKEN_PREFIX",
    "Opened",
    "OpenedScope",
    "digest",
    "mint_token",
    "opened_of",
    "person_user",
]

log = logging.getLogger("agentenv.opened")

#: What a minted token starts with: a reader (or a secret scanner) knows it
#: for a scope's token, and no fixed user's token is mistaken for one.
TOKEN_PREFIX = "scope-"
#: A minted token's shape, found in any text (an ``auth`` line withholds a
#: name that holds one, open, closed or never known).
MINTED = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]{43}")


#: The digest of a scope whose token was revoked while the scope stays open
#: a moment (a restarted relay closing the scopes it found): no token has it.
REVOKED = "revoked"


def mint_token() -> str:
    """A new scope's token: 256 random bits."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """The SHA-256 digest of ``token``, as the file keeps it."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class OpenedScope:
    """One scope opened on demand: its name, its token's digest, when it
    opened (seconds since the epoch), and whether it is being closed (its
    token revoked, its name not yet free); its person's user name
    (``<person>@<scope>``) and token's digest, if it was opened with one."""

    name: str
    digest: str
    opened: float
    closing: bool = False
    person: str | None = None
    person_digest: str | None = None


def person_user(person: str, scope: str) -> str:
    """The user name of ``person`` in the opened scope ``scope``."""
    return f"{person}@{scope}"


class Opened:
    """The open scopes, read from ``path`` when it changed; written by the relay."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._scopes: dict[str, OpenedScope] = {}

    def scopes(self) -> dict[str, OpenedScope]:
        """Every scope opened and not yet closed (a closing one too)."""
        self._reload()
        return dict(self._scopes)

    def names(self) -> frozenset[str]:
        self._reload()
        return frozenset(self._scopes)

    def scope_of(self, token: str) -> str | None:
        """The open scope whose token ``token`` is (None: none, or it is
        being closed), compared in constant time against every one."""
        self._reload()
        mine = digest(token)
        found: str | None = None
        for scope in self._scopes.values():
            if hmac.compare_digest(mine, scope.digest) and not scope.closing:
                found = scope.name
        return found

    def person_of(self, token: str) -> tuple[str, str] | None:
        """The open scope whose person's token ``token`` is, and the person's
        user name (None: none, or the scope is being closed), compared in
        constant time against every one."""
        self._reload()
        mine = digest(token)
        found: tuple[str, str] | None = None
        for scope in self._scopes.values():
            if scope.person is None or scope.person_digest is None:
                continue
            if hmac.compare_digest(mine, scope.person_digest) and not scope.closing:
                found = (scope.name, scope.person)
        return found

    def write(self, scopes: Mapping[str, OpenedScope]) -> None:
        """Replace the file with ``scopes`` (the relay's): written whole to a
        file of its own, then renamed over, so a reader never sees half."""
        body = {
            "scopes": [
                {
                    "name": s.name,
                    "sha256": s.digest,
                    "opened": s.opened,
                    "closing": s.closing,
                    **(
                        {"person": s.person, "person_sha256": s.person_digest}
                        if s.person is not None
                        else {}
                    ),
                }
                for s in scopes.values()
            ]
        }
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        part = self.path.with_name(self.path.name + ".part")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(body, out)
        os.replace(part, self.path)
        self._scopes = dict(scopes)
        self._seen = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            found = os.stat(self.path)
        except OSError:
            return None
        return (found.st_ino, found.st_mtime_ns, found.st_size)

    def _reload(self) -> None:
        seen = self._stat()
        if seen == self._seen:
            return
        self._seen = seen
        self._scopes = {} if seen is None else self._read()

    def _read(self) -> dict[str, OpenedScope]:
        try:
            body = json.loads(self.path.read_text())
            return {
                str(s["name"]): OpenedScope(
                    str(s["name"]),
                    str(s["sha256"]),
                    float(s["opened"]),
                    bool(s.get("closing")),
                    str(s["person"]) if s.get("person") else None,
                    str(s["person_sha256"]) if s.get("person") else None,
                )
                for s in body["scopes"]
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # No scope's token is taken from a file that does not read: refused.
            log.error("the open scopes' file %s does not read (%s): none is open", self.path, exc)
            return {}


_BY_PATH: dict[Path, Opened] = {}


def opened_of(path: Path) -> Opened:
    """The one reader (and, in the relay, writer) of ``path`` in this process."""
    found = _BY_PATH.get(path)
    if found is None:
        found = _BY_PATH[path] = Opened(path)
    return found


def forget_all() -> None:
    """Tests: every reader made again on its next use."""
    with contextlib.suppress(Exception):
        _BY_PATH.clear()
