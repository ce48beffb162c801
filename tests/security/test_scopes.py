"""Two agents in two scopes, at once: neither sees, reaches, pauses or shares
anything of the other's, by any route (issue 21: before scopes one agent's
auto-attach paused every new tab, its cookies were everyone's, and a tab's id
was all it took to close or drive another agent's tab)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import requests
from playwright.sync_api import sync_playwright

from tests.security.attacks import Agent, agent, attempt, browser_url, clean, guarded
from tests.support.container import SITE, Computer
from tests.support.timing import deadline, wait_for

COOKIE = "bobs-session-cookie-4471"


def _targets(answer: dict[str, Any]) -> set[str]:
    return {i["targetId"] for i in answer["result"]["targetInfos"] if i["type"] == "page"}


async def _open(who: Agent, url: str) -> str:
    opened = await who.call("Target.createTarget", {"url": url})
    return str(opened["result"]["targetId"])


async def test_two_scopes_see_and_reach_nothing_of_each_other(target: Computer) -> None:
    before = attempt(target)
    async with agent(target, "alice") as alice, agent(target, "bob") as bob:
        # Alice listens for every target and auto-attaches to every new one,
        # paused until she lets it run (as Playwright does).
        await alice.call("Target.setDiscoverTargets", {"discover": True})
        await alice.call(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
        )
        mine = await _open(alice, SITE + "/?alice")
        theirs = await _open(bob, SITE + "/next?bob")
        # Bob's tab loads: Alice's auto-attach held it for no one.
        attached = await bob.call("Target.attachToTarget", {"targetId": theirs, "flatten": True})
        session = attached["result"]["sessionId"]
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline(20)
        while await bob.evaluate(session, "document.readyState") != "complete":
            assert loop.time() < end, "Bob's tab never loaded: something held it"
            await asyncio.sleep(0.05)
        await bob.call(
            "Storage.setCookies",
            {"cookies": [{"name": "session", "value": COOKIE, "url": SITE}]},
        )

        # Listing: each sees its own tabs only.
        assert theirs not in _targets(await alice.call("Target.getTargets"))
        assert mine in _targets(await alice.call("Target.getTargets"))
        assert mine not in _targets(await bob.call("Target.getTargets"))
        contexts = (await alice.call("Target.getBrowserContexts"))["result"]
        assert contexts["browserContextIds"] == [], contexts
        heard = {
            e["params"].get("targetInfo", {}).get("targetId") for e in alice.events if "params" in e
        }
        assert theirs not in heard and mine in heard, heard
        # By id: as Chromium answers an id it does not know.
        for method in ("Target.attachToTarget", "Target.closeTarget", "Target.activateTarget"):
            answer = await alice.call(method, {"targetId": theirs, "flatten": True})
            assert answer["error"]["message"] == "No target with given id found", answer
        # Windows: Bob's window, by its small number, is not Alice's.
        window = (await bob.call("Browser.getWindowForTarget", {"targetId": theirs}))["result"]
        for method in ("Browser.getWindowBounds", "Browser.setWindowBounds"):
            answer = await alice.call(
                method, {"windowId": window["windowId"], "bounds": {"windowState": "minimized"}}
            )
            assert answer["error"]["message"] == "Browser window not found", answer
        # Cookies: Bob's are Bob's.
        cookies = (await alice.call("Storage.getCookies"))["result"]["cookies"]
        assert COOKIE not in str(cookies)
        bobs = (await bob.call("Storage.getCookies"))["result"]["cookies"]
        assert COOKIE in str(bobs)

        # HTTP discovery, with Alice's token.
        headers = {"Authorization": f"Bearer {target.token('alice')}"}
        listed = requests.get(target.relay + "/json/list", headers=headers, timeout=10).json()
        assert theirs not in {t["id"] for t in listed} and mine in {t["id"] for t in listed}
        closed = requests.get(f"{target.relay}/json/close/{theirs}", headers=headers, timeout=10)
        assert closed.status_code == 404, closed.text
        async with aiohttp.ClientSession() as http:
            try:
                async with http.ws_connect(
                    f"{target.relay.replace('http', 'ws')}/devtools/page/{theirs}", headers=headers
                ):
                    raise AssertionError("Alice reached Bob's tab's own endpoint")
            except aiohttp.WSServerHandshakeError as exc:
                assert exc.status == 404, exc
        # Bob's tab is still there, untouched.
        assert await bob.evaluate(session, "location.search") == "?bob"
        assert theirs in _targets(await bob.call("Target.getTargets"))
    # The log says which scope each entry is in, and what the guard did.
    lines, _ = target.log(before)
    actions = [x["action"] for x in lines if "action" in x and x["action"].get("via") == "cdp"]
    assert {a.get("scope") for a in actions if a.get("who") == "alice"} == {"alice"}, actions
    assert {a.get("scope") for a in actions if a.get("who") == "bob"} == {"bob"}, actions
    refused = [a for a in actions if (a.get("guard") or {}).get("rule") == "scope"]
    assert len(refused) >= 5, refused
    # Alice's refused lines name none of Bob's tabs, nor so their URLs.
    alices = [a for a in actions if a.get("who") == "alice"]
    assert {a["method"] for a in refused if a.get("who") == "alice"} >= {
        "Target.attachToTarget",
        "Target.closeTarget",
    }, refused
    assert theirs not in {a.get("tab") for a in alices}, alices
    assert "next?bob" not in json.dumps(alices), alices
    # Tab lines say whose browser each tab is in.
    tabs = {(x["tab"]["id"], x["tab"].get("scope")) for x in lines if "tab" in x}
    assert (mine, "alice") in tabs and (theirs, "bob") in tabs, tabs
    clean(target, COOKIE)


def test_playwright_in_two_scopes_at_once(target: Computer) -> None:
    """Each Playwright's default context is its scope's browser: its own pages."""
    with sync_playwright() as pw:
        a = pw.chromium.connect_over_cdp(browser_url(target, "alice"), timeout=deadline(30) * 1000)
        b = pw.chromium.connect_over_cdp(browser_url(target, "bob"), timeout=deadline(30) * 1000)
        page_a = a.contexts[0].new_page()
        page_b = b.contexts[0].new_page()
        page_a.goto(SITE + "/?a")
        page_b.goto(SITE + "/next?b")
        page_b.context.add_cookies([{"name": "session", "value": COOKIE, "url": SITE}])
        page_a.fill("#search", "alice's words")
        assert page_a.evaluate("document.getElementById('search').value") == "alice's words"
        assert all(p.url != page_b.url for p in a.contexts[0].pages)
        assert all(p.url != page_a.url for p in b.contexts[0].pages)
        assert COOKIE not in str(page_a.context.cookies())
        assert COOKIE in str(page_b.context.cookies())
        # A popup opens in its opener's scope.
        with page_a.expect_popup() as popup:
            page_a.click("#popup")
        assert popup.value.url.endswith("/popup")
        wait_for(
            lambda: any(p.url.endswith("/popup") for p in a.contexts[0].pages),
            "the popup among Alice's pages",
        )
        assert not any(p.url.endswith("/popup") for p in b.contexts[0].pages)
        a.close()
        b.close()
    clean(target, COOKIE)


async def test_a_reset_leaves_nothing_of_the_contexts_agents_made(target: Computer) -> None:
    """``data/reset`` (what ``agentenv run --reuse`` does between tasks)
    disposes of every context an agent made, and of every scope but the home
    one: task 2 finds none of task 1's contexts, tabs or cookies."""
    before = attempt(target)
    made: dict[str, str] = {}
    async with agent(target, "alice") as alice, agent(target, "bob") as bob:
        for name, who in (("alice", alice), ("bob", bob)):
            context = (await who.call("Target.createBrowserContext"))["result"]["browserContextId"]
            made[name] = context
            await who.call(
                "Target.createTarget", {"url": SITE + f"/next?{name}", "browserContextId": context}
            )
            await who.call(
                "Storage.setCookies",
                {
                    "cookies": [{"name": "s", "value": COOKIE, "url": SITE}],
                    "browserContextId": context,
                },
            )
            await who.call(
                "Storage.setCookies", {"cookies": [{"name": "t", "value": COOKIE, "url": SITE}]}
            )
        await _open(bob, SITE + "/?bob-own")
    target.op("data/reset")
    async with agent(target, "alice") as alice, agent(target, "bob") as bob:
        for name, who in (("alice", alice), ("bob", bob)):
            contexts = (await who.call("Target.getBrowserContexts"))["result"]
            assert contexts["browserContextIds"] == [], (name, contexts)
            infos = (await who.call("Target.getTargets"))["result"]["targetInfos"]
            urls = [i["url"] for i in infos if i["type"] == "page"]
            assert not [u for u in urls if "?" in u], (name, urls)  # none of task 1's tabs
            cookies = (await who.call("Storage.getCookies"))["result"]["cookies"]
            assert COOKIE not in str(cookies), name
            gone = await who.call("Storage.getCookies", {"browserContextId": made[name]})
            assert "error" in gone, gone
    lines, _ = target.log(before)
    disposed = [
        x["action"]
        for x in lines
        if x.get("action", {}).get("method") == "Target.disposeBrowserContext"
        and x["action"].get("who") == "agentenv"
    ]
    assert len(disposed) >= 3, disposed  # both made contexts, and Bob's scope
    assert all(d["ok"] for d in disposed), disposed
    clean(target, COOKIE)


def _bearer(target: Computer, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {target.token(user)}"}


async def test_a_tab_type_id_reaches_only_its_own_scopes_page(target: Computer) -> None:
    """chromedriver's window handles are tab-type ids, sent for their pages:
    Bob, holding Alice's, reaches nothing; Alice closes her own tab by it."""
    before = attempt(target)
    async with agent(target, "alice") as alice, agent(target, "bob") as bob:
        page = await _open(alice, SITE + "/next?tab-type")
        tab_filter = {"filter": [{"type": "tab"}]}
        listed = (await alice.call("Target.getTargets", tab_filter))["result"]["targetInfos"]
        hers = [i["targetId"] for i in listed if i["url"].endswith("?tab-type")]
        assert len(hers) == 1, listed
        theirs = (await bob.call("Target.getTargets", tab_filter))["result"]["targetInfos"]
        assert hers[0] not in {i["targetId"] for i in theirs}
        # The HTTP commands read the id as the CDP ones do: Bob's reach
        # nothing (as for an id that does not exist), Alice's her page.
        for op in ("activate", "close"):
            url = f"{target.relay}/json/{op}/{hers[0]}"
            bobs = requests.get(url, headers=_bearer(target, "bob"), timeout=30)
            assert bobs.status_code == 404, bobs.text
        activated = requests.get(
            f"{target.relay}/json/activate/{hers[0]}", headers=_bearer(target, "alice"), timeout=30
        )
        assert activated.status_code == 200, activated.text
        for method in ("Target.activateTarget", "Target.closeTarget"):
            answer = await bob.call(method, {"targetId": hers[0]})
            assert answer["error"]["message"] == "No target with given id found", answer
        assert page in _targets(await alice.call("Target.getTargets"))
        closed = await alice.call("Target.closeTarget", {"targetId": hers[0]})
        assert "error" not in closed, closed
        wait_for(
            lambda: page not in {t["id"] for t in target.op("tabs/list")},
            "Alice's tab closed by its tab-type id",
        )
    lines, _ = target.log(before)
    rules = [
        (x["action"].get("who"), (x["action"].get("guard") or {}).get("rule"))
        for x in lines
        if x.get("action", {}).get("method") == "Target.closeTarget"
    ]
    assert ("bob", "scope") in rules and ("alice", "tab-target") in rules, rules
    activating = [
        (
            x["action"].get("who"),
            x["action"].get("via"),
            (x["action"].get("guard") or {}).get("rule"),
        )
        for x in lines
        if x.get("action", {}).get("method") == "Target.activateTarget"
    ]
    assert ("alice", "cdp", "tab-target") in activating, activating
    closed_lines = [x["tab"] for x in lines if x.get("tab", {}).get("event") == "closed"]
    assert any(t["id"] == page and (t.get("by") or {}).get("who") == "alice" for t in closed_lines)
    clean(target)


async def test_another_scope_cannot_clear_the_home_scopes_storage(target: Computer) -> None:
    """On the browser's own session, Storage.clearDataForOrigin ran on
    Chromium's default context, the home scope's: Bob cleared Alice's site
    data. It is Bob's own page's on his page's session."""
    before = attempt(target)
    async with agent(target, "alice") as alice, agent(target, "bob") as bob:
        tab, session = await alice.page(SITE + "/")
        await alice.evaluate(session, "localStorage.setItem('k', 'alices-data')")
        for method, params in (
            ("Storage.clearDataForOrigin", {"origin": SITE, "storageTypes": "all"}),
            ("Storage.getUsageAndQuota", {"origin": SITE}),
        ):
            answer = await bob.call(method, params)
            assert "browser-wide" in answer["error"]["message"], answer
        assert await alice.evaluate(session, "localStorage.getItem('k')") == "alices-data"
        _, bobs = await bob.page(SITE + "/")
        cleared = await bob.call(
            "Storage.clearDataForOrigin", {"origin": SITE, "storageTypes": "local_storage"}, bobs
        )
        assert "error" not in cleared, cleared
        assert await alice.evaluate(session, "localStorage.getItem('k')") == "alices-data"
        await alice.call("Target.closeTarget", {"targetId": tab})
    guarded(target, before, "Storage.clearDataForOrigin", "browser-wide", who="bob")
    clean(target)


async def test_a_session_on_the_browser_target_is_kept_to_the_scope(target: Computer) -> None:
    """Target.attachToBrowserTarget (how Playwright opens its CDP sessions)
    gives a session with the browser's own session's powers: the relay serves
    it as that one. Bob's, with Alice's home-scope tab open and a new one
    made while he auto-attaches there, sees and reaches nothing of hers, the
    browser-wide and refused commands stay refused on it, its detach ends
    the sessions made through it, and all of it is on Bob's record."""
    before = attempt(target)
    async with agent(target, "alice") as alice, agent(target, "bob") as bob:
        hers, her_session = await alice.page(SITE + "/?alice")
        mine = await _open(bob, SITE + "/next?bob")
        opened = await bob.call("Target.attachToBrowserTarget")
        whole = opened["result"]["sessionId"]
        announced = [e for e in bob.events if e.get("method") == "Target.attachedToTarget"]
        assert announced[-1]["params"]["targetInfo"]["type"] == "browser", announced
        assert announced[-1]["params"]["sessionId"] == whole

        listed = await bob.call("Target.getTargets", {}, whole)
        assert mine in _targets(listed) and hers not in _targets(listed), listed
        contexts = (await bob.call("Target.getBrowserContexts", {}, whole))["result"]
        assert contexts["browserContextIds"] == [], contexts
        await bob.call("Target.setDiscoverTargets", {"discover": True}, whole)
        await bob.call(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
            whole,
        )
        # Alice's new tab is not held by Bob's auto-attach, nor announced to him.
        later = await _open(alice, SITE + "/next?alice-later")
        attached = await alice.call("Target.attachToTarget", {"targetId": later, "flatten": True})
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline(20)
        check = "document.readyState"
        while await alice.evaluate(attached["result"]["sessionId"], check) != "complete":
            assert loop.time() < end, "Alice's tab never loaded: Bob's auto-attach held it"
            await asyncio.sleep(0.05)
        await bob.call("Browser.getVersion", {}, whole)  # its events came before this
        on_whole = [e for e in bob.events if e.get("sessionId") == whole and "params" in e]
        heard = {e["params"].get("targetInfo", {}).get("targetId") for e in on_whole}
        assert mine in heard and hers not in heard and later not in heard, heard
        children = [
            e["params"]["sessionId"]
            for e in on_whole
            if e["method"] == "Target.attachedToTarget"
            and e["params"]["targetInfo"]["targetId"] == mine
        ]
        assert children, on_whole
        assert await bob.evaluate(children[0], "location.search") == "?bob"

        for method, params, told in (
            ("Target.attachToTarget", {"targetId": hers, "flatten": True}, "No target with given"),
            ("Target.closeTarget", {"targetId": hers}, "No target with given id found"),
            ("Target.attachToTarget", {"targetId": mine}, "guard unwrapped-only"),
            ("Browser.getBrowserCommandLine", {}, "guard not-allowed"),
            ("Target.sendMessageToTarget", {"message": "{}", "sessionId": "S"}, "not-allowed"),
            ("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, "guard browser-wide"),
            ("Storage.clearDataForOrigin", {"origin": SITE, "storageTypes": "all"}, "browser-wide"),
            ("Network.getAllCookies", {}, "guard browser-wide"),
        ):
            answer = await bob.call(method, params, whole)
            assert told in answer["error"]["message"], (method, answer)
            assert answer["sessionId"] == whole, answer
        # A tab it opens is Bob's: in the context of his own tab, not Alice's.
        made = (await bob.call("Target.createTarget", {"url": SITE + "/?bob"}, whole))["result"]
        contexts = set()
        for tab in (made["targetId"], mine):
            info = await bob.call("Target.getTargetInfo", {"targetId": tab}, whole)
            contexts.add(info["result"]["targetInfo"]["browserContextId"])
        assert len(contexts) == 1, contexts
        assert made["targetId"] not in _targets(await alice.call("Target.getTargets"))
        # A page's session opens no session on the browser target.
        _, page_session = await bob.page(SITE + "/?bob-page")
        refused = await bob.call("Target.attachToBrowserTarget", {}, page_session)
        assert "guard not-allowed" in refused["error"]["message"], refused

        await bob.call("Target.detachFromTarget", {"sessionId": whole})
        for gone in (whole, children[0]):
            answer = await bob.call("Runtime.evaluate", {"expression": "1"}, gone)
            assert answer["error"]["code"] == -32001, answer
        # Alice's tabs were never touched.
        assert await alice.evaluate(her_session, "location.search") == "?alice"
    guarded(target, before, "Browser.getBrowserCommandLine", "not-allowed", who="bob")
    guarded(target, before, "Target.attachToBrowserTarget", "not-allowed", who="bob")
    lines, _ = target.log(before)
    bobs = [x["action"] for x in lines if x.get("action", {}).get("who") == "bob"]
    rules = [(a["method"], (a.get("guard") or {}).get("rule")) for a in bobs]
    assert ("Target.attachToTarget", "scope") in rules, rules
    assert ("Target.closeTarget", "scope") in rules, rules
    methods = {a["method"] for a in bobs}
    assert {"Target.attachToBrowserTarget", "Target.setAutoAttach", "Target.getTargets"} <= methods
    assert {a.get("scope") for a in bobs} == {"bob"}, bobs
    clean(target)


async def test_the_control_tokens_session_on_the_browser_target_sees_every_scope(
    target: Computer,
) -> None:
    """The control token's link sees every scope: so does its session on the
    browser target, opened off the record (the computer's own command)."""
    async with (
        agent(target, "alice") as alice,
        agent(target, "bob") as bob,
        aiohttp.ClientSession() as http,
        http.ws_connect(
            requests.get(target.relay + "/json/version", timeout=10).json()["webSocketDebuggerUrl"],
            headers=target.headers(),
            max_msg_size=0,
        ) as ws,
    ):
        control = Agent(ws)
        hers, theirs = await _open(alice, SITE + "/?a"), await _open(bob, SITE + "/?b")
        whole = (await control.call("Target.attachToBrowserTarget"))["result"]["sessionId"]
        listed = await control.call("Target.getTargets", {}, whole)
        assert {hers, theirs} <= _targets(listed), listed
        await control.call("Target.detachFromTarget", {"sessionId": whole})
        gone = await control.call("Target.getTargets", {}, whole)
        assert gone["error"]["code"] == -32001, gone
        for who, tab in ((alice, hers), (bob, theirs)):
            await who.call("Target.closeTarget", {"targetId": tab})
