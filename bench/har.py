"""A recording's network log (``python -m bench har``), on the native stack.

A page of 100 requests (the page and 99 images, none cached), loaded by an
agent over CDP through the relay, again and again, in two recordings of the
same length: one with ``har`` and its anchor without. Beside each other:

- the page's load time (``Page.navigate`` to ``loadEventFired``), p50 and p99;
- the recorder's and Chromium's CPU (% of a core) while the loads ran;
- the HAR's bytes a page (the network log's size over the pages loaded).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp

from bench.procs import app_op, tree_cpu
from bench.stats import percentile, table
from tests.support.cdp import browser_ws_url
from tests.support.stack import NativeStack

LOADS = int(os.environ.get("AGENTENV_BENCH_HAR_LOADS", "30"))
REQUESTS = 100

#: A 1x1 GIF.
_GIF = bytes.fromhex(
    "47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b"
)


class _Pages(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith("/page"):
            images = "".join(
                f"<img src='/i/{n}?{self.path.partition('?')[2]}' width=4 height=4>"
                for n in range(REQUESTS - 1)
            )
            body, kind = f"<!doctype html><title>A page</title>{images}".encode(), "text/html"
        else:
            body, kind = _GIF, "image/gif"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def _loads(stack: NativeStack, tab: str, site: str) -> list[float]:
    """The page loaded :data:`LOADS` times by an agent: each load's ms."""
    url = browser_ws_url(stack.relay_http, "user=loader")
    ids = iter(range(1, 1 << 30))
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:

        async def call(method: str, params: dict[str, Any], session: str | None = None) -> Any:
            n = next(ids)
            message: dict[str, Any] = {"id": n, "method": method, "params": params}
            if session is not None:
                message["sessionId"] = session
            await ws.send_json(message)
            while (answer := await ws.receive_json(timeout=30)).get("id") != n:
                pass
            return answer["result"]

        attached = await call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        session = attached["sessionId"]
        await call("Page.enable", {}, session)
        took: list[float] = []
        for n in range(LOADS):
            began = time.perf_counter()
            await call("Page.navigate", {"url": f"{site}/page?{uuid.uuid4().hex[:8]}{n}"}, session)
            while True:
                event = await ws.receive_json(timeout=30)
                if event.get("method") == "Page.loadEventFired":
                    break
            took.append((time.perf_counter() - began) * 1000)
    return took


def _recorded(
    stack: NativeStack, folder: Path, tab: str, site: str, har: bool
) -> tuple[list[float], tuple[float, float], int, int]:
    """The loads in one recording: their ms, the recorder's and Chromium's CPU
    (% of a core), and the network log's bytes and entries."""
    body: dict[str, Any] = {"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{folder}"}}
    if har:
        body["har"] = {}
    rid = app_op(stack, "browser-recording/start", body)["recording_id"]
    pids = [stack.pid("recorder"), stack.pid("chromium")]
    cpu0, t0 = [tree_cpu(p) for p in pids], time.monotonic()
    took = asyncio.run(_loads(stack, tab, site))
    seconds = time.monotonic() - t0
    recorder, chromium = (
        (tree_cpu(p) - c) / seconds * 100 for p, c in zip(pids, cpu0, strict=True)
    )
    app_op(stack, "browser-recording/end", {"recording_id": rid})
    if not har:
        return took, (recorder, chromium), 0, 0
    whole = (folder / rid / "network.har").read_bytes()  # the parts hold the same entries
    return took, (recorder, chromium), len(whole), len(json.loads(whole)["log"]["entries"])


def run() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}"
    try:
        with tempfile.TemporaryDirectory() as tmp, NativeStack(Path(tmp) / "s") as stack:
            folder = Path(tmp) / "recordings"
            tab = app_op(stack, "browser/tabs/open", {"url": "about:blank"})["id"]
            asyncio.run(_loads(stack, tab, site))  # warm: the first loads pay for the cold start
            plain, cpu_plain, _, _ = _recorded(stack, folder, tab, site, har=False)
            logged, cpu_har, size, entries = _recorded(stack, folder, tab, site, har=True)
    finally:
        server.shutdown()

    def load(values: list[float]) -> str:
        return f"{percentile(values, 50):.1f} ms / {percentile(values, 99):.1f} ms"

    p50, p50_plain = percentile(logged, 50), percentile(plain, 50)
    rows = [
        ["page load p50 / p99, recording without HAR (anchor)", load(plain)],
        ["the same, recording with HAR", f"{load(logged)} ({p50 / p50_plain:.2f}x at p50)"],
        ["recorder + Chromium CPU, without HAR (anchor)", f"{sum(cpu_plain):.1f} %"],
        [
            "the same, with HAR",
            f"{sum(cpu_har):.1f} % ({sum(cpu_har) - sum(cpu_plain):+.1f}: recorder"
            f" {cpu_har[0] - cpu_plain[0]:+.1f}, Chromium {cpu_har[1] - cpu_plain[1]:+.1f})",
        ],
        ["HAR entries, and bytes a page", f"{entries} ({size / LOADS / 1024:.1f} KiB a page)"],
    ]
    return table(
        f"a recording's network log ({LOADS} loads of a page of {REQUESTS} requests)",
        ["case", "figure"],
        rows,
    )


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
