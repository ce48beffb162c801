"""Many tasks, ``--parallel N`` at a time, each on its own computer (SPEC.md section 6).

``agentenv run`` takes task files, folders of them, or a JSONL of
Online-Mind2Web tasks (``task_id``, ``confirmed_task`` or ``task``,
``website``, ``reference_length``?; run with ``--agent COMMAND``, which gets
the task's text in ``AGENTENV_TASK``). Each task is a :class:`~.runner.Run`
in a thread of its own with its own folder (``<out>/<name>/``, its terminal
output in ``run.log``); the tasks share the batch's store (:class:`~.run_store.RunStore`:
one local store container and network, each recording with a grant of its
own), removed after the last computer. The engine schedules the computers;
the harness only waits on them.

While tasks run, a table of what runs is printed when it changes (at most
every two seconds), its last line the fleet's sums of the computers'
``/metrics`` (:class:`agentenv.harness.fleet.Fleet`: each computer is read every
two seconds and once more before it stops); at the end a summary (done,
failed, infrastructure, durations, the fleet's line) and
``<out>/results.jsonl``, a line per task, with the evidence of its recording
(``image_digest``, ``chromium``, ``key``, ``guard_refusals``,
``manifest_sha256``: :func:`agentenv.harness.attest.results_fields`).
``--reuse`` keeps each worker's
computer between its tasks: before the next task it is reset with
``data/reset`` (one blank tab; no cookies, granted permissions,
downloads or HTTP cache; the storage of the origins the computer knows of
cleared, every site the log saw since the last reset among them; the image
keeps no history), and the pool stops it at the end. Ctrl-C cancels:
each run stops its agent, ends its open recordings and stops the computers it
started, and tasks not begun are not begun. Exit status: 0 every task done,
1 one failed, 3 an infrastructure failure (or cancelled), 2 bad input.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agentenv.harness.attest import results_fields
from agentenv.harness.backends import start
from agentenv.harness.computer import Computer, ComputerError, agent_tokens
from agentenv.harness.errors import HarnessError
from agentenv.harness.fleet import Fleet
from agentenv.harness.preflight import preflight
from agentenv.harness.run_store import RunStore, StoreOptions, records, store_problem
from agentenv.harness.runner import EXIT_INFRA, EXIT_OK, EXIT_TASK_FAILED, Run
from agentenv.harness.steps import Task, TaskError, load_task
from agentenv.protocol.browser import Empty

__all__ = ["Batch", "Planned", "mind2web_task", "plan"]

TASK_SUFFIXES = (".yaml", ".yml", ".json")
STATUS = {EXIT_OK: "done", EXIT_TASK_FAILED: "failed", EXIT_INFRA: "infrastructure"}


@dataclass(frozen=True)
class Planned:
    name: str
    task: Task
    source: str


def _name(raw: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-.") or "task"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def mind2web_task(
    line: dict[str, Any], agent: str, image: str | None, where: str
) -> tuple[str, Task]:
    """A task from one Online-Mind2Web line: open the site, record the agent, export."""
    task_id = line.get("task_id")
    text = line.get("confirmed_task") or line.get("task")
    site = line.get("website")
    if not isinstance(task_id, str) or not isinstance(text, str) or not isinstance(site, str):
        raise TaskError(f"{where}: a Mind2Web task needs task_id, confirmed_task and website")
    reference = line.get("reference_length")
    steps: list[dict[str, Any]] = [
        {"type": "deploy_env", "env_id": "web", **({"image": image} if image else {})},
        {"type": "browser_open_tab", "env_id": "web", "url": site},
        {"type": "browser_connect_cdp", "env_id": "web", "agent": "agent"},
        {"type": "start_browser_recording", "env_id": "web", "name": "trajectory"},
        {
            "id": "agent",
            "type": "run_agent",
            "command": agent,
            "env": {"AGENTENV_TASK": text, "AGENTENV_TASK_ID": task_id},
        },
        {"type": "end_browser_recording", "env_id": "web", "name": "trajectory"},
        {
            "type": "export_mind2web",
            "recording": "trajectory",
            "task": text,
            "task_id": task_id,
            **({"reference_length": reference} if isinstance(reference, int) else {}),
        },
    ]
    raw = {"envs": {"web": {"versions": {1: {"browsers": ["main"]}}}}, "steps": steps}
    try:
        return task_id, Task.model_validate(raw)
    except ValueError as exc:
        raise TaskError(f"{where}: {exc}") from None


def plan(sources: list[Path], agent: str | None = None, image: str | None = None) -> list[Planned]:
    """The tasks named by ``sources``; :class:`TaskError` for the first bad one."""
    found: list[Planned] = []
    taken: set[str] = set()
    for source in sources:
        if source.is_dir():
            files = sorted(p for p in source.rglob("*") if p.suffix in TASK_SUFFIXES)
            if not files:
                raise TaskError(f"{source}: no task files (.yaml, .yml, .json) in it")
            for file in files:
                found.append(Planned(_name(file.stem, taken), load_task(file), str(file)))
        elif source.suffix == ".jsonl":
            if agent is None:
                raise TaskError(
                    f"{source}: Online-Mind2Web tasks need --agent COMMAND (it gets the "
                    "task in AGENTENV_TASK and the browser in AGENTENV_CDP_URL)"
                )
            try:
                text = source.read_text()
            except OSError as exc:
                raise TaskError(f"{source}: cannot read it: {exc.strerror}") from None
            for number, raw in enumerate(text.splitlines(), start=1):
                if not raw.strip():
                    continue
                where = f"{source}:{number}"
                try:
                    line = json.loads(raw)
                except ValueError:
                    raise TaskError(f"{where}: not a JSON line") from None
                if not isinstance(line, dict):
                    raise TaskError(f"{where}: a task is a JSON object")
                task_id, task = mind2web_task(line, agent, image, where)
                found.append(Planned(_name(task_id, taken), task, where))
        else:
            found.append(Planned(_name(source.stem, taken), load_task(source), str(source)))
    return found


@dataclass
class Batch:
    tasks: list[Planned]
    out: Path
    parallel: int = 1
    #: Where the table and the summary go (None: sys.stdout as it is when printing).
    stream: TextIO | None = None
    #: ``--store``, ``--store-*`` and ``--network``: one store for every task.
    store_options: StoreOptions = field(default_factory=StoreOptions)
    stores: RunStore | None = None
    #: Keep each worker's computer between its tasks, reset with data/reset.
    reuse: bool = False
    backend: str = "docker"
    namespace: str | None = None
    kube_context: str | None = None
    runs: dict[str, Run] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _local: threading.local = field(default_factory=threading.local)
    pool: list[Computer] = field(default_factory=list)
    resets: list[float] = field(default_factory=list)
    #: The computers' ``/metrics``, added up (the table's last line).
    fleet: Fleet = field(default_factory=Fleet)

    def _lend(self, image: str | None) -> Computer:
        """This worker's computer for ``image``: started the first time, reset after."""
        mine: dict[str | None, Computer] = self._local.__dict__.setdefault("computers", {})
        computer = mine.get(image)
        if computer is None:
            # Every agent any task connects: the computer serves them all in turn.
            names = sorted({n for p in self.tasks for n in p.task.agents()})
            agents = agent_tokens(names)
            computer = start(
                self.backend,
                image,
                agents,
                namespace=self.namespace,
                kube_context=self.kube_context,
                networks=self._stores().networks(any(records(p.task) for p in self.tasks)),
            )
            mine[image] = computer
            with self._lock:
                self.pool.append(computer)
            return computer
        began = time.monotonic()
        try:
            computer.op("data/reset", Empty)
            computer.wait_ready(60)
        except ComputerError as exc:
            # A computer that cannot be reset is not lent again: a fresh one instead.
            self.say(f"a reused computer could not be reset ({exc}); starting another")
            del mine[image]
            with contextlib.suppress(Exception):
                computer.stop()
            return self._lend(image)
        with self._lock:
            self.resets.append(time.monotonic() - began)
        return computer

    def say(self, text: str) -> None:
        with self._lock:
            print(text, file=self.stream or sys.stdout, flush=True)

    def _stores(self) -> RunStore:
        with self._lock:
            if self.stores is None:
                self.stores = RunStore.of(self)
            return self.stores

    def problems(self) -> list[str]:
        """Every task's preflight problems, and where the store cannot reach
        its computers, named by task."""
        found = [f"{p.name}: {problem}" for p in self.tasks for problem in preflight(p.task)]
        stores: dict[str, list[str]] = {}  # one problem, every task it stops
        for p in self.tasks:
            problem = store_problem(self.store_options, p.task, self.backend)
            if problem is not None:
                stores.setdefault(problem, []).append(p.name)
        found += [f"{', '.join(names)}: {problem}" for problem, names in stores.items()]
        return found

    def _one(self, planned: Planned) -> None:
        if self.stopping.is_set():
            self.results[planned.name] = {"task": planned.name, "status": "not run"}
            return
        folder = self.out / planned.name
        folder.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(folder / "run.log", "w") as log:
            run = Run(
                planned.task,
                folder,
                stream=log,
                store_options=self.store_options,
                stores=self._stores(),
                lend=self._lend if self.reuse else None,
                backend=self.backend,
                namespace=self.namespace,
                kube_context=self.kube_context,
                before_stop=self._last_counts,
            )
            with self._lock:
                self.runs[planned.name] = run
            try:
                status = run.run()
            except Exception as exc:  # a bug in one task's run must not stop the others
                log.write(f"the run failed: {type(exc).__name__}: {exc}\n")
                status = EXIT_INFRA
        took = time.monotonic() - began
        with self._lock:
            self.runs.pop(planned.name, None)
            self.results[planned.name] = {
                "task": planned.name,
                "source": planned.source,
                "status": STATUS.get(status, "infrastructure"),
                "exit_status": status,
                "seconds": round(took, 2),
                "out": str(folder),
                "answer": run.answer,
                "failures": [
                    f"{k}: {v.get('error')}"
                    for k, v in run.metadata.get("steps", {}).items()
                    if not v.get("ok", True)
                ],
                # The evidence of its recording (harness/attest.py).
                **results_fields(run.metadata),
            }
        self.say(f"{planned.name}: {STATUS.get(status, 'infrastructure')} in {took:.1f}s")

    def _last_counts(self, computer: Computer) -> None:
        """A computer's counts, read once more before it stops: its last word
        (a scrape round still in flight does not overwrite it)."""
        text = computer.metrics(timeout_s=10.0)  # its last word: worth a wait
        with self._lock:
            self.fleet.seen(computer.key, text, final=True)

    def _scrape(self) -> None:
        """A round of ``/metrics`` from every computer running now."""
        with self._lock:
            live = {c.key: c for r in self.runs.values() for c in list(r.computers.values())}
            live.update((c.key, c) for c in self.pool)
        answers = {key: computer.metrics() for key, computer in live.items()}
        with self._lock:
            self.fleet.round(key for key, text in answers.items() if self.fleet.seen(key, text))

    def _table(self) -> str:
        with self._lock:
            running = sorted(self.runs.items())
            done = len(self.results)
            fleet = self.fleet.line()
        rows = [f"  {name:<32} {run.current}" for name, run in running]
        return "\n".join(
            [f"running {len(running)}, finished {done} of {len(self.tasks)}:", *rows, fleet]
        )

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        self.say(f"{len(self.tasks)} tasks, {self.parallel} at a time; results in {self.out}")
        began = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="task")
        futures: list[Future[None]] = [pool.submit(self._one, p) for p in self.tasks]
        shown = ""
        previous: Any = None
        try:
            while not all(f.done() for f in futures):
                self._scrape()
                table = self._table()
                if table != shown:
                    self.say(table)
                    shown = table
                time.sleep(2.0)
        except KeyboardInterrupt:
            self.say("cancelling: stopping agents, ending recordings, stopping computers ...")
            if threading.current_thread() is threading.main_thread():
                # A second Ctrl-C must not cut the teardown short: computers
                # would be left running.
                previous = signal.signal(signal.SIGINT, self._still_stopping)
            self.stopping.set()
            with self._lock:
                for run in self.runs.values():
                    run.cancelled.set()
            for f in futures:
                f.cancel()
        finally:
            pool.shutdown(wait=True)
            self._scrape()
            for computer in self.pool:
                try:
                    computer.stop()
                except Exception as exc:  # the docker SDK's: report, go on stopping
                    self.say(f"could not stop a computer: {exc}")
            if self.stores is not None:
                try:
                    self.stores.close()  # after the last computer: it leaves the network
                except HarnessError as exc:
                    self.say(str(exc))
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return self._summary(time.monotonic() - began)

    def _still_stopping(self, signum: int, frame: Any) -> None:
        self.say("still stopping: ending recordings and stopping computers (kill -9 leaves them)")

    def _summary(self, took: float) -> int:
        results = [
            self.results.get(p.name, {"task": p.name, "status": "not run"}) for p in self.tasks
        ]
        with open(self.out / "results.jsonl", "w") as out:
            for result in results:
                out.write(json.dumps(result) + "\n")
        counts: dict[str, int] = {}
        for result in results:
            counts[result["status"]] = counts.get(result["status"], 0) + 1
        seconds = sorted(r["seconds"] for r in results if "seconds" in r)
        middle = seconds[len(seconds) // 2] if seconds else 0.0
        longest = seconds[-1] if seconds else 0.0
        parts = ", ".join(
            f"{counts.get(k, 0)} {k}" for k in ("done", "failed", "infrastructure", "not run")
        )
        self.say(
            f"summary: {parts}; {len(results)} tasks in {took:.1f}s; per task median "
            f"{middle:.1f}s, longest {longest:.1f}s; results in {self.out / 'results.jsonl'}"
        )
        self.say(self.fleet.line())
        for result in results:
            for failure in result.get("failures", []):
                self.say(f"  {result['task']}: {failure}")
        if counts.get("infrastructure") or counts.get("not run"):
            return EXIT_INFRA
        return EXIT_TASK_FAILED if counts.get("failed") else EXIT_OK
