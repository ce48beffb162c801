"""A search for secrets in every byte of a recording, in every encoding a
writer might have put them in: raw, URL-encoded, base64 (at each of its three
alignments, standard and URL-safe alphabets), JSON with ``\\u`` escapes, hex,
UTF-16.

:func:`findings` names what it found by the secret's label and the
encoding, never the secret itself, so a failing test prints no secret.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from urllib.parse import quote, quote_plus

__all__ = ["encodings", "findings"]


def _base64_inner(data: bytes) -> list[bytes]:
    """The base64 characters that stand for ``data`` alone wherever it sits
    in a longer input: one run for each of the three alignments."""
    out: list[bytes] = []
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * shift + data)
            first = -(-8 * shift // 6)  # the first character holding only ``data``'s bits
            last = 8 * (shift + len(data)) // 6  # past the last one
            out.append(encoded[first:last])
    return out


def encodings(secret: str) -> dict[str, bytes]:
    """Each form of ``secret`` to look for, by the encoding's name."""
    raw = secret.encode()
    forms: dict[str, bytes] = {
        "raw": raw,
        "url-encoded": quote(secret, safe="").encode(),
        "url-encoded (lower-case hex)": quote(secret, safe="").lower().encode(),
        "form-encoded": quote_plus(secret, safe="").encode(),
        "json": json.dumps(secret).encode()[1:-1],
        "json, every character \\u-escaped": "".join(f"\\u{ord(c):04x}" for c in secret).encode(),
        "json, every character \\u-escaped (upper-case hex)": "".join(
            f"\\u{ord(c):04X}" for c in secret
        ).encode(),
        "hex": raw.hex().encode(),
        "hex (upper case)": raw.hex().upper().encode(),
        "utf-16": secret.encode("utf-16-le"),
        "utf-16 big-endian": secret.encode("utf-16-be"),
    }
    for n, inner in enumerate(_base64_inner(raw)):
        forms[f"base64 #{n}"] = inner
    return forms


def findings(blobs: Mapping[str, bytes], secrets: Mapping[str, str]) -> list[str]:
    """Where any of ``secrets`` (label -> value) is in any of ``blobs``
    (name -> bytes), in any of its :func:`encodings`: ``"<blob>: <label> as
    <encoding>"`` for each."""
    found: list[str] = []
    for label, secret in secrets.items():
        if not secret:
            continue
        forms = encodings(secret)
        for name, data in blobs.items():
            for encoding, form in forms.items():
                if form in data:
                    found.append(f"{name}: {label} as {encoding}")
    return found
