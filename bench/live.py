"""The live view: what watching costs the agent and the computer, in one run.

An agent's ``Runtime.evaluate("1")`` round trip through the relay, p50, in
alternating blocks with nobody watching and with a watcher fetching
``/live/frame`` five times a second (as the live page does); and the CPU the
app server, the relay and Chromium's processes spend while a watcher watches
for 10 s, beside 10 s with nobody watching.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import requests

from bench.relay import _open, _time
from bench.stats import percentile, table
from tests.support.site import Site
from tests.support.stack import NativeStack

FPS = 5


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _tree(root: int) -> list[int]:
    """``root`` and every process under it."""
    found = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True)
    children: dict[int, list[int]] = {}
    for line in found.stdout.splitlines():
        pid, ppid = (int(x) for x in line.split())
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


class Watcher:
    """Fetches /live/frame FPS times a second in a thread, like the live page."""

    def __init__(self, app: str) -> None:
        self.app, self.stop, self.frames = app, threading.Event(), 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with requests.Session() as http:
            while not self.stop.is_set():
                began = time.monotonic()
                answer = http.get(self.app + "/live/frame", timeout=30)
                self.frames += answer.status_code == 200
                self.stop.wait(max(0.0, 1 / FPS - (time.monotonic() - began)))

    def __enter__(self) -> Watcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


async def _rounds(
    stack: NativeStack, tab: str, blocks: int, n: int
) -> tuple[list[float], list[float]]:
    import aiohttp

    quiet: list[float] = []
    watched: list[float] = []
    async with aiohttp.ClientSession() as http:
        client = await _open(http, stack.relay_http, tab)
        await _time(client, "Runtime.evaluate", {"expression": "1"}, 200)  # warm
        for _ in range(blocks):
            quiet += await _time(client, "Runtime.evaluate", {"expression": "1"}, n)
            with Watcher(stack.app_http):
                await asyncio.sleep(0.5)
                watched += await _time(client, "Runtime.evaluate", {"expression": "1"}, n)
    return quiet, watched


def run() -> str:
    with (
        Site() as site,
        tempfile.TemporaryDirectory() as folder,
        NativeStack(Path(folder)) as stack,
    ):
        tab = stack.op("tabs/open", {"url": site.url + "/tall"})["id"]
        quiet, watched = asyncio.run(_rounds(stack, tab, 6, 500))
        pids = [stack.pid("app"), stack.pid("relay"), *_tree(stack.pid("chromium"))]
        cpu0, t0 = _cpu_seconds(pids), time.monotonic()
        time.sleep(10)
        idle = (_cpu_seconds(pids) - cpu0) / (time.monotonic() - t0) * 100
        with Watcher(stack.app_http) as watcher:
            cpu0, t0 = _cpu_seconds(pids), time.monotonic()
            time.sleep(10)
            busy = (_cpu_seconds(pids) - cpu0) / (time.monotonic() - t0) * 100
            rate = watcher.frames / 10
    rows = [
        [
            "agent's Runtime.evaluate through the relay, p50",
            f"{percentile(watched, 50):.3f} ms watched",
            f"{percentile(quiet, 50):.3f} ms unwatched",
            f"{percentile(watched, 50) - percentile(quiet, 50):+.3f} ms",
        ],
        [
            f"app + relay + Chromium CPU, a watcher at {FPS} frames a second",
            f"{busy:.1f} % of a core",
            f"nobody watching {idle:.1f} %",
            f"{rate:.1f} frames/s; +{busy - idle:.1f} %",
        ],
    ]
    return table("live view", ["case", "figure", "anchor", "difference"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
