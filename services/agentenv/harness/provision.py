"""Where a batch on scopes gets its computers: one small seam.

``agentenv run --scopes-per-computer K`` (:mod:`.scheduling`, :mod:`.batch`)
never starts or stops a computer itself. It asks a :class:`Provisioner`:

- ``provide(image)`` hands over a **ready** computer (its ``/readyz`` answered)
  started from ``image`` with a control token (``Computer.token``) and
  ``AGENTENV_MAX_SCOPES`` set to :attr:`Provisioner.max_scopes`, and no agent
  of its own: every task's agents get scopes the batch opens with
  ``scopes/open`` and closes with ``scopes/close``. It may block while one
  starts, bounded; it raises :class:`~.computer.ComputerError` when it cannot
  give one (the batch fails the task waiting for it as infrastructure).
- ``give_back(computer, broken)`` takes it back when the batch is done with
  it: at the end of the batch, or earlier once it is idle and the tasks not
  yet finished do not need it (``broken=False``: the queue draining), or as
  soon as its last task in flight has ended after it broke (``broken=True``:
  its Chromium restarted, or it stopped answering). A provisioner may stop it, keep it warm for the
  next ``provide``, or replace it in a pool of its own; the batch asks
  ``provide`` again for a replacement when it needs one.

Every call comes from a batch's worker threads: an implementation guards its
own state. :class:`EngineProvisioner` is the default, one computer started on
demand per ``provide`` through :func:`.backends.start` (``docker``,
``swarm``, ``kubernetes``) and stopped at ``give_back``; a pool kept by an
engine (a Swarm replicated service, a Kubernetes warm pool) plugs in as
another implementation, given to :class:`~.batch.Batch` as ``provisioner``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from agentenv.harness.backends import start
from agentenv.harness.computer import Computer

__all__ = ["EngineProvisioner", "Provisioner", "pool_provisioner"]


class Provisioner(Protocol):
    """Hands a batch ready computers and takes them back (see the module)."""

    #: ``AGENTENV_MAX_SCOPES`` of every computer it provides.
    max_scopes: int

    def provide(self, image: str | None) -> Computer:
        """A ready computer from ``image``, with a control token, taking up
        to :attr:`max_scopes` scopes opened on demand."""
        ...

    def give_back(self, computer: Computer, broken: bool) -> None:
        """The batch is done with ``computer`` (``broken``: it must not serve again)."""
        ...


@dataclass
class EngineProvisioner:
    """A computer started per :meth:`provide` on ``backend`` and stopped at
    :meth:`give_back` (the default provisioner)."""

    max_scopes: int
    backend: str = "docker"
    namespace: str | None = None
    kube_context: str | None = None
    #: The Docker networks a computer joins (the run store's, ``--network``),
    #: asked at each start: the local store opens at the first.
    networks: Callable[[], list[str]] = field(default=lambda: [])

    def provide(self, image: str | None) -> Computer:
        return start(
            self.backend,
            image,
            {},
            namespace=self.namespace,
            kube_context=self.kube_context,
            networks=self.networks(),
            settings={"AGENTENV_MAX_SCOPES": str(self.max_scopes)},
        )

    def give_back(self, computer: Computer, broken: bool) -> None:
        computer.stop()


def pool_provisioner(
    backend: str,
    k: int,
    most: int,
    namespace: str | None,
    kube_context: str | None,
    networks: Callable[[], list[str]],
) -> Provisioner:
    """A batch's provisioner on ``backend``: on Swarm, one replicated service
    scaled by the engine's replicas on the queue and the tasks running
    (:mod:`.swarm_pool`, 1 to ``most`` computers); elsewhere a computer
    started per ``provide``. ``k``: the scopes each computer takes."""
    if backend == "swarm":
        from agentenv.harness.swarm_pool import SwarmPool

        return SwarmPool(None, k=k, least=1, most=most, networks=networks)
    return EngineProvisioner(k, backend, namespace, kube_context, networks=networks)
