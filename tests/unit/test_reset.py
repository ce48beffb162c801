"""What data/reset learns from the log: the sites visited since the last reset."""

from __future__ import annotations

from pathlib import Path

from agentenv.app.browser_data import visited, visited_since
from agentenv.log.reader import LogReader
from agentenv.log.writer import LogWriter


def test_the_origins_of_tab_events_and_actions() -> None:
    lines = [
        b'{"seq":1,"tab":{"event":"opened","id":"T1","url":"about:blank","by":"agentenv"}}',
        b'{"seq":2,"action":{"who":"a","url":"https://shop.test/cart?x=1"}}',
        b'{"seq":3,"tab":{"event":"navigated","id":"T1","url":"http://localhost:8100/c/red"}}',
        b'{"seq":4,"tab":{"event":"navigated","id":"T1","url":"https://shop.test/"}}',
        b'{"seq":6,"tab":{"event":"closed","id":"T1"}}',
        b'{"seq":7,"action":{"who":"a","url":"data:text/html,hi"}}',
        b"not json",
        b'["a list"]',
        b'{"seq":8,"action":{"url":42}}',
        b'{"seq":9,"tab":{"event":"navigated","id":"T2","url":"https://***@Bank.test:8443/x"}}',
        b'{"seq":10,"tab":{"event":"navigated","id":"T2","url":"http://[::1]:8000/"}}',
        b'{"seq":11,"tab":{"event":"navigated","id":"T2","url":"http://bad:port/"}}',
    ]
    assert visited(lines) == {
        "https://shop.test",
        "http://localhost:8100",
        "https://bank.test:8443",
        "http://[::1]:8000",
    }


def test_no_line_an_agent_can_make_fails_it() -> None:
    """A URL cut inside an IPv6 host (a long user part, cut where the log cuts),
    and fields of the wrong shape, are passed over."""
    cut = "http://" + "u" * 1990 + "@[::1"
    lines = [
        b'{"seq":1,"tab":{"event":"navigated","url":"' + cut.encode() + b'"}}',
        b'{"seq":2,"tab":"navigated"}',
        b'{"seq":3,"action":["url"]}',
        b'{"seq":4,"tab":{"url":"http://[::1:80/"}}',
        b'{"seq":5,"tab":{"event":"navigated","url":"https://ok.test/"}}',
    ]
    assert visited(lines) == {"https://ok.test"}


def test_a_reset_line_forgets_what_it_cleared() -> None:
    lines = [
        b'{"seq":1,"tab":{"event":"navigated","url":"https://before.test/"}}',
        b'{"seq":2,"reset":{"reason":"data/reset"}}',
        b'{"seq":3,"tab":{"event":"navigated","url":"https://after.test/"}}',
        b'{"seq":4,"reset":{"reason":"something else"}}',
    ]
    assert visited(lines) == {"https://after.test"}


def test_the_log_is_read_past_a_line_still_in_flight(tmp_path: Path) -> None:
    writer = LogWriter.open(tmp_path / "log.jsonl")
    writer.record("tab", {"event": "navigated", "id": "T", "url": "https://one.test/"})
    open_entry = writer.begin({"via": "cdp", "method": "Page.navigate"})  # not written yet
    writer.record("tab", {"event": "navigated", "id": "T", "url": "https://two.test/"})
    reader = LogReader(tmp_path / "log.jsonl")
    assert reader.read(0, 100).last == 1, "read stops at the gap"
    assert visited_since(reader, 0) == {"https://one.test", "https://two.test"}
    assert visited_since(reader, 1) == {"https://two.test"}
    writer.end(open_entry, True)
    writer.close()
