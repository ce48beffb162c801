"""Names are proven by tokens: an agent cannot put another name in the log,
by a header, a query parameter, or an MCP session."""

from __future__ import annotations

from typing import Any

import httpx2
import requests
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.security.attacks import agent, attempt
from tests.support.container import SITE, Computer
from tests.support.timing import deadline, wait_for


def _mcp(target: Computer, extra: dict[str, str] | None = None) -> Client:
    """An mcp SDK client of the computer's /mcp with alice's token."""
    headers = {"Authorization": f"Bearer {target.token('alice')}", **(extra or {})}
    http = httpx2.AsyncClient(headers=headers, timeout=deadline(120))
    return Client(
        streamable_http_client(target.app + "/mcp", http_client=http),
        read_timeout_seconds=deadline(120),
    )


def _actions(target: Computer, after: int, **match: object) -> list[dict[str, object]]:
    def found() -> list[dict[str, object]] | None:
        got = [
            x["action"]
            for x in target.log(after)[0]
            if "action" in x and all(x["action"].get(k) == v for k, v in match.items())
        ]
        return got or None

    return wait_for(found, f"entries matching {match}", timeout_s=30)


def test_a_role_header_never_renames_an_agent(target: Computer) -> None:
    before = attempt(target)
    # In alice's scope, named: the home scope's on a computer of fixed users,
    # her own when she is a scope opened on demand (test_scopes_opened.py).
    tab = target.op("tabs/open", {"url": SITE + "/", "scope": "alice"})["id"]
    target.op(
        "navigate",
        {"url": SITE + "/next", "tab": tab},
        user="alice",
        headers={"AgentEnv-Role": "bob"},
    )
    [entry] = _actions(target, before, op="navigate")
    assert entry["who"] == "alice" and entry["role"] == "bob" and entry["via"] == "api"
    target.op("input/move", {"x": 5, "y": 5}, user="alice", headers={"AgentEnv-Role": "agentenv"})
    [moved] = _actions(target, before, op="input/move")
    assert moved["who"] == "alice" and moved["role"] == "agentenv"
    # The harness (control token) drives for a role: the role is the name.
    target.op("input/move", {"x": 6, "y": 6}, headers={"AgentEnv-Role": "carol"})
    assert any(a["who"] == "carol" for a in _actions(target, before, op="input/move"))
    target.op("tabs/close", {"id": tab, "scope": "alice"})


async def test_a_user_query_parameter_never_renames_a_cdp_agent(target: Computer) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        await alice.call("Target.getTargets")
    import aiohttp
    import requests

    version = requests.get(target.relay + "/json/version", timeout=10).json()
    url = f"{version['webSocketDebuggerUrl']}?token={target.token('alice')}&user=bob"
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        await ws.send_json({"id": 1, "method": "Browser.getVersion"})
        await ws.receive_json(timeout=deadline(20))
    entries = _actions(target, before, method="Browser.getVersion")
    assert {e["who"] for e in entries} == {"alice"}


async def test_an_mcp_caller_is_its_token(target: Computer) -> None:
    before = attempt(target)
    async with _mcp(target, {"AgentEnv-Role": "bob"}) as client:
        result = await client.call_tool("browser_navigate", {"url": SITE + "/next"})
        assert not result.is_error
    [entry] = _actions(target, before, tool="browser_navigate")
    assert entry["who"] == "alice" and entry["role"] == "bob" and entry["via"] == "mcp"
    # Playwright MCP's own commands carry alice's name too, never the computer's.
    within = [
        x["action"]
        for x in target.log(before)[0]
        if "action" in x and x["action"].get("within") is not None
    ]
    assert within and {a["who"] for a in within} == {"alice"}


def test_an_mcp_session_serves_the_caller_who_made_it(target: Computer) -> None:
    """Bob, holding alice's Mcp-Session-Id, called tools in it and ended it
    with a DELETE that no log entry showed (6th red team): it is as if it
    did not exist for him, and alice's session goes on."""
    from tests.support.mcp import initialize, raw_headers

    alice = raw_headers(target.token("alice"))
    started = requests.post(target.app + "/mcp", json=initialize("a"), headers=alice, timeout=60)
    session = started.headers["mcp-session-id"]
    alice["Mcp-Session-Id"] = session
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    requests.post(target.app + "/mcp", json=note, headers=alice, timeout=30)
    bob = {**raw_headers(target.token("bob")), "Mcp-Session-Id": session}
    listing: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert (
        requests.post(target.app + "/mcp", json=listing, headers=bob, timeout=30).status_code == 404
    )
    assert requests.delete(target.app + "/mcp", headers=bob, timeout=30).status_code == 404
    mine = requests.post(target.app + "/mcp", json=listing, headers=alice, timeout=120)
    assert mine.status_code == 200 and "browser_" in mine.text
    assert requests.delete(target.app + "/mcp", headers=alice, timeout=30).status_code == 200


def test_one_caller_has_so_many_playwright_mcps(image: str) -> None:
    """Each MCP session starts a Playwright MCP (a Node process): one agent
    opening sessions without end would take the computer's memory."""
    from tests.support.container import computer
    from tests.support.mcp import initialize, raw_headers

    listing: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    with computer(image, env={"AGENTENV_MCP_SESSIONS_PER_CALLER": "1"}) as target:
        sessions = []
        for name in ("first", "second"):
            headers = raw_headers(target.token("alice"))
            started = requests.post(
                target.app + "/mcp", json=initialize(name), headers=headers, timeout=60
            )
            headers["Mcp-Session-Id"] = started.headers["mcp-session-id"]
            requests.post(target.app + "/mcp", json=note, headers=headers, timeout=30)
            sessions.append(headers)
        first = requests.post(target.app + "/mcp", json=listing, headers=sessions[0], timeout=120)
        assert "browser_" in first.text
        second = requests.post(target.app + "/mcp", json=listing, headers=sessions[1], timeout=60)
        assert "browser_" not in second.text and "as many as one caller" in second.text
        assert requests.delete(target.app + "/mcp", headers=sessions[0], timeout=30).ok
        again = requests.post(target.app + "/mcp", json=listing, headers=sessions[1], timeout=120)
        assert "browser_" in again.text


async def test_no_granted_token_is_on_any_command_line(target: Computer) -> None:
    """Chromium's user, given a renderer exploit, reads every process's
    command line: Playwright MCP's granted token is never on one, and its
    environment is its own user's to read."""
    async with _mcp(target) as client:
        result = await client.call_tool("browser_navigate", {"url": SITE + "/next"})
        assert not result.is_error  # Playwright MCP is up, connected with its grant
        listing = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
        seen = target.exec("sh", "-c", listing, user="browser")
        # (Booleans only: a failure must not print a token.)
        listed = "playwright" in seen and "mcp" in seen
        assert listed, "Playwright MCP is not among the command lines"
        leaked = "granted-" in seen or "Bearer" in seen
        assert not leaked, "a granted token is on a command line"
        pids = target.exec("pgrep", "-u", "agentenv", "-f", "playwright").split()
        assert pids, "no Playwright MCP process of the agentenv user"
        for pid in pids:
            read = f"cat /proc/{pid}/environ >/dev/null 2>&1 && echo readable || echo refused"
            assert target.exec("sh", "-c", read, user="browser").strip() == "refused", pid
        # Its own user does find the grant in its environment (so the test
        # above looks where the token is).
        found = "".join(
            target.exec("sh", "-c", f"tr '\\0' '\\n' < /proc/{pid}/environ", user="agentenv")
            for pid in pids
        )
        there = "PLAYWRIGHT_MCP_CDP_HEADERS=Authorization: Bearer granted-" in found
        assert there, "the grant is not in Playwright MCP's environment"
