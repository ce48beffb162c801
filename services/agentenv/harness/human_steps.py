"""``wait_for_human``: the harness asks a person to step in (issue 44,
item 3), and waits for their word.

The step is ``request_human`` in the agent's scope, made with the control
token (an action entry ``via: agentenv``, its reason and timeout on the
record). It prints where a person takes over: the computer's live view,
opened with the token of a person of that scope (a user of
``role=human``). On scopes opened for the task (harness/scoped.py), the
scope has a person of its own: the address with their token is written,
while the step waits, to ``live-address.txt`` in the task's folder (0600,
removed when the step ends; the token is never printed), and the step
prints that file's path. ``done`` passes the step, with who said it; ``cannot``
fails it (the task failed: the person could not either), as does no word
within ``timeout_s``. A person is not the computer's failing: neither is
infrastructure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv.harness.computer import Computer, ComputerError
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.scoped import ScopedComputer
from agentenv.harness.steps import WaitForHuman
from agentenv.protocol.answers import HumanAnswered
from agentenv.protocol.browser import RequestHuman

__all__ = ["ADDRESS_FILE", "wait_for_human"]

#: What the step waits for the computer's answer beyond its own timeout.
SLACK_S = 30.0
#: ``request_human``'s status when no person answered in time.
NO_ANSWER = 504
#: Where, in the task's folder, a scope's person's address waits.
ADDRESS_FILE = "live-address.txt"


def wait_for_human(
    computer: Computer,
    scope: str | None,
    step: WaitForHuman,
    say: Callable[[str], None],
    out: Path,
) -> dict[str, Any]:
    """Ask, print where a person answers, wait for their word (see the module)."""
    address = computer.live_address(scope) if isinstance(computer, ScopedComputer) else None
    written = out / ADDRESS_FILE
    if address is not None:
        fd = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(address + "\n")
        say(
            f"  waiting at most {step.timeout_s:g} s for a person: the live view's address, "
            f"with this scope's person's token, is in {written}"
        )
    else:
        say(
            f"  waiting at most {step.timeout_s:g} s for a person: open {computer.api}/live "
            "with the token of a person of this scope (role=human in AGENTENV_USERS)"
        )
    try:
        return _wait(computer, scope, step)
    finally:
        if address is not None:
            with contextlib.suppress(OSError):
                written.unlink()


def _wait(computer: Computer, scope: str | None, step: WaitForHuman) -> dict[str, Any]:
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
