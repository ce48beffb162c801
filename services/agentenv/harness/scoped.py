"""A task's share of a computer: scopes opened for its agents, as a :class:`Computer`.

:func:`open_for` opens a scope with ``scopes/open`` (the control token) for
each agent name a task gives a computer, and hands back a
:class:`ScopedComputer`: the same computer as a run sees one it started for
those agents. Its ``agents`` are the agents' minted tokens (so
``browser_connect_cdp`` and ``run_agent`` give each agent its own scope's
token), and every op, tab list, snapshot and recording start acts in the
scope opened for the agent the step names (the only one when it names none),
never in the computer's home scope nor another task's. :func:`close_for`
closes them (``scopes/close``: the scope's recordings ended, its contexts
disposed, its token revoked). The minted tokens are held in memory only.

A task with a ``wait_for_human`` step (:func:`asks_for_person`) has its
scopes opened with a person (``scopes/open {person: "person"}``): the live
view's address with that person's token is what the step hands a person
(:mod:`.human_steps`), revoked with the scope.

The answer's ``cdp_url`` is not used: the computer names the relay's port
in it as it was told (``AGENTENV_PUBLISHED_RELAY_PORT``), while the harness
published it on a port the engine chose at run time and knows it
(``Computer.cdp``); every agent connects there with its scope's token.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from agentenv.harness.computer import Computer, ComputerError
from agentenv.harness.fleet import Sample, samples
from agentenv.harness.scheduling import whole
from agentenv.harness.steps import Task, WaitForHuman
from agentenv.protocol.browser import ScopeOpened, ScopeRef, ScopesOpen

#: The name of the person a task's scope is opened with (user ``person@<scope>``).
PERSON = "person"

__all__ = [
    "PERSON",
    "Attempt",
    "ScopedComputer",
    "asks_for_person",
    "close_for",
    "computer_name",
    "open_for",
    "where_ran",
    "whole_reading",
]


def computer_name(computer: Computer) -> str:
    """A computer's name for results and the terminal: its container's (or
    service's, pod's) name, else its address; never a token."""
    name = getattr(computer.container, "name", None)
    return name if isinstance(name, str) else computer.api


@dataclass
class ScopedComputer(Computer):
    """A computer as one task sees it: its agents' scopes (see the module)."""

    #: Agent name -> the scope opened for it.
    scopes: dict[str, str] = field(default_factory=dict)
    host: Computer | None = field(default=None, repr=False)
    #: Scope -> the live view's address with its person's token.
    people: dict[str, str] = field(default_factory=dict, repr=False)

    def _in(self, scope: str | None) -> str:
        if scope is None:
            if len(self.scopes) == 1:
                return next(iter(self.scopes.values()))
            raise ComputerError(
                f"this computer has several agents ({', '.join(sorted(self.scopes))}): "
                "name the step's agent:",
                400,
            )
        found = self.scopes.get(scope)
        if found is None:
            raise ComputerError(
                f"the task gave this computer no agent {scope!r}: its agents are "
                f"{', '.join(sorted(self.scopes))}",
                400,
            )
        return found

    def op(
        self, op: str, model: type[BaseModel], /, *, http_wait_s: float = 180, **fields: Any
    ) -> Any:
        scoped = {**fields, "scope": self._in(fields.get("scope"))}
        return super().op(op, model, http_wait_s=http_wait_s, **scoped)

    def data_get(self, scope: str | None = None) -> bytes:
        return super().data_get(self._in(scope or None))

    def recording(self, op: str, model: type[BaseModel], /, **fields: Any) -> Any:
        if op == "start":
            fields = {**fields, "scope": self._in(fields.get("scope"))}
        return super().recording(op, model, **fields)

    def live_address(self, scope: str | None) -> str | None:
        """Where a person steps into the scope of the agent ``scope`` names
        (the only one when None), with their token; None: none was opened."""
        return self.people.get(self._in(scope))

    def stop(self) -> None:
        """Nothing: the batch closes the task's scopes and gives the computer back."""


def asks_for_person(task: Task) -> bool:
    """Whether ``task`` waits for a person (its scopes then have one)."""
    return any(isinstance(step, WaitForHuman) for step in task.steps)


def open_for(host: Computer, agents: list[str], person: bool = False) -> ScopedComputer:
    """A scope opened on ``host`` for each of ``agents`` (``agent`` when
    none), with a person in it when ``person``; those opened already are
    closed again when one fails."""
    scoped = ScopedComputer(
        host.api, host.cdp, host.token, host.container, {}, host.card(), host.key, host=host
    )
    try:
        for agent in agents or ["agent"]:
            opened: ScopeOpened = host.op(
                "scopes/open", ScopesOpen, person=PERSON if person else None
            )
            scoped.scopes[agent] = opened.scope
            scoped.agents[agent] = opened.token
            if opened.live_url and opened.person_token:
                scoped.people[opened.scope] = f"{opened.live_url}?token={opened.person_token}"
    except BaseException:
        close_for(scoped)
        raise
    return scoped


def close_for(scoped: ScopedComputer) -> list[str]:
    """Close every scope of ``scoped``; what could not be closed, as problems."""
    problems: list[str] = []
    if scoped.host is None:
        return problems
    for agent, scope in scoped.scopes.items():
        try:
            scoped.host.op("scopes/close", ScopeRef, scope=scope)
        except ComputerError as exc:
            problems.append(f"scope {scope} ({agent}) did not close: {exc}")
    with contextlib.suppress(Exception):
        scoped.agents.clear()  # the tokens are revoked: nothing to keep
        scoped.people.clear()
    return problems


@dataclass
class Attempt:
    """One try of a task on scopes: where it ran (schedule key, its scopes)."""

    id: str
    number: int
    avoid: frozenset[str]
    leases: list[tuple[str, ScopedComputer]] = field(default_factory=list)
    #: Its scopes are opened with a person (:func:`asks_for_person`).
    people: bool = False
    #: The name of each computer it ran on, by key (kept: a broken one is gone after).
    names: dict[str, str] = field(default_factory=dict)


def where_ran(attempt: Attempt) -> dict[str, Any]:
    """Which computer and scope(s) an attempt ran in, for results.jsonl (no token)."""
    names = [attempt.names[k] for k, _ in attempt.leases]
    scopes = {a: s for _, scoped in attempt.leases for a, s in scoped.scopes.items()}
    return {
        "computer": ", ".join(dict.fromkeys(names)) or None,
        "scope": ", ".join(scopes.values()) or None,
        "scopes": scopes,
    }


#: The longest an ended attempt's computer is read again while its relay does
#: not answer (restarting); past it, the computer is broken.
RELAY_BACK_S = 30.0


def whole_reading(host: Computer) -> tuple[Mapping[Sample, float] | None, bool]:
    """``host``'s /metrics (as it joins the pool: the baseline its restarts
    are counted from; as an attempt ends: whether it broke), and whether it
    answers at all (its /metrics or /readyz). A reading without its relay's counts (the
    relay restarting: supervisord brings it back in about a second) is
    read again until it has them, for at most :data:`RELAY_BACK_S`."""
    end = time.monotonic() + RELAY_BACK_S
    while True:
        text = host.metrics(timeout_s=10.0)
        found: Mapping[Sample, float] | None = None
        if text is not None:
            with contextlib.suppress(ValueError):
                found = samples(text)
        if found is None:
            return None, text is not None or host.ready()
        if whole(found) or time.monotonic() > end:
            return found, True
        time.sleep(0.5)  # a bounded poll: the relay answers again or the deadline ends it
