"""A tab event's cause stays in its scope (issue 40, item 5): an act on a
service worker counts on the tabs that worker serves, and on no other
scope's; and an agent's script on a worker's own endpoint is credited to
that agent, not to the agent whose tab it moves."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import requests

from tests.security.attacks import Agent, agent, attempt
from tests.support.container import USERS, Computer, computer
from tests.support.timing import deadline, wait_for

#: A page that puts itself under a service worker that claims it at once.
WORKER_PAGE = """<!doctype html><title>worker</title>
<script>navigator.serviceWorker.register('/sw.js');</script>"""
WORKER = """self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', e => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', () => {});"""
FILES = {"sw.html": WORKER_PAGE, "sw.js": WORKER, "page.html": "<!doctype html><p>page</p>"}


async def _controlled(who: Agent, session: str) -> None:
    """Wait (bounded) until the page's service worker controls it."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(20)
    while not await who.evaluate(session, "!!navigator.serviceWorker.controller"):
        assert loop.time() < end, "the page's service worker never took control of it"
        await asyncio.sleep(0.1)


async def _worker(who: Agent, origin: str) -> str:
    """The id of the service worker of ``origin`` that ``who`` sees (bounded)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(20)
    while True:
        listed = (await who.call("Target.getTargets"))["result"]["targetInfos"]
        found = [
            t["targetId"]
            for t in listed
            if t["type"] == "service_worker" and t["url"].startswith(origin)
        ]
        if found:
            return str(found[0])
        assert loop.time() < end, f"no service worker of {origin} listed"
        await asyncio.sleep(0.1)


def _navigated(target: Computer, after: int, tab: str, part: str) -> dict[str, Any]:
    """The tab line of ``tab`` navigating to a URL holding ``part``, with its
    line's ``seq`` (bounded)."""

    def found() -> dict[str, Any] | None:
        for line in target.log(after)[0]:
            event = line.get("tab")
            if event and event["id"] == tab and part in event["url"]:
                return {**event, "seq": line["seq"]}
        return None

    return wait_for(found, f"the log to hold {tab}'s navigation to {part}", timeout_s=30)


def _entry(target: Computer, seq: int) -> dict[str, Any]:
    lines = target.log(seq - 1)[0]
    [found] = [x["action"] for x in lines if x["seq"] == seq and "action" in x]
    return dict(found)


async def test_a_workers_act_is_no_cause_in_another_scope(target: Computer) -> None:
    """Alice's acting command on her own service worker was the latest acting
    entry of every tab in every scope: Bob's page navigating itself, in his
    scope, was written ``after`` her entry (4th red team, 3 of 3)."""
    origin = target.serve_folder(8020, "/tmp/workers", FILES)
    before = attempt(target)
    async with agent(target, "alice") as alice, agent(target, "bob") as bob:
        _, page = await alice.page(origin + "/sw.html")
        await _controlled(alice, page)
        worker = await _worker(alice, origin)
        attached = await alice.call("Target.attachToTarget", {"targetId": worker, "flatten": True})
        on_worker = attached["result"]["sessionId"]
        tab, session = await bob.page(origin + "/page.html")
        # Bob's page moves itself a while after his own act.
        moving = "setTimeout(() => { location.search = '?moved' }, 3000); 'set'"
        assert await bob.evaluate(session, moving) == "set"
        acted = await alice.call("Runtime.evaluate", {"expression": "1 + 1"}, on_worker)
        assert acted["result"]["result"]["value"] == 2
        moved = _navigated(target, before, tab, "?moved")
    lines = target.log(before)[0]
    [alices] = [
        x["seq"]
        for x in lines
        if x.get("action", {}).get("who") == "alice"
        and x["action"].get("method") == "Runtime.evaluate"
        and x["action"].get("tab") == worker
    ]
    assert alices < moved["seq"], "alice's act came after the navigation: the test proves nothing"
    assert moved["by"]["kind"] == "page", moved
    assert moved["by"]["after"] != alices, moved
    assert _entry(target, moved["by"]["after"])["who"] == "bob", moved


async def test_a_script_on_a_workers_endpoint_is_its_senders(image: str) -> None:
    """In a shared scope, Alice navigating Bob's tab through the service
    worker's own ``/devtools/page/<id>`` endpoint was credited to Bob (his
    entry the latest on his tab): it is hers."""
    with computer(image, scopes={user: "team" for user in USERS}) as pc:
        origin = pc.serve_folder(8021, "/tmp/workers", FILES)
        before = attempt(pc)
        async with agent(pc, "bob") as bob:
            tab, session = await bob.page(origin + "/sw.html")
            await _controlled(bob, session)
            worker = await _worker(bob, origin)
            listed = requests.get(
                f"{pc.relay}/json/list", headers=pc.headers("alice"), timeout=deadline(10)
            ).json()
            assert any(t["id"] == worker for t in listed), "the worker is not listed to alice"
            endpoint = pc.relay.replace("http", "ws", 1) + f"/devtools/page/{worker}"
            move = (
                "clients.matchAll({type: 'window'}).then(cs => Promise.all(cs.map("
                "c => c.navigate(c.url.split('?')[0] + '?by-alice')))).then(cs => cs.length)"
            )
            async with (
                aiohttp.ClientSession() as http,
                http.ws_connect(f"{endpoint}?token={pc.token('alice')}") as ws,
            ):
                alice = Agent(ws)
                answer = await alice.call(
                    "Runtime.evaluate", {"expression": move, "awaitPromise": True}
                )
                assert answer["result"]["result"]["value"] >= 1, answer
            moved = _navigated(pc, before, tab, "?by-alice")
        assert moved["by"]["kind"] == "page", moved
        cause = _entry(pc, moved["by"]["after"])
        assert cause["who"] == "alice" and cause["method"] == "Runtime.evaluate", cause
