"""A recording's journal in the built image: the service user's alone, no
credential in it, and what lets a recorder killed mid-recording end it with
a signed manifest (an S3 recording's end brings the grant again)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import requests

from agentenv.harness.attest import folder_problems
from tests.integration.test_recording_store import (  # noqa: F401 - fixtures
    ACCESS_KEY,
    ALIAS,
    BUCKET,
    REGION,
    SECRET,
    Store,
    network,
    s3_grant,
    store,
)
from tests.support.container import CONTROL, SUPERVISORCTL, Computer, computer
from tests.support.timing import deadline, wait_for

JOURNAL = "/home/agentenv/attest/journal"
PREFIX = "runs/journal"


def denied(pc: Computer, user: str, command: str) -> str:
    """``command`` run as ``user`` in the computer, which must fail: its output."""
    done = pc.container.get_wrapped_container().exec_run(["sh", "-c", command], user=user)
    assert done.exit_code != 0, (user, command, done.output)
    return str(done.output.decode(errors="replace"))


def _end(pc: Computer, body: dict[str, Any]) -> tuple[int, str] | None:
    """The end's status and body, once the restarted recorder answers (None before)."""
    answer = requests.post(
        f"{pc.app}/v1/browser-recording/end",
        json=body,
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=deadline(120),
    )
    return None if answer.status_code in (502, 503) else (answer.status_code, answer.text)


def test_a_killed_recorders_recording_ends_signed_from_its_journal(
    image: str,
    network: Any,  # noqa: F811 - the fixture imported above
    store: Store,  # noqa: F811
    tmp_path: Path,
) -> None:
    grant = s3_grant(PREFIX)
    with computer(image, network=network) as pc:
        key = requests.get(pc.app + "/card", timeout=deadline(30)).json()["attestation"]["key"]
        ask = {"request_id": uuid.uuid4().hex, "upload": grant}
        rec_id = str(pc.recording("start", ask)["recording_id"])
        under = f"{PREFIX}/{rec_id}/"
        wait_for(lambda: "frames/0000-first.jpg" in store.keys(under), "the first frame")
        path = f"{JOURNAL}/{rec_id}.jsonl"
        # The journal is there, the service user's, with the first frame in it
        # and no credential of the grant's.
        listing = pc.exec("ls", "-ln", path, user="agentenv")
        assert listing.startswith("-rw-------") and " 1000 1000 " in listing, listing
        text = pc.exec("cat", path, user="agentenv")
        assert rec_id in text and "frames/0000-first.jpg" in text
        assert SECRET not in text and ACCESS_KEY not in text
        # Chromium's user can neither read it, list it, nor write one.
        for command in (f"cat {path}", f"ls {JOURNAL}", f"echo forged > {JOURNAL}/x.jsonl"):
            assert "Permission denied" in denied(pc, "browser", command)

        pc.exec(*SUPERVISORCTL, "signal", "KILL", "recorder")
        # The restarted recorder has the journal, not the grant: it asks for one.
        status, said = wait_for(
            lambda: _end(pc, {"recording_id": rec_id}), "the restarted recorder"
        )
        assert status == 409 and "end it with upload (a fresh grant)" in said, (status, said)
        assert SECRET not in said
        ended = _end(pc, {"recording_id": rec_id, "upload": grant})
        assert ended is not None and ended[0] == 200, ended
        manifest = json.loads(ended[1])
        denied(pc, "agentenv", f"ls {path}")  # removed with the end

    assert manifest["rebuilt"] is True and manifest["signature"] and manifest["key"] == key
    assert manifest["rebuilt_why"].startswith("its recorder restarted mid-recording")
    assert [f["kind"] for f in manifest["frames"]] == ["first", "last"]
    assert set(manifest["files"]) == set(store.keys(under)) - {"manifest.json"}
    folder = tmp_path / rec_id
    for name in store.keys(under):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(store.get(under + name))
    assert folder_problems(folder, key) == []
