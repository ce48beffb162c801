"""The computer's key and the pure checks of a signed recording
(agentenv/signing.py, agentenv/protocol/attestation.py)."""

from __future__ import annotations

import base64
import os
import stat
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentenv.protocol.attestation import (
    KeyTextError,
    key_text,
    public_key,
    recording_problems,
    sha256,
    signed_manifest,
    signed_part,
)
from agentenv.protocol.chain import CHAIN_FILE, GENESIS, ChainRun, chain_run, line_hash
from agentenv.signing import SigningKeyError, computer_key


def test_the_key_is_made_once_0600_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "run" / "attest" / "key"
    first = computer_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == first.private_bytes_raw()
    # A restarted program reads the same key.
    assert computer_key(path).private_bytes_raw() == first.private_bytes_raw()
    assert [p.name for p in path.parent.iterdir()] == ["key"]  # no temporary left


def test_programs_starting_at_once_agree_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / "attest" / "key"
    found: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: found.append(computer_key(path).private_bytes_raw()))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(found) == 8 and len(set(found)) == 1


def test_a_key_others_may_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "key"
    computer_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(SigningKeyError, match="readable by its owner only"):
        computer_key(path)
    os.chmod(path, 0o600)
    path.write_bytes(b"short")
    with pytest.raises(SigningKeyError, match="not an Ed25519 key"):
        computer_key(path)


def test_key_text_round_trips_and_bad_keys_are_named() -> None:
    key = Ed25519PrivateKey.generate()
    text = key_text(key)
    assert public_key(text).public_bytes_raw() == key.public_key().public_bytes_raw()
    for bad, why in [
        ("rsa:AAAA", "ed25519:<base64>"),
        ("ed25519:!!!", "does not decode"),
        ("ed25519:AAAA", "32 bytes"),
    ]:
        with pytest.raises(KeyTextError, match=why):
            public_key(bad)


def test_what_is_signed_is_the_manifests_own_bytes_less_its_signature() -> None:
    """No re-encoding: a judge checks the bytes the computer wrote (a float
    as 1e-07 or 1e-7, 1.0 or 1, is what the file says), less the last
    member; the same JSON written otherwise does not verify."""
    key = Ed25519PrivateKey.generate()
    data = signed_manifest(key, {"b": 1e-7, "a": [1.0, "é"], "signature": "x"})
    part = signed_part(data)
    assert part is not None
    signed, signature = part
    assert signed == orjson.dumps({"b": 1e-7, "a": [1.0, "é"]}, option=orjson.OPT_INDENT_2)
    assert orjson.loads(data)["signature"] == signature
    public_key(key_text(key)).verify(base64.b64decode(signature), signed)
    assert signed_part(orjson.dumps(orjson.loads(data))) is None  # written again: not it


# -- a recording, in memory ------------------------------------------------------------


def _chained_log() -> tuple[bytes, ChainRun]:
    """Two log lines as the writer chains them, and their run's chain file."""
    first = b'{"seq":1,"at":"t","prev":"' + GENESIS.encode() + b'","action":{}}'
    second = b'{"seq":2,"at":"t","prev":"' + line_hash(first).encode() + b'","action":{}}'
    return first + b"\n" + second + b"\n", chain_run([(first, True), (second, True)])


def recording(signer: Ed25519PrivateKey, **extra: Any) -> dict[str, bytes]:
    log, run = _chained_log()
    files = {
        "start.json": b'{"recording_id":"rec-1"}',
        "frames/0000-first.jpg": b"\xff\xd8first",
        "frames/0001-action.jpg": b"\xff\xd8action",
        "log.jsonl": log,
        CHAIN_FILE: run.chain,
    }
    manifest: dict[str, Any] = {
        "recording_id": "rec-1",
        "frames": [
            {"index": 0, "file": "frames/0000-first.jpg", "error": None},
            {"index": 1, "file": "frames/0001-action.jpg", "error": None},
            {"index": 2, "file": "frames/0002-last.jpg", "error": "no tab is open"},
        ],
        "log": {"file": "log.jsonl", "lines": 2, "chain": CHAIN_FILE},
        "start_seq": 1,
        "end_seq": 2,
        "chain_first": run.first,
        "chain_last": run.last,
        "video": None,
        "har": None,
        "downloads": [],
        "files": {name: sha256(data) for name, data in files.items()},
        "image_digest": "sha256:" + "0" * 64,
        "chromium": "Chrome/150.0.0.0",
        "key": key_text(signer),
        **extra,
    }
    return {**files, "manifest.json": signed_manifest(signer, manifest)}


def problems(files: dict[str, bytes], key: str) -> list[str]:
    return recording_problems(files.get("manifest.json"), files.get, list(files), key)


def test_a_whole_recording_verifies() -> None:
    key = Ed25519PrivateKey.generate()
    assert problems(recording(key), key_text(key)) == []


def test_one_byte_changed_anywhere_is_named() -> None:
    key = Ed25519PrivateKey.generate()
    pinned = key_text(key)
    whole = recording(key)
    for name in ("frames/0001-action.jpg", "log.jsonl", "start.json"):
        changed = dict(whole)
        data = bytearray(changed[name])
        data[-2] ^= 1
        changed[name] = bytes(data)
        assert problems(changed, pinned) == [f"{name}: changed (its SHA-256 is not the manifest's)"]
    # Two log lines swapped: the file's hash is not the manifest's.
    swapped = dict(whole)
    first, second = whole["log.jsonl"].splitlines(keepends=True)
    swapped["log.jsonl"] = second + first
    assert problems(swapped, pinned) == ["log.jsonl: changed (its SHA-256 is not the manifest's)"]
    # The manifest itself: a frame's URL rewritten.
    forged = dict(whole)
    forged["manifest.json"] = whole["manifest.json"].replace(b'"rec-1"', b'"rec-2"', 1)
    assert problems(forged, pinned) == [
        "manifest.json: the signature does not match its content (changed after signing)"
    ]


def test_missing_and_unlisted_files_are_named() -> None:
    key = Ed25519PrivateKey.generate()
    files = recording(key)
    del files["frames/0000-first.jpg"]
    files["frames/0009-action.jpg"] = b"planted"
    files["view.html"] = b"<html>"  # agentenv view's page: no problem
    assert problems(files, key_text(key)) == [
        "frames/0000-first.jpg: listed in the manifest, missing",
        "frames/0009-action.jpg: present, not listed in the manifest (not the computer's)",
    ]


def test_a_forger_signing_with_a_key_of_their_own_is_caught() -> None:
    computer, forger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    # The forger lists their own frame, signs with their key and names it.
    forged = recording(forger)
    assert problems(forged, key_text(computer)) == [
        f"manifest.json: signed by {key_text(forger)}, not by the pinned key {key_text(computer)}"
    ]
    # ... or names the computer's key, which their signature does not match.
    named = recording(forger, key=key_text(computer))
    assert problems(named, key_text(computer)) == [
        "manifest.json: the signature does not match its content (changed after signing)"
    ]


def test_unsigned_and_broken_manifests_are_named() -> None:
    key = Ed25519PrivateKey.generate()
    pinned = key_text(key)
    assert problems({}, pinned) == ["manifest.json: missing"]
    assert problems({"manifest.json": b"{"}, pinned) == ["manifest.json: not JSON"]
    rebuilt = {"manifest.json": orjson.dumps({"rebuilt": True, "files": {}})}
    assert problems(rebuilt, pinned) == [
        "manifest.json: not signed (rebuilt by the harness, not by the computer)"
    ]
    older = {"manifest.json": orjson.dumps({"frames": []})}
    assert problems(older, pinned)[1] == (
        "manifest.json: lists no files' hashes (made by an older computer?)"
    )


def test_an_entry_without_a_hash_is_named() -> None:
    key = Ed25519PrivateKey.generate()
    files = recording(key)
    manifest = orjson.loads(files["manifest.json"])
    del manifest["files"]["frames/0001-action.jpg"]
    del files["frames/0001-action.jpg"]
    files["manifest.json"] = signed_manifest(key, manifest)
    assert problems(files, key_text(key)) == [
        "frames/0001-action.jpg: named by the manifest's entries, but has no hash in files"
    ]


def test_fields_the_reader_does_not_know_are_signed_too() -> None:
    key = Ed25519PrivateKey.generate()
    files = recording(key, chain_first="abc", chain_last="def")
    assert problems(files, key_text(key)) == []
    files["manifest.json"] = files["manifest.json"].replace(b'"def"', b'"deg"')
    assert problems(files, key_text(key))[0].startswith("manifest.json: the signature")


# -- the harness's evidence (harness/attest.py) ----------------------------------------


def test_guard_refusals_are_counted_by_rule_then_by_who() -> None:
    from agentenv.harness.attest import guard_refusals

    def refused(seq: int, who: str, rule: str) -> Any:
        return {"seq": seq, "at": "t", "action": {"who": who, "guard": {"rule": rule}}}

    lines = [
        refused(1, "alice", "browser-wide"),
        refused(2, "alice", "browser-wide"),
        refused(3, "bob", "browser-wide"),
        refused(4, "bob", "relay-world"),
        {"seq": 5, "at": "t", "action": {"who": "alice", "ok": True}},
        {"seq": 6, "at": "t", "tab": {"event": "opened"}},
    ]
    assert guard_refusals(lines) == {
        "browser-wide": {"alice": 2, "bob": 1},
        "relay-world": {"bob": 1},
    }


def test_a_run_pins_verifies_and_reports_its_recordings(tmp_path: Path) -> None:
    from agentenv.harness import attest

    key = Ed25519PrivateKey.generate()
    folder = tmp_path / "recordings" / "rec-1"
    for name, data in recording(key).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    metadata: dict[str, Any] = {}
    attest.pin(metadata, "shop", key_text(key))
    attest.started(metadata, "rec-1", "run1", "shop")
    assert attest.checked(metadata, "rec-1", folder) == []
    fields = attest.results_fields(metadata)
    assert fields == {
        "image_digest": "sha256:" + "0" * 64,
        "chromium": "Chrome/150.0.0.0",
        "chromium_flags": None,
        "key": key_text(key),
        "guard_refusals": {},
        "human_entries": 0,
        "handoffs": 0,
        "manifest_sha256": sha256((folder / "manifest.json").read_bytes()),
        "verified": True,
    }
    # The run's metadata pins the key `agentenv verify` finds for the folder.
    (tmp_path / "metadata.json").write_text(orjson.dumps(metadata).decode())
    assert attest.pinned_key(folder) == key_text(key)
    assert attest.verify(str(folder)) == []
    # A frame changed after the download: the step names it, and so does the line.
    (folder / "frames/0000-first.jpg").write_bytes(b"forged")
    assert attest.checked(metadata, "rec-1", folder) == [
        "it does not verify: frames/0000-first.jpg: changed (its SHA-256 is not the manifest's)"
    ]
    assert attest.results_fields(metadata)["verified"] is False
    # A computer whose card names no key: said so, never verified.
    attest.pin(metadata, "old", None)
    attest.started(metadata, "rec-2", "run2", "old")
    assert attest.checked(metadata, "rec-2", folder)[0].endswith("it cannot be verified")
    assert [a["recording"] for a in attest.results_fields(metadata)["attestations"]] == [
        "run1",
        "run2",
    ]


def test_two_log_lines_swapped_are_named_by_the_chain_too(tmp_path: Path) -> None:
    """verify checks the log's chain (protocol/chain.py) beside the files'
    hashes: two lines swapped are named as such, not only as a changed file."""
    from agentenv.harness import attest

    key = Ed25519PrivateKey.generate()
    files = recording(key)
    first, second = files["log.jsonl"].splitlines()
    files["log.jsonl"] = second + b"\n" + first + b"\n"
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    found = attest.folder_problems(tmp_path, key_text(key))
    assert "log.jsonl: changed (its SHA-256 is not the manifest's)" in found, found
    assert any("log.jsonl" in p and "order" in p for p in found), found
