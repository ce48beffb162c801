"""Histories in words: what a judge reads, from log lines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

from agentenv.harness.mind2web import export
from agentenv.harness.words import describe, words
from agentenv.protocol.log import ActionBody, ActionLine
from agentenv.protocol.recording import (
    BrowserRecordingManifest,
    FrameEntry,
    LogEntry,
    VideoChunk,
    VideoEntry,
)

_seq = iter(range(1, 10_000))


AT = "2026-12-02T00:00:00.000Z"


def _line(action: dict[str, Any]) -> ActionLine:
    return {"seq": next(_seq), "at": AT, "action": cast(ActionBody, action)}


def cdp(method: str, acts: str = "acting", **params: Any) -> ActionLine:
    action: dict[str, Any] = {"via": "cdp", "who": "alice", "method": method, "acts": acts}
    if params:
        action["params"] = params
    return _line(action)


def key(text: str | None, key_name: str, kind: str = "keyDown") -> ActionLine:
    params: dict[str, Any] = {"type": kind, "key": key_name}
    if text is not None:
        params["text"] = text
    return cdp("Input.dispatchKeyEvent", **params)


def mcp(tool: str, acts: str = "acting", **args: Any) -> ActionLine:
    action = {"via": "mcp", "who": "alice", "tool": tool, "acts": acts, "args": args}
    return _line(action)


def api(op: str, **args: Any) -> ActionLine:
    action = {"via": "api", "who": "alice", "op": op, "acts": "acting", "args": args}
    return _line(action)


def test_a_playwright_agents_setup_never_appears() -> None:
    setup = [
        cdp("Browser.setDownloadBehavior", behavior="allowAndName"),
        cdp("Page.addScriptToEvaluateOnNewDocument", source="window.__pw = 1"),
        cdp("Emulation.setFocusEmulationEnabled", enabled=True),
        cdp("Emulation.setEmulatedMedia", media=""),
        cdp("Runtime.evaluate", expression="document.title"),
        cdp("Runtime.callFunctionOn", functionDeclaration="() => 1"),
        cdp("DOM.getDocument", acts="reading"),
        cdp("Target.setAutoAttach", autoAttach=True),
    ]
    assert words(setup) == []
    # A step that holds only setup still says what the agent did.
    assert describe(setup) == "run script on the page: window.__pw = 1"
    assert describe(setup[2:]) == "run script on the page: document.title"
    settings = [setup[0], *setup[2:4], cdp("Network.setCacheDisabled", cacheDisabled=True)]
    assert describe(settings) == (
        "set up the browser: Browser.setDownloadBehavior, "
        "Emulation.setFocusEmulationEnabled, Emulation.setEmulatedMedia and 1 more"
    )
    assert describe([]) == "(no action)"
    assert describe([*setup, cdp("Input.insertText", text="shoes")]) == 'type "shoes"'


def test_an_acting_script_reads_as_what_it_is_cut_to_sixty_characters() -> None:
    script = "document.querySelector('#q').value =\n  'red shoes'; document.forms[0].submit()"
    step = describe([cdp("Runtime.evaluate", expression=script)])
    shown = " ".join(script.split())[:60]
    assert step == f"run script on the page: {shown}…" and len(shown) == 60
    called = describe([cdp("Runtime.callFunctionOn", functionDeclaration="() => go()")])
    assert called == "run script on the page: () => go()"
    # The computer's own scripts, and reads, are no agent's act: still no step.
    own = cdp("Runtime.evaluate", expression="1")
    own["action"]["who"] = "agentenv"
    assert describe([own, cdp("Runtime.evaluate", acts="reading", expression="2")]) == (
        "(no action)"
    )


def test_typing_folds_into_words_and_keys_are_presses() -> None:
    typed = [key(c, c) for c in "red"] + [key(None, "r", "keyUp")]
    typed += [key("A", "A"), key("A", "A", "char")]  # a keyDown and its char: one letter
    typed += [
        cdp("Input.insertText", text=" shoes"),
        key("\r", "Enter"),
        key(None, "Enter", "keyUp"),
    ]
    typed += [key(None, "Shift"), key(None, "Tab"), key(None, "ArrowDown", "rawKeyDown")]
    assert words(typed) == ['type "redA shoes"', "press Enter", "press Tab", "press ArrowDown"]


def test_typing_names_its_field_when_the_relay_found_it() -> None:
    search = {"role": "textbox", "name": "Search"}
    lines = [key(c, c) for c in "red"] + [cdp("Input.insertText", text=" shoes")]
    for line in lines:
        line["action"]["target"] = search
    other = cdp("Input.insertText", text="42")
    other["action"]["target"] = {"role": "spinbutton", "name": "Size"}
    assert words([*lines, other, key("\r", "Enter")]) == [
        'type "red shoes" into "Search" (textbox)',
        'type "42" into "Size" (spinbutton)',
        "press Enter",
    ]


def test_a_password_is_never_shown() -> None:
    withheld = [
        cdp("Input.insertText", text={"withheld": "password", "length": 15}),
        key("\r", "Enter"),
    ]
    assert words(withheld) == ["type •••• (15 characters)", "press Enter"]
    typed = mcp(
        "browser_type",
        element="Password",
        ref="e4",
        text={"withheld": "password", "length": 9},
        submit=True,
    )
    assert words([typed]) == ['type •••• (9 characters) into "Password"', "press Enter"]


def test_clicks_name_their_element_when_the_relay_found_it() -> None:
    found = cdp("Input.dispatchMouseEvent", type="mousePressed", x=10, y=20, button="left")
    found["action"]["target"] = {"role": "button", "name": "Sign in"}
    plain = cdp("Input.dispatchMouseEvent", type="mousePressed", x=10.4, y=20, clickCount=2)
    released = cdp("Input.dispatchMouseEvent", type="mouseReleased", x=10, y=20)
    moved = cdp("Input.dispatchMouseEvent", type="mouseMoved", x=10, y=20)
    wheel = cdp("Input.dispatchMouseEvent", type="mouseWheel", x=1, y=1, deltaX=0, deltaY=600)
    assert words([moved, found, released, plain, released, wheel]) == [
        'click "Sign in" (button)',
        "double-click at (10, 20)",
        "scroll down 600 px",
    ]


def test_navigation_and_tabs() -> None:
    lines = [
        cdp("Page.navigate", url="https://shop.example/"),
        cdp("Target.createTarget", url="https://shop.example/cart"),
        cdp("Target.activateTarget", targetId="T1"),
        cdp("Target.closeTarget", targetId="T1"),
    ]
    lines[2]["action"]["url"] = "https://shop.example/cart"
    assert words(lines) == [
        "navigate to https://shop.example/",
        "open tab https://shop.example/cart",
        "switch to tab https://shop.example/cart",
        "close tab",
    ]


def test_mcp_tools_by_element_and_arguments_and_reads_left_out() -> None:
    lines = [
        mcp("browser_navigate", url="https://shop.example/"),
        mcp("browser_snapshot", acts="reading"),
        mcp("browser_click", element="Sign in button", ref="e3"),
        mcp("browser_type", element="Search", ref="e5", text="red shoes"),
        mcp("browser_press_key", key="Enter"),
        mcp("browser_select_option", element="Size", ref="e9", values=["42"]),
        mcp("browser_tabs", action="new", url="https://shop.example/cart"),
        mcp("browser_tabs", action="list"),
        mcp("browser_resize", width=800, height=600),
    ]
    within = cdp("Input.dispatchMouseEvent", type="mousePressed", x=1, y=1)
    within["action"]["within"] = lines[2]["seq"]
    assert words([*lines[:3], within, *lines[3:]]) == [
        "navigate to https://shop.example/",
        'click "Sign in button"',
        'type "red shoes" into "Search"',
        "press Enter",
        'select "42" in "Size"',
        "open tab https://shop.example/cart",
        "resize (width=800, height=600)",
    ]


def test_pixel_ops_of_an_agent() -> None:
    lines = [
        api("navigate", url="https://shop.example/"),
        api("input/click", x=200, y=130),
        api("input/type", text="blue "),
        api("input/type", text="suede"),
        api("input/key", keys="Enter"),
        api("input/scroll", x=1, y=1, dx=0, dy=-300),
    ]
    assert words(lines) == [
        "navigate to https://shop.example/",
        "click at (200, 130)",
        'type "blue suede"',
        "press Enter",
        "scroll up 300 px",
    ]


def _frame(index: int, kind: str, after: list[int], url: str) -> FrameEntry:
    return FrameEntry(
        index=index,
        kind=kind,
        after=after,
        tab="T",
        url=url,
        at="2026-11-30T00:00:00.000Z",
        file=f"frames/{index:04d}-{kind}.jpg",
        type="jpeg",
    )


def test_the_export_reads_as_online_mind2webs_run_py_reads_it(tmp_path: Path) -> None:
    """Paths joined as its ``src/run.py`` joins them, the last action dropped."""
    lines = [
        cdp("Emulation.setFocusEmulationEnabled", enabled=True),
        cdp("Page.navigate", url="https://shop.example/"),
        cdp("Runtime.callFunctionOn", functionDeclaration="() => 1"),
        cdp("Input.insertText", text="red shoes"),
        key("\r", "Enter"),
    ]
    recording = tmp_path / "rec"
    (recording / "frames").mkdir(parents=True)
    (recording / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    frames = [
        _frame(0, "first", [], "about:blank"),
        _frame(1, "action", [lines[0]["seq"], lines[1]["seq"]], "https://shop.example/"),
        _frame(2, "action", [x["seq"] for x in lines[2:]], "https://shop.example/?q=red"),
        _frame(3, "last", [], "https://shop.example/?q=red"),
    ]
    for frame in frames:
        (recording / frame.file).write_bytes(b"\xff\xd8" + bytes([frame.index]))
    manifest = BrowserRecordingManifest(
        recording_id="rec",
        request_id="r",
        name="r",
        started_at=None,
        ended_at=None,
        reason="completed",
        start_seq=1,
        end_seq=9,
        frames=frames,
        log=LogEntry(file="log.jsonl", lines=len(lines)),
        missing_frames=0,
        log_missing=[],
        limits_hit=[],
    )
    trajectories = tmp_path / "out"
    export(manifest, recording, trajectories, "Find red shoes", "t-7", "found them")

    # As src/run.py reads a v2 result:
    task_id = "t-7"
    trajectory_images_path = os.path.join(trajectories, task_id, "trajectory")
    with open(os.path.join(trajectories, task_id, "result.json")) as f:
        result = json.load(f)
    assert result.get("schema_version") == "online-mind2web-v2"
    steps = result["action_history"]
    action_history = [step["action"] for step in steps[:-1]]
    thoughts = [step.get("thought") for step in steps]
    screenshot_paths = [os.path.join(trajectory_images_path, step["screenshot"]) for step in steps]
    assert result.get("agent_final_answer") == "found them"
    assert result["task"] == "Find red shoes"

    assert action_history == ["navigate to https://shop.example/", 'type "red shoes"; press Enter']
    assert thoughts == [None, None, None]
    assert [Path(p).read_bytes() for p in screenshot_paths] == [
        b"\xff\xd8\x01",
        b"\xff\xd8\x02",
        b"\xff\xd8\x03",
    ]
    assert steps[-1]["action"] == "TASK_COMPLETE -> ANSWER: found them"
    assert "video" not in result  # not asked for

    # Asked for, with the recording's video: its chunks beside it, each step timed.
    (recording / "video").mkdir()
    (recording / "video" / "0000.mp4").write_bytes(b"mp4 bytes")
    video = VideoEntry(
        fps=5,
        format="mp4",
        codec="h264",
        start_at="2026-12-02T00:00:00.000Z",
        seconds=4.0,
        chunks=[
            VideoChunk(
                file="video/0000.mp4",
                start_at="2026-12-02T00:00:00.000Z",
                end_at="2026-12-02T00:00:04.000Z",
                offset_s=0.0,
                frames=9,
                bytes=9,
            )
        ],
        frames_at={"1": 1.25, "2": 3.5},
    )
    export(
        manifest.model_copy(update={"video": video}),
        recording,
        tmp_path / "with-video",
        "Find red shoes",
        "t-7",
        "found them",
        video=True,
    )
    again = json.loads((tmp_path / "with-video" / "t-7" / "result.json").read_text())
    assert again["video"] == [{"file": "video/0000.mp4", "offset_s": 0.0}]
    assert (tmp_path / "with-video" / "t-7" / "video" / "0000.mp4").read_bytes() == b"mp4 bytes"
    assert [s.get("video_time") for s in again["action_history"]] == [1.25, 3.5, None]
