"""``data/get``, ``data/add`` and ``data/reset``: the browser's state as an
archive, restored all or nothing, and cleared.

``data/add`` checks the whole archive before it changes anything (the
archive is read off the event loop, bounded: :mod:`agentenv.protocol.data`).
If the browser then fails part way, what was changed is put back as it was
(cookies, the local storage of the origins touched, the tabs opened) and the
op fails saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from agentenv.app.acting import acting
from agentenv.app.app_errors import OpError, failure
from agentenv.app.caller import Caller
from agentenv.app.cookies import all_cookies, settable
from agentenv.app.local_storage import READ_ALL, WRITE_ALL, on_origin, origin
from agentenv.app.op_browser import Browser
from agentenv.log.reader import LogReader
from agentenv.protocol.answers import DataAdded, DataReset
from agentenv.protocol.browser import Tab
from agentenv.protocol.control import Reset, Written
from agentenv.protocol.data import BrowserState, SavedTab
from agentenv.protocol.log import LogLine, action_of, parse_line, scope_of, tab_of
from agentenv.relay_link import BrowserError

__all__ = [
    "CLEARED_STORAGE",
    "MAX_RESET_ORIGINS",
    "ResetDownloads",
    "reset",
    "restore",
    "state",
    "visited",
    "visited_since",
    "whole_log",
]

log = logging.getLogger("agentenv.app.browser_data")

#: What data/reset clears per origin ("all" fails in headless Chromium).
CLEARED_STORAGE = (
    "local_storage,indexeddb,cache_storage,service_workers,file_systems,websql,"
    "shader_cache,cookies,shared_storage,storage_buckets"
)


async def _local_storage(browser: Browser, tabs: list[Tab]) -> dict[str, dict[str, str]]:
    saved: dict[str, dict[str, str]] = {}
    for tab in tabs:
        at = origin(tab.url)
        if at is None or at in saved:
            continue
        with contextlib.suppress(BrowserError):
            session = await browser.link.session(tab.id)
            result = await browser.link.call(
                "Runtime.evaluate",
                {"expression": READ_ALL, "returnByValue": True},
                session=session,
                deadline_s=5,
            )
            value = result.get("result", {}).get("value")
            if isinstance(value, str):
                saved[at] = orjson.loads(value)
    for at in sorted(browser.storage_origins - saved.keys()):
        items = await on_origin(browser, at, READ_ALL)
        if isinstance(items, str):
            saved[at] = orjson.loads(items)
    return {at: items for at, items in saved.items() if items}


async def state(browser: Browser) -> BrowserState:
    """Cookies, local storage per origin and tabs, as data/get saves them."""
    tabs = await browser.tabs()
    return BrowserState.model_validate(
        {
            "cookies": await all_cookies(browser),
            "local_storage": await _local_storage(browser, tabs),
            "tabs": [SavedTab(url=t.url, title=t.title, active=t.active) for t in tabs],
        }
    )


async def restore(browser: Browser, saved: BrowserState, caller: Caller) -> DataAdded:
    """data/add: cookies, local storage and tabs back as saved, or nothing."""
    cookies_before = await all_cookies(browser)
    storage_before = {at: await on_origin(browser, at, READ_ALL) for at in saved.local_storage}
    opened: list[str] = []
    try:
        async with acting(browser, caller, "data/add", None):
            link = browser.link  # the op's own connection
            if saved.cookies:
                await link.call(
                    "Storage.setCookies",
                    {"cookies": [settable(c.model_dump()) for c in saved.cookies]},
                )
            for at, items in saved.local_storage.items():
                await on_origin(browser, at, WRITE_ALL, [orjson.dumps(items).decode()])
                browser.storage_origins.add(at)
            for tab in sorted(saved.tabs, key=lambda t: t.active):  # the active one last: in front
                created = await link.call("Target.createTarget", {"url": tab.url or "about:blank"})
                opened.append(str(created["targetId"]))
            browser.switches += 1
    except (BrowserError, OpError) as exc:
        await _put_back(browser, cookies_before, storage_before, opened)
        # Its cause's status and words: a guard's refusal is the relay's, not
        # a failure of the browser (failure() tells them apart).
        cause = failure(exc)
        raise OpError(cause.status, f"data/add restored nothing: {cause.message}") from None
    return DataAdded(
        cookies=len(saved.cookies), local_storage=len(saved.local_storage), tabs=len(saved.tabs)
    )


async def _put_back(
    browser: Browser,
    cookies: list[dict[str, Any]],
    storage: dict[str, Any],
    opened: list[str],
) -> None:
    """Undo a data/add that failed part way (best effort: the browser may be gone)."""
    link = browser.link
    try:
        for tab in opened:
            with contextlib.suppress(BrowserError):
                await browser.close(tab)
        await link.call("Storage.clearCookies")
        await link.call("Browser.resetPermissions")
        await asyncio.to_thread(_empty_downloads, browser.downloads)
        if cookies:
            await link.call("Storage.setCookies", {"cookies": [settable(c) for c in cookies]})
        for at, items in storage.items():
            before = orjson.loads(items) if isinstance(items, str) else {}
            await on_origin(browser, at, "localStorage.clear()")
            if before:
                await on_origin(browser, at, WRITE_ALL, [orjson.dumps(before).decode()])
    except (BrowserError, OpError) as exc:
        log.error("data/add: could not put the browser back as it was: %s", exc)


@dataclass(frozen=True)
class ResetDownloads:
    """The downloads folder data/reset empties: every scope's, whose own
    folders (``keep``, inside it) stay, emptied, where Chromium puts them."""

    folder: str
    keep: frozenset[str] = frozenset()


def _empty_downloads(folder: str, keep: frozenset[str] = frozenset()) -> int:
    """Remove what pages downloaded (the folder stays, and the scopes' folders
    in it, emptied); how many entries went."""
    if not folder:
        return 0
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                if entry.name in keep and entry.is_dir(follow_symlinks=False):
                    removed += _empty_downloads(entry.path)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed += 1
    return removed


#: The most sites data/reset clears one by one; past it, the computer is
#: not reused (a page can visit thousands of made-up hosts).
MAX_RESET_ORIGINS = 1000


def visited(lines: Iterable[bytes], found: set[str] | None = None) -> set[str]:
    """The origins of the URLs in log ``lines`` (added to ``found``): every
    tab event's and every action's. Chromium cannot list the sites that hold
    storage, but the log saw every page a tab showed. A ``reset`` line
    forgets what came before it (that reset cleared it). A line this cannot
    read is passed over: an agent's URL must not make a reset fail."""
    found = set() if found is None else found
    for raw in lines:
        try:
            line = parse_line(raw)
            reset = line.get("reset")
            if isinstance(reset, dict) and reset.get("reason") == "data/reset":
                found.clear()
                continue
            for body in (tab_of(line), action_of(line)):
                url = body.get("url") if body is not None else None
                at = origin(url) if isinstance(url, str) else None
                if at:
                    found.add(at)
        except (ValueError, TypeError):
            continue
    return found


async def reset(
    browser: Browser,
    caller: Caller,
    seen: set[str] | None = None,
    downloads: ResetDownloads | None = None,
) -> DataReset:
    """data/reset: one blank tab, no cookies, granted permissions, downloads
    or HTTP cache, and a reset line. The storage of every origin this
    computer knows of is cleared: its open tabs', those it wrote, and
    ``seen`` (the sites the log saw since the last reset: :func:`visited`). A
    computer reused for another task (``agentenv run --reuse``) starts from
    this; the image keeps no browsing history (the
    ``SavingBrowserHistoryDisabled`` policy), and the new tab has no back or
    forward. Left: storage a page wrote for an origin no tab ever showed (a
    third-party frame's)."""
    async with acting(browser, caller, "data/reset", None):
        link = browser.link  # the op's own connection
        found = await browser.pages()
        origins = {o for o in (origin(p.get("url", "")) for p in found) if o}
        origins |= browser.storage_origins | (seen or set())
        blank = (await link.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        for page in found:
            with contextlib.suppress(BrowserError):
                await browser.close(page["targetId"])
        await link.call("Storage.clearCookies")
        await link.call("Browser.resetPermissions")
        every = downloads or ResetDownloads(browser.downloads)
        await asyncio.to_thread(_empty_downloads, every.folder, every.keep)
        # Storage.clearDataForOrigin answers only on a page's session.
        session = await link.session(blank)
        await link.call("Network.clearBrowserCache", session=session)
        failed: list[str] = []
        for at in sorted(origins):
            try:
                await link.call(
                    "Storage.clearDataForOrigin",
                    {"origin": at, "storageTypes": CLEARED_STORAGE},
                    session=session,
                )
            except BrowserError:
                failed.append(at)
        if failed:
            # No reset line: the next reset tries these again.
            raise OpError(
                502,
                f"data/reset could not clear the storage of {len(failed)} of {len(origins)} "
                f"sites (the first: {failed[0]}): start a fresh computer for the next task",
            )
        browser.storage_origins.clear()
        browser.switches += 1
        entry = (await link.control(Reset(reason="data/reset"), Written)).entry
        browser.reset_seq = entry
    return DataReset(tab=blank, reset=entry, origins_cleared=len(origins))


#: Lines read at once when data/reset looks for the sites visited.
_RESET_CHUNK = 10000


def visited_since(reader: LogReader, after: int) -> set[str]:
    """The origins the log saw after line ``after`` (:func:`visited`):
    every line written, a chunk at a time, lines still in flight passed over
    (read_range skips gaps, where read stops at the first)."""
    seen: set[str] = set()
    first = after + 1
    while True:
        lines = reader.read_range(first, first + _RESET_CHUNK - 1)
        if not lines:
            return seen
        visited(lines, seen)
        first += _RESET_CHUNK


def _kept(line: LogLine, scope: str, since: str | None) -> bool:
    if scope_of(line) != scope:
        return False
    at = line.get("at")
    return since is None or (isinstance(at, str) and at >= since)


def whole_log(reader: LogReader, scope: str | None = None, since: str | None = None) -> bytes:
    """Every line of the log; with ``scope``, only that scope's (protocol.log.scope_of);
    with ``since`` (an ``at``), only those written then or later: a scope
    opened on demand exports none of an earlier scope of its name."""
    parts: list[bytes] = []
    last = 0
    while True:
        page = reader.read(last, 10000)
        if not page.lines:
            return b"".join(parts)
        kept = page.lines
        if scope is not None:
            kept = [x for x in kept if _kept(parse_line(x), scope, since)]
        parts.extend(line + b"\n" for line in kept)
        last = page.last
