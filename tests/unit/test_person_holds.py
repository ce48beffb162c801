"""A person holding a scope: its agents' acting commands wait (issue 44,
item 3; relay/person_holds.py), and only the control token says so."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from agentenv.access import Identity
from agentenv.app.acting import behind_person
from agentenv.app.app_errors import OpError
from agentenv.app.op_browser import Browser
from agentenv.relay import core
from agentenv.relay.core import ClientState, Kind
from agentenv.relay.decision import person_refusal
from agentenv.relay.person_holds import RULE, PersonHolds
from agentenv.scopes import Scope

DOWNLOADS = "/var/lib/agentenv/downloads"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_hold_names_its_person_until_it_runs_out_or_is_let_go() -> None:
    clock = Clock()
    holds = PersonHolds(clock)
    assert holds.holder("shop") is None and holds.holder(None) is None
    holds.hold("shop", "carol", 30)
    assert holds.holder("shop") == ("carol", 30.0)
    assert holds.holder("other") is None  # one scope's hold is its own
    clock.now += 29
    assert holds.holder("shop") == ("carol", 1.0)
    clock.now += 1
    assert holds.holder("shop") is None  # ran out
    holds.hold("shop", "carol", 30)
    holds.hold("shop", "carol", 0)  # handed back
    assert holds.holder("shop") is None


def test_a_wait_ends_when_the_person_lets_go_or_at_its_bound() -> None:
    async def run() -> None:
        holds = PersonHolds()
        assert await holds.wait("shop", 5) is None  # no one holds it: at once
        holds.hold("shop", "carol", 30)
        waiting = asyncio.create_task(holds.wait("shop", 5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        holds.hold("shop", "carol", 0)
        assert await asyncio.wait_for(waiting, 2) is None
        # Still held at the bound: who, and for how long more.
        holds.hold("shop", "carol", 30)
        still = await asyncio.wait_for(holds.wait("shop", 0.1), 2)
        assert still is not None and still[0] == "carol" and 29 < still[1] <= 30

    asyncio.run(run())


def test_the_refusal_past_the_bound_names_who_and_is_on_the_record() -> None:
    scope = Scope("shop", "CTX-SHOP", set())
    state = ClientState(7, Identity("alice"), scope=scope)
    message = {"id": 4, "method": "Input.dispatchMouseEvent", "params": {"type": "mousePressed"}}
    step = core.receive(state, json.dumps(message), DOWNLOADS)
    refused = person_refusal(step, "carol", 12.0, 120.0)
    assert refused.logged and refused.status == 409
    assert refused.guard == {"rule": RULE, "action": "refused"}
    assert refused.answer["id"] == 4
    assert "a person (carol) has control of this scope for 12 s more" in refused.why
    assert "request_human" in refused.why


def test_only_the_control_token_says_a_person_holds_a_scope() -> None:
    hold = {"id": 9, "method": "AgentEnv.holdScope", "params": {"who": "carol", "seconds": 30}}
    agent = ClientState(7, Identity("alice"), scope=Scope("shop", "CTX-SHOP", set()))
    step = core.receive(agent, json.dumps(hold), DOWNLOADS)
    assert step.kind is Kind.BLOCK and step.verdict is not None, step  # refused to an agent
    assert step.verdict.rule == "not-allowed"
    control = ClientState(1, Identity("agentenv", control=True))
    step = core.receive(control, json.dumps(hold), DOWNLOADS)
    assert step.kind is Kind.CONTROL and step.code == 0 and step.control is not None
    bad = {**hold, "params": {"who": "carol", "seconds": -1}}
    assert core.receive(control, json.dumps(bad), DOWNLOADS).code != 0


def test_an_agents_op_waits_behind_the_person_then_is_refused() -> None:
    async def run() -> None:
        browser = Browser(shared=None)  # type: ignore[arg-type]
        await behind_person(browser, "input/click", 1)  # no one drives: at once
        browser.controller = ("carol", time.monotonic() + 30)
        waiting = asyncio.create_task(behind_person(browser, "input/click", 5))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        browser.controller = None  # handed back
        await asyncio.wait_for(waiting, 2)
        browser.controller = ("carol", time.monotonic() + 30)
        try:
            await behind_person(browser, "input/click", 0.1)
        except OpError as exc:
            assert exc.status == 409 and "a person (carol) has control" in exc.message
        else:
            raise AssertionError("an op behind a person past the bound was not refused")

    asyncio.run(run())


def test_an_agent_asks_for_a_person_over_cdp_and_is_never_held(tmp_path: Path) -> None:
    """``AgentEnv.requestHuman``: an agent's own, on any of its sessions; the
    control token's is unknown; the ask is never held behind a person; the
    app writes it as the agent's, ``via: cdp``, for the relay alone."""
    from agentenv.app.caller import caller_of
    from agentenv.log.writer import LogWriter
    from agentenv.protocol.control import AskHuman
    from agentenv.relay.connection import Connection, Person, Ready
    from agentenv.relay.logbook import Logbook

    ask = {"id": 3, "method": "AgentEnv.requestHuman", "params": {"reason": "the code"}}
    agent = ClientState(7, Identity("alice"), scope=Scope("shop", "CTX-SHOP", set()))
    step = core.receive(agent, json.dumps(ask), DOWNLOADS)
    assert step.kind is Kind.CONTROL and step.code == 0, step
    assert step.control == AskHuman(reason="the code", timeout_s=300.0)
    for bad in ({}, {"reason": ""}, {"reason": "x", "timeout_s": 0}, {"reason": "x", "tab": "T"}):
        refused = core.receive(agent, json.dumps({**ask, "params": bad}), DOWNLOADS)
        assert refused.code == -32602 and refused.control is None, bad
    control = ClientState(1, Identity("agentenv", control=True))
    assert core.receive(control, json.dumps(ask), DOWNLOADS).code == -32601

    holds = PersonHolds()
    holds.hold("shop", "carol", 60)
    book = Logbook(LogWriter.open(tmp_path / "browser-t.jsonl"))
    connection = Connection(agent, DOWNLOADS, book, holds)
    assert isinstance(connection.client(json.dumps({**ask, "id": 4})), Ready)
    # Its acting commands are held (the door waits for the person).
    click = {"type": "mousePressed", "x": 1, "y": 1}
    press = {"id": 5, "method": "Input.dispatchMouseEvent", "params": click}
    held = connection.client(json.dumps(press))
    assert type(held) is Person and held == Person("shop")
    control_id = Identity("agentenv", control=True)
    assert caller_of(control_id, "alice", None, users=True, relayed=True).via == "cdp"
    assert caller_of(control_id, "alice", None, users=True, relayed=True).who == "alice"
    # Anyone else's AgentEnv-Via changes nothing.
    assert caller_of(Identity("alice"), None, None, users=True, relayed=True).via == "api"
    assert caller_of(control_id, None, None, users=True, relayed=True).via == "agentenv"
