"""The image as users run it (hardened, a user and a control token): how fast
it starts, how many start at once, what it costs idle.

- ``docker run`` to the first ``Browser.getVersion`` answered through the
  published relay port (median of a few runs);
- four computers started at once, to all four answering ``/readyz``;
- an idle computer's memory, from its cgroup (as ``docker stats`` shows it:
  usage less the inactive page cache), once ready and settled;
- each program's start inside the image: the import of its server module,
  timed in a fresh interpreter.

Needs a Docker engine and the image (make image).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
from typing import Any

import aiohttp

from agentenv.harness.hardening import docker_kwargs
from bench.stats import table

IMAGE = "agentenv/browser:latest"
RUNS = 5
AT_ONCE = 4
TOKEN = "bench-user-token"
ENV = {"AGENTENV_USERS": f"bench:{TOKEN}", "AGENTENV_CONTROL_TOKEN": "bench-control-token"}


def _start(docker: Any) -> Any:
    return docker.containers.run(
        IMAGE,
        detach=True,
        environment=ENV,
        ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
        **docker_kwargs(),
    )


def _port(container: Any, inside: int) -> int:
    """The host port published for ``inside`` (bounded: 5 s)."""
    for _ in range(500):
        container.reload()
        bound = container.attrs["NetworkSettings"]["Ports"].get(f"{inside}/tcp")
        if bound:
            return int(bound[0]["HostPort"])
        time.sleep(0.01)
    raise TimeoutError("no port published")


async def _first_command(port: int, deadline: float) -> float:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(f"http://127.0.0.1:{port}/json/version") as answer:
                    if answer.status == 200:
                        url = (await answer.json())["webSocketDebuggerUrl"]
                        async with http.ws_connect(url, headers=headers) as ws:
                            await ws.send_json({"id": 1, "method": "Browser.getVersion"})
                            if (await ws.receive_json(timeout=10)).get("id") == 1:
                                return time.monotonic()
            except (aiohttp.ClientError, OSError, ValueError):
                pass
            await asyncio.sleep(0.01)
    raise TimeoutError("no CDP answer within 60 s")


async def _ready(port: int, deadline: float) -> float:
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as answer:
                    if answer.status == 200:
                        return time.monotonic()
            except (aiohttp.ClientError, OSError):
                pass
            await asyncio.sleep(0.02)
    raise TimeoutError("not ready within the deadline")


def _first_answers(docker: Any) -> list[float]:
    times = []
    for _ in range(RUNS):
        t = time.monotonic()
        container = _start(docker)
        try:
            times.append(asyncio.run(_first_command(_port(container, 9222), t + 60)) - t)
        finally:
            container.remove(force=True, v=True)
    return times


def _at_once(docker: Any) -> float:
    t = time.monotonic()
    containers = [_start(docker) for _ in range(AT_ONCE)]
    try:
        ports = [_port(c, 8080) for c in containers]

        async def all_ready() -> list[float]:
            return list(await asyncio.gather(*(_ready(p, t + 120) for p in ports)))

        return max(asyncio.run(all_ready())) - t
    finally:
        for c in containers:
            c.remove(force=True, v=True)


def _idle_memory(docker: Any) -> tuple[float, dict[str, float]]:
    container = _start(docker)
    try:
        asyncio.run(_ready(_port(container, 8080), time.monotonic() + 60))
        time.sleep(5)  # settled: a measurement window, not a wait for an event
        stats = container.stats(stream=False)["memory_stats"]
        # As `docker stats` shows it: usage less the page cache it can drop.
        cache = stats.get("stats", {})
        used = stats["usage"] - cache.get("inactive_file", cache.get("total_inactive_file", 0))
        starts = {}
        for program, module in (
            ("relay", "agentenv.relay.relay_server"),
            ("app", "agentenv.app.app_server"),
            ("recorder", "agentenv.recorder.recorder_server"),
        ):
            code = f"import time; t = time.perf_counter(); import {module}; "
            code += "print(time.perf_counter() - t)"
            out = container.exec_run(
                ["/opt/agentenv/venv/bin/python", "-c", code], user="agentenv"
            ).output
            starts[program] = float(out.decode().strip().splitlines()[-1])
        return float(used) / (1024 * 1024), starts
    finally:
        container.remove(force=True, v=True)


def run() -> str:
    import docker as docker_sdk

    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        return f"\n## container start\nskipped: no image {IMAGE} (run make image)"
    docker = docker_sdk.from_env()
    first = _first_answers(docker)
    together = _at_once(docker)
    memory, starts = _idle_memory(docker)
    rows = [
        [
            "docker run -> first CDP answer (hardened, with users)",
            f"median {statistics.median(first):.2f} s",
            f"{min(first):.2f}-{max(first):.2f} s, {RUNS} runs",
        ],
        [f"{AT_ONCE} computers at once -> all /readyz", f"{together:.2f} s", ""],
        ["idle computer memory (cgroup, as docker stats)", f"{memory:.0f} MiB", ""],
        *[
            [f"{program} server import, in the image", f"{seconds:.2f} s", ""]
            for program, seconds in starts.items()
        ],
    ]
    return table("the image (hardened as compose runs it)", ["case", "figure", "notes"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
