"""A person holding a scope (issue 44, item 3): while a person drives a
scope's live view, its agents' acting commands wait.

The app says so (``AgentEnv.holdScope {scope, who, seconds}``, the control
token's: each input of a person holds the scope for the live view's
``HOLD_S`` after it; ``seconds: 0`` when they hand back). An agent's command
that acts in a held scope waits until the person lets go or their hold runs
out, at most :data:`WAIT_S`; past that it is refused (rule
``person-has-control``), saying who holds the scope and for how long.
Reading commands are not held: an agent may watch what the person does.
This module keeps who holds what and waits; which command waits is the
:class:`~agentenv.relay.connection.Connection`'s rule (a ``Person`` need,
for the CDP and HTTP doors alike), and its refusal is
:func:`agentenv.relay.decision.person_refusal`.

Why hold rather than refuse at once: a client's own set-up commands act
too (Playwright attaching to a tab the person opened), and refusing them
would break the client's idea of the page; held, each runs in order once
the person is done, as if the person had been slow. The agent's own
``request_human`` call is what it should be waiting on meanwhile. Commands
of one connection stay in order: the one held holds those after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from agentenv.protocol.control import HELD_WAIT_S
from agentenv.relay.decision import PERSON_RULE

__all__ = ["ASKS", "RULE", "WAIT_S", "PersonHolds"]

#: The longest an agent's acting command waits behind a person.
WAIT_S = HELD_WAIT_S
#: The guard's rule of a command refused after that.
RULE = PERSON_RULE
#: An agent's command asking for a person (relay/asking.py).
ASKS = "AgentEnv.requestHuman"


class PersonHolds:
    """Who holds each scope, until when (the clock's seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._held: dict[str, tuple[str, float]] = {}
        self._changed: dict[str, asyncio.Event] = {}

    def hold(self, scope: str, who: str, seconds: float) -> None:
        """``who`` holds ``scope`` for ``seconds`` more (0: lets go)."""
        if seconds > 0:
            self._held[scope] = (who, self.clock() + seconds)
        else:
            self._held.pop(scope, None)
        event = self._changed.pop(scope, None)
        if event is not None:
            event.set()  # waiters look again

    def holder(self, scope: str | None) -> tuple[str, float] | None:
        """Who holds ``scope`` now and for how many seconds more; None: no one."""
        held = self._held.get(scope) if scope is not None else None
        if held is None:
            return None
        left = held[1] - self.clock()
        if left <= 0:
            self._held.pop(scope or "", None)
            return None
        return held[0], left

    async def wait(self, scope: str, wait_s: float = WAIT_S) -> tuple[str, float] | None:
        """Wait while a person holds ``scope``, at most ``wait_s``: None once
        no one does; else who still holds it and for how long."""
        deadline = self.clock() + wait_s
        while (held := self.holder(scope)) is not None:
            left = deadline - self.clock()
            if left <= 0:
                return held
            event = self._changed.setdefault(scope, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=min(left, held[1]))
        return None
