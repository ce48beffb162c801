"""Ops on the record: each acting op is an action entry, reads are entries
only when an agent made them (the computer's own reads are not logged)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.log.argpaths import typed_paths
from agentenv.relay_link import ActionContext

__all__ = ["acting", "reading"]


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
