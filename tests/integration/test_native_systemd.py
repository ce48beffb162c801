"""``scripts/install-native.sh`` on a machine where systemd runs, as on a VM.

A ``debian:bookworm-slim`` container with Debian's systemd as its first
process (``/sbin/init``) stands for the VM. The install runs as a user runs
it (tokens from the environment, no ``--no-start``). Then, under systemd
itself:

- the unit is enabled and started, and the install waited for ``/readyz``;
- every program runs under the unit's limits (capability bounding set,
  no-new-privileges);
- the journal holds the programs' output;
- a program killed with SIGKILL comes back (supervisord); so does the whole
  service when its main process is killed (``Restart=on-failure``);
- ``systemctl stop`` leaves nothing running.

systemd needs ``CAP_SYS_ADMIN`` and the host's cgroup tree in the container
(``--privileged`` is refused by this machine's engine and is not needed).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.support.stack import ROOT
from tests.support.timing import deadline, wait_for

BASE = "debian:bookworm-slim"
#: The base with Debian's systemd: made once from BASE and kept.
SYSTEMD_BASE = "agentenv/systemd-test:bookworm"
LABEL = {"io.agentenv.test": "native-systemd"}
#: CAP_KILL (5), CAP_SETGID (6), CAP_SETUID (7): the unit's bounding set.
BOUNDING = f"{(1 << 5) | (1 << 6) | (1 << 7):016x}"
PROGRAMS = ("agentenv-relay", "agentenv-app", "agentenv-recorder")


def _run(container: Any, *command: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    code, output = container.exec_run(list(command), environment=env or {})
    return int(code), output.decode(errors="replace")


def _systemd_base(client: Any) -> str:
    import docker

    try:
        client.images.get(SYSTEMD_BASE)
        return SYSTEMD_BASE
    except docker.errors.ImageNotFound:  # not there yet: make it
        pass
    builder = client.containers.run(BASE, ["sleep", "infinity"], detach=True, labels=LABEL)
    try:
        code, output = _run(
            builder,
            "sh",
            "-c",
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive "
            "apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus",
        )
        assert code == 0, output[-3000:]
        repository, tag = SYSTEMD_BASE.split(":")
        builder.commit(repository=repository, tag=tag)
    finally:
        builder.remove(force=True)
    return SYSTEMD_BASE


class Machine:
    def __init__(self, container: Any, control: str, alice: str, said: str) -> None:
        self.container, self.control, self.alice, self.said = container, control, alice, said
        container.reload()
        port = container.attrs["NetworkSettings"]["Ports"]["8080/tcp"][0]["HostPort"]
        self.api = f"http://127.0.0.1:{port}"

    def run(self, *command: str) -> tuple[int, str]:
        return _run(self.container, *command)

    def sh(self, script: str) -> str:
        code, output = self.run("sh", "-c", script)
        assert code == 0, output[-3000:]
        return output.strip()

    def show(self, prop: str) -> str:
        return self.sh(f"systemctl show agentenv.service -p {prop} --value")

    def pids(self, user: str, pattern: str) -> list[int]:
        code, output = self.run("pgrep", "-u", user, "-f", pattern)
        return [int(p) for p in output.split()] if code == 0 else []

    def ready(self) -> bool:
        try:
            return requests.get(self.api + "/readyz", timeout=5).status_code == 200
        except requests.RequestException:
            return False


@pytest.fixture(scope="module")
def machine(image: str) -> Iterator[Machine]:
    """``image`` only makes sure the wheelhouse exists (scripts/build.sh)."""
    import docker

    client = docker.from_env()
    cgroup_v2 = str(client.info().get("CgroupVersion")) == "2"
    container = client.containers.run(
        _systemd_base(client),
        ["/sbin/init"],
        detach=True,
        labels=LABEL,
        cap_add=["SYS_ADMIN"],
        security_opt=["seccomp=unconfined"],
        tmpfs={"/run": "", "/run/lock": ""},
        # systemd keeps its own cgroup tree: on cgroup v1 the host's, read
        # only, is enough; on v2 it needs the host's namespace, writable.
        cgroupns="host" if cgroup_v2 else None,
        volumes={
            "/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw" if cgroup_v2 else "ro"},
            str(ROOT): {"bind": "/src", "mode": "ro"},
            str(ROOT / "build" / "wheels" / "amd64"): {"bind": "/wheels", "mode": "ro"},
        },
        ports={"8080/tcp": ("127.0.0.1", None)},
    )
    try:

        def booted() -> bool:
            state = _run(container, "systemctl", "is-system-running")[1].strip()
            return state in ("running", "degraded")

        wait_for(booted, "systemd to finish booting in the container", timeout_s=deadline(60))
        control, alice = (f"{who}-{secrets.token_hex(12)}" for who in ("ctl", "alice"))
        code, said = _run(
            container,
            "bash",
            "/src/scripts/install-native.sh",
            "--wheels",
            "/wheels",
            env={"AGENTENV_CONTROL_TOKEN": control, "AGENTENV_USERS": f"alice:{alice}"},
        )
        assert code == 0, said[-4000:]
        yield Machine(container, control, alice, said)
    finally:
        container.remove(force=True, v=True)


def test_the_install_starts_an_enabled_service_that_answers(machine: Machine) -> None:
    assert "ready: the relay on :9222" in machine.said, machine.said[-2000:]
    assert "curl:" not in machine.said  # the wait for /readyz says nothing while it waits
    for secret in (machine.control, machine.alice):
        assert secret not in machine.said
    assert machine.sh("systemctl is-enabled agentenv.service") == "enabled"
    assert machine.sh("systemctl is-active agentenv.service") == "active"
    assert machine.ready()
    tabs = machine.api + "/v1/browser/tabs/list"
    assert requests.post(tabs, json={}, timeout=10).status_code == 401
    headers = {"Authorization": f"Bearer {machine.alice}"}
    assert requests.post(tabs, json={}, headers=headers, timeout=10).status_code == 200
    # The supervisord Debian's package enables is off: the unit runs its own.
    assert machine.run("systemctl", "is-active", "supervisor.service")[1].strip() == "inactive"
    assert machine.run("systemctl", "is-enabled", "supervisor.service")[1].strip() == "disabled"


def test_every_program_runs_under_the_units_limits(machine: Machine) -> None:
    main = int(machine.show("MainPID"))
    programs = {name: machine.pids("agentenv", f"venv/bin/{name}") for name in PROGRAMS}
    chromium = machine.pids("browser", "/usr/lib/chromium/chromium")
    assert all(len(p) == 1 for p in programs.values()) and chromium, (programs, chromium)
    for pid in [main, *(p[0] for p in programs.values()), chromium[0]]:
        status = machine.sh(f"cat /proc/{pid}/status")
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        assert fields["CapBnd"].strip() == BOUNDING, (pid, fields["CapBnd"])
        assert fields["NoNewPrivs"].strip() == "1", pid
    cgroup = machine.sh(f"cat /proc/{programs['agentenv-relay'][0]}/cgroup")
    assert "agentenv.service" in cgroup, cgroup


def test_the_journal_holds_the_programs_output(machine: Machine) -> None:
    def journal_of(line: str) -> str | None:
        journal = machine.sh("journalctl -u agentenv.service --no-pager -o cat")
        return journal if line in journal else None

    # supervisord says RUNNING startsecs after the start, and /readyz can
    # answer before that: both lines are waited for (seen in CI without).
    wait_for(
        lambda: journal_of("agentenv.relay: writing the action log to"),
        "the relay's first line in the journal",
        interval_s=0.5,
    )
    journal = wait_for(
        lambda: journal_of("success: relay entered RUNNING state"),
        "supervisord's word that the relay runs, in the journal",
        interval_s=0.5,
    )
    for secret in (machine.control, machine.alice):
        assert secret not in journal


def test_killed_programs_come_back(machine: Machine) -> None:
    # One program: supervisord starts it again, the service stays up.
    (relay,) = machine.pids("agentenv", "venv/bin/agentenv-relay")
    machine.sh(f"kill -9 {relay}")

    def relay_back() -> bool:
        now = machine.pids("agentenv", "venv/bin/agentenv-relay")
        return bool(now) and now != [relay] and machine.ready()

    wait_for(relay_back, "supervisord to start the relay again", timeout_s=deadline(60))
    assert machine.show("NRestarts") == "0"
    # The service's main process: systemd starts the service again.
    main = machine.show("MainPID")
    machine.sh(f"kill -9 {main}")

    def service_back() -> bool:
        return machine.show("MainPID") not in ("0", main) and machine.ready()

    wait_for(service_back, "systemd to restart agentenv.service", timeout_s=deadline(90))
    assert machine.show("NRestarts") == "1"
    assert machine.sh("systemctl is-active agentenv.service") == "active"


def test_stop_leaves_nothing_running(machine: Machine) -> None:
    began = time.monotonic()
    machine.sh("systemctl stop agentenv.service")
    assert time.monotonic() - began < 60
    assert machine.run("systemctl", "is-active", "agentenv.service")[1].strip() == "inactive"
    left = machine.run("ps", "-o", "user=,args=", "-u", "agentenv,browser")[1].strip()
    assert left == "", left
    assert not machine.ready()
