"""Ops on the record: each acting op is an action entry, reads are entries
only when an agent made them (the computer's own reads are not logged)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from agentenv.app.app_errors import OpError
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.log.argpaths import typed_paths
from agentenv.protocol.control import HELD_WAIT_S
from agentenv.protocol.handoffs import ANSWER_OP, REQUEST_OP
from agentenv.protocol.log import AGENT_VIAS
from agentenv.relay_link import ActionContext

__all__ = ["ASKS_FOR_A_PERSON", "acting", "behind_person", "reading"]

#: Agents' ops never held behind a person: asking for one.
ASKS_FOR_A_PERSON = frozenset({REQUEST_OP})
#: How often a held op looks again whether the person let go.
_LOOK_S = 0.05


async def behind_person(browser: Browser, op: str, wait_s: float = HELD_WAIT_S) -> None:
    """Wait while a person drives ``browser``'s scope (its live view's
    controller, app/live_doors.py), at most ``wait_s``: then 409, saying who
    and for how long (relay/person_holds.py: the same rule for CDP)."""
    began = time.monotonic()
    while (held := browser.controller) is not None and held[1] > (now := time.monotonic()):
        if now - began >= wait_s:
            raise OpError(
                409,
                f"{op}: a person ({held[0]}) has control of this scope for "
                f"{held[1] - now:.0f} s more (the live view); acting ops wait for them to "
                f"hand back, at most {wait_s:.0f} s, and this one waited that long: ask with "
                "request_human, or call it again once they are done (reads go on meanwhile)",
            )
        await asyncio.sleep(min(_LOOK_S, held[1] - now, wait_s - (now - began)))


@contextlib.asynccontextmanager
async def acting(
    browser: Browser,
    caller: Caller,
    op: str,
    body: BaseModel | None,
    tab: str | None = None,
    typing: list[str] | None = None,
    acts: str = "acting",
    args: Any = None,
) -> AsyncIterator[ActionContext]:
    """An action entry around the op's commands.

    For a tool call the entry keeps the tool's own arguments; the typed text
    in them is found by value (they name it their own way). The op's commands
    go on a relay connection of its own for as long as it runs
    (:meth:`Browser.own_link`): the action's scope is that connection, so two
    ops at once never take each other's commands. ``args``, when given, is
    what the entry keeps, for any caller.
    """
    if acts == "acting" and caller.via in AGENT_VIAS and op not in ASKS_FOR_A_PERSON:
        await behind_person(browser, op)
    # An op that says what its entry keeps (``args``) has it kept whoever
    # calls, a tool call too: the credential ops' values are never in it.
    if args is None and caller.tool is not None:
        args = caller.tool.args
        if typing and args is not None and body is not None:
            typed = {getattr(body, t, None) for t in typing} - {None, ""}
            typing = typed_paths(args, typed)
    elif args is None:
        args = body.model_dump(mode="json", exclude_none=True) if body is not None else None
    async with (
        browser.own_link() as link,
        link.action(
            via=caller.via,
            who=caller.who,
            role=caller.role,
            op=op,
            tool=caller.tool.tool if caller.tool else None,
            call=caller.tool.call if caller.tool else None,
            args=args,
            tab=tab,
            typing=typing,
            acts=acts,
        ) as ctx,
    ):
        waiting = browser.waiting
        if caller.via == "human" and waiting is not None and waiting.open and op != ANSWER_OP:
            waiting.entries.append(ctx.entry)  # the person's, for the agent's answer
        yield ctx


@contextlib.asynccontextmanager
async def reading(
    browser: Browser, caller: Caller, op: str, body: BaseModel | None, tab: str | None
) -> AsyncIterator[None]:
    """A read: on the record (as reading) when an agent made it."""
    if caller.own:
        yield
        return
    async with acting(browser, caller, op, body, tab, acts="reading"):
        yield
