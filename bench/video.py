"""A recording's video (``python -m bench video``), on the native stack.

In one run, each beside its anchor:

- the recorder's and Chromium's CPU (every process of theirs) while a page
  repaints all the time, with video at 5 and at 10 frames a second, against
  the same recording without video;
- an agent's ``Runtime.evaluate("1")`` round trip while the video runs at 5
  frames a second, against no recording;
- the video's bytes a minute for a page that repaints all the time, and for a
  typical page (still, with a click every 2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp

from bench.procs import app_op, tree_cpu
from bench.stats import percentile, table
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.stack import NativeStack

SECONDS = float(os.environ.get("AGENTENV_BENCH_VIDEO_S", "20"))

#: A page that repaints on every animation frame; and a still one.
PAGES = {
    "/moving": (
        "<!doctype html><title>Moving</title><body style='margin:0'>"
        "<canvas id=c width=1280 height=800></canvas><script>"
        "const c = document.getElementById('c').getContext('2d'); let n = 0;"
        "function draw() { n++; c.fillStyle = `hsl(${n % 360},70%,60%)`;"
        " c.fillRect((n * 7) % 1280, 0, 40, 800); c.fillStyle = '#000';"
        " c.fillText(String(n), 10 + (n % 600), 20 + (n % 700)); requestAnimationFrame(draw); }"
        "draw();</script>"
    ),
    "/still": (
        "<!doctype html><title>Still</title><h1>A page</h1>"
        "<button id=b onclick=\"this.textContent = 'pressed ' + Date.now()\">Press</button>"
        + "<p>Some text to look at.</p>"
        * 40
    ),
}


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGES.get(self.path, "not found").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.asynccontextmanager
async def _agent(stack: NativeStack, user: str, tab: str) -> AsyncIterator[tuple[RawCdp, str]]:
    """An agent's CDP connection through the relay, and its session on ``tab``."""
    url = browser_ws_url(stack.relay_http, f"user={user}")
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        cdp = RawCdp(ws)
        attached = await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        yield cdp, attached["result"]["sessionId"]


async def _round_trips(stack: NativeStack, tab: str, seconds: float) -> list[float]:
    out: list[float] = []
    async with _agent(stack, "timed", tab) as (cdp, session):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            await cdp.call("Runtime.evaluate", {"expression": "1"}, session=session)
            out.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.01)
    return out


async def _clicks(stack: NativeStack, tab: str, seconds: float) -> None:
    async with _agent(stack, "clicking", tab) as (cdp, session):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for kind in ("mousePressed", "mouseReleased"):
                await cdp.call(
                    "Input.dispatchMouseEvent",
                    {"type": kind, "x": 40, "y": 70, "button": "left", "clickCount": 1},
                    session=session,
                )
            await asyncio.sleep(2)


def _recorded(
    stack: NativeStack, folder: Path, video: dict[str, Any] | None, work: Any
) -> tuple[dict[str, Any], tuple[float, float], Any]:
    """One recording around ``work()``: its manifest, the recorder's and
    Chromium's CPU (% of a core each) while it ran, and what ``work`` returned."""
    body: dict[str, Any] = {"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{folder}"}}
    if video is not None:
        body["video"] = video
    rid = app_op(stack, "browser-recording/start", body)["recording_id"]
    pids = [stack.pid("recorder"), stack.pid("chromium")]
    cpu0, t0 = [tree_cpu(p) for p in pids], time.monotonic()
    result = work()
    took = time.monotonic() - t0
    recorder, chromium = ((tree_cpu(p) - c) / took * 100 for p, c in zip(pids, cpu0, strict=True))
    manifest = app_op(stack, "browser-recording/end", {"recording_id": rid})
    return manifest, (recorder, chromium), result


def _per_minute(manifest: dict[str, Any]) -> float:
    video = manifest["video"]
    total = sum(c["bytes"] for c in video["chunks"])
    return float(total / max(video["seconds"], 1e-9) * 60)


def run() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}"
    try:
        with tempfile.TemporaryDirectory() as tmp, NativeStack(Path(tmp) / "s") as stack:
            folder = Path(tmp) / "recordings"
            moving = app_op(stack, "browser/tabs/open", {"url": site + "/moving"})["id"]

            def timed() -> list[float]:
                return asyncio.run(_round_trips(stack, moving, SECONDS))

            def idle() -> None:
                time.sleep(SECONDS)

            # The CPU figures are of recordings with nothing else running;
            # the round trips are timed in a recording of their own.
            _, cpu_none, _ = _recorded(stack, folder, None, idle)
            five, cpu_5, _ = _recorded(stack, folder, {"fps": 5}, idle)
            ten, cpu_10, _ = _recorded(stack, folder, {"fps": 10}, idle)
            alone = timed()
            _, _, with_video = _recorded(stack, folder, {"fps": 5}, timed)
            app_op(stack, "browser/tabs/close", {"id": moving})
            still = app_op(stack, "browser/tabs/open", {"url": site + "/still"})["id"]
            typical, _, _ = _recorded(
                stack, folder, {"fps": 5}, lambda: asyncio.run(_clicks(stack, still, SECONDS))
            )
    finally:
        server.shutdown()
    p50, p50_alone = percentile(with_video, 50), percentile(alone, 50)

    def cpu(case: tuple[float, float]) -> str:
        (recorder, chromium), base = case, sum(cpu_none)
        more = f" (+{recorder + chromium - base:.1f}: recorder {recorder - cpu_none[0]:+.1f}"
        return f"{recorder + chromium:.1f} %" + more + f", Chromium {chromium - cpu_none[1]:+.1f})"

    rows = [
        ["recorder + Chromium CPU, a page repainting, no video (anchor)", f"{sum(cpu_none):.1f} %"],
        ["the same, video at 5 fps", cpu(cpu_5)],
        ["the same, video at 10 fps", cpu(cpu_10)],
        ["an agent's round trip p50, no recording (anchor)", f"{p50_alone:.3f} ms"],
        ["the same while video runs at 5 fps", f"{p50:.3f} ms ({p50 - p50_alone:+.3f} ms)"],
        ["video bytes a minute, a page repainting, 5 fps", f"{_per_minute(five) / 1e6:.2f} MB"],
        ["the same, 10 fps", f"{_per_minute(ten) / 1e6:.2f} MB"],
        [
            "video bytes a minute, a still page clicked every 2 s",
            f"{_per_minute(typical) / 1e6:.2f} MB",
        ],
    ]
    return table(f"a recording's video ({SECONDS:.0f} s each)", ["case", "figure"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
