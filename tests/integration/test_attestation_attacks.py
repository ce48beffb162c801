"""Attacks on a recording in a real S3 store found in the review of issue 25's
signing change: objects an agent holding the recording's grant can put
beside a signed recording, each named by ``agentenv verify s3://…`` (exit
1), none making it say it could not check (exit 2). The recording is signed
here with a key of the test's own: what is checked is verify's reading of a
store, which needs no computer."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentenv.protocol.attestation import key_text
from tests.integration.test_attestation import agentenv_verify
from tests.integration.test_recording_store import (  # noqa: F401 - fixtures
    ACCESS_KEY,
    BUCKET,
    REGION,
    SECRET,
    Store,
    network,
    store,
)
from tests.unit.test_attestation import recording

REC = "rec-00000000000000d4"


def test_objects_planted_beside_a_signed_recording_are_named(
    network: Any,  # noqa: F811 - the fixture imported above
    store: Store,  # noqa: F811
) -> None:
    key = Ed25519PrivateKey.generate()
    under = f"runs/attack/{REC}/"
    s3 = store.client()
    for name, data in recording(key, recording_id=REC).items():
        s3.put_object(Bucket=BUCKET, Key=under + name, Body=data)
    aws = {
        "AWS_ENDPOINT_URL_S3": store.endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": REGION,
    }
    place = f"s3://{BUCKET}/{under.rstrip('/')}"
    done = agentenv_verify(place, "--key", key_text(key), env=aws)
    assert done.returncode == 0, done.stdout + done.stderr

    # A page of a run that never was, where a judge would open it; an object
    # named as the frames' folder; one inside a file's name; one whose name
    # leaves the recording.
    for name in ("view.html", "frames", "start.json/x", "../escape"):
        s3.put_object(Bucket=BUCKET, Key=under + name, Body=b"planted")
    done = agentenv_verify(place, "--key", key_text(key), env=aws)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for name in ("view.html", "frames", "start.json/x", "../escape"):
        assert any(line.startswith(f"{name}: ") for line in lines), (name, lines)
