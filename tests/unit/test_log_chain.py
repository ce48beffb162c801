"""The log's hash chain: the writer's links, restarts and breaks, and the
checks a judge runs (agentenv.protocol.chain)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from agentenv.log.reader import LogReader
from agentenv.log.writer import LogWriter
from agentenv.protocol.chain import (
    ALGORITHM,
    CHAIN_FILE,
    GENESIS,
    chain_run,
    line_hash,
    log_check,
    log_problems,
    prev_of,
    recording_check,
    recording_problems,
)
from agentenv.protocol.log import parse_line, scope_of


def _raw(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _log(path: Path, n: int = 6) -> LogWriter:
    """A writer with ``n`` actions written out of order, a tab event between."""
    w = LogWriter.open(path)
    seqs = [w.begin({"via": "cdp", "who": "alice", "method": f"M{k}"}) for k in range(n)]
    for seq in reversed(seqs[: n // 2]):
        w.end(seq, ok=True)
    w.record("tab", {"event": "opened", "id": "T", "url": "about:blank"})
    for seq in seqs[n // 2 :]:
        w.end(seq, ok=True)
    return w


def test_every_line_chains_from_the_one_written_before(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _log(path).close()
    lines = _raw(path)
    assert len(lines) == 7
    assert ALGORITHM == "sha256-128" and GENESIS == "0" * 32
    # As docs/security.md says a judge recomputes it: SHA-256 of the line and its
    # newline, its first 32 hex digits.
    previous = GENESIS
    for raw in lines:
        value = json.loads(raw)
        assert list(value)[:3] == ["seq", "at", "prev"], value
        assert value["prev"] == previous == prev_of(raw)
        previous = hashlib.sha256(raw + b"\n").hexdigest()[:32]
        assert previous == line_hash(raw)
    assert log_problems(lines, GENESIS, previous) == []
    assert log_check(lines, GENESIS).breaks == []


def test_one_byte_changed_is_named(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _log(path).close()
    lines = _raw(path)
    changed = list(lines)
    changed[2] = changed[2].replace(b'"M', b'"N', 1)  # a method's name, one byte
    assert changed[2] != lines[2]
    problems = log_problems(changed, GENESIS)
    seq = json.loads(lines[2])["seq"]
    assert problems == [
        f"line 4 (seq {json.loads(lines[3])['seq']}) does not chain from line 3 (seq {seq}) "
        "before it: that line changed, or a line between them is missing"
    ], problems
    # A byte of its prev: that line no longer chains, nor the one after it.
    hit = list(lines)
    at = hit[2].index(b'"prev":"') + 8
    hit[2] = hit[2][:at] + (b"0" if hit[2][at : at + 1] != b"0" else b"1") + hit[2][at + 1 :]
    found = log_problems(hit, GENESIS)
    assert len(found) == 2 and found[0].startswith(f"line 3 (seq {seq})"), found


def test_two_lines_swapped_are_named(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _log(path).close()
    lines = _raw(path)
    swapped = [*lines[:2], lines[3], lines[2], *lines[4:]]
    problems = log_problems(swapped, GENESIS)
    s = [json.loads(x)["seq"] for x in lines]
    assert (
        f"line 3 (seq {s[3]}) is out of place: it chains from line 4 (seq {s[2]}), "
        in (problems[0])
    ), problems
    assert all("out of place" in p for p in problems) and len(problems) == 3, problems


def test_a_run_cut_short_or_a_line_removed_is_named(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _log(path).close()
    lines = _raw(path)
    last = line_hash(lines[-1])
    s = [json.loads(x)["seq"] for x in lines]
    assert log_problems(lines[:-1], GENESIS, last) == [
        f"the run ends at line 6 (seq {s[5]}), hash {line_hash(lines[5])}, not {last}: "
        "lines are missing at its end, or its last line changed",
        f"1 number(s) have no line, not even a lost one: {s[6]}",
    ]
    removed = [*lines[:2], *lines[3:]]
    problems = log_problems(removed, GENESIS, last)
    assert problems[0].startswith(f"line 3 (seq {s[3]}) does not chain from line 2"), problems
    assert problems[-1] == f"1 number(s) have no line, not even a lost one: {s[2]}", problems
    # A line added at the end.
    problems = log_problems([*lines, lines[0]], GENESIS, last)
    assert (
        f"lines after line 7 (seq {s[6]}), where the run should end: 1 line(s) added at its end"
        in problems
    ), problems
    assert f"seq {s[0]} is on 2 lines (1, 8)" in problems, problems


def test_a_restart_carries_the_chain_on(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _log(path).close()
    before = _raw(path)
    w = LogWriter.open(path)
    assert w.head == line_hash(before[-1])
    w.end(w.begin({"via": "cdp", "who": "bob", "method": "After"}), ok=True)
    w.close()
    lines = _raw(path)
    assert lines[: len(before)] == before and len(lines) == len(before) + 1
    assert json.loads(lines[-1])["prev"] == line_hash(before[-1])
    found = log_check(lines, GENESIS)
    assert found.problems == [] and found.breaks == []  # a clean restart is no break


def test_a_torn_line_and_lost_numbers_are_a_named_break_that_verifies(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    w = _log(path)
    w.begin({"via": "cdp", "who": "alice", "method": "Never"})  # taken, never written
    w.end(w.begin({"via": "cdp", "who": "alice", "method": "Last"}), ok=True)
    os.close(w._fd)  # as a process killed: its descriptor closes, nothing more written
    whole = _raw(path)
    assert len(whole) == 8
    torn = b'{"seq":10,"at":"2026-12-02T00:00:00.000Z","prev":"' + line_hash(whole[-1]).encode()
    with open(path, "ab") as f:
        f.write(torn)
    # Before the restart: the torn last line is named.
    assert log_problems(_raw(path), GENESIS)[0] == "line 9: not a JSON object (changed, or torn)"

    w = LogWriter.open(path)
    w.end(w.begin({"via": "cdp", "who": "alice", "method": "After"}), ok=True)
    w.close()
    lines = _raw(path)
    assert lines[:8] == whole
    brk = json.loads(lines[8])
    assert brk["seq"] == 10 and brk["prev"] == line_hash(whole[-1]), brk
    assert brk["break"]["lost"] == [8] and brk["break"]["torn"] == {
        "bytes": len(torn),
        "hash": line_hash(torn),
    }, brk
    assert json.loads(lines[9]) == {
        "seq": 8,
        "at": brk["at"],
        "prev": line_hash(lines[8]),
        "lost": {"entry": 8},
    }
    parse_line(lines[8])  # a kind every reader knows
    found = log_check(lines, GENESIS, line_hash(lines[-1]))
    assert found.problems == [], found.problems
    assert found.breaks == [
        "line 9: a break at seq 10: the writer before stopped without closing the log (a "
        "crash or a kill); it died mid-line; it took numbers it never wrote; what it had in "
        "hand then may have no line; 1 number(s) taken and never written (8); a torn line of "
        f"{len(torn)} bytes (hash {line_hash(torn)}) moved aside"
    ], found.breaks
    assert log_problems(lines, GENESIS, strict=True) == found.breaks


def test_a_writer_that_never_closed_is_a_break_even_with_nothing_missing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.jsonl"
    w = _log(path)
    w.begin({"via": "cdp", "who": "alice", "method": "InFlight"})  # the highest number
    os.close(w._fd)  # killed: nothing in the file shows the number it held
    LogWriter.open(path).close()
    found = log_check(_raw(path), GENESIS)
    assert found.problems == [] and len(found.breaks) == 1, found
    assert "without closing the log" in found.breaks[0] and "never written" not in found.breaks[0]
    # A clean close writes what is still open as unfinished: nothing is left in hand.
    w = LogWriter.open(path)
    held = w.begin({"via": "cdp", "who": "alice", "method": "Open"})
    w.close()
    last = json.loads(_raw(path)[-1])
    assert last["seq"] == held and last["action"]["unfinished"] is True, last
    LogWriter.open(path).close()
    assert len(log_check(_raw(path), GENESIS).breaks) == 1  # no new break


_CHILD = """
import sys
from pathlib import Path
from agentenv.log.writer import LogWriter
w = LogWriter.open(Path(sys.argv[1]))
held = [w.begin({"via": "cdp", "who": "alice", "method": "Held"}) for _ in range(3)]
n = 0
while True:
    n += 1
    seq = w.begin({"via": "cdp", "who": "alice", "method": "Runtime.evaluate",
                   "params": {"expression": "x" * (n % 300)}})
    w.end(seq, ok=True)
"""


def test_a_writer_killed_mid_run_leaves_a_chain_that_verifies_with_a_named_break(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(path)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not path.exists() or path.stat().st_size < 200_000:
            assert time.monotonic() < deadline and child.poll() is None, "the writer never wrote"
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    crashed = _raw(path)
    LogWriter.open(path).close()
    lines = _raw(path)
    found = log_check(lines, GENESIS, line_hash(lines[-1]))
    assert found.problems == [], found.problems
    assert len(found.breaks) == 1 and "(1, 2, 3" in found.breaks[0], found.breaks
    assert lines[: len(crashed) - 1] == crashed[:-1]  # what was whole stays, unchanged


# -- a recording's slice --------------------------------------------------------


def _two_scopes(path: Path) -> tuple[int, int]:
    """alice's and bob's lines interleaved, some ending out of order, a line
    of each begun before the recording's start; the start's and end's seq."""
    w = LogWriter.open(path)

    def act(who: str, method: str) -> int:
        return w.begin({"via": "cdp", "who": who, "method": method, "scope": who})

    early = act("bob", "Early")  # begins before the start, ends inside it
    w.end(act("alice", "Before"), ok=True)
    start = act("alice", "browser-recording/start")
    w.end(start, ok=True)
    held = act("alice", "Held")
    for n in range(5):
        w.end(act("bob", f"Bob{n}"), ok=True)
        w.end(act("alice", f"Alice{n}"), ok=True)
    w.end(early, ok=True)
    w.end(held, ok=True)
    end = act("alice", "browser-recording/end")
    late = act("bob", "Late")
    w.end(late, ok=True)  # past the end, written before it
    w.end(end, ok=True)
    w.end(act("bob", "After"), ok=True)
    w.close()
    return start, end


def _slice(path: Path, first: int, last: int, scope: str | None) -> dict[str, bytes]:
    """A recording's files as the recorder makes them (recorder/recording_life.py)."""
    marked, kept = [], []
    for raw, ours in LogReader(path).read_run(first, last):
        line = parse_line(raw) if ours else None
        keep = line is not None and (scope is None or scope_of(line) == scope)
        marked.append((raw, keep))
        if keep and line is not None:
            kept.append((line["seq"], raw))
    run = chain_run(marked)
    manifest = {
        "scope": scope,
        "start_seq": first,
        "end_seq": last,
        "log": {"file": "log.jsonl", "lines": len(kept), "chain": CHAIN_FILE},
        "chain_first": run.first,
        "chain_last": run.last,
    }
    return {
        "log.jsonl": b"".join(raw + b"\n" for _, raw in sorted(kept)),
        CHAIN_FILE: run.chain,
        "manifest.json": orjson.dumps(manifest),
    }


def _check(files: dict[str, bytes]) -> list[str]:
    read: Callable[[str], bytes | None] = files.get
    manifest: dict[str, Any] = orjson.loads(files["manifest.json"])
    return recording_problems(read, manifest)


def test_a_scoped_slice_verifies_without_the_other_scopes_lines(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    start, end = _two_scopes(path)
    files = _slice(path, start, end, "alice")
    assert _check(files) == []
    kept = [json.loads(x) for x in files["log.jsonl"].splitlines()]
    assert [x["seq"] for x in kept] == sorted(x["seq"] for x in kept)
    assert {x["action"]["who"] for x in kept} == {"alice"}
    assert b"Bob" not in files["log.jsonl"] + files[CHAIN_FILE]  # no other scope's words
    links = [json.loads(x) for x in files[CHAIN_FILE].splitlines()]
    left_out = [x for x in links if "prev" in x]
    # bob's lines in the run are there by their hash alone; so is the line
    # past the end, written before the end's.
    assert len(left_out) == 7 and len(links) == len(kept) + 7, links
    # The whole computer's slice of the same run.
    whole = _slice(path, start, end, None)
    assert _check(whole) == []
    # A line taken out of it and marked left out (its link kept whole), the
    # count mended: named, since such a slice leaves out none of its numbers.
    lines = whole["log.jsonl"].splitlines()
    taken = lines[3]
    seq = json.loads(taken)["seq"]
    links = [
        orjson.dumps({"seq": seq, "prev": prev_of(taken), "hash": line_hash(taken)})
        if json.loads(x)["seq"] == seq
        else x
        for x in whole[CHAIN_FILE].splitlines()
    ]
    links_of = {json.loads(x)["seq"]: x for x in links}
    assert sum(b'"prev"' in x for x in links) > 1  # lines outside its numbers are left out too
    manifest = orjson.loads(whole["manifest.json"])
    manifest["log"]["lines"] -= 1
    forged = {
        "log.jsonl": b"".join(x + b"\n" for x in lines if x != taken),
        CHAIN_FILE: b"\n".join(links) + b"\n",
        "manifest.json": orjson.dumps(manifest),
    }
    at = links.index(links_of[seq]) + 1
    assert _check(forged) == [
        f"seq {seq} ({CHAIN_FILE} line {at}) is left out of log.jsonl, which keeps every "
        f"line from seq {start} to {end}: a line removed"
    ]


def test_a_slice_changed_reordered_or_cut_is_named(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    start, end = _two_scopes(path)
    files = _slice(path, start, end, "alice")
    lines = files["log.jsonl"].splitlines()
    seqs = [json.loads(x)["seq"] for x in lines]

    changed = dict(files, **{"log.jsonl": files["log.jsonl"].replace(b"Alice2", b"Alice3")})
    problems = _check(changed)
    assert len(problems) == 1 and problems[0].startswith(
        f"log.jsonl line 5 (seq {seqs[4]}) changed: it hashes to "
    ), problems

    swapped = [*lines[:2], lines[3], lines[2], *lines[4:]]
    problems = _check(dict(files, **{"log.jsonl": b"\n".join(swapped) + b"\n"}))
    assert problems == [
        f"log.jsonl line 4 (seq {seqs[2]}) is out of order: it comes after seq {seqs[3]}"
    ], problems

    cut = b"\n".join(lines[:-1]) + b"\n"
    problems = _check(dict(files, **{"log.jsonl": cut}))
    assert (
        problems[0] == f"log.jsonl holds {len(lines) - 1} line(s), the manifest says {len(lines)}"
    )
    assert any(f"seq {seqs[-1]} (" in p and "a line removed" in p for p in problems), problems

    links = files[CHAIN_FILE].splitlines()
    problems = _check(dict(files, **{CHAIN_FILE: b"\n".join([*links[:3], *links[4:]]) + b"\n"}))
    assert problems, "a link taken out of the chain file"

    manifest = orjson.loads(files["manifest.json"])
    manifest["chain_last"] = GENESIS
    problems = _check(dict(files, **{"manifest.json": orjson.dumps(manifest)}))
    assert len(problems) == 1 and "not at chain_last" in problems[0], problems

    del files[CHAIN_FILE]
    assert _check(files) == [f"{CHAIN_FILE}: missing"]


def test_an_old_slice_without_the_chain_is_named() -> None:
    files = {"log.jsonl": b'{"seq":1,"at":"t","action":{}}\n'}
    manifest = {"log": {"file": "log.jsonl", "lines": 1}}
    assert recording_problems(files.get, manifest) == [
        "the manifest has no chain_first and chain_last (made before the chain?)"
    ]
    assert recording_problems(files.get, {"log": None}) == [
        "the manifest lists no log (its upload failed?): no chain to check"
    ]
    nothing: dict[str, bytes] = {}
    assert recording_check(nothing.get, manifest).problems == ["log.jsonl: missing"]
