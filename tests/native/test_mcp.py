"""Playwright MCP (from the playwright wheel) through the relay, via the mcp SDK client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import deadline


def _text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def _ref(snapshot: str, label: str) -> str:
    """The element ref (``[ref=e12]``) on the snapshot line naming ``label``."""
    for line in snapshot.splitlines():
        if label in line and "[ref=" in line:
            return line.split("[ref=", 1)[1].split("]", 1)[0]
    raise AssertionError(f"no ref for {label!r} in the snapshot:\n{snapshot}")


def _ref_argument(tool: Any) -> str:
    """The element-ref argument's name: ``target`` (1.65) or ``ref`` (older)."""
    props = tool.input_schema.get("properties", {})
    return "target" if "target" in props else "ref"


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
        ref_arg = _ref_argument(tools["browser_type"])

        result = await client.call_tool("browser_navigate", {"url": site.url + "/"})
        assert not result.is_error, _text(result)
        snapshot = _text(await client.call_tool("browser_snapshot", {}))

        typed = await client.call_tool(
            "browser_type",
            {"element": "search box", ref_arg: _ref(snapshot, "search"), "text": "red hats"},
        )
        assert not typed.is_error, _text(typed)
        clicked = await client.call_tool(
            "browser_click", {"element": "Go button", ref_arg: _ref(snapshot, 'button "Go"')}
        )
        assert not clicked.is_error, _text(clicked)
        out = await client.call_tool(
            "browser_evaluate", {"function": "() => document.getElementById('out').textContent"}
        )
        assert "clicked:red hats" in _text(out)
