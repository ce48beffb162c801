"""The secrets scan (tests/support/secrets_scan.py) finds a secret hidden in
each encoding it names, wherever it sits, and names no secret in what it says."""

from __future__ import annotations

import base64
import json
import os
from urllib.parse import quote

import pytest

from tests.support.secrets_scan import encodings, findings

SECRET = "pw é/+&=" + os.urandom(8).hex()


@pytest.mark.parametrize("before", [b"", b"a", b"ab", b"abc"])
def test_base64_of_a_longer_text_holding_the_secret_is_found(before: bytes) -> None:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        data = encode(before + SECRET.encode() + b"after")
        assert findings({"blob": data}, {"password": SECRET}), (before, encode)


@pytest.mark.parametrize(
    "data",
    [
        SECRET.encode(),
        quote(SECRET, safe="").encode(),
        json.dumps(SECRET).encode(),
        json.dumps({"text": SECRET}, ensure_ascii=True).encode(),
        SECRET.encode().hex().encode(),
        SECRET.encode("utf-16-le"),
    ],
    ids=["raw", "url", "json", "json-ascii", "hex", "utf-16"],
)
def test_each_encoding_is_found_inside_other_bytes(data: bytes) -> None:
    found = findings({"blob": b"\x00head" + data + b"tail\xff"}, {"password": SECRET})
    assert found and all(f.startswith("blob: password as ") for f in found)
    assert not any(SECRET in f for f in found)


def test_nothing_is_found_where_the_secret_is_not() -> None:
    other = "pw é/+&=" + os.urandom(8).hex()
    blobs = {name: form for name, form in encodings(other).items()}
    assert findings(blobs, {"password": SECRET}) == []
