"""Named profiles on the harness's side: the steps ``browser_save_profile``
and ``browser_load_profile`` (docs/harness.md), the profile sealed with a key
only the harness holds, and where sealed profiles are kept.

Decisions:

- **The key**: 32 bytes, base64, in the harness's ``AGENTENV_PROFILE_KEY``
  (``python -c "import os,base64;print(base64.b64encode(os.urandom(32)).decode())"``).
  It never reaches a computer, a task file, the run folder or a message. A
  step fails before it asks the computer anything when the key is missing
  or not 32 bytes.
- **Sealing**: AES-256-GCM from ``cryptography`` (already a runtime
  dependency), a fresh 96-bit random nonce each save, the profile's name as
  associated data: a sealed profile is ``MAGIC || nonce || ciphertext+tag``.
  A profile changed by one bit, renamed, or sealed with another key does not
  open (:class:`ProfileSealError`), and nothing is loaded.
- **Where**: the run's store (:mod:`.store`), outside every recording's
  grant: ``<prefix>/profiles/<name>.profile`` in an S3 store (the harness's
  own credentials write it; no computer's grant reaches it, so no computer
  can read or replace a profile), ``<run folder>/profiles/<name>.profile``
  in the ``file`` store (beside ``recordings/``, which computers mount; this
  folder they do not). The ``local`` store lives as long as its run, so a
  profile there serves the run's later tasks (a batch's); keep profiles
  across runs with ``--store s3://…``.
- **Plaintext**: the document crosses the control token's connection to the
  computer (the op's answer, the load's body) and the harness's memory; it
  is never written to a file, and what a step reports is counts and sizes.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import TypeAdapter, ValidationError

from agentenv.harness import steps as s
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.preflight import KEY_ENV
from agentenv.harness.store import FolderStore, S3Store, Store, join
from agentenv.protocol.profiles import (
    PROFILE_LIMIT,
    ProfileError,
    ProfileLoaded,
    ProfileName,
    ProfileSaved,
    ProfilesLoad,
    ProfilesSave,
    profile_bytes,
    read_profile,
)

__all__ = [
    "KEY_ENV",
    "MAGIC",
    "SEALED_LIMIT",
    "ProfileSealError",
    "get_sealed",
    "load_profile",
    "profile_key",
    "put_sealed",
    "save_profile",
    "seal",
    "unseal",
    "with_profile",
]

#: A sealed profile's first bytes (format 1 of the sealing).
MAGIC = b"agentenv-profile\x01"
_NONCE = 12
_TAG = 16
#: The largest sealed profile read back (a larger one is refused unread).
SEALED_LIMIT = len(MAGIC) + _NONCE + PROFILE_LIMIT + _TAG
_NAME: TypeAdapter[str] = TypeAdapter(ProfileName)

#: The runner's op call: ``(step, op, body model, **fields)``.
OpCall = Callable[..., Any]


class ProfileSealError(StepFailed):
    """A sealed profile that does not open: another key, another name, changed bytes."""


def profile_key(environ: Mapping[str, str]) -> bytes:
    """The 32-byte key from ``AGENTENV_PROFILE_KEY`` (base64); the error
    names the variable, never its value."""
    raw = environ.get(KEY_ENV, "").strip()
    if not raw:
        raise StepFailed(
            f"{KEY_ENV} is not set: profiles are sealed with a 32-byte key the harness "
            "holds, given in base64"
        )
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise StepFailed(f"{KEY_ENV} must be 32 bytes in base64 (AES-256): it is not")
    return key


def _aad(name: str) -> bytes:
    return MAGIC + name.encode()


def seal(key: bytes, name: str, plaintext: bytes) -> bytes:
    """``plaintext`` sealed for ``name`` (AES-256-GCM, a fresh nonce)."""
    nonce = os.urandom(_NONCE)
    return MAGIC + nonce + AESGCM(key).encrypt(nonce, plaintext, _aad(name))


def unseal(key: bytes, name: str, sealed: bytes) -> bytes:
    """The plaintext of profile ``name``, or :class:`ProfileSealError`."""
    if len(sealed) > SEALED_LIMIT:
        raise ProfileSealError(
            f"profile {name!r} is {len(sealed)} bytes, more than a profile holds "
            f"({PROFILE_LIMIT} bytes of document): it was not made by agentenv"
        )
    if not sealed.startswith(MAGIC) or len(sealed) < len(MAGIC) + _NONCE + _TAG:
        raise ProfileSealError(f"profile {name!r} is not a sealed agentenv profile")
    nonce = sealed[len(MAGIC) : len(MAGIC) + _NONCE]
    try:
        return AESGCM(key).decrypt(nonce, sealed[len(MAGIC) + _NONCE :], _aad(name))
    except InvalidTag:
        raise ProfileSealError(
            f"profile {name!r} does not open with the key in {KEY_ENV}: it was sealed with "
            "another key, under another name, or changed since; nothing was loaded"
        ) from None


def _checked_name(name: str) -> str:
    try:
        return _NAME.validate_python(name)
    except ValidationError:
        raise StepFailed(
            f"profile name {name[:100]!r} must be 1 to 100 letters, digits, '.', '_' or '-', "
            "not starting with '.' or '-'"
        ) from None


def _key_of(store: S3Store, name: str) -> str:
    return join(store.prefix, "profiles", f"{name}.profile")


def _file_of(store: FolderStore, name: str) -> Path:
    return store.out / "profiles" / f"{name}.profile"


def put_sealed(store: Store, name: str, sealed: bytes) -> str:
    """Keep ``sealed`` as profile ``name`` in the store; where it went."""
    if isinstance(store, FolderStore):
        target = _file_of(store, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_suffix(".part")
        part.write_bytes(sealed)
        part.replace(target)
        return str(target)
    if isinstance(store, S3Store):
        key = _key_of(store, name)
        try:
            store.client("s3").put_object(Bucket=store.bucket, Key=key, Body=sealed)
        except Exception as exc:  # boto3's: no route, no bucket, access denied
            raise StepFailed(
                f"cannot keep profile {name!r} at {store.where}: {type(exc).__name__}",
                infrastructure=True,
            ) from None
        return f"s3://{join(store.bucket, key)}"
    raise StepFailed(f"the run's store {store.where} keeps no profiles", infrastructure=True)


def get_sealed(store: Store, name: str) -> bytes:
    """Profile ``name`` as sealed, or a step failure naming it."""
    missing = StepFailed(f"no profile {name!r} in {store.where}: save one first")
    if isinstance(store, FolderStore):
        target = _file_of(store, name)
        if not target.is_file():
            raise missing
        if target.stat().st_size > SEALED_LIMIT:
            return b"\x00" * (SEALED_LIMIT + 1)  # refused by unseal, unread
        return target.read_bytes()
    if isinstance(store, S3Store):
        s3 = store.client("s3")
        try:
            found = s3.get_object(Bucket=store.bucket, Key=_key_of(store, name))
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                raise missing from None
            raise StepFailed(
                f"cannot read profile {name!r} at {store.where}: {type(exc).__name__}",
                infrastructure=True,
            ) from None
        with contextlib.closing(found["Body"]) as body:
            data: bytes = body.read(SEALED_LIMIT + 1)
        return data
    raise StepFailed(f"the run's store {store.where} keeps no profiles", infrastructure=True)


def save_profile(
    op: OpCall, store: Store, step: s.BrowserSaveProfile, environ: Mapping[str, str]
) -> dict[str, Any]:
    """``profiles/save`` in the step's scope, sealed and kept; counts only."""
    key = profile_key(environ)
    name = _checked_name(step.name)
    saved: ProfileSaved = op(step, "profiles/save", ProfilesSave, name=name)
    where = put_sealed(store, name, seal(key, name, profile_bytes(saved.profile)))
    return {
        "profile": name,
        "at": where,
        "cookies": saved.cookies,
        "origins": saved.origins,
        "databases": saved.databases,
        "permissions": saved.permissions,
        "session_storage": saved.session_storage,
        "bytes": saved.bytes,
    }


def load_profile(
    op: OpCall, store: Store, step: s.BrowserLoadProfile, environ: Mapping[str, str]
) -> dict[str, Any]:
    """Profile ``step.name`` opened and loaded into the step's (fresh) scope."""
    key = profile_key(environ)
    name = _checked_name(step.name)
    try:
        profile = read_profile(unseal(key, name, get_sealed(store, name)))
    except ProfileError as exc:
        raise StepFailed(f"profile {name!r}: {exc}") from None
    loaded: ProfileLoaded = op(step, "profiles/load", ProfilesLoad, name=name, profile=profile)
    return {
        "profile": name,
        "cookies": loaded.cookies,
        "origins": loaded.origins,
        "databases": loaded.databases,
        "permissions": loaded.permissions,
        "session_storage": loaded.session_storage,
    }


def with_profile(task: s.Task, name: str) -> s.Task:
    """``task`` with a ``browser_load_profile`` of ``name`` before its first
    agent's turn (``agentenv run --profile NAME``): in the env that turn uses,
    else the env deployed last before it. A task with no agent's turn, or no
    env deployed before it, is left as it is (preflight has nothing to add).
    """
    steps = list(task.steps)
    deployed: str | None = None
    for at, step in enumerate(steps):
        if isinstance(step, s.DeployEnv):
            deployed = step.env_id
        if isinstance(step, s.RunAgent | s.RunBrowsergym):
            env_id = getattr(step, "env_id", None) or deployed
            if env_id is None:
                return task
            load = s.BrowserLoadProfile(
                type="browser_load_profile", id="profile", env_id=env_id, name=name
            )
            return task.model_copy(update={"steps": [*steps[:at], load, *steps[at:]]})
    return task
