"""Where an MCP tool call acts (app/mcp.py), without a browser: in the scope
its session was made in, and nowhere once that scope, opened on demand, was
closed: never in the home scope (issue 41, a red team's finding)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest

from agentenv.access import AccessDenied
from agentenv.app.mcp import SCOPE_CLOSED, McpProxy
from agentenv.opened import Opened, OpenedScope, digest, forget_all, mint_token
from agentenv.settings import load

CONTROL = "control-token-for-the-unit-tests"
TOOL = types.Tool(name="browser_navigate", inputSchema={"type": "object"})


class Client:
    """Playwright MCP as the proxy sees it: the calls it was asked to make."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call_tool(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        self.calls.append(name)
        return types.CallToolResult(content=[])


class Action:
    async def __aenter__(self) -> Action:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class Link:
    """A link of one scope: the actions begun on it."""

    def __init__(self, scope: str | None, begun: list[str | None]) -> None:
        self.scope, self.begun = scope, begun

    def action(self, **params: Any) -> Action:
        self.begun.append(self.scope)
        return Action()


def _proxy(tmp_path: Path) -> tuple[McpProxy, Opened, list[str | None]]:
    forget_all()
    settings = load(
        {
            "AGENTENV_USERS": "alice:alice-token",
            "AGENTENV_MAX_SCOPES": "2",
            "AGENTENV_CONTROL_TOKEN": CONTROL,
            "AGENTENV_KEY_DIR": str(tmp_path / "attest"),
            "AGENTENV_DOWNLOADS_DIR": str(tmp_path / "downloads"),
        }
    )
    begun: list[str | None] = []
    links: Any = lambda scope: Link(scope, begun)  # noqa: E731 - a stand-in for server.py's
    proxy = McpProxy(settings, links(None), links)
    return proxy, Opened(settings.scopes_file), begun


def _ctx(token: str) -> Any:
    return SimpleNamespace(
        request=SimpleNamespace(headers={"authorization": f"Bearer {token}"}), request_id=1
    )


def test_a_call_acts_in_the_scope_its_session_was_made_in(tmp_path: Path) -> None:
    proxy, opened, begun = _proxy(tmp_path)
    token = mint_token()
    opened.write({"t1": OpenedScope("t1", digest(token), 1.0)})
    client = Client()
    session = proxy._session_of(_ctx(token))
    assert (session.scope, session.opened) == ("t1", "t1")

    async def start() -> Client:
        return client

    async def tools() -> list[types.Tool]:
        return [TOOL]

    session.start, session.tools = start, tools  # type: ignore[method-assign,assignment]
    params = types.CallToolRequestParams(name="browser_navigate", arguments={"url": "about:blank"})
    result = asyncio.run(proxy._call_tool(_ctx(token), params))
    assert not result.is_error and begun == ["t1"] and client.calls == ["browser_navigate"]
    # alice, a fixed user: the home scope (None), and no scope opened on demand.
    alice = proxy._session_of(_ctx("alice-token"))
    assert (alice.scope, alice.opened) == (None, None)


def test_a_call_whose_scope_closed_meanwhile_acts_nowhere(tmp_path: Path) -> None:
    """The call's token was good when it came (the door, its session); the
    scope is closed while Playwright MCP starts. It must not act at all: the
    home scope's link (alice's) begins nothing, Playwright MCP is not asked."""
    proxy, opened, begun = _proxy(tmp_path)
    token = mint_token()
    opened.write({"t1": OpenedScope("t1", digest(token), 1.0)})
    client = Client()
    session = proxy._session_of(_ctx(token))

    async def start() -> Client:
        # scopes/close: the token revoked (closing), then the scope gone.
        opened.write({"t1": OpenedScope("t1", digest(token), 1.0, closing=True)})
        return client

    async def tools() -> list[types.Tool]:
        return [TOOL]

    session.start, session.tools = start, tools  # type: ignore[method-assign,assignment]
    params = types.CallToolRequestParams(name="browser_navigate", arguments={"url": "about:blank"})
    result = asyncio.run(proxy._call_tool(_ctx(token), params))
    assert result.is_error, result
    said = result.content[0]
    assert isinstance(said, types.TextContent) and said.text == SCOPE_CLOSED
    assert begun == [] and client.calls == []
    opened.write({})  # closed altogether: its token is refused at once
    with pytest.raises(AccessDenied) as refused:
        asyncio.run(proxy._call_tool(_ctx(token), params))
    assert refused.value.status == 401
    assert begun == [] and client.calls == []


def test_no_playwright_mcp_is_started_for_a_session_whose_scope_closed(tmp_path: Path) -> None:
    """A session's scope is being closed when its call's token has passed
    the door: no Playwright MCP starts for it (one would connect to the
    relay with a token granted for a scope no longer open)."""
    proxy, opened, begun = _proxy(tmp_path)
    token = mint_token()
    opened.write({"t1": OpenedScope("t1", digest(token), 1.0)})
    session = proxy._session_of(_ctx(token))
    started: list[bool] = []

    async def start() -> Client:
        started.append(True)
        return Client()

    session.start = start  # type: ignore[method-assign,assignment]
    # The door checked the token; the session is found; then the close began.
    proxy._session_of = lambda ctx: session  # type: ignore[method-assign]
    opened.write({"t1": OpenedScope("t1", digest(token), 1.0, closing=True)})
    params = types.CallToolRequestParams(name="browser_navigate", arguments={"url": "about:blank"})
    result = asyncio.run(proxy._call_tool(_ctx(token), params))
    assert result.is_error and started == [] and begun == []
    with pytest.raises(AccessDenied):
        asyncio.run(proxy._list_tools(_ctx(token), None))
    assert started == []


def test_the_control_tokens_own_session_is_the_home_scopes(tmp_path: Path) -> None:
    """Its workspace is the home scope's downloads folder, not the folder of
    every scope's, and it is no opened scope's (never refused as closed)."""
    proxy, _, _ = _proxy(tmp_path)
    session = proxy._session_of(_ctx(CONTROL))
    assert (session.scope, session.opened) == (None, None)
    assert session.downloads == proxy.settings.downloads_for("alice")
