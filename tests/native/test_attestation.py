"""A signed recording on the native stack: the key on the card, start.json's
and the manifest's evidence, and ``agentenv verify`` on what was uploaded."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import requests

from agentenv.harness.attest import verify
from tests.support.site import Site
from tests.support.stack import ROOT, NativeStack
from tests.support.timing import wait_for


def rec(stack: NativeStack, op: str, body: dict[str, Any]) -> Any:
    answer = requests.post(f"{stack.app_http}/v1/browser-recording/{op}", json=body, timeout=120)
    assert answer.status_code == 200, (op, answer.status_code, answer.text)
    return answer.json()


def agentenv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentenv", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": f"{ROOT / 'services'}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )


def test_a_recording_is_signed_and_verify_names_what_changed(
    stack: NativeStack, site: Site, tmp_path: Path
) -> None:
    key = requests.get(stack.app_http + "/card", timeout=30).json()["attestation"]["key"]
    # The key: a 0600 file in a 0700 folder under the run folder.
    key_file = stack.folder / "run" / "attest" / "key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700

    body = {"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{tmp_path}"}}
    recording = str(rec(stack, "start", body)["recording_id"])
    folder = tmp_path / recording
    stack.op("navigate", {"url": site.url + "/next"})
    wait_for(
        lambda: len(list((folder / "frames").glob("*"))) >= 2 or None, "the navigation's frame"
    )
    manifest = rec(stack, "end", {"recording_id": recording})

    start = json.loads((folder / "start.json").read_text())
    assert start["key"] == key == manifest["key"]
    assert start["chromium"].startswith(("Chrome/", "HeadlessChrome/"))
    assert manifest["chromium"] == start["chromium"]
    assert f"--user-data-dir={stack.folder / 'profile'}" in manifest["chromium_flags"]
    assert "scope" in start and start["image_digest"] is None  # a source tree's stack
    assert set(manifest["files"]) == {
        "start.json",
        "log.jsonl",
        "log.chain.jsonl",
        *(f["file"] for f in manifest["frames"] if not f["error"]),
    }
    assert manifest["signature"]

    assert verify(str(folder), key) == []
    done = agentenv("verify", str(folder), "--key", key)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "signed by its computer's key" in done.stdout

    # One byte of a frame changed: named, exit 1.
    frame = folder / manifest["frames"][1]["file"]
    data = bytearray(frame.read_bytes())
    data[len(data) // 2] ^= 0x01
    frame.write_bytes(bytes(data))
    done = agentenv("verify", str(folder), "--key", key)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{manifest['frames'][1]['file']}: changed (its SHA-256 is not the manifest's)"
    ]

    # Without a key, and not in a run's folder: told what to give.
    done = agentenv("verify", str(folder))
    assert done.returncode == 2 and "give --key" in done.stderr
