"""Reading the log: ``log {after, limit}`` → ``{lines, last}``.

Lines are written when their actions end, so the file is not in ``seq``
order. :class:`LogIndex` keeps where each line starts, indexed by ``seq``,
growing as the file grows; a read returns lines in ``seq`` order up to the
last one whose earlier lines are all written, so a reader's ``last`` never
moves back and never skips a line it has not returned. A read costs the
lines it returns, not the file's size. Call :meth:`LogReader.read` off the
event loop (it does file I/O); it is thread-safe.
"""

from __future__ import annotations

import os
import threading
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from agentenv.log.lines import seq_of

__all__ = ["DEFAULT_LIMIT", "LogIndex", "LogReader", "Page"]

DEFAULT_LIMIT = 1000
_CHUNK = 4 * 1024 * 1024


@dataclass
class LogIndex:
    """Offsets of complete lines by ``seq`` (pure: fed bytes, no I/O)."""

    starts: array[int] = field(default_factory=lambda: array("q", [-1]))
    ends: array[int] = field(default_factory=lambda: array("q", [-1]))
    scanned: int = 0  # bytes of the file indexed (up to a newline)
    contiguous: int = 0  # every seq up to this one has a line

    def feed(self, data: bytes) -> None:
        """Index the complete lines of ``data``, which starts at :attr:`scanned`."""
        start = 0
        base = self.scanned
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            seq = seq_of(data[start:end])
            if seq is not None and seq > 0:
                self._put(seq, base + start, base + end + 1)
            start = end + 1
        self.scanned = base + start
        starts = self.starts
        top = len(starts) - 1
        while self.contiguous < top and starts[self.contiguous + 1] >= 0:
            self.contiguous += 1

    def _put(self, seq: int, start: int, end: int) -> None:
        if seq >= len(self.starts):
            grow = max(seq + 1 - len(self.starts), len(self.starts))
            self.starts.extend([-1] * grow)
            self.ends.extend([-1] * grow)
        # An unfinished line and, later, none other share a seq: keep the first.
        if self.starts[seq] < 0:
            self.starts[seq] = start
            self.ends[seq] = end

    def span(self, after: int, limit: int) -> range:
        """The seqs a read returns."""
        return range(max(after, 0) + 1, min(self.contiguous, max(after, 0) + limit) + 1)


@dataclass(frozen=True)
class Page:
    lines: list[bytes]  # encoded lines, newline stripped
    last: int


class LogReader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._index = LogIndex()
        self._identity: tuple[int, int] | None = None

    def _refresh(self, fd: int) -> None:
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino)
        if identity != self._identity or st.st_size < self._index.scanned:
            self._index = LogIndex()  # a new or truncated file
            self._identity = identity
        while self._index.scanned < st.st_size:
            chunk = os.pread(fd, min(_CHUNK, st.st_size - self._index.scanned), self._index.scanned)
            if not chunk:
                break
            before = self._index.scanned
            self._index.feed(chunk)
            if self._index.scanned == before:
                if len(chunk) < _CHUNK:
                    break  # a line still being written
                # One line longer than a chunk: read on until its newline.
                end = self._find_newline(fd, before + len(chunk), st.st_size)
                if end < 0:
                    break
                self._index.feed(os.pread(fd, end + 1 - before, before))

    @staticmethod
    def _find_newline(fd: int, offset: int, size: int) -> int:
        while offset < size:
            chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
            found = chunk.find(b"\n")
            if found >= 0:
                return offset + found
            offset += len(chunk)
        return -1

    def read(self, after: int = 0, limit: int = DEFAULT_LIMIT) -> Page:
        """Lines with ``seq > after``, at most ``limit``, in ``seq`` order."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return Page([], max(after, 0))
        try:
            with self._lock:
                self._refresh(fd)
                index = self._index
                seqs = index.span(after, limit)
                if not seqs:
                    return Page([], max(after, 0))
                starts = [index.starts[s] for s in seqs]
                ends = [index.ends[s] for s in seqs]
            low, high = min(starts), max(ends)
            if high - low <= 4 * sum(e - s for s, e in zip(starts, ends, strict=True)):
                blob = os.pread(fd, high - low, low)
                lines = [blob[s - low : e - low - 1] for s, e in zip(starts, ends, strict=True)]
            else:
                lines = [os.pread(fd, e - s, s)[:-1] for s, e in zip(starts, ends, strict=True)]
            return Page(lines, seqs[-1])
        finally:
            os.close(fd)

    def _spans(self, fd: int, first: int, last: int) -> list[tuple[int, int]]:
        """Where each line with ``first <= seq <= last`` stands in the file
        (start, end past its newline), by seq, gaps skipped."""
        with self._lock:
            self._refresh(fd)
            index = self._index
            top = min(last, len(index.starts) - 1)
            return [
                (index.starts[s], index.ends[s])
                for s in range(max(first, 1), top + 1)
                if index.starts[s] >= 0
            ]

    def read_range(self, first: int, last: int) -> list[bytes]:
        """Every line written with ``first <= seq <= last``, in order, gaps skipped
        (a recording's slice once its end has waited long enough)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        try:
            spans = self._spans(fd, first, last)
            return [os.pread(fd, end - start, start)[:-1] for start, end in spans]
        finally:
            os.close(fd)

    def read_run(self, first: int, last: int) -> list[tuple[bytes, bool]]:
        """The run of the file from the first-written to the last-written line
        with ``first <= seq <= last``, in the order written, each line with
        whether it is one of those (a recording's slice, and what its hash
        chain walks across: :func:`agentenv.protocol.chain.chain_run`)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        try:
            spans = self._spans(fd, first, last)
            if not spans:
                return []
            low, high = min(s for s, _ in spans), max(e for _, e in spans)
            blob = b""
            while len(blob) < high - low:
                got = os.pread(fd, high - low - len(blob), low + len(blob))
                if not got:
                    raise OSError(f"{self.path} is shorter than its index: cut under a reader?")
                blob += got
        finally:
            os.close(fd)
        ours = {start - low for start, _ in spans}
        out, at = [], 0
        while at < len(blob):
            end = blob.index(b"\n", at)
            out.append((blob[at:end], at in ours))
            at = end + 1
        return out

    @property
    def contiguous(self) -> int:
        return self._index.contiguous
