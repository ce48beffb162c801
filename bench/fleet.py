"""Many computers on this machine's Docker engine, with a scripted agent.

- tasks a minute with ``agentenv run --parallel N`` at N = 1, 2 and 4 (each
  task: a computer started, a tab, a recording through the local store, an
  agent that clicks and types over CDP, the recording downloaded);
- the time to ready a computer for the next task: reused (``data/reset``)
  beside started fresh (``docker run`` to ``/readyz``);
- memory per computer after a task (cgroup, as ``docker stats`` shows it), and
  so how many fit on a host of a given size;
- what the run's local store costs: its container up and serving (paid once
  per ``agentenv run``), beside a computer's start; and per recording, the
  grant made on the harness's side and the start that proves it from the
  computer's (``start.json`` written through the store's network).

Needs a Docker engine and the image (make image).
"""

from __future__ import annotations

import io
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from agentenv.harness.batch import Batch
from agentenv.harness.computer import Computer, agent_tokens, deploy
from agentenv.harness.local_store import start_container
from agentenv.harness.steps import Task
from agentenv.harness.task_sources import Planned
from agentenv.protocol.browser import TabsOpen
from agentenv.protocol.recording import End, Start
from bench.stats import table

IMAGE = "agentenv/browser:latest"
TASKS = 8
#: What the host keeps for itself before computers (the engine, the harness).
RESERVED_GIB = 1.5

AGENT = textwrap.dedent(
    """
    import os
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        page = browser.contexts[0].pages[0]
        page.set_content("<input id=q><button onclick='this.textContent=1'>go</button>")
        page.click("#q")
        page.keyboard.type("red shoes")
        page.click("button")
        browser.close()
    """
)


def _task(agent: Path) -> Task:
    return Task.model_validate(
        {
            "envs": {"pc": {"versions": {1: {"browsers": ["main"], "image": IMAGE}}}},
            "steps": [
                {"type": "deploy_env", "env_id": "pc"},
                {"type": "browser_open_tab", "env_id": "pc", "url": "about:blank"},
                {"type": "browser_connect_cdp", "env_id": "pc", "agent": "bench"},
                {"type": "start_browser_recording", "env_id": "pc", "name": "r"},
                {"type": "run_agent", "command": [sys.executable, str(agent)], "timeout_s": 120},
                {"type": "end_browser_recording", "env_id": "pc", "name": "r"},
            ],
        }
    )


def _throughput(
    folder: Path, agent: Path, parallel: int, reuse: bool = False
) -> tuple[Batch, float]:
    """A batch of TASKS tasks, ``parallel`` at a time; it and its seconds."""
    tasks = [Planned(f"t{n:02d}", _task(agent), "bench") for n in range(TASKS)]
    output = io.StringIO()
    name = f"n{parallel}{'-reuse' if reuse else ''}"
    batch = Batch(tasks, folder / name, parallel, output, reuse=reuse)
    began = time.monotonic()
    status = batch.run()
    took = time.monotonic() - began
    if status != 0:
        raise RuntimeError(f"the bench's tasks failed: {output.getvalue()[-2000:]}")
    return batch, took


def _memory_mib(computer: Computer) -> float:
    stats = computer.container.stats(stream=False)["memory_stats"]
    cache = stats.get("stats", {})
    used = stats["usage"] - cache.get("inactive_file", cache.get("total_inactive_file", 0))
    return float(used) / (1024 * 1024)


def _fresh_and_memory(agent: Path) -> tuple[list[float], list[float]]:
    """Fresh starts to ready, and each computer's memory after a task's work."""
    import subprocess

    starts, memory = [], []
    for _ in range(3):
        agents = agent_tokens(["bench"])
        began = time.monotonic()
        computer = deploy(IMAGE, None, None, agents=agents)
        starts.append(time.monotonic() - began)
        try:
            computer.op("tabs/open", TabsOpen, url="about:blank")
            cdp = f"{computer.cdp}?token={agents['bench']}"
            env = {"AGENTENV_CDP_URL": cdp, "PATH": "/usr/bin:/bin"}
            subprocess.run([sys.executable, str(agent)], env=env, check=True, timeout=120)
            time.sleep(3)
            memory.append(_memory_mib(computer))
        finally:
            computer.stop()
    return starts, memory


def _store_costs(recordings: int = 5) -> tuple[list[float], list[float], list[float]]:
    """The store up (three times); then, on one computer on its network, each
    recording's grant (harness) and start (computer, its grant proven)."""
    ups: list[float] = []
    for _ in range(2):
        began = time.monotonic()
        start_container(say=lambda _: None).close()
        ups.append(time.monotonic() - began)
    began = time.monotonic()
    store = start_container(say=lambda _: None)
    ups.append(time.monotonic() - began)
    grants, starts = [], []
    try:
        computer = deploy(IMAGE, None, None, networks=[str(store.network)])
        try:
            for n in range(recordings):
                began = time.monotonic()
                grant = store.grant(f"bench/r{n}", started_here=False)
                granted = time.monotonic()
                started = computer.recording(
                    "start", Start, request_id=f"bench-{n}-{time.time()}", upload=grant
                )
                starts.append(time.monotonic() - granted)
                grants.append(granted - began)
                computer.recording("end", End, recording_id=started.recording_id)
        finally:
            computer.stop()
    finally:
        store.close()
    return ups, grants, starts


def run() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        agent = folder / "agent.py"
        agent.write_text(AGENT)
        rates = {}
        for parallel in (1, 2, 4):
            _, took = _throughput(folder, agent, parallel)
            rates[parallel] = TASKS / took * 60
        reused, took = _throughput(folder, agent, 2, reuse=True)
        reuse_rate = TASKS / took * 60
        fresh, memory = _fresh_and_memory(agent)
    ups, grants, starts = _store_costs()
    per = statistics.median(memory)
    rows = [
        [f"tasks a minute, --parallel {n} ({TASKS} tasks)", f"{rates[n]:.1f}", ""]
        for n in (1, 2, 4)
    ]
    rows += [
        [
            f"tasks a minute, --parallel 2 --reuse ({TASKS} tasks)",
            f"{reuse_rate:.1f}",
            f"fresh computers at 2: {rates[2]:.1f}",
        ],
        [
            "a computer ready for the next task: reused (data/reset)",
            f"{statistics.median(reused.resets):.2f} s",
            f"started fresh (docker run to /readyz): {statistics.median(fresh):.2f} s",
        ],
        ["memory per computer after a task (cgroup)", f"{per:.0f} MiB", "median of 3"],
        [
            "the run's local store up (its network and container, to serving)",
            f"{statistics.median(ups):.2f} s",
            f"a computer started fresh: {statistics.median(fresh):.2f} s "
            f"({statistics.median(ups) / statistics.median(fresh):.2f}x); once per run",
        ],
        [
            "a recording's grant (harness: role, policy, STS)",
            f"{statistics.median(grants) * 1000:.0f} ms",
            f"median of {len(grants)}",
        ],
        [
            "a recording's start, its grant proven (start.json from the computer)",
            f"{statistics.median(starts) * 1000:.0f} ms",
            f"{statistics.median(starts) / statistics.median(grants):.2f}x the grant",
        ],
    ]
    for gib in (8, 16, 32, 64):
        fits = int((gib - RESERVED_GIB) * 1024 // per)
        rows.append(
            [
                f"computers that fit in {gib} GiB (after {RESERVED_GIB} GiB for the host)",
                str(fits),
                "memory alone; CPU decides sooner for busy agents",
            ]
        )
    return table("fleet (this 2-core machine)", ["case", "figure", "anchor"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
