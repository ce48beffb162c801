"""Failed authentication on the record: what an ``auth`` line says, and how
many are written (docs/spec.md section 1, ``auth``). No I/O.

A request refused for its token (401: none, or one no user holds) at any of
the computer's doors is a :class:`Failure`: when, from which address, at
which door (``cdp``: the relay, its WebSocket upgrades and discovery; ``op``:
the app server's ops, recording ops and ``/metrics``; ``mcp``; ``live``;
``playwright``),
the path, why, and the names the request claimed (``?user=``,
``AgentEnv-Role``). Never the token, nor a prefix, a length or a hash of
it: a wrong token is often a near miss of a real one (a typo, a rotated
one, another computer's), and any function of it helps guess the real one.
A claimed name that is a token (the one sent, or any the computer knows) is
withheld.

:class:`AuthRecord` decides which failures are written one by one, so a
flood cannot fill the disk: in each minute, at most :data:`PER_SOURCE` from
one address and :data:`TOTAL` in all; the others are counted, and when the
minute is over a count line says how many were refused from each address
and at which doors (the :data:`NAMED` busiest by address, the rest together
with ``source: null``). At most ``TOTAL + NAMED + 1`` lines a minute,
whatever comes in, and at most :data:`MAX_HELD` addresses held in memory.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentenv.opened import MINTED

__all__ = [
    "DOORS",
    "MAX_HELD",
    "NAMED",
    "PER_SOURCE",
    "TOTAL",
    "WINDOW_S",
    "AuthRecord",
    "Door",
    "Failure",
    "claimed",
    "door_of_app_path",
    "path_shape",
]

Door = Literal["cdp", "op", "mcp", "live", "playwright"]
DOORS: tuple[Door, ...] = ("cdp", "op", "mcp", "live", "playwright")
Why = Literal["no token", "unknown token"]

#: Failures written one by one from one address in a minute.
PER_SOURCE = 5
#: Failures written one by one in a minute, from every address together.
TOTAL = 30
#: Addresses named in a minute's count lines (the busiest); the rest share one line.
NAMED = 10
#: Addresses whose refusals are counted apart in a minute; past it, with the rest.
MAX_HELD = 4096
WINDOW_S = 60.0
#: The longest path and claimed name kept.
_LONGEST = 200
_NAME_LONGEST = 64


@dataclass(frozen=True)
class Failure:
    """One request refused for its token."""

    door: Door
    source: str | None  # the TCP peer's address (behind a proxy: the proxy's)
    path: str
    why: Why
    #: Names the request claimed (``user``: ``?user=``; ``role``: ``AgentEnv-Role``).
    claimed: Mapping[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "door": self.door,
            "source": self.source,
            "path": path_shape(self.path),
            "why": self.why,
        }
        if self.claimed:
            body["claimed"] = dict(self.claimed)
        return body


#: A path's part kept as it is: a word of a route (``devtools``, ``page``,
#: ``browser-recording``, ``tabs``); anything else may be an id or a token
#: put in the wrong place (``/devtools/browser/x&token=…``, ``/mcp/<token>``).
_ROUTE_WORD = re.compile(r"[a-z][a-z_-]{0,31}")


def path_shape(path: str) -> str:
    """A refused request's path as an ``auth`` line keeps it: its route's
    words, every other part ``…``: what a caller put in its path (a token
    after ``&token=`` with no ``?``, an id) is never written."""
    parts = path[: _LONGEST * 4].split("/")
    return "/".join(p if not p or _ROUTE_WORD.fullmatch(p) else "…" for p in parts)[:_LONGEST]


def _printable(text: str, longest: int) -> str:
    return "".join(c if c.isprintable() else "?" for c in text[:longest])


def claimed(
    names: Mapping[str, str | None], sent: str | None, known: Iterable[str]
) -> dict[str, str]:
    """The names a request claimed, as an ``auth`` line keeps them: each cut
    to 64 printable characters, and ``withheld`` when it is a token (the one
    sent, or one the computer knows: a caller that put its token in the
    wrong place). Compared in constant time, each against every token."""
    tokens = [t for t in (sent, *known) if t]
    kept: dict[str, str] = {}
    for key, value in names.items():
        if not value:
            continue
        hit = False
        for token in tokens:  # no early exit: timing says nothing of which
            hit |= hmac.compare_digest(value.encode(), token.encode())
        hit |= MINTED.search(value) is not None  # a scope's token, open or revoked
        kept[key] = "withheld" if hit else _printable(value, _NAME_LONGEST)
    return kept


def door_of_app_path(path: str) -> Door:
    """The app server's door a path is (``/mcp``, ``/live``, ``/playwright``; the rest
    are ops)."""
    if path == "/mcp" or path.startswith("/mcp/"):
        return "mcp"
    if path == "/live" or path.startswith("/live/"):
        return "live"
    if path == "/playwright":
        return "playwright"
    return "op"


@dataclass
class _DoorsHeld:
    count: int = 0
    doors: set[str] = field(default_factory=set)


@dataclass
class AuthRecord:
    """Which failures are written, minute by minute (see the module's docstring).

    :meth:`note` takes a failure and answers the ``auth`` bodies to write now
    (a minute's count lines first, if one ended); :meth:`due`, called every
    second or so, answers the count lines of a minute that ended with no
    failure since. Times are monotonic seconds.
    """

    per_source: int = PER_SOURCE
    total: int = TOTAL
    named: int = NAMED
    max_held: int = MAX_HELD
    window_s: float = WINDOW_S
    _window: int | None = None
    _written: dict[str | None, int] = field(default_factory=dict)
    _written_all: int = 0
    _held: dict[str | None, _DoorsHeld] = field(default_factory=dict)
    _others: _DoorsHeld = field(default_factory=_DoorsHeld)  # held past max_held addresses

    def note(self, failure: Failure, now: float) -> list[dict[str, Any]]:
        out = self.due(now)
        self._window = int(now // self.window_s)
        source = failure.source
        mine = self._written.get(source, 0)
        if mine < self.per_source and self._written_all < self.total:
            self._written[source] = mine + 1
            self._written_all += 1
            out.append(failure.body())
            return out
        held = self._held.get(source)
        if held is None:
            full = len(self._held) >= self.max_held
            held = self._others if full else self._held.setdefault(source, _DoorsHeld())
        held.count += 1
        held.doors.add(failure.door)
        return out

    def due(self, now: float) -> list[dict[str, Any]]:
        """The count lines of the minute just ended (none while it lasts)."""
        if self._window is None or int(now // self.window_s) == self._window:
            return []
        held = sorted(self._held.items(), key=lambda item: -item[1].count)
        out = [
            {"source": source, "refused": h.count, "doors": sorted(h.doors)}
            for source, h in held[: self.named]
        ]
        rest = held[self.named :]
        count = sum(h.count for _, h in rest) + self._others.count
        if count:
            doors = set(self._others.doors).union(*(h.doors for _, h in rest))
            out.append({"source": None, "refused": count, "doors": sorted(doors)})
        self._window = None
        self._written.clear()
        self._written_all = 0
        self._held.clear()
        self._others = _DoorsHeld()
        return out
