"""Sessions on the browser target (``Target.attachToBrowserTarget``, how
Playwright opens ``new_cdp_session`` and ``new_browser_cdp_session``): served
exactly as the browser endpoint's own session, in the sender's scope."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from agentenv.access import Identity
from agentenv.relay import core
from agentenv.relay.core import ClientState, Down, Kind, Pending, SessionInfo
from agentenv.relay.pinned import COMMANDS
from agentenv.scopes import Scope
from tests.support.known import known

DOWNLOADS = "/var/lib/agentenv/downloads"
MINE, MADE, THEIRS = "CTX-ALICE", "CTX-ALICE-2", "CTX-BOB"
CONTEXTS = {"T-ALICE": MINE, "T-ALICE-2": MADE, "T-BOB": THEIRS}
#: The browser session's id, as Chromium names it.
B = "B0B5E55"


def _browser_attached(session: str = B, parent: str | None = None) -> dict[str, Any]:
    """Chromium's event for an attach to the browser target (it has no context)."""
    info = {
        "targetId": "8d781616-a457-4739-a1bd-bf621b3635d5",
        "type": "browser",
        "title": "",
        "url": "",
        "attached": True,
        "canAccessOpener": False,
    }
    event: dict[str, Any] = {
        "method": "Target.attachedToTarget",
        "params": {"sessionId": session, "targetInfo": info, "waitingForDebugger": False},
    }
    if parent is not None:
        event["sessionId"] = parent
    return event


def alice(control: bool = False) -> ClientState:
    """Alice's connection to the browser endpoint, with a page session ``S``."""
    if control:
        state = ClientState(1, Identity("agentenv", control=True), known=known(CONTEXTS))
    else:
        scope = Scope("alice", MINE, {MADE})
        state = ClientState(7, Identity("alice"), scope=scope, known=known(CONTEXTS))
    state.sessions["S"] = SessionInfo("T-ALICE")
    return state


def send(
    state: ClientState,
    method: str,
    params: dict[str, Any] | None = None,
    session: str | None = None,
    call: int = 3,
) -> core.Step:
    message: dict[str, Any] = {"id": call, "method": method, "params": params or {}}
    if session is not None:
        message["sessionId"] = session
    return core.receive(state, json.dumps(message), DOWNLOADS)


def upstream(state: ClientState, message: dict[str, Any]) -> core.Downstream:
    return core.from_upstream(state, orjson.dumps(message).decode())


def opened(state: ClientState, parent: str | None = None) -> ClientState:
    """``state`` with a browser session ``B`` opened as Chromium does it: the
    command, Chromium's attach event, then its answer."""
    step = send(state, "Target.attachToBrowserTarget", session=parent, call=90)
    assert step.kind is Kind.FORWARD, step.verdict
    state.pending[(parent, 90)] = Pending(1, step.method, step.params)
    assert upstream(state, _browser_attached(B, parent)).kind is Down.PASS
    answer: dict[str, Any] = {"id": 90, "result": {"sessionId": B}}
    if parent is not None:
        answer["sessionId"] = parent
    assert upstream(state, answer).kind is Down.PASS
    assert state.sessions[B].browser and state.sessions[B].parent == parent
    return state


def test_a_browser_session_is_opened_only_where_the_browsers_own_session_is() -> None:
    state = opened(alice())
    # From a browser session too: it has the browser's own session's powers.
    nested = send(state, "Target.attachToBrowserTarget", session=B, call=91)
    assert nested.kind is Kind.FORWARD
    state.pending[(B, 91)] = Pending(2, nested.method, nested.params)
    assert upstream(state, _browser_attached("B2", B)).kind is Down.PASS
    assert state.sessions["B2"].browser and state.sessions["B2"].parent == B
    # Never from a page's session, nor a page's endpoint.
    step = send(state, "Target.attachToBrowserTarget", session="S")
    assert step.kind is Kind.BLOCK and step.verdict is not None
    assert step.verdict.rule == "not-allowed" and "page" in step.verdict.message
    page = ClientState(8, Identity("alice"), page="T-ALICE", scope=Scope("alice", MINE))
    assert send(page, "Target.attachToBrowserTarget").kind is Kind.BLOCK
    # Nor from a session this connection does not have.
    assert send(state, "Target.attachToBrowserTarget", session="NOPE").kind is Kind.BLOCK


def test_a_browser_target_attach_nobody_asked_for_is_detached() -> None:
    """Only the client's own attachToBrowserTarget makes a browser session:
    any other attach to a target of type browser is detached, as before."""
    state = alice()
    down = upstream(state, _browser_attached("STRAY"))
    assert down.kind is Down.DETACH and down.session == "STRAY"
    assert not state.sessions["STRAY"].web
    assert send(state, "Target.getTargets", session="STRAY").kind is Kind.BLOCK


def _same(root: core.Step, browser: core.Step) -> None:
    assert browser.kind is root.kind, (root.method, root.verdict, browser.verdict)
    if root.verdict is not None:
        assert browser.verdict is not None, root.method
        assert (browser.verdict.rule, browser.verdict.message) == (
            root.verdict.rule,
            root.verdict.message,
        )
    if root.sent:
        sent, forwarded = orjson.loads(root.data), orjson.loads(browser.data)
        assert forwarded.pop("sessionId") == B, root.method
        assert forwarded == sent, root.method
    assert browser.tab == root.tab, root.method


#: Parameters that name what the scope rules read: another scope's, its own.
_NAMING: list[dict[str, Any]] = [
    {},
    {"targetId": "T-BOB", "flatten": True},
    {"targetId": "T-ALICE", "flatten": True},
    {"browserContextId": THEIRS, "url": "about:blank"},
    {"browserContextId": MADE},
    {"url": "file:///etc/passwd"},
    {"windowId": 1},
]


@pytest.mark.parametrize("control", [False, True])
def test_every_command_is_ruled_on_a_browser_session_as_on_the_browsers_own(
    control: bool,
) -> None:
    """Each command of the pinned protocol, with each kind of parameter the
    rules read: the browser session's step is the browser endpoint's own
    (same verdict, same bytes to Chromium but the sessionId), for an agent
    in a scope and for the control token's link."""
    for method in sorted(COMMANDS):
        if method == "Target.attachToBrowserTarget":
            continue  # opens a session (above)
        for params in _NAMING:
            root = send(alice(control), method, params)
            browser = send(opened(alice(control)), method, params, session=B)
            _same(root, browser)


def test_the_scope_rules_hold_on_a_browser_session() -> None:
    state = opened(alice())
    for method in ("Target.attachToTarget", "Target.closeTarget", "Target.getTargetInfo"):
        theirs = send(state, method, {"targetId": "T-BOB", "flatten": True}, session=B)
        assert theirs.kind is Kind.BLOCK and theirs.verdict is not None
        assert theirs.verdict.rule == "scope"
        assert theirs.error_answer() == {
            "id": 3,
            "error": {"code": -32602, "message": "No target with given id found"},
            "sessionId": B,
        }
    made = send(state, "Target.createTarget", {"url": "about:blank"}, session=B)
    assert orjson.loads(made.data)["params"]["browserContextId"] == MINE
    for method, rule in (
        ("Fetch.enable", "browser-wide"),
        ("Network.getAllCookies", "browser-wide"),
        ("Tracing.start", "browser-wide"),
        ("Browser.getBrowserCommandLine", "not-allowed"),
        ("Target.exposeDevToolsProtocol", "not-allowed"),
        ("Extensions.loadUnpacked", "not-allowed"),
    ):
        step = send(state, method, {}, session=B)
        assert step.kind is Kind.BLOCK and step.verdict is not None, method
        assert step.verdict.rule == rule, method


def test_a_browser_sessions_answers_and_events_are_kept_to_the_scope() -> None:
    state = opened(alice())
    state.pending[(B, 4)] = Pending(2, "Target.getTargets", {})
    infos = [
        {"targetId": t, "type": "page", "url": "about:blank", "browserContextId": c}
        for t, c in CONTEXTS.items()
    ]
    down = upstream(state, {"id": 4, "result": {"targetInfos": infos}, "sessionId": B})
    assert down.data is not None
    shown = orjson.loads(down.data)
    assert shown["sessionId"] == B
    assert [i["targetId"] for i in shown["result"]["targetInfos"]] == ["T-ALICE", "T-ALICE-2"]
    state.pending[(B, 5)] = Pending(3, "Target.getBrowserContexts", {})
    down = upstream(
        state,
        {
            "id": 5,
            "result": {"browserContextIds": [MADE, THEIRS], "defaultBrowserContextId": "D"},
            "sessionId": B,
        },
    )
    assert down.data is not None
    assert orjson.loads(down.data)["result"] == {
        "browserContextIds": [MADE],
        "defaultBrowserContextId": MINE,
    }

    def created(target: str, context: str) -> dict[str, Any]:
        info = {"targetId": target, "type": "page", "url": "", "browserContextId": context}
        return {"method": "Target.targetCreated", "params": {"targetInfo": info}, "sessionId": B}

    assert upstream(state, created("T-BOB", THEIRS)).kind is Down.DROP
    assert upstream(state, created("T-ALICE", MINE)).kind is Down.PASS
    # Auto-attach on the browser session: another scope's target is detached
    # there (on the browser session), and one of the scope's is a page's.
    theirs = _browser_attached("X", B)
    theirs["params"]["targetInfo"] = {
        "targetId": "T-BOB",
        "type": "page",
        "url": "https://bob.example/",
        "browserContextId": THEIRS,
    }
    down = upstream(state, theirs)
    assert down.kind is Down.DETACH and down.session == "X" and down.parent == B
    # Detached on the session it was attached on (Chromium's session tree).
    (leave,) = (json.loads(x) for x in down.upstream)
    assert leave["method"] == "Target.detachFromTarget" and leave["sessionId"] == B
    mine = json.loads(json.dumps(theirs))
    mine["params"]["sessionId"] = "C"
    mine["params"]["targetInfo"].update(targetId="T-ALICE", browserContextId=MINE)
    assert upstream(state, mine).kind is Down.PASS
    assert state.sessions["C"].tab == "T-ALICE" and state.sessions["C"].parent == B
    assert send(state, "Runtime.evaluate", {"expression": "1"}, session="C").tab == "T-ALICE"


def test_a_page_session_opened_on_a_browser_session_is_the_pages() -> None:
    """Playwright's new_cdp_session(page): attachToTarget on the browser
    session, then commands on the session it answers."""
    state = opened(alice())
    step = send(state, "Target.attachToTarget", {"targetId": "T-ALICE", "flatten": True}, B, 4)
    assert step.kind is Kind.FORWARD
    state.pending[(B, 4)] = Pending(2, step.method, step.params)
    upstream(state, {"id": 4, "result": {"sessionId": "C"}, "sessionId": B})
    assert state.sessions["C"].tab == "T-ALICE" and state.sessions["C"].parent == B
    evaluate = send(state, "Runtime.evaluate", {"expression": "document.title"}, session="C")
    assert evaluate.kind is Kind.FORWARD and evaluate.tab == "T-ALICE"


def test_detaching_a_browser_session_ends_it_and_every_session_made_through_it() -> None:
    """Chromium ends the sessions attached through a session that detaches
    and says nothing of them: their commands in flight end, and a command
    on one is answered as on any session the connection does not have."""
    state = opened(alice())
    upstream(state, {"id": 4, "result": {"sessionId": "C"}, "sessionId": B})
    state.sessions["C"] = SessionInfo("T-ALICE", parent=B)
    state.sessions["C2"] = SessionInfo("T-ALICE", parent="C")
    state.pending[("C", 6)] = Pending(5, "Runtime.evaluate", {}, "T-ALICE")
    state.pending[("C2", 6)] = Pending(6, "Runtime.evaluate", {}, "T-ALICE")
    state.pending[(None, 7)] = Pending(7, "Browser.getVersion", {})
    detach = send(state, "Target.detachFromTarget", {"sessionId": B})
    assert detach.kind is Kind.FORWARD
    down = upstream(
        state, {"method": "Target.detachedFromTarget", "params": {"sessionId": B, "targetId": "x"}}
    )
    assert down.kind is Down.PASS
    assert sorted(p.entry for p in down.orphans) == [5, 6]
    assert set(state.sessions) == {"S"} and set(state.pending) == {(None, 7)}
    for session in (B, "C", "C2"):
        gone = send(state, "Runtime.evaluate", {"expression": "1"}, session=session)
        assert gone.kind is Kind.INVALID and gone.code == -32001, session


def test_the_control_tokens_browser_session_is_its_own_too() -> None:
    """A link that sees every scope: its browser session is its own session
    too (the relay reads its answer even off the record)."""
    state = opened(alice(control=True))
    assert send(state, "Target.getTargets", session=B).kind is Kind.FORWARD


def test_a_browser_session_sets_no_certificate_setting_of_its_own() -> None:
    """Ignoring certificate errors there is kept to the sender's pages, as on
    the browser's own session, and answered on the browser session."""
    state = opened(alice())
    step = send(state, "Security.setIgnoreCertificateErrors", {"ignore": True}, session=B)
    assert step.kind is Kind.ANSWER and step.session == B
    assert [orjson.loads(c)["sessionId"] for c in step.upstream] == ["S"]
    assert B not in state.certificates_own and B not in state.certificates_told
