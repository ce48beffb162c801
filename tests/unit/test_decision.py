"""What becomes of a command the core read, for both doors (relay/decision.py):
real steps from ``core.receive``, each branch and their order."""

from __future__ import annotations

import json
from typing import Any

from agentenv.access import Identity
from agentenv.relay import core
from agentenv.relay.core import ClientState, Kind, SessionInfo
from agentenv.relay.decision import (
    AgentEnvCommand,
    Answered,
    Own,
    Refuse,
    Send,
    decide,
)
from agentenv.scopes import Scope
from tests.support.known import known

DOWNLOADS = "/var/lib/agentenv/downloads"
FULL = (True, "refused by agentenv guard log-full: the action log is full")
SPENT = (False, "refused by agentenv guard log-budget: alice's share is spent")


def _agent() -> ClientState:
    scope = Scope("alice", "CTX-ALICE", set())
    return ClientState(7, Identity("alice"), scope=scope, known=known({"T-BOB": "CTX-BOB"}))


def _control() -> ClientState:
    return ClientState(1, Identity("agentenv", control=True))


def _step(state: ClientState, message: Any) -> core.Step:
    data = message if isinstance(message, str) else json.dumps(message)
    return core.receive(state, data, DOWNLOADS)


EVALUATE = {"id": 4, "method": "Runtime.evaluate", "params": {"expression": "1"}}
OTHER_SCOPE = {"id": 5, "method": "Target.closeTarget", "params": {"targetId": "T-BOB"}}
REFUSED = {"id": 6, "method": "Browser.close"}


def test_a_command_on_the_record_is_sent() -> None:
    assert decide(_step(_agent(), EVALUATE), False, None) == Send()


def test_the_log_full_or_a_share_spent_refuses_before_anything_else_with_no_entry() -> None:
    for room, status in ((FULL, 503), (SPENT, 429)):
        for message in (EVALUATE, REFUSED, "not json"):
            decision = decide(_step(_agent(), message), False, room)
            assert isinstance(decision, Refuse), (message, decision)
            assert not decision.logged and decision.guard is None and decision.status == status
            assert decision.answer["error"] == {"code": -32000, "message": room[1]}


def test_an_invalid_command_is_on_the_record_even_from_the_computers_own_link() -> None:
    for state, own in ((_agent(), False), (_control(), True)):
        decision = decide(_step(state, {"id": 1}), own, None)
        assert isinstance(decision, Refuse) and decision.logged and decision.status == 400
        assert decision.guard is None and "method" in decision.why


def test_a_guard_refusal_is_on_the_record_with_its_rule_unless_the_computers_own() -> None:
    step = _step(_agent(), REFUSED)
    assert step.kind is Kind.BLOCK
    decision = decide(step, False, None)
    assert isinstance(decision, Refuse) and decision.logged and decision.status == 403
    assert decision.guard == {"rule": "not-allowed", "action": "blocked"}
    assert decision.answer["id"] == 6 and decision.answer["error"]["message"]
    own = decide(_step(_control(), REFUSED), True, None)
    assert isinstance(own, Refuse) and not own.logged and own.guard is None


def test_another_scopes_target_is_not_found_to_an_http_command() -> None:
    decision = decide(_step(_agent(), OTHER_SCOPE), False, None)
    assert isinstance(decision, Refuse) and decision.status == 404
    assert decision.guard == {"rule": "scope", "action": "blocked"}


def test_agentenv_commands_go_to_the_relay_and_an_agents_fill_meets_the_logs_bounds() -> None:
    step = _step(_control(), {"id": 2, "method": "AgentEnv.endAction", "params": {}})
    assert step.kind is Kind.CONTROL
    assert decide(step, False, None) == AgentEnvCommand()
    agent = _agent()
    agent.sessions["S"] = SessionInfo("T-ALICE")
    fill = {"id": 3, "method": "AgentEnv.fillCredential", "sessionId": "S"}
    step = _step(agent, {**fill, "params": {"name": "bank", "field": "password"}})
    assert step.kind is Kind.CONTROL and step.control is not None, step
    assert decide(step, False, None) == AgentEnvCommand()
    refused = decide(step, False, SPENT)
    assert isinstance(refused, Refuse) and refused.status == 429 and not refused.logged


def test_the_computers_own_command_is_sent_off_the_record() -> None:
    assert decide(_step(_control(), EVALUATE), True, None) == Own()


def test_a_command_the_relay_answers_is_on_the_record() -> None:
    state = ClientState(7, Identity("alice"), scope=Scope("alice", "CTX-ALICE", set()))
    message = {"id": 8, "method": "Security.setIgnoreCertificateErrors", "params": {"ignore": True}}
    step = _step(state, message)
    assert step.kind is Kind.ANSWER
    assert decide(step, False, None) == Answered()


def test_a_rewritten_command_is_sent_with_the_guards_mark() -> None:
    params = {"behavior": "allow", "downloadPath": "/etc"}
    message = {"id": 9, "method": "Page.setDownloadBehavior", "params": params}
    step = _step(ClientState(7, Identity("alice")), message)
    assert step.kind is Kind.REWRITE, step
    assert decide(step, False, None) == Send({"rule": "download-folder", "action": "rewritten"})
