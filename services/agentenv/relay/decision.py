"""What becomes of one command the core has read, for every door that takes
commands: a CDP connection (:mod:`agentenv.relay.proxy`) and the relay's
HTTP commands (:mod:`agentenv.relay.http_commands`). No I/O.

:func:`decide` reads the core's :class:`~agentenv.relay.core.Step` with two
facts the door holds: whether the command is the computer's own (the control
token's, outside any action: off the record), and the log's room for its
sender (:meth:`agentenv.relay.logbook.Logbook.log_refusal`: the log full, or
the sender's share of it spent). It returns one frozen value:

- :class:`Refuse`: nothing is sent. The error the client gets, the words and
  guard mark its entry ends with, whether it has an entry at all, and the
  HTTP status an HTTP command answers it with. This is the one place that
  says how a refusal is answered and recorded, whichever door it came in by
  (:meth:`agentenv.relay.logbook.Logbook.end_refused` writes it).
- :class:`AgentEnvCommand`: an ``AgentEnv.*`` command, run by the relay.
- :class:`Own`: the computer's own command, sent off the record.
- :class:`Answered`: answered by the relay, its effect carried out by the relay's
  own commands (:attr:`~agentenv.relay.core.Step.upstream`), on the record.
- :class:`Send`: sent to Chromium as the core wrote it, on the record,
  with the guard's mark when the guard rewrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentenv.relay.core import Kind, Step

#: The guard's rule of an agent's acting command refused after waiting its
#: bound behind a person (relay/person_holds.py).
PERSON_RULE = "person-has-control"

__all__ = [
    "BAD_REQUEST",
    "NOT_FOUND",
    "AgentEnvCommand",
    "Answered",
    "Decision",
    "Own",
    "Refuse",
    "Send",
    "decide",
    "page_refusal",
    "person_refusal",
]

#: HTTP statuses of a refused HTTP command.
BAD_REQUEST, FORBIDDEN, NOT_FOUND, CONFLICT, TOO_MANY, UNAVAILABLE = 400, 403, 404, 409, 429, 503


@dataclass(frozen=True, slots=True)
class Refuse:
    """The command is refused; nothing reaches Chromium."""

    #: The CDP error answer.
    answer: dict[str, Any]
    #: The entry's error (a guard's refusal: its message, which may differ
    #: from what the client is told).
    why: str
    #: The guard's rule and action, for the entry and the counts (None: not
    #: the guard's: an invalid command, or the log's bound).
    guard: dict[str, str] | None
    #: It has an entry of its own, begun and ended at once. The log's bound
    #: has none (its refusal is a line of the computer's own), nor has the
    #: computer's own command refused off the record.
    logged: bool
    #: What an HTTP command answers: 400 not a command, 403 the guard's,
    #: 404 another scope's target (as one that does not exist), 409 a
    #: person holds the scope (relay/person_holds.py), 429 the
    #: sender's share of the log spent, 503 the log full.
    status: int


@dataclass(frozen=True, slots=True)
class AgentEnvCommand:
    """An ``AgentEnv.*`` command of the control token's."""


@dataclass(frozen=True, slots=True)
class Own:
    """The computer's own command, outside any action: off the record."""


@dataclass(frozen=True, slots=True)
class Answered:
    """Answered by the relay, on the record."""


@dataclass(frozen=True, slots=True)
class Send:
    """Sent to Chromium, on the record."""

    #: The guard's mark for the entry when it rewrote the command.
    guarded: dict[str, str] | None = None


Decision = Refuse | AgentEnvCommand | Own | Answered | Send


def decide(step: Step, own: bool, room: tuple[bool, str] | None) -> Decision:
    """What becomes of ``step`` (see the module). ``own``: the computer's own
    command; ``room``: why its sender may not write to the log now, ``(True,
    why)`` when the log is full (None: it may). The log's bound comes first,
    an agent's ``AgentEnv.fillCredential`` too (its fill is an entry); a door
    asks it for no control token's ``AgentEnv.*`` command (the computer's
    own reports, never refused for the log)."""
    if room is not None:
        full, why = room
        answer = _error(step, -32000, why)
        return Refuse(answer, why, None, False, UNAVAILABLE if full else TOO_MANY)
    if step.kind is Kind.CONTROL:
        return AgentEnvCommand()
    if step.kind is Kind.INVALID:
        # On the record even from the computer's own link: it is not a command.
        return Refuse(step.error_answer(), step.error, None, True, BAD_REQUEST)
    verdict = step.verdict
    if step.kind is Kind.BLOCK:
        assert verdict is not None
        status = NOT_FOUND if verdict.rule == "scope" else FORBIDDEN
        if own:
            return Refuse(step.error_answer(), verdict.message, None, False, status)
        return Refuse(step.error_answer(), verdict.message, verdict.as_entry(), True, status)
    if own:
        return Own()
    if step.kind is Kind.ANSWER:
        return Answered()
    if step.kind is Kind.REWRITE and verdict is not None:
        return Send(verdict.as_entry())
    return Send()


def page_refusal(step: Step) -> Refuse:
    """``/devtools/page/<id>`` refused (``step``: a BLOCK of the attach it
    stands for, with :func:`agentenv.relay.scope_rule.page_endpoint`'s
    verdict). Not listed or not the link's scope's: 404 as a page that does
    not exist, off the record (its entry would name what the link may not
    know). Not web content: 403, on the record, the control token's too."""
    verdict = step.verdict
    assert verdict is not None
    if verdict.rule == "scope":
        return Refuse(step.error_answer(), verdict.message, None, False, NOT_FOUND)
    return Refuse(step.error_answer(), verdict.message, verdict.as_entry(), True, FORBIDDEN)


def person_refusal(step: Step, who: str, left_s: float, waited_s: float) -> Refuse:
    """An agent's acting command that waited ``waited_s`` behind a person
    still holding its scope (``who``, ``left_s`` more): refused, on the record
    (relay/person_holds.py)."""
    why = (
        f"{step.method}: a person ({who}) has control of this scope for {left_s:.0f} s more "
        f"(the live view); acting commands wait for them to hand back, at most "
        f"{waited_s:.0f} s, and this one waited that long: ask with request_human, or send "
        "it again once they are done (reading commands go on meanwhile)"
    )
    return Refuse(
        _error(step, -32000, why), why, {"rule": PERSON_RULE, "action": "refused"}, True, CONFLICT
    )


def _error(step: Step, code: int, text: str) -> dict[str, Any]:
    message: dict[str, Any] = {"error": {"code": code, "message": text}}
    if step.call is not None:
        message = {"id": step.call, **message}
    if step.session is not None:
        message["sessionId"] = step.session
    return message
