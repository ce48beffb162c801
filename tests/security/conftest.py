"""The attack suite: every attack runs against the built image, started with
users (alice, bob) and a control token and hardened as compose runs it,
through real clients (raw WebSocket, Playwright, the mcp SDK). Each test
asserts that the attack failed, that the log holds the attempt with what the
guard did, and that no secret byte is anywhere under /var/log/agentenv."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.container import Computer, computer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.container)
            item.add_marker(pytest.mark.security)


@pytest.fixture(scope="module")
def target(image: str) -> Iterator[Computer]:
    """The computer under attack, with the test site served inside it."""
    with computer(image) as running:
        running.serve_site()
        yield running
