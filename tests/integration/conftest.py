"""Container tests: the image through testcontainers (tests/support/container.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentenv.harness.local_store import LocalStore


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.container)


@pytest.fixture(scope="session")
def lab() -> Iterator[Any]:
    """A Docker network of the tests' own, for computers the harness attaches to
    by URL: ``agentenv run --network <its name>`` puts the run's store on it."""
    import uuid

    import docker

    client = docker.from_env()
    network = client.networks.create(f"agentenv-test-lab-{uuid.uuid4().hex[:8]}")
    try:
        yield network
    finally:
        network.reload()
        for container in network.containers:
            network.disconnect(container, force=True)
        network.remove()


@pytest.fixture(scope="module")
def run_store(image: str) -> Iterator[LocalStore]:
    """The harness's own local store, as ``agentenv run`` starts it: its
    container, on a network of its own."""
    from agentenv.harness.local_store import start_container

    found = start_container(say=lambda _: None)
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(scope="module")
def run_network(run_store: LocalStore) -> Any:
    """The store's network (the docker SDK's), for a computer to join."""
    import docker

    return docker.from_env().networks.get(str(run_store.network))


@pytest.fixture(scope="module")
def swarm(image: str) -> Iterator[Any]:
    """This engine as a one-node swarm for a module (``docker swarm init``),
    left at the end unless it was one before; the harness's services removed."""
    import docker

    client = docker.from_env()
    state = client.info().get("Swarm", {}).get("LocalNodeState")
    ours = state != "active"
    if ours:
        client.swarm.init(advertise_addr="127.0.0.1", listen_addr="127.0.0.1:2377")
    try:
        yield client
    finally:
        for service in client.services.list(filters={"label": "io.agentenv.harness=1"}):
            service.remove()
        if ours:
            client.swarm.leave(force=True)
