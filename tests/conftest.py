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
