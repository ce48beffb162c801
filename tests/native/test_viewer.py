"""``agentenv view``: a real recording as one HTML file, opened in headless Chromium.

A Playwright agent clicks, types and follows a link while a recording is
open; ``agentenv view`` writes the page; Chromium (through Playwright, with
the network cut off) shows one timeline item per frame, the words of what the
agent did, every picture, and the arrow keys step through it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import requests

from tests.support.cdp import browser_ws_url
from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import deadline, wait_for


def _record(stack: NativeStack, site: Site, folder: Path) -> Path:
    from playwright.sync_api import sync_playwright

    tab = stack.op("tabs/open", {"url": site.url + "/"})["id"]
    answer = requests.post(
        f"{stack.app_http}/v1/browser-recording/start",
        json={"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{folder}"}},
        timeout=60,
    )
    recording = str(answer.json()["recording_id"])
    wait_for(lambda: (folder / recording / "frames").is_dir(), "the first frame")
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(browser_ws_url(stack.relay_http, "user=viewed"))
        page = next(p for p in browser.contexts[0].pages if p.url == site.url + "/")
        page.click("#search")
        page.keyboard.type("red shoes")
        time.sleep(1.5)
        page.click("#go")
        time.sleep(1.5)
        page.click("#next")
        page.wait_for_url(site.url + "/next")
        time.sleep(1.5)
        browser.close()
    requests.post(
        f"{stack.app_http}/v1/browser-recording/end", json={"recording_id": recording}, timeout=60
    ).raise_for_status()
    stack.op("tabs/close", {"id": tab})
    return folder / recording


def test_a_recording_viewed_in_chromium(stack: NativeStack, site: Site, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    recording = _record(stack, site, tmp_path)
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "view", str(recording)],
        capture_output=True,
        text=True,
        timeout=deadline(120),
    )
    assert done.returncode == 0, done.stderr
    page_file = recording / "view.html"
    assert f"wrote {page_file}" in done.stdout and time.monotonic() - began < 30
    manifest = json.loads((recording / "manifest.json").read_text())

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), headless=True)
        context = browser.new_context(offline=True)
        page = context.new_page()
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.goto(page_file.as_uri())
        items = page.locator("#timeline li")
        assert items.count() == len(manifest["frames"])
        timeline = page.locator("#timeline").inner_text()
        for said in ('click "search" (textbox)', 'type "red shoes"', 'click "Go" (button)'):
            assert said in timeline, timeline
        assert 'click "Next page" (link)' in timeline, timeline
        assert "viewed" in timeline  # who acted
        # Every picture is inlined and decodes.
        for index in range(items.count()):
            page.keyboard.press("Home" if index == 0 else "ArrowDown")
            current = page.locator("#timeline li.current")
            assert current.get_attribute("data-index") == str(index)
            assert page.evaluate(
                "() => { const i = document.getElementById('picture');"
                " return i.complete && i.naturalWidth > 0; }"
            )
        page.keyboard.press("ArrowUp")
        assert page.locator("#timeline li.current").get_attribute("data-index") == str(
            items.count() - 2
        )
        # The link's frame shows where it led, and the tab event that moved there.
        page.locator("#timeline li").nth(len(manifest["frames"]) - 2).click()
        main = page.locator("main").inner_text()
        assert site.url + "/next" in main, main
        assert "navigated " + site.url + "/next by the page, after entry" in main, main
        assert all(u.startswith(("file:", "data:")) for u in requested), requested
        browser.close()
