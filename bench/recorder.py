"""Recordings: a burst settling to its frame uploaded (foreground and
background tab), frame bytes JPEG q80 vs PNG, the recorder's CPU while 10
actions a second arrive, and missing frames over a 200-burst run."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import requests

from bench.stats import percentile, table
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.site import Site
from tests.support.stack import NativeStack

BURSTS = int(os.environ.get("AGENTENV_BENCH_BURSTS", "200"))
SETTLE_S = 0.5


def _frames(folder: Path) -> int:
    path = folder / "frames"
    return len(list(path.iterdir())) if path.is_dir() else 0


async def _bursts(stack: NativeStack, site: Site, tab: str, folder: Path, n: int) -> list[float]:
    """Act on ``tab`` n times; each time, ms from the burst settling to its frame on disk."""
    url = browser_ws_url(stack.relay_http, "user=bench")
    out = []
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        cdp = RawCdp(ws)
        session = (await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True}))[
            "result"
        ]["sessionId"]
        for i in range(n):
            before = _frames(folder)
            await cdp.call(
                "Runtime.evaluate", {"expression": f"document.title = 'b{i}'"}, sessionId=session
            )
            settled = time.perf_counter() + SETTLE_S
            while _frames(folder) <= before:
                await asyncio.sleep(0.002)
                if time.perf_counter() > settled + 15:
                    raise TimeoutError("no frame within 15 s")
            out.append((time.perf_counter() - settled) * 1000)
    return out


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
    with (
        Site() as site,
        tempfile.TemporaryDirectory() as tmp,
        NativeStack(Path(tmp) / "s") as stack,
    ):
        uploads = Path(tmp) / "up"
        front = _op(stack, "browser/tabs/open", {"url": site.url + "/tall"})["id"]
        back = _op(stack, "browser/tabs/open", {"url": site.url + "/next", "background": True})[
            "id"
        ]
        jpeg = _op(stack, "browser/screenshot", {"format": "jpeg"})
        png = _op(stack, "browser/screenshot", {"format": "png"})
        rid = _op(
            stack,
            "browser-recording/start",
            {"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{uploads}"}},
        )["recording_id"]
        folder = uploads / rid
        while _frames(folder) < 1:
            time.sleep(0.01)
        fg = asyncio.run(_bursts(stack, site, front, folder, 40))
        bg = asyncio.run(_bursts(stack, site, back, folder, 40))
        pid = stack.pid("recorder")
        cpu0, t0 = _cpu_seconds(pid), time.monotonic()
        asyncio.run(_steady(stack, front, 10))
        cpu = (_cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) * 100
        long_run = asyncio.run(_bursts(stack, site, front, folder, BURSTS))
        manifest = _op(stack, "browser-recording/end", {"recording_id": rid})
        (Path(tmp) / "manifest.json").write_text(json.dumps(manifest))
    rows = [
        [
            "settle -> frame uploaded, foreground tab",
            f"{percentile(fg, 50):.0f} ms",
            f"{percentile(fg, 95):.0f} ms",
            str(len(fg)),
        ],
        [
            "settle -> frame uploaded, background tab",
            f"{percentile(bg, 50):.0f} ms",
            f"{percentile(bg, 95):.0f} ms",
            str(len(bg)),
        ],
        [
            "frame bytes, JPEG q80 vs PNG (1280x800 page)",
            f"{len(jpeg):,} B",
            f"{len(png):,} B",
            f"{len(jpeg) / len(png):.2f}x",
        ],
        ["recorder CPU, 10 actions a second", f"{cpu:.1f} % of a core", "", "10 s"],
        [
            f"{BURSTS}-burst run: frames missing",
            str(manifest["missing_frames"]),
            f"p95 {percentile(long_run, 95):.0f} ms",
            str(len(manifest["frames"])),
        ],
    ]
    return table("recordings", ["case", "p50 / figure", "p95 / other", "n"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
