"""``agentenv verify RECORDING``, and the evidence a run keeps of each recording
(docs/spec.md section 7, "Attested runs").

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
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from agentenv.harness.harness_errors import HarnessError
from agentenv.harness.store import download_recording, safe_name
from agentenv.protocol.attestation import (
    KEY_PREFIX,
    MANIFEST,
    UNLISTED_OK,
    KeyTextError,
    Read,
    public_key,
    recording_problems,
    sha256,
)
from agentenv.protocol.chain import recording_check
from agentenv.protocol.handoffs import handoffs_in, human_entries
from agentenv.protocol.log import LogLine, action_of, read_lines
from agentenv.protocol.recording import RECORDING_ID

__all__ = [
    "VerifyError",
    "checked",
    "checking_key",
    "evidence",
    "folder_problems",
    "guard_refusals",
    "pin",
    "pinned_key",
    "results_fields",
    "started",
    "verify",
    "write_attestation",
]


class VerifyError(HarnessError):
    """A recording that cannot be checked at all (no key, no such folder)."""


def named_id(place: str) -> tuple[str, str] | None:
    """The recording id a folder's name or a store place's last part says
    its recording has, when it is one (``rec-…``)."""
    name = place.rstrip("/").rsplit("/", 1)[-1]
    if RECORDING_ID.match(name) is None:
        return None
    return name, "its place in the store" if place.startswith("s3://") else "the folder's name"


def _entries(folder: Path) -> tuple[list[str], list[str]]:
    """The regular files under ``folder`` and the links (to files or
    folders), each by its name in the recording; links are not followed."""
    files: list[str] = []
    links: list[str] = []
    for top, folders, names in os.walk(folder):
        here = Path(top)
        for name in [*folders, *names]:
            path = here / name
            relative = path.relative_to(folder).as_posix()
            if path.is_symlink():
                links.append(relative)
            elif name in names and path.is_file():
                files.append(relative)
    return sorted(files), sorted(links)


def _read_in(folder: Path, name: str) -> bytes | None:
    """The bytes of the regular file ``name`` in ``folder``, reached through
    no link; None when there is none."""
    safe = safe_name(name)
    if safe is None:
        return None
    path = folder
    for part in PurePosixPath(safe).parts:
        path = path / part
        if path.is_symlink():
            return None
    return path.read_bytes() if path.is_file() else None


def folder_problems(
    folder: Path,
    key: str,
    expected: tuple[str, str] | None = None,
    breaks: list[str] | None = None,
    *,
    from_store: bool = False,
) -> list[str]:
    """What is wrong with the recording in ``folder``, checked against ``key``
    (and that it is ``expected``'s recording: its id, and what names it).
    A folder downloaded from a store (``from_store``) may hold no
    ``view.html`` either: nothing writes one there.
    Only the folder's own files are read: a link in it is a problem, never
    followed (a recording handed over could point outside it). The named
    breaks in its log's chain (the computer's own record of a crash: not a
    problem) are added to ``breaks`` when given."""
    folder = folder.resolve()
    present, links = _entries(folder)

    def read(name: str) -> bytes | None:
        return _read_in(folder, name)

    def chain_problems(read: Read, manifest: Mapping[str, Any]) -> list[str]:
        """The log slice's hash chain (:mod:`agentenv.protocol.chain`)."""
        found = recording_check(read, manifest)
        if breaks is not None:
            breaks.extend(found.breaks)
        return found.all(strict=False)

    problems = recording_problems(
        read(MANIFEST),
        read,
        present,
        key,
        chain_problems,
        expected=expected,
        unlisted_ok=() if from_store else UNLISTED_OK,
    )
    return problems + [
        f"{name}: a link, not a file (verify reads nothing out of the recording)" for name in links
    ]


def key_given(given: str) -> tuple[str, str]:
    """``--key``: the key's text, or a file holding it; and where it came from."""
    if given.strip().startswith(KEY_PREFIX):
        return given.strip(), "given with --key"
    path = Path(given)
    if path.is_file():
        return path.read_text().strip(), f"given in {path}"
    raise VerifyError(
        f"--key {given[:40]!r} is neither a key ({KEY_PREFIX}…, the card's attestation.key) "
        "nor a file holding one"
    )


def _metadata_file(folder: Path) -> Path:
    return folder.resolve().parent.parent / "metadata.json"


def pinned_key(folder: Path) -> str | None:
    """The key the run pinned for the recording in ``folder`` (a run's
    ``recordings/<recording_id>/``), from the run's ``metadata.json``."""
    try:
        found = json.loads(_metadata_file(folder).read_text())
    except (OSError, ValueError):
        return None
    recordings = found.get("recordings") if isinstance(found, dict) else None
    entry = recordings.get(folder.resolve().name) if isinstance(recordings, dict) else None
    key = entry.get("key") if isinstance(entry, dict) else None
    return key if isinstance(key, str) else None


def checking_key(recording: str, given: str | None = None) -> tuple[str, str]:
    """The key to check ``recording`` against, and where it came from:
    ``--key``, else the one its run pinned (a run's metadata.json is the
    run's own claim, beside the recording: a judge compares the key with the
    computer's). :class:`VerifyError` when there is none, or it is no key."""
    if given is not None:
        key, where = key_given(given)
    elif recording.startswith("s3://"):
        raise VerifyError(
            "a recording in a store carries no run metadata: give --key (the computer's "
            "card's attestation.key, or the key in the run's metadata.json)"
        )
    else:
        folder = _folder(recording)
        found = pinned_key(folder)
        if found is None:
            raise VerifyError(
                f"no key to check {recording} against: give --key (the computer's card's "
                "attestation.key); a run's recordings/<recording_id>/ folder finds the key "
                "its run pinned in metadata.json"
            )
        key, where = found, f"pinned in {_metadata_file(folder)}"
    try:
        public_key(key)
    except KeyTextError as exc:
        raise VerifyError(f"the key {where}: {exc}") from None
    return key, where


def _folder(recording: str) -> Path:
    folder = Path(recording)
    if not folder.is_dir():
        raise VerifyError(
            f"{recording} is not a folder: give a recording's folder or its s3:// place"
        )
    return folder


def verify(recording: str, key: str | None = None, breaks: list[str] | None = None) -> list[str]:
    """The problems of ``recording`` (a folder or ``s3://…``): none when it
    is whole and signed by the key (``--key``, else the run's pinned one:
    :func:`checking_key`). Its log's named breaks are added to ``breaks``
    when given."""
    pinned, _ = checking_key(recording, key)
    if recording.startswith("s3://"):
        with tempfile.TemporaryDirectory() as tmp:
            skipped: list[str] = []
            try:
                folder = download_recording(recording, Path(tmp), skipped)
            except Exception as exc:  # boto3's: no credentials, no bucket, no route
                raise VerifyError(f"cannot download {recording}: {exc}") from None
            problems = folder_problems(folder, pinned, named_id(recording), breaks, from_store=True)
            return problems + [
                f"{name}: in the store, not the computer's (a name no folder of the "
                "recording can hold)"
                for name in skipped
            ]
    folder = _folder(recording)
    return folder_problems(folder, pinned, named_id(str(folder.resolve())), breaks)


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
    if not isinstance(manifest, dict):  # JSON, but no object: evidence of nothing
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
        # A person's acts in it (issue 44): a grader can tell them from the agent's.
        "human_entries": human_entries(lines),
        "handoffs": len(handoffs_in(lines)),
        "manifest_sha256": sha256(data) if data is not None else None,
    }


# -- a run's pins and evidence ---------------------------------------------------------

#: How many of a recording's problems a step's failure names (all are in metadata.json).
SHOWN = 5


def pin(metadata: dict[str, Any], env_id: str, key: str | None) -> None:
    """Pin ``env_id``'s computer's key (its card's, at ``deploy_env``)."""
    metadata.setdefault("keys", {})[env_id] = key


def started(metadata: dict[str, Any], recording_id: str, name: str, env_id: str) -> None:
    """A recording's entry in the run's metadata, with its computer's pinned key."""
    key = (metadata.get("keys") or {}).get(env_id)
    metadata.setdefault("recordings", {})[recording_id] = {
        "name": name,
        "env_id": env_id,
        "key": key,
    }


def checked(metadata: dict[str, Any], recording_id: str, folder: Path) -> list[str]:
    """Verify a downloaded recording against its pinned key and keep its
    evidence in the run's metadata; the problems, as a step names them."""
    entry = metadata.setdefault("recordings", {}).setdefault(recording_id, {})
    key = entry.get("key")
    if not isinstance(key, str):
        problems = ["its computer's card names no key (attestation.key): it cannot be verified"]
    else:
        started = (recording_id, "the one the run started")
        problems = folder_problems(folder, key, started, from_store=True)
    entry["evidence"] = evidence(folder, key if isinstance(key, str) else None)
    entry["problems"] = problems
    if not problems:
        return []
    more = f" (and {len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
    return [f"it does not verify: {'; '.join(problems[:SHOWN])}{more}"]


def results_fields(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence on a task's line in ``results.jsonl``: its recording's
    (the first, by start, when it has several; ``attestations`` lists each)."""
    found = [
        {"recording": entry.get("name"), **entry["evidence"], "verified": not entry["problems"]}
        for entry in (metadata.get("recordings") or {}).values()
        if "evidence" in entry
    ]
    if not found:
        return {}
    first = {k: v for k, v in found[0].items() if k != "recording"}
    if len(found) == 1:
        return first
    # A person's entries over every recording of the task (each its own scope's, or its own span).
    people = sum(int(x.get("human_entries") or 0) for x in found)
    return {**first, "human_entries": people, "attestations": found}


def write_attestation(target: Path, metadata: Mapping[str, Any], recording_id: str) -> None:
    """``attestation.json`` beside a Mind2Web export's ``result.json``."""
    entry = (metadata.get("recordings") or {}).get(recording_id) or {}
    body = {
        "recording_id": recording_id,
        **(entry.get("evidence") or {}),
        "verified": "evidence" in entry and not entry.get("problems"),
        "problems": entry.get("problems", []),
    }
    (target / "attestation.json").write_text(json.dumps(body, indent=2))
