"""Many tasks, ``--parallel N`` at a time, each on its own computer (docs/spec.md section 6).

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
``--reuse`` keeps each worker's computer between its tasks, reset with
``data/reset`` (:mod:`.reuse`).

``--scopes-per-computer K`` (K > 1, the default 4) runs the tasks on scopes:
a pool of ``ceil(parallel / K)`` computers from a
:class:`~.provision.Provisioner`, each serving up to K tasks at once, where
:class:`~.scheduling.Schedule` says (room counted and read from each
computer's ``/metrics``); each task's agents get scopes opened for them
(:func:`~.scoped.open_for`), closed when it ends. A computer whose Chromium,
relay or app server restarted (its ``/metrics``: Chromium's restart count
went up, or the relay's or app's start time changed; a relay that restarts
closes every scope opened before it, their tokens answering 401) fails the
tasks in flight on it as infrastructure; each is tried again on another
computer (``retries``) and the broken one is given back to be replaced.
Each result names its ``computer``, ``scope`` and ``attempts``. Ctrl-C cancels:
each run stops its agent, ends its open recordings and stops the computers it
started, and tasks not begun are not begun. Exit status: 0 every task done,
1 one failed, 3 an infrastructure failure (or cancelled), 2 bad input.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agentenv.harness.agent_process import withhold
from agentenv.harness.backends import start
from agentenv.harness.batch_results import STATUS, broke_result, summary, table, task_result
from agentenv.harness.computer import Computer, ComputerError, agent_tokens
from agentenv.harness.fleet import Fleet, samples
from agentenv.harness.harness_errors import HarnessError
from agentenv.harness.preflight import preflight
from agentenv.harness.provision import Provisioner, pool_provisioner
from agentenv.harness.reuse import Reused
from agentenv.harness.run_store import RunStore, StoreOptions, records, store_problem
from agentenv.harness.runner import EXIT_INFRA, Run
from agentenv.harness.scheduling import (
    Schedule,
    StartComputer,
    Use,
    attempt_status,
    pool_size,
    retry,
    whole,
)
from agentenv.harness.scoped import (
    Attempt,
    asks_for_person,
    close_for,
    computer_name,
    open_for,
    where_ran,
    whole_reading,
)
from agentenv.harness.task_sources import Planned

__all__ = ["DEFAULT_SCOPES_PER_COMPUTER", "Batch"]

#: ``--scopes-per-computer``'s default (docs/harness.md says why).
DEFAULT_SCOPES_PER_COMPUTER = 4
#: The longest a task waits for room on a computer of the pool.
LEND_WAIT_S = 600.0


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
    #: ``--reuse``'s computers (each worker's, reset between its tasks).
    pool: list[Computer] = field(default_factory=list)
    _reused: Reused | None = None
    #: The computers' ``/metrics``, added up (the table's last line).
    fleet: Fleet = field(default_factory=Fleet)
    #: K: tasks a computer serves at once, each in scopes of its own; 1 is a
    #: computer per task (started by the run, or ``--reuse``'s pool).
    scopes_per_computer: int = 1
    #: Times a task that failed as infrastructure on scopes is tried again.
    retries: int = 1
    #: Where computers come from on scopes (default: :class:`EngineProvisioner`).
    provisioner: Provisioner | None = None
    schedule: Schedule | None = None
    #: The pool on scopes: schedule key -> the computer.
    hosts: dict[str, Computer] = field(default_factory=dict)
    _room: threading.Condition | None = None
    #: Ctrl-Cs received (SIGINT, counted by the batch's handler).
    _interrupts: int = 0

    def __post_init__(self) -> None:
        self._room = threading.Condition(self._lock)
        if self.reuse:
            self._reused = Reused(self._start_reused, self.say, self._lock, self.pool)
        if self.scopes_per_computer > 1:
            most = max((len(p.task.agents()) or 1 for p in self.tasks), default=1)
            if self.provisioner is None:
                self.provisioner = pool_provisioner(
                    self.backend,
                    self.scopes_per_computer * most,
                    pool_size(self.parallel, self.scopes_per_computer),
                    self.namespace,
                    self.kube_context,
                    networks=lambda: self._stores().networks(
                        any(records(p.task) for p in self.tasks)
                    ),
                )
            self.schedule = Schedule(
                self.scopes_per_computer,
                pool_size(self.parallel, self.scopes_per_computer),
                self.provisioner.max_scopes,
            )

    @property
    def resets(self) -> list[float]:
        """``--reuse``: each reset's seconds."""
        return self._reused.resets if self._reused is not None else []

    @property
    def on_scopes(self) -> bool:
        return self.schedule is not None

    def _start_reused(self, image: str | None) -> Computer:
        """A computer for ``--reuse``: every agent any task connects (it
        serves them all in turn)."""
        names = sorted({n for p in self.tasks for n in p.task.agents()})
        return start(
            self.backend,
            image,
            agent_tokens(names),
            namespace=self.namespace,
            kube_context=self.kube_context,
            networks=self._stores().networks(any(records(p.task) for p in self.tasks)),
        )

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
        if self.on_scopes:
            self._on_scopes(planned)
            return
        folder = self.out / planned.name
        folder.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        lend = self._reused.lend if self._reused is not None else None
        run, status = self._run(planned, folder, lend)
        took = time.monotonic() - began
        with self._lock:
            self.results[planned.name] = task_result(planned, run, status, took, folder)
        self.say(f"{planned.name}: {STATUS.get(status, 'infrastructure')} in {took:.1f}s")

    def _run(
        self,
        planned: Planned,
        folder: Path,
        lend: Any,
    ) -> tuple[Run, int]:
        """``planned`` run once in ``folder``, its terminal output in its run.log."""
        with open(folder / "run.log", "w") as log:
            run = Run(
                planned.task,
                folder,
                stream=log,
                store_options=self.store_options,
                stores=self._stores(),
                lend=lend,
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
        with self._lock:
            self.runs.pop(planned.name, None)
        return run, status

    # -- on scopes (--scopes-per-computer K) ---------------------------------------

    def _on_scopes(self, planned: Planned) -> None:
        """``planned`` in scopes of its own on a computer of the pool, tried
        again on another after an infrastructure failure (``retries``)."""
        folder = self.out / planned.name
        avoid: frozenset[str] = frozenset()
        attempts: list[dict[str, Any]] = []
        began = time.monotonic()
        number = 0
        while True:
            number += 1
            if folder.exists():  # an earlier attempt's: kept beside, named by its number
                folder.rename(self.out / f"{planned.name}.attempt-{number - 1}")
                attempts[-1]["out"] = str(self.out / f"{planned.name}.attempt-{number - 1}")
            folder.mkdir(parents=True, exist_ok=True)
            attempt = Attempt(f"{planned.name}#{number}-{secrets.token_hex(3)}", number, avoid)
            attempt.people = asks_for_person(planned.task)
            tried = time.monotonic()
            run, status = self._run(planned, folder, functools.partial(self._place, attempt))
            broke = self._let_go(attempt, run)
            outcome = attempt_status(STATUS.get(status, "infrastructure"), broke)
            where = where_ran(attempt)
            attempts.append(
                {
                    "attempt": number,
                    "status": outcome,
                    "exit_status": status,
                    "seconds": round(time.monotonic() - tried, 2),
                    **where,
                    "computer_broke": broke,
                    "out": str(folder),
                }
            )
            if outcome != STATUS.get(status) and outcome == "infrastructure":
                status = EXIT_INFRA
            if self.stopping.is_set() or not retry(outcome, number, self.retries):
                break
            self.say(f"{planned.name}: infrastructure failure on {where['computer']}; trying again")
            avoid = avoid | {key for key, _ in attempt.leases}
        took = time.monotonic() - began
        with self._lock:
            result = task_result(planned, run, status, took, folder)
            result.update(where, attempts=attempts)
            self.results[planned.name] = result
        self._give_back_spare()
        shown = f" on {where['computer']}" if where["computer"] else ""
        self.say(f"{planned.name}: {STATUS.get(status, 'infrastructure')} in {took:.1f}s{shown}")

    def _place(self, attempt: Attempt, image: str | None, agents: list[str]) -> Computer:
        """A run's ``lend`` on scopes: a computer of the pool with room (waiting
        for one, or starting one), and a scope opened there for each agent."""
        assert self.schedule is not None and self.provisioner is not None
        assert self._room is not None
        need = len(agents) or 1
        end = time.monotonic() + LEND_WAIT_S
        while True:
            key, start = self._reserve(attempt, image, need, end)
            if start:
                try:
                    computer = self.provisioner.provide(image)
                except Exception as exc:
                    with self._room:
                        self.schedule.failed(key)
                        self._room.notify_all()
                    raise ComputerError(f"no computer for the pool: {exc}") from None
                # Its first reading, before any task runs on it: the baseline
                # a Chromium restart is counted from. (Taken later, by the
                # first scrape round or as an attempt ends, it could already
                # hold the restart it should reveal.)
                baseline, _ = whole_reading(computer)
                with self._room:
                    self.hosts[key] = computer
                    self.schedule.ready(key)
                    self.schedule.seen(key, baseline)
                    self._room.notify_all()
            with self._room:
                while key in self.schedule.hosts and self.schedule.hosts[key].state == "starting":
                    self._room.wait(1.0)
                    if time.monotonic() > end:
                        self.schedule.end(key, attempt.id)
                        raise ComputerError("the pool's computer did not start in time")
                if key not in self.schedule.hosts:
                    continue  # it failed to start: placed again
                host = self.hosts[key]
            try:
                scoped = open_for(host, agents, attempt.people)
            except ComputerError:
                with self._room:
                    self.schedule.end(key, attempt.id)
                    if not host.ready():
                        self.schedule.broke(key)
                    self._room.notify_all()
                self._give_back_drained()
                raise
            attempt.leases.append((key, scoped))
            attempt.names[key] = computer_name(host)
            return scoped

    def _reserve(
        self, attempt: Attempt, image: str | None, need: int, end: float
    ) -> tuple[str, bool]:
        """A computer of the pool with room held for ``attempt``: (its key,
        whether the caller starts it)."""
        assert self.schedule is not None and self._room is not None
        with self._room:
            while True:
                if self.stopping.is_set():
                    raise ComputerError("the batch is stopping: the task was not placed")
                decision = self.schedule.place(need, image, attempt.avoid)
                if isinstance(decision, Use):
                    self.schedule.take(decision.key, attempt.id, need)
                    return decision.key, False
                if isinstance(decision, StartComputer):
                    key = f"computer-{secrets.token_hex(4)}"
                    self.schedule.starting(key, image)
                    self.schedule.take(key, attempt.id, need)
                    return key, True
                left = end - time.monotonic()
                if left <= 0:
                    raise ComputerError(
                        f"no computer of the pool had room for {LEND_WAIT_S:.0f} s "
                        "(each serves --scopes-per-computer tasks)"
                    )
                self._room.wait(min(left, 2.0))

    def _let_go(self, attempt: Attempt, run: Run) -> bool:
        """Close an ended attempt's scopes and free its room; True when a
        computer it ran on broke under it (its Chromium, relay or app server
        restarted, or it no longer answers)."""
        assert self.schedule is not None and self._room is not None
        broke = False
        for key, scoped in attempt.leases:
            problems = close_for(scoped)
            host = scoped.host
            assert host is not None
            found, answers = whole_reading(host)
            with self._room:
                if found is None and not answers:
                    self.schedule.broke(key)
                elif found is not None and not whole(found):
                    # Its relay did not answer for scoped.RELAY_BACK_S: it is not coming back.
                    self.schedule.broke(key)
                    self._broke_said(key, "its relay is not answering")
                elif found is not None:
                    why = self.schedule.seen(key, found)
                    if why is not None:
                        self._broke_said(key, why)
                broke = broke or self.schedule.is_broken(key)
                self.schedule.end(key, attempt.id)
                self._room.notify_all()
            if problems and not broke:
                # The run has ended and closed its stream: its run.log, appended to.
                with open(run.out / "run.log", "a") as log:
                    print("; ".join(problems), file=log)
        self._give_back_drained()
        return broke

    def _broke_said(self, key: str, why: str) -> None:
        name = computer_name(self.hosts[key]) if key in self.hosts else key
        # Under the lock: print straight, as say would.
        print(
            f"computer {name} broke ({why}): its tasks in flight are "
            "tried again elsewhere, and it is replaced",
            file=self.stream or sys.stdout,
            flush=True,
        )

    def _give_back_drained(self) -> None:
        """Give back the broken computers no task runs on any more."""
        assert self.schedule is not None
        with self._lock:
            gone = [self.hosts.pop(k, None) for k in self.schedule.drained()]
        self._give_back(gone, True, "a broken computer")

    def _give_back_spare(self) -> None:
        """Give back the idle computers the tasks not yet finished do not need
        (:meth:`.scheduling.Schedule.spare`): the pool shrinks as the queue drains."""
        assert self.schedule is not None
        with self._lock:
            if self.stopping.is_set():
                return  # the end's teardown gives back every computer
            unfinished = len(self.tasks) - len(self.results)
            gone = [self.hosts.pop(k, None) for k in self.schedule.spare(unfinished)]
        self._give_back(gone, False, "a computer no task needs")

    def _give_back(self, gone: list[Computer | None], broken: bool, what: str) -> None:
        """Each of ``gone`` (taken out of ``hosts``) given back to the
        provisioner, its last counts read first."""
        assert self.provisioner is not None
        for computer in gone:
            if computer is None:
                continue
            with contextlib.suppress(Exception):
                self._last_counts(computer)
            try:
                self.provisioner.give_back(computer, broken)
            except Exception as exc:  # the engine's: report, go on
                self.say(f"could not give back {what}: {exc}")

    def _last_counts(self, computer: Computer) -> None:
        """A computer's counts, read once more before it stops: its last word
        (a scrape round still in flight does not overwrite it)."""
        text = computer.metrics(timeout_s=10.0)  # its last word: worth a wait
        with self._lock:
            self.fleet.seen(computer.key, text, final=True)

    def _scrape(self) -> None:
        """A round of ``/metrics`` from every computer running now; on scopes,
        the pool's room and health as they say."""
        with self._lock:
            live = {c.key: c for r in self.runs.values() for c in list(r.computers.values())}
            live.update((c.key, c) for c in self.pool)
            pool = dict(self.hosts)
            live.update((c.key, c) for c in pool.values())
        answers = {key: computer.metrics() for key, computer in live.items()}
        with self._lock:
            self.fleet.round(key for key, text in answers.items() if self.fleet.seen(key, text))
            if self.schedule is not None and self._room is not None:
                for key, computer in pool.items():
                    text = answers.get(computer.key)
                    if text is None:
                        continue
                    with contextlib.suppress(ValueError):
                        why = self.schedule.seen(key, samples(text))
                        if why is not None:
                            self._broke_said(key, why)
                self._room.notify_all()

    def _table(self) -> str:
        with self._lock:
            running = [(name, run.current) for name, run in sorted(self.runs.items())]
            done = len(self.results)
        return table(running, done, len(self.tasks), self.fleet.line())

    def run(self) -> int:
        """Run every task; the exit code. Ctrl-C (SIGINT, in the main thread)
        cancels: the agents are stopped, recordings ended and computers
        stopped. The handler is the batch's from the start, and never raises:
        a KeyboardInterrupt raised wherever the main thread stood (inside the
        cancelling itself, or as ``run`` returned) left computers running or
        ended the process with -2 instead of exit code 3 (seen in CI). A
        second Ctrl-C says it is still stopping; after a cancel the handler
        stays until the process ends."""
        self.out.mkdir(parents=True, exist_ok=True)
        each = f", up to {self.scopes_per_computer} a computer" if self.on_scopes else ""
        self.say(f"{len(self.tasks)} tasks, {self.parallel} at a time{each}; results in {self.out}")
        began = time.monotonic()
        previous: Any = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, self._interrupted)
        withhold(p.task for p in self.tasks)  # no agent sees another task's credentials
        pool = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="task")
        futures: list[Future[None]] = [pool.submit(self._one, p) for p in self.tasks]
        shown = ""
        try:
            try:
                while not all(f.done() for f in futures) and not self._interrupts:
                    self._scrape()
                    table = self._table()
                    if table != shown:
                        self.say(table)
                        shown = table
                    for _ in range(8):  # 2 s, in steps a Ctrl-C is seen between
                        if self._interrupts:
                            break
                        time.sleep(0.25)
            except KeyboardInterrupt:  # the handler is not ours (not the main thread)
                self._interrupts += 1
            if self._interrupts:
                self.say("cancelling: stopping agents, ending recordings, stopping computers ...")
                self.stopping.set()
                with self._lock:
                    for run in self.runs.values():
                        run.cancelled.set()
                for f in futures:
                    f.cancel()
        finally:
            pool.shutdown(wait=True)
            self._broke(futures)
            self._scrape()
            for computer in self.pool:
                try:
                    computer.stop()
                except Exception as exc:  # the docker SDK's: report, go on stopping
                    self.say(f"could not stop a computer: {exc}")
            self._give_back_all()
            closing = getattr(self.provisioner, "close", None)
            if callable(closing):  # a pool of its own (Swarm's service): removed
                closing()
            if self.stores is not None:
                try:
                    self.stores.close()  # after the last computer: it leaves the network
                except HarnessError as exc:
                    self.say(str(exc))
            if previous is not None and not self._interrupts:
                signal.signal(signal.SIGINT, previous)
        return self._summary(time.monotonic() - began)

    def _broke(self, futures: list[Future[None]]) -> None:
        """A task whose worker raised (a bug, a full disk) ran but has no
        result: written as infrastructure with the cause, never "not run"."""
        for planned, future in zip(self.tasks, futures, strict=True):
            if future.cancelled() or not future.done():
                continue
            exc = future.exception()
            if exc is None:
                continue
            why = f"the harness failed running it: {type(exc).__name__}: {exc}"
            with self._lock:
                found = self.results.get(planned.name)
                if found is None or found.get("status") == "not run":
                    self.results[planned.name] = broke_result(planned, why)
            self.say(f"{planned.name}: infrastructure ({why})")

    def _give_back_all(self) -> None:
        """The end of a batch on scopes: every computer of the pool given back."""
        if self.provisioner is None:
            return
        with self._lock:
            pool = list(self.hosts.items())
            self.hosts.clear()
        for key, computer in pool:
            with contextlib.suppress(Exception):
                self._last_counts(computer)
            broken = self.schedule is not None and self.schedule.is_broken(key)
            try:
                self.provisioner.give_back(computer, broken)
            except Exception as exc:  # the engine's: report, go on stopping
                self.say(f"could not stop a computer: {exc}")

    def _interrupted(self, signum: int, frame: Any) -> None:
        """SIGINT: counted, read by ``run``'s loop. Nothing here takes a lock
        (the main thread may hold it where the signal lands): the second
        one's words are printed without, and dropped if the stream is busy
        in this very thread."""
        self._interrupts += 1
        if self._interrupts > 1:
            with contextlib.suppress(RuntimeError, OSError, ValueError):
                print(
                    "still stopping: ending recordings and stopping computers "
                    "(kill -9 leaves them)",
                    file=self.stream or sys.stdout,
                    flush=True,
                )

    def _summary(self, took: float) -> int:
        results = [
            self.results.get(p.name, {"task": p.name, "status": "not run"}) for p in self.tasks
        ]
        lines, status = summary(results, took, self.out / "results.jsonl", self.fleet.line())
        for line in lines:
            self.say(line)
        return status
