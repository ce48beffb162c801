"""Agents a core (issue 41): how many agents, each in a scope of its own and
each doing the fleet bench's scripted work, one computer holds on one core
while a ``Runtime.evaluate`` on each agent's tab is answered within 50 ms at
the 95th percentile.

The computer is the built image, hardened as the harness starts it, with a
control token and ``AGENTENV_MAX_SCOPES``, pinned to one of the machine's
cores (``cpuset_cpus``); this process and the Playwright driver it starts
are pinned to the others, so the agents' own CPU is not the computer's.
For N = 1, 2, 4, 8, 16, 24, 32, 48 in turn: N scopes opened (``scopes/open``), N
agents connected with their minted tokens (Playwright over CDP, one driver),
then for ``RUN_S`` seconds each agent repeats the fleet bench's script (its
tab's content set, a click into the field, "red shoes" typed, the button
clicked), a step every ``STEP_S`` seconds (an agent thinks between steps: a
model's answer takes seconds; 1 s is the assumption the scheduler's model
makes, docs/deploy.md "Sizing"), and after each step a ``Runtime.evaluate``
of ``1`` on its tab, timed, through a second connection of its own (raw
CDP, attached to that tab: what the relay and Chromium take, not the
driver). The scopes are closed
after each N.

It prints, for each N, the evaluate's p50 and p95, the steps a second done,
and the computer's CPU (cgroup) over the run, beside the anchor of the same
run, N = 1; and the most agents within 50 ms at p95.

``AGENTENV_BENCH_IMAGE`` picks the image (default agentenv/browser:latest).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import Any

import aiohttp

from bench.container import _port
from bench.ready import CONTROL, _op, _ready
from bench.stats import percentile, table

IMAGE = os.environ.get("AGENTENV_BENCH_IMAGE", "agentenv/browser:latest")
SIZES = (1, 2, 4, 8, 16, 24, 32, 48)
RUN_S = float(os.environ.get("AGENTENV_BENCH_A_CORE_S", "30"))
STEP_S = 1.0
TARGET_MS = 50.0
CONTENT = "<input id=q><button onclick='this.textContent=1'>go</button>"


def _start(docker: Any, core: int) -> Any:
    from agentenv.harness.hardening import docker_kwargs

    env = {
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "AGENTENV_MAX_SCOPES": str(max(SIZES)),
        # Warm scopes would make renderers in the background between Ns.
        "AGENTENV_WARM_SCOPES": "0",
        # Every agent's one connection, and the driver's discovery, at once.
        "AGENTENV_MAX_CONNECTIONS": str(4 * max(SIZES)),
    }
    return docker.containers.run(
        IMAGE,
        detach=True,
        environment=env,
        ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
        cpuset_cpus=str(core),
        **docker_kwargs(),
    )


def _cpu_s(container: Any) -> float:
    stats = container.stats(stream=False)
    return float(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9


class _Probe:
    """An agent's second connection to the relay (its own token), attached to
    its tab: a ``Runtime.evaluate`` there, timed, is the probe."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.session: str | None = None

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        n = next(self.ids)
        message: dict[str, Any] = {"id": n, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        await self.ws.send_json(message)
        while True:
            got = await self.ws.receive_json(timeout=30)
            if got.get("id") == n:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                return got["result"]

    async def attach(self) -> None:
        targets = await self.call("Target.getTargets", {})
        tab = next(t["targetId"] for t in targets["targetInfos"] if t["type"] == "page")
        attached = await self.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        self.session = attached["sessionId"]


async def _agent(
    browser: Any, probe: _Probe, until: float, took: list[float], steps: list[int]
) -> None:
    """One agent's scripted steps until ``until``, each followed by a timed evaluate."""
    page = browser.contexts[0].pages[0]
    script = (
        lambda: page.set_content(CONTENT),
        lambda: page.click("#q"),
        lambda: page.keyboard.type("red shoes"),
        lambda: page.click("button"),
    )
    n = 0
    next_step = time.monotonic()
    while time.monotonic() < until:
        await script[n % len(script)]()
        n += 1
        began = time.perf_counter()
        await probe.call("Runtime.evaluate", {"expression": "1", "returnByValue": True})
        took.append((time.perf_counter() - began) * 1000)
        next_step += STEP_S
        await asyncio.sleep(max(0.0, next_step - time.monotonic()))
    steps.append(n)


async def _size(
    pw: Any, http: aiohttp.ClientSession, container: Any, app: int, relay: int, n: int
) -> tuple[list[float], float, float]:
    """N agents at once: every evaluate's ms, steps a second, the computer's CPU share."""
    opened = [await _op(http, app, "scopes/open", {}) for _ in range(n)]
    browsers: list[Any] = []
    probes: list[_Probe] = []
    try:
        for made in opened:
            url = f"ws://127.0.0.1:{relay}/devtools/browser?token={made['token']}"
            browsers.append(await pw.chromium.connect_over_cdp(url, timeout=60_000))
            probe = _Probe(await http.ws_connect(url, max_msg_size=0, compress=0))
            probes.append(probe)
            await probe.attach()
        took: list[float] = []
        steps: list[int] = []
        cpu = _cpu_s(container)
        began = time.monotonic()
        until = began + RUN_S
        await asyncio.gather(
            *(_agent(b, p, until, took, steps) for b, p in zip(browsers, probes, strict=True))
        )
        span = time.monotonic() - began
        share = (_cpu_s(container) - cpu) / span
        return took, sum(steps) / span, share
    finally:
        for probe in probes:
            await probe.ws.close()
        for browser in browsers:
            await browser.close()
        for made in opened:
            await _op(http, app, "scopes/close", {"scope": made["scope"]})


async def _measure() -> dict[int, tuple[list[float], float, float]]:
    import docker
    from playwright.async_api import async_playwright

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise RuntimeError("the bench needs 2 cores: one for the computer, one for the agents")
    computer_core, agents_cores = cores[-1], set(cores[:-1])
    os.sched_setaffinity(0, agents_cores)  # the driver this starts inherits it
    client = docker.from_env()
    container = _start(client, computer_core)
    found: dict[int, tuple[list[float], float, float]] = {}
    try:
        app, relay = _port(container, 8080), _port(container, 9222)
        async with aiohttp.ClientSession() as http, async_playwright() as pw:
            await _ready(http, app, time.monotonic() + 120)
            for n in SIZES:
                found[n] = await _size(pw, http, container, app, relay, n)
    finally:
        container.remove(force=True)
        os.sched_setaffinity(0, set(cores))
    return found


def run() -> str:
    found = asyncio.run(_measure())
    anchor = percentile(found[SIZES[0]][0], 95)
    rows = []
    most, past = 0, False  # the last N within, every N before it within too
    for n, (took, rate, share) in found.items():
        p95 = percentile(took, 95)
        past = past or p95 > TARGET_MS
        if not past:
            most = n
        rows.append(
            [
                str(n),
                f"{percentile(took, 50):.1f} ms",
                f"{p95:.1f} ms",
                f"{p95 / anchor:.2f}x",
                f"{rate:.1f}",
                f"{share * 100:.0f} %",
            ]
        )
    header = ["agents", "evaluate p50", "p95", "p95 / N=1", "steps a second", "computer CPU"]
    load = os.getloadavg()[0]
    title = "agents a core: N agents in N scopes on a computer of one core"
    return (
        table(title, header, rows) + f"\nagents a core within {TARGET_MS:.0f} ms at p95: {most}"
        f" (of {', '.join(map(str, SIZES))}; a step every {STEP_S:.0f} s each,"
        f" {RUN_S:.0f} s a size; load average {load:.2f})"
    )


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
