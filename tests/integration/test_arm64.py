"""arm64: the image builds for arm64 and, under qemu emulation, with a user
and a control token configured: the relay answers /json/version with
Chromium's version, /mcp lists Playwright MCP's tools (its node runs on
arm64), and Playwright navigates through the relay. Slow (an emulated build
and an emulated Chromium); part of `make test`."""

from __future__ import annotations

import os
import subprocess

import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.support.container import IMAGE_ARM64, build, require_engine
from tests.support.mcp import initialize, raw_headers
from tests.support.stack import free_port
from tests.support.timing import deadline, wait_for

pytestmark = pytest.mark.arm64

TOKEN = "arm64-user-token"


def _mcp_tools(url: str) -> list[str]:
    """Playwright MCP's tools through /mcp, as a plain JSON-RPC client asks."""
    headers = raw_headers(TOKEN)
    init = initialize("arm64-test")
    answer = requests.post(url, json=init, headers=headers, timeout=deadline(120))
    assert answer.status_code == 200, answer.text
    session = answer.headers.get("Mcp-Session-Id")
    if session:
        headers["Mcp-Session-Id"] = session
    requests.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=headers,
        timeout=deadline(60),
    )
    listed = requests.post(
        url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=headers,
        timeout=deadline(600),
    )
    assert listed.status_code == 200, listed.text
    return [t["name"] for t in listed.json()["result"]["tools"]]


def test_arm64_image_builds_and_answers_under_emulation() -> None:
    if os.environ.get("AGENTENV_SKIP_ARM64") == "1":
        pytest.skip("AGENTENV_SKIP_ARM64=1: the arm64 build was not asked for")
    require_engine()
    build("arm64")
    arch = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Architecture}}", IMAGE_ARM64],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    assert arch == "arm64"
    port = free_port()
    api = free_port()
    name = f"agentenv-arm64-test-{port}"
    subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--rm",
            "--name",
            name,
            "--shm-size=1g",
            # Under qemu, Chromium's GPU process keeps dying: one process it is.
            "-e",
            "AGENTENV_CHROMIUM_FLAGS=--single-process",
            "-e",
            f"AGENTENV_USERS=arm:{TOKEN}",
            "-e",
            "AGENTENV_CONTROL_TOKEN=arm64-control-token",
            "-p",
            f"127.0.0.1:{port}:9222",
            "-p",
            f"127.0.0.1:{api}:8080",
            IMAGE_ARM64,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        machine = subprocess.run(
            ["docker", "exec", name, "uname", "-m"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
        assert machine == "aarch64"

        def version() -> dict[str, str] | None:
            answer = requests.get(f"http://127.0.0.1:{port}/json/version", timeout=10)
            return answer.json() if answer.status_code == 200 else None

        found = wait_for(version, "the emulated relay's /json/version", timeout_s=300, interval_s=2)
        assert found["Browser"].startswith(("Chrome/", "HeadlessChrome/"))
        wait_for(
            lambda: requests.get(f"http://127.0.0.1:{api}/readyz", timeout=10).status_code == 200,
            "the emulated computer to be ready",
            timeout_s=300,
            interval_s=2,
        )
        assert len(_mcp_tools(f"http://127.0.0.1:{api}/mcp")) >= 10
        with sync_playwright() as pw:
            browser = pw.chromium.connect_over_cdp(
                f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=deadline(180) * 1000,
            )
            page = browser.contexts[0].new_page()
            page.goto("data:text/html,<title>arm64</title>", timeout=deadline(120) * 1000)
            assert page.title() == "arm64"
            browser.close()
    finally:
        # -v: the image's log volume goes with it (rm -f alone keeps it, --rm or not).
        subprocess.run(
            ["docker", "rm", "-f", "-v", name], capture_output=True, timeout=deadline(60)
        )
