"""Where the harness starts computers: one function for every backend.

- ``docker``: a container on this machine's engine (:func:`.computer.deploy`),
  the run folder mounted when the store is ``file``;
- ``swarm``: a one-replica Docker Swarm service (:func:`.swarm.deploy_service`);
- ``kubernetes``: a pod with its Secret and Service
  (:func:`.kubernetes.deploy_pod`), in ``namespace`` through ``kube_context``.

A run's ``deploy_env`` and a batch's pool (``--reuse``) both start computers
here; attaching to a running computer by URL is :func:`.computer.deploy`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentenv.harness.computer import Computer, deploy

__all__ = ["BACKENDS", "start", "stop_all"]

BACKENDS = ("docker", "swarm", "kubernetes")


def start(
    backend: str,
    image: str | None,
    agents: dict[str, str],
    *,
    artifacts: Path | None = None,
    namespace: str | None = None,
    kube_context: str | None = None,
    networks: list[str] | None = None,
    settings: dict[str, str] | None = None,
) -> Computer:
    """Start a computer from ``image`` on ``backend`` for ``agents`` (name ->
    token), on the Docker ``networks`` (the run store's, ``--network``; not
    for Kubernetes), with more ``settings`` in its environment (such as
    ``AGENTENV_MAX_SCOPES``), and wait until it is ready; the caller stops it."""
    if backend == "swarm":
        from agentenv.harness.swarm import deploy_service

        return deploy_service(image, agents=agents, networks=networks, settings=settings)
    if backend == "kubernetes":
        from agentenv.harness.kubernetes import deploy_pod

        return deploy_pod(
            image, agents=agents, namespace=namespace, context=kube_context, settings=settings
        )
    if backend == "docker":
        return deploy(
            image,
            None,
            None,
            artifacts=artifacts,
            agents=agents,
            networks=networks,
            settings=settings,
        )
    raise ValueError(f"no backend {backend!r}: one of {', '.join(BACKENDS)}")


def stop_all(
    computers: list[Computer], before_stop: Callable[[Computer], None] | None = None
) -> list[str]:
    """Stop each of ``computers`` (``before_stop`` first: a batch's last
    counts); what went wrong, in words. Nothing is a reason to leave one
    running: each is stopped whatever happened to the one before."""
    failures: list[str] = []
    for computer in computers:
        if before_stop is not None:
            try:
                before_stop(computer)
            except Exception as exc:  # never a reason to leave a computer running
                failures.append(f"teardown: could not read a computer's counts: {exc}")
        try:
            computer.stop()
        except Exception as exc:  # the docker SDK's: report, go on stopping
            failures.append(f"teardown: could not stop a computer: {exc}")
    return failures
