"""``agentenv view``: a real recording as one HTML file, opened in headless Chromium.

A Playwright agent clicks, types and follows a link while a recording is
open; ``agentenv view`` writes the page; Chromium (through Playwright, with
the network cut off) shows one timeline item per frame, the words of what the
agent did, every picture, and the arrow keys step through it.
"""

from __future__ import annotations

import base64
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


#: A 1x1 PNG.
_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
#: What a hostile page can put in a label, a URL, a title or typed text.
HOSTILE = "<!--<script>window.pwned=1</script>\"'`${window.pwned=2}&amp;__DATA__"


def test_a_hostile_pages_text_is_shown_as_text_and_runs_nothing(tmp_path: Path) -> None:
    """Labels, URLs, the recording's name and typed text holding ``<!--``,
    ``<script>``, ``</script>``, quotes and ``${}``: the viewer shows every
    frame, each text as it was, and no script of theirs runs."""
    from playwright.sync_api import sync_playwright

    from agentenv.harness.viewer import render
    from agentenv.harness.words import step_words
    from agentenv.protocol.log import parse_line
    from agentenv.protocol.recording import BrowserRecordingManifest

    url = f"https://shop.test/?q={HOSTILE}"
    target = {"role": "button", "name": HOSTILE}
    raw = [
        {
            "seq": 2,
            "at": "2026-12-02T00:00:01.000Z",
            "action": {
                "via": "cdp",
                "who": "alice",
                "acts": "acting",
                "method": "Input.dispatchMouseEvent",
                "params": {"type": "mousePressed", "x": 1, "y": 2},
                "target": target,
                "url": url,
            },
        },
        {
            "seq": 3,
            "at": "2026-12-02T00:00:01.500Z",
            "tab": {
                "event": "navigated",
                "id": "T1",
                "url": url,
                "by": {"kind": "page", "after": 2},
            },
        },
        {
            "seq": 4,
            "at": "2026-12-02T00:00:02.000Z",
            "action": {
                "via": "cdp",
                "who": "alice",
                "acts": "acting",
                "method": "Input.insertText",
                "params": {"text": HOSTILE},
            },
        },
    ]
    lines = [parse_line(json.dumps(x)) for x in raw]
    frame = {"tab": "T1", "url": url, "type": "png"}
    manifest = BrowserRecordingManifest.model_validate(
        {
            "recording_id": "rec-hostile",
            "request_id": None,
            "name": HOSTILE,
            "started_at": None,
            "ended_at": None,
            "reason": "ended",
            "start_seq": 1,
            "end_seq": 4,
            "log": None,
            "missing_frames": 0,
            "log_missing": [],
            "limits_hit": [],
            "frames": [
                frame
                | {
                    "index": 0,
                    "kind": "first",
                    "after": [],
                    "at": "2026-12-02T00:00:00.500Z",
                    "file": "frames/0-first.png",
                },
                frame
                | {
                    "index": 1,
                    "kind": "action",
                    "after": [2],
                    "at": "2026-12-02T00:00:01.600Z",
                    "file": "frames/1-action.png",
                },
                frame
                | {
                    "index": 2,
                    "kind": "action",
                    "after": [4],
                    "at": "2026-12-02T00:00:02.600Z",
                    "file": "frames/2-action.png",
                },
            ],
        }
    )
    images = {f.file: _PIXEL for f in manifest.frames}
    page_file = tmp_path / "view.html"
    page_file.write_text(render(manifest, lines, images))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), headless=True)
        page = browser.new_context(offline=True).new_page()
        page.goto(page_file.as_uri())
        assert page.title() == f"recording {HOSTILE}"
        assert page.locator("#timeline li").count() == 3
        timeline = page.locator("#timeline").inner_text()
        clicked, typed = step_words([lines[0]]), step_words([lines[2]])
        assert clicked[0].startswith('click "<!--<script>') and typed[0].startswith('type "<!--')
        assert clicked[0] in timeline and typed[0] in timeline, timeline
        page.locator("#timeline li").nth(1).click()
        main = page.locator("main").inner_text()
        assert url in main and f"navigated {url} by the page, after entry 2" in main, main
        # The log beside it lists each entry as it was; choosing one shows
        # the frame taken after it.
        assert page.locator("#log li").count() == 3
        logged = page.locator("#log").inner_text()
        assert typed[0] in logged and f"navigated {url}" in logged, logged
        page.locator("#log li").nth(2).click()
        current = page.locator("#timeline li.current").inner_text()
        assert current.startswith("#2 "), current
        assert page.evaluate("() => window.pwned") is None  # none of it ran
        browser.close()
