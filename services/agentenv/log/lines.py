"""The log's line kinds and their encoding (SPEC.md section 1, "Line kinds").

Every line is ``{"seq": N, "at": "<UTC ISO 8601 ms>", <kind>: {...}}`` with
``seq`` first, so readers find a line's number without parsing it all
(:func:`seq_of`). Kinds: ``action``, ``tab``, ``reset``, ``outcome``, ``lost``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

__all__ = [
    "AGENT_VIAS",
    "BROWSER_EXITED",
    "KINDS",
    "Kind",
    "agent_act",
    "encode",
    "iso",
    "iso_ms",
    "line",
    "scope_of",
    "seq_of",
]

Kind = Literal["action", "tab", "reset", "outcome", "lost"]
KINDS: tuple[Kind, ...] = ("action", "tab", "reset", "outcome", "lost")

#: The op of the computer's own line when Chromium goes away (its tabs all
#: close; it restarts): a recording open then notes a gap in its manifest.
BROWSER_EXITED = "browser/exited"

_PREFIX = b'{"seq":'


_second: list[Any] = [None, ""]  # the last whole second formatted, and its text
_milli: list[Any] = [None, ""]  # the last millisecond formatted, and its text


def iso(t: float | None = None) -> str:
    """UTC ISO 8601 with milliseconds, e.g. ``2026-11-30T06:20:01.123Z``."""
    return iso_ms(int((time.time() if t is None else t) * 1000))


def iso_ms(milli: int) -> str:
    """:func:`iso` of a time in whole milliseconds since the epoch."""
    if _milli[0] == milli:  # a busy log stamps many lines in one millisecond
        text: str = _milli[1]
        return text
    whole = milli // 1000
    if _second[0] != whole:  # format the date and time once a second
        stamp = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _second[0], _second[1] = whole, stamp
    text = f"{_second[1]}{milli % 1000:03d}Z"
    _milli[0], _milli[1] = milli, text
    return text


def line(seq: int, at: str, kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
    return {"seq": seq, "at": at, kind: body}


def encode(entry: dict[str, Any]) -> bytes:
    """One complete line, newline included."""
    return orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)


def seq_of(raw: bytes) -> int | None:
    """The ``seq`` of an encoded line, or None if it has none."""
    if raw.startswith(_PREFIX):
        end = raw.find(b",", len(_PREFIX))
        try:
            return int(raw[len(_PREFIX) : end])
        except ValueError:
            pass
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    seq = value.get("seq") if isinstance(value, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


#: The ways in an agent acts through (``agentenv`` is the computer's own).
AGENT_VIAS = ("cdp", "mcp", "api")


def agent_act(line: dict[str, Any]) -> dict[str, Any] | None:
    """The action of a log line that is an agent's own act, else None: an
    acting entry, by an agent (not the computer's own, ``who``/``via:
    agentenv``), and not a command run within a tool call or op (that call's
    own entry stands for it). Bursts, the words a judge reads, the viewer and
    the exports all count these, and only these."""
    action = line.get("action")
    if not isinstance(action, dict) or action.get("acts") != "acting":
        return None
    if action.get("who") == "agentenv" or action.get("within") is not None:
        return None
    return action if action.get("via") in AGENT_VIAS else None


def scope_of(line: dict[str, Any]) -> str | None:
    """The scope a log line is in: its action's or its tab event's (None: a
    line of the whole computer, such as a reset, or a computer of one scope)."""
    for kind in ("action", "tab"):
        body = line.get(kind)
        if isinstance(body, dict):
            found = body.get("scope")
            return found if isinstance(found, str) else None
    return None
