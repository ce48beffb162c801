"""/mcp on the app server: Playwright MCP's tools, every call on the record."""

from __future__ import annotations

import asyncio
from typing import Any

import requests

from tests.support.logfile import HELD_S, actions, all_bytes, read_log, read_until, tab_events
from tests.support.mcp import client as mcp_client
from tests.support.mcp import ref, ref_argument, text
from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import wait_for

PASSWORD = "mcp-hunter2-secret"


async def test_mcp_calls_are_on_the_record(stack: NativeStack, site: Site) -> None:
    _, start = read_log(stack.app_http)
    async with mcp_client(stack.app_http, "alice") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "browser_navigate" in tools and "browser_click" in tools
        assert "browser_install" not in tools and "browser_close" not in tools
        assert "browser_run_code_unsafe" not in tools  # it would hold the control token
        assert any(name.endswith("_xy") for name in tools), "the vision tools"
        ref_arg = ref_argument(tools["browser_type"])
        # The browser is shared with other tests' agents: work in a tab of our own,
        # in front (Playwright's waits for a stable element need a painting tab).
        assert not (await client.call_tool("browser_tabs", {"action": "new"})).is_error
        nav = await client.call_tool("browser_navigate", {"url": site.url + "/"})
        assert not nav.is_error, text(nav)
        snap = text(await client.call_tool("browser_snapshot", {}))
        typed = await client.call_tool(
            "browser_type",
            {"element": "password", ref_arg: ref(snap, "password"), "text": PASSWORD},
        )
        assert not typed.is_error, text(typed)
        fields = tools["browser_fill_form"].input_schema["properties"]["fields"]["items"]
        field_ref = "target" if "target" in fields.get("properties", {}) else "ref"
        filled = await client.call_tool(
            "browser_fill_form",
            {
                "fields": [
                    {
                        "name": "password",
                        "type": "textbox",
                        field_ref: ref(snap, "password"),
                        "value": PASSWORD + "-form",
                    }
                ]
            },
        )
        assert not filled.is_error, text(filled)
        search = await client.call_tool(
            "browser_type", {"element": "search", ref_arg: ref(snap, "search"), "text": "red hats"}
        )
        assert not search.is_error
        popup = await client.call_tool(
            "browser_click", {"element": "popup link", ref_arg: ref(snap, "Open popup")}
        )
        assert not popup.is_error, text(popup)
        assert not (await client.call_tool("browser_tabs", {"action": "list"})).is_error
        shot = await client.call_tool("browser_take_screenshot", {})
        assert not shot.is_error
        refused = await client.call_tool("browser_close", {})
        assert refused.is_error and "break the computer" in text(refused)

    def popup_opened() -> list[dict[str, Any]] | None:
        lines, _ = read_log(stack.app_http, start)
        opened = [e for e in tab_events(lines) if e["event"] == "opened"]
        return lines if opened else None

    lines = wait_for(popup_opened, "the popup's opened event", timeout_s=HELD_S)
    entries = actions(lines)
    calls = {s: a for s, a in entries.items() if a.get("via") == "mcp"}
    tools_called = [a["tool"] for _, a in sorted(calls.items())]
    assert tools_called == [
        "browser_tabs",
        "browser_navigate",
        "browser_snapshot",
        "browser_type",
        "browser_fill_form",
        "browser_type",
        "browser_click",
        "browser_tabs",
        "browser_take_screenshot",
    ]
    assert all(a["who"] == "alice" and a["call"] for a in calls.values())
    by_tool = {a["tool"]: s for s, a in sorted(calls.items(), reverse=True)}  # the first of each
    assert entries[by_tool["browser_snapshot"]]["acts"] == "reading"
    form = next(a for a in calls.values() if a["tool"] == "browser_fill_form")
    assert form["args"]["fields"][0]["value"]["withheld"] == "password"
    typed_entries = [a for a in calls.values() if a["tool"] == "browser_type"]
    assert typed_entries[0]["args"]["text"] == {"withheld": "password", "length": len(PASSWORD)}
    assert typed_entries[1]["args"]["text"] == "red hats"
    # CDP commands made for a call are credited to it.
    navigate = next(a for a in entries.values() if a.get("method") == "Page.navigate")
    assert navigate["within"] == by_tool["browser_navigate"]
    click = by_tool["browser_click"]
    opened = [e for e in tab_events(lines) if e["event"] == "opened"]
    popup_event = opened[-1]
    after = popup_event["by"].get("after")
    assert after is not None and entries[after].get("within") == click
    assert PASSWORD.encode() not in all_bytes(stack.log_dir)


async def test_two_sessions_with_their_own_roles(stack: NativeStack, site: Site) -> None:
    _, start = read_log(stack.app_http)

    async def agent(role: str, path: str) -> None:
        async with mcp_client(stack.app_http, role) as client:
            # One browser, two agents: each works in a tab of its own.
            opened = await client.call_tool("browser_tabs", {"action": "new"})
            assert not opened.is_error, text(opened)
            for _ in range(2):
                result = await client.call_tool("browser_navigate", {"url": site.url + path})
                assert not result.is_error, text(result)

    await asyncio.gather(agent("ann", "/next"), agent("ben", "/popup"))

    def both_agents(lines: list[dict[str, Any]]) -> bool:
        return sum(bool(a.get("via") == "mcp") for a in actions(lines).values()) >= 6

    lines = await asyncio.to_thread(
        read_until, stack.app_http, start, both_agents, "both agents' calls in the log"
    )
    entries = actions(lines)
    calls = [a for a in entries.values() if a.get("via") == "mcp"]
    assert sorted(a["who"] for a in calls) == ["ann"] * 3 + ["ben"] * 3
    navigations = [
        (seq, a)
        for seq, a in entries.items()
        if a.get("method") == "Page.navigate" and a.get("within")
    ]
    assert len(navigations) == 4, navigations  # two each: none missed, none unattributed
    for seq, a in navigations:
        owner = entries[a["within"]]
        assert owner["who"] == ("ann" if a["params"]["url"].endswith("/next") else "ben"), seq
        assert a["who"] == owner["who"], seq  # Playwright MCP's own commands carry the caller


def test_mcp_checks_host_and_origin(stack: NativeStack) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    evil = requests.post(
        stack.app_http + "/mcp", json=body, headers={"Host": "evil.example"}, timeout=10
    )
    assert evil.status_code == 403 and "evil" not in evil.text
    origin = requests.post(
        stack.app_http + "/mcp", json=body, headers={"Origin": "http://evil.example"}, timeout=10
    )
    assert origin.status_code == 403
