"""Density: N agents in N scopes on one computer, against N computers.

At N = 1, 2, 4 and 8, each way runs the same work: the computers started
(one computer with N users, each a scope of its own; or N computers of one
user each), then every agent runs ``ROUNDS`` scripted tasks in a row (the
fleet bench's Playwright agent: its scope's first tab, a click, typing, a
click), all agents at once, then the computers stopped. Tasks a minute count
that whole span; memory is each computer's cgroup after the work (as
``docker stats`` shows it), and per additional agent the one computer's
growth over its one-agent figure.

Needs a Docker engine and the image (make image).
"""

from __future__ import annotations

import concurrent.futures
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


def _work(agent: Path, computers: list[tuple[Computer, str]]) -> None:
    """Every agent's rounds at once (``computers``: each agent's computer and token)."""
    with concurrent.futures.ThreadPoolExecutor(len(computers)) as pool:
        runs = [
            pool.submit(_agent, agent, f"{computer.cdp}?token={token}")
            for computer, token in computers
        ]
        for run in runs:
            run.result()


def _one_computer(agent: Path, n: int) -> tuple[float, float]:
    """N agents in N scopes on one computer: seconds, and its memory (MiB)."""
    began = time.monotonic()
    tokens = agent_tokens([f"a{i}" for i in range(n)])
    computer = deploy(IMAGE, None, None, agents=tokens)
    try:
        _work(agent, [(computer, token) for token in tokens.values()])
        took = time.monotonic() - began
        time.sleep(2)
        return took, _memory_mib(computer)
    finally:
        computer.stop()


def _many_computers(agent: Path, n: int) -> tuple[float, float]:
    """N computers of one agent each: seconds, and their memory together (MiB)."""
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        tokens = [agent_tokens(["a"]) for _ in range(n)]
        started = list(pool.map(lambda t: deploy(IMAGE, None, None, agents=t), tokens))
    try:
        _work(agent, [(c, t["a"]) for c, t in zip(started, tokens, strict=True)])
        took = time.monotonic() - began
        time.sleep(2)
        return took, sum(_memory_mib(c) for c in started)
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
            scoped, scoped_mib = _one_computer(agent, n)
            apart, apart_mib = _many_computers(agent, n)
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
        ],
        rows,
    )


def main() -> None:
    print(run(), flush=True)


if __name__ == "__main__":
    main()
