"""An MCP tool call through /mcp vs the same call to Playwright MCP connected
straight to Chromium, in one run; and op latencies (cookies/set, tabs/open,
screenshot)."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from bench.stats import percentile, row, table
from tests.support.mcp import client as mcp_client
from tests.support.mcp import ref, ref_argument, text
from tests.support.site import Site
from tests.support.stack import NativeStack

CLICKS = 60


async def _clicks(client: Client, site: Site, n: int) -> list[float]:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    arg = ref_argument(tools["browser_click"])
    await client.call_tool("browser_tabs", {"action": "new"})
    await client.call_tool("browser_navigate", {"url": site.url + "/"})
    snap = text(await client.call_tool("browser_snapshot", {}))
    target = ref(snap, 'button "Go"')
    out = []
    for _ in range(n):
        t = time.perf_counter()
        result = await client.call_tool("browser_click", {"element": "Go", arg: target})
        out.append((time.perf_counter() - t) * 1000)
        assert not result.is_error, text(result)
    return out


async def _mcp(stack: NativeStack, site: Site, folder: Path) -> tuple[list[float], list[float]]:
    direct = StdioServerParameters(
        command=sys.executable,
        args=["-m", "playwright", "mcp", "--cdp-endpoint", stack.chromium_http],
        cwd=folder,
    )
    via: list[float] = []
    straight: list[float] = []
    async with Client(direct, read_timeout_seconds=120) as d:
        straight += await _clicks(d, site, 5)  # warm up
        straight.clear()
        async with mcp_client(stack.app_http, "bench") as m:
            via += await _clicks(m, site, 5)
            via.clear()
            for _ in range(3):  # alternate blocks: both see the same machine
                straight += await _clicks(d, site, CLICKS // 3)
                via += await _clicks(m, site, CLICKS // 3)
    return straight, via


def _ops(stack: NativeStack, site: Site) -> list[list[str]]:
    def timed(op: str, body: dict[str, Any], n: int = 30) -> list[float]:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            answer = requests.post(f"{stack.app_http}/v1/browser/{op}", json=body, timeout=60)
            out.append((time.perf_counter() - t) * 1000)
            assert answer.status_code == 200, answer.text
        return out

    cookie = {"cookies": [{"name": "s", "value": "v", "url": site.url}]}
    opened = timed("tabs/open", {"url": site.url + "/next", "background": True}, 20)
    rows = [
        row("cookies/set", timed("cookies/set", cookie)),
        row("tabs/open {background}", opened),
        row("screenshot (jpeg, active tab)", timed("screenshot", {"format": "jpeg"})),
    ]
    return rows


def run() -> str:
    with (
        Site() as site,
        tempfile.TemporaryDirectory() as tmp,
        NativeStack(Path(tmp) / "s") as stack,
    ):
        straight, via = asyncio.run(_mcp(stack, site, Path(tmp)))
        ops = _ops(stack, site)
    ratio = percentile(via, 50) / percentile(straight, 50)
    rows = [
        row("browser_click, Playwright MCP direct to Chromium", straight),
        row("browser_click through /mcp (logged)", via),
        ["ratio p50", f"{ratio:.2f}x", f"overhead {100 * (ratio - 1):+.0f}%", "", ""],
        *ops,
    ]
    return table(
        "MCP and ops (Playwright MCP direct is the anchor)",
        ["case", "p50", "p99", "mean", "n"],
        rows,
    )


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
