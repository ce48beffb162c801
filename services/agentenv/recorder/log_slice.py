"""A recording's slice of the action log: its lines from the start's entry
to the end's, what is missing from it, and the hash chain across them.

The log file is the interface between programs: the recorder reads it
(:class:`~agentenv.log.reader.LogReader`) and asks the relay only which
entries are still open (``AgentEnv.pending``), so a scoped recording does
not wait for, or count as missing, another scope's entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from agentenv.log.reader import LogReader
from agentenv.protocol.chain import ChainRun, chain_run
from agentenv.protocol.control import Open, OpenEntries
from agentenv.protocol.log import LogLine, parse_line, scope_of
from agentenv.relay_link import BrowserLink

__all__ = ["END_WAIT_S", "LogSlice", "log_slice"]

log = logging.getLogger("agentenv.recorder")

#: How long an end waits for entries still in flight to be written.
END_WAIT_S = 10.0


@dataclass(frozen=True)
class LogSlice:
    #: Each line kept, as written and as read, in ``seq`` order.
    kept: list[tuple[bytes, LogLine]]
    #: The numbers from start to end with no line (and not another scope's).
    missing: list[int]
    #: The hash chain across the run of the file the lines are in.
    chain: ChainRun


async def log_slice(
    reader: LogReader,
    link: BrowserLink,
    scope: str | None,
    start_seq: int,
    end_seq: int,
) -> LogSlice:
    """The log's lines from ``start_seq`` to ``end_seq``, waiting (at most
    :data:`END_WAIT_S`) for entries still in flight; what is still unwritten
    is listed as missing.

    A scoped recording waits for its own scope's entries only: an entry
    another scope holds open (a command Chromium never answers) is not its
    own, and is no gap in it (``AgentEnv.pending`` names each open entry's
    scope). It keeps its scope's lines, and the breaks (the computer's own
    word that lines were lost to a crash, naming no other scope's content)."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + END_WAIT_S
    others: set[int] = set()
    while True:
        await loop.run_in_executor(None, reader.read, end_seq, 1)
        if reader.contiguous >= end_seq or time.monotonic() >= deadline:
            break
        if scope is not None:
            others = await _others_open(link, scope)
            if others and set(range(reader.contiguous + 1, end_seq + 1)) <= (
                others | await _written(reader, reader.contiguous + 1, end_seq)
            ):
                break
        await asyncio.sleep(0.1)
    if scope is not None and reader.contiguous < end_seq:
        # Read before the run is: an entry of another scope's that is
        # written between the two is in this set or in the run, never in
        # neither (read after, it was in neither and counted as missing).
        others = await _others_open(link, scope)
    run = await loop.run_in_executor(None, reader.read_run, start_seq, end_seq)
    parsed: list[tuple[bytes, LogLine]] = []
    marked: list[tuple[bytes, bool]] = []  # the run, and whether the slice keeps each
    have: set[int] = set()
    for raw, ours in run:
        line = parse_line(raw) if ours else None
        if line is not None:
            have.add(line["seq"])
        # another scope's entries are not this recording's
        keep = line is not None and (scope is None or scope_of(line) == scope or "break" in line)
        marked.append((raw, keep))
        if keep and line is not None:
            parsed.append((raw, line))
    parsed.sort(key=lambda x: x[1]["seq"])
    missing = [n for n in range(start_seq, end_seq + 1) if n not in have and n not in others]
    return LogSlice(parsed, missing, chain_run(marked))


async def _others_open(link: BrowserLink, scope: str) -> set[int]:
    """Entries open now that act in another scope than ``scope``."""
    try:
        answer = await link.control(OpenEntries(), Open, deadline_s=2.0)
    except Exception as exc:  # the relay is away: every unwritten entry counts
        log.warning("scope %s: could not read the open entries: %s", scope[:64], exc)
        return set()
    return {int(seq) for seq, theirs in answer.entries.items() if theirs != scope}


async def _written(reader: LogReader, first: int, last: int) -> set[int]:
    """The numbers from ``first`` to ``last`` that have their line."""
    loop = asyncio.get_running_loop()
    lines = await loop.run_in_executor(None, reader.read_range, first, last)
    return {parse_line(raw)["seq"] for raw in lines}
