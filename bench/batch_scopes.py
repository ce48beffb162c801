"""A batch on scopes against a computer per task, through ``agentenv run``'s Batch.

32 scripted tasks (``bench.fleet``'s: a tab, a recording through the run's
local store, a Playwright agent that clicks and types over CDP, the
recording downloaded and verified), ``--parallel 8`` each time, at
``--scopes-per-computer`` 1 (a computer started per task, today's batch),
4 and 8, in turn in that order. For each:

- tasks a minute, the batch's start to its end (the store's start included);
- the computers' own CPU a task: each computer's cgroup CPU (as ``docker
  stats`` counts it) read just before it stops, summed, over the tasks;
- memory a running task, by PSS (below: the programs' sum) and by cgroup.
  The cgroup figure charges a page the computers share (Chromium's and
  Python's code) to the first to touch it, and at K = 1 counts computers
  starting and stopping: it makes a computer per task look lighter than it
  is, and PSS, each shared page split among its users, is the headline.
  By cgroup: every second, the computers' cgroup memory (less
  inactive file pages, as ``docker stats`` shows it) over the tasks in
  flight on them then (at most K a computer up), the median of the seconds
  with all 8 in flight;
- the agents' own CPU a task (the harness's children: each agent's Python
  and the Playwright driver it starts), which no K changes;
- where a running task's memory goes: at the same seconds, each of the
  computers' processes' PSS (read from the host's ``/proc``: a Linux engine
  and a root harness; left out elsewhere), by program, of the computers that
  are up (a K = 1 computer starting or stopping lacks programs), over the
  tasks they can be serving, the median of each (they need not add up to the cgroup's figure,
  which counts a shared page once, for the first container to touch it);
- where the computers' CPU a task goes: as each computer stops, each of its
  processes' user and system time with its ended children's (a closed
  renderer's is its zygote's, under "other helpers"), from the host's
  ``/proc``, by program, summed, over the tasks.

``BENCH_KS`` (``1,8``, say) runs fewer Ks; the first is the ratios' base.

Needs a Docker engine and the image (make image); ``AGENTENV_TEST_IMAGE``
names another.
"""

from __future__ import annotations

import io
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentenv.harness.batch import Batch
from agentenv.harness.computer import Computer
from agentenv.harness.steps import Task
from agentenv.harness.task_sources import Planned
from bench import fleet
from bench.stats import table

IMAGE = os.environ.get("AGENTENV_TEST_IMAGE", fleet.IMAGE)
TASKS = 32
PARALLEL = 8
#: The K of each batch, in turn (``BENCH_KS``, e.g. ``1,8``, runs fewer).
KS = tuple(int(k) for k in os.environ.get("BENCH_KS", "1,4,8").split(","))


def _task(agent: Path) -> Task:
    """``bench.fleet``'s task, on ``IMAGE``."""
    task = fleet._task(agent)
    for version in task.envs["pc"].versions.values():
        version.image = IMAGE
    return task


def _stats(container: Any) -> dict[str, Any]:
    return dict(container.stats(stream=False, one_shot=True))


def _memory_mib(stats: dict[str, Any]) -> float:
    memory = stats["memory_stats"]
    cache = memory.get("stats", {})
    used = memory["usage"] - cache.get("inactive_file", cache.get("total_inactive_file", 0))
    return float(used) / (1024 * 1024)


class Counted(Batch):
    """A batch that reads each computer's CPU just before it stops: the
    cgroup's, and each program's (where the host's ``/proc`` can be read)."""

    cpu_s: float = 0.0
    #: CPU seconds by program, summed over the computers.
    cpu_parts: dict[str, float] = {}
    #: Some computer's processes could not be read (the parts are not whole).
    cpu_unread: bool = False

    def _last_counts(self, computer: Computer) -> None:
        if computer.container is not None:
            stats = _stats(computer.container)
            used = float(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9
            parts = _cpu_anatomy(computer.container)
            with self._lock:
                self.cpu_s += used
                if parts is None:
                    self.cpu_unread = True
                else:
                    mine = dict(self.cpu_parts)
                    for name, seconds in parts.items():
                        mine[name] = mine.get(name, 0.0) + seconds
                    self.cpu_parts = mine
        super()._last_counts(computer)


#: The programs of a computer, as its processes' command lines name them.
PROGRAMS = (
    ("renderers", "--type=renderer"),
    ("Chromium's GPU process", "--type=gpu-process"),
    ("Chromium's other helpers", "--type="),
    ("Chromium's browser process", "chromium"),
    ("the recorder", "agentenv-recorder"),
    ("the relay", "agentenv-relay"),
    ("the app server", "agentenv-app"),
    ("supervisord and the rest", ""),
)
#: The programs a computer that is up runs (one starting or stopping lacks some).
UP = ("Chromium's browser process", "the recorder", "the relay", "the app server")


def _anatomy(container: Any) -> dict[str, float] | None:
    """Each program's PSS in MiB (its processes summed); None where the
    host's ``/proc`` cannot be read (not Linux, or not root)."""
    found: dict[str, float] = {}
    try:
        for row in container.top(ps_args="-o pid")["Processes"] or []:
            pid = row[0]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            kib = next(int(x.split()[1]) for x in rollup.splitlines() if x.startswith("Pss:"))
            name = next(n for n, mark in PROGRAMS if mark in command)
            found[name] = found.get(name, 0.0) + kib / 1024
    except (OSError, StopIteration, ValueError):
        return None
    return found


def _cpu_anatomy(container: Any) -> dict[str, float] | None:
    """Each program's CPU seconds (user and system, with its children that
    ended and were waited for: a renderer closed is its zygote's), its
    processes summed; None where the host's ``/proc`` cannot be read."""
    found: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        for row in container.top(ps_args="-o pid")["Processes"] or []:
            pid = row[0]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            seconds = sum(int(f) for f in fields[11:15]) / tick
            name = next(n for n, mark in PROGRAMS if mark in command)
            found[name] = found.get(name, 0.0) + seconds
    except (OSError, StopIteration, ValueError):
        return None
    return found


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _sample(
    batch: Counted,
    k: int,
    stop: threading.Event,
    per_task: list[float],
    anatomy: list[dict[str, float]],
) -> None:
    """Every second: the computers' memory over the tasks in flight on them,
    when all are in flight. A task whose computer is not up yet is not
    counted (K = 1's computers start one per task: counted, they made a
    running task look as light as half a computer)."""
    import docker

    client = docker.from_env()
    while not stop.wait(1.0):
        with batch._lock:
            flying = len(batch.runs)
        if flying < PARALLEL:
            continue
        try:
            found = client.containers.list(filters={"label": "io.agentenv.harness=1"})
            mine = [c for c in found if IMAGE in c.image.tags]
            total = sum(_memory_mib(_stats(c)) for c in mine)
            parts = [_anatomy(c) for c in mine]
        except Exception:  # a container going away mid-read: skip that second
            continue
        served = min(flying, len(mine) * k)
        if served:
            per_task.append(total / served)
        # By program: the computers that are up (Chromium and the three
        # services running), over the tasks they can be serving.
        up = [p for p in parts if p is not None and all(p.get(n) for n in UP)]
        serving = min(flying, len(up) * k)
        if serving and all(p is not None for p in parts):
            names = {n for p in up for n in p}
            anatomy.append({n: sum(p.get(n, 0.0) for p in up) / serving for n in names})


Found = tuple[float, float, float, float, dict[str, float], dict[str, float] | None]


def _batch(folder: Path, agent: Path, k: int) -> Found:
    """Tasks a minute, computer CPU a task, memory a running task, agent CPU
    a task, that memory by program (empty where it cannot be read), and the
    computers' CPU a task by program (None where it cannot be read)."""
    tasks = [Planned(f"t{n:02d}", _task(agent), "bench") for n in range(TASKS)]
    output = io.StringIO()
    batch = Counted(tasks, folder / f"k{k}", PARALLEL, output, scopes_per_computer=k)
    per_task: list[float] = []
    anatomy: list[dict[str, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(
        target=_sample, args=(batch, k, stop, per_task, anatomy), daemon=True
    )
    agents = _children_cpu_s()
    sampler.start()
    began = time.monotonic()
    try:
        status = batch.run()
    finally:
        took = time.monotonic() - began
        stop.set()
        sampler.join(timeout=30)
    if status != 0:
        raise RuntimeError(f"the bench's tasks failed: {output.getvalue()[-3000:]}")
    memory = statistics.median(per_task) if per_task else float("nan")
    agent_cpu = (_children_cpu_s() - agents) / TASKS
    names = {n for a in anatomy for n in a}
    parts = {n: statistics.median(a.get(n, 0.0) for a in anatomy) for n in names}
    by_program = None if batch.cpu_unread else {n: v / TASKS for n, v in batch.cpu_parts.items()}
    return TASKS / took * 60, batch.cpu_s / TASKS, memory, agent_cpu, parts, by_program


def run() -> str:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        agent = folder / "agent.py"
        agent.write_text(fleet.AGENT)
        found = {k: _batch(folder, agent, k) for k in KS}
    one = found[KS[0]]
    pss = {k: sum(f[4].values()) for k, f in found.items()}
    rows = []
    for k, (rate, cpu, memory, agent_cpu, _, _) in found.items():
        rows.append(
            [
                f"K = {k}" + (" (a computer per task)" if k == 1 else ""),
                f"{rate:.1f}",
                f"{rate / one[0]:.2f}x",
                f"{cpu:.2f} s",
                f"{one[1] / cpu:.2f}x",
                f"{pss[k]:.0f} MiB" if pss[k] else "-",
                f"{pss[KS[0]] / pss[k]:.2f}x" if pss[k] and pss[KS[0]] else "-",
                f"{memory:.0f} MiB ({one[2] / memory:.2f}x)",
                f"{agent_cpu:.2f} s",
            ]
        )
    return _table(rows) + _anatomy_table(found) + _cpu_table(found)


def _cpu_table(found: dict[int, Found]) -> str:
    """The computers' CPU a task by program, at each K."""
    parts = {k: f[5] for k, f in found.items()}
    title = "where the computers' CPU a task goes (by program, as each computer stops)"
    return _by_program(title, "CPU", parts, "{:.3f} s", "all")


def _anatomy_table(found: dict[int, Found]) -> str:
    """A running task's memory by program (PSS), at each K."""
    parts = {k: f[4] for k, f in found.items()}
    title = "where a running task's memory goes (PSS a task in flight, by program)"
    return _by_program(title, "memory", parts, "{:.1f} MiB", "all (PSS)")


def _by_program(
    title: str, what: str, parts: Mapping[int, dict[str, float] | None], form: str, total: str
) -> str:
    """A table of ``parts`` (each K's figure by program, None where the
    host's ``/proc`` could not be read), a row a program and their sum."""
    read = {k: p for k, p in parts.items() if p}
    if len(read) < len(parts):
        return f"\n(where the {what} goes: the host's /proc could not be read)\n"
    rows = [[name, *(form.format(read[k].get(name, 0.0)) for k in KS)] for name, _ in PROGRAMS]
    rows.append([total, *(form.format(sum(read[k].values())) for k in KS)])
    return table(title, ["program", *(f"K = {k}" for k in KS)], rows)


def _table(rows: list[list[str]]) -> str:
    return table(
        f"batch on scopes: {TASKS} scripted tasks with recordings, --parallel {PARALLEL}",
        [
            "scopes per computer",
            "tasks a minute",
            "vs K = 1",
            "computer CPU a task",
            "less than K = 1",
            "memory a running task (PSS)",
            "less than K = 1",
            "cgroup memory a running task",
            "agent CPU a task",
        ],
        rows,
    )


def main() -> None:
    print(run(), flush=True)


if __name__ == "__main__":
    main()
