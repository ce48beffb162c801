"""``agentenv verify`` on a 500-frame recording, beside reading and hashing its
files alone (the anchor: the least any check of every file must do).

The recording is :mod:`bench.viewer`'s (500 action frames of a real
1280x800 JPEG, five log entries before each), with a ``start.json``, every
file's SHA-256 in its manifest, signed as the recorder signs it. Timed in
the process (:func:`agentenv.harness.attest.verify`) and as the command a
judge runs (``python -m agentenv verify``, its imports included).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentenv.harness.attest import verify
from agentenv.protocol.attestation import key_text, sha256
from agentenv.protocol.recording import BrowserRecordingManifest
from agentenv.recorder.provenance import sign_manifest
from bench.stats import table
from bench.viewer import FRAMES, _jpeg, _recording


def _signed(folder: Path, key: Ed25519PrivateKey) -> None:
    (folder / "start.json").write_text('{"recording_id":"rec-bench"}')
    manifest = BrowserRecordingManifest.model_validate_json((folder / "manifest.json").read_text())
    files = {
        p.relative_to(folder).as_posix(): sha256(p.read_bytes())
        for p in folder.rglob("*")
        if p.is_file() and p.name != "manifest.json"
    }
    signed, data = sign_manifest(manifest.model_copy(update={"files": files}), key)
    assert signed.signature
    (folder / "manifest.json").write_bytes(data)


def run() -> str:
    jpeg = _jpeg()
    key = Ed25519PrivateKey.generate()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rec"
        _recording(folder, jpeg)
        _signed(folder, key)
        began = time.perf_counter()
        digests = [hashlib.sha256(p.read_bytes()).digest() for p in folder.rglob("*.jpg")]
        anchor = time.perf_counter() - began
        runs, command = [], []
        for _ in range(3):
            began = time.perf_counter()
            problems = verify(str(folder), key_text(key))
            runs.append(time.perf_counter() - began)
            assert problems == [], problems
            began = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "agentenv", "verify", str(folder), "--key", key_text(key)],
                capture_output=True,
                timeout=60,
            )
            command.append(time.perf_counter() - began)
            assert done.returncode == 0, done.stderr
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert len(digests) == FRAMES
    rows = [
        [
            f"agentenv verify, {FRAMES} frames ({size / 1e6:.1f} MB in all)",
            f"{min(runs):.3f} s in the process, {min(command):.2f} s as a command",
            f"read + SHA-256 of the frames alone {anchor:.3f} s",
        ],
    ]
    return table("verify", ["case", "best of 3", "anchor"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
