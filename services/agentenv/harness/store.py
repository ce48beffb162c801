"""Where a run's recordings go: an object store both the computer and the harness reach.

``agentenv run --store …`` picks one (SPEC.md section 5, "The store"):

- ``local`` (the default): moto's S3 server as a container of its own
  (``agentenv/store``, :mod:`.storeserver`) for the run's length, on a
  Docker network made for the run (a bridge; an attachable overlay on a
  swarm, so nodes on other machines reach it too). The run's computers join
  that network and reach the store by its container's name
  (``http://agentenv-store-<id>:5000``); the harness reaches it on a port
  published on this machine's loopback. Nothing depends on the host's
  addresses: no bridge gateway (a fresh engine lists none), no
  ``host.docker.internal``, which is why it works the same on a fresh Linux
  engine, Docker Desktop, rootless Docker and an engine behind a loopback
  ``DOCKER_HOST``. A computer attached by URL is not on the network: the run
  stops before deploying unless ``--network NAME`` names a network of this
  engine it is on (the store joins it too). On Kubernetes the same image runs
  as a pod with a ClusterIP Service in the computers' namespace
  (:func:`start_cluster`): pods reach it at the Service's name, the harness
  through a port-forward.
  The store checks signatures and IAM policies: each recording's grant is a
  role of its own, allowed ``s3:PutObject`` and ``s3:GetObject`` under that
  recording's prefix only, assumed for short-lived credentials. moto's own
  management API (``/moto-api``, which could turn the checks off) is not
  served. Unsigned requests are refused. One store serves a whole ``agentenv
  run`` (a batch's tasks share it; each recording still has its own grant)
  and is removed with its network at the end. Native tests and benches run
  the same server in a thread instead (:func:`start_local`).
- ``s3://bucket/prefix``: any S3 or S3-compatible store, with the endpoint,
  region and credentials of the standard AWS environment and config files
  (``AWS_ENDPOINT_URL_S3``, ``AWS_PROFILE``, …). Each grant's credentials
  come from STS and are scoped by a session policy to the recording's prefix:
  ``AssumeRole`` on ``--store-role`` when given, else
  ``GetFederationToken``. When STS gives nothing (a store without it, or
  credentials that cannot call it), the start fails saying so, unless
  ``--store-share-credentials`` hands computers the harness's own (with a
  warning on the terminal: they reach the whole store).
- ``file``: the run folder itself, mounted into computers this run starts
  (the first version's way). A computer attached by URL cannot use it: the
  start fails, saying to use a store.

Layout: a recording named ``NAME`` in run ``RUN`` is granted
``<prefix>/RUN/NAME``; the computer writes under
``<prefix>/RUN/NAME/<recording_id>/``. After its end the harness downloads
that folder into ``<run folder>/recordings/<recording_id>/``; names that
would leave the folder (``..``, absolute) are skipped and reported.

Credentials never reach the terminal, the run folder or an error message.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.parse import urlsplit

from agentenv.harness.engine import HARNESS_LABEL, engine_problem
from agentenv.harness.errors import HarnessError
from agentenv.harness.hardening import writable_by_the_computer
from agentenv.harness.storeserver import ADMIN_KEYS
from agentenv.harness.storeserver import PORT as STORE_PORT

__all__ = [
    "GRANT_S",
    "FolderStore",
    "LocalStore",
    "S3Store",
    "Store",
    "StoreError",
    "grant_seconds",
    "open_store",
    "prefix_policy",
    "safe_name",
    "start_local",
    "valid_store",
]

#: How long a grant's credentials last by default (a fresh one is handed at
#: the end): long enough for a long agent turn.
GRANT_S = 3600
#: The bucket of the local store.
LOCAL_BUCKET = "agentenv"
#: The local store's image (scripts/store-image.sh builds it; make image does).
STORE_IMAGE = "agentenv/store:latest"
#: How long its container may take to serve (moto's imports, on a busy machine).
STORE_READY_S = 60.0
#: How long a network may stay in use after its last computer was removed (a
#: swarm removes a service's task container after the service, within its
#: stop grace period).
NETWORK_GONE_S = 60.0
#: STS's bounds on a session's length.
_MIN_S, _MAX_S = 900, 43200


class StoreError(HarnessError):
    """The store cannot be reached, refused, or cannot serve this computer."""


# -- pure: layout and policies -------------------------------------------------------


def _code(exc: Exception) -> str:
    """An SDK error's code, never its message (which may quote the request)."""
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__)


def join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def prefix_policy(bucket: str, prefix: str) -> str:
    """The IAM policy of one recording's grant: write and read its own objects only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["s3:PutObject", "s3:GetObject"],
                    "Resource": f"arn:aws:s3:::{bucket}/{prefix}/*",
                }
            ],
        }
    )


def valid_store(spec: str) -> bool:
    """Whether ``spec`` names a store: ``local``, ``file`` or ``s3://bucket[/prefix]``."""
    parts = urlsplit(spec)
    return spec in ("local", "file") or (parts.scheme == "s3" and bool(parts.netloc))


def safe_name(name: str) -> str | None:
    """``name`` (an object's name under a recording) as a relative path that stays
    inside the recording's folder, else None."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or any(p in ("..", "") for p in name.split("/")):
        return None
    return str(path)


def grant_seconds(max_duration_s: float | None) -> int:
    """How long a start's credentials last: the recording's own limit with a margin."""
    wanted = GRANT_S if max_duration_s is None else int(max_duration_s) + 300
    return max(_MIN_S, min(_MAX_S, max(wanted, GRANT_S)))


def _session_name(key: str) -> str:
    return "agentenv-" + hashlib.sha256(key.encode()).hexdigest()[:16]


# -- the stores ------------------------------------------------------------------------


class Store(Protocol):
    where: str

    def grant(self, key: str, *, started_here: bool, seconds: int = GRANT_S) -> dict[str, Any]:
        """An upload grant reaching only ``key``'s prefix."""
        ...

    def fetch(self, key: str, recording_id: str, folder: Path) -> tuple[list[str], list[str]]:
        """Download a recording into ``folder``: (names written, names skipped)."""
        ...

    def close(self) -> None: ...


@dataclass
class FolderStore:
    """The run folder, mounted into the computers this run starts."""

    out: Path
    where: str = ""

    def __post_init__(self) -> None:
        self.folder = (self.out / "recordings").resolve()
        self.where = f"file://{self.folder}"

    def grant(self, key: str, *, started_here: bool, seconds: int = GRANT_S) -> dict[str, Any]:
        if not started_here:
            raise StoreError(
                "a file store reaches only the computers this run starts: run with the "
                "default store (--store local) or --store s3://bucket/prefix"
            )
        writable_by_the_computer(self.folder)
        return {"url": self.where}

    def fetch(self, key: str, recording_id: str, folder: Path) -> tuple[list[str], list[str]]:
        here = self.folder / recording_id
        if not here.is_dir():
            return [], []
        names = sorted(
            str(p.relative_to(here))
            for p in here.rglob("*")
            if p.is_file() and not p.name.endswith(".part")
        )
        return names, []

    def close(self) -> None:
        return


@dataclass
class S3Store:
    """Any S3 or S3-compatible store, through boto3."""

    bucket: str
    prefix: str
    session: Any  # boto3.session.Session
    endpoint_url: str | None = None  # what the harness uses (None: the SDK's own)
    computer_endpoint_url: str | None = None  # what computers are told, when different
    role_arn: str | None = None
    say: Any = print
    #: moto's local server: a role per grant (it checks role policies, not session ones).
    role_per_grant: bool = False
    #: Without STS, hand computers the harness's own credentials (only when asked).
    share_own: bool = False
    where: str = ""
    _warned: bool = False
    _clients: dict[str, Any] = field(default_factory=dict)
    #: A batch's tasks share one store: clients are made under it (a boto3
    #: session is not thread-safe).
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.where = f"s3://{join(self.bucket, self.prefix)}"

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                from botocore.config import Config

                self._clients[service] = self.session.client(
                    service,
                    endpoint_url=self.endpoint_url,
                    config=Config(
                        retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10
                    ),
                )
            return self._clients[service]

    def _fail(self, what: str, exc: Exception) -> StoreError:
        return StoreError(f"{what} at {self.where}: {_code(exc)}")

    def _credentials(self, key: str, prefix: str, seconds: int) -> dict[str, Any]:
        policy = prefix_policy(self.bucket, prefix)
        sts = self.client("sts")
        name = _session_name(f"{self.bucket}/{prefix}")
        try:
            if self.role_per_grant:
                role = self._role(name, policy)
                found = sts.assume_role(
                    RoleArn=role, RoleSessionName=name, Policy=policy, DurationSeconds=seconds
                )
            elif self.role_arn:
                found = sts.assume_role(
                    RoleArn=self.role_arn,
                    RoleSessionName=name,
                    Policy=policy,
                    DurationSeconds=min(seconds, 3600),
                )
            else:
                found = sts.get_federation_token(
                    Name=name[:32], Policy=policy, DurationSeconds=seconds
                )
        except Exception as exc:
            if self.role_per_grant or self.role_arn or not self.share_own:
                raise StoreError(
                    f"cannot get short-lived credentials for a recording at {self.where}: "
                    f"{_code(exc)}; give --store-role ARN (a role the harness may assume), "
                    "or --store-share-credentials to hand computers the harness's own"
                ) from None
            return self._own_credentials(exc)
        c = found["Credentials"]
        return {
            "access_key_id": c["AccessKeyId"],
            "secret_access_key": c["SecretAccessKey"],
            "session_token": c["SessionToken"],
            "expires_at": c["Expiration"].astimezone(UTC).isoformat(),
        }

    def _own_credentials(self, why: Exception) -> dict[str, Any]:
        own = self.session.get_credentials()
        if own is None:
            raise StoreError(
                f"no AWS credentials for {self.where}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
            )
        frozen = own.get_frozen_credentials()
        if not self._warned:
            code = _code(why)
            self.say(
                f"warning: the store gave no short-lived credentials ({code}); computers "
                "get the harness's own, which reach the whole store: give --store-role, "
                "or a store that offers STS"
            )
            self._warned = True
        expires = datetime.now(UTC) + timedelta(seconds=GRANT_S)
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            **({"session_token": frozen.token} if frozen.token else {}),
            "expires_at": expires.isoformat(),
        }

    def _role(self, name: str, policy: str) -> str:
        iam = self.client("iam")
        me = self.client("sts").get_caller_identity()["Arn"]
        trust = json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": {"AWS": me}, "Action": "sts:AssumeRole"}
                ],
            }
        )
        try:
            arn: str = iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)["Role"]["Arn"]
        except iam.exceptions.EntityAlreadyExistsException:
            arn = iam.get_role(RoleName=name)["Role"]["Arn"]
        iam.put_role_policy(RoleName=name, PolicyName="recording", PolicyDocument=policy)
        return arn

    def grant(self, key: str, *, started_here: bool, seconds: int = GRANT_S) -> dict[str, Any]:
        prefix = join(self.prefix, key)
        endpoint = (
            self.computer_endpoint_url or self.endpoint_url or self.client("s3").meta.endpoint_url
        )
        return {
            "url": f"s3://{self.bucket}/{prefix}",
            "endpoint_url": endpoint,
            "region": self.session.region_name or "us-east-1",
            **self._credentials(key, prefix, seconds),
        }

    def fetch(self, key: str, recording_id: str, folder: Path) -> tuple[list[str], list[str]]:
        s3 = self.client("s3")
        start = join(self.prefix, key, recording_id) + "/"
        written: list[str] = []
        skipped: list[str] = []
        try:
            for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._listing_prefix(start)
            ):
                for found in page.get("Contents", []):
                    if not str(found["Key"]).startswith(start):
                        continue
                    name = str(found["Key"])[len(start) :]
                    safe = safe_name(name)
                    if safe is None:
                        skipped.append(name)
                        continue
                    target = folder / safe
                    target.parent.mkdir(parents=True, exist_ok=True)
                    s3.download_file(self.bucket, str(found["Key"]), str(target))
                    written.append(safe)
        except Exception as exc:
            raise self._fail(f"cannot download recording {recording_id}", exc) from None
        return sorted(written), skipped

    def _listing_prefix(self, start: str) -> str:
        return start

    def close(self) -> None:
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()


class LocalStore(S3Store):
    """The run's own S3 server (see the module's text): a container, or a thread
    of this process for native tests."""

    server: Any = None  # the in-thread flavour's werkzeug server
    container: Any = None  # the container flavour's
    #: The Docker network made for it, which computers join (None in a thread).
    network: str | None = None
    networks: tuple[Any, ...] = ()
    #: On Kubernetes: its pod and Service (:class:`.kubernetes.PodHandle`).
    pod: Any = None

    def unreachable_from(self, container: Any) -> str | None:
        """Why a computer's container cannot reach this store, asked from inside
        it (None: it can, or it cannot be asked: a thread's store, a service)."""
        if self.container is None or not hasattr(container, "exec_run"):
            return None
        url = f"{self.computer_endpoint_url}/"
        command = [
            "/usr/bin/curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
            url,
        ]
        try:
            code, said = container.exec_run(command, user="agentenv")
        except Exception as exc:  # the docker SDK's: the computer went away
            return f"cannot ask the computer whether it reaches the run's store: {exc}"
        if code == 0 and said.strip() == b"403":  # the store refusing an unsigned request
            return None
        answer = said.decode(errors="replace").strip()[-200:]
        return (
            f"the computer cannot reach the run's store at {url} (curl exit {code}, "
            f"answer {answer!r}): the computer and the store must share a Docker network; "
            "check that the engine keeps containers on a user-defined network able to "
            "resolve each other's names (docker network inspect "
            f"{self.network}), or give --store s3://bucket/prefix"
        )

    def _listing_prefix(self, start: str) -> str:
        # moto's signature check miscomputes a query holding "/" (a Prefix with
        # one): list what stands before the first "/" of the recording's place
        # (its task's run id: the local store has no prefix of its own, so a
        # batch's tasks do not list each other's objects) and keep its keys.
        return start.split("/", 1)[0]

    def close(self) -> None:
        super().close()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        problems = _remove(self.container, self.networks)
        self.container, self.networks = None, ()
        if self.pod is not None:
            try:
                self.pod.remove()
            except HarnessError as exc:
                problems.append(str(exc))
            self.pod = None
        if problems:
            raise StoreError("cannot remove the run's store: " + "; ".join(problems))


def _remove(container: Any, networks: tuple[Any, ...]) -> list[str]:
    """Remove the store's container (with its volumes) and the networks made for
    it: what could not be removed, in words."""
    import docker.errors

    problems: list[str] = []
    if container is not None:
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            problems.append(f"container {container.name}: {exc.explanation or exc}")
    for network in networks:
        ends = time.monotonic() + NETWORK_GONE_S
        while True:
            try:
                network.remove()
                break
            except docker.errors.NotFound:
                break
            except docker.errors.APIError as exc:  # endpoints still leaving (a computer stopping)
                if time.monotonic() > ends:
                    problems.append(
                        f"network {network.name}: {exc.explanation or exc} "
                        f"(docker network rm {network.name} once its containers are gone)"
                    )
                    break
                time.sleep(0.2)
    return problems


def start_local(say: Any = print, host: str = "127.0.0.1") -> LocalStore:
    """The guarded moto server in a thread of this process, on ``host``: for the
    native tests and benches, whose computers run on this machine's loopback.
    ``agentenv run`` starts :func:`start_container` instead."""
    from agentenv.harness import storeserver

    try:
        server, keys = storeserver.serve(host)
    except OSError as exc:
        raise StoreError(f"cannot start the local store on {host}: {exc.strerror}") from None
    endpoint = f"http://{host}:{server.server_port}"
    store = _opened(keys, endpoint, None, say)
    store.server = server
    return store


def _opened(
    keys: dict[str, str], endpoint: str, computer_endpoint: str | None, say: Any
) -> LocalStore:
    """A local store's client, with a bucket of its own (``agentenv-<random>``)."""
    import secrets

    import boto3

    session = boto3.session.Session(
        aws_access_key_id=keys["AccessKeyId"],
        aws_secret_access_key=keys["SecretAccessKey"],
        region_name="us-east-1",
    )
    store = LocalStore(
        f"{LOCAL_BUCKET}-{secrets.token_hex(4)}",
        "",
        session,
        endpoint_url=endpoint,
        computer_endpoint_url=computer_endpoint,
        say=say,
        role_per_grant=True,
    )
    try:
        store.client("s3").create_bucket(Bucket=store.bucket)
    except Exception as exc:
        store.close()
        raise store._fail("cannot make the run's bucket", exc) from None
    return store


def _admin_keys(container: Any) -> dict[str, str] | None:
    """The store container's administrator keys, once it has written them: read
    through the engine's exec call (``docker cp`` cannot see a tmpfs), so they
    reach no command line, environment variable or log."""
    import docker.errors

    try:
        code, said = container.exec_run(["cat", ADMIN_KEYS], user="moto")
    except docker.errors.APIError:  # not running (yet, or any more): the caller looks
        return None
    if code != 0:
        return None
    try:
        found = json.loads(said)
    except ValueError:
        return None
    return found if isinstance(found, dict) and "AccessKeyId" in found else None


def start_container(
    say: Any = print,
    *,
    image: str | None = None,
    swarm: bool = False,
    join: tuple[str, ...] = (),
    timeout_s: float = STORE_READY_S,
) -> LocalStore:
    """The run's store as a container of :data:`STORE_IMAGE` on a network of its
    own (a bridge; an attachable overlay for a swarm), which the run's
    computers join and reach it on by name; published on this machine's
    loopback for the harness. ``join`` names more networks it joins (a
    computer attached by URL, on a network of this engine)."""
    import secrets

    import docker
    import docker.errors

    problem = engine_problem()
    if problem is not None:
        raise StoreError(problem)
    image = image or os.environ.get("AGENTENV_STORE_IMAGE") or STORE_IMAGE
    tag = secrets.token_hex(6)
    name = f"agentenv-store-{tag}"
    client = docker.from_env()
    network: Any = None
    container: Any = None
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            raise StoreError(
                f"the store's image {image} is not on this engine: make image builds it "
                "(scripts/store-image.sh), or give --store s3://bucket/prefix"
            ) from None
        try:
            network = client.networks.create(
                f"agentenv-run-{tag}",
                driver="overlay" if swarm else "bridge",
                attachable=True if swarm else None,
                labels={HARNESS_LABEL: "store"},
            )
        except docker.errors.APIError as exc:
            hint = " (docker swarm init makes this engine a swarm manager)" if swarm else ""
            raise StoreError(
                f"cannot make the run's network: {exc.explanation or exc}{hint}"
            ) from None
        # create, then start: a container made but not started is still ours to remove.
        container = client.containers.create(
            image,
            name=name,
            detach=True,
            init=True,
            network=network.name,
            ports={f"{STORE_PORT}/tcp": ("127.0.0.1", None)},
            labels={HARNESS_LABEL: "store"},
            read_only=True,
            tmpfs={"/run/store": "uid=10001,gid=10001,mode=0700,size=1m", "/tmp": "size=64m"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            mem_limit="1g",
            pids_limit=256,
        )
        container.start()
        for other in join:
            try:
                client.networks.get(other).connect(container)
            except docker.errors.NotFound:
                raise StoreError(
                    f"--network {other}: no such network on this engine (docker network ls "
                    "lists them)"
                ) from None
        keys = _wait_keys(container, name, timeout_s)
        container.reload()
        port = container.attrs["NetworkSettings"]["Ports"][f"{STORE_PORT}/tcp"][0]["HostPort"]
        store = _opened(keys, f"http://127.0.0.1:{port}", f"http://{name}:{STORE_PORT}", say)
    except BaseException as exc:
        for problem in _remove(container, (network,) if network is not None else ()):
            say(f"warning: cannot remove what the failed store start made: {problem}")
        if isinstance(exc, docker.errors.APIError):
            raise StoreError(f"cannot start the run's store: {exc.explanation or exc}") from None
        raise
    store.container, store.networks, store.network = container, (network,), network.name
    return store


def start_cluster(
    say: Any = print,
    *,
    image: str | None = None,
    namespace: str | None = None,
    context: str | None = None,
) -> LocalStore:
    """The run's store as a pod with a ClusterIP Service in the computers'
    namespace: their pods reach it at the Service's name; the harness through
    a port-forward (or the Service, from a pod of the cluster)."""
    from agentenv.harness.computer import ComputerError
    from agentenv.harness.kubernetes import deploy_store

    try:
        found = deploy_store(
            image or os.environ.get("AGENTENV_STORE_IMAGE"), namespace=namespace, context=context
        )
    except ComputerError as exc:
        raise StoreError(f"cannot start the run's store on the cluster: {exc}") from None
    try:
        store = _opened(found.keys, found.endpoint, found.computer_endpoint, say)
    except BaseException:
        with contextlib.suppress(Exception):
            found.handle.remove()
        raise
    store.pod = found.handle
    return store


def _wait_keys(container: Any, name: str, timeout_s: float) -> dict[str, str]:
    ends = time.monotonic() + timeout_s
    while True:
        keys = _admin_keys(container)
        if keys is not None:
            return keys
        container.reload()
        if container.status in ("exited", "dead"):
            said = container.logs(tail=20).decode(errors="replace").strip()
            raise StoreError(f"the run's store ({name}) exited at start: {said[-800:]}")
        if time.monotonic() > ends:
            raise StoreError(
                f"the run's store ({name}) did not start within {timeout_s:.0f} s: "
                f"docker logs {name} says why"
            )
        time.sleep(0.1)


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


class RunStore:
    """The store of one ``agentenv run`` (one task, or a batch): opened at its
    first use, shared by the run's tasks (each recording has a grant of its
    own), closed once, after the last computer has stopped."""

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
