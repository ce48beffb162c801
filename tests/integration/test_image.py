"""The image: builds, becomes ready, is driven through the mapped relay port,
and survives Chromium being killed inside."""

from __future__ import annotations

from typing import Any

import requests
from playwright.sync_api import sync_playwright

from tests.support.timing import wait_for

SUPERVISORCTL = ["supervisorctl", "-c", "/opt/agentenv/image/supervisord.conf"]


def _urls(container: Any) -> tuple[str, str]:
    host = container.get_container_host_ip()
    relay = f"http://{host}:{container.get_exposed_port(9222)}"
    app = f"http://{host}:{container.get_exposed_port(8080)}"
    return relay, app


def _exec(container: Any, *cmd: str) -> str:
    result = container.exec(list(cmd))
    assert result.exit_code == 0, result.output
    return str(result.output.decode())


def _drive(relay: str) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(relay)
        page = browser.contexts[0].new_page()
        page.set_content("<title>Inside</title><input id=q><p id=out></p>")
        page.fill("#q", "container words")
        assert page.evaluate("document.getElementById('q').value") == "container words"
        assert page.title() == "Inside"
        assert page.screenshot()[:4] == b"\x89PNG"
        page.close()
        browser.close()


def test_ready_and_driven_through_the_relay(computer: Any) -> None:
    relay, app = _urls(computer)
    assert requests.get(app + "/readyz", timeout=10).json()["ready"] is True
    version = requests.get(relay + "/json/version", timeout=10).json()
    assert version["Browser"].startswith(("Chrome/", "HeadlessChrome/"))
    assert version["webSocketDebuggerUrl"].startswith(f"ws://{relay.split('//')[1]}/devtools/")
    card = requests.get(app + "/card", timeout=10).json()
    assert card["name"] == "browser" and "browser/v1" in card["extensions"]
    _drive(relay)


def test_processes_users_and_health(computer: Any) -> None:
    ps = _exec(computer, "ps", "-eo", "user,comm")
    chromium_users = {line.split()[0] for line in ps.splitlines() if "chromium" in line}
    assert chromium_users == {"agentenv"}, ps
    assert _exec(computer, "sh", "-c", "readlink /proc/1/exe").strip().endswith("tini")
    status = _exec(computer, *SUPERVISORCTL, "status")
    for program in ("chromium", "relay", "app"):
        assert f"{program}" in status and "RUNNING" in status, status
    logs = _exec(computer, "ls", "/var/log/agentenv")
    for name in ("chromium.log", "relay.log", "app.log"):
        assert name in logs, logs

    def healthy() -> bool:
        computer.get_wrapped_container().reload()
        state = computer.get_wrapped_container().attrs["State"]
        return bool(state.get("Health", {}).get("Status") == "healthy")

    wait_for(healthy, "Docker's HEALTHCHECK to say healthy", timeout_s=60, interval_s=1)


def test_chromium_killed_inside_comes_back(computer: Any) -> None:
    relay, app = _urls(computer)
    pid = _exec(computer, *SUPERVISORCTL, "pid", "chromium").strip()
    assert pid.isdigit(), pid
    _exec(computer, "kill", "-9", pid)

    wait_for(
        lambda: requests.get(app + "/readyz", timeout=5).status_code == 503,
        "/readyz to say not ready after Chromium was killed",
        timeout_s=10,
        interval_s=0.02,
    )
    wait_for(
        lambda: requests.get(app + "/readyz", timeout=5).status_code == 200,
        "/readyz to say ready again",
        timeout_s=60,
        interval_s=0.2,
    )
    assert _exec(computer, *SUPERVISORCTL, "pid", "chromium").strip() != pid
    _drive(relay)

    def no_zombies() -> bool:
        stats = _exec(computer, "ps", "-eo", "stat=")
        return not any(s.startswith("Z") for s in stats.split())

    # Chromium's killed children exit within moments; tini reaps them.
    wait_for(no_zombies, "no zombie processes in the container", timeout_s=20, interval_s=0.5)
