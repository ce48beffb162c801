"""Several writers' worth of actions at once: numbers unique and gap-free."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import aiohttp

from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.logfile import settle
from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import wait_for

CONTROL = "control-token-789"


async def _agent(url: str, token: str, site: Site, rounds: int) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": f"Bearer {token}"}, max_msg_size=0) as ws,
    ):
        cdp = RawCdp(ws)
        target = (await cdp.call("Target.createTarget", {"url": "about:blank"}))["result"][
            "targetId"
        ]
        attached = await cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        session = attached["result"]["sessionId"]
        for n in range(rounds):
            await cdp.call("Runtime.evaluate", {"expression": f"{n} + 1"}, sessionId=session)
            if n % 5 == 0:
                await cdp.call(
                    "Page.navigate", {"url": f"{site.url}/next?n={n}"}, sessionId=session
                )
        await cdp.call("Target.closeTarget", {"targetId": target})


async def _computer(url: str, rounds: int) -> None:
    """The computer's own actions, reported as the app server does: an op's
    commands are logged within it; its reads outside an op are not logged."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": f"Bearer {CONTROL}"}) as ws,
    ):
        cdp = RawCdp(ws)
        me = (await cdp.call("AgentEnv.whoami"))["result"]["conn"]
        for n in range(rounds):
            begun = await cdp.call(
                "AgentEnv.beginAction",
                {"via": "agentenv", "who": "agentenv", "op": f"op-{n}", "scope": [me]},
            )
            await cdp.call("Browser.getVersion")
            ended = await cdp.call(
                "AgentEnv.endAction", {"entry": begun["result"]["entry"], "ok": True}
            )
            assert "error" not in ended, ended
            await cdp.call("Target.getTargets")  # a read of its own: not on the record


async def test_two_agents_and_the_computer_at_once(authed_stack: NativeStack, site: Site) -> None:
    url = browser_ws_url(authed_stack.relay_http)
    await asyncio.gather(
        _agent(url, "alice-token-123", site, 40),
        _agent(url, "bob-token-456", site, 40),
        _computer(url, 40),
    )
    lines = settle(authed_stack.log_dir / "browser-browser.jsonl")
    seqs = [x["seq"] for x in lines]
    assert sorted(seqs) == list(range(1, len(seqs) + 1)), "numbers must be unique and gap-free"
    # alice and bob are two scopes: Bob's, not the home one, is made on his
    # first connection, with its first tab (the computer's own entry, conn 0).
    setup = [x for x in lines if "action" in x and x["action"].get("conn") == 0]
    assert [x["action"]["method"] for x in setup] == ["Target.createTarget"], setup
    lines = [x for x in lines if x not in setup]
    who = Counter(x["action"]["who"] for x in lines if "action" in x)
    assert who["alice"] >= 40 and who["bob"] >= 40 and who["agentenv"] == 80
    ops = {
        x["seq"]: x["action"] for x in lines if "action" in x and x["action"]["via"] == "agentenv"
    }
    assert len(ops) == 40 and all(
        o["ok"] is True and o["op"].startswith("op-") for o in ops.values()
    )
    own = [x["action"] for x in lines if "action" in x and x["action"]["who"] == "agentenv"]
    reads = [a for a in own if a.get("via") == "cdp"]
    assert len(reads) == 40 and all(a["method"] == "Browser.getVersion" for a in reads)
    assert {a["within"] for a in reads} == set(ops)


async def test_agentenv_commands_need_the_control_token(authed_stack: NativeStack) -> None:
    url = browser_ws_url(authed_stack.relay_http)
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": "Bearer alice-token-123"}) as ws,
    ):
        cdp = RawCdp(ws)
        answer = await cdp.call("AgentEnv.beginAction", {"via": "agentenv", "who": "x", "op": "y"})
        assert "control token" in answer["error"]["message"]
        assert "result" in await cdp.call("Browser.getVersion")  # still connected


async def test_scope_credits_commands_and_tab_events(authed_stack: NativeStack, site: Site) -> None:
    url = browser_ws_url(authed_stack.relay_http)
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": f"Bearer {CONTROL}"}) as control_ws,
        http.ws_connect(
            url,
            headers={
                "Authorization": "Bearer alice-token-123",
                "AgentEnv-Tag": "mcp-session-1",
            },
        ) as agent_ws,
    ):
        control, agent = RawCdp(control_ws), RawCdp(agent_ws)
        who = await control.call("AgentEnv.whoami")
        assert who["result"]["user"] == "agentenv"
        begun = await control.call(
            "AgentEnv.beginAction",
            {
                "via": "mcp",
                "who": "alice",
                "tool": "browser_tabs",
                "call": "c-1",
                "args": {"action": "new", "password": "nope-9"},
                "scope": ["mcp-session-1"],
            },
        )
        entry = begun["result"]["entry"]
        created = await agent.call("Target.createTarget", {"url": f"{site.url}/next"})
        tab = created["result"]["targetId"]
        await control.call("AgentEnv.endAction", {"entry": entry, "ok": True})
        # The computer's own op: its tab events are credited to agentenv.
        op = await control.call(
            "AgentEnv.beginAction",
            {
                "via": "agentenv",
                "who": "agentenv",
                "op": "tabs/close",
                "scope": [who["result"]["conn"]],
            },
        )
        await control.call("Target.closeTarget", {"targetId": tab})
        await control.call("AgentEnv.endAction", {"entry": op["result"]["entry"], "ok": True})

    log_file = authed_stack.log_dir / "browser-browser.jsonl"

    def closed() -> list[dict[str, Any]] | None:
        lines = settle(log_file)
        done = any(
            "tab" in x and x["tab"]["id"] == tab and x["tab"]["event"] == "closed" for x in lines
        )
        return lines if done else None

    lines = wait_for(closed, "the tab's closed event")
    action = next(x["action"] for x in lines if x["seq"] == entry)
    assert action == action | {
        "via": "mcp",
        "who": "alice",
        "tool": "browser_tabs",
        "call": "c-1",
        "ok": True,
    }
    assert action["args"]["password"] == {"withheld": "secret", "length": 6}
    create = next(
        x
        for x in lines
        if "action" in x
        and x["action"].get("method") == "Target.createTarget"
        and x["action"].get("tab") == tab
    )
    assert create["action"]["within"] == entry and create["action"]["who"] == "alice"
    events = {x["tab"]["event"]: x["tab"] for x in lines if "tab" in x and x["tab"]["id"] == tab}
    assert events["opened"]["by"] == {
        "kind": "command",
        "entry": create["seq"],
        "via": "cdp",
        "who": "alice",
        "within": entry,
    }
    assert events["closed"]["by"] == {"kind": "agentenv"}
