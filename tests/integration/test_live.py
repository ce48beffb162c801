"""``/live`` on the image: a person watches the active tab in headless Chromium.

alice (an agent's token) opens the live page; the agent navigates between
pages that each paint one colour, and the picture on the live page follows.
Watching writes nothing to the log, never brings a tab forward, and the page
and its frames are refused without a token.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
import requests

from tests.support.colours import page_shown, serve_inside
from tests.support.container import Computer, computer
from tests.support.timing import wait_for

SITE = "http://127.0.0.1:8100"


@pytest.fixture(scope="module")
def pc(image: str) -> Iterator[Computer]:
    with computer(image) as running:
        serve_inside(running, 8100)
        yield running


def test_the_live_page_follows_the_agent(pc: Computer) -> None:
    from playwright.sync_api import sync_playwright

    for path in ("/live", "/live/frame"):
        refused = requests.get(pc.app + path, timeout=30)
        assert refused.status_code == 401, (path, refused.status_code)
        assert pc.token("alice") not in refused.text
    pc.op("navigate", {"url": SITE + "/c/red"}, user="alice")
    tabs_before = pc.op("tabs/list", user="alice")
    _, last = pc.log()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{pc.app}/live?token={pc.token('alice')}")
        assert "token" not in page.url  # dropped from the address bar

        def shown() -> str | None:
            return page_shown(page.locator("#screen").screenshot(type="jpeg"))

        wait_for(lambda: shown() == "red", "the live page to show the red page", timeout_s=30)
        frames = int(page.locator("#screen").get_attribute("data-frames") or 0)
        time.sleep(2.0)
        rate = (int(page.locator("#screen").get_attribute("data-frames") or 0) - frames) / 2.0
        assert 2.0 <= rate <= 6.0, rate  # about five a second
        pc.op("navigate", {"url": SITE + "/c/blue"}, user="alice")
        wait_for(lambda: shown() == "blue", "the live page to follow the agent", timeout_s=30)
        browser.close()

    # Watching left no trace: only alice's navigation is on the record.
    lines, _ = pc.log(last)
    acted = [x["action"] for x in lines if "action" in x and x["action"].get("within") is None]
    assert [(a["via"], a["who"], a.get("op")) for a in acted] == [("api", "alice", "navigate")]
    tabs_after = pc.op("tabs/list", user="alice")
    assert [t["id"] for t in tabs_after] == [t["id"] for t in tabs_before]
    assert [t["active"] for t in tabs_after] == [t["active"] for t in tabs_before]
    # A frame on its own, for any watcher with a token; never cached.
    frame = requests.get(pc.app + "/live/frame", headers=pc.headers("alice"), timeout=30)
    assert frame.status_code == 200 and frame.content[:2] == b"\xff\xd8"
    assert frame.headers["Cache-Control"] == "no-store"
