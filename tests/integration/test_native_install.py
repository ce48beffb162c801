"""``scripts/install-native.sh`` in a plain ``debian:bookworm-slim`` container:
the install (three times: no tokens, given tokens, other tokens kept out),
then a machine started from the image it made, hardened as compose runs the
image, with tokens from its environment and a socket for the launcher's
output (as systemd gives one): who runs what, the files' modes, which tokens
open the door, Playwright through the relay, the log, and a recording through
``agentenv run`` and the run's store.

The container stands for a VM or a Modal image: nothing of the browser image
is used but its wheelhouse (pip cannot reach the package index from a
container here; ``--wheels`` is the offline path users have too). Debian's
packages come from its mirror, as on a VM. systemd itself does not run here.
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


#: The container's command: the launcher with a socket for its output, as
#: systemd gives a service (journald's stream), drained into a file.
JOURNALD = textwrap.dedent(
    """
    import socket, subprocess, sys
    ours, theirs = socket.socketpair()
    command = ["/opt/agentenv/bin/agentenv-computer"]
    launcher = subprocess.Popen(command, stdout=theirs, stderr=theirs)
    theirs.close()
    with open("/tmp/journal.log", "ab") as journal:
        while data := ours.recv(65536):
            journal.write(data)
            journal.flush()
    sys.exit(launcher.wait())
    """
)

ETC = [
    "/etc/agentenv",
    "/etc/agentenv/agentenv.env",
    "/etc/agentenv/control-token",
    "/etc/agentenv/users",
]


def _run(
    container: Any, *command: str, env: dict[str, str] | None = None, user: str = "root"
) -> tuple[int, str]:
    code, output = container.exec_run(list(command), environment=env or {}, user=user)
    return int(code), output.decode(errors="replace")


def _install(container: Any, env: dict[str, str] | None = None) -> str:
    code, output = _run(
        container,
        "bash",
        "/src/scripts/install-native.sh",
        "--wheels",
        "/wheels",
        "--no-start",
        env=env,
    )
    assert code == 0, output[-4000:]
    return output


class Native:
    """A machine started from the image the install made (as Modal starts one)."""

    def __init__(
        self, container: Any, control: str, alice: str, bob: str, said: str, network: str
    ) -> None:
        self.container, self.control, self.alice, self.bob = container, control, alice, bob
        self.said = said  # what the installs printed
        self.network = network  # the Docker network it is on
        container.reload()
        ports = container.attrs["NetworkSettings"]["Ports"]
        self.api = f"http://127.0.0.1:{ports['8080/tcp'][0]['HostPort']}"
        self.cdp = f"http://127.0.0.1:{ports['9222/tcp'][0]['HostPort']}"

    def run(self, *command: str, user: str = "root") -> tuple[int, str]:
        return _run(self.container, *command, user=user)

    def log_bytes(self) -> bytes:
        """Every byte under the log folder (read as its owner: root has no
        DAC_OVERRIDE here) and of the journal."""
        found = b""
        for user, where in (("agentenv", "/var/log/agentenv"), ("root", "/tmp/journal.log")):
            code, output = self.container.exec_run(
                ["find", where, "-type", "f", "-exec", "cat", "{}", "+"], user=user
            )
            assert code == 0, bytes(output)[-500:].decode(errors="replace")
            found += bytes(output)
        return found


@pytest.fixture(scope="module")
def native(image: str) -> Iterator[Native]:
    """Installed in a plain container (``image`` only makes sure the base
    image and the wheelhouse exist: scripts/build.sh makes both), committed
    as an image, and started from it hardened as compose runs the image, with
    tokens from the environment."""
    import docker

    client = docker.from_env()
    control, alice, bob = (f"{who}-{secrets.token_hex(12)}" for who in ("ctl", "alice", "bob"))
    builder = client.containers.run(
        BASE,
        ["sleep", "infinity"],
        detach=True,
        init=True,
        labels={"io.agentenv.test": "native-install"},
        volumes={
            str(ROOT): {"bind": "/src", "mode": "ro"},
            str(ROOT / "build" / "wheels" / "amd64"): {"bind": "/wheels", "mode": "ro"},
        },
    )
    built = None
    try:
        # An image to be copied: no tokens are made, and the launcher refuses to start.
        said = _install(builder)
        assert _run(builder, "ls", "/etc/agentenv")[1].split() == ["agentenv.env"], said
        # Debian's own supervisord (enabled by its package) will not start
        # where this image boots under systemd: the unit runs its own.
        wants = "/etc/systemd/system/multi-user.target.wants/supervisor.service"
        assert _run(builder, "test", "-e", wants)[0] == 1, said
        code, refused = _run(builder, "/opt/agentenv/bin/agentenv-computer")
        assert code == 1 and "no control token" in refused, refused
        # Given tokens are written; given again, others are not taken.
        said += _install(
            builder, {"AGENTENV_CONTROL_TOKEN": control, "AGENTENV_USERS": f"alice:{alice}"}
        )
        before = _run(builder, "sha256sum", *ETC[1:])[1]
        again = _install(
            builder,
            {"AGENTENV_CONTROL_TOKEN": "x" * 32, "AGENTENV_USERS": f"alice:{'y' * 20}"},
        )
        assert "kept the control token" in again and "kept the users" in again, again
        assert _run(builder, "sha256sum", *ETC[1:])[1] == before
        said += again
        built = builder.commit(repository="agentenv/native-test", tag=uuid.uuid4().hex[:8])
    finally:
        builder.remove(force=True)
    hardening = {
        "cap_drop": ["ALL"],
        "cap_add": ["SETUID", "SETGID", "KILL"],
        "security_opt": ["no-new-privileges"],
    }
    # The VM's network: the harness's store joins it (agentenv run --network).
    network = client.networks.create(f"agentenv-test-vm-{uuid.uuid4().hex[:8]}")
    container = client.containers.run(
        built.id,
        ["python3", "-c", JOURNALD],
        detach=True,
        init=True,
        network=network.name,
        labels={"io.agentenv.test": "native-install"},
        # bob's token replaces the users file; an empty control token is ignored.
        environment={"AGENTENV_USERS": f"bob:{bob}", "AGENTENV_CONTROL_TOKEN": ""},
        ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
        **hardening,
    )
    try:
        found = Native(container, control, alice, bob, said, network.name)
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
        container.remove(force=True, v=True)
        network.remove()
        client.images.remove(built.id, force=True)


def _ready(api: str) -> bool:
    try:
        return requests.get(api + "/readyz", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def test_the_stack_runs_as_in_the_image(native: Native) -> None:
    for secret in (native.control, native.alice, native.bob):
        assert secret not in native.said
    code, listing = native.run("ps", "-eo", "user:12,args")
    assert code == 0
    for program in ("agentenv-relay", "agentenv-app", "agentenv-recorder"):
        owners = {line.split()[0] for line in listing.splitlines() if program in line}
        assert owners == {"agentenv"}, (program, owners)
    chromium = {line.split()[0] for line in listing.splitlines() if "/chromium/chromium" in line}
    assert chromium == {"browser"}
    code, modes = native.run("stat", "-c", "%n %a %U:%G", *ETC)
    assert modes.split("\n")[:4] == [
        "/etc/agentenv 750 root:agentenv",
        "/etc/agentenv/agentenv.env 644 root:root",
        "/etc/agentenv/control-token 600 root:root",
        "/etc/agentenv/users 640 root:agentenv",
    ], modes
    # The programs' output reached the launcher's socket (supervisord cannot
    # open a socket as /dev/stdout: the launcher gives it a pipe).
    journal = native.run("cat", "/tmp/journal.log")[1]
    assert "agentenv.relay: writing the action log to" in journal, journal[-2000:]


def test_tokens_from_the_environment_win_and_empty_ones_do_not(native: Native) -> None:
    assert requests.get(native.cdp + "/json/version", timeout=10).status_code == 200
    assert requests.get(native.cdp + "/json/list", timeout=10).status_code == 401

    def listed(token: str) -> int:
        headers = {"Authorization": f"Bearer {token}"}
        return requests.get(native.cdp + "/json/list", headers=headers, timeout=10).status_code

    assert listed(native.bob) == 200  # AGENTENV_USERS given at start
    assert listed(native.alice) == 401  # the users file it replaced
    # The empty AGENTENV_CONTROL_TOKEN was ignored: the file's token holds.
    log = requests.post(
        native.api + "/v1/browser/log",
        json={"after": 0, "limit": 1},
        headers={"Authorization": f"Bearer {native.control}"},
        timeout=10,
    )
    assert log.status_code == 200, log.text
    assert requests.post(native.api + "/v1/browser/log", json={}, timeout=10).status_code == 401


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
    """``agentenv run`` attached by URL: the harness's store, joined to the
    machine's network (``--network``), takes the recording from the native
    install; without ``--network`` the run stops before deploying, saying so."""
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
    refused = subprocess.run(
        [sys.executable, "-m", "agentenv", "run", "task.yaml", "--out", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        timeout=deadline(120),
        cwd=tmp_path,
        env=_environment(),
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "give --network NAME" in refused.stderr and "nothing was deployed" in refused.stderr
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "agentenv", "run", "task.yaml", "--out", str(run)),
            *("--network", native.network),
        ],
        capture_output=True,
        text=True,
        timeout=deadline(600),
        cwd=tmp_path,
        env={
            **_environment(),
            "NATIVE_CDP": f"{native.cdp}?token={native.bob}",
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert native.bob not in done.stdout + done.stderr
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
    # The log, in the machine's own folder: bob's actions under his name.
    # (Read as its owner: root has no DAC_OVERRIDE in this container.)
    code, text = native.run("cat", "/var/log/agentenv/browser-browser.jsonl", user="agentenv")
    assert code == 0, text[-500:]
    lines = [json.loads(x) for x in text.splitlines()]
    mine = [x["action"] for x in lines if x.get("action", {}).get("who") == "bob"]
    assert any("again=1" in json.dumps(a) for a in mine), mine[-5:]
    # No token is anywhere in the machine's log folder or its journal.
    written = native.log_bytes()
    for secret in (native.alice, native.bob, native.control):
        assert secret.encode() not in written


def _environment() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
