"""Where a run's recordings go: an object store both the computer and the harness reach.

``agentenv run --store …`` picks one (docs/spec.md section 5, "The store"):

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
  (:func:`~.local_store.start_cluster`): pods reach it at the Service's name, the harness
  through a port-forward.
  The store checks signatures and IAM policies: each recording's grant is a
  role of its own, allowed ``s3:PutObject`` and ``s3:GetObject`` under that
  recording's prefix only, assumed for short-lived credentials. moto's own
  management API (``/moto-api``, which could turn the checks off) is not
  served. Unsigned requests are refused. One store serves a whole ``agentenv
  run`` (a batch's tasks share it; each recording still has its own grant)
  and is removed with its network at the end. Native tests and benches run
  the same server in a thread instead (:func:`~.local_store.start_local`).

This module holds the stores' layout and policies and the S3 and folder
stores; the local store is :mod:`.local_store`, and a run's choice of
store, opened once for all its tasks, :mod:`.run_store`.
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
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.parse import urlsplit

from agentenv.harness.hardening import writable_by_the_computer
from agentenv.harness.harness_errors import HarnessError

__all__ = [
    "GRANT_S",
    "LOCAL_BUCKET",
    "NETWORK_GONE_S",
    "STORE_IMAGE",
    "STORE_READY_S",
    "FolderStore",
    "S3Store",
    "Store",
    "StoreError",
    "download_recording",
    "grant_seconds",
    "join",
    "placed",
    "prefix_policy",
    "safe_name",
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


def placed(into: Path, name: str) -> Path | None:
    """Where the object ``name`` (under a recording's place) goes in ``into``,
    its folders made; None when its name would leave ``into``, or what is
    already there is in its way (an object named as a folder of the
    recording's, ``frames``, or as a file's child, ``start.json/x``: a store
    holds both, a folder cannot)."""
    safe = safe_name(name)
    if safe is None:
        return None
    target = into / safe
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        return None
    return None if target.is_dir() else target


def download_recording(url: str, into: Path, skipped: list[str] | None = None) -> Path:
    """A recording's files at ``s3://bucket/prefix/<recording_id>`` (the
    standard AWS environment and config) downloaded into ``into``; names
    that would leave it, or that what is there is in the way of
    (:func:`placed`), are passed over, and added to ``skipped``. For
    ``agentenv view`` and ``verify``."""
    import boto3

    parts = urlsplit(url)
    bucket, prefix = parts.netloc, parts.path.strip("/")
    s3 = boto3.session.Session().client("s3")
    start = prefix + "/"
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=start):
        for found in page.get("Contents", []):
            name = str(found["Key"])[len(start) :]
            target = placed(into, name)
            if target is None:
                if skipped is not None:
                    skipped.append(name)
                continue
            s3.download_file(bucket, str(found["Key"]), str(target))
    return into


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
                    target = placed(folder, name)
                    if target is None:
                        skipped.append(name)
                        continue
                    s3.download_file(self.bucket, str(found["Key"]), str(target))
                    written.append(target.relative_to(folder).as_posix())
        except Exception as exc:
            raise self._fail(f"cannot download recording {recording_id}", exc) from None
        return sorted(written), skipped

    def _listing_prefix(self, start: str) -> str:
        return start

    def close(self) -> None:
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
