"""The log's line kinds and their encoding (docs/spec.md section 1, "Line kinds").

Every line is ``{"seq": N, "at": "<UTC ISO 8601 ms>", "prev": "<hash>", <kind>:
{...}}`` with ``seq`` first, so readers find a line's number without parsing
it all (:func:`seq_of`); the writer adds ``prev``
(:mod:`agentenv.protocol.chain`). The kinds and their bodies, and what counts
as an agent's own act, are wire models: :mod:`agentenv.protocol.log`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import orjson

from agentenv.protocol.log import LineKind, LogLine

__all__ = [
    "BROWSER_EXITED",
    "PARAMS_KEPT",
    "PARAMS_MAX",
    "TABS_COUNTED",
    "bound",
    "encode",
    "iso",
    "iso_ms",
    "line",
    "seconds_of",
    "seq_of",
]


#: The op of the computer's own line when Chromium goes away (its tabs all
#: close; it restarts): a recording open then notes a gap in its manifest.
BROWSER_EXITED = "browser/exited"
#: The op of the computer's own line that counts a page's tab events not
#: written, the share of the log that pays for them being spent (once a minute).
TABS_COUNTED = "tabs/counted"

_PREFIX = b'{"seq":'

#: An action line's ``params`` or ``args`` over this many bytes (as encoded,
#: after redaction) are logged by their size and count, with the first
#: :data:`PARAMS_KEPT` characters of their JSON kept (issue 40: a command's
#: nested or list parameters, each string cut at 2,000 characters, still
#: wrote 4 MB lines).
PARAMS_MAX = 16 * 1024
PARAMS_KEPT = 2000


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


def seconds_of(stamp: str | None) -> float | None:
    """An ISO 8601 UTC time (``…Z``, :func:`iso`'s) as seconds since the
    epoch; None for none, or for text that is not one."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def line(seq: int, at: str, kind: LineKind, body: Mapping[str, Any]) -> LogLine:
    return cast(LogLine, {"seq": seq, "at": at, kind: body})


def bound(fields: dict[str, Any]) -> bool:
    """Cut an action's ``params`` and ``args`` over :data:`PARAMS_MAX` bytes
    to ``{"cut": {"bytes", "count", "kept"}}`` in place (``count``: their
    top-level keys or items); whether any was. Their values are already
    redacted, so any part of their JSON is as safe as the whole."""
    changed = False
    for key in ("params", "args"):
        value = fields.get(key)
        if not isinstance(value, dict | list):
            continue
        try:
            text = orjson.dumps(value)
        except (TypeError, ValueError):  # the writer withholds what it cannot write
            continue
        if len(text) > PARAMS_MAX:
            kept = text[:PARAMS_KEPT].decode(errors="ignore")  # whole characters only
            fields[key] = {"cut": {"bytes": len(text), "count": len(value), "kept": kept}}
            changed = True
    return changed


def encode(entry: LogLine | dict[str, Any]) -> bytes:
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
