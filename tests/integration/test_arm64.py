"""arm64: the image builds for arm64 and, under qemu emulation, the relay
answers /json/version with Chromium's version. Slow (an emulated build and
an emulated Chromium); part of `make test`."""

from __future__ import annotations

import os
import subprocess

import pytest
import requests

from tests.support.container import build, require_engine
from tests.support.stack import free_port
from tests.support.timing import deadline, wait_for

pytestmark = pytest.mark.arm64

IMAGE_ARM64 = os.environ.get("AGENTENV_TEST_IMAGE_ARM64", "agentenv/browser:latest-arm64")


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
            "-p",
            f"127.0.0.1:{port}:9222",
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
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=deadline(60))
