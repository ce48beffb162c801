"""A recording uploads to a real S3-compatible server in a container of its own.

The test makes a Docker network, starts the S3 server (moto, images/store) on it
as ``s3`` with a port published on the host's 127.0.0.1, and a secured
computer on the same network. The computer's recorder uploads to
``http://s3:5000`` (a name only that network resolves); the test reads what
arrived from the host, through the published port.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from agentenv.protocol.chain import CHAIN_FILE, recording_problems
from tests.support.container import CONTROL, PLAIN_S3, Computer, computer
from tests.support.timing import deadline, wait_for

BUCKET = "recordings"
PREFIX = "runs/store"
ALIAS = "s3"
ACCESS_KEY = "AKIDSTORETEST"
#: Made per run, so finding it anywhere can only mean it leaked.
SECRET = f"s3-secret-{uuid.uuid4().hex}"
REGION = "us-east-1"


@dataclass(frozen=True)
class Store:
    """The S3 server as the host reaches it (its published port)."""

    endpoint: str

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET,
        )

    def keys(self, prefix: str) -> list[str]:
        found = self.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
        return sorted(str(o["Key"])[len(prefix) :] for o in found)

    def get(self, key: str) -> bytes:
        body: bytes = self.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return body


@pytest.fixture
def network() -> Iterator[Any]:
    """A Docker network of the test's own, removed after (with whatever is left on it)."""
    import docker

    client = docker.from_env()
    net = client.networks.create(f"agentenv-test-{uuid.uuid4().hex[:12]}", driver="bridge")
    try:
        yield net
    finally:
        net.reload()
        for container in net.containers:
            net.disconnect(container, force=True)
        net.remove()


@pytest.fixture
def store(store_image: str, network: Any) -> Iterator[Store]:
    """The S3 server on ``network`` as ``s3``, its port 5000 published on 127.0.0.1."""
    import docker

    client = docker.from_env()
    container = client.containers.run(
        store_image,
        detach=True,
        init=True,
        **PLAIN_S3,
        name=f"agentenv-test-s3-{uuid.uuid4().hex[:12]}",
        network=network.name,
        networking_config={network.name: client.api.create_endpoint_config(aliases=[ALIAS])},
        ports={"5000/tcp": ("127.0.0.1", None)},
    )
    try:
        container.reload()
        port = container.ports["5000/tcp"][0]["HostPort"]
        served = Store(f"http://127.0.0.1:{port}")
        wait_for(
            lambda: requests.get(served.endpoint + "/moto-api/", timeout=2).status_code == 200,
            "the S3 server to answer on its published port",
            timeout_s=60,
            interval_s=0.2,
        )
        served.client().create_bucket(Bucket=BUCKET)
        yield served
    finally:
        container.remove(force=True)


def s3_grant(prefix: str) -> dict[str, str]:
    """The upload grant of a recording into the store under ``prefix`` (each
    test file its own), as a harness gives it."""
    return {
        "url": f"s3://{BUCKET}/{prefix}",
        "endpoint_url": f"http://{ALIAS}:5000",
        "region": REGION,
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET,
    }


def test_a_recording_uploads_to_s3_on_the_network(image: str, network: Any, store: Store) -> None:
    grant = s3_grant(PREFIX)
    with computer(image, network=network) as pc:
        site = pc.serve_site()
        started = pc.recording("start", {"request_id": uuid.uuid4().hex, "upload": grant})
        rec_id = str(started["recording_id"])
        under = f"{PREFIX}/{rec_id}/"

        def frames(count: int) -> list[str] | None:
            names = [n for n in store.keys(under) if n.startswith("frames/")]
            return names if len(names) >= count else None

        wait_for(lambda: frames(1), "the first frame in the store", timeout_s=30)
        # alice's own pixel actions (her token): via api, framed like any agent's.
        pc.op("navigate", {"url": site + "/pixels"}, user="alice")
        wait_for(lambda: frames(2), "the navigation's frame in the store", timeout_s=30)
        pc.op("input/click", {"x": 200, "y": 130}, user="alice")
        wait_for(lambda: frames(3), "the click's frame in the store", timeout_s=30)
        manifest = pc.recording("end", {"recording_id": rec_id})
        local_logs = pc.all_log_bytes()

    # What the store holds is exactly what the manifest lists.
    assert manifest["recording_id"] == rec_id
    kinds = [f["kind"] for f in manifest["frames"]]
    assert kinds == ["first", "action", "action", "last"], manifest["frames"]
    assert manifest["missing_frames"] == 0 and manifest["log_missing"] == [], manifest
    files = [f["file"] for f in manifest["frames"]]
    assert store.keys(under) == sorted(
        [*files, "log.jsonl", CHAIN_FILE, "manifest.json", "start.json"]
    )
    objects = {name: store.get(under + name) for name in store.keys(under)}
    for frame in manifest["frames"]:
        data = objects[frame["file"]]
        assert frame["type"] == "jpeg" and frame.get("error") is None, frame
        assert data[:3] == b"\xff\xd8\xff" and data[-2:] == b"\xff\xd9", frame
    assert json.loads(objects["manifest.json"]) == manifest

    # log.jsonl: the log from the start's entry to the end's, every line once.
    lines = [json.loads(x) for x in objects["log.jsonl"].decode().splitlines()]
    assert manifest["log"] == {"file": "log.jsonl", "lines": len(lines), "chain": CHAIN_FILE}
    # It verifies on the log's hash chain, from chain_first to chain_last.
    assert recording_problems(objects.get, manifest) == []
    assert all(len(manifest[k]) == 32 for k in ("chain_first", "chain_last")), manifest
    seqs = [x["seq"] for x in lines]
    assert seqs == list(range(manifest["start_seq"], manifest["end_seq"] + 1))
    by_seq = {x["seq"]: x for x in lines}
    assert by_seq[manifest["start_seq"]]["action"]["op"] == "browser-recording/start"
    assert by_seq[manifest["end_seq"]]["action"]["op"] == "browser-recording/end"

    # Each action frame is keyed to alice's op entries in that log.
    for frame, op in zip(manifest["frames"][1:3], ("navigate", "input/click"), strict=True):
        assert frame["after"], frame
        keyed = [by_seq[s]["action"] for s in frame["after"]]
        assert {(a["via"], a["who"], a["op"]) for a in keyed} == {("api", "alice", op)}, keyed
        assert all(a["ok"] is True for a in keyed), keyed
    assert manifest["frames"][1]["url"] == site + "/pixels"
    assert manifest["frames"][-1]["url"] == site + "/pixels"

    # The secret key is in no uploaded object and nowhere in the computer's logs.
    for name, data in objects.items():
        assert SECRET.encode() not in data, name
    assert SECRET.encode() not in local_logs
    assert b"s3-secret-" not in local_logs


@pytest.fixture(scope="module")
def plain(image: str) -> Iterator[Computer]:
    """A secured computer on no network of the tests' own."""
    with computer(image) as running:
        yield running


@pytest.mark.parametrize(
    "upload",
    [
        pytest.param(
            {"url": f"s3://{BUCKET}/x", "endpoint_url": "http://169.254.169.254/"},
            id="metadata-endpoint",
        ),
        pytest.param(
            {"url": f"s3://{BUCKET}/x", "endpoint_url": "http://[fe80::1]:5000/"},
            id="link-local-v6-endpoint",
        ),
        pytest.param(
            {"url": f"s3://{BUCKET}/x", "endpoint_url": "ftp://s3:21/"}, id="ftp-endpoint"
        ),
        pytest.param(
            {"url": f"s3://{BUCKET}/x", "endpoint_url": "file:///etc"}, id="file-endpoint"
        ),
        pytest.param(
            {"url": f"s3://{BUCKET}/x", "endpoint_url": "http://metadata.google.internal/"},
            id="metadata-name",
        ),
        # A store nothing answers: the start proves its grant by writing start.json.
        pytest.param(
            {"url": f"s3://{BUCKET}/x", "endpoint_url": "http://127.0.0.1:9/"},
            id="unreachable-store",
        ),
        # No AGENTENV_UPLOAD_ROOTS in the image: no folder takes recordings.
        pytest.param({"url": "file:///tmp/anywhere"}, id="file-grant-outside-upload-roots"),
    ],
)
def test_a_start_refuses_a_grant_it_must_not_use(plain: Computer, upload: dict[str, str]) -> None:
    grant = dict(upload)
    if grant["url"].startswith("s3:"):
        grant |= {"access_key_id": ACCESS_KEY, "secret_access_key": SECRET, "region": REGION}
    # frames: false, so a start wrongly taken uploads nothing at once.
    body: dict[str, Any] = {"request_id": uuid.uuid4().hex, "upload": grant, "frames": False}
    answer = requests.post(
        f"{plain.app}/v1/browser-recording/start",
        json=body,
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=deadline(120),
    )
    assert answer.status_code in (400, 502), (answer.status_code, answer.text[:500])
    assert answer.json()["error"]["message"], answer.text[:500]
    assert SECRET not in answer.text
