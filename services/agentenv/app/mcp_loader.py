"""Playwright MCP on the app server: its runtime checked at boot, its server
loaded on the first ``/mcp`` request (the mcp SDK is the app's heaviest
import, so an idle computer never pays for it), and the ASGI door that waits
for it (:func:`mcp_door`)."""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentenv.app.op_browser import Browser
from agentenv.app.runtime import runtime_problem
from agentenv.http import asgi_error
from agentenv.relay_link import BrowserLink
from agentenv.settings import Settings

log = logging.getLogger("agentenv.app")

__all__ = ["MCP_LOAD_S", "McpState", "mcp_door", "serve_mcp"]

#: How long an /mcp request waits for the MCP server to load at boot.
MCP_LOAD_S = 60.0


@dataclass
class McpState:
    """/mcp: whether Playwright MCP's runtime starts (checked at boot), and the
    MCP server, loaded on the first /mcp request (the mcp SDK is the app's
    heaviest import: an idle computer never pays for it)."""

    proxy: Any = None  # an agentenv.app.mcp.McpProxy once loaded
    checked: bool = False
    problem: str | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # the runtime was checked
    wanted: asyncio.Event = field(default_factory=asyncio.Event)  # an /mcp request came
    loaded: asyncio.Event = field(default_factory=asyncio.Event)  # the MCP server runs
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def why_not(self) -> str | None:
        if not self.checked:
            return "its runtime is still being checked"
        return self.problem


async def serve_mcp(
    state: McpState,
    settings: Settings,
    link: BrowserLink,
    scoped: Callable[[str | None], BrowserLink],
    browser_of: Callable[[str | None], Browser] | None = None,
) -> None:
    """Check Playwright MCP's runtime at boot; load the MCP server (the app's
    heaviest import) on the first /mcp request, and keep it running until the
    app stops (one task: the SDK's task group is entered and left in it)."""
    state.problem = await runtime_problem()
    state.checked = True
    if state.problem is not None:
        log.error("Playwright MCP cannot start: %s", state.problem)
    state.ready.set()
    # Wait for the first /mcp request, or the app's stop: a stop that comes as
    # the runtime check ends may find its cancel swallowed (Python 3.11's
    # wait_for, in runtime_problem), and must not leave this task waiting.
    wanted = asyncio.ensure_future(state.wanted.wait())
    stopped = asyncio.ensure_future(state.stop.wait())
    try:
        await asyncio.wait({wanted, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        wanted.cancel()
        stopped.cancel()
    if state.stop.is_set():
        return
    module = await asyncio.to_thread(importlib.import_module, "agentenv.app.mcp")
    state.proxy = module.McpProxy(settings, link, scoped, browser_of)
    async with state.proxy.running():
        state.loaded.set()
        await state.stop.wait()


def mcp_door(state: McpState) -> Callable[[Any, Any, Any], Any]:
    """The ASGI app mounted at ``/mcp``: it asks for the MCP server, waits up to
    :data:`MCP_LOAD_S` for it to load, then hands the request to it."""

    async def door(scope: Any, receive: Any, send: Any) -> None:
        state.wanted.set()
        try:
            await asyncio.wait_for(state.loaded.wait(), MCP_LOAD_S)
        except TimeoutError:
            await asgi_error(send, 503, "the MCP server is not up; retry shortly")
            return
        await state.proxy.asgi(scope, receive, send)

    return door
