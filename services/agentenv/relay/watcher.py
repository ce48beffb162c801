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

Two parts hold their own state on its connection: each origin's storage
quota, held by a session of its own on a target that shows the origin
(:mod:`agentenv.relay.quotas`, issue 22), and each scope's downloads, their
folder and their share of it (:mod:`agentenv.relay.scope_downloads`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any

import aiohttp
import orjson

from agentenv.access import Identity
from agentenv.admission import Admission, Full, Gate
from agentenv.calls import Calls
from agentenv.opened import REVOKED, opened_of
from agentenv.protocol.urls import tab as is_tab
from agentenv.relay.logbook import Logbook
from agentenv.relay.once import once
from agentenv.relay.oom import read_oom_kills, why_exited
from agentenv.relay.opening import Openings, ScopeRefused
from agentenv.relay.probes import Probes
from agentenv.relay.quotas import Quotas
from agentenv.relay.relay_errors import RelayError, UpstreamError, WatcherError
from agentenv.relay.scope_downloads import Downloads
from agentenv.relay.traces import Traces
from agentenv.relay.warm import REFILL_AFTER_TAKE_S, Warm, WarmPool
from agentenv.relay.worlds import RelayWorlds
from agentenv.scopes import Scope, Scopes
from agentenv.settings import AGENTENV_USER, Settings

__all__ = ["Watcher"]

log = logging.getLogger("agentenv.relay.watcher")


NOT_ANSWERING = "Chromium is not answering; retry when /readyz says ready"
#: Why a restarted relay closed the scopes opened before it.
RESTARTED = (
    "the relay restarted: it closed the scopes opened before, whose browser contexts it "
    "could not know again; open a new one with scopes/open"
)
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
        #: Every target Chromium reported: id -> (type, url), for the guard.
        self.targets: dict[str, tuple[str, str]] = {}
        #: A target's parent target (Chromium's parentId): an iframe's page.
        self.parents: dict[str, str] = {}
        #: A target's browser context (Chromium's browserContextId).
        self.contexts: dict[str, str] = {}
        #: The scopes, each with its browser context once a user connected.
        self.scopes = Scopes.of(settings)
        #: Run once data/reset has disposed of the scopes' contexts: the relay
        #: closes the connections still acting in them.
        self.after_reset: Callable[[], Awaitable[None]] | None = None
        #: Ends the connections acting in a scope (the agents' only, or every
        #: one, the control token's links in it too): set by the server.
        self.end_connections: Callable[[str, bool, str], Awaitable[None]] | None = None
        #: The scopes opened on demand, and the file every door reads them from.
        self.openings = Openings.of(settings.max_scopes, settings.users, settings.scopes.values())
        self.opened = opened_of(settings.scopes_file)
        #: Scopes a relay before this one opened (the file lists them): this
        #: one knows none of their contexts, so it closes them (:meth:`_close_left`).
        self.left_open: list[str] = []
        #: Until the first connection to Chromium, on a computer of scopes:
        #: every browser context but its default one is a relay before this
        #: one's, which no scope of this one holds (none reachable now).
        self._left_contexts = self.scopes.isolated
        if settings.max_scopes:
            left = self.opened.scopes()
            self.openings.open.update(left)
            self.left_open = sorted(left)
            for name in self.left_open:
                # Its token revoked at every door at once (a digest no token
                # has); the close itself once Chromium answers, the scope
                # still open until then (one being closed as well) so the
                # recorder's link can come into it and end its recordings.
                self.openings.open[name] = replace(left[name], digest=REVOKED, closing=False)
            if self.left_open:
                with contextlib.suppress(RelayError):  # said loudly; the doors read it again
                    self._write_opened()
        #: Past AGENTENV_MAX_SCOPES, a scopes/open waits here for a close
        #: (agentenv.admission): each open scope holds a place until closed.
        self.scope_gate = Gate(
            Admission(
                capacity=settings.max_scopes,
                per_key=0,
                queue_length=settings.queue_length,
                wait_s=settings.queue_wait_s,
                what="scopes",
                capacity_setting="AGENTENV_MAX_SCOPES",
            )
        )
        self._places = {n: self.scope_gate.admission.hold(n) for n in self.openings.open}
        self._making: dict[str, asyncio.Task[Scope]] = {}
        #: Warm scopes (relay/warm.py): contexts made ahead for scopes/open
        #: and scopes/reset to hand over, refilled by :meth:`_keep_warm`.
        self.warm = WarmPool(settings.warm_pool)
        self._warm_wake = asyncio.Event()
        #: Resets under way: no warm context is made meanwhile.
        self._warm_held = 0
        #: Warm contexts of a lost connection, to dispose of on the next.
        self._warm_left: list[str] = []
        #: Chromium's browser endpoint, as its /json/version said when the
        #: watcher connected (a client's connection goes there, not asking again).
        self.browser_url: str | None = None
        #: Chromium's own default browser context (the home scope's).
        self.default_context: str | None = None
        logbook.scope_of = self.scope_name
        logbook.users_of = self.scopes.users_of
        self._tasks: set[asyncio.Task[Any]] = set()
        #: A tab-type target's page (chromedriver's window handles are the
        #: tab-type ids; the log and the tabs are the pages').
        self.tab_pages: dict[str, str] = {}
        self._finding: dict[str, asyncio.Task[str | None]] = {}
        self._tab_finds: dict[str, asyncio.Future[str]] = {}  # our tab session -> its page
        #: The cgroup's OOM kills so far: one more when Chromium went says why.
        self._oom_kills = read_oom_kills()
        #: Each scope's downloads and its share of the folder.
        self.downloads = Downloads(self)
        #: Each origin's storage quota, held by a session of ours.
        self.quotas = Quotas(self)
        #: The password check and what a press lands on, on sessions of ours.
        self.probes = Probes(self)

    async def page_of_tab(self, tab: str) -> str | None:
        """The page of the tab-type target ``tab``, found once (bounded): the
        watcher attaches to the tab and hears its page attach. None if it is
        no tab-type target, or Chromium did not say in time."""
        found = self.tab_pages.get(tab)
        if found is not None:
            return found
        known = self.targets.get(tab)
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
        self.tab_pages[tab] = page
        return page

    def tab_of(self, target: str) -> str:
        """The tab a target belongs to (an iframe's page, through nested
        frames), or the target itself when none is known."""
        found = target
        for _ in range(32):
            info = self.targets.get(found)
            if info is not None and is_tab(info):
                return found
            parent = self.parents.get(found)
            if parent is None:
                return target
            found = parent
        return target

    def target(self, target: str) -> tuple[str, str] | None:
        """What the watcher knows of a target: ``(type, url)``, None if unknown."""
        return self.targets.get(target)

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
        return self.contexts.get(target)

    async def scope(self, name: str) -> Scope:
        """The scope ``name``, its browser context made on first need (with a
        blank tab in it, as a fresh Chromium has one)."""
        found = self.scopes.made.get(name)
        if found is not None:
            return found
        if self.openings.was_closed(name) and name not in self.openings.fixed:
            # A scope being closed (or closed) gets no context again: one made
            # now would outlive the close, into the next scope of its name.
            raise ScopeRefused(f"scope: {name[:64]!r} was closed", status=404)
        return await once(self._making, name, self._make_scope)

    async def reset_scopes(self) -> None:
        """``data/reset``: dispose of every browser context but Chromium's own
        (the ones agents made, and the scopes other than the home one, made
        again when their users next connect), each on the record."""
        # Warm contexts go with the rest: none is made until every context is
        # disposed of, and one being made now is thrown away when it comes.
        self._warm_held += 1
        try:
            self.warm.reset()
            try:
                found = await self.call("Target.getBrowserContexts", {}, deadline_s=10)
            except (WatcherError, TimeoutError):
                raise UpstreamError(NOT_ANSWERING) from None
            for context in found.get("result", {}).get("browserContextIds", []):
                if isinstance(context, str) and context != self.default_context:
                    await self._own_command(
                        "Target.disposeBrowserContext", {"browserContextId": context}
                    )
        finally:
            self._warm_held -= 1
            self._warm_wake.set()
        self.scopes.reset()
        self.quotas.shares.forget()  # every context but the default one went, and its data
        if self.after_reset is not None:
            await self.after_reset()

    async def open_scope(self, asked: str | None) -> tuple[str, str]:
        """``scopes/open``: a scope opened on demand, its context made with one
        blank tab before it is handed out; its name and its token."""
        self.openings.admit(asked, cap=False)  # a bad name is refused before any wait
        try:
            place = await self.scope_gate.take(asked or "")
        except Full as full:
            raise ScopeRefused(f"{full.why} (retry after {full.retry_after} s)", 429) from None
        try:
            name = self.openings.admit(asked)  # the name again: another may have taken it
            _, token = self.openings.add(name)
        except BaseException:
            self.scope_gate.give_back(place)
            raise
        self._places[name] = place
        try:
            self._write_opened()
            await self.take_context(name)
        except RelayError:
            self._removed(name)
            with contextlib.suppress(RelayError):
                self._write_opened()
            raise
        return name, token

    def _removed(self, name: str) -> None:
        """``name`` is no longer open: its place goes to the next waiting."""
        self.openings.remove(name)
        place = self._places.pop(name, None)
        if place is not None:
            self.scope_gate.give_back(place)

    async def take_context(self, name: str) -> Scope:
        """A fresh browser context with one blank tab for the scope ``name``:
        a warm one handed over (relay/warm.py), its pool refilled in the
        background; made now if none is ready."""
        if name in self.scopes.made or name in self._making:
            return await self.scope(name)  # a connection is making it already
        warm = self.warm.take()
        if warm is None:
            if self.warm.size:
                log.info("warm scopes: none ready for scope %r; made now", name)
            return await self.scope(name)
        # Made again a moment later: a renderer starting now would slow the
        # agent's first commands on the two cores it shares.
        asyncio.get_running_loop().call_later(REFILL_AFTER_TAKE_S, self._warm_wake.set)
        scope = Scope(name, warm.context)
        self.scopes.made[name] = scope
        self.contexts[warm.tab] = warm.context
        # Its first tab on the record as the scope's, as if made now (it was
        # made ahead, on no one's record: no scope held it).
        params = {"url": "about:blank", "browserContextId": warm.context}
        entry = self.logbook.begin_command(
            Identity(AGENTENV_USER, control=True), 0, None, "Target.createTarget", params, None
        )
        self.logbook.created(warm.tab, "about:blank", None, warm.context)
        self.logbook.end_command(entry, True, None, opened=warm.tab)
        try:
            await self.downloads.set_for(scope)
        except (WatcherError, TimeoutError, OSError) as exc:
            log.warning("scope %r: could not set its downloads folder: %s", name, exc)
        return scope

    async def _keep_warm(self) -> None:
        """Keep the warm pool full, one context at a time, for as long as the
        watcher is connected: woken by a take, a spoiled context or a reset;
        a failure is logged and tried again after a growing wait."""
        await self._dispose_left()
        while True:
            self._warm_wake.clear()
            self._write_warm()
            if self.warm.wanted() and not self._warm_held:
                wait = await self._make_warm()
                if wait:
                    await asyncio.sleep(wait)
                continue
            await self._warm_wake.wait()

    async def _make_warm(self) -> float:
        """Make one warm context: its blank tab, and its renderer started (the
        tab answers a ``Runtime.evaluate``). How long to wait before the next
        try (0 when it was made)."""
        generation = self.warm.begin()
        context: str | None = None
        try:
            made = await self.call("Target.createBrowserContext", {}, deadline_s=10)
            found = made.get("result", {}).get("browserContextId")
            if not isinstance(found, str):
                raise WatcherError(f"no browser context: {made.get('error')}")
            context = found
            self.warm.named(generation, context)
            opened = await self.call(
                "Target.createTarget",
                {"url": "about:blank", "browserContextId": context},
                deadline_s=10,
            )
            tab = opened.get("result", {}).get("targetId")
            if not isinstance(tab, str):
                raise WatcherError(f"no tab: {opened.get('error')}")
            self.contexts[tab] = context
            await self._start_renderer(tab)
        except (WatcherError, TimeoutError) as exc:
            wait = self.warm.failed(generation, context)
            log.warning("warm scopes: could not make one (%s); trying again in %.1f s", exc, wait)
            if context is not None:
                await self._dispose(context)
            return wait
        if not self.warm.made(generation, Warm(context, tab)):
            await self._dispose(context)  # a reset came meanwhile, or its tab went
        return 0.0

    async def _start_renderer(self, tab: str) -> None:
        """The tab's renderer started and its document ready: a session of
        the watcher's evaluates a literal in it (nothing the page keeps), then
        detaches, so the agent's first command finds it running."""
        attached = await self.call(
            "Target.attachToTarget", {"targetId": tab, "flatten": True}, deadline_s=10
        )
        session = attached.get("result", {}).get("sessionId")
        if not isinstance(session, str):
            raise WatcherError(f"could not attach to the tab: {attached.get('error')}")
        try:
            answer = await self.call(
                "Runtime.evaluate", {"expression": "0"}, session=session, deadline_s=10
            )
            if "error" in answer:
                raise WatcherError(f"the tab did not answer: {answer['error']}")
        finally:
            with contextlib.suppress(WatcherError, TimeoutError):
                await self.call("Target.detachFromTarget", {"sessionId": session}, deadline_s=5)

    async def _dispose(self, context: str) -> None:
        """A warm context thrown away (bounded; a failure only logged)."""
        try:
            await self.call(
                "Target.disposeBrowserContext", {"browserContextId": context}, deadline_s=10
            )
        except (WatcherError, TimeoutError) as exc:
            log.warning("warm scopes: could not dispose of a context: %s", exc)

    def _spoiled(self, context: str | None) -> None:
        """A warm context's tab went, crashed or navigated: never handed over."""
        if self.warm.spoiled(context):
            assert context is not None
            log.warning("warm scopes: a warm context's tab changed; disposed of, made again")
            self.spawn(self._dispose(context))
            self._warm_wake.set()

    async def _dispose_left(self) -> None:
        """Warm contexts a lost connection or a relay before this one left
        (the warm file lists them): disposed of, never handed over."""
        left = set(self._warm_left)
        self._warm_left.clear()
        try:
            listed = json.loads(self.settings.warm_file.read_text())
            left.update(c for c in listed if isinstance(c, str))
        except (OSError, ValueError, TypeError):
            pass
        if not left:
            return
        try:
            found = await self.call("Target.getBrowserContexts", {}, deadline_s=10)
        except (WatcherError, TimeoutError):
            self._warm_left.extend(left)
            return
        for context in found.get("result", {}).get("browserContextIds", []):
            if context in left and context != self.default_context:
                await self._own_command(
                    "Target.disposeBrowserContext", {"browserContextId": context}
                )

    def _write_warm(self) -> None:
        """The warm file: every warm context now, and those still to dispose of."""
        if not self.warm.size and not self._warm_left:
            return
        path = self.settings.warm_file
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            part = path.with_name(path.name + ".part")
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump([*self.warm.contexts(), *self._warm_left], out)
            os.replace(part, path)
        except OSError as exc:
            log.warning("warm scopes: could not write %s: %s", path, exc)

    async def _dispose_left_contexts(self) -> None:
        """On this relay's first connection to Chromium: every browser context
        but Chromium's default one was made for a relay before this one (the
        scopes it had made, their agents' contexts, its warm ones). No scope
        of this relay holds any, so none is reachable: each is disposed of,
        on the record, before any is made."""
        try:
            found = await self.call("Target.getBrowserContexts", {}, deadline_s=10)
        except (WatcherError, TimeoutError):
            return  # tried again on the next connection
        for context in found.get("result", {}).get("browserContextIds", []):
            if isinstance(context, str) and context != self.default_context:
                await self._own_command(
                    "Target.disposeBrowserContext", {"browserContextId": context}
                )
        self._left_contexts = False

    async def _close_left(self) -> None:
        """Close the scopes a relay before this one opened, as ``scopes/close``
        does (docs/decisions.md: a restarted relay closes them): their tokens
        were revoked at start and the contexts the last relay made disposed
        of on the first connection; now their open recordings end (asked of
        the recorder, whose link makes the scope a context again to end them
        in), then :meth:`close_scope` (that context disposed of, downloads
        emptied, quotas and log share dropped, the name free), and each close
        is written on the record with why."""
        for name in list(self.left_open):
            await self._end_recordings(name)
            try:
                await self.close_scope(name)
            except RelayError as exc:
                log.error("scope %r: could not be closed: %s; scopes/close closes it", name, exc)
                continue
            self.logbook.writer.record(
                "action",
                {
                    "via": "agentenv",
                    "who": "agentenv",
                    "op": "scopes/close",
                    "args": {"scope": name},
                    "acts": "acting",
                    "ok": True,
                    "why": RESTARTED,
                },
            )
            self.left_open.remove(name)
            log.warning("scope %r: closed (%s)", name, RESTARTED)

    async def _end_recordings(self, scope: str) -> None:
        """The recorder ends ``scope``'s open recordings, each with its
        manifest, as ``scopes/close`` has it do (bounded; a failure is logged:
        such a recording ends at its deadline)."""
        url = f"http://127.0.0.1:{self.settings.recorder_port}/end_all"
        token = self.settings.control_token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with self.http.post(
                url,
                json={"reason": "stopped", "scope": scope},
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=60),
            ) as answer:
                if answer.status != 200:
                    raise aiohttp.ClientError(f"status {answer.status}")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("scope %r: the recorder could not end its recordings: %s", scope, exc)

    async def revoke_scope(self, name: str) -> None:
        """The first half of ``scopes/close``: the scope's token admits no one
        (every door reads the file again), its agents' connections end."""
        self.openings.closing(name)
        self._write_opened()
        if self.end_connections is not None:
            await self.end_connections(name, True, "this scope was closed")

    async def close_scope(self, name: str) -> None:
        """The second half of ``scopes/close``: every context it made disposed
        of, every connection still in it ended, its downloads emptied, its
        quotas and log share dropped; its name free again."""
        self.openings.get(name)
        await self.revoke_scope(name)
        await self._clear_scope(name, "this scope was closed")
        self.logbook.writer.forget(name)
        self._removed(name)
        self._write_opened()

    async def reset_scope(self, name: str) -> None:
        """``scopes/reset``: the scope made new, its token kept: its
        connections ended, its contexts disposed of, its downloads emptied, its
        quotas dropped, and a fresh context with one blank tab made."""
        found = self.openings.get(name)
        if found.closing:
            raise ScopeRefused(f"scope: {name!r} is being closed: close it again", status=409)
        await self._clear_scope(name, "this scope was reset: connect again")
        await self.take_context(name)

    async def _clear_scope(self, name: str, why: str) -> None:
        if self.end_connections is not None:
            await self.end_connections(name, False, why)
        making = self._making.get(name)
        if making is not None:
            # A context being made for it (a connection that came as it
            # closed): made first, then disposed of with the rest.
            await asyncio.wait([making], timeout=15)
        scope = self.scopes.drop(name)
        if scope is not None:
            for context in [scope.context, *sorted(scope.made)]:
                if context != self.default_context:
                    await self._own_command(
                        "Target.disposeBrowserContext", {"browserContextId": context}
                    )
        self.quotas.shares.drop(name)
        await self.downloads.empty(name)

    def _write_opened(self) -> None:
        try:
            self.opened.write(self.openings.open)
        except OSError as exc:
            # Every door reads the file: one not written leaves a closed
            # scope's token good at the app's, so the relay says so loudly.
            log.error("the open scopes' file could not be written: %s", exc)
            raise UpstreamError(
                "the open scopes' file could not be written (the computer's run folder): "
                "retry, or start a fresh computer",
                500,
            ) from None

    async def _make_scope(self, name: str) -> Scope:
        if name == self.scopes.home:
            # Chromium's own default context: its tabs are there already.
            if self.default_context is None:
                raise UpstreamError(NOT_ANSWERING)
            home = Scope(name, self.default_context)
            self.scopes.made[name] = home
            return home
        try:
            made = await self.call("Target.createBrowserContext", {}, deadline_s=10)
        except (WatcherError, TimeoutError):
            raise UpstreamError(NOT_ANSWERING) from None
        context = made.get("result", {}).get("browserContextId")
        if not isinstance(context, str):
            raise UpstreamError(f"Chromium made no browser context for scope {name!r}", 502)
        scope = Scope(name, context)
        self.scopes.made[name] = scope
        try:
            await self.downloads.set_for(scope)
        except (WatcherError, TimeoutError, OSError) as exc:
            log.warning("scope %r: could not set its downloads folder: %s", name, exc)
        # Its first tab; if Chromium does not answer, the scope stands and
        # its clients open their own tabs.
        answer = await self._own_command(
            "Target.createTarget", {"url": "about:blank", "browserContextId": context}
        )
        opened = (answer or {}).get("result", {}).get("targetId")
        if isinstance(opened, str):
            self.contexts[opened] = context
        return scope

    async def _own_command(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """A command of the computer's own on the watcher's connection, on the
        record (conn 0, as ``agentenv``); its answer, None if none came."""
        entry = self.logbook.begin_command(
            Identity(AGENTENV_USER, control=True), 0, None, method, params, None
        )
        try:
            answer = await self.call(method, params, deadline_s=10)
        except (WatcherError, TimeoutError):
            self.logbook.end_command(entry, False, "Chromium did not answer")
            return None
        error = answer.get("error")
        opened = answer.get("result", {}).get("targetId")
        self.logbook.end_command(
            entry,
            error is None,
            str(error.get("message")) if isinstance(error, dict) else None,
            opened=opened if isinstance(opened, str) else None,
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
                if self._left_contexts:
                    await self._dispose_left_contexts()
                await self._find_front()
                self.downloads.make_folders()
                await self.downloads.set_for()
                self.connected.set()
                if self.left_open:
                    self.spawn(self._close_left())
                if self.warm.size or self._warm_left:
                    warming = asyncio.create_task(self._keep_warm())
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
                self._warm_left.extend(self.warm.reset())
                self.connected.clear()
                self.browser_url = None
                self._ws = None
                self.targets.clear()
                self.parents.clear()
                self.contexts.clear()
                self.scopes.forget()
                self.default_context = None
                self._fail_calls("Chromium went away")
                self.probes.forget()
                self.quotas.forget()
                self.downloads.forget()
        # The browser connection ended: Chromium exited (or is restarting).
        self._saw_exit = True
        self.logbook.counts.restarts += 1
        kills = read_oom_kills()
        why = why_exited(self._oom_kills, kills)
        self._oom_kills = kills
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
            self.contexts[target] = context
        return target

    async def _every_few_seconds(self) -> None:
        """Each scope's storage quotas shared out again, and the cgroup's
        memory kills read again (so Chromium's exit names only one that came
        after)."""
        while True:
            await asyncio.sleep(STORAGE_SHARE_S)
            self._oom_kills = read_oom_kills()
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
            self.targets[target] = (kind, url)
            made_in = info.get("browserContextId")
            if isinstance(made_in, str):
                self.contexts[target] = made_in
            parent = info.get("parentId")
            if isinstance(parent, str) and parent:
                self.parents[target] = parent
            if self.warm.withheld(made_in):
                if url not in ("", "about:blank"):
                    self._spoiled(made_in)  # a warm tab only ever shows about:blank
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
                self._spoiled(self.contexts.get(tab))
        elif method == "Target.targetDestroyed":
            tab = params.get("targetId")
            if isinstance(tab, str):
                self._spoiled(self.contexts.get(tab))
                self.targets.pop(tab, None)
                self.tab_pages.pop(tab, None)
                self.parents.pop(tab, None)
                context = self.contexts.pop(tab, None)
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
