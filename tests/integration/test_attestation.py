"""Signed recordings against the built image (issue 25): the key no agent
reaches, a recording in a real S3 store that ``agentenv verify`` checks, and
what it says of a byte changed, a file planted or a manifest forged by an
agent holding the recording's own grant."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agentenv.harness.attest import evidence, folder_problems
from agentenv.protocol.attestation import key_text, public_key, sha256, signed_manifest
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
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.container import Computer, computer
from tests.support.stack import ROOT
from tests.support.timing import deadline, wait_for

KEY_FILE = "/home/agentenv/attest/key"
PREFIX = "runs/attest"


def agentenv_verify(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentenv", "verify", *args],
        capture_output=True,
        text=True,
        timeout=deadline(120),
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": f"{ROOT / 'services'}:{ROOT}",
            **(env or {}),
        },
    )


def denied(pc: Computer, user: str, command: str) -> str:
    """``command`` run as ``user`` in the computer, which must fail: its output."""
    done = pc.container.get_wrapped_container().exec_run(["sh", "-c", command], user=user)
    assert done.exit_code != 0, (user, command, done.output)
    return str(done.output.decode(errors="replace"))


def test_the_key_is_the_service_users_alone(image: str) -> None:
    with computer(image) as pc:
        card = requests.get(pc.app + "/card", timeout=deadline(30)).json()
        key = card["attestation"]["key"]
        # The entry is there, the service user's, and its public half is the card's.
        listing = pc.exec("ls", "-ln", KEY_FILE, user="agentenv")
        assert listing.startswith("-rw-------") and " 1000 1000 " in listing, listing
        raw = pc.exec("base64", "-w0", KEY_FILE, user="agentenv").strip()
        private = Ed25519PrivateKey.from_private_bytes(base64.b64decode(raw))
        assert key_text(private) == key
        # Chromium's user (what an agent that escaped the page would be) can
        # neither read it, nor list its folder, nor put a key of its own there.
        for command in (
            f"cat {KEY_FILE}",
            "ls /home/agentenv/attest",
            f"echo forged > {KEY_FILE}",
            "echo forged > /home/agentenv/attest/other",
        ):
            assert "Permission denied" in denied(pc, "browser", command)
        # A restarted app server (and recorder) keeps the key.
        pc.exec("supervisorctl", "-c", "/opt/agentenv/image/supervisord.conf", "restart", "app")
        wait_for(
            lambda: requests.get(pc.app + "/readyz", timeout=5).status_code == 200,
            "the app server back",
            timeout_s=60,
        )
        again = requests.get(pc.app + "/card", timeout=deadline(30)).json()
        assert again["attestation"]["key"] == key


async def _refused_command(pc: Computer) -> dict[str, Any]:
    """alice asks for the browser process's command line: the guard refuses."""
    url = browser_ws_url(pc.relay, f"token={pc.token('alice')}")
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        return await RawCdp(ws).call("Browser.getBrowserCommandLine")


def _download(s3: Store, under: str, into: Path) -> Path:
    for name in s3.keys(under):
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(s3.get(under + name))
    return into


def _changed(folder: Path, name: str, into: Path) -> Path:
    """A copy of ``folder`` with one byte of ``name`` flipped."""
    copy = into / name.replace("/", "_")
    shutil.copytree(folder, copy)
    data = bytearray((copy / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (copy / name).write_bytes(bytes(data))
    return copy


def test_a_recording_verifies_and_forgeries_are_named(
    image: str,
    network: Any,  # noqa: F811 - the fixture imported above
    store: Store,  # noqa: F811
    tmp_path: Path,
) -> None:
    grant = s3_grant(PREFIX)
    with computer(image, network=network) as pc:
        site = pc.serve_site()
        key = requests.get(pc.app + "/card", timeout=deadline(30)).json()["attestation"]["key"]
        digest = pc.exec("cat", "/opt/agentenv/image.digest").strip()
        ask = {"request_id": uuid.uuid4().hex, "upload": grant, "scope": "alice"}
        rec_id = str(pc.recording("start", ask)["recording_id"])
        under = f"{PREFIX}/{rec_id}/"
        pc.op("navigate", {"url": site + "/next"}, user="alice")
        answer = asyncio.run(_refused_command(pc))
        assert "error" in answer, answer
        wait_for(
            lambda: len([n for n in store.keys(under) if n.startswith("frames/")]) >= 2 or None,
            "the navigation's frame in the store",
            timeout_s=30,
        )
        manifest = pc.recording("end", {"recording_id": rec_id})

    # What the computer says it is, in start.json and the manifest, signed.
    start = json.loads(store.get(under + "start.json"))
    assert start["scope"] == "alice" and start["key"] == key == manifest["key"]
    assert start["image_digest"] == digest == manifest["image_digest"]
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert start["chromium"] == manifest["chromium"] and "Chrome/" in manifest["chromium"]
    assert "--headless=new" in manifest["chromium_flags"]
    assert set(manifest["files"]) == set(store.keys(under)) - {"manifest.json"}
    assert manifest["signature"]

    # agentenv verify on the store's place (the standard AWS environment).
    aws = {
        "AWS_ENDPOINT_URL_S3": store.endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": REGION,
    }
    place = f"s3://{BUCKET}/{under.rstrip('/')}"
    done = agentenv_verify(place, "--key", key, env=aws)
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr

    folder = _download(store, under, tmp_path / "whole")
    assert folder_problems(folder, key) == []
    # The evidence a run keeps: alice's refusal, by rule and by who.
    found = evidence(folder, key)
    assert found["guard_refusals"] == {"not-allowed": {"alice": 1}}, found
    assert found["manifest_sha256"] == sha256((folder / "manifest.json").read_bytes())

    # One byte changed in a frame, in the log, in the manifest: each named.
    frame = next(f["file"] for f in manifest["frames"] if f["kind"] == "action")
    changed = tmp_path / "changed"
    changed.mkdir()
    assert folder_problems(_changed(folder, frame, changed), key) == [
        f"{frame}: changed (its SHA-256 is not the manifest's)"
    ]
    # the log's file by its hash, and its line by the chain
    named = folder_problems(_changed(folder, "log.jsonl", changed), key)
    assert named[0] == "log.jsonl: changed (its SHA-256 is not the manifest's)", named
    assert named[1].startswith("log.jsonl line "), named
    copy = changed / "manifest"
    shutil.copytree(folder, copy)
    text = (copy / "manifest.json").read_bytes()
    (copy / "manifest.json").write_bytes(text.replace(b'"alice"', b'"bobby"', 1))
    assert folder_problems(copy, key) == [
        "manifest.json: the signature does not match its content (changed after signing)"
    ]

    # An agent holding the recording's own grant writes into the store: a
    # frame of its own over the computer's, a frame more, and then a whole
    # manifest of its own listing them, signed with a key of its own.
    forger = store.client()
    planted = "frames/0099-action.jpg"
    forger.put_object(Bucket=BUCKET, Key=under + frame, Body=b"\xff\xd8 a page never shown")
    forger.put_object(Bucket=BUCKET, Key=under + planted, Body=b"\xff\xd8 planted")
    done = agentenv_verify(place, "--key", key, env=aws)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{frame}: changed (its SHA-256 is not the manifest's)",
        f"{planted}: present, not listed in the manifest (not the computer's)",
    ]
    own = Ed25519PrivateKey.generate()
    body = orjson.loads(store.get(under + "manifest.json"))
    body["files"][frame] = sha256(store.get(under + frame))
    body["files"][planted] = sha256(store.get(under + planted))
    for signer in (key_text(own), key):  # its own key named, then the computer's
        body["key"] = signer
        forged = signed_manifest(own, body)
        forger.put_object(Bucket=BUCKET, Key=under + "manifest.json", Body=forged)
        done = agentenv_verify(place, "--key", key, env=aws)
        assert done.returncode == 1
        expected = (
            f"manifest.json: signed by {key_text(own)}, not by the pinned key {key}"
            if signer != key
            else "manifest.json: the signature does not match its content (changed after signing)"
        )
        assert done.stdout.splitlines() == [expected], done.stdout
    assert isinstance(public_key(key), Ed25519PublicKey)
