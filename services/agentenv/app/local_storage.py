"""``local_storage/get``, ``local_storage/set``, ``local_storage/clear``, and
reading or writing one origin's local storage without loading its pages."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any
from urllib.parse import urlsplit

import orjson

from agentenv.app.acting import acting, reading
from agentenv.app.app_errors import OpError
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.protocol.answers import LocalStorageItems, OpDone
from agentenv.protocol.browser import LocalStorageClear, LocalStorageGet, LocalStorageSet
from agentenv.relay_link import BrowserError

__all__ = [
    "READ_ALL",
    "WRITE_ALL",
    "local_storage_clear",
    "local_storage_get",
    "local_storage_set",
    "on_origin",
    "origin",
    "run_on",
    "served_blank",
    "tab_origins",
]

#: The page an origin is served as: nothing to load (no favicon either).
_BLANK_PAGE = base64.b64encode(
    b'<!doctype html><title>agentenv</title><link rel=icon href="data:,">'
).decode()
#: Evaluated on an origin: its items as a JSON string.
READ_ALL = "JSON.stringify(Object.fromEntries(Object.entries(localStorage)))"


#: The function that writes its argument's items into the origin's local
#: storage. The items go as one JSON string, a ``Runtime.callFunctionOn``
#: argument, whose strings the log withholds: in the expression they were
#: written in clear (a restored session's tokens), and as an object the
#: log would keep its keys (which may name a site's API key).
WRITE_ALL = (
    "function (json) { for (const [k, v] of Object.entries(JSON.parse(json)))"
    " localStorage.setItem(k, v); return localStorage.length; }"
)


def origin(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL, without any user part (a
    logged URL's is redacted); None for other URLs and malformed ones."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:  # "Invalid IPv6 URL", a port out of range
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")


async def tab_origins(browser: Browser) -> set[str]:
    return {o for o in (origin(p.get("url", "")) for p in await browser.pages()) if o}


async def on_origin(
    browser: Browser, at: str, expression: str, arguments: list[Any] | None = None
) -> Any:
    """Evaluate ``expression`` in a hidden tab at origin ``at``, served blank;
    with ``arguments``, call it (a function) with them. A promise is awaited.

    The tab loads nothing from the network: every request to the origin is
    answered with an empty page (Fetch), as Playwright's storage state
    does. The tab is closed after.
    """
    link = browser.link
    async with browser.storage_lock:
        created = await link.call("Target.createTarget", {"url": "about:blank", "background": True})
        tab = str(created["targetId"])
        try:
            session = await link.session(tab)
            await link.call(
                "Fetch.enable", {"patterns": [{"urlPattern": f"{at}/*"}]}, session=session
            )
            # Every request stays caught until the tab closes: none reaches the site.
            await served_blank(browser, session, at)
            return await run_on(browser, session, at, expression, arguments)
        finally:
            with contextlib.suppress(BrowserError):
                await browser.close(tab)


async def served_blank(browser: Browser, session: str, at: str) -> None:
    """The tab of ``session`` navigated to origin ``at``, whose page is
    answered blank. The caller has ``Fetch`` catch the origin's requests
    (and keeps it on while the tab is there: a request let go would reach
    the site, with the scope's cookies)."""
    link = browser.link
    with link.events("Fetch.requestPaused", session) as paused:
        navigate = asyncio.create_task(
            link.call("Page.navigate", {"url": f"{at}/"}, session=session)
        )
        try:
            request = await asyncio.wait_for(paused.get(), 10)
        except TimeoutError:
            navigate.cancel()
            raise OpError(
                502,
                f"the page at {at} did not load within 10 s: give the origin as "
                "the browser shows it (the scheme it ends on, no default port)",
            ) from None
        await link.call(
            "Fetch.fulfillRequest",
            {
                "requestId": request["requestId"],
                "responseCode": 200,
                "responseHeaders": [{"name": "Content-Type", "value": "text/html"}],
                "body": _BLANK_PAGE,
            },
            session=session,
        )
        await navigate


async def run_on(
    browser: Browser, session: str, at: str, expression: str, arguments: list[Any] | None
) -> Any:
    """``expression``'s value in the page of ``session`` (at ``at``); with
    ``arguments``, it is a function called with them (the log withholds a
    call's string arguments)."""
    link = browser.link
    if arguments is None:
        result = await link.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=session,
        )
    else:
        window = await link.call("Runtime.evaluate", {"expression": "globalThis"}, session=session)
        result = await link.call(
            "Runtime.callFunctionOn",
            {
                "functionDeclaration": expression,
                "objectId": window["result"]["objectId"],
                "arguments": [{"value": a} for a in arguments],
                "returnByValue": True,
                "awaitPromise": True,
            },
            session=session,
        )
    if "exceptionDetails" in result:
        detail = result["exceptionDetails"].get("text", "an exception")
        raise OpError(502, f"the page at {at} refused its storage: {detail}")
    return result.get("result", {}).get("value")


async def local_storage_get(
    browser: Browser, body: LocalStorageGet, caller: Caller
) -> LocalStorageItems:
    async with reading(browser, caller, "local_storage/get", body, None):
        items = await on_origin(browser, body.origin, READ_ALL)
    found = orjson.loads(items) if isinstance(items, str) else {}
    return LocalStorageItems(origin=body.origin, items=found)


async def local_storage_set(browser: Browser, body: LocalStorageSet, caller: Caller) -> OpDone:
    async with acting(browser, caller, "local_storage/set", body):
        await on_origin(browser, body.origin, WRITE_ALL, [orjson.dumps(body.items).decode()])
    browser.storage_origins.add(body.origin)
    return OpDone()


async def local_storage_clear(browser: Browser, body: LocalStorageClear, caller: Caller) -> OpDone:
    async with acting(browser, caller, "local_storage/clear", body):
        if body.origin is not None:
            await on_origin(browser, body.origin, "localStorage.clear()")
        else:
            session = await browser.link.session(await browser.active())
            for found in sorted(browser.storage_origins | await tab_origins(browser)):
                await browser.link.call(
                    "Storage.clearDataForOrigin",
                    {"origin": found, "storageTypes": "local_storage"},
                    session=session,
                )
    return OpDone()
