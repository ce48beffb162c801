"""Scopes: a client sees its scope as the browser, and nothing of any other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentenv.access import Identity
from agentenv.app.browser_data import _empty_downloads
from agentenv.relay import core, scope_rule
from agentenv.relay.core import ClientState, Down, Kind, Pending, SessionInfo
from agentenv.scopes import Scope, Scopes
from agentenv.settings import SettingsError, load, parse_scopes, parse_users, scope_folder
from tests.support.known import known

DOWNLOADS = "/var/lib/agentenv/downloads"
MINE, MADE, THEIRS = "CTX-ALICE", "CTX-ALICE-2", "CTX-BOB"
#: target -> context, as the watcher knows.
CONTEXTS = {"T-ALICE": MINE, "T-ALICE-2": MADE, "T-BOB": THEIRS}


def alice() -> ClientState:
    scope = Scope("alice", MINE, {MADE})
    state = ClientState(7, Identity("alice"), scope=scope, known=known(CONTEXTS))
    state.sessions["S"] = SessionInfo("T-ALICE")
    return state


def send(
    state: ClientState, method: str, params: dict[str, Any], session: str | None = None
) -> core.Step:
    message: dict[str, Any] = {"id": 3, "method": method, "params": params}
    if session is not None:
        message["sessionId"] = session
    return core.receive(state, json.dumps(message), DOWNLOADS)


def upstream(state: ClientState, message: dict[str, Any]) -> core.Downstream:
    return core.from_upstream(state, orjson.dumps(message).decode())


def answer(state: ClientState, method: str, result: dict[str, Any]) -> core.Downstream:
    state.pending[(None, 3)] = Pending(1, method, {})
    return upstream(state, {"id": 3, "result": result})


@pytest.mark.parametrize(
    "method",
    [
        "Target.attachToTarget",
        "Target.activateTarget",
        "Target.closeTarget",
        "Target.getTargetInfo",
        "Browser.getWindowForTarget",
    ],
)
def test_another_scopes_target_is_unknown_to_a_client(method: str) -> None:
    state = alice()
    params: dict[str, Any] = {"targetId": "T-BOB", "flatten": True}
    step = send(state, method, params)
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "scope"
    error = step.error_answer()["error"]
    assert error["message"] == "No target with given id found", error  # as Chromium says
    # Its line names no tab: the logbook would write that tab's URL on it.
    assert step.tab is None
    for own in ("T-ALICE", "T-ALICE-2"):
        assert send(state, method, {"targetId": own, "flatten": True}).kind is Kind.FORWARD
    # One the watcher has not heard of yet: refused (fail closed) unless this
    # client was shown it (a tab it just opened).
    unheard = send(state, method, {"targetId": "T-NEW", "flatten": True})
    assert unheard.kind is Kind.BLOCK and unheard.tab is None
    state.visible.add("T-NEW")
    assert send(state, method, {"targetId": "T-NEW", "flatten": True}).kind is Kind.FORWARD


def test_a_refusal_by_the_guard_names_no_tab_of_another_scope() -> None:
    """Refused before the scope is read (the guard's own table): the line
    still names only the scope's tabs, never another's (with its URL)."""
    state = alice()
    theirs = send(state, "Target.exposeDevToolsProtocol", {"targetId": "T-BOB"})
    assert theirs.kind is Kind.BLOCK and theirs.verdict is not None
    assert theirs.verdict.rule != "scope", theirs.verdict  # the guard's, first
    assert theirs.tab is None
    own = send(state, "Target.exposeDevToolsProtocol", {"targetId": "T-ALICE"})
    assert own.kind is Kind.BLOCK and own.tab == "T-ALICE"


def test_a_new_tab_opens_in_the_scope() -> None:
    state = alice()
    step = send(state, "Target.createTarget", {"url": "about:blank"})
    assert step.kind is Kind.FORWARD
    assert orjson.loads(step.data)["params"] == {"url": "about:blank", "browserContextId": MINE}
    made = send(state, "Target.createTarget", {"url": "about:blank", "browserContextId": MADE})
    assert orjson.loads(made.data)["params"]["browserContextId"] == MADE
    other = send(state, "Target.createTarget", {"url": "about:blank", "browserContextId": THEIRS})
    assert other.kind is Kind.BLOCK and other.verdict is not None
    assert other.verdict.rule == "scope"


@pytest.mark.parametrize(
    "method",
    [
        "Storage.getCookies",
        "Storage.setCookies",
        "Storage.clearCookies",
        "Browser.grantPermissions",
    ],
)
def test_the_default_context_is_the_scopes(method: str) -> None:
    state = alice()
    params: dict[str, Any] = {"cookies": []} if method == "Storage.setCookies" else {}
    if method == "Browser.grantPermissions":
        params = {"permissions": ["geolocation"]}
    step = send(state, method, params)
    assert step.kind is Kind.FORWARD, step.verdict
    assert orjson.loads(step.data)["params"]["browserContextId"] == MINE
    assert send(state, method, {**params, "browserContextId": THEIRS}).kind is Kind.BLOCK


def test_downloads_go_to_the_folder_and_the_scope() -> None:
    state = alice()
    step = send(state, "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": "/tmp"})
    assert step.kind is Kind.REWRITE
    sent = orjson.loads(step.data)["params"]
    assert sent["downloadPath"] == DOWNLOADS and sent["browserContextId"] == MINE


def test_contexts_dispose_only_the_scopes_own_made_ones() -> None:
    state = alice()
    assert (
        send(state, "Target.disposeBrowserContext", {"browserContextId": MADE}).kind is Kind.FORWARD
    )
    for context in (MINE, THEIRS, "CTX-UNKNOWN"):
        step = send(state, "Target.disposeBrowserContext", {"browserContextId": context})
        assert step.kind is Kind.BLOCK, context


def test_browser_level_cookie_calls_of_no_scope_are_refused() -> None:
    state = alice()
    step = send(state, "Network.getAllCookies", {})
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "browser-wide" and "Storage.getCookies" in step.verdict.message
    assert send(state, "Network.getAllCookies", {}, session="S").kind is Kind.FORWARD


def test_get_targets_lists_only_the_scopes() -> None:
    state = alice()
    infos = [
        {"targetId": t, "type": "page", "url": "about:blank", "browserContextId": c}
        for t, c in CONTEXTS.items()
    ]
    down = answer(state, "Target.getTargets", {"targetInfos": infos})
    assert down.kind is Down.PASS and down.data is not None
    shown = orjson.loads(down.data)
    assert shown["id"] == 3
    assert [i["targetId"] for i in shown["result"]["targetInfos"]] == ["T-ALICE", "T-ALICE-2"]
    assert state.visible >= {"T-ALICE", "T-ALICE-2"} and "T-BOB" not in state.visible


def test_get_browser_contexts_is_the_scopes_browser() -> None:
    state = alice()
    down = answer(
        state,
        "Target.getBrowserContexts",
        {"browserContextIds": [MINE, MADE, THEIRS], "defaultBrowserContextId": "CTX-D"},
    )
    assert down.data is not None
    result = orjson.loads(down.data)["result"]
    assert result == {"browserContextIds": [MADE], "defaultBrowserContextId": MINE}


def test_a_context_the_scope_made_is_its_own() -> None:
    state = alice()
    answer(state, "Target.createBrowserContext", {"browserContextId": "CTX-NEW"})
    assert state.scope is not None and state.scope.holds("CTX-NEW")
    assert send(state, "Target.disposeBrowserContext", {"browserContextId": "CTX-NEW"}).kind is (
        Kind.FORWARD
    )


def test_auto_attach_leaves_another_scopes_targets_and_lets_them_run() -> None:
    state = alice()
    theirs = {
        "method": "Target.attachedToTarget",
        "params": {
            "sessionId": "X",
            "targetInfo": {
                "targetId": "T-BOB",
                "type": "page",
                "url": "https://bob.example/",
                "browserContextId": THEIRS,
            },
            "waitingForDebugger": True,
        },
    }
    down = upstream(state, theirs)
    assert down.kind is Down.DETACH and down.session == "X" and down.resume
    # Let run, then left: the relay's own commands (negative ids), none on
    # the client's record.
    run, leave = (json.loads(x) for x in down.upstream)
    assert run["method"] == "Runtime.runIfWaitingForDebugger" and run["sessionId"] == "X"
    assert leave["method"] == "Target.detachFromTarget" and leave["params"] == {"sessionId": "X"}
    assert run["id"] < 0 and leave["id"] < 0 and {run["id"], leave["id"]} <= state.own
    # Its detach, when Chromium reports it, is the relay's own: never the client's.
    gone = {"method": "Target.detachedFromTarget", "params": {"sessionId": "X"}}
    assert upstream(state, gone).kind is Down.DROP
    mine = json.loads(json.dumps(theirs))
    mine["params"]["sessionId"] = "Y"
    mine["params"]["targetInfo"].update(targetId="T-ALICE-3", browserContextId=MINE)
    assert upstream(state, mine).kind is Down.PASS and "T-ALICE-3" in state.visible


def test_target_events_of_another_scope_never_reach_a_client() -> None:
    state = alice()

    def created(target: str, context: str) -> dict[str, Any]:
        info = {"targetId": target, "type": "page", "url": "", "browserContextId": context}
        return {"method": "Target.targetCreated", "params": {"targetInfo": info}}

    assert upstream(state, created("T-BOB", THEIRS)).kind is Down.DROP
    assert upstream(state, created("T-ALICE", MINE)).kind is Down.PASS
    changed = created("T-BOB", THEIRS) | {"method": "Target.targetInfoChanged"}
    assert upstream(state, changed).kind is Down.DROP
    for method in ("Target.targetDestroyed", "Target.targetCrashed"):
        event = {"method": method, "params": {"targetId": "T-BOB"}}
        assert upstream(state, event).kind is Down.DROP
    destroyed = {"method": "Target.targetDestroyed", "params": {"targetId": "T-ALICE"}}
    assert upstream(state, destroyed).kind is Down.PASS
    assert "T-ALICE" not in state.visible


def test_downloads_of_another_scope_never_reach_a_client() -> None:
    state = alice()

    def begin(frame: str, guid: str) -> dict[str, Any]:
        params = {"frameId": frame, "guid": guid, "url": "https://x/f", "suggestedFilename": "f"}
        return {"method": "Browser.downloadWillBegin", "params": params}

    def progress(guid: str) -> dict[str, Any]:
        params = {"guid": guid, "state": "inProgress", "receivedBytes": 1, "totalBytes": 2}
        return {"method": "Browser.downloadProgress", "params": params}

    assert upstream(state, begin("T-BOB", "G-BOB")).kind is Down.DROP
    assert upstream(state, progress("G-BOB")).kind is Down.DROP
    assert upstream(state, begin("T-ALICE", "G-ALICE")).kind is Down.PASS
    assert upstream(state, progress("G-ALICE")).kind is Down.PASS
    # An in-process iframe has no target: a download from one is known by the
    # frame Alice's own session heard load.
    assert upstream(state, begin("FRAME-IN-ALICE", "G-FRAME")).kind is Down.DROP
    loading = {
        "method": "Page.frameStartedLoading",
        "params": {"frameId": "FRAME-IN-ALICE"},
        "sessionId": "S",
    }
    assert upstream(state, loading).kind is Down.PASS
    assert upstream(state, begin("FRAME-IN-ALICE", "G-FRAME-2")).kind is Down.PASS
    assert upstream(state, progress("G-FRAME-2")).kind is Down.PASS
    # A frame heard on no session of hers is not hers.
    stray = loading | {"params": {"frameId": "FRAME-ELSEWHERE"}, "sessionId": "S-UNKNOWN"}
    upstream(state, stray)
    assert upstream(state, begin("FRAME-ELSEWHERE", "G-X")).kind is Down.DROP


def test_scopes_are_isolated_with_two_or_more() -> None:
    one = Scopes({"alice": "alice"})
    assert not one.isolated and one.name_for(Identity("alice")) is None
    grouped = Scopes({"alice": "team", "bob": "team"})
    assert not grouped.isolated
    two = Scopes({"alice": "alice", "bob": "bob", "carol": "bob"})
    assert two.isolated and two.home == "alice"
    assert two.name_for(Identity("carol")) == "bob"
    assert two.name_for(Identity("agentenv", control=True)) is None  # sees every scope
    # A granted token's caller who is no user (the control token's own MCP
    # calls, a role): the home scope, never a scope made for it.
    assert two.name_for(Identity("mcp-caller")) == "alice"


def test_users_name_their_scope_after_the_token() -> None:
    text = "alice:a-tok:team, bob:b-tok:team, carol:c-tok"
    assert parse_users(text) == {"alice": "a-tok", "bob": "b-tok", "carol": "c-tok"}
    assert parse_scopes(text) == {"alice": "team", "bob": "team", "carol": "carol"}
    # A token with colons, then its scope: the scope is after the last one.
    assert parse_users("dave:to:ken:ops") == {"dave": "to:ken"}
    assert parse_scopes("dave:to:ken:ops") == {"dave": "ops"}
    settings = load({"AGENTENV_USERS": text})
    assert dict(settings.scopes) == {"alice": "team", "bob": "team", "carol": "carol"}
    with pytest.raises(SettingsError) as caught:
        parse_users("erin:s3cret-tok:bad scope!")
    assert "s3cret" not in str(caught.value)


def test_windows_are_only_those_of_the_scopes_tabs() -> None:
    """Window ids are small numbers: one the client was not given for its own
    tab is another scope's, or none."""
    state = alice()
    for method in ("Browser.setWindowBounds", "Browser.getWindowBounds", "Browser.setContentsSize"):
        assert send(state, method, {"windowId": 2, "bounds": {}}).kind is Kind.BLOCK
    state.pending[(None, 3)] = Pending(1, "Browser.getWindowForTarget", {"targetId": "T-ALICE"})
    upstream(state, {"id": 3, "result": {"windowId": 7, "bounds": {}}})
    step = send(state, "Browser.setWindowBounds", {"windowId": 7, "bounds": {"width": 800}})
    assert step.kind is Kind.FORWARD
    assert send(state, "Browser.setContentsSize", {"windowId": 7, "width": 800}).kind is (
        Kind.FORWARD
    )


def test_browser_level_settings_are_refused_only_across_scopes() -> None:
    """With one scope, browser-level settings work as on their own Chromium;
    with two scopes or more they would reach every scope's pages."""
    alone = ClientState(7, Identity("alice"))
    browser_level = (
        "Fetch.enable",
        "Tracing.start",
        # Storage calls with no context: on the browser's session, the home
        # scope's storage, whoever sends them (another scope cleared it).
        "Storage.clearDataForOrigin",
        "Storage.getUsageAndQuota",
        "Storage.trackIndexedDBForOrigin",
        "Emulation.setAutomationOverride",
    )
    for method in browser_level:
        assert send(alone, method, {"ignore": True}).kind is Kind.FORWARD, method
        step = send(alice(), method, {"ignore": True})
        assert step.kind is Kind.BLOCK and step.verdict is not None, method
        assert step.verdict.rule == "browser-wide"


def _attached(session: str, target: str, kind: str = "page") -> dict[str, Any]:
    info = {"targetId": target, "type": kind, "url": "about:blank", "browserContextId": MINE}
    params = {"sessionId": session, "targetInfo": info, "waitingForDebugger": True}
    return {"method": "Target.attachedToTarget", "params": params}


def test_ignoring_certificate_errors_is_kept_to_the_senders_pages() -> None:
    """Puppeteer's acceptInsecureCerts: browser-level
    Security.setIgnoreCertificateErrors. With one scope it goes to Chromium as
    sent; with two or more the relay answers it and tells each of the
    connection's page and frame sessions, now and as they attach (before
    the client hears of them), so no other scope's pages ignore anything."""
    alone = ClientState(7, Identity("alice"))
    method = "Security.setIgnoreCertificateErrors"
    assert send(alone, method, {"ignore": True}).kind is Kind.FORWARD
    state = alice()
    state.sessions["W"] = SessionInfo("T-ALICE", own=False, everywhere=True, framed=False)
    step = send(state, method, {"ignore": True})
    assert step.kind is Kind.ANSWER and state.ignore_certificates
    told = [json.loads(command) for command in step.upstream]
    assert [(c["method"], c["params"], c["sessionId"]) for c in told] == [
        (method, {"ignore": True}, "S")  # not the worker's session W
    ]
    assert all(c["id"] < 0 and c["id"] in state.own for c in told)
    # A page attached later (waiting for its debugger) is told before the client has it.
    down = upstream(state, _attached("P2", "T-ALICE-3"))
    assert down.kind is Down.PASS and len(down.upstream) == 1
    later = json.loads(down.upstream[0])
    assert later["sessionId"] == "P2" and later["params"] == {"ignore": True}
    assert not upstream(state, _attached("SW", "T-ALICE-4", "service_worker")).upstream
    # The answers to the relay's own commands never reach the client.
    assert upstream(state, {"id": later["id"], "result": {}}).kind is Down.DROP
    # A session the client set itself is left as it set it.
    assert send(state, method, {"ignore": False}, session="P2").kind is Kind.FORWARD
    off = send(state, method, {"ignore": False})
    assert off.kind is Kind.ANSWER and not state.ignore_certificates
    assert [json.loads(c)["sessionId"] for c in off.upstream] == ["S"]
    assert not upstream(state, _attached("P3", "T-ALICE-5")).upstream
    # Bad params: Chromium's own answer, nothing changed.
    for bad in ({}, {"ignore": "yes"}, {"ignore": 1}):
        step = send(state, method, bad)
        assert step.kind is Kind.INVALID and step.code == -32602, bad
        assert "ignore, a boolean" in step.error
    assert not state.ignore_certificates


def test_each_scope_downloads_into_a_folder_of_its_own(tmp_path: Path) -> None:
    """Two scopes or more: a folder each inside the downloads folder, named
    safely whatever the user's name; one scope: the downloads folder itself."""
    root = Path("/var/lib/agentenv/downloads")
    two = load({"AGENTENV_USERS": "alice:a1,bob:b1,../x:c1,carol:c2:team,dan:d1:team"})
    assert two.downloads_for("alice") == root / "alice"
    assert two.downloads_for("team") == root / "team"
    assert two.downloads_for(None) == root  # the control token sees every scope
    odd = two.downloads_for("../x")
    assert odd.parent == root and odd.name.startswith("scope-"), odd
    assert scope_folder("..") != ".." and scope_folder(".") != "."
    assert two.scope_folders == {"alice", "bob", "team", odd.name}
    one = load({"AGENTENV_USERS": "alice:a1,bob:b1:alice"})
    assert one.downloads_for("alice") == root and one.scope_folders == frozenset()
    # data/reset empties every scope's folder, and keeps the folders.
    for name in ("alice", "bob"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "file.txt").write_text("x")
    (tmp_path / "loose.txt").write_text("x")
    (tmp_path / "stray").mkdir()
    assert _empty_downloads(str(tmp_path), frozenset({"alice", "bob"})) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice", "bob"]
    assert not any((tmp_path / "alice").iterdir())


def test_a_message_in_another_shape_is_read_as_chromiums_own() -> None:
    """The rules tell events apart by how Chromium writes them: one in another
    shape (keys in another order, spaces) is read the same, not passed on
    unread; what is not a JSON object reaches no client."""
    state = alice()
    theirs = {
        "params": {
            "sessionId": "X",
            "targetInfo": {
                "targetId": "T-BOB",
                "type": "page",
                "url": "https://bob.example/",
                "browserContextId": THEIRS,
            },
            "waitingForDebugger": True,
        },
        "method": "Target.attachedToTarget",
    }
    for text in (json.dumps(theirs), json.dumps(dict(reversed(list(theirs.items()))))):
        state = alice()
        down = core.from_upstream(state, text)
        assert down.kind is Down.DETACH and down.session == "X", text
    mine = json.loads(json.dumps(theirs))
    mine["params"]["targetInfo"].update(targetId="T-ALICE-3", browserContextId=MINE)
    down = core.from_upstream(state, json.dumps(mine))
    assert down.kind is Down.PASS and down.data is not None
    assert down.data.startswith('{"method":"Target.attachedToTarget"')
    assert "T-ALICE-3" in state.visible
    for junk in ("not json", "[1, 2]", '"text"'):
        assert core.from_upstream(state, junk).kind is Down.DROP, junk
    # An answer in another shape still ends its command.
    state.pending[(None, 3)] = Pending(1, "Target.getTargets", {})
    reply = core.from_upstream(state, '{"result": {"targetInfos": []}, "id": 3}')
    assert reply.pending is not None and reply.pending.method == "Target.getTargets"


def test_certificate_settings_bound_what_the_relay_keeps_and_sends() -> None:
    """Review of the browser-level certificate setting: a made-up session is
    kept nowhere; the same setting again sends nothing; turning it off tells
    only the sessions the relay told; a session whose client overrides
    certificate errors itself is left alone."""
    method = "Security.setIgnoreCertificateErrors"
    state = alice()
    for n in range(3):
        made_up = send(state, method, {"ignore": True}, session="X" * 1000 + str(n))
        assert made_up.kind is Kind.INVALID and made_up.code == -32001
    assert not state.certificates_own
    on = send(state, method, {"ignore": True})
    assert [json.loads(c)["sessionId"] for c in on.upstream] == ["S"]
    assert state.certificates_told == {"S"}
    again = send(state, method, {"ignore": True})
    assert again.kind is Kind.ANSWER and again.upstream == ()
    upstream(state, _attached("P2", "T-ALICE-3"))
    assert state.certificates_told == {"S", "P2"}
    handled = send(state, "Security.setOverrideCertificateErrors", {"override": True}, "P2")
    assert handled.kind is Kind.FORWARD and "P2" in state.certificates_own
    off = send(state, method, {"ignore": False})
    assert [json.loads(c)["sessionId"] for c in off.upstream] == ["S"]
    gone = {"method": "Target.detachedFromTarget", "params": {"sessionId": "P2"}}
    upstream(state, gone)
    assert "P2" not in state.certificates_own and "P2" not in state.certificates_told


def test_an_answer_with_lone_surrogates_still_ends_its_command() -> None:
    """Chromium writes a page's lone surrogates as escapes orjson refuses:
    the answer still ends its command (else typing on the tab waited the
    whole check), and the relay's own answer, however spaced, never reaches
    the client first."""
    state = alice()
    state.pending[("S", 3)] = Pending(1, "Runtime.evaluate", {})
    text = '{"id":3,"result":{"result":{"type":"string","value":"\\ud800"}},"sessionId":"S"}'
    down = core.from_upstream(state, text)
    assert down.pending is not None and not state.pending
    own = state.own_id()
    assert not core.answer_first(state, f'{{"id": {own},"result":{{}}}}')
    assert core.from_upstream(state, f'{{"id": {own}, "result": {{}}}}').kind is Down.DROP


def _listed(*targets: tuple[str, str, str]) -> list[dict[str, str]]:
    return [{"id": i, "type": kind, "url": url} for i, kind, url in targets]


LISTED = _listed(
    ("T-ALICE", "page", "https://a.example/"),
    ("T-BOB", "page", "https://b.example/"),
    ("T-ALICE-2", "service_worker", "https://a.example/sw.js"),
    ("T-UI", "page", "chrome://newtab/"),
    ("T-WARM", "page", "about:blank"),
)


def test_json_list_shows_a_scope_its_own_web_targets_and_every_scope_no_warm_one() -> None:
    contexts = {**CONTEXTS, "T-UI": MINE, "T-WARM": "CTX-WARM"}
    found = known(contexts, withheld=lambda context: context == "CTX-WARM")
    mine = scope_rule.listing(found, Scope("alice", MINE, {MADE}), LISTED)
    assert [t["id"] for t in mine] == ["T-ALICE", "T-ALICE-2"]
    every = scope_rule.listing(found, None, LISTED)
    assert [t["id"] for t in every] == ["T-ALICE", "T-BOB", "T-ALICE-2"]
    assert scope_rule.listing(found, None, {"not": "a list"}) == []


def test_a_page_endpoint_of_another_scope_is_not_found_and_a_non_web_one_refused() -> None:
    contexts = {**CONTEXTS, "T-UI": MINE}
    found, scope = known(contexts), Scope("alice", MINE, {MADE})
    assert scope_rule.page_endpoint(found, scope, LISTED, "T-ALICE") is None
    for target in ("T-BOB", "T-NONE"):
        refused = scope_rule.page_endpoint(found, scope, LISTED, target)
        assert refused is not None and refused.rule == "scope", target
        assert "list pages with /json/list" in refused.message
    refused = scope_rule.page_endpoint(found, scope, LISTED, "T-UI")
    assert refused is not None and refused.rule == "not-a-web-target"
