"""Playwright MCP (from the playwright wheel) through the relay, via the mcp SDK client."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.support.mcp import ref, ref_argument, text
from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import deadline


async def test_mcp_navigates_types_and_clicks(
    stack: NativeStack, site: Site, tmp_path: Path
) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "playwright", "mcp", "--cdp-endpoint", stack.relay_http],
        cwd=tmp_path,
    )
    async with Client(server, read_timeout_seconds=deadline(60)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"browser_navigate", "browser_type", "browser_click"} <= tools.keys()
        ref_arg = ref_argument(tools["browser_type"])

        # The browser is shared with other tests' agents: work in a tab of our own.
        assert not (await client.call_tool("browser_tabs", {"action": "new"})).is_error
        result = await client.call_tool("browser_navigate", {"url": site.url + "/"})
        assert not result.is_error, text(result)
        snapshot = text(await client.call_tool("browser_snapshot", {}))

        typed = await client.call_tool(
            "browser_type",
            {"element": "search box", ref_arg: ref(snapshot, "search"), "text": "red hats"},
        )
        assert not typed.is_error, text(typed)
        clicked = await client.call_tool(
            "browser_click", {"element": "Go button", ref_arg: ref(snapshot, 'button "Go"')}
        )
        assert not clicked.is_error, text(clicked)
        out = await client.call_tool(
            "browser_evaluate", {"function": "() => document.getElementById('out').textContent"}
        )
        assert "clicked:red hats" in text(out)
