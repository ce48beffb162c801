"""How long the Swarm pool takes to grow by one computer (issue 41, item 5):
from the service's spec sent with one more replica (the pool's
``docker service scale``) to the new replica's ``/readyz`` answered, beside
its anchor in the same run, ``docker run`` of the same image to ``/readyz``
(hardened as the docker backend runs it), and ``docker run`` with a
replica's own settings (:func:`agentenv.harness.swarm.service_spec`'s: the
root file system writable, no tmpfs but ``/dev/shm``), which tells the
engine's part from the settings'.

A :class:`~agentenv.harness.swarm_pool.SwarmPool` at K = 1, [1, 2], margin
1.0, its scaler ticking every 0.2 s. Each round: one task holds the one
computer; a second asks (``acquire``), so the scaler wants two and sends the
spec; the bench polls the new replica's ``/readyz`` every 20 ms from when its
ports are published, and times the second task's wait too (what a task
sees: the scaler's tick and its own reading of ``/readyz`` included). Then
both let go and the pool drains back to one (not timed). The anchors run
between the rounds, so both share the machine's state.

What it found (2026-12-05, Docker 20.10.24): the replica's container starts
about as fast as ``docker run``'s, but Swarm lists its task ``starting``
(no ports) until the image's first HEALTHCHECK passes (``--interval=5s``):
while the pool waited for a running task, a grow took about 4 s more than
``docker run``'s ``/readyz``; reading the ports from the container, as it
now does (:meth:`~agentenv.harness.swarm_pool.SwarmPool._ports`), it takes
about the same.

The engine becomes a one-node swarm if it is not one (and leaves it at the
end). ``AGENTENV_BENCH_IMAGE`` picks the image (default agentenv/browser:latest).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import threading
import time
from typing import Any

from agentenv.harness.hardening import CAPABILITIES, MEMORY, SHM, docker_kwargs
from agentenv.harness.swarm_pool import Replica, SwarmPool
from bench.container import _port, _ready
from bench.stats import table

IMAGE = os.environ.get("AGENTENV_BENCH_IMAGE", "agentenv/browser:latest")
ROUNDS = 5
#: Every wait's bound (a replica's start, a drain).
WAIT_S = 180.0


class _Timed(SwarmPool):
    """The pool, each spec update's send time kept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (monotonic, wall clock, replicas) of each spec update sent.
        self.sent: list[tuple[float, float, int]] = []

    def _scale(self, replicas: int) -> None:
        self.sent.append((time.monotonic(), time.time(), replicas))
        super()._scale(replicas)


def _started(docker: Any, container: str) -> float:
    """The container's start (the engine's ``State.StartedAt``), wall clock."""
    import datetime

    stamp = docker.api.inspect_container(container)["State"]["StartedAt"]
    whole, _, rest = stamp.rstrip("Z").partition(".")
    at = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC)
    return at.timestamp() + float(f"0.{rest or 0}")


def _until(probe: Any, what: str, interval_s: float) -> Any:
    ends = time.monotonic() + WAIT_S
    while time.monotonic() < ends:
        found = probe()
        if found:
            return found
        time.sleep(interval_s)
    raise TimeoutError(f"{what}: not within {WAIT_S:.0f} s")


def _grow(pool: _Timed, docker: Any) -> tuple[float, float, float, float]:
    """One round: (spec sent -> the new replica's /readyz, spec sent -> its
    container started, spec sent -> its task running with its ports as the
    pool reads the service, a waiting task's acquire -> lent), in seconds."""
    held = pool.acquire(timeout_s=WAIT_S)
    known = set(pool.replicas)
    lent: list[float] = []
    asked = time.monotonic()

    def second() -> None:
        computer = pool.acquire(timeout_s=WAIT_S)
        lent.append(time.monotonic())
        pool.release(computer)

    waiting = threading.Thread(target=second, daemon=True)
    waiting.start()
    sent, wall = _until(
        lambda: next(((t, w) for t, w, n in pool.sent if t >= asked and n == 2), None),
        "the spec",
        0.01,
    )

    def published() -> Replica | None:
        for key, replica in list(pool.replicas.items()):
            if key not in known and replica.computer is not None and replica.container:
                return replica
        return None

    new: Replica = _until(published, "the new replica's ports", 0.01)
    seen = time.monotonic()
    assert new.computer is not None
    _until(new.computer.ready, "the new replica's /readyz", 0.02)
    ready = time.monotonic()
    started = _started(docker, new.container) - wall
    waiting.join(timeout=WAIT_S)
    pool.release(held)
    _until(
        lambda: [r.state for r in list(pool.replicas.values())] == ["ready"],
        "the pool to drain back to one",
        0.2,
    )
    return ready - sent, started, seen - sent, lent[0] - asked


#: A replica's own settings as ``docker run`` takes them (swarm.service_spec's:
#: the root file system writable, no tmpfs but /dev/shm, an init process).
AS_A_REPLICA = {
    "shm_size": SHM,
    "cap_drop": ["ALL"],
    "cap_add": list(CAPABILITIES),
    "init": True,
    "mem_limit": MEMORY,
}


def _docker_run(docker: Any, env: dict[str, str], settings: dict[str, Any]) -> tuple[float, float]:
    """``docker run`` -> /readyz, and -> its container started, in seconds."""
    began, wall = time.monotonic(), time.time()
    container = docker.containers.run(
        IMAGE,
        detach=True,
        environment=env,
        ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
        **settings,
    )
    try:
        ready = asyncio.run(_ready(_port(container, 8080), began + WAIT_S)) - began
        return ready, _started(docker, container.id) - wall
    finally:
        container.remove(force=True, v=True)


def run() -> str:
    import docker as docker_sdk

    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        return f"\n## swarm grow\nskipped: no image {IMAGE} (run make image)"
    docker = docker_sdk.from_env()
    ours = docker.info().get("Swarm", {}).get("LocalNodeState") != "active"
    if ours:
        docker.swarm.init(advertise_addr="127.0.0.1", listen_addr="127.0.0.1:2377")
    grows: list[tuple[float, float, float, float]] = []
    anchors: list[tuple[float, float]] = []
    replicas: list[tuple[float, float]] = []
    try:
        pool = _Timed(IMAGE, k=1, least=1, most=2, margin=1.0, interval_s=0.2)
        with pool:
            pool.start(timeout_s=WAIT_S)
            for _ in range(ROUNDS):
                anchors.append(_docker_run(docker, pool.env, docker_kwargs()))
                replicas.append(_docker_run(docker, pool.env, AS_A_REPLICA))
                grows.append(_grow(pool, docker))
    finally:
        if ours:
            docker.swarm.leave(force=True)
    spec = [g[0] for g in grows]
    anchor = [a[0] for a in anchors]

    def shown(values: list[float]) -> str:
        return f"median {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"

    rows = [
        [
            "the pool grows by one: spec sent -> the new replica's /readyz",
            shown(spec),
            f"{statistics.median(spec) / statistics.median(anchor):.2f}x docker run's",
        ],
        ["  spec sent -> its container started", shown([g[1] for g in grows]), ""],
        [
            "  spec sent -> its ports read by the pool (its 0.2 s reading)",
            shown([g[2] for g in grows]),
            "",
        ],
        [
            "a task waiting for it: acquire -> lent (the scaler's 0.2 s tick included)",
            shown([g[3] for g in grows]),
            "",
        ],
        ["anchor: docker run -> /readyz (hardened, as the docker backend)", shown(anchor), ""],
        ["  of which: docker run -> its container started", shown([a[1] for a in anchors]), ""],
        [
            "docker run -> /readyz with a replica's settings (root writable, no tmpfs)",
            shown([r[0] for r in replicas]),
            "",
        ],
    ]
    load = os.getloadavg()[0]
    return table(
        f"swarm grow ({ROUNDS} rounds, load average {load:.1f})", ["case", "figure", "notes"], rows
    )


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
