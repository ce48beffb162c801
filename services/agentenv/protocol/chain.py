"""The action log's hash chain, and its checks (docs/spec.md section 7, "Attested runs").

Pure: bytes in, problems out, so the harness's ``agentenv verify`` runs the
same checks as the tests.

- **The link.** Every line the log's writer writes carries ``prev``: the
  hash of the line written just before it in the file, :data:`ALGORITHM`
  (SHA-256 of the line's bytes and its newline, exactly as written, the
  first 16 bytes in lowercase hex). A judge can recompute one with
  ``sed -n 'Np' FILE | sha256sum | cut -c1-32``. The first line of a new log
  chains from :data:`GENESIS`. ``prev`` is the third field, after ``seq``
  and ``at``.
- **A restart** carries the chain on from the file's last whole line. When
  the writer before it died mid-line (the torn line is moved to
  ``<file>.partial``) or took numbers it never wrote, the restarted writer
  first writes a ``break`` line, chained like any other, naming what was
  lost and why (then a ``lost`` line for each number). A break is no hole in
  the chain: the chain verifies across it, and the break is named.
- **A recording's slice.** ``log.jsonl`` keeps the recording's lines in
  ``seq`` order (another scope's lines are left out). The lines it covers are
  a run of the log file, written in another order; ``log.chain.jsonl``
  (:data:`CHAIN_FILE`) lists that run in the order written, a line for each:
  ``{"seq", "hash"}`` for a line in ``log.jsonl``, and ``{"seq", "prev",
  "hash"}`` for one left out, so the chain is walked across the lines left
  out without their content. The manifest's ``chain_first`` is the ``prev``
  of the run's first line and ``chain_last`` the hash of its last.

What a check can prove: the lines of a run are the ones written, in the
order written, from ``chain_first`` to ``chain_last``. That the run is the
computer's own, not one made up whole, is the manifest's signature's work.
A hash stands in for a line left out; a short, guessable line could be
guessed from it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from agentenv.protocol.handoffs import Handoff, handoffs_in
from agentenv.protocol.log import LogLine

__all__ = [
    "ALGORITHM",
    "CHAIN_FILE",
    "GENESIS",
    "ChainRun",
    "Check",
    "chain_run",
    "hash_written",
    "line_hash",
    "log_check",
    "log_problems",
    "prev_of",
    "recording_check",
    "recording_problems",
]

#: The hash each line's ``prev`` holds (named in docs/security.md).
ALGORITHM = "sha256-128"
#: What the first line of a new log chains from.
GENESIS = "0" * 32
#: A recording's list of the log's run its slice covers, in the order written.
CHAIN_FILE = "log.chain.jsonl"

_sha256 = hashlib.sha256
_PREV = b',"prev":"'


def hash_written(data: bytes) -> str:
    """The hash of a line as the writer wrote it: its bytes and its newline."""
    return _sha256(data).hexdigest()[:32]


def line_hash(raw: bytes) -> str:
    """The hash of a line as read (``raw``, without its newline)."""
    return hash_written(raw + b"\n")


def prev_of(raw: bytes) -> str | None:
    """The ``prev`` of an encoded line, or None if it has none."""
    # The writer puts it third, right after seq and at: found there, no parse.
    if raw.startswith(b'{"seq":'):
        at = raw.find(b',"at":"', 7, 40)
        end = raw.find(b'"', at + 7) if at > 0 else -1
        start = end + 1 + len(_PREV)
        if end > 0 and raw.startswith(_PREV, end + 1) and raw[start + 32 : start + 33] == b'"':
            return raw[start : start + 32].decode("ascii", "replace")
    value = _object(raw)
    prev = value.get("prev") if value is not None else None
    return prev if isinstance(prev, str) else None


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _seq(value: Mapping[str, Any] | None) -> int | None:
    seq = value.get("seq") if value is not None else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _break_words(seq: int | None, body: Mapping[str, Any]) -> str:
    """A break line, as one human sentence."""
    said = [f"a break at seq {seq}: {body.get('why') or 'no reason given'}"]
    lost = body.get("lost")
    if isinstance(lost, list) and lost:
        shown = ", ".join(str(n) for n in lost[:10]) + (", …" if len(lost) > 10 else "")
        said.append(f"{len(lost)} number(s) taken and never written ({shown})")
    torn = body.get("torn")
    if isinstance(torn, dict):
        said.append(
            f"a torn line of {torn.get('bytes')} bytes (hash {torn.get('hash')}) moved aside"
        )
    return "; ".join(said)


@dataclass
class Check:
    """What a check found: ``problems`` (the chain does not hold there) and
    ``breaks`` (named breaks: a restart after a crash, which the chain holds
    across, and which tell what was lost)."""

    problems: list[str] = field(default_factory=list)
    breaks: list[str] = field(default_factory=list)

    def all(self, strict: bool) -> list[str]:
        return self.problems + self.breaks if strict else list(self.problems)


def _name(index: int, seq: int | None, what: str = "line") -> str:
    return f"{what} {index} (seq {seq})" if seq is not None else f"{what} {index} (no seq)"


def log_check(
    lines: Iterable[bytes], first_prev: str | None = None, last: str | None = None
) -> Check:
    """Check that ``lines`` (a run of the log file, each as read, without its
    newline, in the file's order) link up.

    ``first_prev``: what the first line must chain from (:data:`GENESIS` for
    a whole log, which also checks that every number from 1 has a line); None
    takes the first line's word for it. ``last``: the hash the last line must
    have (a run cut short at its end shows only so).
    """
    found = Check()
    rows: list[tuple[int | None, str | None, str]] = []  # seq, prev, hash
    for raw in lines:
        value = _object(raw)
        seq = _seq(value)
        index = len(rows) + 1
        if value is None:
            found.problems.append(f"line {index}: not a JSON object (changed, or torn)")
        prev = value.get("prev") if value is not None else None
        rows.append((seq, prev if isinstance(prev, str) else None, line_hash(raw)))
        body = value.get("break") if value is not None else None
        if isinstance(body, dict):
            found.breaks.append(f"line {index}: {_break_words(seq, body)}")
    where = {h: i for i, (_, _, h) in enumerate(rows)}
    for i, (seq, prev, _) in enumerate(rows):
        expected = first_prev if i == 0 else rows[i - 1][2]
        if expected is None or prev == expected:
            continue
        here = _name(i + 1, seq)
        if prev is None:
            found.problems.append(f"{here} has no prev (written before the chain, or changed)")
        elif i == 0:
            found.problems.append(f"{here} chains from {prev}, not from {expected}")
        elif (j := where.get(prev)) is not None and j != i - 1:
            found.problems.append(
                f"{here} is out of place: it chains from {_name(j + 1, rows[j][0])}, "
                f"not from {_name(i, rows[i - 1][0])} before it"
            )
        else:
            found.problems.append(
                f"{here} does not chain from {_name(i, rows[i - 1][0])} before it: "
                "that line changed, or a line between them is missing"
            )
    if last is not None and (not rows or rows[-1][2] != last):
        if not rows:
            found.problems.append(f"no lines, where the run should end at hash {last}")
        elif (j := where.get(last)) is not None:
            found.problems.append(
                f"lines after {_name(j + 1, rows[j][0])}, where the run should end: "
                f"{len(rows) - j - 1} line(s) added at its end"
            )
        else:
            found.problems.append(
                f"the run ends at {_name(len(rows), rows[-1][0])}, hash {rows[-1][2]}, "
                f"not {last}: lines are missing at its end, or its last line changed"
            )
    if first_prev == GENESIS:
        found.problems += _numbering(rows)
    return found


def _numbering(rows: Sequence[tuple[int | None, str | None, str]]) -> list[str]:
    """A whole log's numbers: each from 1 to the highest on exactly one line."""
    said = []
    lines_of: dict[int, list[int]] = {}
    for i, (seq, _, _) in enumerate(rows):
        if seq is not None:
            lines_of.setdefault(seq, []).append(i + 1)
    for seq, at in sorted(lines_of.items()):
        if len(at) > 1:
            said.append(f"seq {seq} is on {len(at)} lines ({', '.join(map(str, at))})")
    gone = [n for n in range(1, max(lines_of, default=0) + 1) if n not in lines_of]
    if gone:
        shown = ", ".join(str(n) for n in gone[:10]) + (", …" if len(gone) > 10 else "")
        said.append(f"{len(gone)} number(s) have no line, not even a lost one: {shown}")
    return said


def log_problems(
    lines: Iterable[bytes],
    first_prev: str | None = None,
    last: str | None = None,
    *,
    strict: bool = False,
) -> list[str]:
    """:func:`log_check`'s problems, one human line each (breaks too when
    ``strict``)."""
    return log_check(lines, first_prev, last).all(strict)


# -- a recording's slice --------------------------------------------------------


@dataclass(frozen=True)
class ChainRun:
    """A recording's slice as the chain sees it: ``chain`` (the bytes of
    :data:`CHAIN_FILE`), what its first line chains from and its last line's
    hash (None, None for an empty run)."""

    chain: bytes
    first: str | None
    last: str | None


def chain_run(run: Iterable[tuple[bytes, bool]]) -> ChainRun:
    """:data:`CHAIN_FILE` for a run of the log file (each line as read, and
    whether the slice keeps it), in the order written."""
    out = []
    first: str | None = None
    last: str | None = None
    for raw, kept in run:
        seq = _seq(_head(raw))
        hashed = line_hash(raw)
        prev = prev_of(raw)
        if last is None:
            first = prev
        entry: dict[str, Any] = {"seq": seq, "hash": hashed}
        if not kept:
            entry = {"seq": seq, "prev": prev, "hash": hashed}
        out.append(orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE))
        last = hashed
    return ChainRun(b"".join(out), first, last)


def _head(raw: bytes) -> dict[str, Any] | None:
    """A line's seq without parsing the whole line, when it is the writer's."""
    if raw.startswith(b'{"seq":'):
        end = raw.find(b",", 7)
        try:
            return {"seq": int(raw[7:end])}
        except ValueError:
            pass
    return _object(raw)


def recording_check(read: Callable[[str], bytes | None], manifest: Mapping[str, Any]) -> Check:
    """Check a recording's log slice against its manifest (a parsed
    ``manifest.json``): ``read(name)`` gives a file of the recording, None
    when it is missing. Each problem names the file, the line and its seq."""
    found = Check()
    problems = found.problems
    log = manifest.get("log")
    if not isinstance(log, Mapping):
        problems.append("the manifest lists no log (its upload failed?): no chain to check")
        return found
    name = str(log.get("file") or "log.jsonl")
    chain_name = log.get("chain")
    first, last = manifest.get("chain_first"), manifest.get("chain_last")
    data = read(name)
    if data is None:
        problems.append(f"{name}: missing")
        return found
    raws = data.splitlines()
    if raws and raws[-1] == b"":
        raws.pop()
    if isinstance(log.get("lines"), int) and log["lines"] != len(raws):
        problems.append(f"{name} holds {len(raws)} line(s), the manifest says {log['lines']}")
    if not raws and first is None and last is None:
        return found
    if not isinstance(first, str) or not isinstance(last, str):
        problems.append("the manifest has no chain_first and chain_last (made before the chain?)")
        return found
    if not isinstance(chain_name, str):
        problems.append(f"the manifest names no chain file ({CHAIN_FILE}) for {name}")
        return found
    chain_data = read(chain_name)
    if chain_data is None:
        problems.append(f"{chain_name}: missing")
        return found
    # The slice: each line by seq, in seq order.
    by_seq: dict[int, tuple[int, str | None, str]] = {}  # line number, prev, hash
    lines: list[LogLine] = []  # each log line, parsed once (the handoffs read them)
    before: int | None = None
    for index, raw in enumerate(raws, 1):
        value = _object(raw)
        seq = _seq(value)
        here = f"{name} {_name(index, seq)}"
        if value is None or seq is None:
            problems.append(f"{name} line {index}: not a log line (changed, or torn)")
            continue
        if isinstance(value.get("at"), str):
            lines.append(value)  # type: ignore[arg-type]
        body = value.get("break")
        if isinstance(body, dict):
            found.breaks.append(f"{name} line {index}: {_break_words(seq, body)}")
        if seq in by_seq:
            problems.append(f"{here} is there twice (also line {by_seq[seq][0]})")
            continue
        if before is not None and seq < before:
            problems.append(f"{here} is out of order: it comes after seq {before}")
        before = seq if before is None else max(before, seq)
        prev = value.get("prev")
        by_seq[seq] = (index, prev if isinstance(prev, str) else None, line_hash(raw))
    # A slice of the whole computer keeps every line of its numbers: one of
    # them left out is a line taken away (a scoped slice's are another scope's).
    whole: range | None = None
    start, end = manifest.get("start_seq"), manifest.get("end_seq")
    if manifest.get("scope") is None and isinstance(start, int) and isinstance(end, int):
        whole = range(start, end + 1)
    _walk(found, name, chain_name, chain_data, by_seq, first, last, whole)
    _handoffs_match(found, name, lines, manifest.get("handoffs"))
    return found


def _handoffs_match(found: Check, name: str, lines: list[LogLine], listed: Any) -> None:
    """The manifest's ``handoffs`` are what the slice's lines say
    (:func:`~agentenv.protocol.handoffs.handoffs_in`); a manifest made
    before them lists none and is not checked."""
    if listed is None:
        return
    try:
        claimed = [Handoff.model_validate(h) for h in listed]
    except (TypeError, ValidationError):
        found.problems.append("the manifest's handoffs are not a list of handoffs")
        return
    if claimed != handoffs_in(lines):
        found.problems.append(
            f"the manifest's handoffs are not what {name} says: a person's entries "
            "or an agent's request were changed, added or taken away"
        )


def _walk(
    found: Check,
    name: str,
    chain_name: str,
    chain_data: bytes,
    by_seq: Mapping[int, tuple[int, str | None, str]],
    first: str,
    last: str,
    whole: range | None,
) -> None:
    """Walk the chain file's run in the order written, from ``first`` to
    ``last``, each of the slice's lines on it once (and, when the slice keeps
    every line numbered in ``whole``, none of those left out)."""
    problems = found.problems
    expected, expected_seq = first, None
    used: set[int] = set()
    for k, raw in enumerate(chain_data.splitlines(), 1):
        entry = _object(raw)
        seq = _seq(entry)
        hashed = entry.get("hash") if entry is not None else None
        if entry is None or seq is None or not isinstance(hashed, str):
            problems.append(f"{chain_name} line {k}: not a link (changed?)")
            continue
        after = (
            f"the line before it (seq {expected_seq})"
            if expected_seq is not None
            else "chain_first"
        )
        if "prev" in entry:  # a line the slice leaves out: its word for its link
            if entry["prev"] != expected:
                problems.append(
                    f"{chain_name} {_name(k, seq)} (left out of {name}) does not chain from {after}"
                )
            if whole is not None and seq in whole and seq not in by_seq:
                problems.append(
                    f"seq {seq} ({chain_name} line {k}) is left out of {name}, which keeps "
                    f"every line from seq {whole.start} to {whole.stop - 1}: a line removed"
                )
        elif seq in used or seq not in by_seq:
            problems.append(
                f"seq {seq} ({chain_name} line {k}) is not in {name}: a line removed"
                if seq not in used
                else f"seq {seq} is on the chain twice ({chain_name} line {k})"
            )
        else:
            used.add(seq)
            index, prev, actual = by_seq[seq]
            if actual != hashed:
                problems.append(
                    f"{name} {_name(index, seq)} changed: it hashes to {actual}, "
                    f"not {hashed} as {chain_name} line {k} says"
                )
            elif prev != expected:
                problems.append(
                    f"{name} {_name(index, seq)} does not chain from {after}"
                    + (": it has no prev" if prev is None else "")
                )
        expected, expected_seq = hashed, seq
    if expected != last:
        problems.append(
            f"the chain ends at seq {expected_seq} (hash {expected}), not at chain_last "
            f"{last}: lines are missing at its end, or {chain_name} changed"
        )
    for seq in sorted(set(by_seq) - used):
        problems.append(f"{name} {_name(by_seq[seq][0], seq)} is not on the chain: a line added")


def recording_problems(
    read: Callable[[str], bytes | None], manifest: Mapping[str, Any], *, strict: bool = False
) -> list[str]:
    """:func:`recording_check`'s problems, one human line each (breaks too
    when ``strict``)."""
    return recording_check(read, manifest).all(strict)
