"""A scope's session storage, as a profile keeps it (docs/spec.md section 3,
"Profiles"): read from the scope's open tabs, and given back to the tab in
front of a fresh scope.

Session storage belongs to a tab: each tab holds its own per origin, and
only the origin a tab shows can be read (``DOMStorage``, no page script
runs). A save keeps, per origin, the items of the first tab listed that
shows it. A load has no tab of the profile's to give them to, so it gives
them to the scope's tab in front, the one its agent starts in: that tab
visits each origin, served blank (no request reaches the network, no site
script runs), is given the origin's items (a ``Runtime.callFunctionOn``
argument, which the log withholds), and is left at ``about:blank`` with its
history reset, as a fresh scope's tab is. A load that fails replaces that
tab with a new blank one, whose session storage is empty.
"""

from __future__ import annotations

import asyncio
import contextlib

from agentenv.app.app_errors import OpError
from agentenv.app.local_storage import origin, run_on, served_blank
from agentenv.app.op_browser import Browser
from agentenv.relay_link import BrowserError

__all__ = ["give_to_front", "replace_front", "tabs_session_storage"]

#: How long the tab's blank page may take to become the active one.
RESET_WAIT_S = 5.0
#: The function that writes its argument's items into the page's session storage.
WRITE_SESSION = (
    "function (items) { for (const [k, v] of Object.entries(items)) sessionStorage.setItem(k, v);"
    " return sessionStorage.length; }"
)


async def tabs_session_storage(browser: Browser) -> dict[str, dict[str, str]]:
    """Per origin a scope's open tabs show, the session storage of the first
    tab showing it; an origin holding none is left out."""
    found: dict[str, dict[str, str]] = {}
    for page in await browser.pages():
        at = origin(str(page.get("url", "")))
        if at is None or at in found:
            continue
        session = await browser.link.session(str(page["targetId"]))
        answer = await browser.link.call(
            "DOMStorage.getDOMStorageItems",
            {"storageId": {"securityOrigin": at, "isLocalStorage": False}},
            session=session,
        )
        entries = answer.get("entries")
        items = {
            str(e[0]): str(e[1])
            for e in (entries if isinstance(entries, list) else [])
            if isinstance(e, list) and len(e) == 2
        }
        if items:
            found[at] = items
    return found


async def give_to_front(browser: Browser, kept: dict[str, dict[str, str]]) -> None:
    """``kept`` into the session storage of the scope's tab in front, left
    blank with no history after."""
    if not kept:
        return
    link = browser.link
    tab = await browser.active()
    session = await link.session(tab)
    async with browser.storage_lock:
        for at, items in sorted(kept.items()):
            await served_blank(browser, session, at)
            await run_on(browser, session, at, WRITE_SESSION, [items])
        await link.call("Page.navigate", {"url": "about:blank"}, session=session)
        await _history_reset(browser, session)


async def _history_reset(browser: Browser, session: str) -> None:
    """No back or forward in the tab: once its blank page is the active one
    (until it commits, Chromium answers "Not attached to an active page")."""
    loop = asyncio.get_running_loop()
    end = loop.time() + RESET_WAIT_S
    while True:
        try:
            await browser.link.call("Page.resetNavigationHistory", {}, session=session)
            return
        except BrowserError:
            if loop.time() > end:
                raise
            await asyncio.sleep(0.05)


async def replace_front(browser: Browser) -> None:
    """Undo :func:`give_to_front` (best effort): a new blank tab in front
    (its session storage empty), the old one closed."""
    with contextlib.suppress(BrowserError, OpError):
        old = await browser.active()
        await browser.link.call("Target.createTarget", {"url": "about:blank"})
        await browser.close(old)
