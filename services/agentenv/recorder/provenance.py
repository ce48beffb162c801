"""What a recording says about the computer that made it, and its signature
(docs/spec.md section 7, "Attested runs").

- ``image_digest``: the digest of the computer's own files that its image
  carries (``launch/digest.sh`` at build, or install-native.sh): what the
  computer itself can vouch for. The harness's image id is the engine's
  name for the image, which the computer cannot see from inside; the
  harness keeps that one itself.
- ``chromium``: the browser's version as Chromium answers it
  (``/json/version``'s ``Browser``, through the relay), and
  ``chromium_flags``: the switches its browser process runs with, read from
  its command line (``/proc``), credentials in them redacted.
- ``key``: the computer's public key; the manifest is signed with its
  private half (:mod:`agentenv.signing`).

:func:`sign_manifest` is the one place a manifest gets its signature.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentenv.log.redact import redact_text
from agentenv.protocol.attestation import key_text, signed_manifest
from agentenv.protocol.recording import BrowserRecordingManifest
from agentenv.settings import Settings
from agentenv.signing import SigningKeyError, computer_key

__all__ = ["Provenance", "browser_flags", "provenance", "sign_manifest", "signer_of"]

log = logging.getLogger("agentenv.recorder")


@dataclass(frozen=True)
class Provenance:
    image_digest: str | None
    chromium: str | None
    chromium_flags: list[str] | None
    signer: Ed25519PrivateKey | None

    @property
    def key(self) -> str | None:
        return key_text(self.signer) if self.signer is not None else None

    def facts(self) -> dict[str, Any]:
        """The fields start.json and the manifest carry."""
        return {
            "image_digest": self.image_digest,
            "chromium": self.chromium,
            "chromium_flags": self.chromium_flags,
            "key": self.key,
        }


def browser_flags(cmdlines: Iterable[Sequence[str]], profile: str) -> list[str] | None:
    """The switches of the browser process among ``cmdlines`` (each a
    process's argv): the one using ``profile`` that is no child process
    (no ``--type=``); None when none is."""
    wanted = f"--user-data-dir={profile}"
    for argv in cmdlines:
        args = list(argv[1:])
        if wanted in args and not any(a.startswith("--type=") for a in args):
            return [redact_text(a) for a in args]
    return None


def _cmdlines() -> list[list[str]]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if b"--user-data-dir=" in raw:
            found.append([a.decode(errors="replace") for a in raw.split(b"\0") if a])
    return found


def _digest(settings: Settings) -> str | None:
    try:
        text = settings.image_digest_file.read_text().strip()
    except OSError:
        return None
    return text if text.startswith("sha256:") else None


async def _version(settings: Settings, http: aiohttp.ClientSession) -> str | None:
    token = settings.control_token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with http.get(
            settings.relay_http + "/json/version",
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=settings.upstream_timeout_s),
        ) as answer:
            body = await answer.json(content_type=None)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None
    browser = body.get("Browser") if isinstance(body, dict) else None
    return browser if isinstance(browser, str) else None


async def signer_of(settings: Settings) -> Ed25519PrivateKey | None:
    """The computer's key (None, logged, when it cannot be had: recordings go unsigned)."""
    try:
        return await asyncio.to_thread(computer_key, settings.key_file)
    except SigningKeyError as exc:
        log.error("recordings go unsigned: %s", exc)
        return None


async def provenance(settings: Settings, http: aiohttp.ClientSession) -> Provenance:
    """The computer as it is now (read at each start: Chromium may have restarted)."""
    signer = await signer_of(settings)
    flags = await asyncio.to_thread(lambda: browser_flags(_cmdlines(), str(settings.profile_dir)))
    return Provenance(
        image_digest=await asyncio.to_thread(_digest, settings),
        chromium=await _version(settings, http),
        chromium_flags=flags,
        signer=signer,
    )


def sign_manifest(
    manifest: BrowserRecordingManifest, signer: Ed25519PrivateKey | None
) -> tuple[BrowserRecordingManifest, bytes]:
    """``manifest`` with its ``key`` and ``signature``, and the bytes of
    ``manifest.json`` (unsigned, without a key: None is both)."""
    body = manifest.model_dump(mode="json")
    body["key"] = key_text(signer) if signer is not None else None
    if signer is None:
        body["signature"] = None
        data = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    else:
        data = signed_manifest(signer, body)
        body["signature"] = orjson.loads(data)["signature"]
    return BrowserRecordingManifest.model_validate(body), data
