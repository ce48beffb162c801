"""``tabs/list``, ``tabs/open``, ``tabs/close``, ``tabs/activate``."""

from __future__ import annotations

from typing import Any

from agentenv.app.acting import acting, reading
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.protocol.answers import OpDone, TabOpened
from agentenv.protocol.browser import ScopeOnly, Tab, TabRef, TabsOpen
from agentenv.relay_link import visible

__all__ = ["tabs_activate", "tabs_close", "tabs_list", "tabs_open"]


async def tabs_list(browser: Browser, body: ScopeOnly, caller: Caller) -> list[Tab]:
    async with reading(browser, caller, "tabs/list", None, None):
        return await browser.tabs()


async def tabs_open(browser: Browser, body: TabsOpen, caller: Caller) -> TabOpened:
    # With no tab open there is none to stay behind: the tab just opens.
    before = await browser.shown() if body.background else None
    switches = browser.switches
    async with acting(browser, caller, "tabs/open", body):
        params: dict[str, Any] = {"url": body.url or "about:blank"}
        if body.background:
            params["background"] = True
        tab = str((await browser.link.call("Target.createTarget", params))["targetId"])
        if before is not None:
            # Chromium may give the new tab focus anyway: bring the old one
            # back, unless another call switched tabs meanwhile.
            if await visible(browser.link, tab) and browser.switches == switches:
                await browser.link.call("Target.activateTarget", {"targetId": before})
        else:
            browser.switches += 1
    return TabOpened(id=tab)


async def tabs_close(browser: Browser, body: TabRef, caller: Caller) -> OpDone:
    tab = await browser.tab(body.id)
    async with acting(browser, caller, "tabs/close", body, tab):
        await browser.close(tab)
    browser.switches += 1
    return OpDone()


async def tabs_activate(browser: Browser, body: TabRef, caller: Caller) -> OpDone:
    tab = await browser.tab(body.id)
    async with acting(browser, caller, "tabs/activate", body, tab):
        await browser.link.call("Target.activateTarget", {"targetId": tab})
    browser.switches += 1
    return OpDone()
