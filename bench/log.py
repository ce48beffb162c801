"""The log writer vs raw appends, and a read at the end of a 1,000,000-line log.

Anchors in the same run: raw ``os.write`` appends of the exact bytes the
writer produces, and ``json.dumps`` plus the write.

The hash chain's cost (issue 25): the writer alone (``begin`` and ``end``)
and the relay's whole per-command path, each with the chain on and off
(``LogWriter(chain=False)``, which exists for this figure), in turns of
:data:`ROUNDS` so the machine's drift falls on both; the cost a line is the
difference of the medians' times a line.

It also times the one ``os.write`` a command costs the relay's event loop,
against handing the line to a writer thread instead (the decision is in
docs/decisions.md, "The log's write stays on the relay's loop"). Set
``TMPDIR`` to the log's volume to time that volume.
"""

from __future__ import annotations

import json
import os
import queue
import statistics
import tempfile
import threading
import time
from pathlib import Path

from agentenv.log.lines import encode, line
from agentenv.log.reader import LogReader
from agentenv.log.writer import LogWriter
from agentenv.protocol.log import ActionBody
from agentenv.relay.effects import Begin, Ended
from bench.stats import percentile, table

N = 200_000
BIG = 1_000_000
#: Turns of chain on and off, one after the other (the medians are compared).
ROUNDS = 6


def _fields(n: int) -> ActionBody:
    return {
        "via": "cdp",
        "who": "alice",
        "conn": 3,
        "method": "Runtime.evaluate",
        "acts": "acting",
        "tab": "8F1A2B3C4D5E6F708192A3B4C5D6E7F8",
        "url": "https://shop.example/search?q=shoes&token=abc",
        "params": {"expression": f"document.title + {n}"},
    }


def _writer(folder: Path, chain: bool = True, name: str = "w.jsonl") -> float:
    """The relay's own path per command: the logbook's begin and end (marks,
    the tab's URL, params redacted, numbering, serialization, the write)."""
    from agentenv.access import Identity
    from agentenv.relay.logbook import Logbook

    book = Logbook(LogWriter.open(folder / name, chain=chain))
    tab = "8F1A2B3C4D5E6F708192A3B4C5D6E7F8"
    book.causes.known(tab, "https://shop.example/search?q=shoes&token=abc")
    alice = Identity("alice")
    commands = [
        ("Runtime.evaluate", {"expression": f"document.title + {n}"})
        if n % 2
        else ("DOM.describeNode", {"nodeId": n})
        for n in range(N)
    ]
    t = time.perf_counter()
    for method, params in commands:
        seq = book.begin(Begin(alice, 3, None, method, params, tab))
        book.end(Ended(seq, True))
    elapsed = time.perf_counter() - t
    book.writer.close()
    return N / elapsed


def _bare_writer(folder: Path, chain: bool, name: str) -> float:
    """The writer alone: a number taken, the line serialized and written
    (``begin`` and ``end``, fields already redacted), lines a second."""
    writer = LogWriter.open(folder / name, chain=chain)
    fields = [_fields(n) for n in range(N)]
    t = time.perf_counter()
    for entry in fields:
        writer.end(writer.begin(entry), True)
    elapsed = time.perf_counter() - t
    writer.close()
    return N / elapsed


def _chain_turns(folder: Path) -> dict[str, list[float]]:
    """Lines a second, chain on and off, for the writer alone and the
    logbook's path, in :data:`ROUNDS` turns."""
    found: dict[str, list[float]] = {"bare on": [], "bare off": [], "book on": [], "book off": []}
    for turn in range(ROUNDS):
        for chain in (True, False) if turn % 2 else (False, True):
            state = "on" if chain else "off"
            found[f"bare {state}"].append(_bare_writer(folder, chain, "b.jsonl"))
            found[f"book {state}"].append(_writer(folder, chain, "w.jsonl"))
            for name in ("b.jsonl", "w.jsonl"):  # 60 MB each: one at a time
                (folder / name).unlink()
    return found


def _raw(folder: Path, payload: list[bytes]) -> float:
    fd = os.open(folder / "raw.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    t = time.perf_counter()
    for data in payload:
        os.write(fd, data)
    elapsed = time.perf_counter() - t
    os.close(fd)
    return N / elapsed


def _each_write(folder: Path, payload: list[bytes]) -> list[float]:
    """Each ``os.write`` of a line, timed alone (µs): what the relay's event
    loop waits for per command."""
    fd = os.open(folder / "each.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    times = []
    clock = time.perf_counter
    for data in payload[:50_000]:
        t = clock()
        os.write(fd, data)
        times.append((clock() - t) * 1e6)
    os.close(fd)
    return times


def _handed_off(folder: Path, payload: list[bytes]) -> tuple[list[float], float]:
    """The other design: the loop hands each line to a writer thread (a queue
    put, timed alone, µs), and the thread writes; with the lines a second
    the thread kept up with."""
    fd = os.open(folder / "thread.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def drain() -> None:
        while (data := lines.get()) is not None:
            os.write(fd, data)

    thread = threading.Thread(target=drain)
    began = time.perf_counter()
    thread.start()
    times = []
    clock = time.perf_counter
    for data in payload[:50_000]:
        t = clock()
        lines.put(data)
        times.append((clock() - t) * 1e6)
    lines.put(None)
    thread.join(timeout=60)
    elapsed = time.perf_counter() - began
    os.close(fd)
    return times, len(times) / elapsed


def _json_dumps(folder: Path) -> float:
    fd = os.open(folder / "json.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    entries = [
        line(n + 1, "2026-11-30T00:00:00.000Z", "action", _fields(n) | {"ok": True})
        for n in range(N)
    ]
    t = time.perf_counter()
    for e in entries:
        os.write(fd, (json.dumps(e) + "\n").encode())
    elapsed = time.perf_counter() - t
    os.close(fd)
    return N / elapsed


def _big_read(folder: Path) -> tuple[float, list[float]]:
    path = folder / "big.jsonl"
    with open(path, "wb") as f:
        chunk = []
        for n in range(1, BIG + 1):
            chunk.append(
                encode(line(n, "2026-11-30T00:00:00.000Z", "action", _fields(n) | {"ok": True}))
            )
            if len(chunk) == 10000:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))
    reader = LogReader(path)
    t = time.perf_counter()
    reader.read(0, 1)  # builds the index once
    build = time.perf_counter() - t
    times = []
    for _ in range(50):
        t = time.perf_counter()
        page = reader.read(BIG - 1000, 1000)
        times.append((time.perf_counter() - t) * 1000)
        assert len(page.lines) == 1000 and page.last == BIG
    return build, times


def run() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        payload = [
            encode(line(n + 1, "2026-11-30T00:00:00.000Z", "action", _fields(n) | {"ok": True}))
            for n in range(N)
        ]
        raw = _raw(folder, payload)
        dumps = _json_dumps(folder)
        turns = _chain_turns(folder)
        writer = statistics.median(turns["book on"])
        each = _each_write(folder, payload)
        handed, handed_rate = _handed_off(folder, payload)
        build, reads = _big_read(folder)
    on, off = statistics.median(turns["bare on"]), statistics.median(turns["bare off"])
    book_off = statistics.median(turns["book off"])
    rows = [
        ["raw os.write appends (anchor)", f"{raw:,.0f} lines/s", "1.00"],
        ["json.dumps + os.write", f"{dumps:,.0f} lines/s", f"{dumps / raw:.2f}"],
        ["the writer alone, chain on (median of 6)", f"{on:,.0f} lines/s", f"{on / raw:.2f}"],
        ["the writer alone, chain off", f"{off:,.0f} lines/s", f"{off / raw:.2f}"],
        ["the chain's cost a line, the writer alone", f"{(1 / on - 1 / off) * 1e6:.2f} µs", ""],
        [
            "relay logbook per command (redaction included), chain on",
            f"{writer:,.0f} lines/s",
            f"{writer / raw:.2f}",
        ],
        ["the same, chain off", f"{book_off:,.0f} lines/s", f"{book_off / raw:.2f}"],
        ["the chain's cost a line, the logbook", f"{(1 / writer - 1 / book_off) * 1e6:.2f} µs", ""],
        [
            "each turn, writer on / off (lines/s)",
            " ".join(
                f"{a:,.0f}/{b:,.0f}"
                for a, b in zip(turns["bare on"], turns["bare off"], strict=True)
            ),
            "",
        ],
        ["one os.write on the loop, p50", f"{percentile(each, 50):.2f} µs", ""],
        ["one os.write on the loop, p99", f"{percentile(each, 99):.2f} µs", ""],
        ["its share of the logbook's time per command", f"{writer / raw:.0%}", ""],
        ["handed to a writer thread instead: the put, p50", f"{percentile(handed, 50):.2f} µs", ""],
        ["handed to a writer thread instead: the put, p99", f"{percentile(handed, 99):.2f} µs", ""],
        ["handed to a writer thread: lines/s kept up", f"{handed_rate:,.0f} lines/s", ""],
        ["log {after: 999000, limit: 1000} p50", f"{percentile(reads, 50):.2f} ms", ""],
        ["log {after: 999000, limit: 1000} p99", f"{percentile(reads, 99):.2f} ms", ""],
        ["index build, 1,000,000 lines (once)", f"{build * 1000:.0f} ms", ""],
    ]
    return table("action log (raw appends are the anchor)", ["case", "figure", "vs raw"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
