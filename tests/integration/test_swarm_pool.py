"""A pool of computers as one replicated Swarm service, grown and shrunk by
``docker service scale`` under a load of tasks, losing none
(:mod:`agentenv.harness.swarm_pool`).

The engine becomes a one-node swarm for the module (left at the end unless it
was one before: the ``swarm`` fixture). Each task is
real work in a scope of its own: ``scopes/open`` with the control token, the
scope's own token navigating its tab and reading it back, ``scopes/close``.
A task that fails in any way (its computer taken away under it, a refusal, a
wrong answer) is a lost task.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentenv.harness.computer import Computer
from agentenv.harness.swarm_pool import Replica, SwarmPool
from agentenv.protocol.browser import Navigate, ScopeOnly, ScopeRef, ScopesOpen
from tests.integration.test_batch import agentenv_run
from tests.support.cdp import RawCdp
from tests.support.timing import deadline, wait_for

#: Steps a task takes on its tab (each a navigation and a read back).
STEPS = 4


def _at(agent: Computer, url: str) -> bool:
    """Whether the scope's one tab is at ``url``."""
    return [t.url for t in agent.tabs()] == [url]


@dataclass
class Load:
    """Worker threads running tasks on the pool; each outcome kept."""

    pool: SwarmPool
    done: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    workers: list[tuple[threading.Thread, threading.Event]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    serial: int = 0

    def task(self) -> None:
        with self.lock:
            self.serial += 1
            name = f"task-{self.serial}"
        computer = self.pool.acquire(timeout_s=deadline(120))
        try:
            made = computer.op("scopes/open", ScopesOpen)
            agent = Computer(computer.api, computer.cdp, made.token)
            for step in range(STEPS):
                url = f"about:blank#{name}-{step}"
                agent.op("navigate", Navigate, url=url)
                # The tab's URL once the navigation commits (bounded: a busy
                # machine may list it a moment later).
                wait_for(functools.partial(_at, agent, url), f"{name} at {url}", 20)
            computer.op("scopes/close", ScopeRef, scope=made.scope)
        finally:
            self.pool.release(computer)
        with self.lock:
            self.done.append(name)

    def worker(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.task()
            except Exception as exc:  # any failure is a lost task
                with self.lock:
                    self.lost.append(f"{type(exc).__name__}: {exc}")

    def finished(self, n: int) -> bool:
        """``n`` tasks done; a lost one fails the wait at once, with the pool's story."""
        assert not self.lost, (self.lost[:3], self.pool.notes)
        return len(self.done) >= n

    def resize(self, n: int) -> None:
        """``n`` workers from now on (the ones let go finish their task first)."""
        while len(self.workers) > n:
            thread, stop = self.workers.pop()
            stop.set()
            thread.join(timeout=deadline(120))
        while len(self.workers) < n:
            stop = threading.Event()
            thread = threading.Thread(target=self.worker, args=(stop,), daemon=True)
            thread.start()
            self.workers.append((thread, stop))


@pytest.fixture
def pool(swarm: Any, image: str) -> Iterator[SwarmPool]:
    with SwarmPool(image, k=2, least=1, most=3, margin=1.0, interval_s=0.5) as made:
        yield made.start(timeout_s=deadline(180))


def _left(client: Any, service: str) -> list[str]:
    """The containers of ``service`` (a prefix of its name) still on the engine
    (this engine is shared: other tests' objects come and go meanwhile)."""
    return [
        c.attrs["Names"][0]
        for c in client.containers.list(all=True, sparse=True)
        if c.attrs.get("Labels", {}).get("com.docker.swarm.service.name", "").startswith(service)
    ]


def _settles(pool: SwarmPool, ready: int) -> Callable[[], bool]:
    """True once ``ready`` replicas serve and none is starting or leaving."""

    def probe() -> bool:
        states = [r.state for r in list(pool.replicas.values())]
        return states.count("ready") == ready and len(states) == ready

    return probe


def test_the_pool_grows_and_shrinks_under_load_and_loses_no_task(
    pool: SwarmPool, swarm: Any
) -> None:
    """6 tasks at once at K = 2 ask for 3 computers (the most): the service
    grows from 1 to 3; at 4 tasks at once it wants 2, so one computer is
    drained, stopped and scaled away while the 4 keep working on the others;
    with no load it shrinks to 1. Every task ends done; the drained computers
    held no task when stopped; the service's spec followed."""
    load = Load(pool)
    try:
        load.resize(6)
        wait_for(_settles(pool, 3), "the pool to grow to 3", timeout_s=240, interval_s=0.5)
        grown = len(load.done)
        wait_for(lambda: load.finished(grown + 12), "12 tasks on 3 computers", timeout_s=120)

        load.resize(4)
        wait_for(_settles(pool, 2), "the pool to shrink to 2 under load", 180, 0.5)
        shrunk = len(load.done)
        wait_for(lambda: load.finished(shrunk + 8), "8 tasks on 2 computers", timeout_s=120)

        load.resize(0)
        wait_for(_settles(pool, 1), "the pool to shrink to 1 with no load", 180, 0.5)
    finally:
        load.resize(0)
    notes = "\n".join(pool.notes)
    assert load.lost == [], f"{len(load.lost)} tasks lost: {load.lost[:3]}\n{notes}"
    assert len(load.done) >= 20, len(load.done)
    assert pool.sizes[0] == 1 and max(pool.sizes) == 3 and pool.sizes[-1] == 1, pool.sizes
    assert notes.count("stopping ") == 2, notes
    assert "on its own" not in notes, notes
    spec = swarm.services.get(pool.name).attrs["Spec"]["Mode"]["Replicated"]["Replicas"]
    assert spec == 1
    pool.close()
    assert swarm.services.list(filters={"name": pool.name}) == []
    wait_for(lambda: not _left(swarm, pool.name), "the swarm to remove the pool's containers", 60)


def _draining(pool: SwarmPool) -> Replica | None:
    found = [r for r in list(pool.replicas.values()) if r.state == "draining"]
    return found[0] if found else None


async def _serve(agent: Computer, name: str, seconds: float) -> int:
    """The task on a scope: a CDP connection held open with the scope's own
    token, answering, and its tab navigated and read back, for ``seconds``;
    the rounds it made. Any failure (the computer stopped under it) raises."""
    import aiohttp

    url = agent.cdp.replace("http", "ws", 1) + "/devtools/browser"
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    rounds = 0
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url, headers={"Authorization": f"Bearer {agent.token}"}) as ws,
    ):
        cdp = RawCdp(ws)
        while loop.time() < ends or rounds == 0:
            got = await cdp.call("Target.getTargets")
            assert "result" in got, got
            target = f"about:blank#{name}-{rounds}"
            await asyncio.to_thread(agent.op, "navigate", Navigate, url=target)
            await asyncio.to_thread(
                wait_for, functools.partial(_at, agent, target), f"{name} at {target}", 20
            )
            rounds += 1
            await asyncio.sleep(0.2)
    return rounds


def test_a_drained_computer_serves_its_task_until_released_and_only_then_goes(
    pool: SwarmPool, swarm: Any
) -> None:
    """The drain waits until its computer is idle. Three tasks at K = 2 want
    two computers (the service grows for the third); one ends, and the two
    left, one on each computer, want one: a computer is drained while its task
    still holds a scope there. That task keeps working for a dozen of the
    scaler's rounds (its CDP connection, held open with the scope's own token,
    answers; its tab navigates), its container runs and the service stays at
    2. Once the task ends and lets go, the computer is stopped and scaled
    away, and the other one's task works on."""
    first = pool.acquire(timeout_s=deadline(60))
    second = pool.acquire(timeout_s=deadline(60))
    assert first is second  # packed: the fullest first
    third = pool.acquire(timeout_s=deadline(240))  # the scaler grows the service for it
    assert third is not first
    scopes = {id(c): c.op("scopes/open", ScopesOpen) for c in (first, third)}
    pool.release(second)  # 2 tasks at K = 2: one computer wanted
    replica = wait_for(functools.partial(_draining, pool), "a computer drained", 60, 0.1)
    held = replica.computer
    assert held is not None and held in (first, third), pool.notes
    other = third if held is first else first
    agent = Computer(held.api, held.cdp, scopes[id(held)].token)
    rounds = asyncio.run(_serve(agent, "held", 12 * pool.interval_s))
    assert rounds >= 3, rounds
    notes = "\n".join(pool.notes)
    assert replica.state == "draining", notes
    assert swarm.containers.get(replica.container).status == "running", notes
    assert pool.sizes[-1] == 2 and "stopping " not in notes, (pool.sizes, notes)

    held.op("scopes/close", ScopeRef, scope=scopes[id(held)].scope)
    pool.release(held)  # the task is over: now it goes
    wait_for(_settles(pool, 1), "the drained computer to go", 120, 0.2)
    assert [r.computer for r in pool.replicas.values()] == [other], pool.notes
    assert f"stopping {replica.task[:12]}" in "\n".join(pool.notes), pool.notes
    assert pool.sizes[-1] == 1, pool.sizes
    survivor = Computer(other.api, other.cdp, scopes[id(other)].token)
    assert asyncio.run(_serve(survivor, "other", 1.0)) >= 1
    other.op("scopes/close", ScopeRef, scope=scopes[id(other)].scope)
    pool.release(other)


def test_a_batch_provided_whole_computers_keeps_them_and_spares_grow_and_go(
    pool: SwarmPool,
) -> None:
    """The provisioner's side (``provide`` / ``give_back``): a computer lent
    whole is never drained while lent, whatever the load says; given back, it
    is a spare the scaler removes down to ``least``; a broken one is removed."""
    first = pool.provide(None, timeout_s=deadline(60))
    second = pool.provide(None, timeout_s=deadline(240))  # the scaler starts it
    assert first is not second
    made = first.op("scopes/open", ScopesOpen)
    # No load but the batch's: both stay for as long as they are lent (watched
    # over a dozen of the scaler's rounds).
    ends = time.monotonic() + 12 * pool.interval_s
    while time.monotonic() < ends:
        ready = {id(r.computer) for r in list(pool.replicas.values()) if r.state == "ready"}
        assert {id(first), id(second)} <= ready, pool.notes
        time.sleep(0.1)
    first.op("tabs/list", ScopeOnly, scope=made.scope)
    first.op("scopes/close", ScopeRef, scope=made.scope)
    pool.give_back(second, broken=True)
    pool.give_back(first, broken=False)
    wait_for(_settles(pool, 1), "the pool to shrink to 1 after the batch", 180, 0.5)
    assert "broken" in "\n".join(pool.notes)


@dataclass
class Replicas:
    """The pool's service's replicas (its spec's, as the pool set them) while a
    batch runs, read every half second; once they fall below the most seen,
    ``go`` is made: the batch's last task waits for it."""

    client: Any
    go: Path
    seen: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def watch(self) -> None:
        while not self.stop.wait(0.5):
            for service in self.client.services.list(filters={"label": "io.agentenv.harness=1"}):
                if not service.name.startswith("agentenv-pool-"):
                    continue
                replicas = service.attrs["Spec"]["Mode"]["Replicated"]["Replicas"]
                if not self.seen or self.seen[-1] != replicas:
                    self.seen.append(replicas)
            if self.seen and max(self.seen) >= 2 and self.seen[-1] < max(self.seen):
                self.go.touch()


def test_a_batch_on_scopes_through_agentenv_run_on_the_pool(
    swarm: Any, image: str, tmp_path: Path
) -> None:
    """``agentenv run --backend swarm --scopes-per-computer 2 --parallel 6``:
    the batch's computers are replicas of one service the pool grows (one at
    the start, up to ceil(6 / 2) = 3 as the batch asks), every task done in a
    scope of its own, and the service gone at the end. And the pool shrinks
    as the batch's queue drains, before its end: the last task's agent waits
    (bounded) until the service's replicas have fallen below the most they
    were; with one task left, the batch gives back its idle computers and the
    pool wants ceil(1 * 1.25) = 2 (it would fail, its agent timing out, if the
    pool only shrank at the end)."""
    from tests.integration.test_batch_scopes import _results, _task, _tasks

    folder = _tasks(image, tmp_path, 12, None)
    go = tmp_path / "go"
    last = folder / "task-11.yaml"
    last.write_text(yaml.safe_dump(_task(image, "task-11", tmp_path / "marks", go)))
    replicas = Replicas(swarm, go)
    watching = threading.Thread(target=replicas.watch, daemon=True)
    watching.start()
    out = tmp_path / "batch"
    try:
        done = agentenv_run(
            tmp_path,
            str(folder),
            "--backend",
            "swarm",
            "--parallel",
            "6",
            "--scopes-per-computer",
            "2",
            "--out",
            str(out),
            timeout_s=900,
        )
    finally:
        replicas.stop.set()
        watching.join(timeout=10)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = _results(out)
    assert [r["status"] for r in results] == ["done"] * 12, results
    computers = {r["computer"] for r in results}
    assert 2 <= len(computers) <= 3, computers
    most = max(replicas.seen)
    assert most >= 2 and replicas.seen.index(most) < len(replicas.seen) - 1, replicas.seen
    assert go.exists(), replicas.seen
    print(f"the service's replicas, as the pool set them: {replicas.seen}")
    assert swarm.services.list(filters={"label": "io.agentenv.harness=1"}) == []
    wait_for(lambda: not _left(swarm, "agentenv-pool-"), "the pool's containers to go", 60)
