"""Every way a local URL could get opened: /json/new, CDP commands, a page's
own script, Playwright. The relay refuses what it sees; Chromium's policies
stop what it cannot (a page's own script)."""

from __future__ import annotations

import pytest
import requests
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from tests.security.attacks import agent, attempt, clean, guarded
from tests.support.container import SITE, Computer

LOCAL = [
    "file:///etc/passwd",
    "FILE:///etc/passwd",
    " \tfi\nle:///etc/passwd",
    "%66ile:///etc/passwd",
    "chrome://version",
    "view-source:file:///etc/passwd",
    "view-source:%66ile:///etc/passwd",
    "about:version",
    "chrome-extension://abcdefghijklmnopabcdefghijklmnop/x.html",
    "devtools://devtools/bundled/inspector.html",
]


def _no_local_tab(target: Computer) -> None:
    for tab in target.op("tabs/list"):
        url = tab["url"].lower()
        assert not url.startswith(("file:", "chrome:", "view-source:", "devtools:")), tab


@pytest.mark.parametrize(
    "query",
    [
        "%2566ile:///etc/passwd",
        "%66ile:///etc/passwd",
        "file:///etc/passwd",
        "%2563hrome://version",
        "view-source:%2566ile:///etc/passwd",
        "%2576iew-source:file:///etc/passwd",
    ],
)
def test_json_new_opens_no_local_page(target: Computer, query: str) -> None:
    before = attempt(target)
    token = target.token("alice")
    answer = requests.put(f"{target.relay}/json/new?{query}&token={token}", timeout=30)
    if answer.status_code == 200:
        # Decoded once, as Chromium decodes it, the query is no URL Chromium
        # could read as local: the tab opens at nothing local.
        assert not answer.json()["url"].lower().startswith(("file:", "chrome:", "view-source:"))
        requests.get(f"{target.relay}/json/close/{answer.json()['id']}?token={token}", timeout=30)
    else:
        assert answer.status_code == 403, answer.text
        assert "local-url" in answer.json()["error"]["message"]
        guarded(target, before, "Target.createTarget", "local-url")
    _no_local_tab(target)
    clean(target)


@pytest.mark.parametrize("url", LOCAL)
async def test_cdp_commands_open_no_local_page(target: Computer, url: str) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        created = await alice.call("Target.createTarget", {"url": url})
        assert created["error"]["code"] == -32000 and "local-url" in created["error"]["message"]
        tab, session = await alice.page(SITE + "/")
        navigated = await alice.call("Page.navigate", {"url": url}, session)
        assert "local-url" in navigated["error"]["message"]
        assert await alice.evaluate(session, "location.href") == SITE + "/"
        await alice.call("Target.closeTarget", {"targetId": tab})
    guarded(target, before, "Target.createTarget", "local-url")
    guarded(target, before, "Page.navigate", "local-url")
    _no_local_tab(target)
    clean(target)


async def test_a_pages_own_script_is_stopped_by_chromium(target: Computer) -> None:
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/")
        for script in (
            "location = 'file:///etc/passwd'",
            "location = 'chrome://version'",
            "window.open('file:///etc/passwd')",
            "document.body.innerHTML = \"<iframe src='file:///etc/passwd'></iframe>\"",
        ):
            await alice.evaluate(session, script)
        reads = await alice.evaluate(
            session,
            "fetch('file:///etc/passwd').then(r => r.text()).catch(e => 'refused: ' + e)",
        )
        assert str(reads).startswith("refused"), reads
        await alice.call("Target.closeTarget", {"targetId": tab})
    listed = target.op("tabs/list", user="alice")  # alice's tabs: the ones she may attach
    assert all("passwd" not in t["url"] and not t["url"].startswith("chrome:") for t in listed)
    # Whatever a page tried, no tab shows a local page's content.
    async with agent(target) as alice:
        for tab in listed:
            attached = await alice.call(
                "Target.attachToTarget", {"targetId": tab["id"], "flatten": True}
            )
            text = await alice.evaluate(
                attached["result"]["sessionId"], "document.body ? document.body.innerText : ''"
            )
            assert "root:x:0:0" not in str(text)


async def test_playwright_cannot_go_to_a_local_page(target: Computer) -> None:
    before = attempt(target)
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(
            target.relay, headers={"Authorization": f"Bearer {target.token('alice')}"}
        )
        page = await browser.contexts[0].new_page()
        for url in ("file:///etc/passwd", "chrome://settings"):
            with pytest.raises(PlaywrightError, match="local-url"):
                await page.goto(url)
        await page.goto(SITE + "/")
        assert await page.title() == "Start"
        await page.close()
        await browser.close()
    guarded(target, before, "Page.navigate", "local-url")
    clean(target)
