"""The log's line kinds and their encoding (SPEC.md section 1, "Line kinds").

Every line is ``{"seq": N, "at": "<UTC ISO 8601 ms>", "prev": "<hash>", <kind>:
{...}}`` with ``seq`` first, so readers find a line's number without parsing
it all (:func:`seq_of`); the writer adds ``prev``
(:mod:`agentenv.protocol.chain`). The kinds and their bodies, and what counts
as an agent's own act, are wire models: :mod:`agentenv.protocol.log`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, cast

import orjson

from agentenv.protocol.log import LineKind, LogLine

__all__ = [
    "BROWSER_EXITED",
    "TABS_COUNTED",
    "encode",
    "iso",
    "iso_ms",
    "line",
    "seq_of",
]


#: The op of the computer's own line when Chromium goes away (its tabs all
#: close; it restarts): a recording open then notes a gap in its manifest.
BROWSER_EXITED = "browser/exited"
#: The op of the computer's own line that counts a page's tab events not
#: written, the share of the log that pays for them being spent (once a minute).
TABS_COUNTED = "tabs/counted"

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


def line(seq: int, at: str, kind: LineKind, body: dict[str, Any]) -> LogLine:
    return cast(LogLine, {"seq": seq, "at": at, kind: body})


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
