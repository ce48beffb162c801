from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.site import Site


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    with Site() as served:
        yield served


@pytest.fixture(scope="session")
def image(store_image: str) -> str:
    """The amd64 image, built (or found up to date in the layer cache) once per
    run, beside the run store's (what ``agentenv run`` starts for recordings)."""
    from tests.support.container import IMAGE, build, require_engine

    require_engine()
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    build("amd64")
    return IMAGE


@pytest.fixture(scope="session")
def store_image() -> str:
    """The run store's image (moto), built once per run by scripts/store-image.sh
    (a no-op when it is up to date). Its own program is the harness's guarded
    store; a test wanting plain moto runs it with ``PLAIN_S3``
    (tests/support/container.py)."""
    import subprocess

    from tests.support.container import require_engine
    from tests.support.stack import ROOT
    from tests.support.timing import deadline

    require_engine()
    tag = os.environ.setdefault("AGENTENV_STORE_IMAGE", "agentenv/store:latest")
    done = subprocess.run(
        [str(ROOT / "scripts/store-image.sh")],
        cwd=ROOT,
        timeout=deadline(1800),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/store-image.sh failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return tag
