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
from agentenv.relay.client_state import ClientState, SessionInfo
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
from agentenv.relay.decision import CONFLICT, UNAVAILABLE, Own, Refuse, Send
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
