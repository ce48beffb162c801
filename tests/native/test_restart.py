"""Chromium killed under the stack: clients get a close frame, /readyz goes
not-ready, then ready, and a new client works."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import requests
from playwright.async_api import async_playwright

from tests.support.site import Site
from tests.support.stack import NativeStack, missing_tools
from tests.support.timing import deadline, wait_for


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    if missing_tools():
        pytest.skip("native stack needs chromium and supervisord: run `make test`")
    with NativeStack(tmp_path_factory.mktemp("restart")) as running:
        yield running


async def test_chromium_restart(own_stack: NativeStack, site: Site) -> None:
    stack = own_stack
    version = requests.get(stack.relay_http + "/json/version", timeout=10).json()
    old_url = version["webSocketDebuggerUrl"]
    statuses: list[int] = []
    async with aiohttp.ClientSession() as http, http.ws_connect(old_url) as ws:
        await ws.send_json({"id": 1, "method": "Browser.getVersion"})
        assert (await ws.receive_json(timeout=10))["id"] == 1
        old_pid = stack.pid("chromium")
        os.kill(old_pid, signal.SIGKILL)
        closing = await ws.receive(timeout=deadline(20))
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1011

    def not_ready() -> bool:
        answer = requests.get(stack.app_http + "/readyz", timeout=5)
        statuses.append(answer.status_code)
        return answer.status_code == 503

    # Chromium takes about a second to come back: the window is there to see.
    wait_for(not_ready, "/readyz to say not ready", timeout_s=10, interval_s=0.02)
    stack.wait_ready()
    assert stack.pid("chromium") != old_pid
    # A client holding the old browser URL reconnects with it.
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(old_url)
        page = await browser.contexts[0].new_page()
        await page.goto(site.url + "/next")
        assert await page.title() == "Next"
        await page.close()
        await browser.close()


def test_a_recording_open_across_a_restart_notes_the_gap(
    own_stack: NativeStack, tmp_path: Path
) -> None:
    """Chromium dying under an open recording: the log says why, and the
    manifest lists the gap instead of failing silently (issue 22)."""
    stack = own_stack
    rec = f"{stack.app_http}/v1/browser-recording"
    started = requests.post(
        rec + "/start",
        json={"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{tmp_path}"}},
        timeout=60,
    )
    assert started.status_code == 200, started.text
    recording = started.json()["recording_id"]
    exits_before = (stack.log_dir / "browser-browser.jsonl").read_text().count('"browser/exited"')
    os.kill(stack.pid("chromium"), signal.SIGKILL)

    def exit_written() -> bool:
        text = (stack.log_dir / "browser-browser.jsonl").read_text()
        return text.count('"browser/exited"') > exits_before

    # The end must come after the relay has seen the death, or the gap is,
    # rightly, not this recording's: wait for the line, not for /readyz
    # (which may still say ready from before the kill).
    wait_for(exit_written, "the relay to write browser/exited", timeout_s=20)
    stack.wait_ready()
    ended = requests.post(rec + "/end", json={"recording_id": recording}, timeout=120)
    assert ended.status_code == 200, ended.text
    manifest = ended.json()
    assert len(manifest["gaps"]) == 1, manifest
    gap = manifest["gaps"][0]
    assert "Chromium's connection ended" in gap["why"] and gap["seq"] > manifest["start_seq"]
    lines = [json.loads(x) for x in (tmp_path / recording / "log.jsonl").read_text().splitlines()]
    exited = [x for x in lines if x.get("action", {}).get("op") == "browser/exited"]
    assert [x["seq"] for x in exited] == [gap["seq"]], exited
