"""``wait_for_human``: the harness asks a person to step in (issue 44,
item 3), and waits for their word.

The step is ``request_human`` in the agent's scope, made with the control
token (an action entry ``via: agentenv``, its reason and timeout on the
record). It prints where a person takes over: the computer's live view,
opened with the token of a person of that scope (a user of
``role=human``). ``done`` passes the step, with who said it; ``cannot``
fails it (the task failed: the person could not either), as does no word
within ``timeout_s``. A person is not the computer's failing: neither is
infrastructure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentenv.harness.computer import Computer, ComputerError
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.steps import WaitForHuman
from agentenv.protocol.answers import HumanAnswered
from agentenv.protocol.browser import RequestHuman

__all__ = ["wait_for_human"]

#: What the step waits for the computer's answer beyond its own timeout.
SLACK_S = 30.0
#: ``request_human``'s status when no person answered in time.
NO_ANSWER = 504


def wait_for_human(
    computer: Computer, scope: str | None, step: WaitForHuman, say: Callable[[str], None]
) -> dict[str, Any]:
    """Ask, print where a person answers, wait for their word (see the module)."""
    say(
        f"  waiting at most {step.timeout_s:g} s for a person: open {computer.api}/live "
        "with the token of a person of this scope (role=human in AGENTENV_USERS)"
    )
    try:
        answered: HumanAnswered = computer.op(
            "request_human",
            RequestHuman,
            http_wait_s=step.timeout_s + SLACK_S,
            scope=scope,
            reason=step.reason,
            timeout_s=step.timeout_s,
        )
    except ComputerError as exc:
        if exc.status == NO_ANSWER:  # no person in time: the task's, not the computer's
            raise StepFailed(str(exc)) from None
        raise
    said = {"word": answered.word, "who": answered.who, "note": answered.note}
    if answered.word != "done":
        why = f": {answered.note}" if answered.note else ""
        raise StepFailed(f"{answered.who} (a person) answered {answered.word}{why}")
    return said
