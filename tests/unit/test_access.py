from __future__ import annotations

import pytest

from agentenv.access import (
    DEFAULT_USER,
    AccessDenied,
    Identity,
    bearer_token,
    check_host,
    check_origin,
    host_name,
    identify,
)
from agentenv.settings import AGENTENV_USER, Settings

USERS = Settings(users={"alice": "a-secret-1", "bob": "b-secret-2"}, control_token="ctl-3")
OPEN = Settings()


def test_bearer_token() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


def test_known_tokens() -> None:
    assert identify(USERS, "a-secret-1", None) == Identity("alice")
    assert identify(USERS, "b-secret-2", "ignored") == Identity("bob")
    assert identify(USERS, "ctl-3", None) == Identity(AGENTENV_USER, control=True)


@pytest.mark.parametrize("token", [None, "nope", "a-secret", "a-secret-1x"])
def test_unknown_or_missing_token_is_401_and_never_quoted(token: str | None) -> None:
    with pytest.raises(AccessDenied) as caught:
        identify(USERS, token, None)
    assert caught.value.status == 401
    assert "secret" not in caught.value.message and "nope" not in caught.value.message


def test_open_path_needs_no_token_but_refuses_a_wrong_one() -> None:
    assert identify(USERS, None, None, open_path=True) == Identity(DEFAULT_USER)
    with pytest.raises(AccessDenied):
        identify(USERS, "wrong", None, open_path=True)


def test_without_users_the_user_comes_from_the_query() -> None:
    assert identify(OPEN, None, None) == Identity(DEFAULT_USER)
    assert identify(OPEN, None, "carol") == Identity("carol")
    with pytest.raises(AccessDenied, match="reserved"):
        identify(OPEN, None, AGENTENV_USER)
    with pytest.raises(AccessDenied):
        identify(OPEN, None, "")


def test_control_token_without_users() -> None:
    only_control = Settings(control_token="ctl")
    assert identify(only_control, "ctl", None).control
    assert identify(only_control, None, "dora") == Identity("dora")
    with pytest.raises(AccessDenied):
        identify(only_control, "wrong", None)


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:9222", "localhost"),
        ("127.0.0.1:9222", "127.0.0.1"),
        ("[::1]:9222", "::1"),
        ("[::1]", "::1"),
        ("Example.COM", "example.com"),
        ("computer_1:80", "computer_1"),
    ],
)
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize(
    "header",
    [
        "127.0.0.1:x@evil.example",
        "127.0.0.1@evil.example",
        "user:pw@127.0.0.1",
        "127.0.0.1:9222/path",
        "127.0.0.1 evil",
        "::1",
        "[::1",
        "[not-v6]:80",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "127.0.0.1:",
        "-evil.example",
        "",
    ],
)
def test_malformed_hosts_refused_without_echo(header: str) -> None:
    with pytest.raises(AccessDenied) as caught:
        check_host(OPEN, header or " ")
    assert caught.value.status == 400 and "evil" not in caught.value.message


def test_check_host_gives_the_normal_form() -> None:
    assert check_host(OPEN, "LOCALHOST:9222") == "localhost:9222"
    assert check_host(OPEN, "[::1]:80") == "[::1]:80"
    assert check_host(OPEN, "10.0.0.1") == "10.0.0.1"


@pytest.mark.parametrize("host", ["localhost:9222", "127.0.0.1", "10.1.2.3:80", "[::1]:9222"])
def test_hosts_accepted(host: str) -> None:
    check_host(OPEN, host)


@pytest.mark.parametrize(
    "host", ["evil.example", "localhost.evil.example:9222", "127.0.0.1.nip.io"]
)
def test_hosts_refused_without_echo(host: str) -> None:
    with pytest.raises(AccessDenied) as caught:
        check_host(OPEN, host)
    assert caught.value.status == 403 and "evil" not in caught.value.message


def test_allowed_host_and_missing_host() -> None:
    check_host(Settings(allowed_hosts=frozenset({"computer.internal"})), "Computer.Internal:9222")
    with pytest.raises(AccessDenied) as caught:
        check_host(OPEN, None)
    assert caught.value.status == 400


def test_origins() -> None:
    check_origin(OPEN, None)
    with pytest.raises(AccessDenied):
        check_origin(OPEN, "http://evil.example")
    allowed = Settings(allowed_origins=frozenset({"http://ok.example"}))
    check_origin(allowed, "http://OK.example")
    with pytest.raises(AccessDenied):
        check_origin(allowed, "http://ok.example.evil")
    check_origin(Settings(allowed_origins=frozenset({"*"})), "http://any.example")


def test_boot_control_token_keeps_an_open_computer_open() -> None:
    boot = Settings(control_token="made-at-boot", control_open=True)
    assert identify(boot, "made-at-boot", None).control
    assert identify(boot, "anything-else", "erin") == Identity("erin")


def test_json_new_reads_its_url_as_chromium_does() -> None:
    from agentenv.relay.http_commands import new_tab_url

    assert new_tab_url("https://x/?a=1&token=S&user=u") == "https://x/?a=1"
    assert new_tab_url("token=S") == ""
    # Decoded once, as Chromium decodes /json/new's query: a twice-encoded
    # scheme stays encoded, so it is no scheme at all.
    assert new_tab_url("%2566ile:///etc/passwd") == "%66ile:///etc/passwd"
    assert new_tab_url("%66ile:///etc/passwd") == "file:///etc/passwd"


def test_target_ids_never_carry_a_path() -> None:
    from agentenv.relay.relay_requests import TARGET_ID

    assert TARGET_ID.match("0A1B2C3D4E5F60718293A4B5C6D7E8F9")
    assert TARGET_ID.match("a95b08ff-5821-4322-9a0e-a8323de505c1")
    for bad in ("../list", "..%2Flist", "x/y", "", "a" * 65, "id?x=1"):
        assert not TARGET_ID.match(bad), bad
