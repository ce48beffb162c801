"""Bodies as the record keeps them (agentenv.log.bodies): what a page sends is
withheld unless shown harmless; what a server answers keeps its text with the
log's rules; a body sent with typed text keeps only its shape.

The shapes are the fourth red team's: sign-up bodies as Django, Rails and
Laravel send them, the keys the HAR's shorter list missed, values with no
key, GraphQL's inline arguments, ``text/plain`` JSON, PINs, one-time codes,
cards and CVCs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentenv.log.bodies import answered_body, graphql, sent_body, sent_value

SECRET = "Tr0ub4dor&3-é"
CARD = "4111 1111 1111 1111"
FORM = "application/x-www-form-urlencoded"


def _clean(text: str, *secrets: str) -> None:
    from urllib.parse import quote, quote_plus

    for secret in secrets or (SECRET,):
        for form in (secret, quote(secret), quote_plus(secret), json.dumps(secret)[1:-1]):
            assert form not in text, text


@pytest.mark.parametrize(
    "key",
    [
        "password1",
        "password2",
        "password_confirmation",
        "passwordConfirmation",
        "pass",
        "passwordHash",
        "credentials",
        "client_assertion",
        "pin",
        "otp",
        "cvc",
        "cvv2",
        "card_number",
        "securityCode",
        "code",
        "user[password]",
    ],
)
def test_a_credential_key_withholds_its_value_as_json_and_as_a_form(key: str) -> None:
    kept = json.loads(sent_body(json.dumps({key: SECRET, "name": "bob"}), "application/json"))
    assert kept == {key: {"withheld": "secret", "length": len(SECRET)}, "name": "bob"}
    from urllib.parse import urlencode

    form = sent_body(urlencode({key: SECRET, "name": "bob"}), FORM)
    _clean(form)
    assert form.endswith("&name=bob") and "REDACTED" in form


SIGN_UPS: dict[str, tuple[str, str]] = {
    "django form": (
        FORM,
        f"csrfmiddlewaretoken=c5rf&username=bob&password1={SECRET}&password2={SECRET}",
    ),
    "django json": (
        "application/json",
        json.dumps({"username": "bob", "password1": SECRET, "password2": SECRET}),
    ),
    "rails form": (
        FORM,
        "authenticity_token=t0k&user%5Bemail%5D=bob%40example.com"
        f"&user%5Bpassword%5D={SECRET}&user%5Bpassword_confirmation%5D={SECRET}",
    ),
    "rails json": (
        "application/json",
        json.dumps({"user": {"password": SECRET, "password_confirmation": SECRET}}),
    ),
    "laravel form": (
        FORM,
        f"_token=t0k&name=bob&password={SECRET}&password_confirmation={SECRET}",
    ),
    "laravel json": (
        "application/json",
        json.dumps({"name": "bob", "password": SECRET, "passwordConfirmation": SECRET}),
    ),
    "json-rpc params": (
        "application/json",
        json.dumps({"jsonrpc": "2.0", "method": "signup", "params": ["bob", SECRET], "id": 1}),
    ),
    "json-rpc named params": (
        "application/json",
        json.dumps({"jsonrpc": "2.0", "method": "signup", "params": {"u": "bob", "p": SECRET}}),
    ),
    "graphql inline": (
        "application/json",
        json.dumps({"query": f'mutation {{ signUp(user: "bob", password: "{SECRET}") {{ id }} }}'}),
    ),
    "graphql variables": (
        "application/json",
        json.dumps({"query": "mutation S($p: String!) { s(p: $p) }", "variables": {"p": SECRET}}),
    ),
    "graphql raw": ("application/graphql", f'mutation {{ s(p: "{SECRET}", n: 1234) }}'),
    "text/plain json": ("text/plain;charset=UTF-8", json.dumps({"password1": SECRET})),
    "text/plain form": ("text/plain", f"user=bob\r\npassword={SECRET}\r\n"),
    "bare string": ("application/json", json.dumps(SECRET)),
    "a list": ("application/json", json.dumps([SECRET, "bob"])),
    "neither json nor a form": ("text/plain", f"my password is {SECRET}"),
}


@pytest.mark.parametrize("shape", SIGN_UPS)
def test_every_leaked_shape_is_withheld(shape: str) -> None:
    kind, body = SIGN_UPS[shape]
    _clean(sent_body(body, kind))


def test_pins_codes_cards_and_cvcs() -> None:
    body = {
        "pin": "1234",
        "otp": 123456,
        "card": CARD,
        "number": 4111111111111111,
        "cardNumber": "4111-1111-1111-1111",
        "cvc": "737",
        "expiry": "12/30",
    }
    kept = json.loads(sent_body(json.dumps(body), "application/json"))
    for key in ("pin", "otp", "cardNumber", "cvc"):
        assert kept[key]["withheld"] == "secret", kept
    assert kept["card"] == "REDACTED" and kept["number"]["withheld"] == "card"
    assert kept["expiry"] == "12/30"  # not a credential's key, not a card
    _clean(json.dumps(kept), "4111", "737", "123456")


def test_harmless_values_are_kept_with_structure_and_keys() -> None:
    body = {
        "name": "bob",
        "age": 41,
        "ok": True,
        "none": None,
        "address": {"city": "Lyon", "zip_code": "69001"},
        "items": [{"sku": "A-1", "qty": 2}],
        "next": "https://shop.test/cb?code=S3CR3T&page=2",
        "ts": 1764640000000,  # a time in ms: not a card
    }
    kept = json.loads(sent_body(json.dumps(body), "application/json"))
    assert kept == body | {"next": "https://shop.test/cb?code=REDACTED&page=2"}


def test_values_no_key_names_are_withheld() -> None:
    kept = sent_value({"tags": ["red", 7, None, True], "rows": [[1, "a"]]})
    assert kept["tags"] == [
        {"withheld": "value", "length": 3},
        {"withheld": "value", "length": 1},
        None,
        True,
    ]
    assert kept["rows"] == [[{"withheld": "value", "length": 1}] * 2]


def test_json_inside_a_string_is_read_as_json() -> None:
    body = {"payload": json.dumps({"password2": SECRET, "step": "confirm"})}
    kept = json.loads(sent_body(json.dumps(body), "application/json"))
    inner = json.loads(kept["payload"])
    assert inner["step"] == "confirm" and inner["password2"]["withheld"] == "secret"


def test_a_key_that_holds_a_secret_is_written_redacted() -> None:
    body = {"https://h/?token=" + SECRET: 1, CARD: "x", "a": 1}
    text = sent_body(json.dumps(body), "application/json")
    _clean(text, SECRET, "4111")
    assert json.loads(text)["a"] == 1 and len(json.loads(text)) == 3


def test_a_graphql_document_keeps_its_shape() -> None:
    document = (
        "mutation Login($u: String!) { login(user: $u, pin: 9137, password: hunter2, role: ADMIN, "
        'note: """multi\nline""", remember: true) { token } } # trailing "comment"'
    )
    assert graphql(document) == (
        "mutation Login($u: String!) { login(user: $u, pin: REDACTED, password: REDACTED, "
        'role: ADMIN, note: "REDACTED", remember: true) { token } } #'
    )
    assert "unclosed" not in graphql('{ a(b: "unclosed ')


def test_typed_text_leaves_only_the_shape() -> None:
    body = {"comment": "hello", "n": 3, "ok": False, "list": ["x"], "user": {"name": "bob"}}
    kept = json.loads(sent_body(json.dumps(body), "application/json", typed=True))
    assert kept == {
        "comment": {"withheld": "password", "length": 5},
        "n": {"withheld": "password", "length": 1},
        "ok": False,
        "list": [{"withheld": "password", "length": 1}],
        "user": {"name": {"withheld": "password", "length": 3}},
    }
    assert sent_body("a=1&b=bob", FORM, typed=True) == "a=REDACTED&b=REDACTED"
    opaque = json.loads(sent_body("free text", "text/plain", typed=True))
    assert opaque == {"withheld": "password", "length": 9}
    assert "hello" not in sent_body("query { a(b: 1) }", "application/graphql", typed=True)


def test_multipart_keeps_its_field_names() -> None:
    body = f'--x\r\nContent-Disposition: form-data; name="password1"\r\n\r\n{SECRET}\r\n--x--'
    kept = json.loads(sent_body(body, "multipart/form-data; boundary=x"))
    assert kept == {"fields": ["password1"], "withheld": "form", "length": len(body)}


def test_an_answer_keeps_its_text_with_the_logs_rules() -> None:
    answer: dict[str, Any] = {
        "access_token": "T0K",
        "user": {"name": "bob", "password_confirmation": SECRET},
        "items": [1, "two"],
        "note": f'{{"pass": "{SECRET}"}}',
    }
    kept = json.loads(answered_body(json.dumps(answer), "application/json"))
    assert kept["items"] == [1, "two"] and kept["user"]["name"] == "bob"
    assert kept["access_token"]["withheld"] == "secret"
    _clean(json.dumps(kept), SECRET, "T0K")
    assert answered_body(f"<p>card {CARD}</p>", "text/html") == "<p>card REDACTED</p>"
    echoed = json.loads(answered_body(json.dumps({"echo": "bob"}), "application/json", typed=True))
    assert echoed == {"echo": {"withheld": "password", "length": 3}}
    assert "bob" not in answered_body("<p>bob</p>", "text/html", typed=True)
