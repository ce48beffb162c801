"""A run's store, opened once for all its tasks: which one ``--store`` names
(:mod:`.store`), whether a task needs one, and what would stop it before
anything is deployed.

A task run alone (:class:`~.runner.Run`) and a batch of them
(:class:`~.batch.Batch`) make their store in one place, :meth:`RunStore.of`,
from the same settings of theirs: a setting passed by one and not the other
would fall to its default (``backend="docker"``) without a word.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from agentenv.harness.engine import engine_problem
from agentenv.harness.local_store import LocalStore, start_cluster, start_container
from agentenv.harness.store import FolderStore, S3Store, Store, StoreError, valid_store
from agentenv.protocol.recording import BrowserRecordingManifest, rebuild

__all__ = [
    "Recorded",
    "RunStore",
    "StoreHolder",
    "StoreOptions",
    "attaches",
    "open_store",
    "records",
    "registered",
    "store_problem",
]


def open_store(
    spec: str,
    out: Path,
    *,
    say: Any = print,
    role_arn: str | None = None,
    computer_endpoint_url: str | None = None,
    share_own: bool = False,
    backend: str = "docker",
    join: tuple[str, ...] = (),
    namespace: str | None = None,
    kube_context: str | None = None,
) -> Store:
    """The store ``spec`` names: ``local`` (for ``backend``: a container on a
    network of its own, an overlay for a swarm, joining ``join`` too; a pod
    and Service in ``namespace`` for Kubernetes), ``file`` or
    ``s3://bucket/prefix``."""
    if spec == "local" and backend == "kubernetes":
        return start_cluster(say, namespace=namespace, context=kube_context)
    if spec == "local":
        return start_container(say, swarm=backend == "swarm", join=join)
    if spec == "file":
        return FolderStore(out)
    parts = urlsplit(spec)
    if not valid_store(spec):
        raise StoreError(f"--store {spec!r} is not a store: give local, file or s3://bucket/prefix")
    import boto3

    session = boto3.session.Session()
    return S3Store(
        parts.netloc,
        parts.path.strip("/"),
        session,
        computer_endpoint_url=computer_endpoint_url,
        role_arn=role_arn,
        say=say,
        share_own=share_own,
    )


@dataclass
class StoreOptions:
    """What ``agentenv run`` says of its store (the ``--store*`` and ``--network`` flags)."""

    spec: str = "local"
    role_arn: str | None = None
    computer_endpoint_url: str | None = None
    share_own: bool = False
    #: A Docker network of this engine that computers the run starts join, and
    #: the local store too (for a computer attached by URL that is on it).
    network: str | None = None


def records(task: Any) -> bool:
    """Whether ``task`` (a :class:`~agentenv.harness.steps.Task`) starts a recording."""
    return any(step.type == "start_browser_recording" for step in task.steps)


def attaches(task: Any) -> bool:
    """Whether ``task`` attaches to a computer by URL (one the run does not start)."""
    return any(step.type == "deploy_env" and getattr(step, "url", None) for step in task.steps)


def store_problem(options: StoreOptions, task: Any, backend: str) -> str | None:
    """Why the run's store could not reach ``task``'s computers, found before
    anything is deployed; None when it can (or the task records nothing)."""
    if options.spec != "local" or not records(task):
        return None
    if backend == "kubernetes":
        return None  # a pod and Service of its own, beside the computers' pods
    if attaches(task) and not options.network:
        return (
            "a computer attached by URL cannot reach the local store, which serves only the "
            "computers this run starts: give --network NAME (a Docker network of this engine "
            "that the computer is on), or --store s3://bucket/prefix (a store it reaches)"
        )
    if backend in ("docker", "swarm"):
        return engine_problem()
    return None


class StoreHolder(Protocol):
    """What a run's store is made for: a :class:`~.runner.Run` or a :class:`~.batch.Batch`."""

    @property
    def store_options(self) -> StoreOptions: ...
    @property
    def out(self) -> Path: ...
    @property
    def backend(self) -> str: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def kube_context(self) -> str | None: ...
    def say(self, text: str) -> None: ...


class RunStore:
    """The store of one ``agentenv run`` (one task, or a batch): opened at its
    first use, shared by the run's tasks (each recording has a grant of its
    own), closed once, after the last computer has stopped."""

    @classmethod
    def of(cls, holder: StoreHolder) -> RunStore:
        """The store ``holder``'s flags name, not opened yet."""
        return cls(
            holder.store_options,
            holder.out,
            backend=holder.backend,
            say=holder.say,
            namespace=holder.namespace,
            kube_context=holder.kube_context,
        )

    def __init__(
        self,
        options: StoreOptions,
        out: Path,
        *,
        backend: str = "docker",
        say: Any = print,
        namespace: str | None = None,
        kube_context: str | None = None,
    ) -> None:
        self.options, self.out, self.backend, self.say = options, out, backend, say
        self.namespace, self.kube_context = namespace, kube_context
        self._store: Store | None = None
        self._failed: StoreError | None = None
        self._lock = threading.Lock()

    def get(self) -> Store:
        """The store, opened once; a store that failed to open fails every task
        that needs it at once, with the same error (not a minute's wait each)."""
        with self._lock:
            if self._failed is not None:
                raise StoreError(str(self._failed))
            if self._store is None:
                options = self.options
                try:
                    self._store = open_store(
                        options.spec,
                        self.out,
                        say=self.say,
                        role_arn=options.role_arn,
                        computer_endpoint_url=options.computer_endpoint_url,
                        share_own=options.share_own,
                        backend=self.backend,
                        join=(options.network,) if options.network else (),
                        namespace=self.namespace,
                        kube_context=self.kube_context,
                    )
                except StoreError as exc:
                    self._failed = exc
                    raise
            return self._store

    @property
    def opened(self) -> Store | None:
        """The store, if it has been opened."""
        return self._store

    def networks(self, recording: bool) -> list[str]:
        """The Docker networks a computer joins: the local store's (opened now,
        before the computer, when it will record) and ``--network``."""
        found: list[str] = []
        if self.options.spec == "local" and recording:
            store = self.get()
            if isinstance(store, LocalStore) and store.network:
                found.append(store.network)
        if self.options.network:
            found.append(self.options.network)
        return found

    def close(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()


@dataclass
class Recorded:
    """A recording a run started: where it is kept in the store and downloaded to."""

    name: str
    env_id: str
    recording_id: str
    folder: Path
    key: str  # its place in the store: <run_id>/<name>
    must_succeed: bool = True  # the start's fail_task_on_error
    manifest: BrowserRecordingManifest | None = None


def registered(folder: Path, recording_id: str, names: list[str]) -> BrowserRecordingManifest:
    """A recording as the store held it, downloaded into ``folder`` (``names``):
    its own manifest when it was uploaded (its recorder ended it on the way
    down), else one rebuilt from the names."""
    uploaded = folder / "manifest.json"
    if "manifest.json" in names:
        try:
            found = BrowserRecordingManifest.model_validate_json(uploaded.read_bytes())
        except ValueError:
            found = None
        if found is not None and found.recording_id == recording_id:
            return found
    log = folder / "log.jsonl"
    lines = len(log.read_bytes().splitlines()) if log.exists() else None
    return rebuild(recording_id, names, lines)
