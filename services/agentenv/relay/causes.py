"""What caused each tab event (docs/spec.md section 1, "Tab events"). No I/O.

:class:`Causes` is told about commands that may open, navigate or close tabs
(as they are sent and answered), about acting entries (the latest on each
tab), and about what Chromium reports (a target created, a main-frame
navigation, a target destroyed). It answers with the tab events to write,
each with its cause:

- the command that asked for it (``Target.createTarget`` opens, and claims
  the new tab's first navigation unless a navigation command claims it;
  ``Page.navigate`` navigates (the one sent to that URL, else to its host,
  else the earliest); ``Page.reload`` and
  ``Page.navigateToHistoryEntry`` navigate but credit only once answered
  without error; ``Target.closeTarget`` and ``Page.close`` close (by a
  tab-type target's id they are refused: it names no page), and
  ``Target.disposeBrowserContext`` closes every tab of its context). Chromium
  reports navigations as URL changes, so a reload, or a navigation to the
  URL the tab already shows, is written when its answer comes;
- ``agentenv`` when that command ran for the computer's own op;
- else ``page``, after the latest acting entry on the tab, or on its opener
  for a popup, or, for a tab with no opener to read (a link dropped on a
  page), on the tab in front up to :data:`SCRIPT_AFTER_S` before. An acting
  command sent to a service or shared worker counts on the tabs that worker
  serves (:class:`Served`: its browser context's tabs of its origin), and on
  no other scope's or origin's (``clients.navigate()`` reaches only those). Script
  calls (``Runtime.evaluate``/``callFunctionOn``) act, but a client's own
  checks follow its input (Playwright inspects the page
  right after a click): an input or other acting command up to
  :data:`SCRIPT_AFTER_S` before the latest script call is the one credited,
  when the same user sent both (another's script is its own cause).

An event that may belong to a command still in flight is held until the
command is answered (or :data:`HOLD_S` passes). A command answered keeps
its claim open for :data:`CLAIM_WINDOW_S`, since Chromium reports the
navigation on another connection, in either order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentenv.relay.front import Front
from agentenv.settings import AGENTENV_USER

__all__ = [
    "CLAIM_WINDOW_S",
    "HOLD_S",
    "TAB_METHODS",
    "Causes",
    "KnownTab",
    "Served",
    "TabCommand",
    "origin",
]

HOLD_S = 5.0
CLAIM_WINDOW_S = 5.0
SCRIPT_AFTER_S = 1.0

_SCRIPTS = frozenset({"Runtime.evaluate", "Runtime.callFunctionOn"})

_OPENS = frozenset({"Target.createTarget"})
_NAVIGATES = frozenset({"Page.navigate"})
_MOVES = frozenset({"Page.reload", "Page.navigateToHistoryEntry"})
_CLOSES = frozenset({"Target.closeTarget", "Page.close"})
_DISPOSES = "Target.disposeBrowserContext"
_ACTIVATES = frozenset({"Target.activateTarget", "Page.bringToFront"})

#: Methods whose commands may cause tab events or bring a tab to the front.
TAB_METHODS = _OPENS | _NAVIGATES | _MOVES | _CLOSES | _ACTIVATES | {_DISPOSES}

Event = dict[str, Any]


@dataclass
class KnownTab:
    id: str
    url: str
    opener: str | None = None
    context: str | None = None  # its browser context, as Chromium names it
    last_acting: int | None = None
    last_acting_at: float = 0.0
    last_acting_who: str = ""
    last_input: int | None = None  # the latest acting entry that is not a script call
    last_input_at: float = 0.0
    last_input_who: str = ""
    navigated_once: bool = False
    #: A tab the page opened (a popup): its opened event's ``after``, which
    #: its first navigation shares (the click that opened it, not the
    #: client's set-up of the new tab).
    opened_after: int | None = None
    popup: bool = False
    #: ``url`` as the log writes it (redacted by the logbook, which fills
    #: it; None until then, and again whenever ``url`` changes).
    logged_url: str | None = None
    #: Whose share of the log the tab's own lines count against when no agent
    #: acted in it since (:meth:`pays`): a popup's opener's, or the sender of
    #: the latest command that moved it.
    payer: str | None = None

    def pays(self) -> str | None:
        """The share the tab's own lines count against in a shared scope
        (:func:`agentenv.relay.log_budget.tab_share`): the latest agent that
        acted in it, else :attr:`payer`; None: no agent yet. Read when a line
        is written, so acting costs nothing more per command."""
        who = self.last_acting_who
        return who if who and who != AGENTENV_USER else self.payer


@dataclass(frozen=True, slots=True)
class Served:
    """The tabs a service or shared worker serves, as the relay can know
    them: the pages of its browser context whose origin is its own (a
    worker's clients are same-origin documents of its context, and
    ``WindowClient.navigate()`` moves only those)."""

    context: str | None  # the worker's browser context (None: unknown, serves none)
    origin: str  # its script's origin (``origin()``; "": none, serves none)

    def serves(self, tab: KnownTab) -> bool:
        return (
            self.context is not None
            and bool(self.origin)
            and tab.context == self.context
            and origin(tab.url) == self.origin
        )


def origin(url: str) -> str:
    """``scheme://host[:port]`` of an http(s) URL (a ``blob:`` URL's inner
    one's), as Chromium writes it; "" for any other."""
    from urllib.parse import urlsplit

    url = url.strip()
    if url[:5].lower() == "blob:":
        url = url[5:]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return ""
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = 80 if scheme == "http" else 443
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


@dataclass
class TabCommand:
    entry: int
    method: str
    tab: str | None  # the tab it acts on; for an open, the tab it opened (once known)
    by: dict[str, Any]
    answered_at: float | None = None
    ok: bool | None = None
    claimed: bool = False  # credited its event
    claimed_navigation: bool = False  # an open: credited the new tab's first navigation
    background: bool = False  # an open behind the active tab
    url: str | None = None  # a navigation's destination
    context: str | None = None  # the browser context a dispose closes


@dataclass
class _HeldEvent:
    event: Event
    until: float
    kind: str  # "opened" | "navigated"
    seen: float = 0.0  # when Chromium reported it


@dataclass
class Causes:
    tabs: dict[str, KnownTab] = field(default_factory=dict)
    commands: dict[int, TabCommand] = field(default_factory=dict)
    held: list[_HeldEvent] = field(default_factory=list)
    #: Which tab is in front, and which are loading (:mod:`agentenv.relay.front`).
    front: Front = field(default_factory=Front)
    #: The latest acting entry on any tab: its entry, when, and its tab.
    last_acting: tuple[int, float, str] | None = None

    # -- what agents did -------------------------------------------------

    def sent(self, command: TabCommand) -> None:
        if command.method in TAB_METHODS:
            self.commands[command.entry] = command

    def acting(
        self, tab: str | None, entry: int, method: str = "", now: float = 0.0, who: str = ""
    ) -> None:
        info = self.tabs.get(tab) if tab is not None else None
        if info is not None:
            self.acting_in(info, entry, method, now, who)

    def acting_in(self, info: KnownTab, entry: int, method: str, now: float, who: str) -> None:
        """:meth:`acting`, for a tab its caller has already found."""
        self.last_acting = (entry, now, info.id)
        info.last_acting, info.last_acting_at, info.last_acting_who = entry, now, who
        if method not in _SCRIPTS:
            info.last_input, info.last_input_at, info.last_input_who = entry, now, who

    def acting_served(
        self, served: Served, entry: int, method: str, now: float, who: str = ""
    ) -> None:
        """An acting command sent to a worker (its script can navigate the
        pages it controls): the latest on each tab it serves, and on no other
        (another scope's tabs, or another origin's, are beyond its reach)."""
        for info in self.tabs.values():
            if served.serves(info):
                self.acting_in(info, entry, method, now, who)

    def answered(self, entry: int, ok: bool, opened: str | None, now: float) -> list[Event]:
        """TabCommand ``entry`` was answered; ``opened`` is a created target's id."""
        command = self.commands.get(entry)
        if command is None:
            return []
        command.answered_at = now
        command.ok = ok
        if opened is not None:
            command.tab = opened
            if ok and not command.background:
                self.front.to_front(opened)
        if ok and command.method in _ACTIVATES and command.tab is not None:
            self.front.to_front(command.tab)
        if not ok and command.method in _MOVES | _NAVIGATES | _CLOSES:
            command.claimed = True  # nowhere to go, or failed: credits nothing
        out = self._release(now, force=False)
        return out + self._in_place(command)

    def _in_place(self, command: TabCommand) -> list[Event]:
        """A reload, or a navigation to the URL the tab already shows: no URL
        change will tell of it, so its answer does."""
        info = self.tabs.get(command.tab) if command.tab is not None else None
        if info is None or command.claimed or not command.ok:
            return []
        if command.method == "Page.reload" or (
            command.method in _NAVIGATES
            and command.url is not None
            and _same_url(command.url, info.url)
        ):
            command.claimed = True
            self._first_navigation(info.id)
            return [{"event": "navigated", "id": info.id, "url": info.url, "by": command.by}]
        return []

    # -- what Chromium reported ------------------------------------------

    def known(
        self, tab: str, url: str, opener: str | None = None, context: str | None = None
    ) -> None:
        """A tab that existed before the relay started watching (no event)."""
        if tab not in self.tabs:
            self.tabs[tab] = KnownTab(tab, url, opener, context)
            self.front.add(tab)

    def created(
        self, tab: str, url: str, opener: str | None, now: float, context: str | None = None
    ) -> list[Event]:
        self.tabs[tab] = KnownTab(tab, url, opener, context)
        opened_by = self.tabs.get(opener) if opener is not None else None
        if opened_by is not None:
            self.tabs[tab].payer = opened_by.pays()
        if url not in ("", "about:blank"):
            # Chromium names the page it opens already: that was its first
            # navigation, and the next one is not the opener's to claim.
            self.tabs[tab].navigated_once = True
        self.front.add(tab)
        opening = [
            c for c in self.commands.values() if c.method in _OPENS and c.answered_at is None
        ]
        if opener is not None and not opening:
            self.front.to_front(tab)  # a popup comes to the front
        elif any(c.tab == tab and c.ok and not c.background for c in self.commands.values()):
            self.front.to_front(tab)  # its open was answered first
        event: Event = {"event": "opened", "id": tab, "url": url}
        return self._settle(event, "opened", now)

    def navigated(self, tab: str, url: str, now: float) -> list[Event]:
        info = self.tabs.setdefault(tab, KnownTab(tab, url))
        info.url, info.logged_url = url, None
        self.front.add(tab)
        event: Event = {"event": "navigated", "id": tab, "url": url}
        return self._settle(event, "navigated", now)

    def destroyed(self, tab: str, now: float) -> list[Event]:
        out = self._release(now, force=True, tab=tab)
        info = self.tabs.pop(tab, None)
        self.front.remove(tab)
        event: Event = {"event": "closed", "id": tab, "url": info.url if info else ""}
        command = self._claim_close(tab, now) or self._disposing(info, now)
        event["by"] = command.by if command else self._page(info)
        return [*out, event]

    def ended(self, kind: str) -> list[Event]:
        """Chromium exited (``exit``) or the computer stops (``stop``): every tab closes."""
        out = [h.event | {"by": self._fallback(h)} for h in self.held]
        self.held.clear()
        out += [
            {"event": "closed", "id": t.id, "url": t.url, "by": {"kind": kind}}
            for t in self.tabs.values()
        ]
        self.tabs.clear()
        self.commands.clear()
        self.front.clear()
        return out

    def tick(self, now: float) -> list[Event]:
        """Release held events past their deadline; forget stale commands."""
        out = self._release(now, force=False)
        stale = [
            e
            for e, c in self.commands.items()
            if c.answered_at is not None and now - c.answered_at > CLAIM_WINDOW_S
        ]
        for e in stale:
            del self.commands[e]
        return out

    def url(self, tab: str | None) -> str | None:
        info = self.tabs.get(tab) if tab is not None else None
        return info.url if info else None

    # -- matching ----------------------------------------------------------

    def _live(self, command: TabCommand, now: float) -> bool:
        return command.answered_at is None or now - command.answered_at <= CLAIM_WINDOW_S

    def _settle(self, event: Event, kind: str, now: float) -> list[Event]:
        tab = event["id"]
        if any(h.event["id"] == tab for h in self.held):
            self.held.append(_HeldEvent(event, now + HOLD_S, kind, now))  # keep the tab's order
            return []
        by = self._match(event, kind, now, final=False, seen=now)
        if by is None:
            self.held.append(_HeldEvent(event, now + HOLD_S, kind, now))
            return []
        return [event | {"by": by}]

    def _release(self, now: float, force: bool, tab: str | None = None) -> list[Event]:
        out: list[Event] = []
        still: list[_HeldEvent] = []
        blocked: set[str] = set()
        for h in self.held:
            t = h.event["id"]
            if t in blocked:
                still.append(h)
                continue
            final = now >= h.until or (force and (tab is None or t == tab))
            by = self._match(h.event, h.kind, now, final=final, seen=h.seen)
            if by is None:
                still.append(h)
                blocked.add(t)
            else:
                out.append(h.event | {"by": by})
        self.held = still
        return out

    def _match(
        self, event: Event, kind: str, now: float, final: bool, seen: float
    ) -> dict[str, Any] | None:
        """The cause, or None to hold the event (only when not ``final``);
        ``seen`` is when Chromium reported it."""
        tab = event["id"]
        info = self.tabs.get(tab)
        live = [c for c in self.commands.values() if not c.claimed and self._live(c, now)]
        if kind == "opened":
            for c in live:
                if c.method in _OPENS and c.tab == tab:
                    c.claimed = True
                    return c.by
            if not final and any(c.method in _OPENS and c.answered_at is None for c in live):
                return None
            by = self._page(info, opener=True)
            if by["after"] is None and self.last_acting is not None:
                # No opener to read (a link dropped on a page, a noopener
                # popup): the acting entry just before it opened, if it was
                # on the tab then in front.
                entry, at, on = self.last_acting
                if at <= seen and seen - at <= SCRIPT_AFTER_S and on == self.front.before(tab):
                    by = {"kind": "page", "after": entry}
            if info is not None:
                info.popup = True
                info.opened_after = by["after"]
            return by
        navigating = [c for c in live if c.tab == tab and c.method in _NAVIGATES]
        if navigating:
            # The one sent to this URL, else to its host (a redirect), else
            # the earliest: an earlier navigate still in flight (another
            # agent's, held up) does not take a later one's URL.
            url = event.get("url") or ""
            same = [c for c in navigating if c.url is not None and _same_url(c.url, url)]
            host = [c for c in navigating if c.url is not None and _same_host(c.url, url)]
            # Elsewhere (no URL or host of its own), only one in flight or just
            # answered: one answered a while ago went nowhere (a download, a
            # 204) and must not take a later click's navigation.
            recent = [
                c
                for c in navigating
                if c.answered_at is None or seen - c.answered_at <= SCRIPT_AFTER_S
            ]
            chosen = same or host or recent
            if chosen:
                c = chosen[0]
                c.claimed = True
                self._first_navigation(tab)
                return c.by
        for c in live:
            if c.tab == tab and c.method in _MOVES:
                if c.answered_at is None:
                    if not final:
                        return None
                    continue
                c.claimed = True
                self._first_navigation(tab)
                return c.by
        if info is not None and not info.navigated_once:
            for c in self.commands.values():
                if c.method in _OPENS and c.tab == tab and not c.claimed_navigation:
                    c.claimed_navigation = True
                    info.navigated_once = True
                    return c.by
        if (
            not final
            and any(c.method in _OPENS and c.answered_at is None for c in live)
            and info is not None
            and not info.navigated_once
        ):
            return None
        if info is not None and info.popup and not info.navigated_once:
            self._first_navigation(tab)
            return {"kind": "page", "after": info.opened_after}
        self._first_navigation(tab)
        return self._page(info, opener=info is not None and info.last_acting is None)

    def _first_navigation(self, tab: str) -> None:
        info = self.tabs.get(tab)
        if info is not None:
            info.navigated_once = True
            for c in self.commands.values():
                if c.method in _OPENS and c.tab == tab:
                    c.claimed_navigation = True

    def _claim_close(self, tab: str, now: float) -> TabCommand | None:
        for c in self.commands.values():
            if not c.claimed and c.method in _CLOSES and c.tab == tab and self._live(c, now):
                c.claimed = True
                return c
        return None

    def _disposing(self, info: KnownTab | None, now: float) -> TabCommand | None:
        """The dispose of the closed tab's context, if one is live (it closes
        every tab there, so it claims none)."""
        if info is None or info.context is None:
            return None
        for c in self.commands.values():
            if (
                c.method == _DISPOSES
                and c.context == info.context
                and c.ok is not False
                and self._live(c, now)
            ):
                return c
        return None

    def _page(self, info: KnownTab | None, opener: bool = False) -> dict[str, Any]:
        after = _credited(info)
        if after is None and opener and info is not None and info.opener:
            after = _credited(self.tabs.get(info.opener))
        return {"kind": "page", "after": after}

    def _fallback(self, held: _HeldEvent) -> dict[str, Any]:
        return self._page(self.tabs.get(held.event["id"]), opener=True)


def _credited(info: KnownTab | None) -> int | None:
    """The acting entry a page-caused event on this tab follows."""
    if info is None:
        return None
    if (
        info.last_input is not None
        and info.last_acting_at - info.last_input_at <= SCRIPT_AFTER_S
        and info.last_input_who == info.last_acting_who
    ):
        return info.last_input
    return info.last_acting


def _same_host(a: str, b: str) -> bool:
    """Whether two addresses name one host (any scheme: a redirect to https)."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(a.strip()).hostname
        return host is not None and host == urlsplit(b.strip()).hostname
    except ValueError:
        return False


def _same_url(a: str, b: str) -> bool:
    """The same address as Chromium would show it (case of scheme and host, a
    root path's slash)."""
    from urllib.parse import urlsplit

    def key(url: str) -> tuple[str, str, str, str, str]:
        p = urlsplit(url.strip())
        return (p.scheme.lower(), p.netloc.lower(), p.path or "/", p.query, p.fragment)

    return key(a) == key(b)
