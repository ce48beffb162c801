"""A person in the live view: input to pixels, and what driving costs, in one run.

**Input to pixels.** The real live page (``/live`` with a person's token),
in a local Chromium driven by Playwright, shows a page that turns black or
white at each press. Each press is a real mouse press on the view's picture
at a random moment; its time is from the page's own ``mousedown`` to the
moment the view's picture shows the new colour (read from the picture in
the page, polled each animation frame), p50 and p95 over :data:`PRESSES`
presses. Beside it, from the same run: a frame's capture alone (a
``/live/frame`` round trip: the floor under any frame), and a press's
``down`` alone (``POST /live/input``: the input's own path). The anchor is
Steel's WebRTC view at 25 frames a second, 40 ms a frame (their published
figure: nothing of theirs runs here).

**CPU.** The app server, the relay and the computer's Chromium while a
person drives the view (a press every 0.5 s) against the same view open
read-only (an agent's token), 10 s each.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from bench.live import FPS, _cpu_seconds, _tree
from bench.stats import percentile, table
from tests.support.stack import NativeStack

CONTROL = "bench-control-token-live-input"
PERSON = "bench-person-token-live-input"
WATCHER = "bench-agent-token-live-input"
#: Presses timed.
PRESSES = 40
#: A page that turns black or white at each press anywhere on it.
PAGE = (
    "<!doctype html><title>flip</title><body style='margin:0;height:100vh;background:#fff'"
    " onmousedown=\"this.style.background = this.style.background === 'rgb(0, 0, 0)'"
    " ? '#fff' : '#000'\">"
)
#: In the view's page: wait for its picture to show ``dark`` at (20, 20);
#: the time since the last ``mousedown`` on it (ms).
_SHOWN = """async (dark) => {
  const pen = document.createElement("canvas").getContext("2d");
  const shows = () => {
    pen.drawImage(screen, 20, 20, 1, 1, 0, 0, 1, 1);
    return (pen.getImageData(0, 0, 1, 1).data[0] < 128) === dark;
  };
  const end = performance.now() + 10000;
  while (!shows()) {
    if (performance.now() > end) throw new Error("no frame showed the press within 10 s");
    await new Promise((r) => requestAnimationFrame(r));
  }
  return performance.now() - window.pressedAt;
}"""
_MARK = """() => screen.addEventListener("mousedown", () => {
  window.pressedAt = performance.now();
}, {capture: true})"""


def _frames(page: Any, n: int) -> None:
    """Wait (bounded) for the view to have shown ``n`` frames (its CSP
    allows no eval, so no ``wait_for_function``)."""
    end = time.monotonic() + 30
    while int(page.evaluate("Number(screen.dataset.frames || 0)")) < n:
        if time.monotonic() > end:
            raise TimeoutError("the live view showed no frames in 30 s")
        time.sleep(0.1)


def _fetch_ms(app: str, n: int) -> list[float]:
    headers = {"Authorization": f"Bearer {PERSON}"}
    out: list[float] = []
    with requests.Session() as http:
        for _ in range(n):
            began = time.monotonic()
            http.get(app + "/live/frame", headers=headers, timeout=30).raise_for_status()
            out.append((time.monotonic() - began) * 1000)
            time.sleep(1 / FPS)
    return out


def _input_ms(app: str, n: int) -> list[float]:
    """A press's ``down`` through ``POST /live/input`` alone (ms), as the view sends it."""
    headers = {"Authorization": f"Bearer {PERSON}"}
    out: list[float] = []
    with requests.Session() as http:
        for _ in range(n):
            for kind in ("down", "up"):
                began = time.monotonic()
                body = {"kind": kind, "x": 40, "y": 40}
                http.post(app + "/live/input", json=body, headers=headers, timeout=30)
                if kind == "down":
                    out.append((time.monotonic() - began) * 1000)
            time.sleep(0.2)
    return out


def run() -> str:
    from playwright.sync_api import sync_playwright

    env = {
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "AGENTENV_USERS": f"alice:{WATCHER}:shop,carol:{PERSON}:shop:role=human",
    }
    control = {"Authorization": f"Bearer {CONTROL}"}
    with (
        tempfile.TemporaryDirectory() as folder,
        NativeStack(Path(folder), env) as stack,
        sync_playwright() as pw,
    ):
        stack.op("tabs/open", {"scope": "shop", "url": "data:text/html," + quote(PAGE)}, **control)
        app = stack.app_http
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        page.goto(f"{app}/live?token={PERSON}")
        _frames(page, 2)
        page.evaluate(_MARK)
        box = page.locator("#screen").bounding_box()
        assert box is not None
        x, y = box["x"] + 40, box["y"] + 40
        dark = False
        latencies: list[float] = []
        for _ in range(PRESSES):
            time.sleep(random.uniform(0.3, 0.3 + 1 / FPS))  # a moment between frames
            page.mouse.move(x, y)
            page.mouse.down()
            page.mouse.up()
            dark = not dark
            latencies.append(float(page.evaluate(_SHOWN, dark)))
        fetches = _fetch_ms(app, 30)
        inputs = _input_ms(app, 20)
        pids = [stack.pid("app"), stack.pid("relay"), *_tree(stack.pid("chromium"))]
        cpu0, t0 = _cpu_seconds(pids), time.monotonic()
        while time.monotonic() - t0 < 10:
            page.mouse.down()
            page.mouse.up()
            page.wait_for_timeout(500)
        driven = (_cpu_seconds(pids) - cpu0) / (time.monotonic() - t0) * 100
        page.goto(f"{app}/live?token={WATCHER}")  # read-only
        _frames(page, 2)
        cpu0, t0 = _cpu_seconds(pids), time.monotonic()
        page.wait_for_timeout(10_000)
        watched = (_cpu_seconds(pids) - cpu0) / (time.monotonic() - t0) * 100
        browser.close()
    rows = [
        [
            "a person's press in the view to the picture showing it, p50",
            f"{percentile(latencies, 50):.0f} ms",
            "Steel's WebRTC: 40 ms a frame",
            f"{percentile(latencies, 50) / 40:.1f}x",
        ],
        [
            "the same, p95",
            f"{percentile(latencies, 95):.0f} ms",
            f"a frame every {1000 / FPS:.0f} ms when idle",
            f"{percentile(latencies, 95) / 40:.1f}x",
        ],
        [
            "a frame's capture alone (/live/frame round trip), p50",
            f"{percentile(fetches, 50):.0f} ms",
            "a press's down alone (/live/input), p50",
            f"{percentile(inputs, 50):.0f} ms",
        ],
        [
            "app + relay + Chromium CPU, a person driving (a press each 0.5 s)",
            f"{driven:.1f} % of a core",
            f"watching read-only {watched:.1f} %",
            f"{driven - watched:+.1f} %",
        ],
    ]
    return table("live view, a person driving", ["case", "figure", "anchor", "ratio"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
