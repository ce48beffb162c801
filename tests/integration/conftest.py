"""Container tests: the image is built once per test run (scripts/build.sh,
which reuses the engine's layer cache) and started with testcontainers.

testcontainers is imported inside fixtures (it calls the engine at import).
Without an engine these tests skip with the reason, unless
AGENTENV_REQUIRE_DOCKER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.stack import ROOT
from tests.support.timing import deadline

IMAGE = os.environ.get("AGENTENV_TEST_IMAGE", "agentenv/browser:latest")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.container)


def require_engine() -> None:
    try:
        ok = subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if ok:
        return
    reason = "no Docker engine answers: run scripts/engine.sh (make test does)"
    if os.environ.get("AGENTENV_REQUIRE_DOCKER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def build(arch: str) -> None:
    done = subprocess.run(
        [str(ROOT / "scripts/build.sh"), arch],
        cwd=ROOT,
        timeout=deadline(3600),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(
            f"scripts/build.sh {arch} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


@pytest.fixture(scope="session")
def image() -> str:
    require_engine()
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    build("amd64")
    return IMAGE


def start_computer(
    image: str, env: dict[str, str] | None = None, shared: Path | None = None
) -> Any:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    container = (
        DockerContainer(image)
        .with_exposed_ports(9222, 8080)
        .with_kwargs(shm_size="1g")
        .waiting_for(
            HttpWaitStrategy(8080, "/readyz")
            .for_status_code(200)
            .with_startup_timeout(int(deadline(120)))
        )
    )
    for key, value in (env or {}).items():
        container = container.with_env(key, value)
    if shared is not None:  # a host folder at the same path inside (file:// grants)
        container = container.with_volume_mapping(str(shared), str(shared), "rw")
    return container.start()


@pytest.fixture(scope="module")
def computer(image: str) -> Iterator[Any]:
    container = start_computer(image)
    try:
        yield container
    finally:
        container.stop()
