"""The relay's own connection to Chromium: tab events and password checks.

It watches targets (``Target.setDiscoverTargets``) and reports page targets
opened, navigated (a URL change, same-document moves included) and closed to
the :class:`~agentenv.relay.logbook.Logbook`. It runs the focus check before
typing (:mod:`agentenv.relay.password`) and names what a press lands on
(:mod:`agentenv.relay.elements`) in a session of its own, attached on first
need, so its commands have their own id space and their answers never reach
a client, and in an isolated world of its own, so a page's script cannot
change what the DOM tells the checks. It enables no domain in pages. No
agent sees or reaches that world (:mod:`agentenv.relay.worlds`): each is made
under a fresh name no one can predict, marked with a secret, and hidden and
refused on every client's connection.

When Chromium exits, every tab is written as closed ``by: exit``, and the
watcher reconnects as soon as Chromium answers again.

Its parts hold their own state on its connection: each origin's storage
quota, held by a session of its own on a target that shows the origin
(:mod:`agentenv.relay.quotas`, issue 22), each scope's downloads, their
folder and their share of it (:mod:`agentenv.relay.scope_downloads`), and the
scopes' contexts, opened, reset and closed on demand, with the warm pool
(:mod:`agentenv.relay.scope_keeper`, :attr:`Watcher.keeper`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import aiohttp
import orjson

from agentenv.access import Identity
from agentenv.calls import Calls
from agentenv.protocol.urls import tab as is_tab
from agentenv.relay.effects import Begin, Ended
from agentenv.relay.known import Gone, InContext, Known, Lost, PageOfTab, TargetSeen
from agentenv.relay.logbook import Logbook
from agentenv.relay.once import once
from agentenv.relay.oom import OomWatch, read_oom_kills
from agentenv.relay.person_holds import PersonHolds
from agentenv.relay.probes import Probes
from agentenv.relay.quotas import Quotas
from agentenv.relay.relay_errors import UpstreamError, WatcherError
from agentenv.relay.scope_downloads import Downloads
from agentenv.relay.scope_keeper import NOT_ANSWERING, ScopeKeeper
from agentenv.relay.traces import Traces
from agentenv.relay.vault import Vault
from agentenv.relay.worlds import RelayWorlds
from agentenv.scopes import Scopes
from agentenv.settings import AGENTENV_USER, Settings

__all__ = ["Watcher"]

log = logging.getLogger("agentenv.relay.watcher")


#: How often a scope's storage quotas are shared out again.
STORAGE_SHARE_S = 5.0
#: Events of our sessions' Runtime domain that the watcher passes over unread.
_UNREAD = ('{"method":"Runtime.consoleAPICalled"', '{"method":"Runtime.exceptionThrown"')


class Watcher:
    def __init__(self, settings: Settings, http: aiohttp.ClientSession, logbook: Logbook) -> None:
        self.settings = settings
        self.http = http
        self.logbook = logbook
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._calls = Calls()
        #: Our isolated world in each tab's main frame (made again when its
        #: document is replaced), shared with every client connection.
        self.worlds = RelayWorlds()
        #: The browser's one trace, held by one scope's agent at a time.
        self.traces = Traces(settings.trace_max_s, settings.trace_max_bytes)
        self._initial = True
        self._saw_exit = False
        self.connected = asyncio.Event()
        #: Chromium's targets, their tabs, contexts and pages, as facts
        #: learned (relay/known.py): what every connection's rules read.
        self.known = Known()
        #: The scopes, each with its browser context once a user connected.
        self.scopes = Scopes.of(settings)
        #: Run once data/reset has disposed of the scopes' contexts: the relay
        #: closes the connections still acting in them.
        self.after_reset: Callable[[], Awaitable[None]] | None = None
        #: Ends the connections acting in a scope (the agents' only, or every
        #: one, the control token's links in it too): set by the server.
        self.end_connections: Callable[[str, bool, str], Awaitable[None]] | None = None
        #: Chromium's browser endpoint, as its /json/version said when the
        #: watcher connected (a client's connection goes there, not asking again).
        self.browser_url: str | None = None
        #: Chromium's own default browser context (the home scope's).
        self.default_context: str | None = None
        logbook.scope_of = self.scope_name
        logbook.users_of = self.scopes.users_of
        self._tasks: set[asyncio.Task[Any]] = set()
        self._finding: dict[str, asyncio.Task[str | None]] = {}
        self._tab_finds: dict[str, asyncio.Future[str]] = {}  # our tab session -> its page
        #: The cgroup's OOM kills so far: one more when Chromium went says why.
        self._oom = OomWatch(last=read_oom_kills())
        #: Each scope's downloads and its share of the folder.
        self.downloads = Downloads(self)
        #: Each origin's storage quota, held by a session of ours.
        self.quotas = Quotas(self)
        #: The password check and what a press lands on, on sessions of ours.
        self.probes = Probes(self)
        #: Each scope's credentials, in this process's memory only (vault.py).
        self.vault = Vault()
        #: Scopes a person drives now: their agents' acting commands wait.
        self.holds = PersonHolds()
        #: The scopes' contexts, opened, reset and closed, and the warm pool.
        self.keeper = ScopeKeeper(self)
        self.known.warm = self.keeper.warm

    async def page_of_tab(self, tab: str) -> str | None:
        """The page of the tab-type target ``tab``, found once (bounded): the
        watcher attaches to the tab and hears its page attach. None if it is
        no tab-type target, or Chromium did not say in time."""
        found = self.known.tab_page(tab)
        if found is not None:
            return found
        known = self.known.target(tab)
        if known is not None and known[0] != "tab":
            return None
        return await once(self._finding, tab, self._find_page)

    async def _find_page(self, tab: str) -> str | None:
        try:
            attached = await self.call(
                "Target.attachToTarget", {"targetId": tab, "flatten": True}, deadline_s=2.0
            )
        except (WatcherError, TimeoutError):
            return None
        session = attached.get("result", {}).get("sessionId")
        if not isinstance(session, str):
            return None
        heard: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._tab_finds[session] = heard
        try:
            await self.call(
                "Target.setAutoAttach",
                {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
                session=session,
                deadline_s=2.0,
            )
            page = await asyncio.wait_for(heard, 2.0)
        except (WatcherError, TimeoutError):
            return None
        finally:
            self._tab_finds.pop(session, None)
            with contextlib.suppress(WatcherError, TimeoutError):
                await self.call("Target.detachFromTarget", {"sessionId": session}, deadline_s=2.0)
        self.known.learn(PageOfTab(tab, page))
        return page

    def tab_of(self, target: str) -> str:
        """The tab a target belongs to (:meth:`Known.tab_of`)."""
        return self.known.tab_of(target)

    def target(self, target: str) -> tuple[str, str] | None:
        """What the watcher knows of a target: ``(type, url)``, None if unknown."""
        return self.known.target(target)

    def scope_name(self, context: str | None) -> str | None:
        """The scope a browser context is, on computers of two scopes or
        more (tab lines carry it); None elsewhere, or if it is no scope's."""
        if not self.scopes.isolated or context is None:
            return None
        found = self.scopes.owner(context)
        if found is not None:
            return found.name
        return self.scopes.home if context == self.default_context else None

    def context_of(self, target: str) -> str | None:
        """A target's browser context, None if unknown."""
        return self.known.context_of(target)

    async def own_command(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """A command of the computer's own on the watcher's connection, on the
        record (conn 0, as ``agentenv``); its answer, None if none came."""
        entry = self.logbook.begin(
            Begin(Identity(AGENTENV_USER, control=True), 0, None, method, params, None)
        )
        try:
            answer = await self.call(method, params, deadline_s=10)
        except (WatcherError, TimeoutError):
            self.logbook.end(Ended(entry, False, "Chromium did not answer"))
            return None
        error = answer.get("error")
        opened = answer.get("result", {}).get("targetId")
        self.logbook.end(
            Ended(
                entry,
                error is None,
                str(error.get("message")) if isinstance(error, dict) else None,
                opened=opened if isinstance(opened, str) else None,
            )
        )
        return answer

    async def run(self) -> None:
        """Watch until cancelled, reconnecting after Chromium restarts."""
        delay = 0.2
        while True:
            try:
                await self._watch()
                delay = 0.2
            except (aiohttp.ClientError, OSError, WatcherError, TimeoutError) as exc:
                log.debug("watcher: Chromium not reachable (%s)", exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _browser_url(self) -> str:
        url = f"{self.settings.chromium_http}/json/version"
        timeout = aiohttp.ClientTimeout(total=self.settings.upstream_timeout_s)
        async with self.http.get(url, timeout=timeout) as answer:
            body = await answer.json(content_type=None)
        ws = body.get("webSocketDebuggerUrl") if isinstance(body, dict) else None
        if not isinstance(ws, str):
            raise WatcherError("no webSocketDebuggerUrl")
        return ws

    async def _watch(self) -> None:
        url = await self._browser_url()
        self.browser_url = url
        async with self.http.ws_connect(
            url, max_msg_size=self.settings.max_message_bytes, compress=0, heartbeat=None
        ) as ws:
            self._ws = ws
            self._initial = not self._saw_exit
            reader = asyncio.create_task(self._read(ws))
            sharing = asyncio.create_task(self._every_few_seconds())
            warming: asyncio.Task[None] | None = None
            try:
                # Tab-type targets too (Chromium leaves them out by default):
                # the guard refuses closing or activating one by its id.
                discover = {"discover": True, "filter": [{"type": "browser", "exclude": True}, {}]}
                await self.call("Target.setDiscoverTargets", discover, deadline_s=10)
                self._initial = False
                contexts = await self.call("Target.getBrowserContexts", {}, deadline_s=10)
                default = contexts.get("result", {}).get("defaultBrowserContextId")
                self.default_context = default if isinstance(default, str) else None
                if self.keeper.left_contexts:
                    await self.keeper.dispose_left_contexts()
                await self._find_front()
                self.downloads.make_folders()
                await self.downloads.set_for()
                self.connected.set()
                if self.keeper.left_open:
                    self.spawn(self.keeper.close_left())
                if self.keeper.warming():
                    warming = asyncio.create_task(self.keeper.keep_warm())
                await reader
            finally:
                reader.cancel()
                sharing.cancel()
                if warming is not None:
                    warming.cancel()
                for done in (reader, sharing, warming):
                    if done is None:
                        continue
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await done
                # Chromium took them, or will be asked to on the next connection.
                self.keeper.lost()
                self.connected.clear()
                self.browser_url = None
                self._ws = None
                self.known.learn(Lost())
                self.scopes.forget()
                self.default_context = None
                self._fail_calls("Chromium went away")
                self.probes.forget()
                self.quotas.forget()
                self.downloads.forget()
        # The browser connection ended: Chromium exited (or is restarting).
        self._saw_exit = True
        self.logbook.counts.restarts += 1
        why = self._oom.exited(read_oom_kills(), time.monotonic())
        self.logbook.ended("exit", why)
        log.warning("Chromium's connection ended; tabs written as closed by exit")

    async def create_target(self, params: dict[str, Any]) -> str:
        """Open a tab with ``Target.createTarget``'s ``params`` (read by the
        core: its URL checked, in the caller's scope's context); its id."""
        context = params.get("browserContextId")
        try:
            answer = await self.call("Target.createTarget", params, deadline_s=10)
        except (WatcherError, TimeoutError):
            raise UpstreamError(NOT_ANSWERING) from None
        error = answer.get("error")
        target = answer.get("result", {}).get("targetId")
        if error is not None or not isinstance(target, str):
            message = error.get("message") if isinstance(error, dict) else "no target id"
            raise UpstreamError(f"Chromium refused to open the tab: {message}", 502)
        if isinstance(context, str):
            self.known.learn(InContext(target, context))
        return target

    async def _every_few_seconds(self) -> None:
        """Each scope's storage quotas shared out again, and the cgroup's
        memory kills read again (so Chromium's exit names only one that came
        after)."""
        while True:
            await asyncio.sleep(STORAGE_SHARE_S)
            self._oom.looked(read_oom_kills(), time.monotonic())
            await self.quotas.share()
            self.logbook.counts.storage_rounds += 1

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` without waiting for it, kept until it ends."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for msg in ws:
            if msg.type is not aiohttp.WSMsgType.TEXT:
                continue
            if msg.data.startswith(_UNREAD):
                continue  # our sessions' Runtime: console traffic we never read
            try:
                message = orjson.loads(msg.data)
                self._dispatch(message)
            except Exception:  # one bad event must not stop the watcher
                log.exception("watcher: could not handle a message")

    def _dispatch(self, message: dict[str, Any]) -> None:
        if self._calls.answered(message):
            return
        method = message.get("method")
        params = message.get("params") or {}
        session = message.get("sessionId")
        if isinstance(session, str) and isinstance(method, str):
            probe = self._tab_finds.get(session)
            if probe is not None and method == "Target.attachedToTarget":
                info = params.get("targetInfo") or {}
                page = info.get("targetId")
                if info.get("type") == "page" and isinstance(page, str) and not probe.done():
                    probe.set_result(page)
                return
            # Our own session on a tab (Runtime on): our worlds' contexts.
            tab = self.probes.tabs_of.get(session)
            if tab is not None and method.startswith("Runtime.executionContext"):
                self.worlds.heard(tab, method, params)
            elif method == "Runtime.executionContextCreated":  # a quota's session
                self.quotas.context_made(session, params)
            return
        if method in ("Target.targetCreated", "Target.targetInfoChanged"):
            info = params.get("targetInfo", {})
            target, kind = info.get("targetId"), info.get("type")
            if not isinstance(target, str) or not isinstance(kind, str):
                return
            url = str(info.get("url", ""))
            made_in = info.get("browserContextId")
            parent = info.get("parentId")
            self.known.learn(
                TargetSeen(
                    target,
                    kind,
                    url,
                    made_in if isinstance(made_in, str) else None,
                    parent if isinstance(parent, str) else None,
                )
            )
            if self.keeper.warm.withheld(made_in):
                if url not in ("", "about:blank"):
                    self.keeper.spoiled(made_in)  # a warm tab only ever shows about:blank
                return  # on no one's record until a scope is handed it
            if kind in ("page", "iframe") and self.settings.origin_storage_bytes:
                self.quotas.bound(target, url)
            # Tabs are web pages: the browser's own UI (Chromium lists its
            # omnibox popup as a page at a chrome:// URL) is none of them.
            if not is_tab((kind, url)):
                return
            known = self.logbook.causes.url(target)
            context = info.get("browserContextId")
            context = context if isinstance(context, str) else None
            if method == "Target.targetCreated" and not self._initial:
                self.logbook.created(target, url, info.get("openerId"), context)
            elif known is None:
                self.logbook.causes.known(target, url, info.get("openerId"), context)
            elif url != known:
                self.logbook.navigated(target, url)
        elif method == "Browser.downloadWillBegin":
            self.downloads.began(params)
        elif method == "Browser.downloadProgress":
            self.downloads.moved(params)
        elif method == "Target.targetCrashed":
            tab = params.get("targetId")
            if isinstance(tab, str):
                self.keeper.spoiled(self.known.context_of(tab))
        elif method == "Target.targetDestroyed":
            tab = params.get("targetId")
            if isinstance(tab, str):
                context = self.known.context_of(tab)
                self.keeper.spoiled(context)
                self.known.learn(Gone(tab))
                self.quotas.gone(tab, context)
                self.probes.gone(tab)
                if self.logbook.causes.url(tab) is not None:
                    self.logbook.destroyed(tab)
        elif method == "Target.detachedFromTarget":
            session = params.get("sessionId")
            if isinstance(session, str):
                self._calls.detached(session)  # Chromium answers none still waiting on it
                self.quotas.detached(session)
                self.probes.detached(session)

    async def _find_front(self) -> None:
        """Which of the tabs found at start is in front: the one page that says it
        is visible (before any client emulates focus; best effort)."""
        shown: list[str] = []
        for tab in list(self.logbook.causes.front.order):
            try:
                session = await self.probes.session(tab)
                if session is None:
                    continue
                answer = await self.call(
                    "Runtime.evaluate",
                    {"expression": "document.visibilityState", "returnByValue": True},
                    session=session,
                    deadline_s=2.0,
                )
            except (WatcherError, TimeoutError):
                continue
            if answer.get("result", {}).get("result", {}).get("value") == "visible":
                shown.append(tab)
        if len(shown) == 1:
            self.logbook.causes.front.to_front(shown[0])

    def _fail_calls(self, why: str) -> None:
        self._calls.fail(WatcherError(why))

    async def call(
        self,
        method: str,
        params: dict[str, Any],
        session: str | None = None,
        deadline_s: float = 5.0,
    ) -> dict[str, Any]:
        ws = self._ws
        if ws is None or ws.closed:
            raise WatcherError("not connected to Chromium")
        return await self._calls.send(ws, method, params, session, deadline_s)
