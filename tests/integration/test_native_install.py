"""``scripts/install-native.sh`` in a plain ``debian:bookworm-slim`` container:
the install, the stack it starts, Playwright through the relay, the log, and
a recording through ``agentenv run`` and the run's store.

The container stands for a VM or a Modal image: nothing of the browser image
is used but its wheelhouse (pip cannot reach the package index from a
container here; ``--wheels`` is the offline path users have too). Debian's
packages come from its mirror, as on a VM.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.support.stack import ROOT
from tests.support.timing import deadline, wait_for

BASE = "debian:bookworm-slim"
SITE = "http://127.0.0.1:8000"
PAGE = "<!doctype html><title>Native</title><h1>Native</h1><input id=q>"


class Native:
    """The container with the native install in it."""

    def __init__(self, container: Any, control: str, alice: str) -> None:
        self.container = container
        self.control = control
        self.alice = alice
        container.reload()
        ports = container.attrs["NetworkSettings"]["Ports"]
        self.api = f"http://127.0.0.1:{ports['8080/tcp'][0]['HostPort']}"
        self.cdp = f"http://127.0.0.1:{ports['9222/tcp'][0]['HostPort']}"

    def run(self, *command: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        code, output = self.container.exec_run(list(command), environment=env or {})
        return int(code), output.decode(errors="replace")

    def install(self, env: dict[str, str] | None = None) -> str:
        code, output = self.run(
            "bash", "/src/scripts/install-native.sh", "--wheels", "/wheels", env=env
        )
        assert code == 0, output[-4000:]
        return output

    def log_bytes(self) -> bytes:
        code, output = self.container.exec_run(
            ["sh", "-c", "find /var/log/agentenv -type f -exec cat {} +"]
        )
        assert code == 0
        return bytes(output)


@pytest.fixture(scope="module")
def native(image: str) -> Iterator[Native]:
    """Installed and started; ``image`` only makes sure the base image and the
    wheelhouse exist (scripts/build.sh makes both)."""
    import docker

    wheels = ROOT / "build" / "wheels" / "amd64"
    client = docker.from_env()
    container = client.containers.run(
        BASE,
        ["sleep", "infinity"],
        detach=True,
        init=True,
        name=f"agentenv-native-{uuid.uuid4().hex[:8]}",
        labels={"io.agentenv.test": "native-install"},
        volumes={
            str(ROOT): {"bind": "/src", "mode": "ro"},
            str(wheels): {"bind": "/wheels", "mode": "ro"},
        },
        ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
    )
    try:
        found = Native(container, f"control-{secrets.token_hex(12)}", secrets.token_hex(12))
        output = found.install(
            {"AGENTENV_CONTROL_TOKEN": found.control, "AGENTENV_USERS": f"alice:{found.alice}"}
        )
        assert found.control not in output and found.alice not in output
        assert "no systemd here" in output
        container.exec_run(["/opt/agentenv/bin/agentenv-computer"], detach=True)
        wait_for(
            lambda: _ready(found.api),
            "the natively installed computer to be ready",
            timeout_s=deadline(120),
        )
        serve = (
            f"mkdir -p /tmp/site && printf '%s' {json.dumps(PAGE)} > /tmp/site/index.html && "
            "cd /tmp/site && setsid python3 -m http.server 8000 --bind 127.0.0.1 "
            ">/dev/null 2>&1 < /dev/null &"
        )
        assert found.run("sh", "-c", serve)[0] == 0
        yield found
    finally:
        container.remove(force=True)


def _ready(api: str) -> bool:
    try:
        return requests.get(api + "/readyz", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def test_the_stack_runs_as_in_the_image(native: Native) -> None:
    code, listing = native.run("ps", "-eo", "user:12,args")
    assert code == 0
    for program in ("agentenv-relay", "agentenv-app", "agentenv-recorder"):
        owners = {line.split()[0] for line in listing.splitlines() if program in line}
        assert owners == {"agentenv"}, (program, owners)
    chromium = {line.split()[0] for line in listing.splitlines() if "/chromium/chromium" in line}
    assert chromium == {"browser"}
    code, modes = native.run("stat", "-c", "%n %a %U:%G", *ETC)
    assert modes.split("\n")[:3] == [
        "/etc/agentenv 750 root:agentenv",
        "/etc/agentenv/agentenv.env 600 root:root",
        "/etc/agentenv/users 640 root:agentenv",
    ], modes
    # The relay wants alice's token; the app's control ops want the control token.
    assert requests.get(native.cdp + "/json/version", timeout=10).status_code in (200, 401)
    assert requests.get(native.cdp + "/json/list", timeout=10).status_code == 401
    headers = {"Authorization": f"Bearer {native.alice}"}
    assert requests.get(native.cdp + "/json/list", headers=headers, timeout=10).status_code == 200


ETC = ["/etc/agentenv", "/etc/agentenv/agentenv.env", "/etc/agentenv/users"]


def test_a_second_install_keeps_the_tokens(native: Native) -> None:
    before = native.run("sha256sum", *ETC[1:])[1]
    output = native.install()
    assert native.run("sha256sum", *ETC[1:])[1] == before
    assert "writing" not in output
    assert _ready(native.api), "the running stack is untouched"


AGENT = textwrap.dedent(
    """
    import os
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["NATIVE_CDP"])
        page = next(p for p in browser.contexts[0].pages if p.url.startswith("{site}"))
        page.fill("#q", "native shoes")
        page.keyboard.press("Enter")
        page.goto("{site}/index.html?again=1")
        browser.close()
    with open(os.environ["AGENTENV_ANSWER_FILE"], "w") as f:
        f.write("done natively")
    """
).replace("{site}", SITE)


def test_playwright_the_log_and_a_recording(native: Native, tmp_path: Path) -> None:
    """``agentenv run`` attached by URL: the harness's store (moto on the
    Docker bridge) takes the recording from the native install."""
    (tmp_path / "agent.py").write_text(AGENT)
    task = {
        "envs": {"vm": {"versions": {1: {"browsers": ["main"]}}}},
        "steps": [
            {
                "type": "deploy_env",
                "env_id": "vm",
                "version": 1,
                "url": native.api,
                "cdp_url": native.cdp,
                "token": native.control,
            },
            {"type": "browser_open_tab", "env_id": "vm", "url": f"{SITE}/index.html"},
            {"type": "start_browser_recording", "env_id": "vm", "name": "native"},
            {"id": "agent", "type": "run_agent", "command": [sys.executable, "agent.py"]},
            {"type": "end_browser_recording", "env_id": "vm", "name": "native"},
        ],
    }
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(task))
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "run", "task.yaml", "--out", str(run)],
        capture_output=True,
        text=True,
        timeout=deadline(600),
        cwd=tmp_path,
        env={
            **_environment(),
            "NATIVE_CDP": f"{native.cdp}?token={native.alice}",
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert native.alice not in done.stdout + done.stderr
    meta = json.loads((run / "metadata.json").read_text())["steps"]
    assert meta["agent"]["answer"] == "done natively"
    recording = next(v for v in meta.values() if v["type"] == "end_browser_recording")
    assert recording["problems"] == []
    folder = run / "recordings" / recording["recording_id"]
    manifest = json.loads((folder / "manifest.json").read_text())
    kinds = [f["kind"] for f in manifest["frames"]]
    assert kinds[0] == "first" and kinds[-1] == "last" and "action" in kinds, kinds
    for frame in manifest["frames"]:
        assert (folder / frame["file"]).read_bytes()[:2] == b"\xff\xd8"
    # The log, in the machine's own folder: alice's actions under her name.
    code, text = native.run("sh", "-c", "cat /var/log/agentenv/browser-browser.jsonl")
    assert code == 0
    lines = [json.loads(x) for x in text.splitlines()]
    mine = [x["action"] for x in lines if x.get("action", {}).get("who") == "alice"]
    assert any("again=1" in json.dumps(a) for a in mine), mine[-5:]
    # Neither token is anywhere in the machine's log folder.
    written = native.log_bytes()
    assert native.alice.encode() not in written and native.control.encode() not in written


def _environment() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
