"""One-time codes by RFC 6238 (TOTP: HMAC-SHA-1, 30 s steps, 6 digits),
made by the relay when a credential's ``totp`` field is filled. No I/O.

The secret is the base32 text sites show under their QR code (RFC 4648,
letters in either case, spaces and ``=`` padding allowed), as
``otpauth://`` URIs carry it. A secret that does not read as base32 is
refused when it is set (:func:`secret_bytes`), never at fill time, and the
error never quotes it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct

__all__ = ["DIGITS", "STEP_S", "code", "hotp", "secret_bytes"]

#: The code's length and its time step (RFC 6238's defaults, what sites use).
DIGITS = 6
STEP_S = 30


def secret_bytes(text: str) -> bytes:
    """The key a base32 secret names; ValueError (with no part of it) if none."""
    cleaned = "".join(text.split()).upper().rstrip("=")
    if not cleaned:
        raise ValueError("the TOTP secret is empty: give its base32 text")
    padded = cleaned + "=" * (-len(cleaned) % 8)
    try:
        key = base64.b32decode(padded, casefold=False)
    except (binascii.Error, ValueError):
        raise ValueError(
            "the TOTP secret is not base32 (A-Z, 2-7): give the text shown under the QR code"
        ) from None
    if not key:
        raise ValueError("the TOTP secret is empty: give its base32 text")
    return key


def hotp(key: bytes, counter: int, digits: int = DIGITS, digest: str = "sha1") -> str:
    """RFC 4226's HOTP value of ``counter`` (dynamic truncation, mod 10**digits)."""
    mac = hmac.new(key, struct.pack(">Q", counter), digest).digest()
    offset = mac[-1] & 0x0F
    (number,) = struct.unpack(">I", mac[offset : offset + 4])
    return str((number & 0x7FFFFFFF) % 10**digits).zfill(digits)


def code(
    key: bytes, now: float, step_s: int = STEP_S, digits: int = DIGITS, digest: str = "sha1"
) -> str:
    """RFC 6238's TOTP code at Unix time ``now``."""
    if digest not in hashlib.algorithms_available:
        raise ValueError(f"unknown digest {digest!r}")
    return hotp(key, int(now // step_s), digits, digest)
