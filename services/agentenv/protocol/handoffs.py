"""A recording's handoffs, read from its log slice (issue 44, item 4): when
a person stepped in, who asked, what they were asked, who acted, their
entries, and the word they handed back with. No I/O.

The recorder writes them in the manifest (``handoffs``), ``agentenv verify``
reads them again from the log slice and compares, and the harness counts a
task's human entries (``results.jsonl``) and marks a person's steps in the
Mind2Web export. The rule, over the slice's action lines in ``seq`` order:

- an agent's ``request_human`` opens a handoff (``request``: its entry,
  ``agent``, ``reason``, ``started_at``); it stays open until a person's
  ``human/answer`` closes it (``answer``, ``word``), or the agent's next
  ``request_human`` opens another (one that timed out was never answered:
  ``answer`` null);
- a person's entry (``via: human``) belongs to the handoff open then;
  with none open, it opens one nobody asked for (``request`` null), which
  the agent's next entry of any kind closes: a person who stepped in
  unasked acted until the agent acted again;
- ``people``: every person with an entry in it; ``ended_at``: its last
  entry's time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from agentenv.protocol.log import AGENT_VIAS, PERSON_VIA, LogLine

__all__ = ["ANSWER_OP", "HUMAN", "REQUEST_OP", "Handoff", "handoffs_in", "human_entries"]

#: The ``via`` of a person's acts through the live view.
HUMAN = PERSON_VIA
#: An agent asks for a person; a person answers.
REQUEST_OP, ANSWER_OP = "request_human", "human/answer"


class Handoff(BaseModel):
    """A span in which a person acted, asked for or not (see the module)."""

    #: The agent's ``request_human`` entry; null when no one asked.
    request: int | None = None
    agent: str | None = None
    reason: str | None = None
    #: The person's ``human/answer`` entry, and its word (``done``, ``cannot``).
    answer: int | None = None
    word: str | None = None
    #: The person's own entries in it (not the answer).
    entries: list[int] = Field(default_factory=list)
    people: list[str] = Field(default_factory=list)
    started_at: str
    ended_at: str


def handoffs_in(lines: Iterable[LogLine]) -> list[Handoff]:
    """The handoffs of ``lines`` (a log slice), in order."""
    found: list[Handoff] = []
    current: Handoff | None = None
    for line in sorted(lines, key=lambda x: x["seq"]):
        action = line.get("action")
        if not isinstance(action, dict):
            continue
        seq, at, via = line["seq"], line["at"], action.get("via")
        given = action.get("args")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        if via in AGENT_VIAS:
            if action.get("op") == REQUEST_OP:
                reason = args.get("reason")
                current = Handoff(
                    request=seq,
                    agent=action.get("who"),
                    reason=reason if isinstance(reason, str) else None,
                    started_at=at,
                    ended_at=at,
                )
                found.append(current)
            elif current is not None and current.request is None:
                current = None  # the agent acts again: the unasked span ends
            continue
        if via != HUMAN:
            continue
        if current is None:
            current = Handoff(started_at=at, ended_at=at)
            found.append(current)
        who = action.get("who")
        if isinstance(who, str) and who not in current.people:
            current.people.append(who)
        current.ended_at = at
        if action.get("op") == ANSWER_OP:
            word = args.get("word")
            current.answer, current.word = seq, word if isinstance(word, str) else None
            current = None
        else:
            current.entries.append(seq)
    return found


def human_entries(lines: Iterable[LogLine]) -> int:
    """How many of ``lines`` are a person's entries (``via: human``)."""
    return sum(
        1
        for line in lines
        if isinstance(action := line.get("action"), dict) and action.get("via") == HUMAN
    )
