"""The computer's Ed25519 key: made at boot, kept where no agent reaches it.

The key is :attr:`agentenv.settings.Settings.key_file`: its 32 raw bytes in
a 0600 file, in a 0700 folder of the service user's (``agentenv``, who runs
the relay, the app server and the recorder). In the image that is
``/home/agentenv/attest/key``, in the service user's home, a 0700 tmpfs
(memory only, gone when the computer stops: ``AGENTENV_KEY_DIR``); on a
machine of its own ``/run/agentenv/attest/key`` (``launch/supervisord.sh``
makes the folder). Chromium's user, ``browser``, cannot read it, nor can any
page or agent: they reach the machine through the relay only.

The first program that needs it (the app server for the card, the recorder
to sign) makes it: written to a file of its own, then linked into place,
which fails when another program got there first; the loser reads the
winner's. So a program's restart keeps the key, and a new boot makes a new
one (the harness pins each computer's at ``deploy_env``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentenv.errors import AgentEnvError

__all__ = ["SigningKeyError", "computer_key"]


class SigningKeyError(AgentEnvError, OSError):
    """The computer's key cannot be made or read; the message says where and why."""


def _read(path: Path) -> Ed25519PrivateKey:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_mode & 0o077:
            raise SigningKeyError(
                f"{path} is not a regular file readable by its owner only: remove it "
                "(a new key is made) and find what made it"
            )
        raw = os.read(fd, 64)
    finally:
        os.close(fd)
    if len(raw) != 32:
        raise SigningKeyError(f"{path} is not an Ed25519 key (32 bytes): remove it")
    return Ed25519PrivateKey.from_private_bytes(raw)


def computer_key(path: Path) -> Ed25519PrivateKey:
    """The key at ``path``, made there first if there is none."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if isinstance(exc, SigningKeyError):
            raise
        raise SigningKeyError(f"cannot read the computer's key {path}: {exc.strerror}") from None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        made = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, Ed25519PrivateKey.generate().private_bytes_raw())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            with contextlib.suppress(FileExistsError):  # another program made it first
                os.link(made, path)
        finally:
            os.unlink(made)
        return _read(path)
    except SigningKeyError:
        raise
    except OSError as exc:
        raise SigningKeyError(
            f"cannot make the computer's key in {path.parent}: {exc.strerror} (the folder "
            "must be the service user's: launch/supervisord.sh makes it)"
        ) from None
