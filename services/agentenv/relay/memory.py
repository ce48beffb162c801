"""Bytes of agents' messages the relay holds at once (issue 22). No I/O.

A message an agent sends is held while the relay reads it, checks it, logs
it and hands it to Chromium: as text, parsed, and as the frame it sends on.
Six 200 MB messages at once killed the relay for memory, and every agent's
connection with it. Two bounds now keep any one user's messages from
costing the others:

- a message is at most ``AGENTENV_AGENT_MESSAGE_BYTES`` (the connection is
  closed, 1009, before it is held: :mod:`agentenv.relay.relay_server`);
- the big messages being handled at once are bounded per user
  (``AGENTENV_USER_INFLIGHT_BYTES``) and for the relay as a whole
  (``AGENTENV_RELAY_INFLIGHT_BYTES``): past either, the message is refused
  at once (rule ``memory``), its text dropped, and the sender's next ones
  go on as the others finish.

Only messages of :data:`COUNTED` bytes or more count: an ordinary command
costs nothing here. The control token's own links are not bounded.

A message counts for what reading it holds (:func:`held_bytes`), not for
its length alone: parsed, each JSON value is a Python object. 8 MiB of
``[],[],…`` is 2.8 million lists: the relay died writing it again (SIGSEGV
in orjson, under the relay's memory limit), and every agent's connection
with it; 30 MiB of it took 2 s to parse, where a 30 MiB string parses in
29 ms into 30 MiB. Such a message is now refused unparsed (past the user's
share), and one that is parsed lets the others' commands run before the
sender's next (``proxy``).

A message is also held while it is being read, before it is whole: one
user's sixteen connections could each hold 32 MiB of a message they never
finish. A :class:`Meter` counts, per connection and each way (an agent's
messages, and Chromium's answers to it), the bytes read and not yet handed
on, against a second :class:`InFlight` for reading: per user the larger of
``AGENTENV_USER_INFLIGHT_BYTES`` and ``AGENTENV_AGENT_MESSAGE_BYTES`` (one
message of the largest size an agent may send can always be read), and
``AGENTENV_RELAY_INFLIGHT_BYTES`` for the relay. Past either, that
connection is closed (1009, rule ``memory``): what it was sending or being
sent is already partly read and cannot be answered. An answer Chromium
makes counts for the agent who asked until it is handed over, so an agent
cannot have Chromium write half a gigabyte into the relay either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "AT_LIMIT",
    "COUNTED",
    "OBJECT_BYTES",
    "SCANNED",
    "STEP",
    "STRINGS_SKIPPED",
    "VALUE_BYTES",
    "InFlight",
    "Meter",
    "held_bytes",
]

#: Messages this big or bigger count against the bounds (smaller ones are
#: the ordinary traffic of every client, and cost a lookup nothing).
COUNTED = 1024 * 1024
#: Why a connection is closed when the relay's own limit is reached while it
#: is served (images/browser/launch/service.sh sets it: RLIMIT_DATA).
AT_LIMIT = (
    "disconnected by agentenv guard memory: the relay is at its memory limit "
    "(AGENTENV_RELAY_MEMORY_MB); send less at once, or give the computer more memory"
)
#: What a :class:`Meter` takes at a time (fewer calls on a long read).
STEP = 256 * 1024
#: Messages shorter than this are never read for what they hold: at most a
#: few MiB parsed, in milliseconds.
SCANNED = 64 * 1024
#: What a JSON value keeps once parsed, at most, beyond its text: each
#: comma or ``[`` (a value, a list) :data:`VALUE_BYTES`, each ``{`` (a
#: dict, its keys) :data:`OBJECT_BYTES`. Measured with CPython 3.11 and
#: orjson 3.13 on arrays of one shape each, per element kept: ``[]`` 64
#: bytes, ``{}`` 72, ``"ab"`` 59, ``1.5`` 32, ``{"a":1}`` 192,
#: ``{"a":"b","c":"d"}`` 291, a 100-character string 157
#: (tests/unit/test_memory.py holds the estimate against the parse).
VALUE_BYTES = 96
OBJECT_BYTES = 256
#: Strings a message may have for :func:`held_bytes` to skip their text
#: (each costs a few microseconds to skip); past it every comma and bracket
#: counts, an estimate only larger.
STRINGS_SKIPPED = 20_000
#: The rest of a JSON string after its opening quote, to its closing one.
_STRING_REST = re.compile(r'(?:[^"\\]++|\\.)*+"')


def held_bytes(data: str, bound: int = 0) -> int:
    """About the most bytes ``data``, a message's text, keeps once parsed:
    its length (its strings' characters) and what each value it begins
    keeps (:data:`VALUE_BYTES` a comma or ``[``, :data:`OBJECT_BYTES` a
    ``{``). Commas and brackets inside strings begin no value: a message of
    at most :data:`STRINGS_SKIPPED` strings is counted outside them (a
    script or a CSV text of 30 MiB counts about its length); one of more is
    counted whole, only larger (quotes escaped in a string are not counted
    as strings). Scans at C speed, about 11 ms for 30 MiB each; strings are
    skipped (5 to 12 ms a MiB of them) only when the first count is past
    ``bound``, the most the message may hold (0: none, never skipped): only
    messages of :data:`SCANNED` bytes or more are read."""
    held = _held(data, data.count(",") + data.count("["), data.count("{"))
    if held < COUNTED or not bound or held <= bound:
        return held  # small, or within the bound however counted
    if data.count('"') - data.count('\\"') > 2 * STRINGS_SKIPPED:
        return held  # too many strings to skip: only larger
    return _held(data, *_outside_strings(data))


def _held(data: str, values: int, objects: int) -> int:
    return len(data) + VALUE_BYTES * values + OBJECT_BYTES * objects


def _outside_strings(data: str) -> tuple[int, int]:
    """The commas and ``[`` (values), and the ``{`` (objects), of ``data``
    outside its JSON strings."""
    values = objects = start = 0
    find, count = data.find, data.count
    while True:
        quote = find('"', start)
        end = len(data) if quote < 0 else quote
        values += count(",", start, end) + count("[", start, end)
        objects += count("{", start, end)
        if quote < 0:
            return values, objects
        rest = _STRING_REST.match(data, quote + 1)
        if rest is None:  # a string never closed: the rest is its text (no JSON)
            return values, objects
        start = rest.end()


@dataclass
class InFlight:
    """Bytes of big messages being handled, per user and in all."""

    per_user: int
    total: int
    held: dict[str, int] = field(default_factory=dict)
    everyone: int = 0
    #: The settings the bounds come from, as the refusals name them.
    per_user_name: str = "AGENTENV_USER_INFLIGHT_BYTES"

    def take(self, who: str, size: int) -> str | None:
        """Hold ``size`` bytes for ``who``; None if done, else why not."""
        mine = self.held.get(who, 0)
        if self.per_user and mine + size > self.per_user:
            return (
                f"blocked by agentenv guard memory: {who[:64]}'s messages being handled "
                f"would hold {mine + size} bytes, past {self.per_user_name}="
                f"{self.per_user}: send big messages one at a time"
            )
        if self.total and self.everyone + size > self.total:
            return (
                f"blocked by agentenv guard memory: agents' messages being handled would "
                f"hold {self.everyone + size} bytes, past AGENTENV_RELAY_INFLIGHT_BYTES="
                f"{self.total}: retry when others finish"
            )
        self.held[who] = mine + size
        self.everyone += size
        return None

    @property
    def bound(self) -> int:
        """The most one message may hold here (0: no bound)."""
        bounds = [b for b in (self.per_user, self.total) if b]
        return min(bounds) if bounds else 0

    def give(self, who: str, size: int) -> None:
        """Let go of ``size`` bytes ``who`` held."""
        left = self.held.get(who, 0) - size
        if left > 0:
            self.held[who] = left
        else:
            self.held.pop(who, None)
        self.everyone = max(0, self.everyone - size)


@dataclass
class Meter:
    """Bytes one connection has read one way and not yet handed on."""

    reading: InFlight
    who: str
    #: Bytes taken from ``reading`` for this connection.
    held: int = 0
    #: Bytes read since the last whole message was handed on.
    seen: int = 0
    #: Why the connection went past its bound (it reads nothing more).
    over: str | None = None

    def read(self, size: int) -> str | None:
        """Count ``size`` bytes read; the reason to close the connection, once."""
        if self.over is not None:
            return None
        self.seen += size
        if self.seen < COUNTED or self.seen <= self.held:
            return None
        want = -(-(self.seen - self.held) // STEP) * STEP
        why = self.reading.take(self.who, want)
        if why is None:
            self.held += want
            return None
        self.over = why.replace("blocked by", "disconnected by", 1).replace(
            "messages being handled", "messages being read and handled"
        )
        return self.over

    def handed_on(self, data: str | bytes) -> None:
        """A whole message was handed on: what was read for it is let go;
        bytes of the next one already read still count. (Its size in bytes is
        worked out only when something is held: nothing else needs it exact.)"""
        size = len(data) if not self.held or not isinstance(data, str) else _bytes(data)
        self.seen = max(0, self.seen - size)
        keep = -(-self.seen // STEP) * STEP if self.seen >= COUNTED else 0
        if self.held > keep:
            self.reading.give(self.who, self.held - keep)
            self.held = keep

    def stop(self) -> None:
        """The connection ended: all it held is let go, and it counts no more."""
        if self.held:
            self.reading.give(self.who, self.held)
        self.held = 0
        self.seen = 0
        self.over = self.over or "the connection ended"


def _bytes(text: str) -> int:
    """``text``'s size as the reader counted it, UTF-8 (a frame's header aside)."""
    return len(text) if text.isascii() else len(text.encode())
