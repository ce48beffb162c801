"""The relay's core on recorded traffic of real clients, and on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentenv.access import Identity
from agentenv.protocol.control import BeginAction, TokenGrant
from agentenv.relay import core
from agentenv.relay.core import ClientState, Down, Kind, Pending, SessionInfo
from agentenv.relay.known import TargetSeen
from tests.support.known import known
from tests.support.traffic import CLIENTS

TRAFFIC = Path(__file__).parent / "traffic"
DOWNLOADS = "/var/lib/agentenv/downloads"


def agent() -> ClientState:
    return ClientState(7, Identity("alice"))


def control() -> ClientState:
    return ClientState(1, Identity("agentenv", control=True))


def send(state: ClientState, message: Any) -> core.Step:
    data = message if isinstance(message, str) else json.dumps(message)
    return core.receive(state, data, DOWNLOADS)


@pytest.mark.parametrize("client", CLIENTS)
def test_recorded_traffic_passes(client: str) -> None:
    state = agent()
    kinds: dict[Kind, int] = {}
    for line in (TRAFFIC / f"{client}.jsonl").read_text().splitlines():
        message = json.loads(line)["message"]
        if "sessionId" in message:  # Chromium announced it (the recordings hold the client's side)
            state.sessions.setdefault(message["sessionId"], SessionInfo(None))
        step = send(state, message)
        kinds[step.kind] = kinds.get(step.kind, 0) + 1
        assert step.kind in (Kind.FORWARD, Kind.REWRITE), (step.method, step.verdict)
        assert step.call == message["id"] and step.method == message["method"]
        if step.kind is Kind.REWRITE:
            assert step.method == "Browser.setDownloadBehavior"
            assert orjson.loads(step.data)["params"]["downloadPath"] == DOWNLOADS
        elif step.method == "Target.setAutoAttach" and message["params"].get("autoAttach"):
            sent = orjson.loads(step.data)["params"]
            assert {"type": "browser_ui", "exclude": True} in sent["filter"]
        else:
            assert orjson.loads(step.data) == message  # what the rules read, as sent
    assert kinds.get(Kind.FORWARD, 0) > 20


def test_a_session_the_connection_never_attached_is_answered_at_once() -> None:
    """Chromium answers a command on an unknown session without its sessionId:
    matched on its id alone, a reused id ended another command's entry (a
    failed navigate written ok, and the other way round)."""
    state = agent()
    state.sessions["S"] = SessionInfo("T")
    navigate = {"id": 11, "method": "Page.navigate", "params": {"url": "https://a.example/"}}
    assert send(state, {**navigate, "sessionId": "S"}).kind is Kind.FORWARD
    state.pending[("S", 11)] = Pending(5, "Page.navigate", navigate["params"], "T", True)
    bogus = {"id": 11, "method": "Runtime.evaluate", "params": {"expression": "1"}}
    step = send(state, {**bogus, "sessionId": "BOGUS"})
    assert step.kind is Kind.INVALID and step.code == -32001 and "no such session" in step.error
    assert step.error_answer()["id"] == 11 and step.error_answer()["sessionId"] == "BOGUS"
    # The guard still reads (and the log records) what was attempted there.
    refused = send(state, {"id": 12, "method": "Extensions.loadUnpacked", "sessionId": "BOGUS"})
    assert refused.kind is Kind.BLOCK
    # Once Chromium says the session detached, it is unknown again.
    core.from_upstream(
        state,
        json.dumps(
            {"method": "Target.detachedFromTarget", "params": {"sessionId": "S"}},
            separators=(",", ":"),  # as Chromium writes it
        ),
    )
    assert send(state, {**bogus, "id": 13, "sessionId": "S"}).kind is Kind.INVALID


def test_an_answer_without_its_session_ends_no_other_sessions_command() -> None:
    """Detach session A and send id 90 on it at once: the relay still knew A,
    so it went on; Chromium answers it without a sessionId, and it ended the
    navigate of id 90 on session B (5th red team)."""
    state = agent()
    state.sessions["A"] = SessionInfo("T1")
    state.sessions["B"] = SessionInfo("T2")
    navigate = Pending(30, "Page.navigate", {"url": "https://a.example/"}, "T2", True)
    state.pending[("B", 90)] = navigate
    state.pending[("A", 90)] = Pending(31, "Runtime.evaluate", {}, "T1", True)
    detached = core.from_upstream(
        state,
        '{"method":"Target.detachedFromTarget","params":{"sessionId":"A"},"sessionId":null}',
    )
    assert [p.entry for p in detached.orphans] == [31]
    lost = core.from_upstream(state, '{"id":90,"error":{"code":-32001,"message":"no session"}}')
    assert lost.pending is None and state.pending == {("B", 90): navigate}
    done = core.from_upstream(state, '{"id":90,"result":{"frameId":"T2"},"sessionId":"B"}')
    assert done.pending is navigate and done.ok


def test_a_frames_navigate_and_a_workers_script_are_told_apart() -> None:
    """A Page.navigate of a subframe, or on a session attached to an iframe,
    navigates no tab; a service worker's script can act on every tab."""
    state = agent()
    kinds = {
        "T": ("page", "https://a/"),
        "F": ("iframe", "https://b/"),
        "W": ("service_worker", ""),
    }
    for target, (kind, url) in kinds.items():
        state.known.learn(TargetSeen(target, kind, url, parent="T" if target == "F" else None))
    for session, target in (("ST", "T"), ("SF", "F"), ("SW", "W")):
        state.pending[(None, 1)] = Pending(9, "Target.attachToTarget", {"targetId": target})
        core.from_upstream(state, f'{{"id":1,"result":{{"sessionId":"{session}"}}}}')
    go = {"id": 5, "method": "Page.navigate", "params": {"url": "https://x/"}}
    assert not send(state, {**go, "sessionId": "ST"}).frame_only
    assert send(state, {**go, "id": 6, "sessionId": "SF"}).frame_only
    sub = {**go, "id": 7, "sessionId": "ST", "params": {"url": "https://x/", "frameId": "SUB"}}
    assert send(state, sub).frame_only
    main = {**go, "id": 8, "sessionId": "ST", "params": {"url": "https://x/", "frameId": "T"}}
    assert not send(state, main).frame_only
    script = {"id": 9, "method": "Runtime.evaluate", "params": {"expression": "1"}}
    assert send(state, {**script, "sessionId": "SW"}).everywhere
    assert not send(state, {**script, "id": 10, "sessionId": "SF"}).everywhere
    assert state.sessions["SF"].tab == "T"


def test_typing_is_flagged_for_the_check() -> None:
    state = agent()
    state.sessions["S"] = SessionInfo("T")
    step = send(
        state, {"id": 1, "method": "Input.insertText", "params": {"text": "x"}, "sessionId": "S"}
    )
    assert step.kind is Kind.FORWARD and step.typing and step.point is None
    click = {"type": "mousePressed", "x": 1, "y": 1, "button": "left", "clickCount": 1}
    assert not send(state, {"id": 2, "method": "Input.dispatchMouseEvent", "params": click}).typing
    drop = {
        "type": "drop",
        "x": 5,
        "y": 6,
        "data": {"items": [{"mimeType": "text/plain", "data": "pw"}], "dragOperationsMask": 1},
    }
    step = send(state, {"id": 3, "method": "Input.dispatchDragEvent", "params": drop})
    assert step.typing and step.point == (5.0, 6.0)


@pytest.mark.parametrize(
    ("data", "code", "call"),
    [
        ("not json", -32700, None),
        ("[1, 2]", -32600, None),
        ('{"id": "7", "method": "Page.enable"}', -32600, None),
        ('{"id": 7.5, "method": "Page.enable"}', -32600, None),
        ('{"id": true, "method": "Page.enable"}', -32600, None),
        ('{"id": -1, "method": "Page.enable"}', -32600, None),
        ('{"id": 2147483648, "method": "Page.enable"}', -32600, None),
        ('{"id": 7}', -32600, 7),
        ('{"id": 7, "method": ""}', -32600, 7),
        ('{"id": 7, "method": "Target.createTarget", "params": "x"}', -32602, 7),
        ('{"id": 7, "method": "Page.enable", "params": [1]}', -32602, 7),
        ('{"id": 7, "method": "Page.enable", "sessionId": 5}', -32600, 7),
    ],
)
def test_bad_input_gets_an_error_answer_at_once(data: str, code: int, call: int | None) -> None:
    step = core.receive(agent(), data, DOWNLOADS)
    assert step.kind is Kind.INVALID and step.code == code
    answer = step.error_answer()
    assert answer.get("id") == call and answer["error"]["code"] == code
    assert answer["error"]["message"]


def test_the_largest_id_chromium_takes_is_fine() -> None:
    step = send(agent(), {"id": 2**31 - 1, "method": "Page.enable"})
    assert step.kind is Kind.FORWARD


def test_an_id_in_flight_cannot_be_reused() -> None:
    state = agent()
    state.pending[("S", 4)] = Pending(10, "Page.navigate", {})
    step = send(state, {"id": 4, "method": "Page.enable", "sessionId": "S"})
    assert step.kind is Kind.INVALID and "in flight" in step.error
    assert step.error_answer() == {
        "id": 4,
        "error": {"code": -32600, "message": step.error},
        "sessionId": "S",
    }
    assert send(state, {"id": 4, "method": "Page.enable"}).kind is Kind.FORWARD  # other session


def test_blocked_commands_answer_with_their_own_id_and_session() -> None:
    step = send(
        agent(),
        {"id": 9, "method": "Extensions.loadUnpacked", "params": {"path": "/x"}, "sessionId": "S"},
    )
    assert step.kind is Kind.BLOCK and step.verdict is not None
    answer = step.error_answer()
    assert answer["id"] == 9 and answer["sessionId"] == "S" and answer["error"]["code"] == -32000


def test_agentenv_commands_are_for_the_control_token_only() -> None:
    step = send(agent(), {"id": 1, "method": "AgentEnv.beginAction", "params": {}})
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "not-allowed"
    params = {"via": "api", "who": "alice", "op": "input/click", "scope": [3, "tag"]}
    step = send(control(), {"id": 1, "method": "AgentEnv.beginAction", "params": params})
    assert step.kind is Kind.CONTROL and isinstance(step.control, BeginAction)
    assert step.control.scope == [3, "tag"]
    step = send(
        control(), {"id": 2, "method": "AgentEnv.grant", "params": {"who": "a", "tag": "t"}}
    )
    assert isinstance(step.control, TokenGrant)


@pytest.mark.parametrize(
    ("method", "params", "says"),
    [
        ("AgentEnv.nope", {}, "unknown AgentEnv.nope"),
        ("AgentEnv.beginAction", {"via": "pigeon", "who": "a", "op": "x"}, "via"),
        ("AgentEnv.beginAction", {"via": "api", "who": "", "op": "x"}, "who"),
        ("AgentEnv.beginAction", {"via": "api", "who": "a"}, "op or tool"),
        ("AgentEnv.beginAction", {"via": "api", "who": "a\nb", "op": "x"}, "who"),
        ("AgentEnv.beginAction", {"via": "api", "who": "a", "op": "x", "scope": [True]}, "scope"),
        ("AgentEnv.beginAction", {"via": "api", "who": "a", "op": "x", "extra": 1}, "extra"),
        ("AgentEnv.endAction", {"entry": "1", "ok": True}, "entry"),
        ("AgentEnv.reset", {}, "reason"),
    ],
)
def test_control_params_are_checked(method: str, params: dict[str, Any], says: str) -> None:
    step = send(control(), {"id": 5, "method": method, "params": params})
    assert step.kind is Kind.CONTROL and step.control is None and says in step.error
    assert step.error_answer()["id"] == 5


def test_a_closed_session_refuses_commands() -> None:
    state = agent()
    state.sessions["UI"] = SessionInfo("T", web=False)
    step = send(state, {"id": 1, "method": "Runtime.evaluate", "params": {}, "sessionId": "UI"})
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "not-a-web-target"


def _attached(session: str, kind: str, url: str, parent: str | None = None) -> str:
    message: dict[str, Any] = {
        "method": "Target.attachedToTarget",
        "params": {
            "sessionId": session,
            "targetInfo": {"targetId": f"T-{session}", "type": kind, "url": url},
            "waitingForDebugger": True,
        },
    }
    if parent:
        message["sessionId"] = parent
    return orjson.dumps(message).decode()


def test_attaches_to_the_browsers_own_ui_are_detached_unseen() -> None:
    state = agent()
    down = core.from_upstream(state, _attached("S1", "page", "https://a.b/"))
    assert down.kind is Down.PASS and state.sessions["S1"].tab == "T-S1"
    down = core.from_upstream(state, _attached("S2", "iframe", "https://c.d/", parent="S1"))
    assert down.kind is Down.PASS and state.sessions["S2"].tab == "T-S1"
    down = core.from_upstream(
        state, _attached("S3", "browser_ui", "chrome://omnibox-popup.top-chrome/", "S1")
    )
    assert down.kind is Down.DETACH and down.session == "S3" and down.parent == "S1"
    assert not state.sessions["S3"].web
    detached: dict[str, Any] = {
        "method": "Target.detachedFromTarget",
        "params": {"sessionId": "S3"},
    }
    assert core.from_upstream(state, json.dumps(detached, separators=(",", ":"))).kind is Down.DROP
    assert "S3" not in state.sessions
    detached["params"]["sessionId"] = "S1"
    assert core.from_upstream(state, json.dumps(detached, separators=(",", ":"))).kind is Down.PASS


def test_answers_end_their_commands_and_the_relays_own_never_pass() -> None:
    state = agent()
    state.pending[(None, 3)] = Pending(11, "Target.createTarget", {"url": "about:blank"})
    down = core.from_upstream(state, '{"id":3,"result":{"targetId":"NEW"}}')
    assert down.kind is Down.PASS and down.pending is not None and down.opened == "NEW"
    own = state.own_id()
    assert own < 0
    assert core.from_upstream(state, f'{{"id":{own},"result":{{}}}}').kind is Down.DROP
    state.pending[("S", 4)] = Pending(12, "Page.navigate", {})
    down = core.from_upstream(
        state, '{"id":4,"error":{"code":-32000,"message":"No such frame"},"sessionId":"S"}'
    )
    assert down.pending is not None and not down.ok and down.error == "No such frame"
    state.pending[(None, 5)] = Pending(13, "Browser.setDownloadBehavior", {})
    core.from_upstream(state, '{"id":5,"result":{}}')
    assert state.downloads_changed


def test_answers_go_first_unless_the_relay_must_read_them_first() -> None:
    """An answer reaches the client before the relay reads it, except one
    that names a new session, a new tab or a downloads folder: the client's
    next command may depend on the relay having read it."""
    state = agent()
    answer = '{"id":3,"result":{}}'
    assert core.answer_first(state, answer)  # nothing waits: it only passes
    state.pending[("S", 3)] = Pending(11, "Runtime.evaluate", {"expression": "1"})
    assert core.answer_first(state, answer)
    assert not core.answer_first(state, '{"method":"Page.frameStartedLoading","params":{}}')
    assert not core.answer_first(state, f'{{"id":{state.own_id()},"result":{{}}}}')
    read_first = (
        "Target.attachToTarget",
        "Target.attachToBrowserTarget",
        "Target.createTarget",
        "Browser.setDownloadBehavior",
        "Page.setDownloadBehavior",
        # Kept to the sender's scope before it has them.
        "Browser.getWindowForTarget",
        "Target.getTargets",
        "Target.getBrowserContexts",
        "Target.createBrowserContext",
    )
    assert set(read_first) == core.READ_FIRST
    for method in read_first:
        state.pending[(None, 4)] = Pending(12, method, {})
        assert not core.answer_first(state, answer), method
    del state.pending[(None, 4)]
    assert core.answer_first(state, answer)


def test_big_answers_are_not_parsed_when_nothing_waits() -> None:
    state = agent()
    assert (
        core.from_upstream(state, '{"id":1,"result":{"data":"' + "A" * 1000 + '"}}').pending is None
    )


def test_a_big_answer_ends_its_entry_from_its_ends_without_being_parsed() -> None:
    """An answer of 64 KiB or more to a command whose result no rule reads
    is matched by the id at its head and the session at its tail, as
    Chromium writes them (checked on the shipped Chromium): 30 MB of
    ``[],[],…`` parsed was 900 MiB of lists. What lies between its ends is
    not read: here it is no JSON at all, and the entry still ends, its
    session's and no other's."""
    state = agent()
    state.pending[("S", 7)] = Pending(21, "Runtime.evaluate", {"expression": "many"})
    state.pending[(None, 7)] = Pending(22, "Runtime.evaluate", {"expression": "mine"})
    body = "[" + "[],x" * 30000  # not JSON: a parse would refuse it
    down = core.from_upstream(state, '{"id":7,"result":{"v":' + body + '}},"sessionId":"S"}')
    assert down.kind is Down.PASS and down.ok and down.pending is not None
    assert down.pending.entry == 21 and list(state.pending) == [(None, 7)]
    down = core.from_upstream(state, '{"id":7,"result":{"v":' + body + "}}")  # no session
    assert down.pending is not None and down.pending.entry == 22 and not state.pending
    # Big, to a command whose result the rules read: parsed as before.
    state.pending[(None, 8)] = Pending(23, "Target.getTargets", {})
    infos = [{"targetId": f"T{n}", "type": "page", "url": "about:blank"} for n in range(2000)]
    listing = orjson.dumps({"id": 8, "result": {"targetInfos": infos}}).decode()
    assert len(listing) >= 64 * 1024
    down = core.from_upstream(state, listing)
    assert down.pending is not None and down.pending.entry == 23
    assert down.data is not None  # read, and written again (warm contexts left out)


def test_a_detach_ends_the_commands_still_waiting_on_its_session() -> None:
    state = agent()
    state.sessions["S"] = SessionInfo("T")
    state.pending[("S", 1)] = Pending(20, "Runtime.runIfWaitingForDebugger", {})
    state.pending[("S", 2)] = Pending(21, "Page.createIsolatedWorld", {})
    state.pending[(None, 3)] = Pending(22, "Target.getTargets", {})
    detached = '{"method":"Target.detachedFromTarget","params":{"sessionId":"S","targetId":"T"}}'
    down = core.from_upstream(state, detached)
    assert down.kind is Down.PASS and sorted(p.entry for p in down.orphans) == [20, 21]
    assert list(state.pending) == [(None, 3)]


def test_params_nested_too_deep_are_refused_at_once() -> None:
    deep: Any = {"x": 1}
    for _ in range(400):
        deep = {"z": [deep]}
    message = {"id": 9, "method": "Input.dispatchMouseEvent", "params": deep}
    step = send(agent(), message)
    assert step.kind is Kind.INVALID and "deeper than" in step.error and step.call == 9
    shallow: Any = {"x": 1}
    for _ in range(20):
        shallow = {"z": [shallow]}
    assert send(agent(), {"id": 10, "method": "Runtime.evaluate", "params": shallow}).kind is (
        Kind.FORWARD
    )


def test_a_line_that_cannot_be_serialized_is_still_written(tmp_path: Path) -> None:
    """The log's numbering never stops on a line it cannot encode."""
    from agentenv.log.writer import LogWriter

    writer = LogWriter.open(tmp_path / "l.jsonl")
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    first = writer.begin({"via": "cdp", "who": "a", "params": {"z": deep}})
    writer.end(first, True)
    second = writer.begin({"via": "cdp", "who": "a"})
    writer.end(second, True)
    lines = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [x["seq"] for x in lines] == [first, second]
    assert lines[0]["action"]["params"] == {"withheld": "unwritable"}


def _event(method: str, params: dict[str, Any], session: str | None) -> str:
    message: dict[str, Any] = {"method": method, "params": params}
    if session is not None:
        message["sessionId"] = session
    return json.dumps(message, separators=(",", ":"))


def test_a_main_frame_loading_is_heard_for_recordings() -> None:
    state = agent()
    state.sessions["S1"] = SessionInfo("TAB1")
    started = core.from_upstream(
        state, _event("Page.frameStartedLoading", {"frameId": "TAB1"}, "S1")
    )
    assert started.kind is Down.PASS and started.loading == ("TAB1", True)
    stopped = core.from_upstream(
        state, _event("Page.frameStoppedLoading", {"frameId": "TAB1"}, "S1")
    )
    assert stopped.loading == ("TAB1", False)
    # An iframe's loading, a session not known, other Page events: nothing.
    for data in (
        _event("Page.frameStartedLoading", {"frameId": "IFRAME"}, "S1"),
        _event("Page.frameStartedLoading", {"frameId": "TAB1"}, "S9"),
        _event("Page.frameStartedNavigating", {"frameId": "TAB1"}, "S1"),
        '{"method":"Page.frameStartedLoading","params":',
    ):
        down = core.from_upstream(state, data)
        assert down.kind is Down.PASS and down.loading is None, data
    # A page endpoint's connection (no sessions): the page is the tab.
    page = agent()
    page.page = "TAB2"
    down = core.from_upstream(page, _event("Page.frameStartedLoading", {"frameId": "TAB2"}, None))
    assert down.loading == ("TAB2", True)


def test_only_a_refusal_for_a_tab_type_target_asks_for_its_page() -> None:
    kinds = {"TAB-1": ("tab", "about:blank"), "PAGE-1": ("page", "about:blank")}
    state = ClientState(7, Identity("alice"), known=known(kinds=kinds))
    close = {"id": 1, "method": "Target.closeTarget", "params": {"targetId": "TAB-1"}}
    step = core.receive(state, json.dumps(close), DOWNLOADS, kinds.get)
    assert step.kind is Kind.BLOCK and core.tab_page_wanted(step) == "TAB-1"
    page = {**close, "params": {"targetId": "PAGE-1"}}
    assert core.tab_page_wanted(core.receive(state, json.dumps(page), DOWNLOADS, kinds.get)) is None
    other = {"id": 2, "method": "Target.attachToTarget", "params": {"targetId": "TAB-1"}}
    assert (
        core.tab_page_wanted(core.receive(state, json.dumps(other), DOWNLOADS, kinds.get)) is None
    )


def test_a_tab_type_targets_id_is_sent_as_its_pages() -> None:
    """chromedriver's window handles are tab-type ids: once the watcher found
    a tab's page, activating or closing it by the tab's id is sent for the
    page (the log and the tabs name the page); unknown, it is refused."""
    pages = {"TAB-1": "PAGE-1"}
    kinds = {"TAB-1": ("tab", "about:blank"), "TAB-2": ("tab", "about:blank")}
    state = ClientState(7, Identity("alice"), known=known(kinds=kinds, pages=pages))
    for call, method in enumerate(("Target.activateTarget", "Target.closeTarget"), start=1):
        message = {"id": call, "method": method, "params": {"targetId": "TAB-1"}}
        step = core.receive(state, json.dumps(message), DOWNLOADS, kinds.get)
        assert step.kind is Kind.REWRITE and step.verdict is not None, step
        assert step.verdict.rule == "tab-target"
        assert json.loads(step.data)["params"] == {"targetId": "PAGE-1"}
        unknown = {"id": call + 10, "method": method, "params": {"targetId": "TAB-2"}}
        refused = core.receive(state, json.dumps(unknown), DOWNLOADS, kinds.get)
        assert refused.kind is Kind.BLOCK and refused.verdict is not None
        assert refused.verdict.rule == "not-a-web-target"
