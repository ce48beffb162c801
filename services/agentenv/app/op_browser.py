"""The browser as the ops see it: the links through the relay, and what the
app server keeps between ops (which calls switched tabs, which origins hold
local storage it wrote). Every op module takes a :class:`Browser`.

The computer's own reads share one relay connection. An op that acts (an
action on the record) takes a connection of its own for as long as it runs
(:meth:`Browser.own_link`), from a small pool: the relay credits commands to
the open action whose scope is their connection, so two ops running at once
on one connection would take each other's commands (and password checks).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agentenv.app.app_errors import OpError
from agentenv.protocol.browser import Tab
from agentenv.protocol.control import TabOrder, Tabs
from agentenv.relay_link import BrowserLink, pages, visible

__all__ = ["IDLE_LINKS", "Browser", "Browsers", "Waiting"]

#: Idle op connections kept for the next ops (more are made when ops overlap).
IDLE_LINKS = 4
_op_link: ContextVar[BrowserLink | None] = ContextVar("agentenv_op_link", default=None)


@dataclass
class Waiting:
    """An agent's request for a person, waiting in one scope (app/handoff.py):
    ``answer`` takes the person's word, user and note; ``entries`` are the
    person's acting entries made while it waits (their word's aside)."""

    reason: str
    who: str
    since: float
    until: float
    answer: asyncio.Future[tuple[str, str, str | None]]
    entries: list[int] = field(default_factory=list)

    @property
    def open(self) -> bool:
        return not self.answer.done()


@dataclass
class Browser:
    shared: BrowserLink
    downloads: str = ""
    #: Makes a new relay connection for an op (None: ops share ``shared``).
    new_link: Callable[[], BrowserLink] | None = None
    idle: list[BrowserLink] = field(default_factory=list)
    #: Counts calls that switched the active tab, so a background open does
    #: not undo a switch another call made meanwhile.
    switches: int = 0
    #: Origins whose local storage this computer wrote (data/get saves them,
    #: with the origins of open tabs: Chromium cannot list them all).
    storage_origins: set[str] = field(default_factory=set)
    storage_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: The log's number of the last data/reset: the sites visited since are
    #: read from the lines after it at the next (0: since the log began).
    reset_seq: int = 0
    #: An agent's request for a person in this scope, while it waits.
    waiting: Waiting | None = None
    #: The person driving this scope's live view, and until when (monotonic
    #: seconds): app/live_doors.py's one controller at a time.
    controller: tuple[str, float] | None = None

    @property
    def link(self) -> BrowserLink:
        """The op's own connection inside :meth:`own_link`, else the shared one."""
        return _op_link.get() or self.shared

    @contextlib.asynccontextmanager
    async def own_link(self) -> AsyncIterator[BrowserLink]:
        """A relay connection of this op's own, for as long as it runs."""
        current = _op_link.get()
        if current is not None or self.new_link is None:
            yield current or self.shared
            return
        link = self.idle.pop() if self.idle else self.new_link()
        token = _op_link.set(link)
        try:
            yield link
        finally:
            _op_link.reset(token)
            if len(self.idle) < IDLE_LINKS:
                self.idle.append(link)
            else:
                await link.close()

    async def disconnect(self) -> None:
        """Close every relay connection (the app server stops)."""
        for link in [self.shared, *self.idle]:
            await link.close()
        self.idle.clear()

    async def pages(self) -> list[dict[str, Any]]:
        return await pages(self.link)

    async def tabs(self) -> list[Tab]:
        """The tabs, the one in front first, as the relay keeps them (it sees every
        command; a page's own visibility lies once a client emulates focus)."""
        found = await pages(self.link)
        order = await self.link.control(Tabs(), TabOrder)
        front: list[str] = order.order
        active = order.active
        if active is None:  # the relay does not know yet: ask the pages
            shown = await asyncio.gather(*(visible(self.link, p["targetId"]) for p in found))
            active = next((p["targetId"] for p, v in zip(found, shown, strict=True) if v), None)
        rank = {tab: n for n, tab in enumerate(front)}
        found.sort(key=lambda p: (p["targetId"] != active, rank.get(p["targetId"], len(rank))))
        return [
            Tab(
                id=p["targetId"],
                url=p.get("url", ""),
                title=p.get("title", ""),
                active=p["targetId"] == active,
            )
            for p in found
        ]

    async def shown(self) -> str | None:
        """The active tab, else the first, else None (no tab is open)."""
        tabs = await self.tabs()
        return next((t.id for t in tabs if t.active), tabs[0].id if tabs else None)

    async def active(self) -> str:
        tab = await self.shown()
        if tab is None:
            raise OpError(409, "no tab is open: open one with tabs/open")
        return tab

    async def tab(self, tab: str | None) -> str:
        """``tab`` if it is open (404 otherwise), or the active tab."""
        if tab is None:
            return await self.active()
        ids = {p["targetId"] for p in await pages(self.link)}
        if tab not in ids:
            raise OpError(404, f"no tab {tab[:64]!r}: tabs/list shows the open tabs")
        return tab

    async def close(self, tab: str) -> None:
        """Close ``tab`` and wait (bounded) until Chromium lists it no more, so
        the op's caller never sees a tab that is on its way out."""
        await self.link.call("Target.closeTarget", {"targetId": tab})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5.0
        while loop.time() < deadline:
            if tab not in {p["targetId"] for p in await pages(self.link)}:
                return
            await asyncio.sleep(0.05)


@dataclass
class Browsers:
    """The browser of each scope the ops act in (docs/spec.md section 7).

    The home scope's is made at start (and is every op's on a computer of one
    scope, or none); another scope's on its first op, through relay links
    that name it (``AgentEnv-Scope``), so the relay makes its context then.
    ``data/reset`` disposes of every other scope's context, and with it these
    browsers' links: :meth:`forget_others` closes them, and the next op in
    such a scope makes its browser again.
    """

    home: Browser
    #: Makes the browser of a scope other than home.
    make: Callable[[str], Browser]
    others: dict[str, Browser] = field(default_factory=dict)

    def of(self, scope: str | None) -> Browser:
        """The browser of ``scope`` (None: the home scope's)."""
        if scope is None:
            return self.home
        found = self.others.get(scope)
        if found is None:
            found = self.others[scope] = self.make(scope)
        return found

    def waiting(self) -> int:
        """How many scopes' agents wait for a person now (``/metrics``)."""
        every = [self.home, *self.others.values()]
        return sum(1 for b in every if b.waiting is not None and b.waiting.open)

    async def forget_others(self) -> None:
        others, self.others = list(self.others.values()), {}
        for browser in others:
            await browser.disconnect()

    async def disconnect(self) -> None:
        await self.forget_others()
        await self.home.disconnect()
