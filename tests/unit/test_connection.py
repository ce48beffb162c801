"""One client's commands read and decided in one place
(:class:`agentenv.relay.connection.Connection`): what it needs to learn
first, what it learns, and the decision both doors carry out. A real
logbook on ``tmp_path`` answers what only the log knows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.access import Identity
from agentenv.log.writer import LogWriter
from agentenv.protocol.control import BeginAction
from agentenv.relay.client_state import ClientState, Pending, SessionInfo
from agentenv.relay.connection import (
    Connection,
    Looked,
    Need,
    Person,
    PersonLeft,
    PersonStayed,
    Read,
    Ready,
    TabPage,
    World,
    WorldDone,
)
from agentenv.relay.core import begin_of
from agentenv.relay.decision import CONFLICT, UNAVAILABLE, Own, Refuse, Send
from agentenv.relay.downstream import Down, Downstream
from agentenv.relay.known import PageOfTab
from agentenv.relay.logbook import Logbook
from agentenv.relay.person_holds import RULE, PersonHolds
from agentenv.relay.worlds import RelayWorlds
from agentenv.scopes import Scope
from tests.support.known import known

DOWNLOADS = "/var/lib/agentenv/downloads"
CONTROL = Identity("agentenv", control=True)
SHOP = Scope("shop", "CTX-SHOP", set())
PRESS = {"type": "mousePressed", "x": 1, "y": 1}


def _book(tmp_path: Path, name: str = "t") -> Logbook:
    return Logbook(LogWriter.open(tmp_path / f"browser-{name}.jsonl"))


def _is(read: Read, need: Need) -> bool:
    """``read`` is exactly ``need``: NamedTuples of one shape compare equal
    across types (``World("x") == Person("x")``), so the type is asked too."""
    return type(read) is type(need) and read == need


def _data(call: int, method: str, params: dict[str, Any], session: str | None = None) -> str:
    message: dict[str, Any] = {"id": call, "method": method, "params": params}
    if session is not None:
        message["sessionId"] = session
    return json.dumps(message)


def test_a_tab_type_targets_page_is_found_then_the_command_is_read_again(tmp_path: Path) -> None:
    """chromedriver closes a window by its tab-type id: the rules ask for its
    page once, and read the command again with what the watcher learned."""
    kinds = {"TAB-1": ("tab", "about:blank"), "PAGE-1": ("page", "about:blank")}
    state = ClientState(7, Identity("alice"), known=known(kinds=kinds))
    connection = Connection(state, DOWNLOADS, _book(tmp_path))
    close = _data(1, "Target.closeTarget", {"targetId": "TAB-1"})
    assert _is(connection.client(close), TabPage("TAB-1"))
    state.known.learn(PageOfTab("TAB-1", "PAGE-1"))  # what the watcher found
    read = connection.learn(Looked())
    assert isinstance(read, Ready) and read.decision == Send(
        {"rule": "tab-target", "action": "rewritten"}
    )
    assert json.loads(read.step.data)["params"] == {"targetId": "PAGE-1"}
    # Found nothing: refused as before, not asked again.
    other = ClientState(8, Identity("alice"), known=known(kinds=kinds))
    connection = Connection(other, DOWNLOADS, _book(tmp_path, "other"))
    assert _is(connection.client(close), TabPage("TAB-1"))
    read = connection.learn(Looked())
    assert isinstance(read, Ready) and isinstance(read.decision, Refuse)
    assert read.decision.guard == {"rule": "not-a-web-target", "action": "blocked"}


def test_a_command_naming_a_context_waits_for_the_relays_world(tmp_path: Path) -> None:
    worlds = RelayWorlds()
    state = ClientState(7, Identity("alice"), worlds=worlds)
    state.sessions["S"] = SessionInfo("TAB1")
    worlds.begin("TAB1")
    connection = Connection(state, DOWNLOADS, _book(tmp_path))
    evaluate = {"expression": "1", "contextId": 9}
    assert _is(connection.client(_data(1, "Runtime.evaluate", evaluate, "S")), World("TAB1"))
    worlds.made("TAB1", 9)
    read = connection.learn(WorldDone())
    assert isinstance(read, Ready) and isinstance(read.decision, Refuse)
    assert read.decision.guard is not None and read.decision.guard["rule"] == "relay-world"
    plain = connection.client(_data(2, "Runtime.evaluate", {"expression": "1"}, "S"))
    assert isinstance(plain, Ready) and plain.decision == Send()


def test_a_command_read_again_once_the_world_is_made_then_waits_for_the_person(
    tmp_path: Path,
) -> None:
    """Both waits, in order: what the person's wait decides is the command as
    read again once the world was made (no longer held)."""
    worlds = RelayWorlds()
    holds = PersonHolds()
    holds.hold("shop", "carol", 60)
    state = ClientState(7, Identity("alice"), worlds=worlds, scope=SHOP)
    state.sessions["S"] = SessionInfo("TAB1")
    worlds.begin("TAB1")
    connection = Connection(state, DOWNLOADS, _book(tmp_path), holds)
    evaluate = {"expression": "1", "contextId": 5}
    assert _is(connection.client(_data(1, "Runtime.evaluate", evaluate, "S")), World("TAB1"))
    worlds.made("TAB1", 9)  # not the context it names: it goes on
    assert _is(connection.learn(WorldDone()), Person("shop"))
    read = connection.learn(PersonLeft())
    assert isinstance(read, Ready) and read.decision == Send() and not read.step.hold


@pytest.mark.parametrize("person", ["left", "stayed"])
def test_an_agents_act_in_a_scope_a_person_drives_waits_for_them(
    tmp_path: Path, person: str
) -> None:
    holds = PersonHolds()
    holds.hold("shop", "carol", 60)
    state = ClientState(7, Identity("alice"), scope=SHOP)
    state.sessions["S"] = SessionInfo("T")
    connection = Connection(state, DOWNLOADS, _book(tmp_path), holds)
    # Reading goes on meanwhile; the control token's commands are never held.
    assert isinstance(connection.client(_data(1, "DOM.getDocument", {}, "S")), Ready)
    assert _is(connection.client(_data(2, "Input.dispatchMouseEvent", PRESS, "S")), Person("shop"))
    if person == "left":
        read = connection.learn(PersonLeft())
        assert isinstance(read, Ready) and read.decision == Send()
        return
    read = connection.learn(PersonStayed("carol", 12.0, 30.0))
    assert isinstance(read, Ready) and isinstance(read.decision, Refuse)
    refused = read.decision
    assert refused.logged and refused.status == CONFLICT
    assert refused.guard == {"rule": RULE, "action": "refused"}
    assert "a person (carol) has control" in refused.why
    assert refused.answer["id"] == 2 and refused.answer["sessionId"] == "S"
    control_state = ClientState(8, CONTROL, scope=SHOP)
    control = Connection(control_state, DOWNLOADS, _book(tmp_path, "control"), holds)
    assert isinstance(control.client(_data(1, "Input.dispatchMouseEvent", PRESS)), Ready)


def test_the_control_tokens_command_is_its_own_outside_an_action_never_over_http(
    tmp_path: Path,
) -> None:
    book = _book(tmp_path)
    connection = Connection(ClientState(9, CONTROL), DOWNLOADS, book)
    read = connection.client(_data(1, "DOM.getDocument", {}))
    assert isinstance(read, Ready) and read.decision == Own()
    read = connection.http("Target.createTarget", {"url": "about:blank"})
    assert isinstance(read, Ready) and read.decision == Send()
    book.begin_action(1, BeginAction(via="mcp", who="bob", tool="browser_click", scope=[9]))
    read = connection.client(_data(2, "DOM.getDocument", {}))
    assert isinstance(read, Ready) and read.decision == Send()  # the action's: on the record


def test_a_full_log_refuses_an_agents_command_with_no_entry(tmp_path: Path) -> None:
    book = _book(tmp_path)
    book.max_bytes = 0
    agent = Connection(ClientState(7, Identity("alice")), DOWNLOADS, book)
    for read in (
        agent.client(_data(1, "DOM.getDocument", {})),
        agent.http("Target.createTarget", {}),
    ):
        assert isinstance(read, Ready) and isinstance(read.decision, Refuse)
        assert not read.decision.logged and read.decision.status == UNAVAILABLE
    # The computer's own goes on (its bookkeeping is never refused).
    control = Connection(ClientState(9, CONTROL), DOWNLOADS, book)
    read = control.http("Target.createTarget", {"url": "about:blank"})
    assert isinstance(read, Ready) and read.decision == Send()


def test_learning_with_no_need_is_a_mistake_of_the_door(tmp_path: Path) -> None:
    connection = Connection(ClientState(7, Identity("alice")), DOWNLOADS, _book(tmp_path))
    assert isinstance(connection.client(_data(1, "DOM.getDocument", {})), Ready)
    with pytest.raises(AssertionError, match="answers a Need"):
        connection.learn(Looked())


def test_a_command_read_is_never_changed_after(tmp_path: Path) -> None:
    """A rule that reads a command again makes a new Step (``world_made``,
    a failure where the relay ran it): the one a door holds stays as read."""
    connection = Connection(ClientState(7, Identity("alice")), DOWNLOADS, _book(tmp_path))
    read = connection.client(_data(1, "DOM.getDocument", {}))
    assert isinstance(read, Ready)
    with pytest.raises(AttributeError):
        read.step.kind = read.step.kind  # type: ignore[misc]
    failed = read.step.failed(-32000, "no")
    assert failed.error_answer() == {"id": 1, "error": {"code": -32000, "message": "no"}}
    assert read.step.error == "" and read.step.code == 0


def _opened_tab(tmp_path: Path, params: dict[str, Any]) -> tuple[Connection, Downstream]:
    """A ``Target.createTarget`` with ``params`` sent and answered TAB-9."""
    state = ClientState(7, Identity("alice"))
    book = _book(tmp_path)
    connection = Connection(state, DOWNLOADS, book)
    read = connection.client(_data(4, "Target.createTarget", params))
    assert isinstance(read, Ready) and isinstance(read.decision, Send)
    entry = book.begin(begin_of(state, read.step, None))
    state.pending[(None, 4)] = Pending(entry, read.step.method, read.step.params, None, True)
    answer = json.dumps({"id": 4, "result": {"targetId": "TAB-9"}}, separators=(",", ":"))
    assert not connection.answer_first(answer)  # a new tab: read before the client has it
    return connection, connection.chromium(answer)


def test_a_tab_type_target_opened_ends_its_entry_once_its_page_is_known(tmp_path: Path) -> None:
    """``createTarget{forTab}`` (chromedriver's new window) answers with a
    tab-type target: the rules say its page must be found before the entry
    ends (``page_of``), and the page found becomes what the entry opened."""
    connection, down = _opened_tab(tmp_path, {"url": "about:blank", "forTab": True})
    assert down.kind is Down.PASS and down.page_of == "TAB-9" and down.opened == "TAB-9"
    assert down.pending is not None and down.ok
    found = connection.page_found(down, "PAGE-9")
    assert found.opened == "PAGE-9" and found.page_of is None
    assert found.pending is down.pending and {"TAB-9", "PAGE-9"} <= connection.state.visible
    assert down.opened == "TAB-9" and down.page_of == "TAB-9"  # the first, as read
    # Not found in time: the entry ends naming no tab, none more is shown.
    connection, down = _opened_tab(tmp_path / "none", {"url": "about:blank", "forTab": True})
    lost = connection.page_found(down, None)
    assert lost.opened is None and lost.page_of is None
    assert connection.state.visible == {"TAB-9"}
    # A page target: its entry ends at once with it.
    connection, down = _opened_tab(tmp_path / "page", {"url": "about:blank"})
    assert down.page_of is None and down.opened == "TAB-9"


def test_what_chromium_said_is_never_changed_after(tmp_path: Path) -> None:
    """A Downstream is made once, as a Step is: a rule that learns more makes
    a new one (``page_found``)."""
    _, down = _opened_tab(tmp_path, {"url": "about:blank", "forTab": True})
    with pytest.raises(AttributeError):
        down.opened = "PAGE-9"  # type: ignore[misc]
    assert isinstance(down.upstream, tuple) and isinstance(down.orphans, tuple)


LISTED = [
    {"id": "T-SHOP", "type": "page", "url": "https://shop.test/"},
    {"id": "T-OTHER", "type": "page", "url": "https://other.test/"},
    {"id": "T-UI", "type": "page", "url": "chrome://settings/"},
]


def test_a_page_endpoint_is_judged_by_the_connections_rules(tmp_path: Path) -> None:
    """``/devtools/page/<id>`` is decided before the upgrade by the
    Connection that then serves it: another scope's or an unlisted page is
    404 and off the record; a page that is not web content is 403, on the
    record under the connection's own number."""
    contexts = {"T-SHOP": "CTX-SHOP", "T-OTHER": "CTX-OTHER", "T-UI": "CTX-SHOP"}
    state = ClientState(12, Identity("alice"), "run-3", scope=SHOP, known=known(contexts))
    book = _book(tmp_path)
    connection = Connection(state, DOWNLOADS, book)
    assert connection.page("T-SHOP", LISTED) is None
    for target in ("T-OTHER", "T-NONE"):
        refused = connection.page(target, LISTED)
        assert refused is not None
        _, refusal = refused
        assert (refusal.status, refusal.logged, refusal.guard) == (404, False, None)
        assert refusal.why.startswith(f"no page '{target}'")
    assert connection.page("T-SHOP", "not a list") is not None  # Chromium said nothing readable
    refused = connection.page("T-UI", LISTED)
    assert refused is not None
    step, refusal = refused
    assert (refusal.status, refusal.logged) == (403, True)
    assert refusal.guard is not None and refusal.guard["rule"] == "not-a-web-target"
    book.end_refused(book.begin(begin_of(state, step)), refusal.why, refusal.guard)
    (line,) = [json.loads(x) for x in (tmp_path / "browser-t.jsonl").read_text().splitlines()]
    assert (line["action"]["conn"], line["action"]["method"], line["action"]["tab"]) == (
        12,
        "Target.attachToTarget",
        "T-UI",
    )
    assert line["action"]["ok"] is False and line["action"]["scope"] == "shop"
    assert line["action"]["guard"]["rule"] == "not-a-web-target"
