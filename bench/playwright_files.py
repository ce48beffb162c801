"""Files back through ``/playwright`` (``python -m bench playwright-files``):
Playwright's ``download.save_as`` of a 50 MB download through the computer's
``/playwright``, against its anchor in the same run, the same file fetched
with ``downloads/get``; and what a ``/playwright`` connection costs to open
(Playwright's server started for it), against ``connect_over_cdp``. The
floor beside them: Playwright's own server (``launchServer``) with Chromium
on this machine, nothing between, the same ``save_as`` (Playwright streams
a file 64 KiB a round trip).

The image as users run it (hardened, a user and a control token). Each round
makes a 50 MB Blob in a fresh context's page, downloads it, saves it with
``save_as`` and fetches the same file with ``downloads/get`` (in turn, the
order alternating), then closes the context (which deletes the download).
Needs a Docker engine and the image (make image).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import requests
from playwright.sync_api import sync_playwright

from agentenv.harness.hardening import docker_kwargs
from bench.container import _port
from bench.stats import table

IMAGE = os.environ.get("AGENTENV_BENCH_IMAGE", "agentenv/browser:latest")
ROUNDS = int(os.environ.get("AGENTENV_BENCH_PLAYWRIGHT_ROUNDS", "5"))
MB = 50
TOKEN = "bench-user-token"
CONTROL = "bench-control-token"
ENV = {"AGENTENV_USERS": f"bench:{TOKEN}", "AGENTENV_CONTROL_TOKEN": CONTROL}
HEADERS = {"Authorization": f"Bearer {TOKEN}"}

_MAKE = """mb => {
  const bytes = new Uint8Array(mb * 1024 * 1024);
  for (let i = 0; i < bytes.length; i += 4096) bytes[i] = i % 251;
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes]));
  a.download = 'big.bin';
  document.body.append(a);
  a.click();
}"""


def _ready(app: str) -> None:
    end = time.monotonic() + 120
    while time.monotonic() < end:
        try:
            if requests.get(app + "/readyz", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise TimeoutError("the computer did not get ready in 120 s")


def _newest(app: str) -> str:
    listed = requests.post(
        app + "/v1/browser/downloads/list", json={}, headers=HEADERS, timeout=30
    ).json()
    whole = [d for d in listed if d["bytes"] == MB * 1024 * 1024 and not d["partial"]]
    return str(max(whole, key=lambda d: d["modified"])["name"])


def _get(app: str, name: str, to: Path) -> float:
    start = time.perf_counter()
    with requests.post(
        app + "/v1/browser/downloads/get",
        json={"name": name},
        headers=HEADERS,
        stream=True,
        timeout=120,
    ) as answer:
        answer.raise_for_status()
        with to.open("wb") as out:
            for chunk in answer.iter_content(1 << 20):
                out.write(chunk)
    took = time.perf_counter() - start
    assert to.stat().st_size == MB * 1024 * 1024, to.stat().st_size
    return took


def _rounds(app: str, relay: str, folder: Path) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {"save_as": [], "get": [], "connect": [], "cdp": []}
    endpoint = app.replace("http://", "ws://", 1) + "/playwright"
    with sync_playwright() as pw:
        for n in range(ROUNDS):
            start = time.perf_counter()
            cdp = pw.chromium.connect_over_cdp(relay, headers=HEADERS, timeout=60_000)
            took["cdp"].append(time.perf_counter() - start)
            cdp.close()
            start = time.perf_counter()
            browser = pw.chromium.connect(endpoint, headers=HEADERS, timeout=60_000)
            took["connect"].append(time.perf_counter() - start)
            context = browser.new_context()
            page = context.new_page()
            with page.expect_download(timeout=120_000) as fetched:
                page.evaluate(_MAKE, MB)
            download = fetched.value
            assert download.failure() is None  # waits until it is whole
            name = _newest(app)
            for what in ("save_as", "get") if n % 2 == 0 else ("get", "save_as"):
                start = time.perf_counter()
                if what == "save_as":
                    download.save_as(folder / "saved.bin")
                else:
                    _get(app, name, folder / "got.bin")
                took[what].append(time.perf_counter() - start)
            assert (folder / "saved.bin").read_bytes() == (folder / "got.bin").read_bytes()
            context.close()
            browser.close()
    return took


_OWN_SERVER = """
const { chromium } = require(process.env.PACKAGE);
chromium.launchServer({ executablePath: process.env.CHROMIUM, headless: true,
  host: '127.0.0.1', port: 0 }).then((s) => {
  console.log(s.wsEndpoint());
  process.stdin.on('end', () => s.close().then(() => process.exit(0)));
  process.stdin.resume();
});
"""


def _own_server_save_as(folder: Path) -> list[float]:
    """The floor: Playwright's own server and Chromium on this machine, no
    relay and no /playwright between (the same rounds, save_as alone)."""
    from playwright._impl._driver import compute_driver_executable

    node, cli = compute_driver_executable()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return []
    env = {**os.environ, "PACKAGE": str(Path(cli).parent), "CHROMIUM": chromium}
    server = subprocess.Popen(
        [str(node), "-e", _OWN_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert server.stdout is not None
        endpoint = server.stdout.readline().decode().strip()
        took: list[float] = []
        with sync_playwright() as pw:
            browser = pw.chromium.connect(endpoint, timeout=60_000)
            for _ in range(ROUNDS):
                context = browser.new_context()
                page = context.new_page()
                with page.expect_download(timeout=120_000) as fetched:
                    page.evaluate(_MAKE, MB)
                assert fetched.value.failure() is None
                start = time.perf_counter()
                fetched.value.save_as(folder / "own.bin")
                took.append(time.perf_counter() - start)
                context.close()
            browser.close()
        return took
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def run() -> str:
    import docker

    engine = docker.from_env()
    container = engine.containers.run(
        IMAGE,
        detach=True,
        environment=ENV,
        ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
        **docker_kwargs(),
    )
    try:
        app = f"http://127.0.0.1:{_port(container, 8080)}"
        relay = f"http://127.0.0.1:{_port(container, 9222)}"
        _ready(app)
        with tempfile.TemporaryDirectory() as folder:
            took = _rounds(app, relay, Path(folder))
            took["own"] = _own_server_save_as(Path(folder)) or [float("nan")]
    finally:
        container.remove(force=True, v=True)
    p50 = {k: statistics.median(v) for k, v in took.items()}
    rate = MB / p50["save_as"]
    return table(
        f"/playwright files, {ROUNDS} rounds of a {MB} MB download (image {IMAGE})",
        ("figure", "value", "anchor"),
        [
            (
                "download.save_as through /playwright, p50",
                f"{p50['save_as'] * 1000:.0f} ms ({rate:.0f} MB/s)",
                f"downloads/get of the same file {p50['get'] * 1000:.0f} ms: "
                f"{p50['save_as'] / p50['get']:.2f}x; Playwright's own server and Chromium "
                f"on this machine, nothing between {p50['own'] * 1000:.0f} ms: "
                f"{p50['save_as'] / p50['own']:.2f}x",
            ),
            (
                "pw.chromium.connect to /playwright, p50",
                f"{p50['connect'] * 1000:.0f} ms",
                f"connect_over_cdp to the relay {p50['cdp'] * 1000:.0f} ms: "
                f"+{(p50['connect'] - p50['cdp']) * 1000:.0f} ms (Playwright's server started)",
            ),
        ],
    )
