"""A task-ready browser (issue 41, item 2): from ``scopes/open`` to the
agent's first CDP command answered on its tab, against the built image
(hardened, a control token, ``AGENTENV_MAX_SCOPES``), in one run beside its
anchors:

- **warm**: the image's default warm scopes (``AGENTENV_WARM_SCOPES``); each
  open waits first (bounded) until the pool is full again, as a task that
  follows another finds it;
- **cold**: the same image with ``AGENTENV_WARM_SCOPES=0`` (every open makes
  its context, tab and renderer);
- **burst**: as many opens at once as scopes may be open, on the warm
  computer: past the pool the rest are made cold;
- anchors: ``data/reset`` on the warm computer, and ``docker run`` to
  ``/readyz``.

One iteration: ``POST /v1/browser/scopes/open`` (a kept-alive HTTP
connection, as a harness holds one), a new WebSocket to the relay with the
minted token, ``Target.getTargets``, ``Target.attachToTarget`` (flatten) on
its one tab, ``Runtime.evaluate``; each step is timed too, so where the
time goes is measured, not guessed. The scope is closed after, untimed.
Also: a warm scope's memory (the cgroup's, warm computer less cold one,
both idle, over the pool's size) and the machine's load average.

``AGENTENV_BENCH_IMAGE`` picks the image (default agentenv/browser:latest).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import subprocess
import time
from typing import Any

import aiohttp

from agentenv.harness.hardening import docker_kwargs
from bench.container import _port
from bench.stats import percentile, table

IMAGE = os.environ.get("AGENTENV_BENCH_IMAGE", "agentenv/browser:latest")
CONTROL = "bench-control-token-ready"
MAX_SCOPES = 4
WARM_RUNS = int(os.environ.get("AGENTENV_BENCH_READY_RUNS", "200"))
COLD_RUNS = 40
RESETS = 20
STARTS = 3
STEPS = ("open", "connect", "getTargets", "attach", "evaluate")


def _start(docker: Any, warm: int | None) -> Any:
    """A hardened computer; ``warm``: AGENTENV_WARM_SCOPES (None: the image's default)."""
    env = {"AGENTENV_CONTROL_TOKEN": CONTROL, "AGENTENV_MAX_SCOPES": str(MAX_SCOPES)}
    if warm is not None:
        env["AGENTENV_WARM_SCOPES"] = str(warm)
    return docker.containers.run(
        IMAGE,
        detach=True,
        environment=env,
        ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
        **docker_kwargs(),
    )


async def _ready(http: aiohttp.ClientSession, app: int, deadline: float) -> float:
    while time.monotonic() < deadline:
        try:
            async with http.get(f"http://127.0.0.1:{app}/readyz") as answer:
                if answer.status == 200:
                    return time.monotonic()
        except (aiohttp.ClientError, OSError):
            pass
        await asyncio.sleep(0.02)
    raise TimeoutError("not ready within the deadline")


async def _warm_ready(http: aiohttp.ClientSession, app: int, want: int) -> None:
    """Wait (bounded) until ``want`` warm scopes are ready (/metrics)."""
    headers = {"Authorization": f"Bearer {CONTROL}"}
    end = time.monotonic() + 30
    while time.monotonic() < end:
        async with http.get(f"http://127.0.0.1:{app}/metrics", headers=headers) as answer:
            for line in (await answer.text()).splitlines():
                if line.startswith("agentenv_scopes_warm ") and float(line.split()[1]) >= want:
                    return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"the warm pool did not reach {want} within 30 s")


async def _op(http: aiohttp.ClientSession, app: int, op: str, body: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {CONTROL}"}
    url = f"http://127.0.0.1:{app}/v1/browser/{op}"
    async with http.post(url, json=body, headers=headers) as answer:
        if answer.status != 200:
            raise RuntimeError(f"{op}: {answer.status} {(await answer.text())[:300]}")
        return await answer.json()


async def _task_ready(http: aiohttp.ClientSession, app: int, relay: int) -> tuple[str, list[float]]:
    """One scope opened and its tab's first Runtime.evaluate answered: the
    scope's name and each step's seconds."""
    marks = [time.perf_counter()]
    made = await _op(http, app, "scopes/open", {})
    marks.append(time.perf_counter())
    url = f"ws://127.0.0.1:{relay}/devtools/browser?token={made['token']}"
    ids = itertools.count(1)
    async with http.ws_connect(url, max_msg_size=0, compress=0) as ws:
        marks.append(time.perf_counter())

        async def call(method: str, params: dict[str, Any], session: str | None = None) -> Any:
            n = next(ids)
            message: dict[str, Any] = {"id": n, "method": method, "params": params}
            if session is not None:
                message["sessionId"] = session
            await ws.send_json(message)
            while True:
                got = await ws.receive_json(timeout=30)
                if got.get("id") == n:
                    if "error" in got:
                        raise RuntimeError(f"{method}: {got['error']}")
                    return got["result"]

        targets = await call("Target.getTargets", {})
        tab = next(t["targetId"] for t in targets["targetInfos"] if t["type"] == "page")
        marks.append(time.perf_counter())
        session = (await call("Target.attachToTarget", {"targetId": tab, "flatten": True}))[
            "sessionId"
        ]
        marks.append(time.perf_counter())
        value = await call("Runtime.evaluate", {"expression": "1 + 1"}, session)
        marks.append(time.perf_counter())
        assert value["result"]["value"] == 2, value
    return str(made["scope"]), [b - a for a, b in itertools.pairwise(marks)]


async def _series(
    http: aiohttp.ClientSession, app: int, relay: int, runs: int, pool: int
) -> list[list[float]]:
    steps = []
    for _ in range(runs):
        if pool:
            await _warm_ready(http, app, pool)
        scope, took = await _task_ready(http, app, relay)
        steps.append(took)
        await _op(http, app, "scopes/close", {"scope": scope})
    return steps


async def _burst(http: aiohttp.ClientSession, app: int, relay: int, pool: int) -> list[float]:
    await _warm_ready(http, app, pool)
    done = await asyncio.gather(*(_task_ready(http, app, relay) for _ in range(MAX_SCOPES)))
    for scope, _ in done:
        await _op(http, app, "scopes/close", {"scope": scope})
    return sorted(sum(took) for _, took in done)


async def _resets(http: aiohttp.ClientSession, app: int) -> list[float]:
    times = []
    for _ in range(RESETS):
        t = time.perf_counter()
        await _op(http, app, "data/reset", {})
        times.append(time.perf_counter() - t)
    return times


def _memory_mib(container: Any) -> float:
    stats = container.stats(stream=False)["memory_stats"]
    cache = stats.get("stats", {})
    used = stats["usage"] - cache.get("inactive_file", cache.get("total_inactive_file", 0))
    return float(used) / (1024 * 1024)


async def _computer(docker: Any, warm: int | None) -> tuple[Any, int, int]:
    container = _start(docker, warm)
    app, relay = _port(container, 8080), _port(container, 9222)
    async with aiohttp.ClientSession() as http:
        await _ready(http, app, time.monotonic() + 120)
    return container, app, relay


async def _measure(docker: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    warm, warm_app, warm_relay = await _computer(docker, None)
    cold, cold_app, cold_relay = await _computer(docker, 0)
    try:
        async with aiohttp.ClientSession() as http:
            pool = await _pool_size(http, warm_app)
            out["pool"] = pool
            await _warm_ready(http, warm_app, pool)
            await asyncio.sleep(5)  # both idle and settled: a measurement window
            out["memory"] = (_memory_mib(warm), _memory_mib(cold))
            await _series(http, warm_app, warm_relay, 5, pool)  # first connections, imports
            await _series(http, cold_app, cold_relay, 3, 0)
            out["warm"] = await _series(http, warm_app, warm_relay, WARM_RUNS, pool)
            out["cold"] = await _series(http, cold_app, cold_relay, COLD_RUNS, 0)
            out["burst"] = await _burst(http, warm_app, warm_relay, pool)
            out["reset"] = await _resets(http, warm_app)
    finally:
        warm.remove(force=True, v=True)
        cold.remove(force=True, v=True)
    starts = []
    for _ in range(STARTS):
        t = time.monotonic()
        container = _start(docker, None)
        try:
            async with aiohttp.ClientSession() as http:
                starts.append(await _ready(http, _port(container, 8080), t + 120) - t)
        finally:
            container.remove(force=True, v=True)
    out["start"] = starts
    out["load_after"] = os.getloadavg()
    return out


async def _pool_size(http: aiohttp.ClientSession, app: int) -> int:
    headers = {"Authorization": f"Bearer {CONTROL}"}
    async with http.get(f"http://127.0.0.1:{app}/metrics", headers=headers) as answer:
        for line in (await answer.text()).splitlines():
            if line.startswith("agentenv_scopes_warm_target "):
                return int(float(line.split()[1]))
    raise RuntimeError("no agentenv_scopes_warm_target on /metrics: an image without warm scopes")


def _ms(values: list[float], p: float) -> str:
    return f"{1000 * percentile(values, p):.1f} ms"


def run() -> str:
    import docker as docker_sdk

    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        return f"\n## task-ready browser\nskipped: no image {IMAGE} (run make image)"
    found = asyncio.run(_measure(docker_sdk.from_env()))
    warm = [sum(s) for s in found["warm"]]
    cold = [sum(s) for s in found["cold"]]
    reset, start = found["reset"], found["start"]
    w50 = percentile(warm, 50)
    rows = [
        [
            f"scopes/open -> first Runtime.evaluate, warm ({found['pool']} kept)",
            _ms(warm, 50),
            _ms(warm, 99),
            f"{len(warm)} runs, max {1000 * max(warm):.1f} ms",
        ],
        [
            "the same, cold (AGENTENV_WARM_SCOPES=0)",
            _ms(cold, 50),
            _ms(cold, 99),
            f"{len(cold)} runs; {percentile(cold, 50) / w50:.1f}x warm",
        ],
        [
            f"{MAX_SCOPES} opened at once, warm computer",
            _ms(found["burst"], 50),
            f"{1000 * max(found['burst']):.1f} ms (max)",
            "each: " + ", ".join(f"{1000 * t:.0f}" for t in found["burst"]) + " ms",
        ],
        [
            "anchor: data/reset",
            _ms(reset, 50),
            _ms(reset, 99),
            f"{len(reset)} runs; {percentile(reset, 50) / w50:.1f}x warm",
        ],
        [
            "anchor: docker run -> /readyz",
            f"{statistics.median(start):.2f} s",
            f"{max(start):.2f} s (max)",
            f"{len(start)} runs; {statistics.median(start) / w50:.0f}x warm",
        ],
    ]
    for n, step in enumerate(STEPS):
        warm_step = [s[n] for s in found["warm"]]
        cold_step = [s[n] for s in found["cold"]]
        rows.append(
            [
                f"  step: {step}",
                _ms(warm_step, 50),
                _ms(warm_step, 99),
                f"cold p50 {_ms(cold_step, 50)}",
            ]
        )
    used, bare = found["memory"]
    rows.append(
        [
            "memory, idle: warm computer - cold one",
            f"{used - bare:.0f} MiB",
            "",
            f"{(used - bare) / max(1, found['pool']):.0f} MiB a warm scope "
            f"({used:.0f} against {bare:.0f} MiB)",
        ]
    )
    before, after = found["load_before"], found["load_after"]
    rows.append(
        [
            "load average (1 min), 2 cores",
            f"{before[0]:.2f} -> {after[0]:.2f}",
            "",
            "machine shared with other runs",
        ]
    )
    return table("task-ready browser", ["case", "p50", "p99", "notes"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
