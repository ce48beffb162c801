"""Density: N agents in N scopes on one computer, against N computers.

At N = 1, 2, 4 and 8, each way runs the same work: the computers started
(one computer with N users, each a scope of its own; or N computers of one
user each), then every agent runs ``ROUNDS`` scripted tasks in a row (the
fleet bench's Playwright agent: its scope's first tab, a click, typing, a
click), all agents at once, then the computers stopped. Tasks a minute count
that whole span; memory is each computer's cgroup after the work (as
``docker stats`` shows it), and per additional agent the one computer's
growth over its one-agent figure. The computers' own CPU time per task (their
cgroups' usage from start to the end of the work, as ``docker stats`` counts
it) says what each way costs apart from the agents' processes, which run on
the same host both ways; the agents' own CPU time per task (their processes'
and the Playwright drivers they start, from ``getrusage``) is beside it. On
a machine whose CPU the work fills, the best the one computer can do is
(agent + N computers' CPU) over (agent + one computer's CPU) a task.

Needs a Docker engine and the image (make image).
"""

from __future__ import annotations

import concurrent.futures
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentenv.harness.computer import Computer, agent_tokens, deploy
from bench.fleet import AGENT, IMAGE, _memory_mib
from bench.stats import table

ROUNDS = 3
SIZES = (1, 2, 4, 8)


def _agent(agent: Path, cdp: str) -> None:
    env = {"AGENTENV_CDP_URL": cdp, "PATH": "/usr/bin:/bin"}
    for _ in range(ROUNDS):
        subprocess.run([sys.executable, str(agent)], env=env, check=True, timeout=120)


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _work(agent: Path, computers: list[tuple[Computer, str]]) -> float:
    """Every agent's rounds at once (``computers``: each agent's computer and
    token); the CPU seconds the agents' processes took."""
    began = _children_cpu_s()
    with concurrent.futures.ThreadPoolExecutor(len(computers)) as pool:
        runs = [
            pool.submit(_agent, agent, f"{computer.cdp}?token={token}")
            for computer, token in computers
        ]
        for run in runs:
            run.result()
    return _children_cpu_s() - began


def _cpu_s(computer: Computer) -> float:
    """The computer's CPU time since it started (its cgroup's, in seconds)."""
    stats = computer.container.stats(stream=False)["cpu_stats"]["cpu_usage"]
    return float(stats["total_usage"]) / 1e9


def _one_computer(agent: Path, n: int) -> tuple[float, float, float, float]:
    """N agents in N scopes on one computer: seconds, its memory (MiB), its
    CPU and the agents' (s)."""
    began = time.monotonic()
    tokens = agent_tokens([f"a{i}" for i in range(n)])
    computer = deploy(IMAGE, None, None, agents=tokens)
    try:
        agents_cpu = _work(agent, [(computer, token) for token in tokens.values()])
        took = time.monotonic() - began
        cpu = _cpu_s(computer)
        time.sleep(2)
        return took, _memory_mib(computer), cpu, agents_cpu
    finally:
        computer.stop()


def _many_computers(agent: Path, n: int) -> tuple[float, float, float, float]:
    """N computers of one agent each: seconds, their memory and CPU together,
    and the agents' CPU."""
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        tokens = [agent_tokens(["a"]) for _ in range(n)]
        started = list(pool.map(lambda t: deploy(IMAGE, None, None, agents=t), tokens))
    try:
        agents_cpu = _work(agent, [(c, t["a"]) for c, t in zip(started, tokens, strict=True)])
        took = time.monotonic() - began
        cpu = sum(_cpu_s(c) for c in started)
        time.sleep(2)
        return took, sum(_memory_mib(c) for c in started), cpu, agents_cpu
    finally:
        for computer in started:
            computer.stop()


def run() -> str:
    with tempfile.TemporaryDirectory() as folder:
        agent = Path(folder) / "agent.py"
        agent.write_text(AGENT)
        rows: list[list[str]] = []
        one_agent_memory = 0.0
        for n in SIZES:
            scoped, scoped_mib, scoped_cpu, scoped_agents = _one_computer(agent, n)
            apart, apart_mib, apart_cpu, apart_agents = _many_computers(agent, n)
            if n == 1:
                one_agent_memory = scoped_mib
            per_agent = (scoped_mib - one_agent_memory) / (n - 1) if n > 1 else 0.0
            tasks = n * ROUNDS
            rows.append(
                [
                    str(n),
                    f"{tasks * 60 / scoped:.1f}",
                    f"{tasks * 60 / apart:.1f}",
                    f"{apart / scoped:.2f}x",
                    f"{scoped_mib:.0f} MiB",
                    f"{apart_mib:.0f} MiB",
                    f"{per_agent:.0f} MiB" if n > 1 else "",
                    f"{scoped_cpu / tasks:.2f} s",
                    f"{apart_cpu / tasks:.2f} s",
                    f"{apart_cpu / scoped_cpu:.2f}x",
                    f"{(scoped_agents + apart_agents) / (2 * tasks):.2f} s",
                ]
            )
    return table(
        f"density: N agents in N scopes on one computer against N computers "
        f"({ROUNDS} tasks per agent, all agents at once, start to stop)",
        [
            "N",
            "tasks/min, one computer",
            "tasks/min, N computers",
            "one vs N",
            "memory, one computer",
            "memory, N computers",
            "per additional agent",
            "computer CPU a task, one",
            "computer CPU a task, N",
            "CPU, N vs one",
            "agent CPU a task",
        ],
        rows,
    )


def main() -> None:
    print(run(), flush=True)


if __name__ == "__main__":
    main()
