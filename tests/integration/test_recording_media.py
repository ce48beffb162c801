"""A recording's video, network log and downloads (issue 24), in the image as
shipped, with users and a control token, driven by real clients.

One secured computer on the run store's network serves a site
(tests/support/media_site.py) whose pages each paint a colour of their own.
Four agents, each in a recording with ``video``, ``har`` and ``downloads:
true`` uploaded to the run's local store:

- Playwright over CDP logs in (types a password, gets a session cookie),
  sends a bearer header and a credential in a query value, and downloads a
  file;
- the ``mcp`` SDK through ``/mcp`` acts, with Playwright MCP's pixel tools,
  on its own tab while another tab is in front;
- pixel ops with an agent's token;
- a raw CDP agent in a tab it opened in the background.

For each: the video plays for the recording's length (within a frame
interval), at each action frame's time (``video.frames_at``) it shows what
that frame shows (pixels compared, downscaled), the HAR holds the page's
requests with their statuses, and the download is listed and uploaded. The
front tab stays in front. Then: every byte of the Playwright recording and
of the computer's log holds none of the scenario's secrets in any encoding
(tests/support/secrets_scan.py), while the entries that carried them are
there; a client's own screencast (Playwright tracing with screenshots)
works while a video runs; and a recorder killed mid-video leaves a chunk
that plays and a manifest rebuilt from the upload.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from agentenv.harness.local_store import LocalStore
from agentenv.log.lines import seconds_of
from agentenv.protocol.log import agent_act
from agentenv.recorder.bursts import SETTLE_S
from agentenv.recorder.video import CHUNK_S
from tests.security.attacks import agent
from tests.support.container import CONTROL, SUPERVISORCTL, USERS, Computer, computer
from tests.support.mcp import text
from tests.support.media_site import COLOURS, file_text, serve_inside
from tests.support.secrets_scan import findings
from tests.support.timing import deadline, wait_for

PORT = 8200
SITE = f"http://127.0.0.1:{PORT}"
FPS = 5
#: An agent's pause between actions: its burst settles and its frame is taken,
#: so its next action is a burst of its own.
PAUSE_S = SETTLE_S + 1.5
#: After a start: the first frame, of the page as it was.
FIRST_FRAME_S = 2 * SETTLE_S
#: Made per run, so finding one anywhere can only mean it leaked. The
#: password holds characters each encoding writes differently.
SECRETS = {
    "password": f"pw {os.urandom(6).hex()} é+/&={os.urandom(6).hex()}",
    "cookie": f"ck{os.urandom(12).hex()}",
    "bearer": f"bt{os.urandom(12).hex()}",
    "query": f"qc{os.urandom(12).hex()}",
}
#: A downscaled picture's mean difference (0-255 a channel) within which two
#: pictures show the same page, and past which they show different ones.
SAME, DIFFERENT = 12.0, 40.0


@pytest.fixture(scope="module")
def store(run_store: LocalStore) -> LocalStore:
    return run_store


@pytest.fixture(scope="module")
def pc(image: str, run_network: Any) -> Iterator[Computer]:
    """A secured computer on the store's network, the site served inside."""
    with computer(image, network=run_network) as running:
        serve_inside(running, PORT, SECRETS)
        yield running


# -- recordings ------------------------------------------------------------------


@dataclass
class Recorded:
    """A recording as the store holds it: every object, by name."""

    manifest: dict[str, Any]
    objects: dict[str, bytes]
    grants: list[dict[str, Any]]

    @property
    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.objects["log.jsonl"].decode().splitlines()]

    def actions(self) -> list[dict[str, Any]]:
        return [x["action"] | {"seq": x["seq"]} for x in self.lines if "action" in x]

    def action_frames(self) -> list[dict[str, Any]]:
        return [f for f in self.manifest["frames"] if f["kind"] == "action"]

    def har(self) -> list[dict[str, Any]]:
        document = json.loads(self.objects["network.har"])
        assert document["log"]["version"] == "1.2"
        entries: list[dict[str, Any]] = document["log"]["entries"]
        return entries


class Recording:
    """One recording with video, HAR and downloads, started and ended by the
    test around what its agent does."""

    def __init__(self, pc: Computer, store: LocalStore, tmp: Path, name: str) -> None:
        self.pc, self.store, self.tmp, self.name = pc, store, tmp, name
        self.key = f"media-{uuid.uuid4().hex[:8]}/{name}"
        self.grants: list[dict[str, Any]] = []
        self.id = ""

    def grant(self) -> dict[str, Any]:
        made = self.store.grant(self.key, started_here=False)
        self.grants.append(made)
        return made

    def start(self, **more: Any) -> str:
        body = {
            "request_id": uuid.uuid4().hex,
            "name": self.name,
            "upload": self.grant(),
            "video": {"fps": FPS},
            "har": {},
            "downloads": True,
            **more,
        }
        self.id = str(self.pc.recording("start", body)["recording_id"])
        time.sleep(FIRST_FRAME_S)
        return self.id

    def fetched(self) -> dict[str, bytes]:
        folder = self.tmp / f"{self.id}-{uuid.uuid4().hex[:6]}"
        names, skipped = self.store.fetch(self.key, self.id, folder)
        assert skipped == [], skipped
        return {name: (folder / name).read_bytes() for name in names}

    def end(self) -> Recorded:
        time.sleep(PAUSE_S)
        manifest = self.pc.recording("end", {"recording_id": self.id, "upload": self.grant()})
        objects = self.fetched()
        assert json.loads(objects["manifest.json"]) == manifest
        assert manifest["missing_frames"] == 0 and manifest["log_missing"] == [], manifest
        assert all(f.get("error") is None for f in manifest["frames"]), manifest["frames"]
        return Recorded(manifest, objects, self.grants)


# -- pictures --------------------------------------------------------------------


def _small(picture: Any) -> bytes:
    """A picture (Pillow's) as 32x20 RGB: what a page looks like, not its text."""
    from PIL import Image

    return bytes(picture.convert("RGB").resize((32, 20), Image.Resampling.BOX).tobytes())


def _diff(a: bytes, b: bytes) -> float:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


def _jpeg(data: bytes) -> bytes:
    from PIL import Image

    return _small(Image.open(io.BytesIO(data)))


def _colour(small: bytes) -> str | None:
    """Which page colour a downscaled picture shows at its centre."""
    offset = (10 * 32 + 16) * 3
    pixel = small[offset : offset + 3]
    for name, want in COLOURS.items():
        if all(abs(a - b) <= 30 for a, b in zip(pixel, want, strict=True)):
            return name
    return None


def _video(recorded: Recorded) -> list[tuple[float, bytes]]:
    """Every picture of the video's chunks: (seconds in the video, downscaled)."""
    import av

    out: list[tuple[float, bytes]] = []
    for chunk in recorded.manifest["video"]["chunks"]:
        with av.open(io.BytesIO(recorded.objects[chunk["file"]]), mode="r") as container:
            for frame in container.decode(video=0):
                assert frame.pts is not None and frame.time_base is not None
                at = chunk["offset_s"] + float(frame.pts * frame.time_base)
                picture: Any = frame  # PyAV's to_image is untyped
                out.append((at, _small(picture.to_image())))
    return out


def _check_video(recorded: Recorded) -> dict[int, str | None]:
    """The video plays for the recording's length, within a frame interval,
    and at each frame's time shows what the frame shows (and not what a frame
    of another page shows). Each frame's colour, by index."""
    manifest, video = recorded.manifest, recorded.manifest["video"]
    assert video is not None and video["chunks"] and video["fps"] == FPS, manifest
    assert [c["file"] for c in video["chunks"]] == [
        f"video/{n:04d}.mp4" for n in range(len(video["chunks"]))
    ]
    pictures = _video(recorded)
    length = max(t for t, _ in pictures)
    assert abs(length - video["seconds"]) <= 1 / FPS, (length, video["seconds"])
    started, ended = seconds_of(manifest["started_at"]), seconds_of(manifest["ended_at"])
    assert started is not None and ended is not None
    assert abs(video["seconds"] - (ended - started)) <= 1 / FPS, (video["seconds"], ended - started)
    # Every entry has its time in the video (the start's own is from before it).
    after_start = {str(x["seq"]) for x in recorded.lines if x["seq"] > manifest["start_seq"]}
    assert after_start <= set(video["entries_at"]), after_start - set(video["entries_at"])

    taken = {f["index"]: _jpeg(recorded.objects[f["file"]]) for f in manifest["frames"]}
    assert recorded.action_frames(), manifest["frames"]
    compared_against_another = 0
    for index, frame in taken.items():
        at = video["frames_at"][str(index)]
        assert 0 <= at <= video["seconds"], (index, at)
        shown = [p for t, p in pictures if t <= at + 0.05][-1]  # the video's picture then
        assert _diff(shown, frame) <= SAME, (index, at, _diff(shown, frame))
        for other in taken.values():
            if _diff(other, frame) > DIFFERENT:  # a frame of another page
                assert _diff(shown, other) > DIFFERENT, (index, at)
                compared_against_another += 1
    assert compared_against_another, "every frame shows the same page: nothing compared"
    return {index: _colour(frame) for index, frame in taken.items()}


def _status(entries: list[dict[str, Any]], url: str, method: str = "GET") -> int:
    """The status of the HAR's request to ``url`` (one only)."""
    found = [e for e in entries if e["request"]["url"] == url and e["request"]["method"] == method]
    assert len(found) == 1, (url, [e["request"]["url"] for e in entries])
    status: int = found[0]["response"]["status"]
    return status


def _check_download(recorded: Recorded, name: str) -> None:
    """The recording lists one download, ``name``'s file, and uploaded it."""
    content = file_text(name).encode()
    listed = recorded.manifest["downloads"]
    assert [d["bytes"] for d in listed] == [len(content)], listed
    assert listed[0]["why"] is None and listed[0]["file"] == "downloads/" + listed[0]["name"]
    assert recorded.objects[listed[0]["file"]] == content


def _front(pc: Computer) -> str:
    """The tab in front of the home scope."""
    tabs = pc.op("tabs/list")
    active = [t["id"] for t in tabs if t["active"]]
    assert len(active) == 1, tabs
    return str(active[0])


def _close_all_but_one(pc: Computer) -> None:
    tabs = pc.op("tabs/list")
    for tab in tabs[1:]:
        pc.op("tabs/close", {"id": tab["id"]})


# -- 1. four agents ----------------------------------------------------------------


def _playwright_agent(pc: Computer) -> None:
    """Alice's Playwright: log in, a bearer header and a query credential, a
    download."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(
            f"{pc.relay}?token={pc.token('alice')}", timeout=deadline(60) * 1000
        )
        page = browser.contexts[0].new_page()
        page.goto(SITE + "/login")
        time.sleep(PAUSE_S)
        page.fill("#user", "alice-user")
        page.fill("#password", SECRETS["password"])
        time.sleep(PAUSE_S)
        page.click("#in")
        page.wait_for_url(SITE + "/home")
        assert page.text_content("#state") == "Signed in"  # the cookie came back
        time.sleep(PAUSE_S)
        page.set_extra_http_headers({"Authorization": "Bearer " + SECRETS["bearer"]})
        page.goto(f"{SITE}/report?access_token={SECRETS['query']}&page=2")
        assert page.text_content("#state") == "Authorized"  # the header and query reached it
        time.sleep(PAUSE_S)
        with page.expect_download() as fetched:
            page.click("#dl")
        assert fetched.value.failure() is None
        time.sleep(PAUSE_S)
        browser.close()


@pytest.fixture(scope="module")
def playwright_run(pc: Computer, store: LocalStore, tmp_path_factory: Any) -> Recorded:
    tmp = tmp_path_factory.mktemp("playwright")
    recording = Recording(pc, store, tmp, "playwright")
    front = _front(pc)
    recording.start()
    _playwright_agent(pc)
    recorded = recording.end()
    assert _front(pc) != front  # Playwright's new page came to the front, as Chromium does
    _close_all_but_one(pc)
    return recorded


def test_a_playwright_agents_recording(playwright_run: Recorded) -> None:
    colours = _check_video(playwright_run)
    frames = playwright_run.action_frames()
    shown = [colours[f["index"]] for f in frames]
    # The new page, the login page (twice: loaded, typed in), home, the report.
    assert {"orange", "teal", "purple"} <= set(shown), shown
    assert shown[-1] == "purple", shown
    entries = playwright_run.har()
    assert _status(entries, SITE + "/login") == 200
    assert _status(entries, SITE + "/login", "POST") == 303
    assert _status(entries, SITE + "/home") == 200
    assert _status(entries, f"{SITE}/report?access_token=REDACTED&page=2") == 200
    _check_download(playwright_run, "report.csv")


def _mcp_agent(pc: Computer, recording: Recording) -> dict[str, str]:
    """Alice's MCP client: her tab (made by ``browser_tabs``) at a blue page,
    then a tab of the control token's in front, then, in a recording, the
    pixel tools on her tab behind it: to a green page, then a download."""

    async def run() -> dict[str, str]:
        import httpx2
        from mcp.client.client import Client
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {pc.token('alice')}"}, timeout=deadline(120)
        )
        transport = streamable_http_client(pc.app + "/mcp", http_client=http)
        async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "browser_mouse_click_xy" in tools, sorted(tools)
            made = await client.call_tool("browser_tabs", {"action": "new"})
            assert not made.is_error, text(made)
            start = SITE + "/c/blue/green/mcp.csv"
            went = await client.call_tool("browser_navigate", {"url": start})
            assert not went.is_error, text(went)
            own = next(t["id"] for t in pc.op("tabs/list") if t["url"] == start)
            front = pc.op("tabs/open", {"url": SITE + "/c/red"})["id"]
            await asyncio.to_thread(
                wait_for, lambda: _front(pc) == front, "the control token's tab in front"
            )
            await asyncio.to_thread(recording.start)
            for _ in range(2):  # to the green page, then the download
                clicked = await client.call_tool("browser_mouse_click_xy", {"x": 400, "y": 300})
                assert not clicked.is_error, text(clicked)
                await asyncio.sleep(PAUSE_S)
            return {"own": str(own), "front": str(front)}

    return asyncio.run(run())


def test_an_mcp_agent_acting_behind_the_front_tab(
    pc: Computer, store: LocalStore, tmp_path: Path
) -> None:
    recording = Recording(pc, store, tmp_path, "mcp")
    tabs = _mcp_agent(pc, recording)
    recorded = recording.end()
    assert _front(pc) == tabs["front"]  # nothing came to the front
    _close_all_but_one(pc)

    calls = [
        a
        for a in recorded.actions()
        if a.get("via") == "mcp" and a.get("tool") == "browser_mouse_click_xy"
    ]
    assert len(calls) == 2, calls
    assert [c["tab"] for c in calls] == [tabs["own"]] * 2, (tabs, calls)
    assert calls[0]["url"] == SITE + "/c/blue/green/mcp.csv", calls
    assert calls[1]["url"] == SITE + "/c/green/mcp.csv", calls
    frames = recorded.action_frames()
    by_call = {c["seq"]: c for c in calls}
    keyed = [f for f in frames if set(f["after"]) & set(by_call)]
    assert len(keyed) == 2 and all(f["tab"] == tabs["own"] for f in keyed), frames
    colours = _check_video(recorded)
    assert [colours[f["index"]] for f in keyed] == ["green", "green"], colours
    assert recorded.manifest["frames"][0]["tab"] == tabs["front"]  # the first: the front tab
    entries = recorded.har()
    assert _status(entries, SITE + "/c/green/mcp.csv") == 200
    _check_download(recorded, "mcp.csv")


def test_a_pixel_agent(pc: Computer, store: LocalStore, tmp_path: Path) -> None:
    recording = Recording(pc, store, tmp_path, "pixels")
    recording.start()
    start = SITE + "/c/yellow/purple/pixels.csv"
    pc.op("navigate", {"url": start}, user="alice")
    time.sleep(PAUSE_S)
    for _ in range(2):  # to the purple page, then the download
        pc.op("input/click", {"x": 400, "y": 300}, user="alice")
        time.sleep(PAUSE_S)
    recorded = recording.end()
    colours = _check_video(recorded)
    ops = [
        a["op"] for a in recorded.actions() if a.get("who") == "alice" and agent_act({"action": a})
    ]
    assert ops == ["navigate", "input/click", "input/click"], ops
    shown = [colours[f["index"]] for f in recorded.action_frames()]
    assert shown == ["yellow", "purple", "purple"], shown
    entries = recorded.har()
    assert _status(entries, start) == 200
    assert _status(entries, SITE + "/c/purple/pixels.csv") == 200
    _check_download(recorded, "pixels.csv")


def test_a_background_tab_agent_is_filmed_and_nothing_comes_to_the_front(
    pc: Computer, store: LocalStore, tmp_path: Path
) -> None:
    front = pc.op("tabs/open", {"url": SITE + "/c/red"})["id"]
    recording = Recording(pc, store, tmp_path, "background")
    recording.start()

    async def run() -> str:
        async with agent(pc, "alice") as alice:
            made = await alice.call(
                "Target.createTarget", {"url": "about:blank", "background": True}
            )
            tab = str(made["result"]["targetId"])
            attached = await alice.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
            session = attached["result"]["sessionId"]
            # The network log's own session on the new tab is made as the
            # agent makes its own (no tab is held for it at start): a request
            # in the first moments of a tab is not in it (har.py).
            await asyncio.sleep(PAUSE_S)
            for colour in ("cyan", "magenta"):
                await alice.call("Page.navigate", {"url": f"{SITE}/c/{colour}"}, session)
                await asyncio.sleep(PAUSE_S)
                assert await asyncio.to_thread(_front, pc) == front
            painted = "document.body.style.background = 'rgb(20, 170, 20)'"  # green
            await alice.evaluate(session, painted)
            await asyncio.sleep(PAUSE_S)
            await alice.call("Page.navigate", {"url": SITE + "/files/background.csv"}, session)
            await asyncio.sleep(PAUSE_S)
            return tab

    tab = asyncio.run(run())
    recorded = recording.end()
    assert _front(pc) == front  # the front tab stayed in front throughout
    _close_all_but_one(pc)
    frames = recorded.action_frames()
    assert recorded.manifest["frames"][0]["tab"] == front
    assert all(f["tab"] == tab for f in frames), frames
    colours = _check_video(recorded)
    shown = [colours[f["index"]] for f in frames]
    # Its opening (a blank page), cyan, magenta, painted green, the download (still green).
    assert shown[-4:] == ["cyan", "magenta", "green", "green"], shown
    entries = recorded.har()
    assert _status(entries, SITE + "/c/cyan") == 200
    assert _status(entries, SITE + "/c/magenta") == 200
    _check_download(recorded, "background.csv")


# -- 2. no secret in any byte --------------------------------------------------------


def test_no_byte_of_the_recording_or_the_log_holds_a_secret(
    pc: Computer, playwright_run: Recorded
) -> None:
    recorded = playwright_run
    kinds = {name.split("/", 1)[0] for name in recorded.objects}
    assert {"frames", "video", "downloads", "network.har", "log.jsonl", "manifest.json"} <= kinds
    secrets = dict(SECRETS)
    secrets |= {f"{user}'s token": token for user, token in USERS.items()}
    secrets["control token"] = CONTROL
    for n, grant in enumerate(recorded.grants):
        for field in ("secret_access_key", "session_token"):
            if grant.get(field):
                secrets[f"grant {n}'s {field}"] = str(grant[field])
    blobs = {f"store:{name}": data for name, data in recorded.objects.items()}
    blobs |= {f"computer:/var/log/{name}": data for name, data in pc.files().items()}
    found = findings(blobs, secrets)
    assert found == [], found

    # The entries that carried them are there, their secrets withheld.
    actions = recorded.actions()
    typed = [
        a for a in actions if a.get("who") == "alice" and a.get("method") == "Input.insertText"
    ]
    texts = [a["params"]["text"] for a in typed]
    assert "alice-user" in texts, texts  # typing is kept as it is ...
    hidden = [t for t in texts if isinstance(t, dict) and t.get("withheld")]
    assert len(hidden) == 1, texts  # ... but the password's
    headers = [
        a["params"]["headers"]
        for a in actions
        if a.get("who") == "alice" and a.get("method") == "Network.setExtraHTTPHeaders"
    ]
    assert headers and all("Authorization" in h for h in headers), headers
    navigated = [a["params"]["url"] for a in actions if a.get("method") == "Page.navigate"]
    assert f"{SITE}/report?access_token=REDACTED&page=2" in navigated, navigated

    entries = recorded.har()
    report = next(e for e in entries if e["request"]["url"].startswith(SITE + "/report?"))
    sent = {h["name"].lower(): h["value"] for h in report["request"]["headers"]}
    assert sent["authorization"] == "REDACTED", sent
    assert sent.get("cookie", "REDACTED") == "REDACTED", sent  # ExtraInfo may come late
    assert {"name": "access_token", "value": "REDACTED"} in report["request"]["queryString"]
    assert {"name": "page", "value": "2"} in report["request"]["queryString"]
    login = next(
        e
        for e in entries
        if e["request"]["url"] == SITE + "/login" and e["request"]["method"] == "POST"
    )
    got = {h["name"].lower(): h["value"] for h in login["response"]["headers"]}
    assert "set-cookie" in got and got["location"] == "/home", got
    assert login["response"]["cookies"] == [{"name": "session", "value": "REDACTED"}], login
    assert "postData" not in login["request"]  # bodies are off: the form is not kept


# -- 3. a client's own screencast ----------------------------------------------------


def test_a_clients_own_screencast_works_while_a_video_runs(
    pc: Computer, store: LocalStore, tmp_path: Path
) -> None:
    """Playwright's tracing with screenshots (``Page.startScreencast``) during
    a recording with video: the trace holds the pages' screenshots, and the
    recording's video is as it would be without it."""
    from playwright.sync_api import sync_playwright

    recording = Recording(pc, store, tmp_path, "screencast")
    trace = tmp_path / "trace.zip"
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(
            f"{pc.relay}?token={pc.token('alice')}", timeout=deadline(60) * 1000
        )
        context = browser.contexts[0]
        page = context.new_page()
        page.goto(SITE + "/c/blue/green")
        context.tracing.start(screenshots=True, snapshots=False)
        recording.start()
        page.click("#go")
        page.wait_for_url(SITE + "/c/green")
        time.sleep(PAUSE_S)
        page.goto(SITE + "/c/yellow")
        time.sleep(PAUSE_S)
        context.tracing.stop(path=trace)
        browser.close()
    recorded = recording.end()
    _close_all_but_one(pc)
    colours = _check_video(recorded)
    assert {"green", "yellow"} <= set(colours.values()), colours
    with zipfile.ZipFile(trace) as packed:
        shots = [packed.read(n) for n in packed.namelist() if n.endswith((".jpeg", ".jpg"))]
    seen = {_colour(_jpeg(shot)) for shot in shots}
    assert {"green", "yellow"} <= seen, (len(shots), seen)


# -- 4. a recorder killed mid-video -----------------------------------------------------


def test_a_recorder_killed_mid_video_leaves_a_chunk_that_plays_and_a_manifest_of_it(
    pc: Computer, store: LocalStore, tmp_path: Path
) -> None:
    """Killed (SIGKILL through supervisorctl) after its first chunk uploaded:
    the chunk plays its whole length, and the restarted recorder ends the
    recording from its journal with a signed manifest listing it at its
    place. Last in this file: the recorder is a new process after it."""
    import av

    pc.op("navigate", {"url": SITE + "/c/teal"})
    recording = Recording(pc, store, tmp_path, "killed")
    recording.start()
    wait_for(
        lambda: "video/0000.mp4" in recording.fetched(),
        "the first chunk in the store",
        timeout_s=CHUNK_S + 20,
        interval_s=1,
    )
    old = pc.exec(*SUPERVISORCTL, "pid", "recorder").strip()
    pc.exec(*SUPERVISORCTL, "signal", "KILL", "recorder")

    def restarted() -> dict[str, Any] | None:
        if pc.exec(*SUPERVISORCTL, "pid", "recorder").strip() in ("0", old):
            return None
        answer = requests.post(
            f"{pc.app}/v1/browser-recording/end",
            json={"recording_id": recording.id, "upload": recording.grant()},
            headers=pc.headers(),
            timeout=deadline(30),
        )
        # A new recorder, which ends it from its journal, signed.
        return dict(answer.json()) if answer.status_code == 200 else None

    manifest = wait_for(restarted, "the restarted recorder to end it", timeout_s=60)
    assert manifest["rebuilt"] and manifest["rebuilt_why"] and manifest["signature"], manifest
    chunks = [(c["file"], c["offset_s"]) for c in manifest["video"]["chunks"]]
    assert chunks[0] == ("video/0000.mp4", 0.0), chunks
    objects = recording.fetched()
    assert {f["file"] for f in manifest["frames"] if not f["error"]} <= set(objects), manifest
    assert (
        manifest["files"]["video/0000.mp4"] == hashlib.sha256(objects["video/0000.mp4"]).hexdigest()
    )
    with av.open(io.BytesIO(objects["video/0000.mp4"]), mode="r") as container:
        times = [
            float(f.pts * f.time_base)
            for f in container.decode(video=0)
            if f.pts is not None and f.time_base is not None
        ]
    assert CHUNK_S - 1 / FPS <= max(times) <= CHUNK_S, max(times)
