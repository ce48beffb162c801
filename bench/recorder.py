"""Recordings, uploading to an S3 server (the harness's local store: moto
with its checks on, in this process): a burst settling to its frame in the
store (foreground and background tab) beside the anchor, one capture and one
upload done directly; frame bytes JPEG q80 vs PNG; the recorder's CPU while
10 actions a second arrive; and a 200-burst run of navigations, half of them
to pages answering 1.5 s late, counting frames missing and frames showing the
wrong page (by their URL and by their pixels).

A frame's arrival is seen by asking the store for its object (HEAD, every
3 ms)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import requests

from agentenv.harness.local_store import LocalStore, start_local
from agentenv.harness.store import join
from bench.stats import percentile, table
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.colours import COLOURS, page_shown, serve
from tests.support.site import Site
from tests.support.stack import NativeStack

BURSTS = int(os.environ.get("AGENTENV_BENCH_BURSTS", "200"))
SETTLE_S = 0.5


class Arrivals:
    """Frames of one recording as the store holds them."""

    def __init__(self, store: LocalStore, key: str, recording_id: str) -> None:
        self.s3 = store.client("s3")
        self.bucket = store.bucket
        self.prefix = join(store.prefix, key, recording_id, "frames") + "/"
        self.recording_id = recording_id
        self.count = 1  # the first frame, waited for at the start

    def arrived(self, index: int, kind: str = "action") -> bool:
        try:
            self.s3.head_object(Bucket=self.bucket, Key=f"{self.prefix}{index:04d}-{kind}.jpg")
        except Exception:
            return False
        return True

    def catch_up(self) -> None:
        """Count the frames already in the store."""
        while self.arrived(self.count):
            self.count += 1

    async def next(self, deadline_s: float = 15.0) -> None:
        end = time.perf_counter() + deadline_s
        while not await asyncio.to_thread(self.arrived, self.count):
            if time.perf_counter() > end:
                raise TimeoutError(f"frame {self.count} not in the store within {deadline_s} s")
            await asyncio.sleep(0.003)
        self.count += 1


async def _session(cdp: RawCdp, tab: str) -> str:
    found = await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
    return str(found["result"]["sessionId"])


async def _bursts(stack: NativeStack, tab: str, frames: Arrivals, n: int) -> list[float]:
    """Act on ``tab`` n times; each time, ms from the burst settling to its frame in the store."""
    url = browser_ws_url(stack.relay_http, "user=bench")
    out = []
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        cdp = RawCdp(ws)
        session = await _session(cdp, tab)
        for i in range(n):
            await cdp.call(
                "Runtime.evaluate", {"expression": f"document.title = 'b{i}'"}, sessionId=session
            )
            settled = time.perf_counter() + SETTLE_S
            await frames.next()
            out.append((time.perf_counter() - settled) * 1000)
    return out


async def _presses(stack: NativeStack, tab: str, n: int) -> list[float]:
    """ms for a mouse press's round trip through the relay (on the tall page's text)."""
    url = browser_ws_url(stack.relay_http, "user=presser")
    out = []
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        cdp = RawCdp(ws)
        session = await _session(cdp, tab)
        for _ in range(n):
            began = time.perf_counter()
            await cdp.call(
                "Input.dispatchMouseEvent",
                {"type": "mousePressed", "x": 300, "y": 100, "button": "left", "clickCount": 1},
                sessionId=session,
            )
            out.append((time.perf_counter() - began) * 1000)
            await cdp.call(
                "Input.dispatchMouseEvent",
                {"type": "mouseReleased", "x": 300, "y": 100, "button": "left", "clickCount": 1},
                sessionId=session,
            )
    return out


async def _direct(stack: NativeStack, tab: str, store: LocalStore, n: int) -> list[float]:
    """The anchor: ms for one capture and one upload done directly, no recorder."""
    url = browser_ws_url(stack.relay_http, "user=anchor")
    s3 = store.client("s3")
    out = []
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        cdp = RawCdp(ws)
        session = await _session(cdp, tab)
        for i in range(n):
            began = time.perf_counter()
            shot = await cdp.call(
                "Page.captureScreenshot", {"format": "jpeg", "quality": 80}, sessionId=session
            )
            data = base64.b64decode(shot["result"]["data"])
            await asyncio.to_thread(
                s3.put_object, Bucket=store.bucket, Key=f"{store.prefix}/anchor/{i}.jpg", Body=data
            )
            out.append((time.perf_counter() - began) * 1000)
    return out


async def _navigations(
    stack: NativeStack, tab: str, frames: Arrivals, pages: str, n: int
) -> list[str]:
    """n navigations of ``tab``, every other one to a slow page; the URLs, in order."""
    url = browser_ws_url(stack.relay_http, "user=navigator")
    fast = [c for c in COLOURS if not c.startswith("slow-")]
    slow = [c for c in COLOURS if c.startswith("slow-")]
    wanted = []
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        cdp = RawCdp(ws)
        session = await _session(cdp, tab)
        for i in range(n):
            name = slow[i // 2 % len(slow)] if i % 2 else fast[i // 2 % len(fast)]
            target = f"{pages}/c/{name}?n={i}"
            wanted.append(target)
            await cdp.call("Page.navigate", {"url": target}, sessionId=session)
            await frames.next(deadline_s=20.0)
    return wanted


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _steady(stack: NativeStack, tab: str, seconds: float) -> None:
    url = browser_ws_url(stack.relay_http, "user=steady")
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        cdp = RawCdp(ws)
        session = (await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True}))[
            "result"
        ]["sessionId"]
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            await cdp.call(
                "Input.dispatchMouseEvent",
                {"type": "mouseMoved", "x": n % 100, "y": 10},
                sessionId=session,
            )
            n += 1
            await asyncio.sleep(0.1)


def _op(stack: NativeStack, name: str, body: dict[str, Any]) -> Any:
    answer = requests.post(f"{stack.app_http}/v1/{name}", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return (
        answer.json()
        if answer.headers["Content-Type"].startswith("application/json")
        else answer.content
    )


def run() -> str:
    store = start_local(say=lambda _: None, host="127.0.0.1")
    pages = serve()
    try:
        return _run(store, f"http://127.0.0.1:{pages.server_port}")
    finally:
        pages.shutdown()
        store.close()


def _start(stack: NativeStack, store: LocalStore, key: str) -> Arrivals:
    grant = store.grant(key, started_here=False)
    rid = _op(stack, "browser-recording/start", {"request_id": uuid.uuid4().hex, "upload": grant})[
        "recording_id"
    ]
    frames = Arrivals(store, key, rid)
    ends = time.monotonic() + 30
    while not frames.arrived(0, "first"):
        if time.monotonic() > ends:
            raise TimeoutError(f"the first frame of {rid} not in the store within 30 s")
        time.sleep(0.01)
    return frames


def _run(store: LocalStore, pages: str) -> str:
    with (
        Site() as site,
        tempfile.TemporaryDirectory() as tmp,
        NativeStack(Path(tmp) / "s") as stack,
    ):
        front = _op(stack, "browser/tabs/open", {"url": site.url + "/tall"})["id"]
        back = _op(stack, "browser/tabs/open", {"url": site.url + "/next", "background": True})[
            "id"
        ]
        jpeg = _op(stack, "browser/screenshot", {"format": "jpeg"})
        png = _op(stack, "browser/screenshot", {"format": "png"})
        anchor = asyncio.run(_direct(stack, front, store, 40))
        unrecorded = asyncio.run(_presses(stack, front, 200))
        frames = _start(stack, store, "bench/bursts")
        recorded = asyncio.run(_presses(stack, front, 200))
        time.sleep(SETTLE_S + 1.5)
        frames.catch_up()  # the presses' frame(s)
        fg = asyncio.run(_bursts(stack, front, frames, 40))
        bg = asyncio.run(_bursts(stack, back, frames, 40))
        pid = stack.pid("recorder")
        cpu0, t0 = _cpu_seconds(pid), time.monotonic()
        asyncio.run(_steady(stack, front, 10))
        cpu = (_cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) * 100
        _op(stack, "browser-recording/end", {"recording_id": frames.recording_id})
        # The long run: navigations, half of them slow, in a recording of their own.
        long_run = _start(stack, store, "bench/navigations")
        wanted = asyncio.run(_navigations(stack, front, long_run, pages, BURSTS))
        rid = long_run.recording_id
        manifest = _op(stack, "browser-recording/end", {"recording_id": rid})
        folder = Path(tmp) / "fetched"
        store.fetch("bench/navigations", rid, folder)
        actions = [f for f in manifest["frames"] if f["kind"] == "action"]
        wrong_url = sum(1 for f, w in zip(actions, wanted, strict=False) if f["url"] != w)
        wrong_pixels = sum(
            1
            for f, w in zip(actions, wanted, strict=False)
            if page_shown((folder / f["file"]).read_bytes()) != w.split("/c/")[1].split("?")[0]
        )
        (Path(tmp) / "manifest.json").write_text(json.dumps(manifest))
    rows = [
        [
            "anchor: one capture + one upload, directly",
            f"{percentile(anchor, 50):.0f} ms",
            f"{percentile(anchor, 95):.0f} ms",
            str(len(anchor)),
        ],
        [
            "settle -> frame in the store, foreground tab",
            f"{percentile(fg, 50):.0f} ms",
            f"{percentile(fg, 95):.0f} ms",
            str(len(fg)),
        ],
        [
            "settle -> frame in the store, background tab",
            f"{percentile(bg, 50):.0f} ms",
            f"{percentile(bg, 95):.0f} ms",
            str(len(bg)),
        ],
        [
            "a CDP press through the relay, a recording open (the relay names its element)",
            f"{percentile(recorded, 50):.2f} ms",
            f"none open: {percentile(unrecorded, 50):.2f} ms",
            f"+{percentile(recorded, 50) - percentile(unrecorded, 50):.2f} ms",
        ],
        [
            "frame bytes, JPEG q80 vs PNG (1280x800 page)",
            f"{len(jpeg):,} B",
            f"{len(png):,} B",
            f"{len(jpeg) / len(png):.2f}x",
        ],
        ["recorder CPU, 10 actions a second", f"{cpu:.1f} % of a core", "", "10 s"],
        [
            f"{BURSTS} navigations, half slow: frames missing",
            str(manifest["missing_frames"] + max(0, len(wanted) - len(actions))),
            f"action frames {len(actions)}",
            str(len(wanted)),
        ],
        [
            f"{BURSTS} navigations, half slow: frames on the wrong page",
            f"{wrong_url} by URL",
            f"{wrong_pixels} by pixels",
            str(len(actions)),
        ],
    ]
    return table("recordings (S3 store)", ["case", "p50 / figure", "p95 / other", "n"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
