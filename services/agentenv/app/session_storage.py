"""A scope's session storage, as a profile keeps it (docs/spec.md section 3,
"Profiles"): read from the scope's open tabs, and given back to the tab in
front of a fresh scope.

Session storage belongs to a tab: each tab holds its own per origin, and
only the origin a tab shows can be read (``DOMStorage``, no page script
runs). A save keeps, per origin, the items of the first tab listed that
shows it. A load has no tab of the profile's to give them to, so it gives
them to the scope's tab in front, the one its agent starts in:

- the tab visits each origin, served blank (``Fetch`` catches every request
  to those origins while the tab is on one: none reaches a site), and is
  given the origin's items as one JSON string (a ``Runtime.callFunctionOn``
  argument, whose strings the log withholds, keys and values alike);
- a tab already holding session storage of an origin is refused (409): a
  load overwrites nothing;
- then the tab goes back to the page it showed (loaded again, now with the
  restored state: a task's start page opened before the load shows the
  session), or to ``about:blank``, and its history is reset: it holds one
  entry, as a tab just opened does;
- a load that fails part way clears what it wrote, and the tab goes back
  the same way.
"""

from __future__ import annotations

import asyncio
import contextlib

import orjson

from agentenv.app.app_errors import OpError
from agentenv.app.local_storage import origin, run_on, served_blank
from agentenv.app.op_browser import Browser
from agentenv.relay_link import BrowserError

__all__ = ["give_to_front", "tabs_session_storage"]

#: How long the tab's page may take to become the active one.
RESET_WAIT_S = 5.0
#: Writes its argument's items (a JSON string) into the page's session
#: storage; -1, writing nothing, when it holds some already.
WRITE_SESSION = (
    "function (json) { if (sessionStorage.length) return -1;"
    " for (const [k, v] of Object.entries(JSON.parse(json))) sessionStorage.setItem(k, v);"
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
    """``kept`` into the session storage of the scope's tab in front, which
    then shows what it showed, with no history; all of it, or nothing."""
    if not kept:
        return
    link = browser.link
    tab = await browser.active()
    shown = next(
        (str(p.get("url") or "") for p in await browser.pages() if p.get("targetId") == tab), ""
    )
    session = await link.session(tab)
    written: list[str] = []
    async with browser.storage_lock:
        patterns = [{"urlPattern": f"{at}/*"} for at in sorted(kept)]
        await link.call("Fetch.enable", {"patterns": patterns}, session=session)
        try:
            for at, items in sorted(kept.items()):
                await served_blank(browser, session, at)
                count = await run_on(
                    browser, session, at, WRITE_SESSION, [orjson.dumps(items).decode()]
                )
                if count == -1:
                    raise OpError(
                        409,
                        f"the scope's tab in front already holds session storage of {at}: "
                        "a profile loads into a fresh scope only; nothing was loaded",
                    )
                written.append(at)
        except (BrowserError, OpError):
            for at in written:
                with contextlib.suppress(BrowserError, OpError):
                    await served_blank(browser, session, at)
                    await run_on(browser, session, at, "sessionStorage.clear()", None)
            raise
        finally:
            await _back(browser, session, shown)


async def _back(browser: Browser, session: str, shown: str) -> None:
    """The tab off the origins (while still caught), then to what it showed,
    with one entry of history (best effort: the op's answer says the rest)."""
    link = browser.link
    with contextlib.suppress(BrowserError):
        await link.call("Page.navigate", {"url": "about:blank"}, session=session)
    with contextlib.suppress(BrowserError):
        await link.call("Fetch.disable", {}, session=session)
    if shown and shown != "about:blank":
        with contextlib.suppress(BrowserError):
            await link.call("Page.navigate", {"url": shown}, session=session)
    loop = asyncio.get_running_loop()
    end = loop.time() + RESET_WAIT_S
    while True:
        try:  # until the page commits: "Not attached to an active page"
            await link.call("Page.resetNavigationHistory", {}, session=session)
            return
        except BrowserError:
            if loop.time() > end:
                return
            await asyncio.sleep(0.05)
