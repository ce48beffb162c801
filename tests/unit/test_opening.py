"""Scopes opened on demand, without a browser: the names and the cap
(relay/opening.py), the open scopes' file (agentenv/opened.py), and a minted
token at the doors (access.identify) and in the scopes' table (scopes.py)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agentenv.access import AccessDenied, Identity, identify
from agentenv.log.auth import claimed
from agentenv.opened import MINTED, Opened, OpenedScope, digest, forget_all, mint_token
from agentenv.relay.opening import Openings, ScopeRefused
from agentenv.scopes import Scopes
from agentenv.settings import Settings, SettingsError, load

CONTROL = "control-token-for-the-unit-tests"


def _openings(max_scopes: int = 2) -> Openings:
    return Openings.of(max_scopes, ["alice", "bob"], ["alice", "team"])


def test_a_name_given_is_a_scopes_name_and_nothing_the_computer_keeps() -> None:
    openings = _openings()
    for bad in ("", ".", "..", "a/b", "../alice", "x" * 65, "agentenv", "default", "é", "a b"):
        with pytest.raises(ScopeRefused) as refused:
            openings.admit(bad)
        assert refused.value.status == 400, bad
        assert "1 to 64 letters" in refused.value.message
    assert openings.admit("task-1.a_B") == "task-1.a_B"


def test_a_name_may_not_be_a_fixed_users_or_scopes_or_an_open_ones() -> None:
    openings = _openings(max_scopes=4)
    for taken in ("alice", "bob", "team"):
        with pytest.raises(ScopeRefused) as refused:
            openings.admit(taken)
        assert refused.value.status == 409 and "AGENTENV_USERS" in refused.value.message
    openings.add(openings.admit("t1"))
    with pytest.raises(ScopeRefused) as refused:
        openings.admit("t1")
    assert refused.value.status == 409 and "is open" in refused.value.message
    openings.closing("t1")
    with pytest.raises(ScopeRefused) as refused:
        openings.admit("t1")
    assert "being closed" in refused.value.message


def test_a_name_whose_folder_is_a_fixed_scopes_is_refused() -> None:
    # A user's name that is no plain name has a folder named by its digest.
    openings = Openings.of(2, ["a/b"], ["a/b"])
    (folder,) = openings.folders
    assert folder.startswith("scope-")
    with pytest.raises(ScopeRefused) as refused:
        openings.admit(folder)
    assert refused.value.status == 409


def test_past_the_cap_opening_is_refused_in_one_place_and_a_close_frees_a_place() -> None:
    openings = _openings(max_scopes=2)
    first = openings.admit(None)
    openings.add(first)
    openings.add(openings.admit(None))
    with pytest.raises(ScopeRefused) as refused:
        openings.admit(None)
    assert refused.value.status == 409
    assert (
        "AGENTENV_MAX_SCOPES=2" in refused.value.message and "scopes/close" in refused.value.message
    )
    openings.closing(first)
    with pytest.raises(ScopeRefused):  # a scope being closed still holds its place
        openings.admit(None)
    openings.remove(first)
    assert openings.admit(None)
    with pytest.raises(ScopeRefused) as none:
        _openings(max_scopes=0).admit(None)
    assert "AGENTENV_MAX_SCOPES" in none.value.message


def test_made_up_names_are_fresh_and_a_closed_name_is_remembered_until_opened_again() -> None:
    openings = _openings(max_scopes=50)
    names = {openings.admit(None) for _ in range(50)}
    assert len(names) == 50
    scope, token = openings.add("t1")
    assert scope.digest == digest(token) and MINTED.fullmatch(token)
    assert not openings.was_closed("t1")
    openings.closing("t1")
    assert openings.was_closed("t1")
    openings.remove("t1")
    assert openings.was_closed("t1") and "t1" not in openings.open
    again, token2 = openings.add(openings.admit("t1"))
    assert not openings.was_closed("t1") and token2 != token and again.digest != scope.digest


def test_only_an_open_scope_closes_a_fixed_one_never() -> None:
    openings = _openings()
    with pytest.raises(ScopeRefused) as fixed:
        openings.get("alice")
    assert fixed.value.status == 409
    with pytest.raises(ScopeRefused) as unknown:
        openings.get("nobody")
    assert unknown.value.status == 404 and "scopes/list" in unknown.value.message


def test_the_file_keeps_digests_only_and_is_the_service_users_alone(tmp_path: Path) -> None:
    path = tmp_path / "attest" / "scopes.json"
    writer, reader = Opened(path), Opened(path)
    token = mint_token()
    writer.write({"t1": OpenedScope("t1", digest(token), 1.0)})
    assert token not in path.read_text()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert reader.scope_of(token) == "t1"
    assert reader.scope_of(mint_token()) is None
    # Revoked (closing): no door takes it, and the name is still held.
    writer.write({"t1": OpenedScope("t1", digest(token), 1.0, closing=True)})
    assert reader.scope_of(token) is None and reader.names() == {"t1"}
    writer.write({})
    assert reader.names() == frozenset()


def test_a_file_that_does_not_read_opens_nothing(tmp_path: Path) -> None:
    path = tmp_path / "scopes.json"
    path.write_text(json.dumps({"scopes": [{"name": "t1"}]}))
    assert Opened(path).names() == frozenset()
    assert Opened(tmp_path / "none.json").names() == frozenset()


def _settings(tmp_path: Path, **more: str) -> Settings:
    forget_all()
    env = {
        "AGENTENV_MAX_SCOPES": "2",
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "AGENTENV_KEY_DIR": str(tmp_path / "attest"),
        **more,
    }
    return load(env)


def test_a_minted_token_proves_its_scopes_name_at_the_door_and_not_once_revoked(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path, AGENTENV_USERS="alice:alice-token")
    token = mint_token()
    writer = Opened(settings.scopes_file)
    writer.write({"t1": OpenedScope("t1", digest(token), 1.0)})
    assert identify(settings, token, None) == Identity("t1")
    assert identify(settings, "alice-token", None) == Identity("alice")
    assert identify(settings, CONTROL, None).control
    writer.write({"t1": OpenedScope("t1", digest(token), 1.0, closing=True)})
    with pytest.raises(AccessDenied) as revoked:
        identify(settings, token, None)
    assert revoked.value.status == 401 and token not in revoked.value.message
    writer.write({})
    with pytest.raises(AccessDenied):
        identify(settings, token, None)


def test_scopes_that_may_be_opened_need_tokens_and_a_control_token(tmp_path: Path) -> None:
    settings = _settings(tmp_path)  # no fixed user at all
    with pytest.raises(AccessDenied) as refused:
        identify(settings, None, "mallory")
    assert refused.value.status == 401
    with pytest.raises(SettingsError) as no_control:
        load({"AGENTENV_MAX_SCOPES": "2"})
    assert "AGENTENV_CONTROL_TOKEN" in str(no_control.value)


def test_an_opened_scope_is_its_users_own_and_the_computer_is_scoped_from_boot(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path, AGENTENV_USERS="alice:alice-token")
    assert settings.scoped and settings.scope_capacity == 3
    assert settings.downloads_for("t1") == settings.downloads_dir / "t1"
    scopes = Scopes.of(settings)
    assert scopes.isolated and scopes.home == "alice"
    Opened(settings.scopes_file).write({"t1": OpenedScope("t1", digest(mint_token()), 1.0)})
    assert scopes.name_for(Identity("t1")) == "t1"
    assert scopes.name_for(Identity("alice")) == "alice"
    assert scopes.users_of("t1") == ["t1"]
    assert scopes.unknown("t1") is None
    assert scopes.unknown("t2") is not None
    Opened(settings.scopes_file).write({})
    assert scopes.unknown("t1") is not None
    # One fixed user and none to be opened: nothing is translated, as before.
    plain = Scopes.of(load({"AGENTENV_USERS": "alice:alice-token"}))
    assert not plain.isolated and plain.name_for(Identity("alice")) is None


def test_the_shares_count_every_scope_that_may_be_open(tmp_path: Path) -> None:
    settings = _settings(tmp_path, AGENTENV_USERS="alice:a-token", AGENTENV_MCP_SESSIONS="6")
    assert settings.mcp_share == 2  # 6 over alice and two that may be opened


def test_an_auth_line_withholds_a_minted_token_put_in_a_name() -> None:
    token = mint_token()
    kept = claimed({"user": token, "role": f"x{token}y"}, None, [])
    assert kept == {"user": "withheld", "role": "withheld"}


def test_no_recording_starts_in_a_scope_being_closed(tmp_path: Path) -> None:
    """Between the close's end of a scope's recordings and its name going,
    a recording started in it would outlive it and record the next scope of
    that name: the recorder refuses it (409), and records it while open."""
    from agentenv.log.reader import LogReader
    from agentenv.recorder.recorder_errors import Refused
    from agentenv.recorder.recorder_server import Recorder
    from agentenv.relay_link import BrowserLink

    settings = _settings(tmp_path, AGENTENV_USERS="alice:alice-token")
    recorder = Recorder(settings, BrowserLink(settings, None), LogReader(tmp_path / "log"))  # type: ignore[arg-type]
    token = digest(mint_token())
    Opened(settings.scopes_file).write({"t1": OpenedScope("t1", token, 1.0)})
    assert recorder._scope("t1") == "t1"
    Opened(settings.scopes_file).write({"t1": OpenedScope("t1", token, 1.0, closing=True)})
    with pytest.raises(Refused) as refused:
        recorder._scope("t1")
    assert refused.value.status == 409 and "being closed" in str(refused.value)
    assert recorder._scope("alice") == "alice"


def test_a_closed_scopes_agent_acts_in_no_scope_never_the_home_one(tmp_path: Path) -> None:
    """``Scopes.closed``: an opened scope's agent whose scope is closing or
    gone is told so (every door refuses it), where ``name_for`` alone would
    put it in the home scope; a fixed user and the control token never are."""
    settings = _settings(tmp_path, AGENTENV_USERS="alice:alice-token")
    scopes = Scopes.of(settings)
    opened = Opened(settings.scopes_file)
    opened.write({"t1": OpenedScope("t1", digest(mint_token()), 1.0)})
    assert not scopes.closed(Identity("t1"))
    opened.write({"t1": OpenedScope("t1", digest(mint_token()), 1.0, closing=True)})
    assert scopes.closed(Identity("t1"))
    opened.write({})
    assert scopes.closed(Identity("t1"))
    assert scopes.name_for(Identity("t1")) == "alice"  # why every door asks closed first
    assert not scopes.closed(Identity("alice"))
    assert not scopes.closed(Identity("agentenv", control=True))
    # No scope may be opened: nothing is ever closed.
    plain = Scopes.of(load({"AGENTENV_USERS": "alice:a-token,bob:b-token"}))
    assert not plain.closed(Identity("t1"))


def test_a_scope_opened_with_a_person_gives_them_a_token_of_their_own(tmp_path: Path) -> None:
    """``scopes/open {person}``: the person's token is a person's (the live
    view only) in that scope alone, named ``<person>@<scope>``; closing the
    scope revokes it with the agent's."""
    settings = _settings(tmp_path, AGENTENV_USERS="alice:alice-token,carol@t9:c-token")
    openings = Openings.of(2, ["alice", "carol@t9"], ["alice"])
    for bad in ("", "a b", "agentenv", "x" * 65, "carol@x"):
        with pytest.raises(ScopeRefused) as refused:
            openings.check_person(bad)
        assert "person's name" in refused.value.message, bad
    _, token = openings.add(openings.admit("t1"))
    person = openings.add_person("t1", "carol")
    assert person.startswith("scope-") and person != token
    openings.add(openings.admit("t9"))
    with pytest.raises(ScopeRefused) as taken:  # a fixed user's name
        openings.add_person("t9", "carol")
    assert taken.value.status == 400 and "AGENTENV_USERS" in taken.value.message
    writer = Opened(settings.scopes_file)
    writer.write({"t1": openings.get("t1")})
    assert person not in settings.scopes_file.read_text()
    assert identify(settings, token, None) == Identity("t1")
    with pytest.raises(AccessDenied) as elsewhere:  # the relay's, the ops', /mcp
        identify(settings, person, None)
    assert "live view only" in elsewhere.value.message
    carol = identify(settings, person, None, live=True)
    assert carol == Identity("carol@t1", human=True, scope="t1")
    scopes = Scopes.of(settings)
    assert scopes.name_for(carol) == "t1" and not scopes.closed(carol)
    # Closing: her token goes with the agent's.
    writer.write({"t1": openings.closing("t1")})
    assert openings.get("t1").person == "carol@t1"
    with pytest.raises(AccessDenied) as revoked:
        identify(settings, person, None, live=True)
    assert revoked.value.status == 401
    assert scopes.closed(carol)
