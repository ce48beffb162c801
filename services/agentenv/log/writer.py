"""The action log's single writer.

- Opens the file ``O_WRONLY | O_APPEND`` and holds an ``fcntl`` lock on it: a
  second writer gets :class:`~agentenv.log.log_errors.LogLocked`.
- On open, recovers from a crash (:func:`~agentenv.log.numbering.recover`):
  a half-written last line is moved to ``<file>.partial`` and cut off,
  numbering carries on after the highest ``seq``, and each number taken and
  never written gets a ``lost`` line. The hash chain carries on from the last
  whole line; when a line or a number was lost, a ``break`` line says so
  first (:mod:`agentenv.protocol.chain`).
- Every line carries ``prev``, the hash of the line written before it
  (:data:`~agentenv.protocol.chain.ALGORITHM`): ``{"seq", "at", "prev",
  <kind>}``. The hash is of the bytes as written, once per line, after its
  write succeeded (a line that failed to go out is no link).
- Each line is written with one ``os.write`` of the complete line, no
  user-space buffering, so a crash can tear at most the line being written.
- :meth:`LogWriter.check_stalled` (called about once a second) writes actions
  open past the limit as unfinished; their end then writes an ``outcome``.
- Every line's ``at`` is the monotonic clock plus the wall clock's offset
  from it, read again at every :meth:`~LogWriter.check_stalled`: one clock
  read per command instead of two, and one time base for all lines. A step
  of the wall clock (or a suspend, which the monotonic clock does not count)
  shows in ``at`` within a second; a slew (NTP) never shows.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from hashlib import sha256
from pathlib import Path
from typing import Any, cast

import orjson

from agentenv.log.cdp_params import redact_params, resolved
from agentenv.log.lines import PARAMS_MAX, bound, encode, iso_ms, line
from agentenv.log.log_errors import LogError, LogLocked
from agentenv.log.numbering import STALLED_S, Numbering, Recovery, recover
from agentenv.protocol.chain import GENESIS, hash_written, line_hash
from agentenv.protocol.log import ActionBody, LineKind

__all__ = ["LogWriter"]

log = logging.getLogger("agentenv.log")


class LogWriter:
    def __init__(
        self,
        path: Path,
        fd: int,
        numbering: Numbering,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        *,
        chain: bool = True,
    ) -> None:
        self.path = path
        #: Whether lines carry ``prev`` (False only for the bench's figure of
        #: what the chain costs: a log without it fails every check).
        self.chain = chain
        #: The hash of the last line written: what the next one chains from.
        self.head = GENESIS
        self._fd = fd
        self._numbering = numbering
        self._open = numbering.open  # the same dict, one lookup nearer
        self._unfinished = numbering.unfinished  # the same set
        self._clock = clock
        self.monotonic = monotonic
        self._puts = 0
        #: The file's size: what was there at open, and every byte written since.
        self.size = 0
        #: Bytes of action lines written for each user, in all, and of the
        #: tab lines their share pays for (:meth:`record`'s ``who``): the log
        #: budgets' count (issue 22; the computer's own, ``agentenv``, is
        #: counted too, and never refused: see LogBudget.over); and what
        #: each had spent when the current minute of this writer's clock
        #: (``minute``, moved on by the first line begun in a later one, at
        #: its begin) began (:meth:`spent_this_minute`). A line costs one
        #: count, at its end: a line begun before the turn and ended after it
        #: counts in the new minute.
        self.spent: dict[str, int] = {}
        self._spent_before: dict[str, int] = {}
        self.minute = 0
        self._minute_ends = 0.0  # when ``minute`` ends, on the monotonic clock
        self._offset = clock() - monotonic()  # wall clock minus monotonic
        #: The latest begin's millisecond as ``at`` is written, and when it
        #: begins and ends on the monotonic clock (a begin within shares it).
        self._at = ""
        self._milli_starts = self._milli_ends = -math.inf
        #: How long the latest timed write took (one write in 256 is timed).
        self.sampled_write_s = 0.0

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        stalled_s: float = STALLED_S,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        chain: bool = True,
    ) -> LogWriter:
        """Open ``path`` as its only writer, recovering from a crash."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogLocked(
                f"another writer holds {path}: only one relay may write a computer's "
                "log; stop the other one, or give this one its own AGENTENV_NAME"
            ) from None
        try:
            writer = cls(path, fd, Numbering(stalled_s=stalled_s), clock, monotonic, chain=chain)
            writer._recover()
        except BaseException:
            os.close(fd)
            raise
        return writer

    @property
    def _marker(self) -> Path:
        """There while a writer has the log open: found at open, the writer
        before stopped without closing it."""
        return Path(f"{self.path}.open")

    def _recover(self) -> None:
        data = self.path.read_bytes()
        found = recover(data)
        unclean = self._marker.exists()
        try:
            self._marker.touch()
        except OSError as exc:  # the log is still written; only this check is lost
            log.warning("cannot mark %s as open: %s", self.path, exc.strerror)
        self.size = found.keep
        if found.partial:
            with open(f"{self.path}.partial", "ab") as aside:
                aside.write(found.partial + b"\n")
            os.ftruncate(self._fd, found.keep)
            log.warning(
                "moved a half-written last line (%d bytes) to %s.partial",
                len(found.partial),
                self.path,
            )
        self._numbering.next_seq = found.highest + 1
        self.head = found.head
        at = self._stamp()
        if found.crashed or unclean:
            self._write(self._numbering.take(), at, "break", _break(found))
            log.warning("the log's writer before stopped without closing it: a break is written")
        for seq in found.missing:
            self._write(seq, at, "lost", {"entry": seq})
        if found.missing:
            log.warning("wrote %d lost lines for numbers never written", len(found.missing))

    def _stamp(self) -> str:
        """Now, as ``at`` is written (see the module's docstring)."""
        return iso_ms(int((self.monotonic() + self._offset) * 1000))

    @property
    def next_seq(self) -> int:
        return self._numbering.next_seq

    @property
    def open_count(self) -> int:
        return len(self._numbering.open)

    def open_scopes(self) -> dict[int, str | None]:
        """Each open action's number, with the scope it names (if any)."""
        return {
            seq: scope if isinstance(scope := fields.get("scope"), str) else None
            for seq, (_, _, fields) in self._numbering.open.items()
        }

    def _write(self, seq: int, at: str, kind: LineKind, body: dict[str, Any]) -> None:
        """Write a line of ``kind`` (chained, unless the chain is off); an
        action's params and args bounded (:func:`~agentenv.log.lines.bound`)."""
        if kind == "action":
            bound(body)
        if self.chain:
            self._put(encode({"seq": seq, "at": at, "prev": self.head, kind: body}))
        else:
            self._put(encode(line(seq, at, kind, body)))

    def _put(self, data: bytes) -> None:
        self._puts += 1
        if not self._puts & 255:
            self._timed(data)
        else:
            self._write_all(data)
        if self.chain:
            self.head = hash_written(data)

    def _timed(self, data: bytes) -> None:
        """One write in 256, timed (``sampled_write_s``, for /metrics)."""
        began = time.perf_counter()
        self._write_all(data)
        self.sampled_write_s = time.perf_counter() - began

    def _write_all(self, data: bytes) -> None:
        written = 0
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # only on a full disk or a signal
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            raise LogError(f"cannot write {self.path}: {exc.strerror}") from exc
        finally:
            self.size += written

    def begin(self, fields: ActionBody, now: float | None = None) -> int:
        """Take a number for an action that begins now (``now``: this writer's
        monotonic clock, if the caller has read it); its line comes at :meth:`end`.

        ``fields`` is the writer's from here: a caller changes the open line
        only through :meth:`amend`, :meth:`settle` and :meth:`end`'s ``more``,
        and :meth:`fields` shows it read-only.
        """
        if now is None:
            now = self.monotonic()
        if not self._milli_starts <= now < self._milli_ends:  # another millisecond
            milli = int((now + self._offset) * 1000)
            self._at = iso_ms(milli)
            self._milli_starts = milli / 1000 - self._offset
            if now >= self._minute_ends:  # a later minute (never an earlier one)
                self._next_minute(now)
            # The window ends at the minute's end too: a begin in the same
            # millisecond but a later minute still turns the minute.
            self._milli_ends = min((milli + 1) / 1000 - self._offset, self._minute_ends)
        # Numbering.begin, inlined: this runs for every command on the record.
        numbering = self._numbering
        seq = numbering.next_seq
        numbering.next_seq = seq + 1
        self._open[seq] = (now, self._at, cast(dict[str, Any], fields))
        return seq

    def fields(self, seq: int) -> Mapping[str, Any] | None:
        """The fields of an open action, to read (None once written)."""
        entry = self._open.get(seq)
        return entry[2] if entry else None

    def amend(self, seq: int, changes: ActionBody, drop: tuple[str, ...] = ()) -> bool:
        """Add to an open action's line what became known after it began
        (the tab a command opened, what a press landed on, a guard's
        rewrite), and take out the fields in ``drop``; False once written."""
        entry = self._open.get(seq)
        if entry is None:
            return False
        fields = entry[2]
        for key in drop:
            fields.pop(key, None)
        fields.update(changes)
        return True

    def settle(self, seq: int) -> None:
        """Redact an open action's params now, not when its line is written
        (a big message's parsed form is not kept until Chromium answers; a
        check that found the typing went into no password field)."""
        entry = self._open.get(seq)
        if entry is not None:
            params = entry[2].get("params")
            if type(params) is tuple:
                entry[2]["params"] = redact_params(params[0], params[1])

    def end(
        self, seq: int, ok: bool, error: str | None = None, more: Mapping[str, Any] | None = None
    ) -> None:
        """Write the action ``seq`` (or its ``outcome`` if written unfinished),
        with ``more`` fields (a mapping, not keywords: an empty ``**more`` costs
        a dict for every command on the record)."""
        entry = self._open.pop(seq, None)  # Numbering.finish, inlined
        if entry is None:
            log.warning("entry %d ended twice or was never begun", seq)
            return
        unfinished = self._unfinished
        if unfinished and seq in unfinished:
            unfinished.discard(seq)
            body: dict[str, Any] = {"entry": seq, "ok": ok}
            if error is not None:
                body["error"] = error
            self._write(self._numbering.take(), self._stamp(), "outcome", body)
            return
        _, at, fields = entry
        params = fields.get("params")
        if type(params) is tuple:  # resolved(), inlined
            fields["params"] = redact_params(params[0], params[1])
        if more:
            fields.update(more)
        fields["ok"] = ok
        if error is not None:
            fields["error"] = error
        # The line is {"seq", "at", "prev", "action"}, seq first (_write, inlined).
        chain = self.chain
        if chain:
            top = {"seq": seq, "at": at, "prev": self.head, "action": fields}
        else:
            top = {"seq": seq, "at": at, "action": fields}
        try:
            data = orjson.dumps(top, option=orjson.OPT_APPEND_NEWLINE)
        except (TypeError, ValueError):  # nested too deep, or not JSON: the line still goes
            for key in ("params", "args"):
                if key in fields:
                    fields[key] = {"withheld": "unwritable"}
            data = orjson.dumps(top, default=str, option=orjson.OPT_APPEND_NEWLINE)
        if len(data) > PARAMS_MAX and bound(fields):  # one compare a line, the rare cut after
            data = orjson.dumps(top, default=str, option=orjson.OPT_APPEND_NEWLINE)
        if not seq & 255:  # one action in 256 is timed (its seq needs no counter)
            self._timed(data)
            size = len(data)
        else:
            try:  # _put, inlined: this runs for every command on the record
                size = os.write(self._fd, data)
            except OSError as exc:
                raise LogError(f"cannot write {self.path}: {exc.strerror}") from exc
            self.size += size
            if size < len(data):  # only on a full disk or a signal
                self._write_all(data[size:])
                size = len(data)
        if chain:  # hash_written, inlined
            self.head = sha256(data).hexdigest()[:32]
        who: str = fields.get("who", "agentenv")
        try:  # the log budgets' count, of lines written
            self.spent[who] += size
        except KeyError:
            self.spent[who] = size

    def _next_minute(self, now: float) -> None:
        """The budgets' minute moves on to ``now``'s: every user's count of
        this minute starts again."""
        self.minute = int(now) // 60
        self._minute_ends = (self.minute + 1) * 60.0
        self._spent_before = dict(self.spent)

    def forget(self, who: str) -> None:
        """``who``'s share is dropped (a scope closed): its bytes, and what it
        had spent when this minute began, so one of its name starts anew."""
        self.spent.pop(who, None)
        self._spent_before.pop(who, None)

    def spent_this_minute(self, who: str) -> int:
        """Bytes of ``who``'s action lines written in the current minute."""
        return self.spent.get(who, 0) - self._spent_before.get(who, 0)

    def record(self, kind: LineKind, body: dict[str, Any], who: str | None = None) -> int:
        """Take a number and write a line at once (tab events, resets); its
        bytes count against ``who``'s share (a tab line's payer), if given."""
        seq = self._numbering.take()
        if who is None:
            self._write(seq, self._stamp(), kind, body)
            return seq
        now = self.monotonic()
        if now >= self._minute_ends:  # as begin() does: the minute moves on here too
            self._next_minute(now)
        size = self.size
        self._write(seq, self._stamp(), kind, body)
        self.spent[who] = self.spent.get(who, 0) + self.size - size
        return seq

    def check_stalled(self) -> int:
        """Write actions open past the limit as unfinished; how many. Also
        reads the wall clock's offset again (see the module's docstring)."""
        now = self.monotonic()
        self._offset = self._clock() - now
        self._milli_starts = self._milli_ends = -math.inf  # the next begin reads it anew
        found = self._numbering.stalled(now)
        for seq, (_, at, fields) in found:
            self._write(seq, at, "action", dict(resolved(fields), ok=None, unfinished=True))
        return len(found)

    def close(self) -> None:
        """Write the actions still open as unfinished (they never end now),
        and close the log."""
        if self._fd < 0:
            return
        try:
            for seq, (_, at, fields) in list(self._numbering.open.items()):
                if seq not in self._numbering.unfinished:
                    self._write(seq, at, "action", dict(resolved(fields), ok=None, unfinished=True))
            self._numbering.open.clear()
        except LogError as exc:
            log.error("%s", exc)
        os.close(self._fd)
        self._fd = -1
        with contextlib.suppress(OSError):
            self._marker.unlink()


def _break(found: Recovery) -> dict[str, Any]:
    """The ``break`` line's body for a restart after a crash."""
    said = ["the writer before stopped without closing the log (a crash or a kill)"]
    if found.partial:
        said.append("it died mid-line")
    if found.missing:
        said.append("it took numbers it never wrote")
    said.append("what it had in hand then may have no line")
    body: dict[str, Any] = {
        "why": "; ".join(said),
        "lost": found.missing,
    }
    if found.partial:
        body["torn"] = {"bytes": len(found.partial), "hash": line_hash(found.partial)}
    return body
