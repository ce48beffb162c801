"""Where a run's recordings go: an object store both the computer and the harness reach.

``agentenv run --store …`` picks one (SPEC.md section 5, "The store"):

- ``local`` (the default): moto's S3 server, in a thread of the harness for
  the run's length, listening on the Docker bridge's gateway address so that
  every computer container on this machine reaches it (``127.0.0.1`` when
  there is no Docker bridge). It checks signatures and IAM policies: each
  recording's grant is a role of its own, allowed ``s3:PutObject`` and
  ``s3:GetObject`` under that recording's prefix only, assumed for
  short-lived credentials. moto's own management API (``/moto-api``, which
  could turn the checks off) is not served. Unsigned requests are refused.
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

from agentenv.harness.errors import HarnessError
from agentenv.harness.hardening import writable_by_the_computer

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

    def __post_init__(self) -> None:
        self.where = f"s3://{join(self.bucket, self.prefix)}"

    def client(self, service: str) -> Any:
        if service not in self._clients:
            from botocore.config import Config

            self._clients[service] = self.session.client(
                service,
                endpoint_url=self.endpoint_url,
                config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10),
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
    """moto's S3 server for the run, in a thread of the harness (see the module's text)."""

    server: Any = None
    thread: threading.Thread | None = None

    def _listing_prefix(self, start: str) -> str:
        # moto's signature check miscomputes a query holding "/" (a Prefix with
        # one): list the store's own prefix (no "/"; the store lives for one
        # run) and keep the recording's keys.
        return self.prefix

    def close(self) -> None:
        super().close()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _bridge_address() -> str:
    """The Docker bridge's gateway on this machine (containers reach the host there)."""
    try:
        import docker

        client = docker.from_env()
        try:
            config = client.networks.get("bridge").attrs["IPAM"]["Config"]
        finally:
            client.close()
        return str(config[0]["Gateway"])
    except Exception:
        return "127.0.0.1"


#: The local store's administrator (moto keeps its users for the whole process,
#: across its servers): made once, with the checks off, before they go on.
_ADMIN: dict[str, str] = {}
_ADMIN_LOCK = threading.Lock()  # a batch starts its runs' stores in threads


def _admin(endpoint: str) -> dict[str, str]:
    with _ADMIN_LOCK:
        if not _ADMIN:
            _make_admin(endpoint)
        return _ADMIN


def _make_admin(endpoint: str) -> None:
    import secrets

    import boto3
    from moto import settings

    settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
    setup = boto3.session.Session(
        aws_access_key_id="setup",
        aws_secret_access_key=secrets.token_hex(16),
        region_name="us-east-1",
    )
    iam = setup.client("iam", endpoint_url=endpoint)
    user = f"agentenv-harness-{secrets.token_hex(4)}"
    iam.create_user(UserName=user)
    keys = iam.create_access_key(UserName=user)["AccessKey"]
    iam.put_user_policy(
        UserName=user,
        PolicyName="all",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }
        ),
    )
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    _ADMIN.update(AccessKeyId=keys["AccessKeyId"], SecretAccessKey=keys["SecretAccessKey"])


def start_local(say: Any = print, host: str | None = None) -> LocalStore:
    """moto's S3 server with checks on, its management API refused; a bucket of
    its own (``agentenv-<random>``), reached with an administrator's
    credentials only this process knows."""
    import secrets

    import boto3
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    backends = DomainDispatcherApplication(create_backend_app)

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not served\n"]
        if not str(environ.get("HTTP_AUTHORIZATION", "")).startswith("AWS4-HMAC-SHA256 "):
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"sign the request (AWS signature version 4)\n"]
        return backends(environ, start_response)

    class Quiet(WSGIRequestHandler):
        def log(self, type: str, message: str, *args: Any) -> None:
            return

    address = host or _bridge_address()
    if not _ADMIN:
        # The administrator is made with the checks off: on a server only this
        # machine's loopback reaches, gone before the store opens on the bridge.
        setup = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
        threading.Thread(target=setup.serve_forever, daemon=True).start()
        try:
            _admin(f"http://127.0.0.1:{setup.server_port}")
        finally:
            setup.shutdown()
            setup.server_close()
    try:
        server = make_server(address, 0, app, threaded=True, request_handler=Quiet)
    except OSError as exc:
        raise StoreError(f"cannot start the local store on {address}: {exc.strerror}") from None
    thread = threading.Thread(target=server.serve_forever, name="agentenv-store", daemon=True)
    thread.start()
    endpoint = f"http://{address}:{server.server_port}"
    keys = _admin(endpoint)
    session = boto3.session.Session(
        aws_access_key_id=keys["AccessKeyId"],
        aws_secret_access_key=keys["SecretAccessKey"],
        region_name="us-east-1",
    )
    bucket = f"{LOCAL_BUCKET}-{secrets.token_hex(4)}"
    session.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    store = LocalStore(bucket, "runs", session, endpoint_url=endpoint, say=say, role_per_grant=True)
    store.server, store.thread = server, thread
    return store


def open_store(
    spec: str,
    out: Path,
    *,
    say: Any = print,
    role_arn: str | None = None,
    computer_endpoint_url: str | None = None,
    share_own: bool = False,
) -> Store:
    """The store ``spec`` names: ``local``, ``file`` or ``s3://bucket/prefix``."""
    if spec == "local":
        return start_local(say)
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
