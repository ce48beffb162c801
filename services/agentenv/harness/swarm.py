"""Computers as Docker Swarm services (``agentenv run --backend swarm``).

The swarm places each computer on one of its nodes; the harness reaches it at
that node's address, on the ports the node picked (host-mode publishing: on
this machine the routing mesh's ingress did not answer, and a computer is one
task on one node anyway). One service is one computer: one replica, never
restarted by the swarm behind the harness's back (a restarted computer would
be a new browser mid-task), removed at teardown.

Hardened as far as a swarm service can be on this engine (Docker 20.10, API
1.41): every capability dropped but SETUID, SETGID and KILL, a memory limit,
an init process, and the budget's ``/dev/shm`` and memory limit
(:mod:`agentenv.harness.hardening`). Two settings of the container backend
are not in a service's spec here: ``no-new-privileges`` (API 1.44), and
tmpfs mounts owned by the image's users (a service's tmpfs takes a size and
a mode only), so the root file system stays writable and the programs keep
their homes in the image. The published ports answer on every address of
the node: the tokens are the door, so give the computers users and a control
token (the harness always sets the latter).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from agentenv.harness.computer import DEFAULT_IMAGE, Computer, ComputerError, users_setting
from agentenv.harness.engine import HARNESS_LABEL
from agentenv.harness.hardening import CAPABILITIES, MEMORY, SHM, size_bytes

__all__ = ["ServiceHandle", "deploy_service", "service_spec"]

#: How long the swarm may take to publish a new service's ports.
PUBLISH_S = 60.0


@dataclass
class ServiceHandle:
    """A service, as :meth:`Computer.stop` removes it."""

    service: Any

    def remove(self, force: bool = True, v: bool = True) -> None:
        """Remove the service; the swarm removes its task's container with its
        anonymous volumes (``force`` and ``v`` are a container's, for one call)."""
        self.service.remove()


def service_spec(
    name: str, env: dict[str, str], networks: list[str] | None, replicas: int = 1
) -> dict[str, Any]:
    """The docker SDK's ``services.create`` keywords for computers named
    ``name`` (``replicas`` of them) with ``env``: hardened as far as a service
    can be here (the module's docstring), labelled as the harness's, never
    restarted by the swarm, both ports published in host mode on ports the
    node picks."""
    from docker.types import EndpointSpec, Mount, Resources, RestartPolicy, ServiceMode

    return {
        "name": name,
        "env": [f"{key}={value}" for key, value in env.items()],
        "labels": {HARNESS_LABEL: "1"},
        "container_labels": {HARNESS_LABEL: "1"},
        "networks": list(networks or []),
        "cap_drop": ["ALL"],
        "cap_add": list(CAPABILITIES),
        "init": True,
        "mounts": [Mount("/dev/shm", None, type="tmpfs", tmpfs_size=size_bytes(SHM))],
        "resources": Resources(mem_limit=size_bytes(MEMORY)),
        "restart_policy": RestartPolicy(condition="none"),
        "mode": ServiceMode("replicated", replicas=replicas),
        "endpoint_spec": EndpointSpec(
            ports=[
                {"Protocol": "tcp", "TargetPort": 9222, "PublishMode": "host"},
                {"Protocol": "tcp", "TargetPort": 8080, "PublishMode": "host"},
            ]
        ),
    }


def _published(client: Any, service: Any, target: int) -> tuple[str, int] | None:
    """Where the running task of ``service`` publishes ``target``: its node's
    address and the port the node picked (host-mode publishing)."""
    for task in service.tasks(filters={"desired-state": "running"}):
        status = task.get("Status", {})
        for port in status.get("PortStatus", {}).get("Ports", []) or []:
            if port.get("TargetPort") == target and port.get("PublishedPort"):
                node = client.nodes.get(task["NodeID"]).attrs.get("Status", {})
                return str(node.get("Addr") or "127.0.0.1"), int(port["PublishedPort"])
    return None


def _reach(node: str, local: str) -> str:
    """A node's address as the harness dials it (this machine's own: ``local``)."""
    return local if node in ("127.0.0.1", "0.0.0.0", "") else node


def deploy_service(
    image: str | None,
    host: str = "127.0.0.1",
    agents: dict[str, str] | None = None,
    networks: list[str] | None = None,
    settings: dict[str, str] | None = None,
) -> Computer:
    """Start a computer as a one-replica swarm service on ``networks`` (the run
    store's overlay, ``--network``), with more ``settings`` in its
    environment, and wait until it is ready."""
    import docker

    control = secrets.token_urlsafe(24)
    name = f"agentenv-{secrets.token_hex(6)}"
    try:
        client = docker.from_env()
        service = client.services.create(
            image or DEFAULT_IMAGE,
            **service_spec(
                name,
                {
                    **(settings or {}),
                    "AGENTENV_CONTROL_TOKEN": control,
                    "AGENTENV_USERS": users_setting(agents),
                },
                networks,
            ),
        )
    except Exception as exc:  # the docker SDK's: not a swarm manager, image missing
        raise ComputerError(
            f"cannot start {image or DEFAULT_IMAGE} as a swarm service: {exc} "
            "(docker swarm init makes this engine a one-node swarm)"
        ) from None
    handle = ServiceHandle(service)
    try:
        ends = time.monotonic() + PUBLISH_S
        api = cdp = None
        while time.monotonic() < ends:
            at_api, at_cdp = _published(client, service, 8080), _published(client, service, 9222)
            if at_api and at_cdp:
                api = f"http://{_reach(at_api[0], host)}:{at_api[1]}"
                cdp = f"http://{_reach(at_cdp[0], host)}:{at_cdp[1]}"
                break
            time.sleep(0.25)
        if api is None or cdp is None:
            raise ComputerError(f"the swarm did not publish {name}'s ports in {PUBLISH_S:.0f} s")
        computer = Computer(api, cdp, control, handle, dict(agents or {}))
        computer.wait_ready(180)
        return computer
    except BaseException:
        handle.remove()
        raise
