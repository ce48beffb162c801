"""Named profiles' pure parts: the document's model and bounds, sealing
(round trip, tamper refusal, another key or name), the key's variable, and
the file store's shelf (agentenv.protocol.profiles, agentenv.harness.profile_steps)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.preflight import KEY_ENV, preflight
from agentenv.harness.profile_steps import (
    MAGIC,
    SEALED_LIMIT,
    ProfileSealError,
    get_sealed,
    load_profile,
    profile_key,
    put_sealed,
    save_profile,
    seal,
    unseal,
)
from agentenv.harness.steps import BrowserLoadProfile, BrowserSaveProfile, load_task
from agentenv.harness.store import FolderStore
from agentenv.protocol.answers import ANSWERS
from agentenv.protocol.profiles import (
    MAX_PROFILE_ORIGINS,
    MAX_PROFILE_PERMISSIONS,
    PROFILE_LIMIT,
    OriginState,
    Profile,
    ProfileError,
    ProfileLoaded,
    ProfileSaved,
    ProfilesLoad,
    ProfilesSave,
    bounded,
    profile_bytes,
    read_profile,
)

SESSION = "tok-3f9a1c77e2b84d0e"


def _profile() -> Profile:
    return Profile.model_validate(
        {
            "chromium": 150,
            "cookies": [{"name": "sid", "value": SESSION, "domain": "site.test", "path": "/"}],
            "origins": {
                "http://site.test:8000": {
                    "local_storage": {"theme": "dark"},
                    "indexeddb": [
                        {
                            "name": "auth",
                            "version": 2,
                            "stores": [
                                {
                                    "name": "session",
                                    "key_path": "id",
                                    "indexes": [{"name": "by_user", "key_path": "user"}],
                                    "records": [
                                        {"key": "me", "value": {"id": "me", "token": SESSION}}
                                    ],
                                },
                                {
                                    "name": "plain",
                                    "records": [{"key": [1, "a"], "value": [1, 2, None]}],
                                },
                            ],
                        }
                    ],
                }
            },
        }
    )


def _key() -> bytes:
    return os.urandom(32)


def test_document_round_trip() -> None:
    profile = _profile()
    assert read_profile(profile_bytes(profile)) == profile
    assert profile.format == 1
    assert OriginState().empty and not profile.origins["http://site.test:8000"].empty


def test_document_refuses_unknown_fields_another_format_and_bad_json() -> None:
    data = profile_bytes(_profile())
    with pytest.raises(ProfileError, match="format 2"):
        read_profile(data.replace(b'"format":1', b'"format":2'))
    with pytest.raises(ProfileError, match="malformed"):
        read_profile(b'{"format": 1, "cookies": [], "extra": true}')
    with pytest.raises(ProfileError, match="not JSON"):
        read_profile(b"{not json")
    with pytest.raises(ProfileError, match="malformed"):
        read_profile(b'{"origins": {"x": {"indexeddb": [{"name": "d", "version": 0}]}}}')


@pytest.mark.parametrize(
    "at",
    ["javascript:alert(1)", "http://a.test/path", "http://u@a.test", "HTTP://A.test", "file:///x"],
)
def test_origins_are_origins(at: str) -> None:
    with pytest.raises(ProfileError, match="scheme://host"):
        read_profile(profile_bytes(Profile()).replace(b'"origins":{}', _origins_json({at: {}})))


def test_bounds_name_the_limit() -> None:
    bounded(PROFILE_LIMIT)
    with pytest.raises(ProfileError, match=str(PROFILE_LIMIT)):
        bounded(PROFILE_LIMIT + 1)
    with pytest.raises(ProfileError, match="more than the 10 bytes"):
        read_profile(profile_bytes(_profile()), limit=10)
    many: dict[str, dict[str, object]] = {
        f"http://h{n}.test": {} for n in range(MAX_PROFILE_ORIGINS + 1)
    }
    with pytest.raises(ProfileError, match="malformed"):
        read_profile(profile_bytes(Profile()).replace(b'"origins":{}', _origins_json(many)))


def _origins_json(origins: dict[str, dict[str, object]]) -> bytes:
    import orjson

    return b'"origins":' + orjson.dumps(origins)


def test_names_are_store_safe() -> None:
    for bad in ("", "../x", "a/b", ".hidden", "-x", "a" * 101, "sp ace"):
        with pytest.raises(ValueError):
            ProfilesSave(name=bad)
    assert ProfilesSave(name="shop.login_1", scope="alice").name == "shop.login_1"


def test_answers_are_in_the_table() -> None:
    assert ANSWERS["profiles/save"].validate_python(
        {"name": "n", "profile": {}, "cookies": 0, "origins": 0, "databases": 0, "bytes": 2}
    ) == ProfileSaved(name="n", profile=Profile(), cookies=0, origins=0, databases=0, bytes=2)
    assert isinstance(
        ANSWERS["profiles/load"].validate_python(
            {"name": "n", "cookies": 1, "origins": 1, "databases": 1}
        ),
        ProfileLoaded,
    )


def test_seal_round_trip_hides_the_plaintext() -> None:
    key = _key()
    plain = profile_bytes(_profile())
    sealed = seal(key, "shop", plain)
    assert sealed.startswith(MAGIC)
    assert SESSION.encode() not in sealed and b"sid" not in sealed
    assert unseal(key, "shop", sealed) == plain
    assert seal(key, "shop", plain) != sealed  # a fresh nonce each time


@pytest.mark.parametrize("at", [len(MAGIC), len(MAGIC) + 12, -1, -17])
def test_a_changed_byte_does_not_open(at: int) -> None:
    key = _key()
    sealed = bytearray(seal(key, "shop", profile_bytes(_profile())))
    sealed[at] ^= 0x01
    with pytest.raises(ProfileSealError, match="nothing was loaded"):
        unseal(key, "shop", bytes(sealed))


def test_another_key_or_name_or_shape_does_not_open() -> None:
    key = _key()
    sealed = seal(key, "shop", b"{}")
    with pytest.raises(ProfileSealError):
        unseal(_key(), "shop", sealed)
    with pytest.raises(ProfileSealError):
        unseal(key, "bank", sealed)  # the name is bound in: no swapping files
    with pytest.raises(ProfileSealError, match="not a sealed"):
        unseal(key, "shop", b"{}")
    with pytest.raises(ProfileSealError, match="not a sealed"):
        unseal(key, "shop", sealed[:20])
    with pytest.raises(ProfileSealError, match="more than a profile holds"):
        unseal(key, "shop", MAGIC + b"\x00" * SEALED_LIMIT)


def test_key_from_the_environment_never_quoted() -> None:
    key = _key()
    assert profile_key({KEY_ENV: base64.b64encode(key).decode()}) == key
    with pytest.raises(StepFailed, match="is not set"):
        profile_key({})
    short = base64.b64encode(b"k" * 16).decode()
    with pytest.raises(StepFailed, match="32 bytes") as caught:
        profile_key({KEY_ENV: short})
    assert short not in str(caught.value)
    with pytest.raises(StepFailed, match="32 bytes"):
        profile_key({KEY_ENV: "not base64!"})


class _Computer:
    """The runner's op call, answering as a computer would, keeping what it was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, object]]] = []

    def __call__(self, step: object, op: str, model: type, **fields: object) -> object:
        body = model(**fields)
        self.sent.append((op, fields))
        if isinstance(body, ProfilesSave):
            profile = _profile()
            size = len(profile_bytes(profile))
            return ProfileSaved(
                name=body.name, profile=profile, cookies=1, origins=1, databases=1, bytes=size
            )
        assert isinstance(body, ProfilesLoad)
        return ProfileLoaded(name=body.name, cookies=1, origins=1, databases=1)


def test_steps_keep_only_sealed_bytes_in_the_file_store(tmp_path: Path) -> None:
    store = FolderStore(tmp_path)
    environ = {KEY_ENV: base64.b64encode(_key()).decode()}
    computer = _Computer()
    saving = BrowserSaveProfile(type="browser_save_profile", env_id="e", name="shop")
    done = save_profile(computer, store, saving, environ)
    assert done["cookies"] == 1 and done["profile"] == "shop"
    assert SESSION not in str(done)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["profiles/shop.profile"]
    assert all(SESSION.encode() not in p.read_bytes() for p in written)
    loading = BrowserLoadProfile(type="browser_load_profile", env_id="e", name="shop")
    load_profile(computer, store, loading, environ)
    op, fields = computer.sent[-1]
    assert op == "profiles/load" and fields["profile"] == _profile()
    with pytest.raises(StepFailed, match="no profile 'other'"):
        get_sealed(store, "other")
    with pytest.raises(ProfileSealError):
        other = {KEY_ENV: base64.b64encode(_key()).decode()}
        load_profile(computer, store, loading, other)
    assert computer.sent[-1][0] == "profiles/load" and len(computer.sent) == 2  # none sent


def test_a_tampered_file_loads_nothing(tmp_path: Path) -> None:
    store = FolderStore(tmp_path)
    key = _key()
    put_sealed(store, "shop", seal(key, "shop", profile_bytes(_profile())))
    target = tmp_path / "profiles" / "shop.profile"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x80
    target.write_bytes(bytes(data))
    computer = _Computer()
    loading = BrowserLoadProfile(type="browser_load_profile", env_id="e", name="shop")
    with pytest.raises(ProfileSealError):
        load_profile(computer, store, loading, {KEY_ENV: base64.b64encode(key).decode()})
    assert computer.sent == []


def test_preflight_names_the_key_and_bad_names(tmp_path: Path) -> None:
    task_file = tmp_path / "task.yaml"
    task_file.write_text(
        "envs: {e: {versions: {1: {browsers: [main]}}}}\n"
        "steps:\n"
        "  - {type: deploy_env, env_id: e}\n"
        "  - {type: browser_save_profile, env_id: e, name: ../up}\n"
        "  - {type: browser_load_profile, env_id: e, name: shop}\n"
    )
    task = load_task(task_file)
    found = [(p.step, p.field) for p in preflight(task, {})]
    assert (2, "name") in found and (3, "name") in found
    ok = {KEY_ENV: base64.b64encode(_key()).decode()}
    assert [(p.step, p.field) for p in preflight(task, ok)] == [(2, "name")]


def test_run_profile_loads_before_the_agents_turn() -> None:
    from agentenv.harness.profile_steps import with_profile
    from agentenv.harness.steps import Task

    task = Task.model_validate(
        {
            "envs": {"e": {"versions": {"1": {"browsers": ["main"]}}}},
            "steps": [
                {"type": "deploy_env", "env_id": "e"},
                {"type": "browser_open_tab", "env_id": "e", "url": "http://a.test/"},
                {"type": "run_agent", "command": ["true"]},
                {"type": "run_agent", "command": ["true"]},
            ],
        }
    )
    types = [step.type for step in with_profile(task, "shop").steps]
    assert types == [
        "deploy_env",
        "browser_open_tab",
        "browser_load_profile",
        "run_agent",
        "run_agent",
    ]
    loaded = with_profile(task, "shop").steps[2]
    assert isinstance(loaded, BrowserLoadProfile)
    assert (loaded.env_id, loaded.name) == ("e", "shop")
    alone = Task.model_validate({"steps": [{"type": "run_agent", "command": ["true"]}]})
    assert with_profile(alone, "shop") == alone


def test_run_profile_with_no_key_is_refused_before_anything_deploys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentenv.harness.cli import main

    monkeypatch.delenv(KEY_ENV, raising=False)
    task_file = tmp_path / "task.yaml"
    task_file.write_text(
        "envs: {e: {versions: {1: {browsers: [main]}}}}\n"
        "steps:\n"
        "  - {type: deploy_env, env_id: e}\n"
        "  - {type: run_agent, command: ['true']}\n"
    )
    code = main(["run", str(task_file), "--profile", "shop", "--out", str(tmp_path / "out")])
    assert code != 0
    assert KEY_ENV in capsys.readouterr().err


def test_a_save_reads_the_origins_its_own_scope_saw(tmp_path: Path) -> None:
    from agentenv.app.profile_ops import scope_record
    from agentenv.log.reader import LogReader
    from agentenv.log.writer import LogWriter

    writer = LogWriter.open(tmp_path / "log.jsonl")
    writer.record(
        "tab", {"event": "navigated", "id": "A", "scope": "alice", "url": "https://a.test/x"}
    )
    writer.record(
        "tab", {"event": "navigated", "id": "B", "scope": "bob", "url": "https://b.test/"}
    )
    writer.record(
        "tab", {"event": "navigated", "id": "A", "scope": "alice", "url": "http://c.test:81/"}
    )
    writer.close()
    reader = LogReader(tmp_path / "log.jsonl")
    assert scope_record(reader, 0, "alice", None)[0] == {"https://a.test", "http://c.test:81"}
    assert scope_record(reader, 1, "alice", None)[0] == {"http://c.test:81"}
    assert scope_record(reader, 0, "carol", None)[0] == set()
    assert scope_record(reader, 0, None, None)[0] == {
        "https://a.test",
        "https://b.test",
        "http://c.test:81",
    }


def _action(scope: str, method: str, params: dict[str, Any], ok: bool = True) -> bytes:
    body = {"via": "cdp", "who": scope, "method": method, "params": params, "ok": ok}
    return orjson.dumps({"seq": 1, "at": "t", "action": {**body, "scope": scope}})


def test_a_save_keeps_the_permission_commands_still_in_force() -> None:
    """Chromium cannot list a context's permission overrides: the log's
    commands that made them are replayed, in order, from the last clear."""
    from agentenv.app.profile_permissions import permissions_set

    geo = {"origin": "https://a.test", "permissions": ["geolocation"]}
    mic = {"permission": {"name": "microphone"}, "setting": "denied"}
    lines = [
        _action("alice", "Browser.grantPermissions", {"permissions": ["notifications"]}),
        _action("alice", "Browser.resetPermissions", {}),  # clears what came before
        _action("alice", "Browser.grantPermissions", geo),
        _action("bob", "Browser.grantPermissions", {"permissions": ["camera"]}),  # bob's
        _action("alice", "Browser.setPermission", mic),
        _action("alice", "Browser.setPermission", {**mic, "setting": "granted"}, ok=False),
        # A context alice's client made for itself: its storage is not kept either.
        _action("alice", "Browser.grantPermissions", {**geo, "browserContextId": "C2"}),
        _action("alice", "Browser.resetPermissions", {"browserContextId": "C2"}),
        # Her scope's own, named (as Playwright names its default context).
        _action(
            "alice", "Browser.grantPermissions", {"permissions": ["midi"], "browserContextId": "C1"}
        ),
        b"not a line",
    ]
    kept = permissions_set(lines, "alice", "C1")
    assert [(k.method, k.params) for k in kept] == [
        ("Browser.grantPermissions", geo),
        ("Browser.setPermission", mic),
        ("Browser.grantPermissions", {"permissions": ["midi"]}),  # its context left out
    ]
    # One scope: every line. A context not known: only commands naming none.
    assert [k.params for k in permissions_set(lines, None, None)][:2] == [
        geo,
        {"permissions": ["camera"]},
    ]
    reset = orjson.dumps({"seq": 9, "at": "t", "reset": {"reason": "data/reset"}})
    assert permissions_set([*lines, reset], "alice", "C1") == []
    scope_reset = orjson.dumps(
        {
            "seq": 9,
            "at": "t",
            "action": {"op": "scopes/reset", "args": {"scope": "alice"}, "ok": True},
        }
    )
    assert permissions_set([*lines, scope_reset], "alice", "C1") == []
    bobs_reset = _action("bob", "Browser.resetPermissions", {})
    assert len(permissions_set([*lines, bobs_reset], "alice", "C1")) == 3  # bob's only
    many = [
        _action("alice", "Browser.grantPermissions", {"permissions": [f"p{n}"]}) for n in range(300)
    ]
    kept = permissions_set(many, "alice", None)
    assert len(kept) > MAX_PROFILE_PERMISSIONS  # the save refuses so many (413)
    assert kept[-1].params == {"permissions": ["p299"]}
    more = [
        _action("alice", "Browser.grantPermissions", {"permissions": [f"p{n}"]})
        for n in range(5000)
    ]
    assert len(permissions_set(more, "alice", None)) <= 2 * (MAX_PROFILE_PERMISSIONS + 1)
    # A command whose params the log cut (past its bound) cannot be sent
    # again as it was, nor be told apart by its context: passed over.
    cut = _action("alice", "Browser.grantPermissions", {"cut": "…", "bytes": 40000})
    odd = _action("alice", "Browser.setPermission", {"permission": "camera", "setting": "granted"})
    assert permissions_set([cut, odd], "alice", None) == []


def test_a_profile_refuses_a_permission_naming_a_context() -> None:
    with pytest.raises(ProfileError, match="browserContextId"):
        read_profile(
            orjson.dumps(
                {
                    "permissions": [
                        {
                            "method": "Browser.grantPermissions",
                            "params": {"permissions": ["camera"], "browserContextId": "X"},
                        }
                    ]
                }
            )
        )
    with pytest.raises(ProfileError):
        read_profile(orjson.dumps({"permissions": [{"method": "Browser.close", "params": {}}]}))


def test_a_profiles_session_storage_is_kept_by_origin() -> None:
    kept = read_profile(orjson.dumps({"session_storage": {"https://a.test": {"k": "v"}}}))
    assert kept.session_storage == {"https://a.test": {"k": "v"}}
    bads: list[dict[str, Any]] = [{"https://a.test/path": {}}, {"https://a.test": {"k": 1}}]
    for bad in bads:
        with pytest.raises(ProfileError):
            read_profile(orjson.dumps({"session_storage": bad}))
