"""Frames as a grader sees them: scripted agents of each kind, and the pictures.

A secured computer serves pages that each paint one colour; the ``slow-``
ones answer 1.5 s late. Three scripted agents run a multi-page task while a
recording uploads to the harness's local store (moto with its checks on,
reached over the Docker bridge): Playwright over CDP, the ``mcp`` SDK through
``/mcp``, and pixel ops with an agent's token. For each recording the test
asserts that

- every acting entry of the agent is keyed to exactly one action frame, and
  nothing else is (no frame follows a read: a screenshot, ``browser_snapshot``);
- each action frame's pixels show the page its action led to (the slow pages
  included), and its ``url`` is that page's.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentenv.harness.local_store import LocalStore
from agentenv.protocol.log import agent_act
from agentenv.recorder.bursts import SETTLE_S
from agentenv.recorder.camera import LOAD_WAIT_S
from tests.support.colours import SLOW_S, page_shown, serve_inside
from tests.support.container import Computer, computer
from tests.support.mcp import ref, ref_argument, text
from tests.support.timing import deadline

SITE = "http://127.0.0.1:8100"
#: An agent's pause between actions: long enough for its burst to settle
#: (SETTLE_S), a slow page to answer (SLOW_S) and the frame to be taken, so
#: its next action is a new burst. Deliberate: the test is the agent's pace.
PAUSE_S = SETTLE_S + SLOW_S + 1.0
#: Before a slow page's next action: the page itself is slow to come.
SLOW_PAUSE_S = PAUSE_S + SLOW_S
#: After a recording starts: its first frame (of the page as it was) is taken.
FIRST_FRAME_S = 2 * SETTLE_S


@pytest.fixture(scope="module")
def store(run_store: LocalStore) -> LocalStore:
    return run_store


@pytest.fixture(scope="module")
def pc(image: str, run_network: Any) -> Iterator[Computer]:
    """A computer on the store's network, as ``agentenv run`` starts them."""
    with computer(image, network=run_network) as running:
        serve_inside(running, 8100)
        yield running


def _page(name: str, after: str) -> str:
    return f"{SITE}/c/{name}?next={after}"


def _caused(frame: dict[str, Any], lines: list[dict[str, Any]]) -> str | None:
    """The URL of the last navigation of the frame's tab credited to its entries."""
    after = set(frame["after"])
    url: str | None = None
    for line in lines:
        event = line.get("tab")
        if not event or event["event"] != "navigated" or event["id"] != frame["tab"]:
            continue
        by = event.get("by") or {}
        command = by.get("kind") == "command"
        credited = by.get("entry") if command else by.get("after")
        if credited in after or (command and by.get("within") in after):
            url = event["url"]
    return url


def _counts(action: dict[str, Any]) -> bool:
    return agent_act({"action": action}) is not None and action.get("who") == "alice"


def _record(pc: Computer, store: LocalStore, name: str, agent: Any, tmp: Path) -> dict[str, Any]:
    """Run ``agent`` in a recording; check its frames; answer what the checks saw."""
    key = f"frames-{uuid.uuid4().hex[:8]}/{name}"
    grant = store.grant(key, started_here=False)
    started = pc.recording("start", {"request_id": uuid.uuid4().hex, "upload": grant})
    recording_id = started["recording_id"]
    time.sleep(FIRST_FRAME_S)
    reads = agent()
    time.sleep(PAUSE_S)
    manifest = pc.recording(
        "end",
        {
            "recording_id": recording_id,
            "upload": store.grant(key, started_here=False),
        },
    )
    folder = tmp / recording_id
    names, skipped = store.fetch(key, recording_id, folder)
    assert skipped == [] and "log.jsonl" in names and "manifest.json" in names, names
    assert json.loads((folder / "manifest.json").read_text()) == manifest
    lines = [json.loads(x) for x in (folder / "log.jsonl").read_text().splitlines()]
    assert manifest["missing_frames"] == 0 and manifest["log_missing"] == [], manifest

    actions = {x["seq"]: x["action"] for x in lines if "action" in x}
    acting = sorted(seq for seq, a in actions.items() if _counts(a))
    frames = [f for f in manifest["frames"] if f["kind"] == "action"]
    # A read alone never makes a frame: every frame is keyed to acting entries.
    assert all(f["after"] for f in frames), frames
    keyed = sorted(seq for f in frames for seq in f["after"])
    assert keyed == acting, (keyed, acting)  # each acting entry in exactly one frame
    read_seqs = sorted(
        seq
        for seq, a in actions.items()
        if a.get("who") == "alice" and a["acts"] == "reading" and a.get("within") is None
    )
    for read in reads:
        assert any(
            actions[s].get("op") == read
            or actions[s].get("tool") == read
            or actions[s].get("method") == read
            for s in read_seqs
        ), read
    for frame in frames:
        assert not any(s in read_seqs for s in frame["after"]), frame

    shown: list[str | None] = []
    for frame in frames:
        jpeg = (folder / frame["file"]).read_bytes()
        page = page_shown(jpeg)
        caused = _caused(frame, lines)
        # A frame whose actions caused a navigation shows the new page (the
        # slow ones too), with its URL; any other shows what its URL says.
        expected = caused if caused is not None else frame["url"]
        assert page is not None and expected is not None, (frame, page)
        assert expected.split("?")[0].endswith("/c/" + page), (frame, caused, page)
        assert frame["url"] == expected, (frame, caused)
        shown.append(page)
    return {"shown": shown, "manifest": manifest}


def test_playwright_over_cdp_frames_show_each_page(
    pc: Computer, store: LocalStore, tmp_path: Path
) -> None:
    opened = pc.op("tabs/open", {"url": "about:blank"})

    def agent() -> list[str]:
        async def run() -> None:
            from playwright.async_api import async_playwright

            async with async_playwright() as pw:
                browser = await pw.chromium.connect_over_cdp(
                    f"{pc.relay}?token={pc.token('alice')}", timeout=deadline(60) * 1000
                )
                page = next(p for p in browser.contexts[0].pages if p.url == "about:blank")
                await page.goto(_page("red", "green,slow-purple"))
                await asyncio.sleep(PAUSE_S)
                await page.click("#go")
                await asyncio.sleep(PAUSE_S)
                await page.click("#go", no_wait_after=True)  # green -> the slow purple
                await asyncio.sleep(SLOW_PAUSE_S)
                await page.screenshot()  # a read: no frame
                await browser.close()

        asyncio.run(run())
        return ["Page.captureScreenshot"]

    seen = _record(pc, store, "playwright", agent, tmp_path)
    pc.op("tabs/close", {"id": opened["id"]})
    assert seen["shown"][:1] == ["red"] and "green" in seen["shown"], seen["shown"]
    assert seen["shown"][-1] == "slow-purple", seen["shown"]


def test_mcp_sdk_frames_show_each_page(pc: Computer, store: LocalStore, tmp_path: Path) -> None:
    def agent() -> list[str]:
        async def run() -> None:
            import httpx2
            from mcp.client.client import Client
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {pc.token('alice')}"}, timeout=deadline(120)
            )
            transport = streamable_http_client(pc.app + "/mcp", http_client=http)
            async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                went = await client.call_tool(
                    "browser_navigate", {"url": _page("blue", "slow-cyan")}
                )
                assert not went.is_error, text(went)
                await asyncio.sleep(PAUSE_S)
                snapshot = await client.call_tool("browser_snapshot", {})  # a read: no frame
                await asyncio.sleep(PAUSE_S)
                argument = ref_argument(tools["browser_click"])
                clicked = await client.call_tool(
                    "browser_click",
                    {"element": "go on link", argument: ref(text(snapshot), 'link "go on"')},
                )
                assert not clicked.is_error, text(clicked)
                await asyncio.sleep(PAUSE_S)
                await client.call_tool("browser_snapshot", {})

        asyncio.run(run())
        return ["browser_snapshot"]

    seen = _record(pc, store, "mcp", agent, tmp_path)
    assert seen["shown"] == ["blue", "slow-cyan"], seen["shown"]


def test_pixel_ops_frames_show_each_page(pc: Computer, store: LocalStore, tmp_path: Path) -> None:
    def agent() -> list[str]:
        pc.op("navigate", {"url": _page("yellow", "slow-orange")}, user="alice")
        time.sleep(PAUSE_S)
        pc.op("input/click", {"x": 400, "y": 300}, user="alice")  # the page's big target
        time.sleep(SLOW_PAUSE_S)
        pc.op("screenshot", {}, user="alice")  # a read: no frame
        return ["screenshot"]

    seen = _record(pc, store, "pixels", agent, tmp_path)
    assert seen["shown"] == ["yellow", "slow-orange"], seen["shown"]


def test_a_popup_is_framed_not_the_front_tab(
    pc: Computer, store: LocalStore, tmp_path: Path
) -> None:
    """The agent opens a popup, brings its opener to the front, then acts in
    the popup: that act's frame shows the popup (green), not the front tab."""
    opened = pc.op("tabs/open", {"url": "about:blank"})
    fronts: list[str] = []
    popups: list[str] = []
    openers: list[str] = []

    def agent() -> list[str]:
        async def run() -> None:
            from playwright.async_api import async_playwright

            async with async_playwright() as pw:
                browser = await pw.chromium.connect_over_cdp(
                    f"{pc.relay}?token={pc.token('alice')}", timeout=deadline(60) * 1000
                )
                page = next(p for p in browser.contexts[0].pages if p.url == "about:blank")
                await page.goto(_page("red", ""))
                await asyncio.sleep(PAUSE_S)
                async with page.expect_popup() as info:
                    await page.evaluate("window.open('/c/blue?next=green')")
                popup = await info.value
                await popup.wait_for_load_state()
                await page.bring_to_front()
                await asyncio.sleep(PAUSE_S)
                await popup.click("#go")  # blue -> green, in the popup
                await asyncio.sleep(PAUSE_S)
                tabs = pc.op("tabs/list")
                fronts.extend(t["id"] for t in tabs if t["active"])
                openers.extend(t["id"] for t in tabs if t["url"].startswith(SITE + "/c/red"))
                popups.extend(t["id"] for t in tabs if t["url"].startswith(SITE + "/c/green"))
                await browser.close()

        asyncio.run(run())
        return []

    try:
        seen = _record(pc, store, "popup", agent, tmp_path)
    finally:
        for tab in (opened["id"], *popups):
            pc.op("tabs/close", {"id": tab})
    assert len(popups) == len(openers) == 1 and fronts == openers, (fronts, openers, popups)
    frames = [f for f in seen["manifest"]["frames"] if f["kind"] == "action"]
    assert frames[-1]["tab"] == popups[0], frames
    assert seen["shown"][-1] == "green", (seen["shown"], frames)


def test_a_dialog_gives_its_tabs_last_picture_in_its_own_format(
    pc: Computer, store: LocalStore, tmp_path: Path
) -> None:
    """While an alert keeps the page from painting (and from answering), the
    frame of an act there is that tab's last capture, as it was: the same
    bytes, and its format (``jpeg``, ``.jpg``), not a missing frame."""
    opened = pc.op("tabs/open", {"url": "about:blank"})

    def agent() -> list[str]:
        async def run() -> None:
            from playwright.async_api import Dialog, async_playwright

            async with async_playwright() as pw:
                browser = await pw.chromium.connect_over_cdp(
                    f"{pc.relay}?token={pc.token('alice')}", timeout=deadline(60) * 1000
                )
                page = next(p for p in browser.contexts[0].pages if p.url == "about:blank")
                await page.goto(_page("red", ""))
                await asyncio.sleep(PAUSE_S)
                shown: asyncio.Future[Dialog] = asyncio.get_running_loop().create_future()
                page.on("dialog", lambda d: shown.set_result(d))  # left open until dismissed
                await page.evaluate("setTimeout(() => alert('wait'), 0)")
                dialog = await asyncio.wait_for(shown, deadline(30))
                # The frame waits out its page's load check, then falls back.
                await asyncio.sleep(PAUSE_S + LOAD_WAIT_S + 1.0)
                await dialog.dismiss()
                await asyncio.sleep(PAUSE_S)
                await browser.close()

        asyncio.run(run())
        return []

    seen = _record(pc, store, "dialog", agent, tmp_path)
    pc.op("tabs/close", {"id": opened["id"]})
    frames = [f for f in seen["manifest"]["frames"] if f["kind"] == "action"]
    assert len(frames) == 3 and seen["shown"] == ["red"] * 3, (frames, seen["shown"])
    under_dialog = frames[1]  # the alert's act: its page answers nothing
    assert under_dialog["tab"] == frames[0]["tab"], frames  # the agent's page
    before = [f for f in seen["manifest"]["frames"] if f["tab"] == under_dialog["tab"]]
    last = before[before.index(under_dialog) - 1]  # that tab's capture before it
    for frame in (last, under_dialog):
        assert frame["error"] is None and frame["type"] == "jpeg", frame
        assert frame["file"].endswith(".jpg"), frame
    folder = tmp_path / seen["manifest"]["recording_id"]
    picture = (folder / under_dialog["file"]).read_bytes()
    assert picture == (folder / last["file"]).read_bytes()  # the last capture, as it was
