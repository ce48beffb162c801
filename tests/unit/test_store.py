"""The harness's local store: a real moto S3 server with its checks on.

Each grant reaches its own recording's prefix and nothing else; unsigned
requests and moto's management API are refused; a download never leaves the
recording's folder.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from agentenv.harness.local_store import ASKS, LocalStore, start_local
from agentenv.harness.run_store import open_store
from agentenv.harness.store import FolderStore, StoreError, grant_seconds, safe_name


@pytest.fixture(scope="module")
def store() -> Iterator[LocalStore]:
    found = start_local(say=lambda _: None, host="127.0.0.1")
    try:
        yield found
    finally:
        found.close()


def _client(grant: dict[str, Any]) -> Any:
    return boto3.session.Session().client(
        "s3",
        endpoint_url=grant["endpoint_url"],
        region_name=grant["region"],
        aws_access_key_id=grant["access_key_id"],
        aws_secret_access_key=grant["secret_access_key"],
        aws_session_token=grant["session_token"],
    )


def _bucket_and_prefix(grant: dict[str, Any]) -> tuple[str, str]:
    bucket, _, prefix = grant["url"].removeprefix("s3://").partition("/")
    return bucket, prefix


def _refused(call: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return str(caught.value.response["Error"]["Code"])


def test_a_grant_reaches_its_own_prefix_only(store: LocalStore) -> None:
    mine = store.grant("run1/a", started_here=False)
    other = store.grant("run1/b", started_here=False)
    bucket, prefix = _bucket_and_prefix(mine)
    s3 = _client(mine)
    s3.put_object(Bucket=bucket, Key=f"{prefix}/rec/start.json", Body=b"{}")
    assert s3.get_object(Bucket=bucket, Key=f"{prefix}/rec/start.json")["Body"].read() == b"{}"
    _, other_prefix = _bucket_and_prefix(other)
    _client(other).put_object(Bucket=bucket, Key=f"{other_prefix}/rec/x", Body=b"theirs")
    for call in (
        lambda: s3.put_object(Bucket=bucket, Key=f"{other_prefix}/rec/x", Body=b"mine"),
        lambda: s3.get_object(Bucket=bucket, Key=f"{other_prefix}/rec/x"),
        lambda: s3.put_object(Bucket=bucket, Key="elsewhere", Body=b"x"),
        lambda: s3.list_objects_v2(Bucket=bucket),
        lambda: s3.delete_object(Bucket=bucket, Key=f"{prefix}/rec/start.json"),
        lambda: s3.create_bucket(Bucket="another-bucket"),
    ):
        assert _refused(call) in ("AccessDenied", "403")
    assert (
        _client(other).get_object(Bucket=bucket, Key=f"{other_prefix}/rec/x")["Body"].read()
        == b"theirs"
    )


def test_a_grant_is_short_lived_and_names_no_long_term_key(store: LocalStore) -> None:
    grant = store.grant("run1/c", started_here=False, seconds=grant_seconds(None))
    expires = datetime.fromisoformat(grant["expires_at"])
    now = datetime.now(UTC)
    assert now + timedelta(minutes=50) < expires <= now + timedelta(hours=1, minutes=1)
    assert grant["session_token"]
    own = store.session.get_credentials().get_frozen_credentials()
    assert own.access_key not in str(grant) and own.secret_key not in str(grant)
    assert grant_seconds(4 * 3600) == 4 * 3600 + 300
    assert grant_seconds(10) == 3600 and grant_seconds(10**9) == 43200


def test_unsigned_requests_and_the_management_api_are_refused(store: LocalStore) -> None:
    endpoint = str(store.endpoint_url)
    for method, path, body in (
        ("GET", "/agentenv?list-type=2", None),
        ("PUT", "/agentenv/runs/x", b"x"),
        ("POST", "/moto-api/reset-auth", b"inf"),
        ("POST", "/moto-api/reset", b""),
        ("GET", "/moto-api/data.json", None),
    ):
        request = urllib.request.Request(endpoint + path, data=body, method=method)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        assert caught.value.code in (403, 404), (method, path, caught.value.code)
    with pytest.raises(ClientError):  # the checks are still on
        boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="AKIAANYONE",
            aws_secret_access_key="guess",
        ).list_buckets()


def test_fetch_downloads_the_recording_and_skips_names_that_leave_it(
    store: LocalStore, tmp_path: Path
) -> None:
    grant = store.grant("run2/a", started_here=False)
    bucket, prefix = _bucket_and_prefix(grant)
    s3 = _client(grant)
    for key, body in {
        "rec9/manifest.json": b"{}",
        "rec9/frames/0000-first.jpg": b"\xff\xd8",
        "rec9/../rec8/escape": b"x",
        "rec9//double": b"x",
    }.items():
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body)
    folder = tmp_path / "recordings" / "rec9"
    names, skipped = store.fetch("run2/a", "rec9", folder)
    assert names == ["frames/0000-first.jpg", "manifest.json"]
    assert sorted(skipped) == ["../rec8/escape", "/double"]
    assert (folder / "frames" / "0000-first.jpg").read_bytes() == b"\xff\xd8"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "0000-first.jpg",
        "manifest.json",
    ]


def test_names_that_leave_a_folder() -> None:
    assert safe_name("frames/0001-action.jpg") == "frames/0001-action.jpg"
    for bad in ("", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b/.."):
        assert safe_name(bad) is None, bad


def test_a_file_store_serves_only_computers_the_run_started(tmp_path: Path) -> None:
    store = FolderStore(tmp_path)
    assert store.grant("r/a", started_here=True) == {
        "url": f"file://{(tmp_path / 'recordings').resolve()}"
    }
    with pytest.raises(StoreError, match="only the computers this run starts"):
        store.grant("r/a", started_here=False)


def test_a_store_that_is_not_one_is_refused(tmp_path: Path) -> None:
    for spec in ("s3:/nobucket", "gs://bucket", "/tmp/x"):
        with pytest.raises(StoreError, match="give local, file or s3://bucket/prefix"):
            open_store(spec, tmp_path)


def test_no_short_lived_credentials_fails_closed(store: LocalStore) -> None:
    """A store whose STS refuses (here: credentials it does not know) gives no
    grant, unless the harness was told to share its own."""
    import boto3 as sdk

    from agentenv.harness.store import S3Store

    stranger = sdk.session.Session(
        aws_access_key_id="AKIASTRANGER", aws_secret_access_key="nope", region_name="us-east-1"
    )
    closed = S3Store(store.bucket, "runs", stranger, endpoint_url=store.endpoint_url)
    with pytest.raises(StoreError, match="give --store-role ARN") as caught:
        closed.grant("r/a", started_here=False)
    assert "nope" not in str(caught.value)
    said: list[str] = []
    shared = S3Store(
        store.bucket,
        "runs",
        stranger,
        endpoint_url=store.endpoint_url,
        say=said.append,
        share_own=True,
    )
    grant = shared.grant("r/a", started_here=False)
    assert grant["access_key_id"] == "AKIASTRANGER" and len(said) == 1
    assert "nope" not in said[0] and "reach the whole store" in said[0]


def _task(*steps: dict[str, Any]) -> Any:
    from agentenv.harness.steps import Task

    return Task.model_validate(
        {"envs": {"web": {"versions": {1: {"browsers": ["main"]}}}}, "steps": list(steps)}
    )


DEPLOY = {"type": "deploy_env", "env_id": "web"}
ATTACH = {"type": "deploy_env", "env_id": "web", "url": "http://10.0.0.7:8080"}
START = {"type": "start_browser_recording", "env_id": "web", "name": "r"}


def test_where_the_local_store_cannot_reach_the_run_stops_before_deploying() -> None:
    from agentenv.harness.run_store import StoreOptions, store_problem

    local, s3 = StoreOptions(), StoreOptions(spec="s3://bucket/p")
    # What it can reach: computers this run starts, on Docker, a swarm or a cluster.
    assert store_problem(local, _task(DEPLOY, START), "docker") is None
    assert store_problem(local, _task(DEPLOY, START), "swarm") is None
    # Nothing to reach when nothing records, or the store is the user's.
    assert store_problem(local, _task(ATTACH), "docker") is None
    assert store_problem(s3, _task(ATTACH, START), "kubernetes") is None
    # A computer attached by URL: only on a network the store joins.
    problem = store_problem(local, _task(ATTACH, START), "docker")
    assert problem is not None and "give --network NAME" in problem and "--store s3://" in problem
    assert store_problem(StoreOptions(network="lab"), _task(ATTACH, START), "docker") is None
    # On Kubernetes the store is a pod and Service beside the computers'.
    assert store_problem(local, _task(DEPLOY, START), "kubernetes") is None


@pytest.mark.parametrize(
    ("docker_host", "local"),
    [
        ("", True),
        ("unix:///var/run/docker.sock", True),
        ("unix:///run/user/1000/docker.sock", True),  # rootless Docker
        ("npipe:////./pipe/docker_engine", True),  # Docker Desktop on Windows
        ("tcp://127.0.0.1:2375", True),
        ("tcp://localhost:2376", True),
        ("tcp://[::1]:2375", True),
        ("tcp://10.0.0.5:2376", False),
        ("ssh://builder@build.example", False),
    ],
)
def test_an_engine_on_another_machine_is_refused_by_name(docker_host: str, local: bool) -> None:
    from agentenv.harness.engine import engine_problem

    problem = engine_problem({"DOCKER_HOST": docker_host})
    assert (problem is None) == local, problem
    if problem is not None:
        assert "another machine" in problem and "Run agentenv on that machine" in problem
        assert "builder@" not in problem  # a user name in the URL is not repeated


class _Computer:
    """A computer's container as the docker SDK shows it: what its curl says."""

    def __init__(self, *answers: tuple[int, bytes]) -> None:
        self.answers = list(answers)
        self.asked = 0

    def exec_run(self, command: list[str], user: str) -> tuple[int, bytes]:
        assert user == "agentenv" and command[0] == "/usr/bin/curl"
        self.asked += 1
        return self.answers.pop(0)


def test_a_reach_check_whose_answer_was_lost_is_asked_again(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """curl succeeded but the engine brought no output back (seen under load):
    asked again, at most ASKS times; a real failure is told at once."""
    monkeypatch.setattr(store, "container", object())  # a store in a container
    monkeypatch.setattr("agentenv.harness.local_store.time.sleep", lambda _: None)
    lost_once = _Computer((0, b""), (0, b"403"))
    assert store.unreachable_from(lost_once) is None and lost_once.asked == 2
    always_lost = _Computer(*[(0, b"")] * ASKS)
    problem = store.unreachable_from(always_lost)
    assert problem is not None and "curl exit 0, answer ''" in problem
    assert always_lost.asked == ASKS
    refused = _Computer((6, b"000"))  # could not resolve the store's name
    problem = store.unreachable_from(refused)
    assert problem is not None and "curl exit 6" in problem and refused.asked == 1
