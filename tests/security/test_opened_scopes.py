"""Scopes opened on demand (issue 41, item 1), against the built image with a
fixed user (alice), a control token and ``AGENTENV_MAX_SCOPES``, driven by
Playwright over CDP and the mcp SDK on /mcp with the minted tokens.

- Opened, a scope is a fresh browser context with one blank tab; its token
  works on the relay (``?token=`` and ``Authorization: Bearer``), on /mcp and
  on the ops, and proves its name in the log.
- Closed, its connections and MCP sessions end, its recording ends with a
  manifest, its token is refused everywhere (401), and a scope opened again
  under its name finds nothing of it: cookies, localStorage, downloads, tabs,
  history.
- Only the control token opens, closes, lists or resets; names that collide
  or climb out of the downloads folder are refused; past the cap, an open
  waits in the queue for a close, then 429 with Retry-After.
- One scope's reset leaves another's state, and its connection, alone.
- No minted token is ever written under /var/log/agentenv.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import httpx2
import pytest
import requests
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Browser, Playwright, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from prometheus_client.parser import text_string_to_metric_families

from tests.security.attacks import Agent, agent, attempt, by, clean, entries
from tests.support.container import SITE, Computer, computer
from tests.support.timing import deadline, wait_for

COOKIE = "opened-scope-cookie-3391"
STORED = "opened-scope-storage-5120"
RECORDINGS = "/tmp/recordings"
MAX_SCOPES = 3


class Minted:
    """Every token a test minted (closed ones too): none may reach the log."""

    tokens: list[str] = []


@pytest.fixture(scope="module")
def pc(image: str) -> Iterator[Computer]:
    env = {
        "AGENTENV_MAX_SCOPES": str(MAX_SCOPES),
        "AGENTENV_UPLOAD_ROOTS": RECORDINGS,
        # Past the cap one scopes/open waits, for at most 4 s.
        "AGENTENV_QUEUE_LENGTH": "1",
        "AGENTENV_QUEUE_WAIT_S": "4",
    }
    with computer(image, users={"alice": "alice-token-5f1c"}, env=env) as running:
        running.serve_site()
        yield running
        for name in [s["scope"] for s in running.op("scopes/list")["scopes"]]:
            running.op("scopes/close", {"scope": name})


def open_scope(pc: Computer, name: str | None = None) -> dict[str, Any]:
    """``scopes/open``; the token is kept as the scope's user's in ``pc.users``."""
    made = pc.op("scopes/open", {"name": name} if name else {})
    pc.users[made["scope"]] = made["token"]
    Minted.tokens.append(made["token"])
    return dict(made)


def close_scope(pc: Computer, name: str) -> None:
    pc.op("scopes/close", {"scope": name})


def cdp(pc: Computer, made: dict[str, Any]) -> str:
    """The scope's ``cdp_url`` at the relay's port as the engine mapped it."""
    path = made["cdp_url"].split("/devtools/", 1)[1]
    return f"ws://{pc.relay_address}/devtools/{path}"


def connect(pw: Playwright, pc: Computer, made: dict[str, Any]) -> Browser:
    url = f"{cdp(pc, made)}?token={made['token']}"
    return pw.chromium.connect_over_cdp(url, timeout=deadline(30) * 1000)


def _mcp(pc: Computer, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=deadline(120))
    return Client(
        streamable_http_client(pc.app + "/mcp", http_client=http),
        read_timeout_seconds=deadline(120),
    )


def _refused(pc: Computer, token: str) -> None:
    """Every door refuses ``token`` with 401."""
    bearer = {"Authorization": f"Bearer {token}"}
    for answer in (
        requests.get(f"{pc.relay}/json/list", headers=bearer, timeout=10),
        requests.get(f"{pc.relay}/json/list?token={token}", timeout=10),
        requests.post(f"{pc.app}/v1/browser/tabs/list", json={}, headers=bearer, timeout=10),
        requests.post(
            f"{pc.app}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={**bearer, "Accept": "application/json, text/event-stream"},
            timeout=10,
        ),
    ):
        assert answer.status_code == 401, (answer.url.split("?")[0], answer.status_code)
        assert token not in answer.text


async def _handshake(url: str, headers: dict[str, str] | None = None) -> int:
    """The status a WebSocket handshake to the relay gets (101: it opened)."""
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(url, headers=headers or {}):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def _ended(page: Any) -> bool | None:
    """Whether Playwright finds its connection ended (a call fails: its
    events are read only while it is called)."""
    try:
        page.evaluate("1")
    except PlaywrightError:
        return True
    return None


def _download(page: Any, name: str, text: str) -> None:
    page.evaluate(
        "([n, t]) => { const a = document.createElement('a');"
        " a.href = URL.createObjectURL(new Blob([t])); a.download = n;"
        " document.body.append(a); a.click(); }",
        [name, text],
    )


def test_open_use_close_then_every_door_refuses_the_token(pc: Computer) -> None:
    before = attempt(pc)
    made = open_scope(pc, "task-1")
    assert made["scope"] == "task-1"
    assert made["token"].startswith("scope-") and len(made["token"]) > 40
    assert made["cdp_url"].endswith(":9222/devtools/browser"), made["cdp_url"]
    assert made["mcp_url"] == f"{pc.app}/mcp"
    started = pc.recording(
        "start",
        {
            "request_id": uuid.uuid4().hex,
            "scope": "task-1",
            "upload": {"url": f"file://{RECORDINGS}"},
        },
    )
    # Opening made a fresh context with one blank tab, the scope's only one.
    tabs = pc.op("tabs/list", user="task-1")
    assert [t["url"] for t in tabs] == ["about:blank"], tabs
    # Bearer works as well as ?token= on the relay.
    headers = {"Authorization": f"Bearer {made['token']}"}
    assert asyncio.run(_handshake(cdp(pc, made), headers)) == 101
    listed = requests.get(f"{pc.relay}/json/list", headers=headers, timeout=10).json()
    assert [t["id"] for t in listed] == [tabs[0]["id"]], listed
    with sync_playwright() as pw:
        browser = connect(pw, pc, made)
        context = browser.contexts[0]
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(SITE + "/?task-1")
        context.add_cookies([{"name": "s", "value": COOKIE, "url": SITE}])
        assert COOKIE in str(context.cookies())
        close_scope(pc, "task-1")
        # The connection already open is ended, not left acting.
        wait_for(lambda: _ended(page), "the scope's CDP connection to end")
        assert not browser.is_connected()
    _refused(pc, made["token"])
    assert asyncio.run(_handshake(f"{cdp(pc, made)}?token={made['token']}")) == 401
    assert (
        asyncio.run(_handshake(cdp(pc, made), {"Authorization": f"Bearer {made['token']}"})) == 401
    )
    # Its recording was ended by the close, with a manifest (asked again, the same one).
    manifest = pc.recording("end", {"recording_id": started["recording_id"]})
    assert manifest["reason"] == "stopped" and manifest["scope"] == "task-1", manifest
    folder = f"{RECORDINGS}/{started['recording_id']}"
    listed = pc.exec("ls", folder, user="agentenv").split()  # a tmpfs: no docker cp
    assert "manifest.json" in listed, (folder, listed)

    # The log says who acted in which scope, and that the scope opened and closed.
    lines = pc.settled_log(before)
    cdp_lines = [x["action"] for x in lines if x.get("action", {}).get("via") == "cdp"]
    agents = [a for a in cdp_lines if a.get("who") != "agentenv"]
    assert agents and {a.get("who") for a in agents} == {"task-1"}, agents[:3]
    assert {a.get("scope") for a in agents} == {"task-1"}
    # The computer's own: the scope's first tab, and its context disposed of.
    own = {a["method"] for a in cdp_lines if a.get("who") == "agentenv"}
    assert {"Target.createTarget", "Target.disposeBrowserContext"} <= own, own
    ops = [x["action"].get("op") for x in lines if "action" in x]
    assert "scopes/open" in ops and "scopes/close" in ops, ops
    clean(pc, COOKIE, *Minted.tokens)


async def test_an_opened_scopes_token_drives_mcp_and_is_refused_once_closed(
    pc: Computer,
) -> None:
    before = attempt(pc)
    made = open_scope(pc)
    name = made["scope"]
    async with _mcp(pc, made["token"]) as client:
        result = await client.call_tool("browser_navigate", {"url": SITE + "/next"})
        assert not result.is_error
        [entry] = entries(pc, before, "the scope's MCP call", by(tool="browser_navigate"))
        assert entry["who"] == name and entry["via"] == "mcp" and entry["scope"] == name
        close_scope(pc, name)
        with pytest.raises(Exception):  # noqa: B017 - the session is gone, any way it says so
            await client.call_tool("browser_navigate", {"url": SITE + "/"})
    _refused(pc, made["token"])
    clean(pc, *Minted.tokens)


def test_a_scope_opened_again_under_a_closed_ones_name_inherits_nothing(pc: Computer) -> None:
    made = open_scope(pc, "again")
    with sync_playwright() as pw:
        browser = connect(pw, pc, made)
        context = browser.contexts[0]
        page = context.pages[0]
        page.goto(SITE + "/?first")
        page.goto(SITE + "/next?first")
        page.evaluate(f"localStorage.setItem('k', {STORED!r})")
        context.add_cookies([{"name": "s", "value": COOKIE, "url": SITE}])
        extra = context.new_page()
        extra.goto(SITE + "/?second-tab")
        _download(page, "left-behind.txt", "first scope's file")
        wait_for(
            lambda: pc.op("downloads/list", user="again") or None, "the first scope's download"
        )
        browser.close()
    close_scope(pc, "again")
    again = open_scope(pc, "again")
    assert again["token"] != made["token"]
    assert pc.op("downloads/list", user="again") == []
    tabs = pc.op("tabs/list", user="again")
    assert [t["url"] for t in tabs] == ["about:blank"], tabs
    asyncio.run(_nothing_inherited(pc, tabs[0]["id"]))
    # The old token is no key to the new scope.
    _refused(pc, made["token"])
    close_scope(pc, "again")
    clean(pc, COOKIE, STORED, *Minted.tokens)


async def _nothing_inherited(pc: Computer, blank: str) -> None:
    async with agent(pc, "again") as fresh:
        cookies = (await fresh.call("Storage.getCookies"))["result"]["cookies"]
        assert cookies == [], cookies
        contexts = (await fresh.call("Target.getBrowserContexts"))["result"]
        assert contexts["browserContextIds"] == [], contexts
        attached = await fresh.call("Target.attachToTarget", {"targetId": blank, "flatten": True})
        history = await fresh.call("Page.getNavigationHistory", {}, attached["result"]["sessionId"])
        urls = [e["url"] for e in history["result"]["entries"]]
        assert set(urls) <= {"about:blank", ""}, urls
        _, session = await fresh.page(SITE + "/")
        assert await fresh.evaluate(session, "localStorage.getItem('k')") is None


def test_only_the_control_token_opens_closes_lists_or_resets(pc: Computer) -> None:
    made = open_scope(pc, "guarded")
    for user in ("alice", "guarded"):
        for op, body in (
            ("scopes/open", {}),
            ("scopes/list", {}),
            ("scopes/close", {"scope": "guarded"}),
            ("scopes/reset", {"scope": "guarded"}),
        ):
            pc.op(op, body, user=user, status=403)
    assert [s["scope"] for s in pc.op("scopes/list")["scopes"]] == ["guarded"]
    # An agent's CDP connection cannot reach the relay's scope commands either.

    async def ask() -> dict[str, Any]:
        async with agent(pc, "guarded") as it:
            return await it.call("AgentEnv.openScope", {})

    answer = asyncio.run(ask())
    assert "not-allowed" in answer["error"]["message"], answer
    assert made["token"] not in str(answer)
    close_scope(pc, "guarded")


def test_names_that_collide_or_climb_out_are_refused(pc: Computer) -> None:
    for name in ("../alice", "..", "a/b", "agentenv", "default", "x" * 65):
        answer = pc.op("scopes/open", {"name": name}, status=400)
        assert "1 to 64 letters" in answer["error"]["message"], answer
    answer = pc.op("scopes/open", {"name": "alice"}, status=409)
    assert "AGENTENV_USERS" in answer["error"]["message"]
    open_scope(pc, "taken")
    pc.op("scopes/open", {"name": "taken"}, status=409)
    pc.op("scopes/close", {"scope": "alice"}, status=409)
    pc.op("scopes/close", {"scope": "nobody"}, status=404)
    close_scope(pc, "taken")
    pc.op("scopes/close", {"scope": "taken"}, status=404)
    assert not pc.op("scopes/list")["scopes"]


def _scrape(pc: Computer) -> dict[str, float]:
    text = requests.get(pc.app + "/metrics", headers=pc.headers(None), timeout=10).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_past_the_cap_an_open_waits_for_a_close_then_429_and_the_card_shows_the_cap(
    pc: Computer,
) -> None:
    card = requests.get(pc.app + "/card", timeout=10).json()
    assert card["extensions"]["browser/v1"]["limits"]["max_scopes"] == MAX_SCOPES
    names = [open_scope(pc)["scope"] for _ in range(MAX_SCOPES)]
    listed = pc.op("scopes/list")
    assert sorted(s["scope"] for s in listed["scopes"]) == sorted(names)
    assert listed["max_scopes"] == MAX_SCOPES and listed["fixed"] == ["alice"]
    seen = _scrape(pc)
    assert seen["agentenv_scopes_open"] == MAX_SCOPES, seen
    assert seen["agentenv_scopes_capacity"] == MAX_SCOPES and seen["agentenv_queue_length"] == 0

    def ask() -> requests.Response:
        return requests.post(
            f"{pc.app}/v1/browser/scopes/open", json={}, headers=pc.headers(None), timeout=60
        )

    with ThreadPoolExecutor(2) as pool:
        # One waits (the queue holds one); the next is told at once.
        waiting = pool.submit(ask)
        wait_for(lambda: _scrape(pc)["agentenv_queue_length"] == 1, "an open in the queue")
        full = ask()
        assert full.status_code == 429, full.text
        assert 1 <= int(full.headers["Retry-After"]) <= 4, full.headers
        said = full.json()["error"]["message"]
        assert "all 3 scopes are taken (AGENTENV_MAX_SCOPES)" in said, said
        assert "the queue is full" in said, said
        # Its wait runs out: 429, saying so.
        timed_out = waiting.result(timeout=deadline(30))
        assert timed_out.status_code == 429, timed_out.text
        assert "in the queue (AGENTENV_QUEUE_WAIT_S)" in timed_out.json()["error"]["message"]
        # The fixed user is no opened scope: it still works beside a full computer.
        assert pc.op("tabs/list", user="alice") is not None
        # One waiting is let in when a scope closes.
        waiting = pool.submit(ask)
        wait_for(lambda: _scrape(pc)["agentenv_queue_length"] == 1, "an open in the queue again")
        close_scope(pc, names[0])
        let_in = waiting.result(timeout=deadline(30))
    assert let_in.status_code == 200, let_in.text
    made = let_in.json()
    Minted.tokens.append(made["token"])
    names[0] = made["scope"]
    for name in names:
        close_scope(pc, name)
    assert _scrape(pc)["agentenv_scopes_open"] == 0


async def test_one_scopes_reset_leaves_another_scopes_state_and_connection(
    pc: Computer,
) -> None:
    one, two = open_scope(pc, "one"), open_scope(pc, "two")
    async with agent(pc, "one") as first, agent(pc, "two") as second:
        for who, name in ((first, "one"), (second, "two")):
            await who.call(
                "Storage.setCookies",
                {"cookies": [{"name": "s", "value": f"{COOKIE}-{name}", "url": SITE}]},
            )
        _, session = await second.page(SITE + "/?two")
        await second.evaluate(session, f"localStorage.setItem('k', {STORED!r})")
        pc.op("scopes/reset", {"scope": "one"})
        # Two's connection goes on, with its state.
        cookies = (await second.call("Storage.getCookies"))["result"]["cookies"]
        assert f"{COOKIE}-two" in str(cookies)
        assert await second.evaluate(session, "localStorage.getItem('k')") == STORED
        await _closed(first)
    # One is made new, under the same token.
    async with agent(pc, "one") as first:
        cookies = (await first.call("Storage.getCookies"))["result"]["cookies"]
        assert cookies == [], cookies
    assert [t["url"] for t in pc.op("tabs/list", user="one")] == ["about:blank"]
    close_scope(pc, "one")
    close_scope(pc, "two")
    assert one["token"] != two["token"]
    clean(pc, *Minted.tokens)


async def _closed(who: Agent) -> None:
    """The relay ended ``who``'s connection: a command gets no answer but the end."""
    try:
        answer = await who.call("Browser.getVersion")
    except AssertionError as exc:
        assert "the connection ended" in str(exc), exc
    except (ConnectionError, aiohttp.ClientError):
        pass
    else:
        raise AssertionError(f"the reset scope's connection was left open: {answer}")
