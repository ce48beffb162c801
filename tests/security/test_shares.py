"""Every line counts against someone's share (issue 40, item 8): a page's
own tab lines, a command's nested parameters, the Playwright MCPs, and the
refusals the app passes on."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.security.attacks import agent, attempt, by, entries
from tests.support.container import SITE, USERS, Computer, computer
from tests.support.timing import deadline, wait_for

#: A page that moves itself (a fragment at a time) for as long as it is open.
FLOOD = """<!doctype html><title>flood</title>
<script>let n = 0; setInterval(() => { location.hash = String(++n); }, 10);</script>"""

#: Alice's share of the log, scaled down so that her page spends it in seconds.
SHARE = 40_000


def _tab_bytes(lines: list[dict[str, Any]], tab: str) -> int:
    import json

    return sum(
        len(json.dumps(x, separators=(",", ":")))
        for x in lines
        if x.get("tab", {}).get("id") == tab
    )


async def test_a_pages_own_tab_lines_count_against_its_users_share(image: str) -> None:
    """A page navigating itself wrote tab lines that counted against no
    one's share: once its agent's commands were cut off, the page went on
    filling the log until every user was refused. Now its lines cost the
    share of the user whose scope it is in; once that is spent they are
    counted (a ``tabs/counted`` line a minute), and another user's go on."""
    env = {"AGENTENV_LOG_USER_MAX_BYTES": str(SHARE)}
    with computer(image, env=env) as pc:
        origin = pc.serve_folder(8022, "/tmp/flood", {"flood.html": FLOOD})
        before = attempt(pc)
        async with agent(pc, "alice") as alice:
            tab = (await alice.call("Target.createTarget", {"url": origin + "/flood.html"}))[
                "result"
            ]["targetId"]
            # Alice sends nothing more: her page's own lines spend her share.
            loop = asyncio.get_running_loop()
            end = loop.time() + deadline(40)
            refused = None
            while refused is None:
                assert loop.time() < end, "alice's page never spent her share of the log"
                await asyncio.sleep(1)
                answer = await alice.call("Target.getTargets")
                if "error" in answer:
                    refused = answer["error"]["message"]
            assert "log-budget" in refused, refused

        def counted() -> list[dict[str, Any]] | None:
            lines = pc.log(before)[0]
            found = [x["action"] for x in lines if x.get("action", {}).get("op") == "tabs/counted"]
            return found or None

        told = wait_for(counted, "a tabs/counted line for alice's page", timeout_s=20)
        assert told[0]["share"] == "alice" and told[0]["scope"] == "alice", told
        assert told[0]["tabs"] == [tab] and told[0]["count"] >= 1, told
        # Her page goes on moving, and the log no longer grows by it.
        lines = pc.log(before)[0]
        written = _tab_bytes(lines, tab)
        assert written <= SHARE, written
        moved = await_moves(pc, tab)
        assert _tab_bytes(pc.log(before)[0], tab) == written, "the page's lines went on"
        assert moved, "alice's page stopped moving: the test proves nothing"
        # Bob's share is his own.
        async with agent(pc, "bob") as bob:
            _, session = await bob.page("about:blank")
            assert await bob.evaluate(session, "6 * 7") == 42


def await_moves(pc: Any, tab: str) -> bool:
    """Whether ``tab``'s page is still moving itself (its fragment grows
    within a bounded wait), read through the control token's tabs/list."""

    def fragment() -> int:
        for listed in pc.op("tabs/list", {"scope": "alice"}):
            if listed["id"] == tab:
                return int(listed["url"].rpartition("#")[2] or 0)
        raise AssertionError("alice's page is gone")

    first = fragment()
    return bool(wait_for(lambda: fragment() > first + 20, "the page to move on", timeout_s=20))


async def test_nested_and_list_parameters_write_no_huge_line(target: Computer) -> None:
    """Only unknown top-level parameters were shrunk: a command's own list
    or nested parameters (each string cut at 2,000 characters) wrote a 4 MB
    line. Now a line's params past 16 KiB are logged by size and count, the
    first part kept."""
    import json

    urls = [f"https://blocked.example/{n}/" + "u" * 1990 for n in range(2000)]
    headers = {f"x-h{n}": "v" * 1990 for n in range(2000)}
    before = attempt(target)
    async with agent(target, "alice") as alice:
        _, session = await alice.page("about:blank")
        for method, params in (
            ("Network.setBlockedURLs", {"urls": urls}),
            ("Network.setExtraHTTPHeaders", {"headers": headers}),
        ):
            answer = await alice.call(method, params, session)
            assert "result" in answer, str(answer)[:300]
    for method in ("Network.setBlockedURLs", "Network.setExtraHTTPHeaders"):
        [entry] = entries(target, before, method, by(method=method, who="alice"))
        size = len(json.dumps(entry, separators=(",", ":")))
        assert size < 20_000, (method, size)
        cut = entry["params"]["cut"]
        assert cut["bytes"] > 3_000_000 and cut["count"] == 1, (method, cut)
        start = '{"urls":[' if "Blocked" in method else '{"headers":{"x-h0":"v'
        assert cut["kept"].startswith(start), (method, cut["kept"][:100])


async def test_a_fulfilled_request_names_its_tab_in_a_shared_scope(image: str) -> None:
    """In a shared scope, Alice intercepting on the browser's own session
    answered Bob's page's request with ``Fetch.fulfillRequest`` in an entry
    that named no tab: it names his."""
    import base64

    with computer(image, scopes={user: "team" for user in USERS}) as pc:
        before = attempt(pc)
        async with agent(pc, "alice") as alice, agent(pc, "bob") as bob:
            patterns = [{"urlPattern": "*fulfil-me*"}]
            assert "result" in await alice.call("Fetch.enable", {"patterns": patterns})
            opened = await bob.call("Target.createTarget", {"url": SITE + "/?fulfil-me"})
            tab = opened["result"]["targetId"]
            paused = await alice.event("Fetch.requestPaused")
            assert "sessionId" not in paused, paused  # the browser's own session: no tab
            body = base64.b64encode(b"<p>answered by alice</p>").decode()
            fulfilled = await alice.call(
                "Fetch.fulfillRequest",
                {"requestId": paused["params"]["requestId"], "responseCode": 200, "body": body},
            )
            assert "result" in fulfilled, fulfilled
        [entry] = entries(pc, before, "alice's fulfill", by(method="Fetch.fulfillRequest"))
        assert entry["who"] == "alice" and entry.get("tab") == tab, entry
        assert "fulfil-me" in entry.get("url", ""), entry


async def test_a_refusal_of_the_relays_own_is_not_blamed_on_chromium(image: str) -> None:
    """An agent's op refused by the relay (its log full) was answered 502
    "Chromium refused AgentEnv.beginAction: …": the refusal is the relay's,
    and the answer says so, with a fitting status (503, as the relay's own
    HTTP commands answer it) and the rule."""
    with computer(image, env={"AGENTENV_LOG_MAX_BYTES": "300000"}) as pc:
        async with agent(pc, "alice") as alice:
            _, session = await alice.page("about:blank")
            refused = None
            for n in range(1000):
                answer = await alice.call(
                    "Runtime.evaluate", {"expression": f"'{'x' * 1900}'.length + {n}"}, session
                )
                if "error" in answer:
                    refused = answer["error"]["message"]
                    break
            assert refused is not None and "action log is full" in refused, refused
        op = pc.op("navigate", {"url": "about:blank#late"}, user="alice", status=503)
        message = op["error"]["message"]
        assert "Chromium" not in message and "action log is full" in message, message
        assert "AGENTENV_LOG_MAX_BYTES" in message, message


def test_playwright_mcps_stay_within_the_memory_budget_whatever_the_users(image: str) -> None:
    """One user's 8 Playwright MCPs (about 90 MiB each) took 58 % of what the
    memory budget leaves Chromium and the programs, and two users at their 8
    passed it: the computer runs at most AGENTENV_MCP_SESSIONS, each user a
    share of them (429 past it), and a session past the total gets 503; the
    card says the numbers."""
    import requests

    from tests.support.container import CONTROL
    from tests.support.mcp import initialize, raw_headers

    listing: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    with computer(image, env={"AGENTENV_MCP_SESSIONS": "2"}) as pc:

        def session(token: str, name: str, role: str | None = None) -> requests.Response:
            headers = raw_headers(token)
            if role is not None:
                headers["AgentEnv-Role"] = role
            started = requests.post(
                pc.app + "/mcp", json=initialize(name), headers=headers, timeout=deadline(60)
            )
            if started.status_code != 200:
                return started
            headers["Mcp-Session-Id"] = started.headers["mcp-session-id"]
            requests.post(pc.app + "/mcp", json=note, headers=headers, timeout=deadline(30))
            return requests.post(
                pc.app + "/mcp", json=listing, headers=headers, timeout=deadline(120)
            )

        first = session(pc.token("alice"), "alice-1")
        assert first.status_code == 200 and "browser_" in first.text, first.text[:300]
        second = session(pc.token("alice"), "alice-2")
        assert second.status_code == 429, (second.status_code, second.text[:300])
        assert "AGENTENV_MCP_SESSIONS" in second.text and "DELETE /mcp" in second.text
        bobs = session(pc.token("bob"), "bob-1")
        assert bobs.status_code == 200 and "browser_" in bobs.text, bobs.text[:300]
        third = session(CONTROL, "driver", role="carol")
        assert third.status_code == 503, (third.status_code, third.text[:300])
        assert "AGENTENV_MCP_SESSIONS=2" in third.text, third.text
        running = pc.exec("sh", "-c", "pgrep -u agentenv -f 'cli.js mcp' | wc -l").strip()
        assert running == "2", running
        limits = requests.get(pc.app + "/card", timeout=deadline(30)).json()
        limits = limits["extensions"]["browser/v1"].get("limits", {})
        # max_scopes: none may be opened on demand here (AGENTENV_MAX_SCOPES unset).
        assert limits == {
            "mcp_sessions": 2,
            "mcp_sessions_per_caller": 1,
            "max_scopes": 0,
            # /playwright's servers: 2, and each of the two users' share 1.
            "playwright_servers": 2,
            "playwright_servers_per_caller": 1,
        }, limits
