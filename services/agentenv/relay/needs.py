"""What a door does for a :class:`~agentenv.relay.connection.Connection`'s
need: the waits its rules cannot do themselves, each bounded, and the fact
each gives back (:meth:`~agentenv.relay.connection.Connection.learn`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from agentenv.relay import password
from agentenv.relay.connection import (
    Fact,
    Looked,
    Need,
    PersonLeft,
    PersonStayed,
    Read,
    Ready,
    TabPage,
    World,
    WorldDone,
)
from agentenv.relay.watcher import Watcher

__all__ = ["settled"]


async def settled(watcher: Watcher, read: Read, learn: Callable[[Fact], Read]) -> Ready:
    """Meet each need ``read`` has, telling the connection (``learn``) what
    was found, until it is :class:`Ready`."""
    while not isinstance(read, Ready):
        read = learn(await _met(watcher, read))
    return read


async def _met(watcher: Watcher, need: Need) -> Fact:
    if isinstance(need, TabPage):
        # The watcher finds the page (bounded, 2 s) and teaches Known.
        await watcher.page_of_tab(need.tab)
        return Looked()
    if isinstance(need, World):
        await watcher.probes.world_made(need.tab, password.CHECK_TIMEOUT_S)
        return WorldDone()
    began = time.monotonic()
    still = await watcher.holds.wait(need.scope)  # bounded: person_holds.WAIT_S
    if still is None:
        return PersonLeft()
    return PersonStayed(still[0], still[1], time.monotonic() - began)
