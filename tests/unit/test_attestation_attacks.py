"""Attacks on a signed recording found in the review of issue 25's signing
change: each is a way a forged or broken recording got past ``agentenv
verify`` (or crashed it, or the harness's check) before its fix."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentenv.harness import attest
from agentenv.harness.cli import main
from agentenv.harness.local_store import LocalStore, start_local
from agentenv.protocol.attestation import key_text, recording_problems, sha256, signed_manifest
from tests.unit.test_attestation import problems, recording


def written(files: dict[str, bytes], folder: Path) -> Path:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def run_folder(tmp_path: Path, key: Ed25519PrivateKey, recording_id: str) -> dict[str, Any]:
    """A run's metadata.json pinning ``key`` for ``recording_id``."""
    metadata: dict[str, Any] = {}
    attest.pin(metadata, "shop", key_text(key))
    attest.started(metadata, recording_id, "run1", "shop")
    (tmp_path / "metadata.json").write_bytes(orjson.dumps(metadata))
    return metadata


def test_a_recording_spliced_under_another_recordings_id_is_named(tmp_path: Path) -> None:
    # Two genuine recordings of one computer (one key, as under --reuse): the
    # first's files put in the second's place verify as the second's.
    key = Ed25519PrivateKey.generate()
    metadata = run_folder(tmp_path, key, "rec-00000000000000b2")
    other = recording(key, recording_id="rec-00000000000000a1")
    folder = written(other, tmp_path / "recordings" / "rec-00000000000000b2")
    expected = "manifest.json: the recording rec-00000000000000a1, not rec-00000000000000b2"
    assert attest.verify(str(folder)) == [expected + " (the folder's name)"]
    assert attest.checked(metadata, "rec-00000000000000b2", folder) == [
        f"it does not verify: {expected} (the one the run started)"
    ]
    # A folder a judge named themselves is not taken for an id.
    mine = written(other, tmp_path / "handed")
    assert attest.verify(str(mine), key_text(key)) == []


def test_a_manifest_with_a_key_twice_is_named() -> None:
    # Parsers differ on which of two values they keep (orjson and Python the
    # last, others the first): what one reader sees may not be what was signed.
    key = Ed25519PrivateKey.generate()
    files = recording(key)
    files["manifest.json"] = files["manifest.json"].replace(
        b"{", b'{"recording_id": "rec-forged", "chromium": "Chrome/1.0",', 1
    )
    # The bytes signed are the file's own, so the signature breaks as well.
    assert problems(files, key_text(key)) == [
        "manifest.json: 'chromium' twice in one object (a reader may take either value)",
        "manifest.json: 'recording_id' twice in one object (a reader may take either value)",
        "manifest.json: the signature does not match its content (changed after signing)",
    ]


def test_a_forged_manifest_of_the_wrong_shapes_is_named_not_a_crash(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    for forged in (
        {"frames": 5, "files": {}},
        {"har": {"parts": 3}, "files": {}},
        {"video": {"chunks": 1}, "files": {}},
        {"downloads": 7, "files": {}},
        {"log": "log.jsonl", "files": []},
    ):
        found = recording_problems(orjson.dumps(forged), lambda n: None, [], key_text(key))
        assert found[0] == "manifest.json: not signed", (forged, found)
    # The harness's evidence of a manifest that is JSON but no object.
    folder = tmp_path / "recordings" / "rec-1"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_bytes(b"[]")
    metadata = run_folder(tmp_path, key, "rec-1")
    assert attest.checked(metadata, "rec-1", folder) == [
        "it does not verify: manifest.json: not a JSON object"
    ]
    assert metadata["recordings"]["rec-1"]["evidence"]["image_digest"] is None


def test_a_malformed_key_is_bad_input_not_a_bad_recording(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    folder = written(recording(key), tmp_path / "rec")
    assert main(["verify", str(folder), "--key", key_text(key)]) == 0
    assert main(["verify", str(folder), "--key", "ed25519:AAAA"]) == 2
    bad = tmp_path / "computer.key"
    bad.write_text("not a key\n")
    assert main(["verify", str(folder), "--key", str(bad)]) == 2


def test_verify_says_which_key_it_checked_against(tmp_path: Path, capsys: Any) -> None:
    # A key found in a run's metadata.json is the run's claim, beside the
    # recording: the judge sees which key, and where it came from.
    key = Ed25519PrivateKey.generate()
    run_folder(tmp_path, key, "rec-1")
    folder = written(recording(key), tmp_path / "recordings" / "rec-1")
    assert main(["verify", str(folder)]) == 0
    out = capsys.readouterr().out
    assert key_text(key) in out and str(tmp_path / "metadata.json") in out, out


def test_verify_follows_no_link_out_of_the_recording(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    files = recording(key)
    folder = written(files, tmp_path / "rec")
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(files["frames/0001-action.jpg"])
    (folder / "frames/0001-action.jpg").unlink()
    os.symlink(outside, folder / "frames/0001-action.jpg")
    assert attest.verify(str(folder), key_text(key)) == [
        "frames/0001-action.jpg: listed in the manifest, missing",
        "frames/0001-action.jpg: a link, not a file (verify reads nothing out of the recording)",
    ]


def test_a_view_page_in_a_store_is_not_the_computers(tmp_path: Path, capsys: Any) -> None:
    # agentenv view never writes into a store (its page of an s3:// place goes
    # to the working folder): a view.html there is planted, and a judge would
    # open it.
    key = Ed25519PrivateKey.generate()
    folder = written({**recording(key), "view.html": b"<p>a run that never was"}, tmp_path / "r")
    assert attest.folder_problems(folder, key_text(key)) == []
    assert attest.folder_problems(folder, key_text(key), from_store=True) == [
        "view.html: present, not listed in the manifest (not the computer's)"
    ]
    # In a folder it is allowed (agentenv view writes it there), and said unchecked.
    assert main(["verify", str(folder), "--key", key_text(key)]) == 0
    assert "view.html is not checked" in capsys.readouterr().err


def test_a_name_leaving_the_folder_is_never_read(tmp_path: Path) -> None:
    # (held) A manifest naming ../start.json: verify does not read the file
    # beside the folder, though it holds the very bytes.
    key = Ed25519PrivateKey.generate()
    files = recording(key)
    manifest = orjson.loads(files["manifest.json"])
    manifest["files"]["../start.json"] = sha256(files["start.json"])
    folder = written({**files, "manifest.json": signed_manifest(key, manifest)}, tmp_path / "rec")
    (tmp_path / "start.json").write_bytes(files["start.json"])
    assert attest.folder_problems(folder, key_text(key)) == [
        "../start.json: listed in the manifest, missing"
    ]


@pytest.fixture(scope="module")
def local_store() -> Iterator[LocalStore]:
    found = start_local(say=lambda _: None, host="127.0.0.1")
    try:
        yield found
    finally:
        found.close()


def test_an_object_in_the_way_of_a_recordings_folder_is_no_store_failure(
    local_store: LocalStore, tmp_path: Path
) -> None:
    # An agent holding the recording's grant puts an object named as a folder
    # of the recording ("frames"), or inside one of its files: the download
    # failed ("cannot download recording", as if the store had), now what is
    # in the way is skipped and the check names what is wrong.
    key = Ed25519PrivateKey.generate()
    rec = "rec-00000000000000c3"
    grant = local_store.grant("run/a", started_here=False)
    bucket, _, prefix = grant["url"].removeprefix("s3://").partition("/")
    s3 = local_store.client("s3")
    planted = {"frames": b"x", "start.json/x": b"x"}
    for name, data in {**recording(key, recording_id=rec), **planted}.items():
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{rec}/{name}", Body=data)
    folder = tmp_path / "recordings" / rec
    names, skipped = local_store.fetch("run/a", rec, folder)
    assert "frames" in names and sorted(skipped) == [
        "frames/0000-first.jpg",
        "frames/0001-action.jpg",
        "start.json/x",
    ]
    metadata = run_folder(tmp_path, key, rec)
    assert attest.checked(metadata, rec, folder) == [
        "it does not verify: frames/0000-first.jpg: listed in the manifest, missing; "
        "frames/0001-action.jpg: listed in the manifest, missing; "
        "frames: present, not listed in the manifest (not the computer's)"
    ]
