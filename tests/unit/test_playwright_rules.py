"""The rules of ``/playwright`` (app/playwright_rules.py) and the ffmpeg
arguments /playwright's videos are made from (app/playwright_ffmpeg.py).
No socket: the protocol's own table, and messages as a client sends them."""

from __future__ import annotations

import io
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import pytest
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from playwright._impl import _protocol as protocol

from agentenv.app.playwright_ffmpeg import asked
from agentenv.app.playwright_rules import (
    ALLOWED,
    REFUSED,
    Drop,
    PlaywrightRules,
    RefuseCall,
    SendOn,
)


def _methods() -> set[str]:
    """Every Type.method of Playwright's protocol, as the installed client has it."""
    named = {f"{kind}.{m}" for kind, methods in protocol.COMMANDS.items() for m in methods}
    for child, parent in protocol.EXTENDS.items():
        named |= {f"{child}.{m}" for m in protocol.COMMANDS.get(parent, {})}
    return named


def test_every_method_of_the_protocol_is_classified() -> None:
    """A method a newer Playwright adds fails here until it is allowed or refused
    with a reason; and the table names no method the protocol lacks."""
    methods = _methods()
    allowed = {f"{kind}.{m}" for kind, names in ALLOWED.items() for m in names}
    refused = {m for m in methods if m in REFUSED or m.split(".")[0] in REFUSED}
    assert methods - allowed - refused == set()
    assert allowed - methods == set()
    assert allowed & refused == set()


def _rules() -> PlaywrightRules:
    rules = PlaywrightRules()
    made = [
        ("", "BrowserType", "browser-type@1"),
        ("browser-type@1", "Browser", "browser@1"),
        ("browser@1", "BrowserContext", "browser-context@1"),
        ("browser-context@1", "Page", "page@1"),
        ("page@1", "Frame", "frame@1"),
        ("browser-context@1", "APIRequestContext", "request-context@1"),
        ("browser-context@1", "Tracing", "tracing@1"),
        ("page@1", "Artifact", "artifact@1"),
    ]
    for parent, kind, guid in made:
        rules.learn(
            {"guid": parent, "method": "__create__", "params": {"type": kind, "guid": guid}}
        )
    return rules


def _call(guid: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "call@7", "guid": guid, "method": method, "params": params or {}}


@pytest.mark.parametrize(
    ("guid", "method", "params", "named"),
    [
        ("browser-type@1", "launch", {"executablePath": "/bin/sh"}, "BrowserType.launch"),
        (
            "request-context@1",
            "fetch",
            {"url": "http://127.0.0.1:6666/"},
            "APIRequestContext.fetch",
        ),
        ("artifact@1", "saveAs", {"path": "/var/log/agentenv/x"}, "Artifact.saveAs"),
        (
            "frame@1",
            "setInputFiles",
            {"selector": "i", "localPaths": ["/etc/passwd"]},
            "Frame.setInputFiles",
        ),
        (
            "frame@1",
            "setInputFiles",
            {"selector": "i", "localDirectory": "/etc"},
            "Frame.setInputFiles",
        ),
        ("tracing@1", "tracingStart", {"name": "../../x"}, "Tracing.tracingStart"),
        ("tracing@1", "tracingStartChunk", {"name": "a/b"}, "Tracing.tracingStartChunk"),
        ("tracing@1", "tracingStopChunk", {"mode": "entries"}, "Tracing.tracingStopChunk"),
        ("browser@1", "startServer", {"title": "x", "port": 1}, "Browser.startServer"),
        ("page@1", "noSuchMethod", {}, "Page.noSuchMethod"),
        ("", "initialize", [], "Root.initialize"),
    ],
)
def test_what_reaches_the_computer_is_refused_with_the_calls_id(
    guid: str, method: str, params: Any, named: str
) -> None:
    got = _rules().check({"id": "call@7", "guid": guid, "method": method, "params": params})
    assert isinstance(got, RefuseCall) and got.method == named, got
    answer = got.answer()
    assert answer["id"] == "call@7"
    assert answer["error"]["error"]["message"].startswith(f"agentenv /playwright refused {named}")


def test_allowed_calls_go_on_as_they_came() -> None:
    rules = _rules()
    for message in (
        _call("", "initialize", {"sdkLanguage": "python"}),
        _call("frame@1", "goto", {"url": "https://example.com/"}),
        _call("frame@1", "setInputFiles", {"selector": "i", "streams": ["writable@1"]}),
        _call("tracing@1", "tracingStart", {"name": "trace-1.x", "screenshots": True}),
        _call("tracing@1", "tracingStopChunk", {"mode": "archive"}),
        _call("artifact@1", "saveAsStream"),
        _call("request-context@1", "dispose"),
    ):
        got = rules.check(message)
        assert isinstance(got, SendOn) and got.message is message, (message, got)


def test_paths_the_server_ignores_are_dropped_before_it_reads_them() -> None:
    rules = _rules()
    video = _call(
        "browser@1",
        "newContext",
        {"recordVideo": {"dir": "/etc", "size": {"width": 8, "height": 6}}},
    )
    got = rules.check(video)
    assert isinstance(got, SendOn)
    assert got.message["params"]["recordVideo"] == {"size": {"width": 8, "height": 6}}
    har = _call("tracing@1", "harStart", {"options": {"harPath": "/x", "content": "omit"}})
    got = rules.check(har)
    assert isinstance(got, SendOn) and got.message["params"]["options"] == {"content": "omit"}


def test_objects_come_and_go_as_the_server_says() -> None:
    rules = _rules()
    rules.learn({"guid": "page@1", "method": "__dispose__", "params": {}})
    for guid in ("page@1", "frame@1", "artifact@1"):
        got = rules.check(_call(guid, "title"))
        assert isinstance(got, RefuseCall) and got.closed, got
        assert got.answer()["error"]["error"]["name"] == "TargetClosedError"
    assert isinstance(rules.check(_call("tracing@1", "tracingStop")), SendOn)
    # A wait's log for a gone object goes nowhere; for a live one, on.
    assert isinstance(rules.check(_call("page@1", "__waitInfo__", {})), Drop)
    assert isinstance(rules.check(_call("tracing@1", "__waitInfo__", {})), SendOn)
    # Adopted: the object lives on under its new parent.
    rules.learn(
        {
            "guid": "browser-context@1",
            "method": "__create__",
            "params": {"type": "Page", "guid": "page@2"},
        }
    )
    rules.learn(
        {"guid": "page@2", "method": "__create__", "params": {"type": "Frame", "guid": "frame@2"}}
    )
    rules.learn({"guid": "", "method": "__adopt__", "params": {"guid": "frame@2"}})
    rules.learn({"guid": "page@2", "method": "__dispose__", "params": {}})
    assert isinstance(rules.check(_call("frame@2", "title")), SendOn)


def test_uploads_are_bounded_per_connection() -> None:
    rules = _rules()
    rules.upload_bytes = 1000
    rules.learn(
        {
            "guid": "browser-context@1",
            "method": "__create__",
            "params": {"type": "WritableStream", "guid": "writable@1"},
        }
    )
    chunk = "A" * 1000  # base64 of 750 bytes
    assert isinstance(rules.check(_call("writable@1", "write", {"binary": chunk})), SendOn)
    got = rules.check(_call("writable@1", "write", {"binary": chunk}))
    assert isinstance(got, RefuseCall) and "uploaded 750 bytes" in got.why, got


def test_malformed_calls_are_refused_not_raised() -> None:
    rules = _rules()
    for message in (
        {},
        {"guid": 3, "method": "x"},
        {"guid": "page@1"},
        _call("page@1", "close", None),
    ):
        got = rules.check(message)
        assert isinstance(got, (RefuseCall, SendOn)), got
    got = rules.check({"id": 1, "guid": "page@1", "method": "close", "params": "nope"})
    assert isinstance(got, RefuseCall) and "params must be an object" in got.why


def test_ffmpeg_reads_playwrights_arguments() -> None:
    args = (
        "-loglevel error -f matroska -i pipe:0 -y -an -r 25 -c:v libvpx-vp9 -b:v 2000k "
        "-vf pad=800:450:0:0:gray,crop=800:450:0:0 -metadata creation_time=x /o/v.webm"
    ).split()
    got = asked(args)
    assert (got.output, got.width, got.height, got.fps, got.bitrate) == (
        "/o/v.webm",
        800,
        450,
        25,
        2_000_000,
    )
    with pytest.raises(ValueError):
        asked(["-r", "25", "-vf", "pad=8:8:0:0:gray", "-y"])
    with pytest.raises(ValueError):
        asked(["-r", "25", "out.webm"])


def test_ffmpeg_makes_a_constant_rate_webm_of_the_frames(tmp_path: Path) -> None:
    """Frames at 0, 100, 400 and 1500 ms: each shows until the next, 25 a
    second, padded to the video's size."""
    stream_bytes = io.BytesIO()
    with av.open(stream_bytes, "w", format="matroska") as made:
        stream = made.add_stream("mjpeg", rate=25)
        assert isinstance(stream, VideoStream)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuvj420p"
        stream.time_base = Fraction(1, 1000)
        for at in (0, 100, 400, 1500):
            frame = VideoFrame(640, 360, "rgb24").reformat(format="yuvj420p")
            frame.pts, frame.time_base = at, Fraction(1, 1000)
            for packet in stream.encode(frame):
                made.mux(packet)
        for packet in stream.encode(None):
            made.mux(packet)
    out = tmp_path / "v.webm"
    args = ["-r", "25", "-b:v", "1000k", "-vf", "pad=800:450:0:0:gray,crop=800:450:0:0", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "agentenv.app.playwright_ffmpeg", *args],
        input=stream_bytes.getvalue(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-500:]
    with av.open(str(out)) as video:
        shown = video.streams.video[0]
        frames = sum(1 for _ in video.decode(video=0))
        assert (shown.codec_context.name, shown.width, shown.height) == ("vp9", 800, 450)
    # 25 a second: slots 0 to 37 until the frame at 1.5 s, then that one once.
    assert frames == 39, frames


def test_a_failed_token_at_playwright_is_recorded_at_its_own_door() -> None:
    from agentenv.log.auth import DOORS, door_of_app_path

    assert door_of_app_path("/playwright") == "playwright" and "playwright" in DOORS
    assert door_of_app_path("/playwrightx") == "op"


@pytest.mark.parametrize(
    ("guid", "method", "params", "why"),
    [
        (
            "browser@1",
            "newContext",
            {"recordVideo": {"size": {"width": 8000, "height": 8000}}},
            "at most 1920x1080",
        ),
        ("browser@1", "newContext", {"recordVideo": {"fps": 1000}}, "from 1 to 30"),
        (
            "page@1",
            "screencastStart",
            {"size": {"width": 4000, "height": 100}},
            "at most 1920x1080",
        ),
        (
            "browser@1",
            "newContext",
            {"clientCertificates": [{"origin": "https://a.test"}]},
            "clientCertificates",
        ),
        ("browser@1", "newContext", {"proxy": {"server": "socks5://127.0.0.1:1"}}, "proxy"),
        ("page@1", "__abort__", "x", "params must be an object"),
        ("page@1", "__waitInfo__", [1], "params must be an object"),
    ],
)
def test_what_costs_the_computer_or_carries_traffic_is_refused(
    guid: str, method: str, params: Any, why: str
) -> None:
    got = _rules().check({"id": 3, "guid": guid, "method": method, "params": params})
    assert isinstance(got, RefuseCall) and why in got.why, got


def test_params_left_out_go_on_as_an_empty_object() -> None:
    """``__abort__`` with ``params: null`` once crashed Playwright's server."""
    got = _rules().check({"id": 3, "guid": "page@1", "method": "__abort__", "params": None})
    assert isinstance(got, SendOn) and got.message["params"] == {}, got


def test_a_connection_is_initialized_once() -> None:
    rules = PlaywrightRules()
    first = _call("", "initialize", {"sdkLanguage": "python"})
    assert isinstance(rules.check(first), SendOn)
    again = rules.check(_call("", "initialize", {"sdkLanguage": "python"}))
    assert isinstance(again, RefuseCall) and "once" in again.why


def test_a_video_of_the_largest_size_goes_on() -> None:
    video = {"recordVideo": {"size": {"width": 1920, "height": 1080}, "fps": 30}}
    assert isinstance(_rules().check(_call("browser@1", "newContext", video)), SendOn)
