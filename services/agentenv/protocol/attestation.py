"""What makes a recording evidence (docs/spec.md section 7, "Attested runs"): its
manifest's signature and file hashes, checked without I/O.

- **The key** is Ed25519. Its text form, on the card (``attestation.key``)
  and in a manifest (``key``), is ``ed25519:`` and the standard base64 of its
  32 raw bytes (:func:`key_text`, :func:`public_key`).
- **What is signed** is ``manifest.json``'s own bytes, less its last member,
  ``signature``: the computer writes the manifest (two-space indents,
  :func:`signed_manifest`), signs those bytes, and puts the signature in as
  the object's last member, ``,\n  "signature": "<base64>"`` before the
  closing ``\n}``. A judge takes that member out again (:func:`signed_part`)
  and checks the signature over exactly what the computer wrote: no
  re-encoding, so no JSON writer's way with numbers (``1e-7`` or
  ``1e-07``, ``1.0`` or ``1``) can differ from the signer's. Every field is
  covered, those a reader does not know too (the chain's ``chain_first``
  and ``chain_last``). A name twice in one object is refused as well
  (:func:`twice`): parsers differ on which value they keep.
  ``signature`` is the standard base64 of the 64-byte Ed25519 signature.
- **The files** are in the manifest's ``files``: each uploaded file's name
  (relative to the recording) and the hex SHA-256 of its bytes, every file
  but ``manifest.json`` itself.

:func:`recording_problems` takes a reader (``read(name)``: a file's bytes, or
None when it is not there) and the names present, and says what is wrong,
one sentence a problem; an empty list is a recording that verifies. Given
the id the recording must have (the one a run started, or the name of the
folder or store place it is in), a manifest of another recording is named:
a genuine recording of the same computer put in another's place verifies
otherwise.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from agentenv.errors import AgentEnvError

__all__ = [
    "KEY_PREFIX",
    "MANIFEST",
    "UNLISTED_OK",
    "KeyTextError",
    "file_problems",
    "id_problems",
    "key_text",
    "named_files",
    "public_key",
    "recording_problems",
    "sha256",
    "signature_problems",
    "signed_manifest",
    "signed_part",
    "twice",
]

KEY_PREFIX = "ed25519:"
MANIFEST = "manifest.json"
#: Files a recording's folder may hold that the computer did not write:
#: the page ``agentenv view`` writes there. Never in a store (``agentenv
#: view`` of an ``s3://`` place writes its page elsewhere): one there is
#: planted, and a judge would open it.
UNLISTED_OK = frozenset({"view.html"})

#: ``read(name)``: a recording's file's bytes, or None when it is not there.
Read = Callable[[str], bytes | None]


class KeyTextError(AgentEnvError, ValueError):
    """A key's text is not an Ed25519 public key in the wire's form."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def key_text(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """``ed25519:<base64>``, the public half of ``key``."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return KEY_PREFIX + base64.b64encode(public.public_bytes_raw()).decode()


def public_key(text: str) -> Ed25519PublicKey:
    """The key ``text`` (``ed25519:<base64>``) names; :class:`KeyTextError` names
    what is wrong with it."""
    text = text.strip()
    if not text.startswith(KEY_PREFIX):
        raise KeyTextError(
            f"a key is {KEY_PREFIX}<base64> (the card's attestation.key), not {text[:24]!r}"
        )
    try:
        raw = base64.b64decode(text[len(KEY_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise KeyTextError("the key's base64 does not decode") from None
    if len(raw) != 32:
        raise KeyTextError(f"an Ed25519 key is 32 bytes, this one {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


#: The manifest's last member, its signature, as the computer writes it.
_SIGNATURE = re.compile(rb',\n  "signature": "([A-Za-z0-9+/]*={0,2})"\n}\n?\Z')


def signed_manifest(key: Ed25519PrivateKey, manifest: Mapping[str, Any]) -> bytes:
    """``manifest.json``'s bytes: ``manifest`` (less any ``signature``) with
    two-space indents, signed by ``key``, its signature the last member."""
    body = {k: v for k, v in manifest.items() if k != "signature"}
    written = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    if not written.endswith(b"\n}"):
        raise ValueError("a manifest to sign is a JSON object with a member at least")
    signature = base64.b64encode(key.sign(written)).decode()
    return written[:-2] + f',\n  "signature": "{signature}"\n}}'.encode()


def signed_part(data: bytes) -> tuple[bytes, str] | None:
    """What ``manifest.json``'s signature signs (its bytes less its last
    member, ``signature``), and the signature; None when it does not end
    with one as the computer writes it."""
    found = _SIGNATURE.search(data)
    if found is None:
        return None
    return data[: found.start()] + b"\n}", found.group(1).decode()


def twice(data: bytes) -> list[str]:
    """The names that appear twice in one object of the JSON ``data``, sorted."""
    found: set[str] = set()

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for name, _ in items:
            if name in seen:
                found.add(name)
            seen.add(name)
        return dict(items)

    json.loads(data, object_pairs_hook=pairs)
    return sorted(found)


def signature_problems(manifest: Mapping[str, Any], key: str, data: bytes) -> list[str]:
    """What is wrong with ``manifest``'s signature (``data``: the bytes of
    ``manifest.json``, ``manifest`` parsed from them) against the pinned ``key``."""
    try:
        pinned = public_key(key)
    except KeyTextError as exc:
        return [f"the key to check against: {exc}"]
    signature = manifest.get("signature")
    if not isinstance(signature, str) or not signature:
        why = " (rebuilt by the harness, not by the computer)" if manifest.get("rebuilt") else ""
        return [f"{MANIFEST}: not signed{why}"]
    signer = manifest.get("key")
    if isinstance(signer, str) and signer.strip() != key.strip():
        return [f"{MANIFEST}: signed by {signer}, not by the pinned key {key}"]
    part = signed_part(data)
    if part is None or part[1] != signature:
        return [
            f"{MANIFEST}: its signature is not its last member, as the computer writes it "
            "(changed after signing)"
        ]
    try:
        raw = base64.b64decode(signature, validate=True)
        pinned.verify(raw, part[0])
    except (binascii.Error, ValueError, InvalidSignature):
        return [f"{MANIFEST}: the signature does not match its content (changed after signing)"]
    return []


def _list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else none (a forged manifest's shapes)."""
    return value if isinstance(value, list) else []


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def named_files(manifest: Mapping[str, Any]) -> set[str]:
    """The files the manifest's entries name as uploaded: frames taken, the
    log, the video's chunks, the network log and its parts, downloads kept.
    Entries of another shape than the recorder writes name none."""
    names: set[str] = set()
    for frame in _list(manifest.get("frames")):
        if isinstance(frame, dict) and not frame.get("error") and frame.get("file"):
            names.add(str(frame["file"]))
    log = _object(manifest.get("log"))
    if log.get("file"):
        names.add(str(log["file"]))
    for chunk in _list(_object(manifest.get("video")).get("chunks")):
        if isinstance(chunk, dict) and chunk.get("file"):
            names.add(str(chunk["file"]))
    har = _object(manifest.get("har"))
    if har.get("file"):
        names.add(str(har["file"]))
    names.update(str(p) for p in _list(har.get("parts")))
    for download in _list(manifest.get("downloads")):
        if isinstance(download, dict) and download.get("file"):
            names.add(str(download["file"]))
    return names


def file_problems(
    manifest: Mapping[str, Any],
    read: Read,
    present: Collection[str],
    unlisted_ok: Collection[str] = UNLISTED_OK,
) -> list[str]:
    """Every listed file there with its hash; every file there listed (but
    ``unlisted_ok``); every file the entries name hashed."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        return [f"{MANIFEST}: lists no files' hashes (made by an older computer?)"]
    problems: list[str] = []
    for name in sorted(files):
        data = read(name)
        if data is None:
            problems.append(f"{name}: listed in the manifest, missing")
        elif sha256(data) != files[name]:
            problems.append(f"{name}: changed (its SHA-256 is not the manifest's)")
    for name in sorted(set(present) - set(files) - {MANIFEST} - set(unlisted_ok)):
        problems.append(f"{name}: present, not listed in the manifest (not the computer's)")
    for name in sorted(named_files(manifest) - set(files)):
        problems.append(f"{name}: named by the manifest's entries, but has no hash in files")
    return problems


def id_problems(manifest: Mapping[str, Any], expected: tuple[str, str] | None) -> list[str]:
    """Whether the manifest is of the recording ``expected`` names: (its id,
    what says it is that one)."""
    if expected is None or manifest.get("recording_id") == expected[0]:
        return []
    found = manifest.get("recording_id")
    return [f"{MANIFEST}: the recording {found}, not {expected[0]} ({expected[1]})"]


def recording_problems(
    manifest_bytes: bytes | None,
    read: Read,
    present: Collection[str],
    key: str,
    chain: Callable[[Read, Mapping[str, Any]], list[str]] | None = None,
    *,
    expected: tuple[str, str] | None = None,
    unlisted_ok: Collection[str] = UNLISTED_OK,
) -> list[str]:
    """What is wrong with a recording: its manifest (``manifest_bytes``), its
    signature against ``key``, that it is the recording ``expected`` names
    (:func:`id_problems`), its files (``read``, ``present``: every name
    there; each must be listed but ``unlisted_ok``), and ``chain(read,
    manifest)``'s problems with the log's chain."""
    if manifest_bytes is None:
        return [f"{MANIFEST}: missing"]
    try:
        manifest = orjson.loads(manifest_bytes)
    except orjson.JSONDecodeError:
        return [f"{MANIFEST}: not JSON"]
    if not isinstance(manifest, dict):
        return [f"{MANIFEST}: not a JSON object"]
    try:
        names = twice(manifest_bytes)
    except RecursionError:  # deeper than Python's parser goes (orjson's goes further)
        return [f"{MANIFEST}: nested too deep to check"]
    problems = [
        f"{MANIFEST}: {name!r} twice in one object (a reader may take either value)"
        for name in names
    ]
    problems += signature_problems(manifest, key, manifest_bytes)
    problems += id_problems(manifest, expected)
    problems += file_problems(manifest, read, present, unlisted_ok)
    if chain is not None:
        problems += chain(read, manifest)
    return problems
