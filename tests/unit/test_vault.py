"""The credential vault's pure parts: TOTP (RFC 6238's own vectors), the
origin rule of a fill, the models never showing a value, and which
connection may send ``AgentEnv.fillCredential`` (relay/vault.py, totp.py,
protocol/credentials.py, relay/core.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from agentenv.access import Identity
from agentenv.log.writer import LogWriter
from agentenv.protocol import problems
from agentenv.protocol.control import CONTROL_METHODS, FillCredential, SetCredential
from agentenv.protocol.credentials import REVEAL, CredentialsSet
from agentenv.relay import core
from agentenv.relay.connection import Connection
from agentenv.relay.core import ClientState, Kind, SessionInfo
from agentenv.relay.logbook import Logbook
from agentenv.relay.vault import HOME, WITHHELD_TEXT, Credential, FillRefused, Vault, refusal
from agentenv.scopes import Scope
from agentenv.totp import code, hotp, secret_bytes

PASSWORD = "correct horse battery staple"
SECRET = "JBSWY3DPEHPK3PXP"

# -- TOTP ----------------------------------------------------------------------

#: RFC 6238 appendix B: the SHA-1 seed, and (time, 8-digit code).
RFC_SEED = b"12345678901234567890"
RFC_VECTORS = [
    (59, "94287082"),
    (1111111109, "07081804"),
    (1111111111, "14050471"),
    (1234567890, "89005924"),
    (2000000000, "69279037"),
    (20000000000, "65353130"),
]


@pytest.mark.parametrize(("at", "expected"), RFC_VECTORS)
def test_totp_matches_rfc_6238_vectors(at: int, expected: str) -> None:
    assert code(RFC_SEED, at, digits=8) == expected
    # What a fill types: the same code's last six digits (mod 10**6).
    assert code(RFC_SEED, at) == expected[-6:]


def test_hotp_matches_rfc_4226_vectors() -> None:
    expected = ["755224", "287082", "359152", "969429", "338314", "254676"]
    assert [hotp(RFC_SEED, i) for i in range(6)] == expected


def test_a_base32_secret_reads_as_sites_show_it() -> None:
    assert secret_bytes("GEZD GNBV GY3T QOJQ GEZD GNBV GY3T QOJQ") == RFC_SEED
    assert secret_bytes("gezdgnbvgy3tqojqgezdgnbvgy3tqojq") == RFC_SEED
    with pytest.raises(ValueError) as refused:
        secret_bytes("not base32 at all!")
    assert "not base32" in str(refused.value) and "at all" not in str(refused.value)


# -- the rule of a fill ----------------------------------------------------------


def _said(value: Any) -> dict[str, Any]:
    return {"id": -1, "result": {"result": {"type": "object", "value": value}}}


FIELD = {"tag": "input", "type": "password", "page": False, "editable": True}


@pytest.mark.parametrize(
    ("seen", "ok"),
    [
        ("https://bank.example", True),
        ("http://bank.example", False),  # another scheme
        ("https://bank.example:8443", False),  # another port
        ("https://evil.example", False),
        ("https://sub.bank.example", False),
        ("https://bank.example.evil.example", False),
        ("null", False),  # an opaque origin (sandboxed, data:)
    ],
)
def test_a_fill_types_only_into_its_own_origin_exactly(seen: str, ok: bool) -> None:
    why = refusal(_said({**FIELD, "origin": seen}), "https://bank.example")
    assert (why is None) is ok
    if not ok:
        assert why is not None and seen in why and "https://bank.example" in why


def test_a_focused_frame_of_another_origin_is_refused() -> None:
    why = refusal(_said({"frame": "https://evil.example"}), "https://bank.example")
    assert why is not None and "frame of another origin" in why
    assert "https://evil.example" in why and "https://bank.example" in why
    sandboxed = refusal(_said({"frame": "null"}), "https://bank.example")
    assert sandboxed is not None and "sandboxed" in sandboxed


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (None, "did not say"),
        ({"none": True}, "no field is focused"),
        ({"origin": "https://bank.example", "page": True, "editable": False}, "no field"),
        ({"origin": "https://bank.example", "tag": "button", "editable": False}, "button"),
        ({"origin": "https://bank.example", "tag": "input", "type": "checkbox"}, "checkbox"),
        ({"deep": True}, "too deep"),
    ],
)
def test_any_doubt_refuses(value: Any, says: str) -> None:
    why = refusal(_said(value) if value is not None else {"error": {}}, "https://bank.example")
    assert why is not None and says in why


# -- the vault -------------------------------------------------------------------


def _credential(name: str = "bank", totp: bool = True) -> Credential:
    return Credential.of(
        name,
        "https://bank.example",
        SecretStr("alice@bank.example"),
        SecretStr(PASSWORD),
        SecretStr(SECRET) if totp else None,
    )


def test_the_vault_keeps_each_scope_apart_and_forgets_on_clear() -> None:
    vault = Vault(limit=2)
    vault.set("alice", _credential())
    vault.set(HOME, _credential("mail", totp=False))
    assert [c.name for c in vault.listed("alice")] == ["bank"]
    assert vault.listed("alice")[0].fields == ["username", "password", "totp"]
    assert vault.listed(HOME)[0].fields == ["username", "password"]
    with pytest.raises(FillRefused) as refused:
        vault.get("bob", "bank")
    assert "no credential named 'bank'" in refused.value.message
    assert refused.value.status == 404
    vault.set("alice", _credential("two"))
    with pytest.raises(FillRefused):
        vault.set("alice", _credential("three"))  # past the bound
    vault.set("alice", _credential("two"))  # replacing one is fine
    assert vault.clear("alice", "nope") == 0
    assert vault.clear("alice") == 2 and vault.listed("alice") == []
    with pytest.raises(FillRefused) as no_totp:
        vault.get(HOME, "mail").value("totp", 0)
    assert "no TOTP secret" in no_totp.value.message
    vault.drop_all()
    assert vault.listed(HOME) == []


def test_a_totp_fill_is_the_code_at_fill_time() -> None:
    held = _credential()
    assert held.value("totp", 59) == code(secret_bytes(SECRET), 59)
    assert held.value("totp", 59) != held.value("totp", 89)  # the next step's
    assert held.value("password", 0) == PASSWORD


# -- never shown -------------------------------------------------------------------


def _shown(*things: object) -> str:
    return "\n".join([*(repr(t) for t in things), *(str(t) for t in things)])


def test_no_model_nor_the_vault_shows_a_value() -> None:
    body = {
        "scope": "alice",
        "name": "bank",
        "origin": "https://bank.example",
        "username": "alice@bank.example",
        "password": PASSWORD,
        "totp_secret": SECRET,
    }
    op = CredentialsSet.model_validate(body)
    wire = SetCredential.model_validate({k: v for k, v in body.items() if k != "scope"})
    held = _credential()
    vault = Vault()
    vault.set("alice", held)
    every = _shown(op, wire, held, vault, vault.listed("alice"))
    every += json.dumps([op.model_dump(mode="json"), wire.model_dump(mode="json")])
    every += op.model_dump_json() + wire.model_dump_json() + str(op.model_dump())
    for secret in (PASSWORD, SECRET, "alice@bank.example"):
        assert secret not in every
    # The one hop that carries them (the app's link to the relay) asks for them.
    sent = wire.model_dump(mode="json", context=REVEAL)
    assert sent["password"] == PASSWORD and sent["totp_secret"] == SECRET
    assert SetCredential.model_validate(sent).password.get_secret_value() == PASSWORD


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"totp_secret": PASSWORD + "!"}, "totp_secret"),
        ({"origin": PASSWORD}, "origin"),
        ({"password": ""}, "password"),
        ({"password": PASSWORD * 200}, "password"),
        ({"extra": PASSWORD}, "extra"),
    ],
)
def test_a_refusal_names_the_field_never_the_value(change: dict[str, Any], field: str) -> None:
    body = {"name": "bank", "origin": "https://bank.example", "username": "u"}
    body = {**body, "password": PASSWORD, **change}
    for model in (CredentialsSet, SetCredential):
        with pytest.raises(ValidationError) as refused:
            model.model_validate(body)
        told = "; ".join(problems(refused.value)) + str(refused.value) + repr(refused.value)
        assert field in told
        assert PASSWORD not in told


# -- who may send it -----------------------------------------------------------------


def _send(state: ClientState, message: dict[str, Any]) -> core.Step:
    return core.receive(state, json.dumps(message), "/var/lib/agentenv/downloads")


def test_an_agent_may_fill_on_its_tab_session_only() -> None:
    state = ClientState(7, Identity("alice"))
    state.sessions["S"] = SessionInfo("TAB")
    fill = {"id": 3, "method": "AgentEnv.fillCredential", "params": {"name": "b", "field": "totp"}}
    on_tab = _send(state, {**fill, "sessionId": "S"})
    assert on_tab.kind is Kind.CONTROL and isinstance(on_tab.control, FillCredential)
    assert on_tab.tab == "TAB"
    on_browser = _send(state, fill)
    assert on_browser.control is None and "session of the tab" in on_browser.error
    named = {**fill, "sessionId": "S", "params": {"name": "b", "field": "password", "tab": "X"}}
    assert "not an agent's to name" in _send(state, named).error
    bad = {**fill, "sessionId": "S", "params": {"name": "b", "field": "value"}}
    assert _send(state, bad).control is None
    # Every other AgentEnv.* command stays the control token's.
    for method in set(CONTROL_METHODS) - {"AgentEnv.fillCredential"}:
        step = _send(state, {"id": 4, "method": method, "params": {}, "sessionId": "S"})
        assert step.kind is Kind.BLOCK, method


def test_a_filled_password_is_withheld_from_its_scopes_agents_until_cleared() -> None:
    vault = Vault()
    tricky = Credential.of(
        "odd", "https://bank.example", SecretStr("u"), SecretStr('p<"é>&q'), None
    )
    vault.set("alice", tricky)
    vault.set("alice", _credential())
    answer = json.dumps({"id": 1, "result": {"result": {"type": "string", "value": PASSWORD}}})
    assert vault.scrub("alice", answer) == answer  # set, not yet filled: nothing to withhold
    vault.filled("alice", _credential(), "username")
    vault.filled("alice", _credential(), "totp")
    assert vault.scrub("alice", answer) == answer  # only a password is withheld
    vault.filled("alice", _credential(), "password")
    vault.filled("alice", tricky, "password")
    scrubbed = vault.scrub("alice", answer)
    assert PASSWORD not in scrubbed and WITHHELD_TEXT in scrubbed
    assert json.loads(scrubbed)["result"]["result"]["value"] == WITHHELD_TEXT
    assert vault.scrub("bob", answer) == answer  # another scope's agents: theirs is not there
    # However JSON spells it (Chromium escapes some characters as \\uXXXX).
    for text in (json.dumps('p<"é>&q'), json.dumps('p<"é>&q', ensure_ascii=False)):
        assert vault.scrub("alice", text) == f'"{WITHHELD_TEXT}"', text
    chromium = '"p\\u003C\\"\\u00e9\\u003E\\u0026q"'
    assert vault.scrub("alice", chromium) == f'"{WITHHELD_TEXT}"'
    vault.clear("alice", "bank")
    assert vault.scrub("alice", answer) == answer
    vault.drop_all()
    assert vault.scrub("alice", json.dumps('p<"é>&q')) == json.dumps('p<"é>&q')


def test_what_a_connection_shows_its_client_withholds_its_scopes_filled_password(
    tmp_path: Path,
) -> None:
    """The rule is the Connection's (``shown``), read by the socket loop for
    every text message to the client: an agent of the scope the password was
    filled in gets it withheld; another scope's agent and the control token
    get the message as it is."""
    vault = Vault()
    vault.filled("shop", _credential(), "password")
    answer = json.dumps({"id": 3, "result": {"result": {"type": "string", "value": PASSWORD}}})
    book = Logbook(LogWriter.open(tmp_path / "browser-t.jsonl"))
    shop, other = Scope("shop", "CTX-SHOP", set()), Scope("other", "CTX-OTHER", set())
    agent = Connection(ClientState(1, Identity("alice"), scope=shop), "/d", book, None, vault)
    shown = agent.shown(answer)
    assert PASSWORD not in shown and json.loads(shown)["result"]["result"]["value"] == WITHHELD_TEXT
    elsewhere = Connection(ClientState(2, Identity("bob"), scope=other), "/d", book, None, vault)
    assert elsewhere.shown(answer) == answer
    control = ClientState(3, Identity("agentenv", control=True), scope=shop)
    assert Connection(control, "/d", book, None, vault).shown(answer) == answer
    assert Connection(ClientState(4, Identity("alice"), scope=shop), "/d", book).shown(answer) == (
        answer
    )
