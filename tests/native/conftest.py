from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import NativeStack, missing_tools

pytestmark = pytest.mark.native


def _require_tools() -> None:
    missing = missing_tools()
    if missing:
        pytest.skip(f"native stack needs {', '.join(missing)}: run `make test` (installs them)")


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    """One native stack for the session, no users configured."""
    _require_tools()
    with NativeStack(tmp_path_factory.mktemp("stack")) as running:
        yield running


@pytest.fixture(scope="module")
def authed_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    """A stack with users configured (alice, bob) and a control token."""
    _require_tools()
    env = {
        "AGENTENV_USERS": "alice:alice-token-123,bob:bob-token-456",
        "AGENTENV_CONTROL_TOKEN": "control-token-789",
        "AGENTENV_ALLOWED_ORIGINS": "http://allowed.example",
        "AGENTENV_ALLOWED_HOSTS": "computer.internal",
    }
    with NativeStack(tmp_path_factory.mktemp("authed"), extra_env=env) as running:
        yield running


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.native)
