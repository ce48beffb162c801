"""Acting unless shown reading: what changes a page is on the record as
acting, with its params (code with its source), and a recording frames it.

The fourth red team pressed "Confirm payment" with a recording open through
commands the log marked reading (no params, no frame): a breakpoint's
condition, ``Debugger.evaluateOnCallFrame`` after ``Debugger.pause``,
``Page.addScriptToEvaluateOnLoad``, ``Runtime.compileScript`` and
``runScript``, and painted over the page with ``Overlay.highlightRect``;
``Network.loadNetworkResource`` made a request with the page's cookies, its
URL in no line. The manifest held only the first and last frames."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.security.attacks import Agent, agent, attempt, clean
from tests.support.container import SITE, Computer, computer
from tests.support.timing import deadline

#: Where the computer may write recordings (a file: grant), inside it.
ROOT = "/tmp/recordings"


@pytest.fixture(scope="module")
def target(image: str) -> Iterator[Computer]:
    with computer(image, env={"AGENTENV_UPLOAD_ROOTS": ROOT}) as running:
        running.exec("mkdir", "-p", ROOT, user="agentenv")
        running.serve_site()
        yield running


async def _paused_click(alice: Agent, session: str) -> dict[str, Any]:
    """Pause the page, pay from the paused frame, resume: the answer to
    evaluateOnCallFrame."""
    # The page's next script pauses (its ticking timer): take its frame. V8
    # drops a pause request that interrupts script running with breaks off
    # (as a breakpoint's condition runs): CI saw no pause in 30 s once. A
    # person at a debugger presses pause again; so does this.
    for _ in range(6):
        await alice.call("Debugger.pause", {}, session)
        try:
            paused = await alice.event("Debugger.paused", timeout_s=5)
            break
        except (AssertionError, TimeoutError):
            continue
    else:
        raise AssertionError("the page never paused, asked 6 times")
    frame = paused["params"]["callFrames"][0]["callFrameId"]
    answer = await alice.call(
        "Debugger.evaluateOnCallFrame",
        {"callFrameId": frame, "expression": CODE["Debugger.evaluateOnCallFrame"][1]},
        session,
    )
    await alice.call("Debugger.resume", {}, session)
    return answer


CODE = {
    "Runtime.compileScript": ("expression", "document.title = 'compiled'"),
    "Debugger.setBreakpointByUrl": ("condition", "(document.title = 'conditioned', false)"),
    "Page.addScriptToEvaluateOnLoad": ("scriptSource", "document.title = 'loaded'"),
    # What the payment's button does (a page's handlers do not run under a pause).
    "Debugger.evaluateOnCallFrame": (
        "expression",
        "document.getElementById('out').textContent = 'paid'",
    ),
}
#: What acts without running code of the agent's.
DRAWN = ("Runtime.runScript", "Overlay.highlightRect", "Network.loadNetworkResource")


async def test_what_changes_a_page_is_acting_and_framed(target: Computer) -> None:
    before = attempt(target)
    started = target.recording(
        "start",
        # alice's scope named: the home one here, one opened on demand in
        # test_opened_more.py.
        {"request_id": uuid.uuid4().hex, "scope": "alice", "upload": {"url": f"file://{ROOT}"}},
    )
    async with agent(target, "alice") as alice:
        tab, session = await alice.page(SITE + "/pay")
        await alice.call("Runtime.enable", {}, session)
        compiled = await alice.call(
            "Runtime.compileScript",
            {
                "expression": CODE["Runtime.compileScript"][1],
                "sourceURL": "",
                "persistScript": True,
            },
            session,
        )
        assert "result" in compiled, compiled
        await alice.call("Runtime.runScript", {"scriptId": compiled["result"]["scriptId"]}, session)
        assert await alice.evaluate(session, "document.title") == "compiled"
        await alice.call("Debugger.enable", {}, session)
        set_at = await alice.call(
            "Debugger.setBreakpointByUrl",
            {
                "url": "http://127.0.0.1:8000/tick.js",
                "lineNumber": 2,
                "condition": CODE["Debugger.setBreakpointByUrl"][1],
            },
            session,
        )
        await wait_for_title(alice, session, "conditioned")
        # Its work done: the condition runs no more, so no tick runs with
        # breaks off when the pause below is asked for.
        condition = set_at["result"]["breakpointId"]
        await alice.call("Debugger.removeBreakpoint", {"breakpointId": condition}, session)
        loaded = await alice.call(
            "Page.addScriptToEvaluateOnLoad",
            {"scriptSource": CODE["Page.addScriptToEvaluateOnLoad"][1]},
            session,
        )
        assert "result" in loaded, loaded
        await alice.call("Overlay.enable", {}, session)
        await alice.call(
            "Overlay.highlightRect",
            {"x": 0, "y": 0, "width": 300, "height": 200, "color": {"r": 255, "g": 0, "b": 0}},
            session,
        )
        fetched = await alice.call(
            "Network.loadNetworkResource",
            {
                "frameId": tab,
                "url": SITE + "/next",
                "options": {"disableCache": True, "includeCredentials": True},
            },
            session,
        )
        assert fetched.get("result", {}).get("resource", {}).get("success"), fetched
        clicked = await _paused_click(alice, session)
        assert "error" not in clicked and "exceptionDetails" not in clicked["result"], clicked
        assert await alice.evaluate(session, "document.getElementById('out').textContent") == "paid"
    manifest = target.recording("end", {"recording_id": started["recording_id"]})
    lines = target.settled_log(before)
    entries = {
        x["action"]["method"]: (x["seq"], x["action"])
        for x in lines
        if x.get("action", {}).get("who") == "alice" and "method" in x["action"]
    }
    for method, (field, code) in CODE.items():
        _, entry = entries[method]
        assert entry["acts"] == "acting", entry
        assert entry["params"][field] == code, entry  # on the record with its source
    for method in DRAWN:
        assert entries[method][1]["acts"] == "acting", entries[method]
    assert entries["Network.loadNetworkResource"][1]["params"]["url"] == SITE + "/next"
    # Each of these acts is framed: keyed to a frame of the recording.
    framed = {seq for frame in manifest["frames"] for seq in frame.get("after", [])}
    unframed = [m for m in (*CODE, *DRAWN) if entries[m][0] not in framed]
    shown = [(f["kind"], f["after"]) for f in manifest["frames"]]
    assert unframed == [], (unframed, shown)
    assert manifest["missing_frames"] == 0, manifest
    clean(target)


async def wait_for_title(alice: Agent, session: str, title: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(20)
    while await alice.evaluate(session, "document.title") != title:
        if loop.time() > end:
            raise AssertionError(f"the page's title never became {title!r}")
        await asyncio.sleep(0.05)


async def test_what_undoes_a_sessions_settings_is_acting(target: Computer) -> None:
    """A review of issue 40's change: commands the table marked reading that
    change a page: ``Network.disable`` lifted the session's blocked URLs,
    ``Target.detachFromTarget`` its emulation (the page resized), tracking
    heap objects runs a collection (a page's finalizers ran), and a
    screenshot beyond the viewport resizes the page for the shot."""
    before = attempt(target)
    async with agent(target, "alice") as alice:
        tab, session = await alice.page(SITE + "/pay")
        await alice.call("Network.enable", {}, session)
        await alice.call("Network.setBlockedURLs", {"urls": ["*/next*"]}, session)
        await alice.call("Network.disable", {}, session)
        await alice.call("HeapProfiler.startTrackingHeapObjects", {}, session)
        await alice.call("HeapProfiler.stopTrackingHeapObjects", {}, session)
        await alice.call("Page.captureScreenshot", {"captureBeyondViewport": True}, session)
        await alice.call("Page.captureScreenshot", {}, session)
        await alice.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 400, "height": 300, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        await alice.call("Target.detachFromTarget", {"sessionId": session})
        await alice.call("Target.closeTarget", {"targetId": tab})
    lines = target.settled_log(before)
    marks = [
        (x["action"]["method"], x["action"]["acts"], "captureBeyondViewport" in str(x["action"]))
        for x in lines
        if x.get("action", {}).get("who") == "alice" and "method" in x["action"]
    ]
    for method in (
        "Network.disable",
        "HeapProfiler.startTrackingHeapObjects",
        "HeapProfiler.stopTrackingHeapObjects",
        "Target.detachFromTarget",
    ):
        assert (method, "acting", False) in marks, (method, marks)
    assert ("Page.captureScreenshot", "acting", True) in marks, marks
    assert ("Page.captureScreenshot", "reading", False) in marks, marks  # a plain one reads
