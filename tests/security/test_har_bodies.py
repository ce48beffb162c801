"""What is typed into password fields stays out of a recording's network log,
whatever shape the page sends it in (the fourth red team's high finding:
8 of 10 sign-up bodies leaked into ``network.har``).

An agent (Playwright over CDP, with alice's token) types a password key by
key into a password field of the test site's sign-up page
(tests/support/site.py, served inside the computer), and a PIN, a one-time
code, a card number and a CVC into fields that say what they hold. The
page's script sends them in every shape that leaked: under ``password1``,
``password2``, ``password_confirmation``, ``passwordConfirmation``,
``pass``, ``passwordHash``; as JSON-RPC's positional ``params``; inline in a
GraphQL mutation; as ``text/plain`` JSON; as Django's, Rails' and Laravel's
forms and JSON; as ``pin``, ``otp``, ``card``, ``cvc``; then posts the form
itself, which navigates. The recording was started with ``har: {bodies:
true}`` and uploads to a ``file:`` grant (a host folder the computer sees).

Every byte of the recording (the log, ``network.har`` and its parts, the
manifest, the frames, ``start.json``) and of /var/log/agentenv holds none of
the typed values in any encoding (tests/support/secrets_scan.py: plain,
URL-encoded, base64, JSON-escaped, ...), nor key by key (the log's and the
HAR's one-character strings in order). And it cannot pass for want of
requests: the HAR holds an entry, with a body, for every shape and for the
form's post; the new page's own request keeps its harmless value; the log
holds the typing, withheld.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.container import SITE, Computer, computer
from tests.support.secrets_scan import findings
from tests.support.timing import deadline


def _digits(n: int) -> str:
    return str(random.SystemRandom().randrange(10 ** (n - 1), 10**n))


def _card() -> str:
    """A random 16-digit number that passes Luhn's check, as a card's does."""
    body = "4" + _digits(14)
    total = 0
    for n, char in enumerate(reversed(body)):
        d = int(char) * (1 if n % 2 else 2)
        total += d - 9 if d > 9 else d
    return body + str((10 - total % 10) % 10)


#: Made per run, so finding one anywhere can only mean it leaked. The
#: password holds characters each encoding writes differently; its random
#: parts are searched alone too (a leak escaped twice still shows them).
#: The PIN, code and CVC are longer than real ones: four random digits are
#: found by chance in any recording's timestamps.
PARTS = (os.urandom(6).hex(), os.urandom(6).hex())
SECRETS = {
    "password": f'pw {PARTS[0]} é+/&=" \\{PARTS[1]}',
    "password's first part": PARTS[0],
    "password's last part": PARTS[1],
    "pin": _digits(10),
    "one-time code": _digits(10),
    "card": _card(),
    "cvc": _digits(10),
}
#: The shapes the page posts to /api/<shape> (tests/support/site.py).
SHAPES = [
    "password1",
    "password_confirmation",
    "passwordConfirmation",
    "pass",
    "passwordHash",
    "jsonrpc",
    "graphql",
    "text-plain-json",
    "django-form",
    "django-json",
    "rails-form",
    "rails-json",
    "laravel-form",
    "laravel-json",
    "card-json",
    "card-form",
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host folder the computer sees at the same path: its file: grants' root."""
    folder = tmp_path_factory.mktemp("recordings")
    folder.chmod(0o777)  # the recorder writes as its own user
    return folder


@pytest.fixture(scope="module")
def pc(image: str, shared: Path) -> Iterator[Computer]:
    """A secured computer that may upload recordings under ``shared``."""
    with computer(image, env={"AGENTENV_UPLOAD_ROOTS": str(shared)}, shared=shared) as running:
        running.serve_site()
        yield running


def _sign_up(pc: Computer) -> None:
    """alice signs up: types, key by key and by fill, and sends the form."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(
            f"{pc.relay}?token={pc.token('alice')}", timeout=deadline(60) * 1000
        )
        page = browser.contexts[0].new_page()
        page.goto(SITE + "/signup")
        page.fill("#user", "bob")  # a plain field: its typing is kept
        page.locator("#pw").press_sequentially(SECRETS["password"])
        page.fill("#pin", SECRETS["pin"])
        page.fill("#otp", SECRETS["one-time code"])
        page.fill("#cc", SECRETS["card"])
        page.fill("#cvc", SECRETS["cvc"])
        page.click("#send")
        page.wait_for_function("document.title === 'Done, after'", timeout=deadline(30) * 1000)
        page.close()
        browser.close()


def _recorded(
    pc: Computer, shared: Path, scope: str | None
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A recording of the sign-up with ``har: {bodies: true}`` (of ``scope``
    alone, or the computer's): its manifest and every file it uploaded, by name."""
    prefix = shared / uuid.uuid4().hex[:8]
    asked: dict[str, Any] = {
        "request_id": uuid.uuid4().hex,
        "name": "sign-up",
        "upload": {"url": f"file://{prefix}"},
        "har": {"bodies": True},
    }
    if scope is not None:
        asked["scope"] = scope
    started = pc.recording("start", asked)
    _sign_up(pc)
    manifest = pc.recording("end", {"recording_id": started["recording_id"]})
    folder = prefix / str(started["recording_id"])
    files = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    return manifest, files


def _one_character_strings(value: Any) -> Iterator[str]:
    """Every one-character string in a JSON value, in document order."""
    if isinstance(value, str):
        if len(value) == 1:
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _one_character_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _one_character_strings(item)


def _key_by_key(objects: dict[str, bytes]) -> dict[str, bytes]:
    """The log's and the HARs' one-character strings, joined in order: a
    secret written a key at a time (a keystroke a line) shows whole here."""
    out: dict[str, bytes] = {}
    for name, data in objects.items():
        if name.endswith(".jsonl"):
            values = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
        elif name.endswith(".har"):
            values = [json.loads(data)]
        else:
            continue
        joined = "".join(c for v in values for c in _one_character_strings(v))
        out[f"{name}, key by key"] = joined.encode()
    return out


def test_typed_secrets_are_in_no_byte_of_a_recording_with_bodies(
    pc: Computer, shared: Path
) -> None:
    no_typed_secret_in_a_recording(pc, shared, None)


def no_typed_secret_in_a_recording(pc: Computer, shared: Path, scope: str | None) -> None:
    """alice signs up while ``scope`` (or the whole computer) is recorded:
    every request is in the HAR with its body, no secret in any byte."""
    manifest, objects = _recorded(pc, shared, scope)
    assert {"log.jsonl", "network.har", "manifest.json", "start.json"} <= set(objects), objects
    assert any(name.startswith("frames/") for name in objects), sorted(objects)
    assert manifest["har"]["file"] == "network.har" and manifest["har"]["parts"], manifest["har"]

    # The requests that carried the secrets are there, bodies and all.
    har = json.loads(objects["network.har"])["log"]["entries"]
    posted = {
        e["request"]["url"].removeprefix(SITE): e
        for e in har
        if e["request"]["method"] == "POST" and "postData" in e["request"]
    }
    wanted = [f"/api/{shape}" for shape in SHAPES] + ["/signup/done", "/api/after"]
    assert set(wanted) <= set(posted), sorted(posted)
    assert all(posted[url]["response"]["status"] == 200 for url in wanted), posted

    # The log holds the typing: the plain field's kept, the secrets' withheld.
    lines = [json.loads(x) for x in objects["log.jsonl"].decode().splitlines()]
    typing = [
        x["action"]
        for x in lines
        if "action" in x
        and x["action"].get("who") == "alice"
        and x["action"].get("method") in ("Input.insertText", "Input.dispatchKeyEvent")
    ]
    texts = [t["params"].get("text") for t in typing]
    assert "bob" in texts, texts
    withheld = [t for t in texts if isinstance(t, dict) and t.get("withheld") == "password"]
    assert len(withheld) >= len(SECRETS["password"]) + 4, texts  # key by key, then four fills

    # Not one byte of the recording or of the computer's logs holds them.
    blobs = {f"recording:{name}": data for name, data in objects.items()}
    blobs |= {f"computer:/var/log/{name}": data for name, data in pc.files().items()}
    blobs |= _key_by_key(objects)
    found = findings(blobs, SECRETS)
    assert found == [], found

    # Each body kept its shape: its keys are there, its values withheld.
    kept = json.loads(posted["/api/rails-json"]["request"]["postData"]["text"])
    assert set(kept["user"]) == {"email", "password", "password_confirmation"}, kept
    assert kept["user"]["email"]["withheld"] == "password", kept
    form = posted["/signup/done"]["request"]["postData"]["text"]
    assert form.startswith("csrfmiddlewaretoken=REDACTED&username=REDACTED&password1="), form
    # The document the form landed on typed nothing: its request is kept.
    after = json.loads(posted["/api/after"]["request"]["postData"]["text"])
    assert after == {"note": "after"}, after
