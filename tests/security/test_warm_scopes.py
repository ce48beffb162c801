"""Warm scopes (issue 41, item 2), against the built image with a fixed user
(alice), a control token, ``AGENTENV_MAX_SCOPES`` and two warm scopes,
driven over raw CDP through the relay, and looked at past the relay on
Chromium's own port inside the container.

- ``scopes/open`` hands over a context made ahead: its one blank tab answers
  the agent's first ``Runtime.evaluate`` at once, and the pool fills again.
- Before it is handed over, a warm context is reachable by no link: not
  listed (``Target.getTargets``, ``getBrowserContexts``, ``/json/list``),
  no event or auto-attach names it, and no command by id reaches it, for an
  agent of a fixed scope, of an opened one, or the control token.
- ``scopes/reset`` hands over a warm one too; ``scopes/close`` leaves the
  pool full; ``data/reset``, a warm tab that goes, and the relay restarting
  each throw the warm contexts away: none is ever handed over after.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.security.attacks import Agent, clean
from tests.support.container import SITE, SUPERVISORCTL, Computer, computer
from tests.support.timing import deadline, wait_for

WARM = 2

#: Run inside the computer past the relay: Chromium's own view, as JSON.
#: ``list``: every context and target; ``close TAB``: close a tab.
_RAW = """
import asyncio, json, sys, urllib.request
import aiohttp

async def main():
    with urllib.request.urlopen("http://127.0.0.1:6666/json/version") as answer:
        endpoint = json.load(answer)["webSocketDebuggerUrl"]
    async with aiohttp.ClientSession() as http, http.ws_connect(endpoint) as ws:
        n = 0
        async def call(method, params):
            nonlocal n
            n += 1
            await ws.send_json({"id": n, "method": method, "params": params})
            while True:
                got = await ws.receive_json(timeout=20)
                if got.get("id") == n:
                    return got.get("result", got)
        if sys.argv[1] == "close":
            return await call("Target.closeTarget", {"targetId": sys.argv[2]})
        contexts = await call("Target.getBrowserContexts", {})
        targets = await call("Target.getTargets", {})
        return {
            "default": contexts["defaultBrowserContextId"],
            "contexts": contexts["browserContextIds"],
            "targets": [
                {"id": t["targetId"], "context": t.get("browserContextId"),
                 "type": t["type"], "url": t["url"]}
                for t in targets["targetInfos"]
            ],
        }

print(json.dumps(asyncio.run(main())))
"""


@pytest.fixture(scope="module")
def pc(image: str) -> Iterator[Computer]:
    env = {"AGENTENV_MAX_SCOPES": "4", "AGENTENV_WARM_SCOPES": str(WARM)}
    with computer(image, users={"alice": "alice-token-5f1c"}, env=env) as running:
        running.serve_site()
        yield running


def _chromium(pc: Computer, *args: str) -> Any:
    out = pc.exec("/opt/agentenv/venv/bin/python", "-c", _RAW, *args, user="agentenv")
    return json.loads(out.strip().splitlines()[-1])


def _metrics(pc: Computer) -> dict[str, float]:
    text = requests.get(pc.app + "/metrics", headers=pc.headers(None), timeout=10).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _warm(pc: Computer) -> dict[str, str]:
    """The warm contexts now, once the pool is full: context -> its one tab,
    as Chromium lists them (the contexts no scope holds: every other context
    of this computer is an open scope's, listed by the caller)."""
    wait_for(lambda: _metrics(pc).get("agentenv_scopes_warm") == WARM, "the warm pool to fill", 60)
    return _unowned(pc)


def _unowned(pc: Computer) -> dict[str, str]:
    held = {_context_of(pc, s["scope"]) for s in pc.op("scopes/list")["scopes"]}
    raw = _chromium(pc, "list")
    out: dict[str, str] = {}
    for context in raw["contexts"]:
        if context in held:
            continue
        tabs = [t for t in raw["targets"] if t["context"] == context and t["type"] == "page"]
        assert [t["url"] for t in tabs] == ["about:blank"], (context, tabs)  # one blank tab
        out[context] = tabs[0]["id"]
    return out


_SCOPE_CONTEXTS: dict[str, str] = {}


def _context_of(pc: Computer, scope: str) -> str:
    return _SCOPE_CONTEXTS.get(scope, "")


@asynccontextmanager
async def _cdp(pc: Computer, token: str) -> AsyncIterator[Agent]:
    url = f"ws://{pc.relay_address}/devtools/browser?token={token}"
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
        yield Agent(ws)


def _open(pc: Computer) -> dict[str, Any]:
    made = pc.op("scopes/open")
    pc.users[made["scope"]] = made["token"]
    return dict(made)


async def _ready(pc: Computer, token: str) -> tuple[str, str, float]:
    """The scope's context and its one tab, and how long the first
    ``Runtime.evaluate`` on it took from connecting, checking it sees
    exactly its one blank tab."""
    start = time.monotonic()
    async with _cdp(pc, token) as me:
        targets = (await me.call("Target.getTargets"))["result"]["targetInfos"]
        pages = [t for t in targets if t["type"] == "page"]
        assert [t["url"] for t in pages] == ["about:blank"], targets
        attached = await me.call(
            "Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True}
        )
        answer = await me.call(
            "Runtime.evaluate", {"expression": "1 + 1"}, attached["result"]["sessionId"]
        )
        took = time.monotonic() - start
        assert answer["result"]["result"]["value"] == 2, answer
        contexts = (await me.call("Target.getBrowserContexts"))["result"]
        assert contexts["browserContextIds"] == [], contexts  # none made: its own is the default
    return contexts["defaultBrowserContextId"], pages[0]["targetId"], took


def _opened(pc: Computer) -> tuple[dict[str, Any], str, str, float]:
    made = _open(pc)
    context, tab, took = asyncio.run(_ready(pc, made["token"]))
    _SCOPE_CONTEXTS[made["scope"]] = context
    return made, context, tab, took


def _close(pc: Computer, name: str) -> None:
    pc.op("scopes/close", {"scope": name})
    _SCOPE_CONTEXTS.pop(name, None)


def test_an_opened_scope_is_handed_a_warm_context_that_answers_at_once(pc: Computer) -> None:
    warm = _warm(pc)
    assert len(warm) == WARM
    made, context, tab, took = _opened(pc)
    # Handed over, not made: the oldest warm context, its tab the one made ahead.
    assert context in warm and warm[context] == tab, (context, warm)
    assert took < deadline(1.0), took  # a cold one starts a renderer first
    # The pool fills again, with contexts of its own.
    again = _warm(pc)
    assert context not in again and len(again) == WARM
    # The log gives the scope its first tab, as the computer's own.
    lines = pc.log()[0]
    own = [
        x["action"]
        for x in lines
        if x.get("action", {}).get("method") == "Target.createTarget"
        and x["action"].get("tab") == tab
    ]
    assert own and own[-1]["who"] == "agentenv", own
    _close(pc, made["scope"])
    assert context not in _chromium(pc, "list")["contexts"]  # closed: disposed of


async def _every_view(pc: Computer, token: str, warm: dict[str, str]) -> list[dict[str, Any]]:
    """What one link learns of the warm contexts: listings, commands by id,
    discovery and auto-attach (kept on while a new warm context is made).
    Returns every event it was sent."""
    contexts, tabs = set(warm), set(warm.values())
    async with _cdp(pc, token) as me:
        targets = (await me.call("Target.getTargets"))["result"]["targetInfos"]
        assert not {t["targetId"] for t in targets} & tabs, targets
        assert not {t.get("browserContextId") for t in targets} & contexts
        listed = (await me.call("Target.getBrowserContexts"))["result"]
        assert not set(listed["browserContextIds"]) & contexts, listed
        assert listed["defaultBrowserContextId"] not in contexts
        for tab in tabs:
            for method in ("Target.attachToTarget", "Target.activateTarget", "Target.closeTarget"):
                params: dict[str, Any] = {"targetId": tab, "flatten": True}
                if method != "Target.attachToTarget":
                    params = {"targetId": tab}
                answer = await me.call(method, params)
                assert "error" in answer, (method, answer)
                assert answer["error"]["message"] == "No target with given id found", answer
        for context in contexts:
            answer = await me.call(
                "Target.createTarget", {"url": "about:blank", "browserContextId": context}
            )
            assert "error" in answer, answer
            answer = await me.call("Target.disposeBrowserContext", {"browserContextId": context})
            assert "error" in answer, answer
            answer = await me.call("Storage.getCookies", {"browserContextId": context})
            assert "error" in answer, answer
        await me.call("Target.setDiscoverTargets", {"discover": True})
        await me.call(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
        )
        # A scope opened now takes a warm one; the one made in its place must
        # reach this link by no event either.
        made = _open(pc)
        _SCOPE_CONTEXTS[made["scope"]] = "?"
        fresh = await asyncio.to_thread(
            wait_for,
            lambda: (lambda w: w if len(w) == WARM and set(w) - contexts else None)(
                _unowned_but(pc, made["scope"])
            ),
            "a new warm context",
            60,
        )
        await me.call("Browser.getVersion")  # every event sent before it is read
        seen = list(me.events)
        _close(pc, made["scope"])
    text = json.dumps(seen)
    for context, tab in fresh.items():
        assert context not in text and tab not in text, (context, seen[:5])
    return seen


def _unowned_but(pc: Computer, scope: str) -> dict[str, str]:
    """The contexts no scope but ``scope`` (opened, not yet connected) holds:
    the warm ones, and ``scope``'s own, told apart by the log's tab."""
    raw = _chromium(pc, "list")
    lines = pc.log()[0]
    given = {
        x["action"].get("tab")
        for x in lines
        if x.get("action", {}).get("method") == "Target.createTarget"
    }
    held = {c for n, c in _SCOPE_CONTEXTS.items() if n != scope}
    out: dict[str, str] = {}
    for context in raw["contexts"]:
        tabs = [t["id"] for t in raw["targets"] if t["context"] == context]
        if context in held or not tabs or tabs[0] in given:
            continue
        out[context] = tabs[0]
    return out


def test_a_warm_context_is_reachable_by_no_link_before_it_is_handed_over(pc: Computer) -> None:
    """alice (a fixed scope), an opened scope's agent, and the control token:
    none lists, reaches or hears of a warm context or its tab."""
    other, _, _, _ = _opened(pc)
    warm = _warm(pc)
    for token in (pc.users["alice"], other["token"], str(pc.control)):
        asyncio.run(_every_view(pc, token, _warm(pc)))
        warm = _warm(pc)
    # The HTTP discovery paths, for an agent and for the control token.
    for token in (pc.users["alice"], str(pc.control)):
        listed = requests.get(f"{pc.relay}/json/list?token={token}", timeout=10).json()
        assert not {t["id"] for t in listed} & set(warm.values()), listed
        for tab in warm.values():
            page = f"ws://{pc.relay_address}/devtools/page/{tab}?token={token}"
            assert asyncio.run(_handshake(page)) == 404
            closed = requests.get(f"{pc.relay}/json/close/{tab}?token={token}", timeout=10)
            assert closed.status_code == 404, closed.text
    assert _warm(pc) == warm  # nothing above touched them
    _close(pc, other["scope"])
    clean(pc, *[t for n, t in pc.users.items() if n != "alice"])


async def _handshake(url: str) -> int:
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(url):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_reset_close_and_data_reset_with_the_pool(pc: Computer) -> None:
    made, first, _, _ = _opened(pc)

    async def use(token: str) -> None:
        async with _cdp(pc, token) as me:
            _tab, _ = await me.page(SITE + "/?warm")
            await me.call(
                "Storage.setCookies",
                {"cookies": [{"name": "w", "value": "warm-9911", "url": SITE}]},
            )

    asyncio.run(use(made["token"]))
    warm = _warm(pc)
    pc.op("scopes/reset", {"scope": made["scope"]})
    context, _, _ = asyncio.run(_ready(pc, made["token"]))  # one blank tab again
    _SCOPE_CONTEXTS[made["scope"]] = context
    assert context in warm and context != first
    assert first not in _chromium(pc, "list")["contexts"]

    async def cookies(token: str) -> list[Any]:
        async with _cdp(pc, token) as me:
            return list((await me.call("Storage.getCookies"))["result"]["cookies"])

    assert asyncio.run(cookies(made["token"])) == []
    _close(pc, made["scope"])
    assert len(_warm(pc)) == WARM

    # data/reset throws every warm context away; those made after are new.
    before = _warm(pc)
    pc.op("data/reset")
    after = _warm(pc)
    assert not set(after) & set(before), (before, after)
    assert not set(before) & set(_chromium(pc, "list")["contexts"])
    made, context, _, _ = _opened(pc)
    assert context in after
    _close(pc, made["scope"])


def test_a_warm_tab_that_goes_is_never_handed_over(pc: Computer) -> None:
    warm = _warm(pc)
    context, tab = next(iter(warm.items()))
    _chromium(pc, "close", tab)  # past the relay: only the watcher sees it go
    wait_for(
        lambda: context not in _chromium(pc, "list")["contexts"],
        "the spoiled warm context to be disposed of",
        30,
    )
    again = _warm(pc)
    assert context not in again
    for _ in range(WARM + 1):  # more than the pool: the last one is made cold
        _made, got, _, _ = _opened(pc)
        assert got != context
    for name in list(_SCOPE_CONTEXTS):
        _close(pc, name)


def test_a_relay_started_again_disposes_of_the_warm_contexts_it_left(pc: Computer) -> None:
    warm = _warm(pc)
    pc.exec(*SUPERVISORCTL, "restart", "relay")
    wait_for(
        lambda: requests.get(pc.app + "/readyz", timeout=5).status_code == 200,
        "the computer to be ready again",
        60,
    )
    again = _warm(pc)
    assert not set(again) & set(warm), (warm, again)
    assert not set(warm) & set(_chromium(pc, "list")["contexts"])
    made, context, _, _ = _opened(pc)
    assert context in again
    _close(pc, made["scope"])


def test_after_chromium_restarts_the_pool_is_made_again_and_agents_connect(pc: Computer) -> None:
    """Chromium's restart takes the warm contexts with it: new ones are made
    on the watcher's next connection, and agents reach the new browser (the
    relay sends them to the endpoint the watcher learnt again)."""
    warm = _warm(pc)
    pc.exec(*SUPERVISORCTL, "restart", "chromium")
    wait_for(
        lambda: requests.get(pc.app + "/readyz", timeout=5).status_code == 200,
        "the computer to be ready again",
        60,
    )
    again = _warm(pc)
    assert not set(again) & set(warm), (warm, again)
    made, context, _, _ = _opened(pc)
    assert context in again
    _close(pc, made["scope"])
