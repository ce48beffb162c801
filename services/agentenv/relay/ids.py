"""A command as Chromium will read it: its numbers and its V8 ids (docs/spec.md
section 2, "The relay forwards what it checked"). No I/O.

The relay checks a command, then sends **its own serialization** of what it
checked, never the client's bytes: keys given twice, escapes and number
spellings that two JSON readers could take differently never reach
Chromium (:func:`encode`). That leaves what Chromium's own readers make of
the values, which the relay reads the same way:

- **Numbers.** Chromium's JSON reader makes an integer of any number that is
  one and fits 32 bits (``2.0``, ``2e0``, even ``2.0000000000000001``) and a
  double of the rest; an integer parameter given a double is refused
  ("int32 value expected"). :func:`canonical` makes each such number a
  Python ``int`` before any rule reads it, and the relay sends it so.
- **V8's ids.** V8 reads an object or call-frame id
  (``<isolate>.<context>.<n>``), a unique context id (``<a>.<b>``) and a
  script id with ``strtoll``: it skips leading spaces, takes a sign and
  leading zeros, and stops at a NUL (``"7.2\\u0000x.1"`` is context 2). The
  relay takes each only in the one form V8 writes it (:func:`problem`):
  decimal, no sign but the isolate's minus, no leading zero, nothing else,
  in range; anything else where the protocol puts such an id is refused
  (rule ``malformed-id``) before any other rule reads it. An id written as
  V8 writes it is read by the relay as by V8 (:func:`context_of`).

Where the protocol puts each id is generated from the pinned Chromium's
``/json/protocol`` (:data:`agentenv.relay.pinned.IDS`): a parameter of an id
type at any depth (``arguments[].objectId``, ``location.scriptId``), and
nowhere else (``WebAudio``'s ``contextId`` is no execution context).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from agentenv.relay.pinned import IDS, IdKind

__all__ = [
    "INT32",
    "canonical",
    "context_of",
    "encode",
    "found",
    "problem",
]

INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def canonical(value: Any) -> Any:
    """``value`` with every number Chromium reads as an int32 made an ``int``,
    in place (the relay's own parse of a client's message, so nothing else
    holds it); the value, for convenience."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(item) is float:
                if item.is_integer() and INT32[0] <= item <= INT32[1]:
                    value[key] = int(item)
            elif type(item) is dict or type(item) is list:
                canonical(item)
    elif kind is list:
        for index, item in enumerate(value):
            if type(item) is float:
                if item.is_integer() and INT32[0] <= item <= INT32[1]:
                    value[index] = int(item)
            elif type(item) is dict or type(item) is list:
                canonical(item)
    elif kind is float and value.is_integer() and INT32[0] <= value <= INT32[1]:
        return int(value)
    return value


def encode(call: int, method: str, params: dict[str, Any] | None, session: str | None) -> str:
    """The command as the relay sends it: what it read, written by the relay."""
    message: dict[str, Any] = {"id": call, "method": method}
    if params is not None:
        message["params"] = params
    if session is not None:
        message["sessionId"] = session
    return orjson.dumps(message).decode()


_PART = r"(0|-?[1-9][0-9]{0,18})"
_REMOTE = re.compile(rf"{_PART}\.{_PART}\.{_PART}")
_UNIQUE = re.compile(rf"{_PART}\.{_PART}")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,9}")


def _in(number: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= number <= bounds[1]


def _well_formed(kind: IdKind, value: object) -> bool:
    if kind == "context":
        return type(value) is int and INT32[0] <= value <= INT32[1]
    if type(value) is not str:
        return False
    if kind in ("remote-object", "call-frame"):
        parts = _REMOTE.fullmatch(value)
        return (
            parts is not None
            and _in(int(parts[1]), _INT64)
            and _in(int(parts[2]), INT32)
            and _in(int(parts[3]), INT32)
        )
    if kind == "unique-context":
        pair = _UNIQUE.fullmatch(value)
        return pair is not None and _in(int(pair[1]), _INT64) and _in(int(pair[2]), _INT64)
    # script, heap-object: V8 writes them as plain decimals.
    return _DECIMAL.fullmatch(value) is not None and int(value) <= INT32[1]


def _at(node: Any, path: tuple[str, ...]) -> Iterator[Any]:
    """The values at ``path`` (``"[]"``: each item of a list)."""
    if not path:
        yield node
        return
    step, rest = path[0], path[1:]
    if step == "[]":
        if type(node) is list:
            for item in node:
                yield from _at(item, rest)
    elif isinstance(node, Mapping) and step in node:
        yield from _at(node[step], rest)


def found(method: str, params: Mapping[str, Any] | None) -> Iterator[tuple[IdKind, str, Any]]:
    """Each id ``params`` give where the protocol reads one: its kind, where
    (``arguments[].objectId``) and its value (absent and null ones left out)."""
    places = IDS.get(method)
    if not places or not params:
        return
    for path, kind in places:
        if path[0] not in params:
            continue
        for value in _at(params, path):
            if value is not None:
                yield kind, ".".join(path), value


def problem(method: str, params: Mapping[str, Any] | None) -> tuple[str, IdKind] | None:
    """Where ``params`` hold an id in a form V8 does not write (and the kind
    expected there), or None. On every command: a method with no place for
    an id costs one lookup, a top-level one a ``get``."""
    places = _PLACES.get(method)
    if places is None or not params:
        return None
    top, nested = places
    for key, kind in top:
        value = params.get(key)
        if value is not None and not _well_formed(kind, value):
            return key, kind
    for path, kind in nested:
        if path[0] in params:
            for value in _values(params, path):
                if value is not None and not _well_formed(kind, value):
                    return ".".join(path), kind
    return None


def _values(params: Mapping[str, Any], path: tuple[str, ...]) -> list[Any]:
    """:func:`_at`'s values, the protocol's two nested shapes (``a.b``,
    ``a.[].b``) without a generator."""
    node = params[path[0]]
    if len(path) == 2:
        return [node.get(path[1])] if type(node) is dict else []
    if len(path) == 3 and path[1] == "[]":
        if type(node) is not list:
            return []
        return [item.get(path[2]) for item in node if type(item) is dict]
    return list(_at(params, path))


#: :data:`IDS` split: top-level places by key, and the nested ones.
_PLACES: dict[
    str, tuple[tuple[tuple[str, IdKind], ...], tuple[tuple[tuple[str, ...], IdKind], ...]]
] = {
    method: (
        tuple((path[0], kind) for path, kind in places if len(path) == 1),
        tuple((path, kind) for path, kind in places if len(path) > 1),
    )
    for method, places in IDS.items()
}


def context_of(value: object) -> int | None:
    """The execution context an object or call-frame id names, read as V8
    reads it: only from the form V8 writes (else None, and :func:`problem`
    refuses it where the protocol reads one)."""
    if not isinstance(value, str):
        return None
    parts = _REMOTE.fullmatch(value)
    if parts is None:
        return None
    context = int(parts[2])
    return context if _in(context, INT32) else None
