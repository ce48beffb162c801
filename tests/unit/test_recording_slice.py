"""A scoped recording's log slice (recorder/log_slice.py),
against a real log file: another scope's entry that ends while the slice is
read is never counted as missing (issue 22: 0 gaps under another agent's
load)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentenv.log.reader import LogReader
from agentenv.log.writer import LogWriter
from agentenv.protocol.control import Open
from agentenv.recorder.log_slice import log_slice


class _Link:
    """The relay's ``AgentEnv.pending``: Alice's entry is open until the
    second ask, which it ends (her command answered) just before answering."""

    def __init__(self, writer: LogWriter, alice: int) -> None:
        self.writer, self.alice, self.asked = writer, alice, 0

    async def control(self, params: Any, model: type[Open], deadline_s: float) -> Open:
        self.asked += 1
        if self.asked == 1:
            return Open(entries={str(self.alice): "alice"})
        self.writer.end(self.alice, True)  # ends between the reads
        return Open(entries={})


def test_another_scopes_entry_ending_mid_read_is_not_missing(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    writer = LogWriter.open(path)

    def written(who: str) -> int:
        seq = writer.begin({"via": "cdp", "who": who, "scope": who, "method": "DOM.enable"})
        writer.end(seq, True)
        return seq

    start = written("bob")
    alice = writer.begin({"via": "cdp", "who": "alice", "scope": "alice", "method": "X.y"})
    bob = written("bob")
    end = written("bob")
    link = _Link(writer, alice)
    sliced = asyncio.run(log_slice(LogReader(path), link, "bob", start, end))  # type: ignore[arg-type]
    kept, missing = sliced.kept, sliced.missing
    assert link.asked == 2  # the race was run: Alice's entry ended between the asks
    assert missing == [], missing
    assert [line["seq"] for _, line in kept] == [start, bob, end]
    writer.close()
