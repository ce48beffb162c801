from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentenv.page_ports import open_to_pages
from agentenv.protocol.card import BROWSER_V1, Card, Extension, MissingOp
from agentenv.settings import _PARSED, SettingsError, load, parse_users


def test_defaults() -> None:
    s = load({})
    assert (s.name, s.relay_port, s.chromium_port, s.app_port) == ("browser", 9222, 6666, 8080)
    assert s.log_file == Path("/var/log/agentenv/browser-browser.jsonl")
    assert not s.users and not s.auth_enabled
    assert s.relay_http == "http://127.0.0.1:9222"


def test_inner_ports_are_ones_pages_cannot_reach() -> None:
    """Chromium's and the recorder's ports are on Chromium's unsafe list by
    default; any other port there is named in a warning."""
    assert open_to_pages(load({})) == []
    warned = open_to_pages(load({"AGENTENV_CHROMIUM_PORT": "9223"}))
    assert len(warned) == 1 and "AGENTENV_CHROMIUM_PORT=9223" in warned[0]
    assert len(open_to_pages(load({"AGENTENV_RECORDER_PORT": "8081"}))) == 1
    flags = {"AGENTENV_CHROMIUM_FLAGS": "--single-process --explicitly-allowed-ports=6666"}
    assert "explicitly-allowed-ports" in open_to_pages(load(flags))[0]
    rules = {"AGENTENV_CHROMIUM_FLAGS": "--host-resolver-rules=MAP * 1.2.3.4"}
    assert "host-resolver-rules" in open_to_pages(load(rules))[0]


def test_users_from_env_and_file(tmp_path: Path) -> None:
    file = tmp_path / "users"
    file.write_text("# team: name:token, one a line\ncarol:c-tok\n\ndave:d-tok # ops, on call\n")
    s = load({"AGENTENV_USERS": "alice:a-tok, bob:b-tok", "AGENTENV_USERS_FILE": str(file)})
    assert s.users == {"alice": "a-tok", "bob": "b-tok", "carol": "c-tok", "dave": "d-tok"}
    assert s.auth_enabled


def test_a_token_may_hold_a_hash() -> None:
    assert parse_users("alice:tok#en,bob:b-tok") == {"alice": "tok#en", "bob": "b-tok"}
    assert parse_users("alice:a-tok #ops, bob:x") == {"alice": "a-tok"}


@pytest.mark.parametrize("text", ["alice", "alice:", ":tok", "alice:x,alice:y", "agentenv:tok"])
def test_bad_users_name_the_problem_without_the_token(text: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_users(text)
    assert "AGENTENV_USERS" in str(caught.value)
    assert "tok" not in str(caught.value).replace("token", "")


def test_bad_port_and_missing_file() -> None:
    with pytest.raises(SettingsError, match="AGENTENV_RELAY_PORT"):
        load({"AGENTENV_RELAY_PORT": "ninety"})
    with pytest.raises(SettingsError, match="AGENTENV_USERS_FILE"):
        load({"AGENTENV_USERS_FILE": "/nonexistent/users"})


def test_card_require() -> None:
    card = Card(name="b", versions={}, extensions={BROWSER_V1: Extension(ops=["tabs/list"])})
    card.require(BROWSER_V1, "tabs/list")
    with pytest.raises(MissingOp, match="serves no browser/v1 tabs/open: rebuild the image"):
        card.require(BROWSER_V1, "tabs/open")


def test_the_mcp_bounds_and_log_level_are_settings() -> None:
    """Every program reads its environment through settings.load, once."""
    got = load(
        {
            "AGENTENV_MCP_IDLE_S": "60",
            "AGENTENV_MCP_SESSIONS_PER_CALLER": "2",
            "AGENTENV_MCP_TRANSPORTS_PER_CALLER": "4",
            "AGENTENV_MCP_UNUSED_S": "0.5",
            "AGENTENV_LOG_LEVEL": "debug",
        }
    )
    assert (got.mcp_idle_s, got.mcp_sessions_per_caller) == (60.0, 2)
    assert (got.mcp_transports_per_caller, got.mcp_unused_s) == (4, 0.5)
    assert got.log_level == "DEBUG"
    defaults = load({})
    assert (defaults.mcp_idle_s, defaults.mcp_unused_s, defaults.log_level) == (1800, 30, "INFO")
    for key, bad, said in [
        ("AGENTENV_MCP_IDLE_S", "soon", "a number of seconds"),
        ("AGENTENV_MCP_UNUSED_S", "0", "above 0"),
        ("AGENTENV_MCP_UNUSED_S", "nan", "above 0"),
        ("AGENTENV_MCP_SESSIONS_PER_CALLER", "0", "1 or more"),
        ("AGENTENV_LOG_LEVEL", "loud", "one of DEBUG"),
    ]:
        with pytest.raises(SettingsError, match=said) as raised:
            load({key: bad})
        assert key in str(raised.value)


def test_every_numeric_setting_is_read_from_its_own_variable_and_checked() -> None:
    """Each setting read by a parser: AGENTENV_<FIELD> sets it, and a value
    that is no number is refused naming that variable."""
    defaults = load({})
    control = {"AGENTENV_CONTROL_TOKEN": "c" * 32}  # AGENTENV_MAX_SCOPES needs one
    for field in _PARSED:
        key = f"AGENTENV_{field.upper()}"
        wanted = {"log_level": "ERROR", "warm_scopes": 3}.get(field, 7)  # 7 warm: past the budget
        assert getattr(load({key: str(wanted), **control}), field) == wanted, key
        assert getattr(load({key: ""}), field) == getattr(defaults, field), key
        with pytest.raises(SettingsError) as raised:
            load({key: "plenty"})
        assert key in str(raised.value)


def test_the_launch_scripts_defaults_are_the_settings_defaults() -> None:
    """A default a launch script writes for a setting (``${AGENTENV_X:-v}``)
    is the one settings.py has: written twice, they must say the same."""
    folder = Path(__file__).resolve().parents[2] / "images" / "browser" / "launch"
    defaults = load({})
    checked = 0
    for script in sorted(folder.glob("*.sh")):
        for name, value in re.findall(r"\$\{AGENTENV_([A-Z_]+):-([^}]*)\}", script.read_text()):
            field = name.lower()
            if value and hasattr(defaults, field):
                assert str(getattr(defaults, field)) == value, (script.name, name)
                checked += 1
    assert checked >= 2  # the downloads folder and Chromium's port, at least


def test_warm_scopes_are_bounded_by_the_memory_budget_and_the_scopes_that_may_open() -> None:
    """AGENTENV_WARM_SCOPES past what the budget sets aside is refused at
    start, naming the variable; no more are kept than may be open at once,
    and none where no scope may be opened."""
    from agentenv.settings import WARM_SCOPES_MAX

    control = {"AGENTENV_CONTROL_TOKEN": "c" * 32}
    with pytest.raises(SettingsError) as raised:
        load({"AGENTENV_WARM_SCOPES": str(WARM_SCOPES_MAX + 1), **control})
    assert "AGENTENV_WARM_SCOPES" in str(raised.value) and "MiB" in str(raised.value)
    assert load({"AGENTENV_WARM_SCOPES": str(WARM_SCOPES_MAX), **control}).warm_scopes == 4
    assert load({}).warm_pool == 0  # AGENTENV_MAX_SCOPES=0: nothing to open, nothing kept
    assert load({"AGENTENV_MAX_SCOPES": "1", **control}).warm_pool == 1
    assert load({"AGENTENV_MAX_SCOPES": "8", **control}).warm_pool == load({}).warm_scopes == 2


@pytest.mark.parametrize("same", ["control-5e7a9", "alice-3c1f2"])
def test_the_metrics_token_is_a_token_of_its_own(same: str) -> None:
    """A metrics token that is the control token or a user's would let the
    scraper do what that token does: refused at start, the token unnamed."""
    env = {
        "AGENTENV_CONTROL_TOKEN": "control-5e7a9",
        "AGENTENV_USERS": "alice:alice-3c1f2",
        "AGENTENV_METRICS_TOKEN": same,
    }
    with pytest.raises(SettingsError, match="AGENTENV_METRICS_TOKEN") as raised:
        load(env)
    assert same not in str(raised.value)
    assert load({**env, "AGENTENV_METRICS_TOKEN": "metrics-8d2b4"}).metrics_token == "metrics-8d2b4"


def test_a_users_connection_share_is_below_the_computers_connections() -> None:
    """AGENTENV_MAX_CONNECTIONS at or under one user's share (16 by default,
    or no limit) would let one agent hold every place on a computer of
    several users: refused at start, both settings named."""
    two = {"AGENTENV_USERS": "alice:alice-token,bob:bob-token"}
    on_demand = {"AGENTENV_MAX_SCOPES": "4", "AGENTENV_CONTROL_TOKEN": "control-token-1"}
    for several in (two, on_demand):
        for connections, share in (("16", None), ("8", None), ("4", "4"), ("4", "0"), ("1", "1")):
            env = {**several, "AGENTENV_MAX_CONNECTIONS": connections}
            if share is not None:
                env["AGENTENV_MAX_CONNECTIONS_PER_USER"] = share
            with pytest.raises(SettingsError) as refused:
                load(env)
            said = str(refused.value)
            assert "AGENTENV_MAX_CONNECTIONS=" in said, said
            assert "AGENTENV_MAX_CONNECTIONS_PER_USER" in said, said
        allowed = {**several, "AGENTENV_MAX_CONNECTIONS": "4"}
        assert load({**allowed, "AGENTENV_MAX_CONNECTIONS_PER_USER": "3"}).max_connections == 4
        assert load({**several, "AGENTENV_MAX_CONNECTIONS": "17"}).max_connections == 17
        assert load({**several, "AGENTENV_MAX_CONNECTIONS": "0"}).max_connections == 0
    # One user, or none: its share of every place starves no one.
    assert load({"AGENTENV_MAX_CONNECTIONS": "2"}).max_connections == 2
    one = {"AGENTENV_USERS": "alice:alice-token", "AGENTENV_MAX_CONNECTIONS": "2"}
    assert load(one).max_connections_per_user == 16
