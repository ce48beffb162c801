"""How the app answers what the browser link raised (app/errors.failure): by
the guard's rule and the CDP error code, never by words in the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.app.app_errors import OpError, failure
from agentenv.log.writer import LogWriter
from agentenv.protocol.error_body import guard_rule
from agentenv.relay import guard
from agentenv.relay.log_budget import LogBudget
from agentenv.relay.logbook import Logbook
from agentenv.relay_link import BrowserError, CdpError


def test_every_guard_refusal_the_relay_writes_names_its_rule() -> None:
    refused = guard.check_url("file:///etc/passwd")
    assert refused is not None and guard_rule(refused.message) == refused.rule == "local-url"
    prefixed = f"AgentEnv.beginAction: {refused.message}"
    assert guard_rule(prefixed) == "local-url"
    assert guard_rule("No target with given id found") is None
    # A page's text that merely mentions the guard is not a refusal.
    assert guard_rule("Uncaught: blocked by agentenv guard local-url: x") is None


def test_a_spent_log_share_is_429_and_another_refusal_403(tmp_path: Path) -> None:
    book = Logbook(LogWriter.open(tmp_path / "log.jsonl"), budget=LogBudget(1))
    entry = book.writer.begin({"via": "cdp", "who": "alice", "method": "Input.insertText"})
    book.writer.end(entry, True)
    spent = book.over_budget("alice")
    assert spent is not None and guard_rule(spent) == "log-budget"
    answer = failure(CdpError("AgentEnv.beginAction", f"AgentEnv.beginAction: {spent}", -32000))
    assert (answer.status, answer.message) == (429, spent)
    refused = guard.check_url("chrome://settings")
    assert refused is not None
    answer = failure(CdpError("Page.navigate", refused.message, refused.code))
    assert (answer.status, answer.message) == (403, refused.message)


@pytest.mark.parametrize("method", ["Target.activateTarget", "Target.closeTarget"])
def test_a_tab_that_is_gone_is_404(method: str) -> None:
    answer = failure(CdpError(method, "No target with given id found", -32602))
    assert answer.status == 404 and "tabs/list" in answer.message


def test_what_else_chromium_refuses_is_502_naming_the_command() -> None:
    answer = failure(CdpError("Page.navigate", "Cannot navigate to invalid URL", -32000))
    assert (answer.status, answer.message) == (
        502,
        "Chromium refused Page.navigate: Cannot navigate to invalid URL",
    )
    # Invalid params of a command that takes more than a target's id: not a gone tab.
    assert failure(CdpError("Input.dispatchKeyEvent", "Invalid parameters", -32602)).status == 502
    assert failure(BrowserError("the relay connection closed")).status == 503
    given = OpError(409, "busy")
    assert failure(given) is given


def test_a_refusal_of_the_relays_own_is_never_chromiums(tmp_path: Path) -> None:
    """The log full was answered 502 "Chromium refused AgentEnv.beginAction"
    (4th red team): it is the relay's own refusal, rule log-full, 503 as the
    relay's HTTP commands answer it; memory is 503 too (retry), and any other
    AgentEnv.* error is the relay's, never Chromium's."""
    book = Logbook(LogWriter.open(tmp_path / "log.jsonl"), max_bytes=1)
    full = book.full_message()
    assert guard_rule(full) == "log-full" and "AGENTENV_LOG_MAX_BYTES=1" in full
    answer = failure(CdpError("AgentEnv.beginAction", f"AgentEnv.beginAction: {full}", -32602))
    assert (answer.status, answer.message) == (503, full)
    memory = "blocked by agentenv guard memory: alice's messages being handled would pass 1"
    assert failure(CdpError("Runtime.evaluate", memory, -32000)).status == 503
    lost = "AgentEnv.endAction: entry is not an open action (was the relay restarted?)"
    answer = failure(CdpError("AgentEnv.endAction", lost, -32602))
    assert answer.status == 503 and "Chromium" not in answer.message, answer.message
    assert answer.message.startswith("the computer's relay refused AgentEnv.endAction: entry")
