"""Computers as Docker Swarm services (``agentenv run --backend swarm``).

The swarm places each computer on one of its nodes; the harness reaches it
through the ports the swarm publishes (the routing mesh: any node's address
answers), here at 127.0.0.1. One service is one computer: one replica, never
restarted by the swarm behind the harness's back (a restarted computer would
be a new browser mid-task), removed at teardown.

Hardened as far as a swarm service can be on this engine (Docker 20.10, API
1.41): every capability dropped but SETUID, SETGID and KILL, a memory limit,
an init process, a 1 GiB ``/dev/shm``. Two settings of the container backend
are not in a service's spec here: ``no-new-privileges`` (API 1.44), and
tmpfs mounts owned by the image's users (a service's tmpfs takes a size and
a mode only), so the root file system stays writable and the programs keep
their homes in the image. The published ports answer on every node's
addresses, as the routing mesh does: the tokens are the door, so give the
computers users and a control token (the harness always sets the latter).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from agentenv.harness.computer import DEFAULT_IMAGE, Computer, ComputerError
from agentenv.harness.hardening import CAPABILITIES

__all__ = ["ServiceHandle", "deploy_service"]

#: How long the swarm may take to publish a new service's ports.
PUBLISH_S = 60.0


@dataclass
class ServiceHandle:
    """A service, as :meth:`Computer.stop` removes it."""

    service: Any

    def remove(self, force: bool = True) -> None:
        self.service.remove()


def _published(service: Any, target: int) -> int | None:
    service.reload()
    for port in service.attrs.get("Endpoint", {}).get("Ports", []) or []:
        if port.get("TargetPort") == target and port.get("PublishedPort"):
            return int(port["PublishedPort"])
    return None


def deploy_service(image: str | None, host: str = "127.0.0.1") -> Computer:
    """Start a computer as a one-replica swarm service and wait until it is ready."""
    import docker
    from docker.types import EndpointSpec, Mount, Resources, RestartPolicy

    control = secrets.token_urlsafe(24)
    name = f"agentenv-{secrets.token_hex(6)}"
    try:
        client = docker.from_env()
        service = client.services.create(
            image or DEFAULT_IMAGE,
            name=name,
            env=[f"AGENTENV_CONTROL_TOKEN={control}"],
            labels={"io.agentenv.harness": "1"},
            container_labels={"io.agentenv.harness": "1"},
            cap_drop=["ALL"],
            cap_add=list(CAPABILITIES),
            init=True,
            mounts=[Mount("/dev/shm", None, type="tmpfs", tmpfs_size=1024**3)],
            resources=Resources(mem_limit=3 * 1024**3),
            restart_policy=RestartPolicy(condition="none"),
            endpoint_spec=EndpointSpec(
                ports=[
                    {"Protocol": "tcp", "TargetPort": 9222},
                    {"Protocol": "tcp", "TargetPort": 8080},
                ]
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
            api_port, cdp_port = _published(service, 8080), _published(service, 9222)
            if api_port and cdp_port:
                api, cdp = f"http://{host}:{api_port}", f"http://{host}:{cdp_port}"
                break
            time.sleep(0.25)
        if api is None or cdp is None:
            raise ComputerError(f"the swarm did not publish {name}'s ports in {PUBLISH_S:.0f} s")
        computer = Computer(api, cdp, control, handle)
        computer.wait_ready(180)
        return computer
    except BaseException:
        handle.remove()
        raise
