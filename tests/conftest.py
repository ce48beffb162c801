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
def image() -> str:
    """The amd64 image, built (or found up to date in the layer cache) once per run."""
    from tests.support.container import IMAGE, build, require_engine

    require_engine()
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    build("amd64")
    return IMAGE


@pytest.fixture(scope="session")
def s3_image() -> str:
    """The test S3 server's image (moto in server mode), built once per run by
    scripts/s3-image.sh (a no-op when it is up to date)."""
    import subprocess

    from tests.support.container import require_engine
    from tests.support.stack import ROOT
    from tests.support.timing import deadline

    require_engine()
    tag = os.environ.setdefault("AGENTENV_S3_IMAGE", "agentenv/test-s3:latest")
    done = subprocess.run(
        [str(ROOT / "scripts/s3-image.sh")],
        cwd=ROOT,
        timeout=deadline(1800),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/s3-image.sh failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return tag
