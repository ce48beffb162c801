"""A pool of computers as ONE replicated Docker Swarm service, scaled with
the engine's own replicas (``docker service scale``), each computer serving
up to K tasks at once, each task in a scope of its own (``scopes/open``).

The harness does not schedule containers: Swarm places and starts the
replicas. The pool only asks for a number of them, finds each replica's
address (its node's, on the ports the node picked: host-mode publishing, as
:mod:`agentenv.harness.swarm` explains) and waits for its ``/readyz``, then
lends its free scopes to tasks. Every replica runs with
``AGENTENV_MAX_SCOPES`` = K, so a computer itself queues past K (the batch
never opens past it: the pool lends at most K a computer).

**How many.** Each :meth:`SwarmPool.tick` (every ``interval_s`` in the
pool's own thread) asks for :func:`agentenv.harness.scaling.wanted_computers`
of the tasks waiting in :meth:`SwarmPool.acquire` (queued) and the tasks
holding a scope (running): ceil(ceil((queued + running) / K) * margin),
within [least, most]. The formula's one home is
:mod:`agentenv.harness.scaling`; the simulation and the Kubernetes
manifests use the same.

**Which ones leave: a drain, because Swarm would choose otherwise.** On a
scale-down, swarmkit's replicated orchestrator
(``manager/orchestrator/replicated/services.go``, ``reconcile``; the sort
orders in ``replicated/slot.go``; read at moby/swarmkit) does this with the
service's slots:

1. a slot counts (``orchestrator.GetRunnableAndDeadSlots``) while a task of
   it has a desired state up to running, *or is marked not to be restarted*
   (``t.DontRestart``: what the restart supervisor sets when the restart
   policy is ``none`` and the task's container exited);
2. ``sort.Sort(slotsByRunningState(...))``: slots whose task is observed
   running first, the others after;
3. each slot is numbered as the nth copy of the service on its node
   (1, 2, 3, ... in that order), and ``sort.Sort(slotsByIndex)`` orders by
   that number (a slot without a node last);
4. the first ``replicas`` slots stay; the rest get desired state ``REMOVE``.

Left to itself, it picks among running tasks by node balance, then in map
order (an unstable sort): whichever computer it likes, busy or not. So the
pool makes the choice itself, and makes it the only one Swarm can take:

- it stops lending the computers it chose (:func:`~agentenv.harness.scaling.drain_plan`:
  the least busy; on several nodes, only cuts that leave every node it takes
  from at one level and none above, so no tie is left to Swarm's sort);
- it waits until each is idle (its tasks end as they would; nothing is cut);
- it stops each one's container (SIGTERM, the computer's own shutdown), so
  its task is no longer running; the service never restarts a task
  (restart policy ``none``) and its slot stays, marked not to restart (1);
- only then, with no replica starting (a starting task is not running
  either, and would tie with the stopped ones in 2; nor one lent before
  Swarm lists its task running, see :meth:`SwarmPool._ports`), it scales the
  service down by exactly the stopped ones, which sort last (2, 3) and are
  removed.

A replica whose container exited on its own (a crash) is scaled away the
same way, and the next tick asks for a new one if the load wants it.

Verified on this machine's engine (Docker 20.10.24, one-node swarm): a
3-replica service with restart ``none``, one task's container stopped: the
service shows 2/3 and starts no replacement; ``docker service scale`` to 2
removes that slot and leaves the two running ones. And
``tests/integration/test_swarm_pool.py`` grows and shrinks a pool under a
load of tasks and loses none.

**Limits.** Stopping a container goes through this machine's engine, so the
pool drains replicas on the node it runs on (a manager); a replica on
another node is only ever removed by a crash, and the pool shrinks no
further than the replicas on this node allow (it says so in :attr:`SwarmPool.notes`).
On several nodes a cut of one may be impossible without a tie (two nodes
with the most replicas): the pool waits for a larger surplus.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentenv.harness.computer import DEFAULT_IMAGE, Computer, ComputerError, users_setting
from agentenv.harness.scaling import (
    MARGIN,
    Member,
    drain_plan,
    may_scale_down,
    wanted_computers,
)
from agentenv.harness.swarm import service_spec

__all__ = ["Replica", "SwarmPool"]

#: How long a drained computer's container has to stop after SIGTERM
#: (the recorder's 60 s to finish its files, and some), before SIGKILL.
STOP_S = 75.0
#: How long a new replica may take from its task's start to ``/readyz``.
READY_S = 180.0
#: A lent computer's weight in the drain's choice: past any count of tasks.
LENT = 1 << 20
#: Observed task states past running: the task's container is gone.
ENDED = ("complete", "failed", "shutdown", "rejected", "orphaned", "remove")


@dataclass(eq=False)
class Replica:
    """One task of the pool's service, as the pool follows it."""

    task: str
    node: str
    #: starting, ready, draining, stopping, stopped.
    state: str = "starting"
    computer: Computer | None = None
    busy: int = 0
    #: Lent whole to a batch (:meth:`SwarmPool.provide`) until given back.
    lent: bool = False
    since: float = field(default_factory=time.monotonic)
    container: str = ""
    #: Its task's state as Swarm lists it (``starting`` until the image's
    #: first HEALTHCHECK passes, though it may be lent before: :meth:`SwarmPool._ports`).
    observed: str = ""


class SwarmPool:
    """Computers as one replicated Swarm service: :meth:`start`, then
    :meth:`acquire` / :meth:`release` a scope's place on a computer while the
    pool's thread scales the service; :meth:`close` removes it."""

    def __init__(
        self,
        image: str | None = None,
        *,
        k: int,
        least: int = 1,
        most: int = 4,
        margin: float = MARGIN,
        interval_s: float = 1.0,
        host: str = "127.0.0.1",
        networks: list[str] | Callable[[], list[str]] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        wanted_computers(0, 0, k=k, margin=margin, least=least, most=most)  # checks the settings
        self.image = image or DEFAULT_IMAGE
        self.k, self.least, self.most, self.margin = k, least, most, margin
        #: ``AGENTENV_MAX_SCOPES`` of every replica: K (the provisioner's).
        self.max_scopes = k
        self.interval_s, self.host = interval_s, host
        #: The Docker networks the replicas join (the run store's), or what
        #: names them when the service starts (the store opens first).
        self.networks = networks
        self.control = secrets.token_urlsafe(24)
        self.name = f"agentenv-pool-{secrets.token_hex(4)}"
        self.env = {
            **(env or {}),
            "AGENTENV_CONTROL_TOKEN": self.control,
            "AGENTENV_USERS": users_setting(None),
            "AGENTENV_MAX_SCOPES": str(k),
        }
        self.replicas: dict[str, Replica] = {}
        #: What happened, one line an event (grew, drained, stopped, shrank).
        self.notes: list[str] = []
        #: The replicas the service was set to, in order (the last is its spec's).
        self.sizes: list[int] = []
        #: Waiting in :meth:`acquire` (``scope``) and :meth:`provide` (``whole``).
        self._queued = {"scope": 0, "whole": 0}
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._ticking = threading.Lock()
        self._starting = threading.Lock()
        self._thread: threading.Thread | None = None
        self._service: Any = None
        self._client: Any = None
        self._nodes: dict[str, str] = {}
        self._here = ""

    # -- lending (any thread) ------------------------------------------------

    def acquire(self, timeout_s: float = 120.0) -> Computer:
        """A ready computer with a free scope, its count taken (the fullest
        first: packing, so others empty and can leave); waits, counted as
        queued, at most ``timeout_s``."""

        def pick() -> Replica | None:
            free = [r for r in self.replicas.values() if r.state == "ready" and r.busy < self.k]
            if not free:
                return None
            chosen = max(free, key=lambda r: (r.busy, r.task))
            chosen.busy += 1
            return chosen

        return self._wait_for(pick, "scope", timeout_s, f"a free scope (K = {self.k})")

    def release(self, computer: Computer) -> None:
        """The task on ``computer`` is over: its scope's place is free."""
        with self._lock:
            for replica in self.replicas.values():
                if replica.computer is computer and replica.busy > 0:
                    replica.busy -= 1
                    self._lock.notify_all()
                    return

    def replace(self, computer: Computer) -> None:
        """``computer`` failed (its Chromium died): lend it no more; it leaves
        once its other tasks are over, and the scaler starts another as the
        load asks."""
        with self._lock:
            for replica in self.replicas.values():
                if replica.computer is computer and replica.state == "ready":
                    replica.state = "draining"
                    self.notes.append(f"replace {replica.task[:12]}")

    # -- the batch's provisioner (agentenv.harness.provision.Provisioner) ---------

    def provide(self, image: str | None, timeout_s: float = READY_S) -> Computer:
        """A ready replica lent whole (the batch opens its scopes itself): an
        idle warm one at once, else the next the scaler starts; waiting counts
        as K tasks queued."""
        with self._starting:
            if self._service is None:  # the first: the service starts from its image
                self.image = image or self.image
                self.start(timeout_s)
        if image is not None and image != self.image:
            raise ComputerError(
                f"the pool {self.name} runs {self.image}, not {image}: start a pool of that image"
            )

        def pick() -> Replica | None:
            spare = [
                r
                for r in self.replicas.values()
                if r.state == "ready" and not r.lent and r.busy == 0
            ]
            if not spare:
                return None
            chosen = min(spare, key=lambda r: r.task)
            chosen.lent = True
            return chosen

        return self._wait_for(pick, "whole", timeout_s, "a computer to lend whole")

    def _wait_for(
        self, pick: Callable[[], Replica | None], kind: str, timeout_s: float, what: str
    ) -> Computer:
        """Wait (at most ``timeout_s``, counted as queued of ``kind``) until
        ``pick``, called under the lock, takes a replica; its computer."""
        ends = time.monotonic() + timeout_s
        with self._lock:
            self._queued[kind] += 1
            try:
                while True:
                    chosen = pick()
                    if chosen is not None:
                        assert chosen.computer is not None  # ready: its computer is known
                        return chosen.computer
                    if self._stop.is_set():
                        raise ComputerError(
                            f"the pool {self.name} was closed while a task waited for {what}"
                        )
                    left = ends - time.monotonic()
                    if left <= 0:
                        raise ComputerError(
                            f"the pool {self.name} had no {what} in {timeout_s:.0f} s "
                            f"({self._story()}): give the pool more computers (most is "
                            f"{self.most}) or a longer wait, or run fewer tasks at once"
                        )
                    self._lock.wait(min(left, 1.0))
            finally:
                self._queued[kind] -= 1

    def _story(self) -> str:
        """The replicas by state, and the last thing the pool noted (under the lock)."""
        states: dict[str, int] = {}
        for replica in self.replicas.values():
            states[replica.state] = states.get(replica.state, 0) + 1
        busy = sum(r.busy for r in self.replicas.values())
        lent = sum(1 for r in self.replicas.values() if r.lent)
        shown = ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "no replica"
        last = f"; last: {self.notes[-1]}" if self.notes else ""
        return f"{shown}; {busy} scopes busy, {lent} lent whole{last}"

    def give_back(self, computer: Computer, broken: bool) -> None:
        """The batch is done with ``computer``: a spare again, or (``broken``)
        drained and removed; the scaler removes spares the load does not want."""
        with self._lock:
            for replica in self.replicas.values():
                if replica.computer is computer and replica.lent:
                    replica.lent = False
                    if broken and replica.state == "ready":
                        replica.state = "draining"
                        self.notes.append(f"broken {replica.task[:12]}: drained")
                    self._lock.notify_all()

    def counts(self) -> tuple[int, int]:
        """(queued, running): tasks waiting for a scope, tasks holding one. A
        computer lent whole counts as K tasks running (it is the batch's to
        fill), a batch waiting for one as K tasks queued."""
        with self._lock:
            lent = sum(1 for r in self.replicas.values() if r.lent)
            queued = self._queued["scope"] + self.k * self._queued["whole"]
            return queued, sum(r.busy for r in self.replicas.values()) + self.k * lent

    def ready(self) -> int:
        with self._lock:
            return sum(1 for r in self.replicas.values() if r.state == "ready")

    # -- the service (the pool's thread) --------------------------------------

    def start(self, timeout_s: float = READY_S) -> SwarmPool:
        """Create the service with ``least`` replicas, wait until they are ready,
        and start scaling it."""
        import docker

        try:
            self._client = docker.from_env()
            self._here = str(self._client.info().get("Swarm", {}).get("NodeID") or "")
            self._service = self._client.services.create(
                self.image,
                **service_spec(
                    self.name,
                    self.env,
                    self.networks() if callable(self.networks) else self.networks,
                    self.least,
                ),
            )
        except Exception as exc:  # the docker SDK's: not a swarm manager, image missing
            raise ComputerError(
                f"cannot start {self.image} as the swarm service {self.name}: {exc} "
                "(docker swarm init makes this engine a one-node swarm)"
            ) from None
        self.sizes.append(self.least)
        try:
            ends = time.monotonic() + timeout_s
            while self.ready() < self.least:
                if time.monotonic() > ends:
                    raise ComputerError(
                        f"{self.name}: {self.least} computers were not ready in {timeout_s:.0f} s"
                    )
                self.observe()
                time.sleep(0.25)
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception as exc:  # the engine busy or gone a moment: next tick
                self.notes.append(f"tick failed: {exc}")

    def close(self) -> None:
        """Stop scaling and remove the service (the swarm removes its tasks)."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._service is not None:
            with contextlib.suppress(Exception):
                self._service.remove()
            self._service = None

    def __enter__(self) -> SwarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _node_address(self, node: str) -> str:
        if node not in self._nodes:
            found = self._client.nodes.get(node).attrs.get("Status", {}).get("Addr") or ""
            self._nodes[node] = self.host if found in ("", "127.0.0.1", "0.0.0.0") else found
        return self._nodes[node]

    def observe(self) -> None:
        """Read the service's tasks: new ones, ports published and ``/readyz``
        answered (ready), containers that ended (stopped)."""
        tasks = self._service.tasks()
        now = time.monotonic()
        for task in tasks:
            status = task.get("Status", {})
            state = str(status.get("State", ""))
            with self._lock:
                replica = self.replicas.get(task["ID"])
                if replica is None:
                    if task.get("DesiredState") != "running" or state in ENDED:
                        continue
                    replica = Replica(task["ID"], str(task.get("NodeID") or ""))
                    self.replicas[task["ID"]] = replica
                replica.node = str(task.get("NodeID") or replica.node)
                replica.observed = state
                replica.container = str(
                    status.get("ContainerStatus", {}).get("ContainerID") or replica.container
                )
                if state in ENDED and replica.state != "stopped":
                    if replica.state != "stopping":
                        self.notes.append(f"ended {task['ID'][:12]} on its own ({state})")
                    replica.state = "stopped"
                    self._lock.notify_all()
            if replica.state == "starting" and replica.computer is None:
                ports = self._ports(replica, state, status)
                if ports.get(8080) and ports.get(9222):
                    at = self._node_address(replica.node)
                    replica.computer = Computer(
                        f"http://{at}:{ports[8080]}", f"http://{at}:{ports[9222]}", self.control
                    )
            if replica.state == "starting" and replica.computer is not None:
                if replica.computer.ready():
                    with self._lock:
                        replica.state = "ready"
                        self.notes.append(f"ready {replica.task[:12]}")
                        self._lock.notify_all()
                elif now - replica.since > READY_S:
                    replica.state = "draining"  # never ready: it leaves like a drained one
                    self.notes.append(f"not ready {replica.task[:12]} in {READY_S:.0f} s")
        with self._lock:
            known = {t["ID"] for t in tasks}
            for key in [k for k, r in self.replicas.items() if k not in known]:
                del self.replicas[key]  # removed by the swarm

    def _ports(self, replica: Replica, state: str, status: dict[str, Any]) -> dict[int, int]:
        """A replica's published ports (target -> host): from its task once
        Swarm lists it running (any node); before, from its container on this
        node. Swarm lists a task ``starting``, without its ports, until the
        image's first HEALTHCHECK passes (every 5 s), while the engine
        published them when the container started: read there, the computer
        is lent at its own ``/readyz``, seconds sooner (``python -m bench
        swarm-grow``)."""
        ports: dict[int, int] = {}
        if state == "running":
            # The first a target lists (as swarm.py reads it): the engine
            # lists a port once an address family, and 127.0.0.1 is the first's.
            for port in status.get("PortStatus", {}).get("Ports") or []:
                if port.get("PublishedPort"):
                    ports.setdefault(int(port["TargetPort"]), int(port["PublishedPort"]))
        elif state == "starting" and replica.container and replica.node == self._here:
            try:
                inspected = self._client.api.inspect_container(replica.container)
            except Exception:  # the docker SDK's: gone or not yet there; the next reading
                return {}
            bound = inspected.get("NetworkSettings", {}).get("Ports") or {}
            for target in (8080, 9222):
                found = bound.get(f"{target}/tcp") or []
                if found and found[0].get("HostPort"):
                    ports[target] = int(found[0]["HostPort"])
        return ports

    def _scale(self, replicas: int) -> None:
        """``docker service scale``: the service's own spec sent back with only
        its replicas changed. (The docker SDK's ``Service.scale`` rebuilds the
        spec, and a spec that differs is a rolling update: every task
        replaced, its computer killed under its tasks.)"""
        self._service.reload()
        spec = self._service.attrs["Spec"]
        spec["Mode"] = {"Replicated": {"Replicas": replicas}}
        api = self._client.api
        answer = api._post_json(
            api._url("/services/{0}/update", self._service.id),
            data=spec,
            params={"version": self._service.version},
        )
        api._raise_for_status(answer)
        self.sizes.append(replicas)

    def tick(self) -> None:
        """One round (one at a time): observe, stop the drained computers that
        are idle, scale away the stopped ones, then grow or start a drain
        towards the wanted number."""
        with self._ticking:
            self._tick()

    def _tick(self) -> None:
        self.observe()
        queued, running = self.counts()
        with self._lock:
            wanted = wanted_computers(
                queued, running, k=self.k, margin=self.margin, least=self.least, most=self.most
            )
            # The replicas asked for (the pool alone scales its service), some
            # perhaps not listed yet: those count as starting.
            slots = self.sizes[-1]
            by = {
                state: [r for r in self.replicas.values() if r.state == state]
                for state in ("starting", "ready", "draining", "stopping", "stopped")
            }
            unseen = max(0, slots - len(self.replicas))
            starting = len(by["starting"]) + unseen
            live = starting + len(by["ready"])
            # A computer being drained comes back before a new one is started.
            while live < wanted and by["draining"]:
                back = by["draining"].pop()
                back.state = "ready"
                live += 1
                self.notes.append(f"undrained {back.task[:12]}")
                self._lock.notify_all()
            idle = [r for r in by["draining"] if r.busy == 0]
        for replica in idle:
            self._stop_container(replica)
        for replica in by["stopping"]:
            if time.monotonic() - replica.since > STOP_S:
                self._kill_container(replica)
        unsettled = [r for r in by["ready"] + by["draining"] if r.observed != "running"]
        if may_scale_down(len(by["stopped"]), starting, len(by["stopping"]), len(unsettled)):
            # Only the stopped slots are not running: they are the ones removed.
            self._scale(slots - len(by["stopped"]))
            self.notes.append(f"shrank to {slots - len(by['stopped'])}")
            with self._lock:
                for replica in by["stopped"]:
                    self.replicas.pop(replica.task, None)
            return
        if live < wanted:
            self._scale(slots + wanted - live)
            self.notes.append(f"grew to {slots + wanted - live} (wanted {wanted})")
            return
        if live > wanted and not (starting or by["draining"] or by["stopping"] or by["stopped"]):
            local = [r for r in by["ready"] if r.node == self._here]
            if len(local) < len(by["ready"]):
                self.notes.append("replicas on other nodes are only removed when they end")
            # A computer lent whole is the batch's until given back: never chosen
            # (its weight puts it last; a plan that needs it waits).
            members = [
                Member(r.task, r.node, r.busy + (LENT if r.lent else 0)) for r in by["ready"]
            ]
            chosen = set(drain_plan(members, wanted))
            if any(self.replicas[key].lent for key in chosen if key in self.replicas):
                return
            with self._lock:
                for replica in by["ready"]:
                    if replica.task in chosen and replica.node == self._here:
                        replica.state = "draining"
                        self.notes.append(f"draining {replica.task[:12]} (wanted {wanted})")

    def _stop_container(self, replica: Replica) -> None:
        with self._lock:
            if replica.state != "draining" or replica.busy:
                return  # lent again, or a task came back in the meantime
            replica.state = "stopping"
            replica.since = time.monotonic()
        try:
            self._client.containers.get(replica.container).kill(signal="SIGTERM")
            self.notes.append(f"stopping {replica.task[:12]}")
        except Exception as exc:  # already gone: the next observe sees it ended
            self.notes.append(f"stop {replica.task[:12]}: {exc}")

    def _kill_container(self, replica: Replica) -> None:
        with contextlib.suppress(Exception):
            self._client.containers.get(replica.container).kill()
