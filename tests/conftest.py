from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.site import Site


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    with Site() as served:
        yield served
