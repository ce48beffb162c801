"""What the action log says was typed into password fields, by tab: what the
network log needs to decide which bodies to withhold whole (docs/spec.md section
7, ``har``; :mod:`agentenv.recorder.har` decides).

Pure: fed the log's lines as written (bytes), in ``seq`` order, by the
recorder's follower, from the log's first line on (a tab typed into before
the recorder started, or before a recording, still holds what was typed).

- A line holding the relay's marker for withheld typing
  (``{"withheld": "password"}``, in params or arguments) is typing into a
  password field on its ``tab`` (a line naming no tab: on every tab).
- :attr:`Typed.clock` is the ``at`` of the latest line read. Lines are
  numbered when they begin and read in number order with none missing, so
  once the clock is past a moment, every typing that began before it has
  been read: a request is judged only then (a page can send what is typed
  before the relay has written the typing's line).
- Until the follower has read up to where the log was when the recorder
  started (:attr:`Typed.ready`), nothing is judged.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

import orjson

__all__ = ["EVERY_TAB", "MARKER", "Typed"]

#: The relay's marker for typing it withheld, as the log's writer encodes it.
MARKER = b'"withheld":"password"'
#: The tab of a typing line that names none.
EVERY_TAB = "*"
#: Tabs remembered (the oldest forgotten past this: a long run opens many).
TABS_KEPT = 10_000


@dataclass
class Typed:
    """The latest withheld typing on each tab, and how far the log is read."""

    #: The wall time (seconds) of the latest withheld typing, by tab.
    tabs: OrderedDict[str, float] = field(default_factory=OrderedDict)
    #: The ``at`` of the latest line read (seconds), and the seconds formatted.
    clock: float = 0.0
    ready: bool = False
    _second: tuple[bytes, float] = (b"", 0.0)

    def read(self, lines: list[bytes]) -> None:
        """Lines of the log as written, in ``seq`` order: only those holding
        the marker are parsed, and only the last one's ``at`` moves the clock
        (lines are numbered, and stamped, as they begin)."""
        for raw in lines:
            if MARKER in raw:
                self._typing(raw, self._at(raw))
        if lines:
            at = self._at(lines[-1])
            if at is not None and at > self.clock:
                self.clock = at

    def seen(self, raw: bytes) -> None:
        """One line of the log, as written."""
        self.read([raw])

    def at(self, tab: str) -> float | None:
        """When a password field on ``tab`` was last typed into (None: never)."""
        own, every = self.tabs.get(tab), self.tabs.get(EVERY_TAB)
        if own is None or every is None:
            return own if every is None else every
        return max(own, every)

    def _typing(self, raw: bytes, at: float | None) -> None:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        body = line.get("action") if isinstance(line, dict) else None
        if not isinstance(body, dict):
            return  # an outcome or a tab line quotes no typing
        tab = body.get("tab")
        key = tab if isinstance(tab, str) and tab else EVERY_TAB
        when = at if at is not None else self.clock
        self.tabs[key] = max(when, self.tabs.get(key, 0.0))
        self.tabs.move_to_end(key)
        while len(self.tabs) > TABS_KEPT:
            self.tabs.popitem(last=False)

    def _at(self, raw: bytes) -> float | None:
        """A line's ``at`` in seconds, read from its bytes (``"at":"…Z"``,
        second by second as the writer formats it)."""
        found = raw.find(b'"at":"', 0, 64)
        if found < 0:
            return None
        stamp = raw[found + 6 : found + 30]  # 2026-11-30T06:20:01.123Z
        if len(stamp) != 24 or stamp[19:20] != b"." or stamp[23:24] != b"Z":
            return None
        second = stamp[:19]
        if second != self._second[0]:
            try:
                whole = datetime.fromisoformat(second.decode() + "+00:00").timestamp()
            except ValueError:
                return None
            self._second = (second, whole)
        try:
            return self._second[1] + int(stamp[20:23]) / 1000
        except ValueError:
            return None
