"""The log's lines as wire models (protocol.log): what the writer writes is
what readers parse, and what counts as an agent's act is decided once."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agentenv.log.writer import LogWriter
from agentenv.protocol.log import (
    LogPage,
    action_of,
    agent_act,
    is_agent_act,
    page_bytes,
    parse_line,
    read_lines,
    scope_of,
    tab_of,
)


def _written(tmp_path: Path) -> list[bytes]:
    """Lines of every kind, as the one writer writes them."""
    writer = LogWriter.open(tmp_path / "actions.jsonl")
    try:
        entry = writer.begin(
            {"via": "cdp", "who": "alice", "conn": 3, "method": "Input.insertText"}
        )
        writer.end(entry, True, more={"params": ("Input.insertText", {"text": "hi"})})
        writer.record(
            "tab", {"event": "opened", "id": "T1", "url": "https://a.test/", "scope": "s"}
        )
        writer.record("reset", {"reason": "data/reset"})
        writer.record(
            "action",
            {"via": "agentenv", "who": "agentenv", "op": "tabs/open", "acts": "acting", "ok": True},
        )
    finally:
        writer.close()
    return (tmp_path / "actions.jsonl").read_bytes().splitlines()


def test_every_line_the_writer_writes_parses_as_its_kind(tmp_path: Path) -> None:
    raw = _written(tmp_path)
    lines = [parse_line(x) for x in raw]
    assert [x["seq"] for x in lines] == list(range(1, len(raw) + 1))
    first = action_of(lines[0])
    assert first is not None and first.get("method") == "Input.insertText"
    tab = tab_of(lines[1])
    assert tab is not None and tab.get("id") == "T1" and scope_of(lines[1]) == "s"
    assert action_of(lines[1]) is None and tab_of(lines[0]) is None
    assert read_lines(b"\n".join(raw) + b"\n\n") == lines


def test_a_log_page_carries_every_field_even_ones_the_model_does_not_name(
    tmp_path: Path,
) -> None:
    raw = _written(tmp_path)
    extra = b'{"seq":99,"at":"2026-12-02T00:00:00.000Z","action":{"via":"cdp","novel":{"x":1}}}'
    page = LogPage.model_validate_json(page_bytes([*raw, extra], 99))
    assert page.last == 99 and len(page.lines) == len(raw) + 1
    assert page.lines[-1] == parse_line(extra)  # nothing dropped, nothing changed
    assert [dict(x) for x in page.lines[:-1]] == [parse_line(x) for x in raw]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "not an object"),
        (b'{"at":"x","action":{}}', "integer seq"),
        (b'{"seq":true,"at":"x","action":{}}', "integer seq"),
        (b'{"seq":1,"at":"x"}', "no single body"),
        (b'{"seq":1,"at":"x","action":{},"tab":{}}', "no single body"),
    ],
)
def test_what_is_not_a_log_line_is_refused_with_the_reason(raw: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_line(raw)


def test_an_agents_act_is_an_acting_entry_of_an_agent_not_within_a_call() -> None:
    def act(**fields: object) -> bytes:
        body = {"via": "cdp", "who": "alice", "acts": "acting"} | fields
        return orjson.dumps({"seq": 1, "at": "x", "action": body})

    assert is_agent_act(parse_line(act()))
    assert agent_act(parse_line(act(via="api", op="input/click"))) is not None
    assert not is_agent_act(parse_line(act(acts="reading")))
    assert not is_agent_act(parse_line(act(who="agentenv")))
    assert not is_agent_act(parse_line(act(via="agentenv")))
    assert not is_agent_act(parse_line(act(within=4)))
    assert not is_agent_act(parse_line(b'{"seq":2,"at":"x","tab":{"event":"opened"}}'))
