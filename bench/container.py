"""Container start to the first successful CDP command through the relay.

Starts the built image (``agentenv/browser:latest``) a few times and times
``docker run`` to a ``Browser.getVersion`` answered through the published
relay port. Needs a Docker engine and the image (make image).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time

import aiohttp

from bench.stats import table
from tests.support.stack import free_port

IMAGE = "agentenv/browser:latest"
RUNS = 5


async def _first_command(port: int, deadline: float) -> float:
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(f"http://127.0.0.1:{port}/json/version") as answer:
                    if answer.status == 200:
                        url = (await answer.json())["webSocketDebuggerUrl"]
                        async with http.ws_connect(url) as ws:
                            await ws.send_json({"id": 1, "method": "Browser.getVersion"})
                            if (await ws.receive_json(timeout=10)).get("id") == 1:
                                return time.monotonic()
            except (aiohttp.ClientError, OSError, ValueError):
                pass
            await asyncio.sleep(0.02)
    raise TimeoutError("no CDP answer within 60 s")


def run() -> str:
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        return f"\n## container start\nskipped: no image {IMAGE} (run make image)"
    times = []
    for _ in range(RUNS):
        port = free_port()
        t = time.monotonic()
        cid = subprocess.run(
            ["docker", "run", "-d", "--rm", "--shm-size=1g", "-p", f"127.0.0.1:{port}:9222", IMAGE],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        try:
            done = asyncio.run(_first_command(port, t + 60))
            times.append(done - t)
        finally:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    rows = [
        [
            "docker run -> first CDP answer",
            f"{statistics.median(times):.2f} s",
            f"{min(times):.2f} s",
            f"{max(times):.2f} s",
            str(RUNS),
        ]
    ]
    return table("container start", ["case", "median", "min", "max", "runs"], rows)
