"""``cookies/get``, ``cookies/set``, ``cookies/delete``, and cookies as
``Storage.getCookies`` gives them and ``Storage.setCookies`` takes them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from agentenv.app.acting import acting, reading
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.protocol.answers import CookiesDeleted, CookiesFound, OpDone
from agentenv.protocol.browser import CookiesDelete, CookiesGet, CookiesSet

__all__ = ["all_cookies", "cookies_delete", "cookies_get", "cookies_set", "settable"]

_COOKIE_PARAMS = (
    "name",
    "value",
    "domain",
    "path",
    "secure",
    "httpOnly",
    "sameSite",
    "expires",
    "priority",
    "sameParty",
    "sourceScheme",
    "sourcePort",
    "partitionKey",
)


def settable(cookie: dict[str, Any]) -> dict[str, Any]:
    """A cookie as Storage.getCookies gave it, as Storage.setCookies takes it."""
    out = {k: v for k, v in cookie.items() if k in _COOKIE_PARAMS}
    if out.get("expires", 0) in (-1, 0) or cookie.get("session"):
        out.pop("expires", None)
    return out


def matches(cookie: dict[str, Any], url: str) -> bool:
    """Whether the browser would send ``cookie`` to ``url``."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    domain = str(cookie.get("domain", "")).lower()
    bare = domain.lstrip(".")
    if domain.startswith("."):
        if host != bare and not host.endswith("." + bare):
            return False
    elif host != bare:
        return False
    path = parts.path or "/"
    cookie_path = str(cookie.get("path") or "/")
    if not (path == cookie_path or path.startswith(cookie_path.rstrip("/") + "/")):
        return False
    return not (cookie.get("secure") and parts.scheme != "https")


async def all_cookies(browser: Browser) -> list[dict[str, Any]]:
    return list((await browser.link.call("Storage.getCookies"))["cookies"])


async def cookies_get(browser: Browser, body: CookiesGet, caller: Caller) -> CookiesFound:
    async with reading(browser, caller, "cookies/get", body, None):
        cookies = await all_cookies(browser)
    if body.urls:
        cookies = [c for c in cookies if any(matches(c, u) for u in body.urls)]
    return CookiesFound(cookies=cookies)


async def cookies_set(browser: Browser, body: CookiesSet, caller: Caller) -> OpDone:
    async with acting(browser, caller, "cookies/set", body):
        cookies = [c.model_dump(exclude_none=True) for c in body.cookies]
        await browser.link.call("Storage.setCookies", {"cookies": cookies})
    return OpDone()


async def cookies_delete(browser: Browser, body: CookiesDelete, caller: Caller) -> CookiesDeleted:
    def wanted(c: dict[str, Any]) -> bool:
        return (
            (body.name is None or c.get("name") == body.name)
            and (
                body.domain is None
                or str(c.get("domain", "")).lstrip(".").lower() == body.domain.lstrip(".").lower()
            )
            and (body.path is None or c.get("path") == body.path)
        )

    async with acting(browser, caller, "cookies/delete", body):
        doomed = [c for c in await all_cookies(browser) if wanted(c)]
        if doomed:
            session = await browser.link.session(await browser.active())
            for c in doomed:
                await browser.link.call(
                    "Network.deleteCookies",
                    {"name": c["name"], "domain": c["domain"], "path": c.get("path", "/")},
                    session=session,
                )
    return CookiesDeleted(deleted=len(doomed))
