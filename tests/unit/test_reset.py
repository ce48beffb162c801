"""What data/reset learns from the log: the sites visited since the last reset."""

from __future__ import annotations

from agentenv.app.data import visited


def test_the_origins_of_tab_events_and_actions() -> None:
    lines = [
        b'{"seq":1,"tab":{"event":"opened","id":"T1","url":"about:blank","by":"agentenv"}}',
        b'{"seq":2,"action":{"who":"a","url":"https://shop.test/cart?x=1"}}',
        b'{"seq":3,"tab":{"event":"navigated","id":"T1","url":"http://localhost:8100/c/red"}}',
        b'{"seq":4,"tab":{"event":"navigated","id":"T1","url":"https://shop.test/"}}',
        b'{"seq":5,"reset":{"reason":"data/reset"}}',
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
