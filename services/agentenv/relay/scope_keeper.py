"""The scopes a relay keeps in Chromium (a part of the watcher, as the
quotas and downloads are): each scope's browser context made on first need,
scopes opened, reset and closed on demand with their place in the queue
(``scopes/open``, ``scopes/reset``, ``scopes/close``), the warm pool of
contexts made ahead and refilled in the background (:mod:`.warm`), and what a
relay before this one left: its open scopes closed, its contexts disposed of.

It reaches Chromium and the rest of the relay only through the watcher, as
:class:`Keeping` describes it (:mod:`.watching`: no import of :mod:`.watcher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

import aiohttp

from agentenv.access import Identity
from agentenv.admission import Admission, Full, Gate
from agentenv.opened import REVOKED, opened_of
from agentenv.relay.effects import Begin, Ended
from agentenv.relay.known import InContext
from agentenv.relay.once import once
from agentenv.relay.opening import Openings, ScopeRefused
from agentenv.relay.quotas import Quotas
from agentenv.relay.relay_errors import RelayError, UpstreamError, WatcherError
from agentenv.relay.scope_downloads import Downloads
from agentenv.relay.vault import Vault
from agentenv.relay.warm import REFILL_AFTER_TAKE_S, Warm, WarmPool
from agentenv.relay.watching import Watching
from agentenv.scopes import Scope
from agentenv.settings import AGENTENV_USER

__all__ = ["NOT_ANSWERING", "RESTARTED", "Keeping", "ScopeKeeper"]

log = logging.getLogger("agentenv.relay.watcher")

NOT_ANSWERING = "Chromium is not answering; retry when /readyz says ready"
#: Why a restarted relay closed the scopes opened before it.
RESTARTED = (
    "the relay restarted: it closed the scopes opened before, whose browser contexts it "
    "could not know again; open a new one with scopes/open"
)


class Keeping(Watching, Protocol):
    """The watcher, as the scope keeper sees it."""

    @property
    def http(self) -> aiohttp.ClientSession: ...

    @property
    def downloads(self) -> Downloads: ...

    @property
    def quotas(self) -> Quotas: ...

    @property
    def vault(self) -> Vault: ...

    @property
    def after_reset(self) -> Callable[[], Awaitable[None]] | None: ...

    @property
    def end_connections(self) -> Callable[[str, bool, str], Awaitable[None]] | None: ...

    async def own_command(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None: ...


class ScopeKeeper:
    def __init__(self, watcher: Keeping) -> None:
        self.watcher = watcher
        settings = watcher.settings
        #: The scopes opened on demand, and the file every door reads them from.
        self.openings = Openings.of(settings.max_scopes, settings.users, settings.scopes.values())
        self.opened = opened_of(settings.scopes_file)
        #: Scopes a relay before this one opened (the file lists them): this
        #: one knows none of their contexts, so it closes them (:meth:`close_left`).
        self.left_open: list[str] = []
        #: Until the first connection to Chromium, on a computer of scopes:
        #: every browser context but its default one is a relay before this
        #: one's, which no scope of this one holds (none reachable now).
        self._left_contexts = watcher.scopes.isolated
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
        #: and scopes/reset to hand over, refilled by :meth:`keep_warm`.
        self.warm = WarmPool(settings.warm_pool)
        self._warm_wake = asyncio.Event()
        #: Resets under way: no warm context is made meanwhile.
        self._warm_held = 0
        #: Warm contexts of a lost connection, to dispose of on the next.
        self._warm_left: list[str] = []

    @property
    def left_contexts(self) -> bool:
        """Whether a relay before this one's contexts are still to dispose of."""
        return self._left_contexts

    def lost(self) -> None:
        """The connection to Chromium ended: the warm contexts went with it,
        or go on the next connection."""
        self._warm_left.extend(self.warm.reset())

    def warming(self) -> bool:
        """Whether there is a warm pool to keep (or its leftovers to dispose of)."""
        return bool(self.warm.size or self._warm_left)

    async def scope(self, name: str) -> Scope:
        """The scope ``name``, its browser context made on first need (with a
        blank tab in it, as a fresh Chromium has one)."""
        found = self.watcher.scopes.made.get(name)
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
                found = await self.watcher.call("Target.getBrowserContexts", {}, deadline_s=10)
            except (WatcherError, TimeoutError):
                raise UpstreamError(NOT_ANSWERING) from None
            for context in found.get("result", {}).get("browserContextIds", []):
                if isinstance(context, str) and context != self.watcher.default_context:
                    await self.watcher.own_command(
                        "Target.disposeBrowserContext", {"browserContextId": context}
                    )
        finally:
            self._warm_held -= 1
            self._warm_wake.set()
        self.watcher.scopes.reset()
        self.watcher.vault.drop_all()  # every scope's credentials go with its data
        self.watcher.quotas.shares.forget()  # every context but the default one went, and its data
        if self.watcher.after_reset is not None:
            await self.watcher.after_reset()

    async def open_scope(
        self, asked: str | None, person: str | None = None
    ) -> tuple[str, str, str | None]:
        """``scopes/open``: a scope opened on demand, its context made with one
        blank tab before it is handed out; its name, its token, and its
        person's token when ``person`` names one."""
        self.openings.admit(asked, cap=False)  # a bad name is refused before any wait
        if person is not None:
            self.openings.check_person(person)
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
            person_token = None if person is None else self.openings.add_person(name, person)
            self._write_opened()
            await self.take_context(name)
        except RelayError:
            self._removed(name)
            with contextlib.suppress(RelayError):
                self._write_opened()
            raise
        return name, token, person_token

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
        if name in self.watcher.scopes.made or name in self._making:
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
        self.watcher.scopes.made[name] = scope
        self.watcher.known.learn(InContext(warm.tab, warm.context))
        # Its first tab on the record as the scope's, as if made now (it was
        # made ahead, on no one's record: no scope held it).
        params = {"url": "about:blank", "browserContextId": warm.context}
        entry = self.watcher.logbook.begin(
            Begin(
                Identity(AGENTENV_USER, control=True), 0, None, "Target.createTarget", params, None
            )
        )
        self.watcher.logbook.created(warm.tab, "about:blank", None, warm.context)
        self.watcher.logbook.end(Ended(entry, True, None, opened=warm.tab))
        try:
            await self.watcher.downloads.set_for(scope)
        except (WatcherError, TimeoutError, OSError) as exc:
            log.warning("scope %r: could not set its downloads folder: %s", name, exc)
        return scope

    async def keep_warm(self) -> None:
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
            made = await self.watcher.call("Target.createBrowserContext", {}, deadline_s=10)
            found = made.get("result", {}).get("browserContextId")
            if not isinstance(found, str):
                raise WatcherError(f"no browser context: {made.get('error')}")
            context = found
            self.warm.named(generation, context)
            opened = await self.watcher.call(
                "Target.createTarget",
                {"url": "about:blank", "browserContextId": context},
                deadline_s=10,
            )
            tab = opened.get("result", {}).get("targetId")
            if not isinstance(tab, str):
                raise WatcherError(f"no tab: {opened.get('error')}")
            self.watcher.known.learn(InContext(tab, context))
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
        attached = await self.watcher.call(
            "Target.attachToTarget", {"targetId": tab, "flatten": True}, deadline_s=10
        )
        session = attached.get("result", {}).get("sessionId")
        if not isinstance(session, str):
            raise WatcherError(f"could not attach to the tab: {attached.get('error')}")
        try:
            answer = await self.watcher.call(
                "Runtime.evaluate", {"expression": "0"}, session=session, deadline_s=10
            )
            if "error" in answer:
                raise WatcherError(f"the tab did not answer: {answer['error']}")
        finally:
            with contextlib.suppress(WatcherError, TimeoutError):
                await self.watcher.call(
                    "Target.detachFromTarget", {"sessionId": session}, deadline_s=5
                )

    async def _dispose(self, context: str) -> None:
        """A warm context thrown away (bounded; a failure only logged)."""
        try:
            await self.watcher.call(
                "Target.disposeBrowserContext", {"browserContextId": context}, deadline_s=10
            )
        except (WatcherError, TimeoutError) as exc:
            log.warning("warm scopes: could not dispose of a context: %s", exc)

    def spoiled(self, context: str | None) -> None:
        """A warm context's tab went, crashed or navigated: never handed over."""
        if self.warm.spoiled(context):
            assert context is not None
            log.warning("warm scopes: a warm context's tab changed; disposed of, made again")
            self.watcher.spawn(self._dispose(context))
            self._warm_wake.set()

    async def _dispose_left(self) -> None:
        """Warm contexts a lost connection or a relay before this one left
        (the warm file lists them): disposed of, never handed over."""
        left = set(self._warm_left)
        self._warm_left.clear()
        try:
            listed = json.loads(self.watcher.settings.warm_file.read_text())
            left.update(c for c in listed if isinstance(c, str))
        except (OSError, ValueError, TypeError):
            pass
        if not left:
            return
        try:
            found = await self.watcher.call("Target.getBrowserContexts", {}, deadline_s=10)
        except (WatcherError, TimeoutError):
            self._warm_left.extend(left)
            return
        for context in found.get("result", {}).get("browserContextIds", []):
            if context in left and context != self.watcher.default_context:
                await self.watcher.own_command(
                    "Target.disposeBrowserContext", {"browserContextId": context}
                )

    def _write_warm(self) -> None:
        """The warm file: every warm context now, and those still to dispose of."""
        if not self.warm.size and not self._warm_left:
            return
        path = self.watcher.settings.warm_file
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            part = path.with_name(path.name + ".part")
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump([*self.warm.contexts(), *self._warm_left], out)
            os.replace(part, path)
        except OSError as exc:
            log.warning("warm scopes: could not write %s: %s", path, exc)

    async def dispose_left_contexts(self) -> None:
        """On this relay's first connection to Chromium: every browser context
        but Chromium's default one was made for a relay before this one (the
        scopes it had made, their agents' contexts, its warm ones). No scope
        of this relay holds any, so none is reachable: each is disposed of,
        on the record, before any is made."""
        try:
            found = await self.watcher.call("Target.getBrowserContexts", {}, deadline_s=10)
        except (WatcherError, TimeoutError):
            return  # tried again on the next connection
        for context in found.get("result", {}).get("browserContextIds", []):
            if isinstance(context, str) and context != self.watcher.default_context:
                await self.watcher.own_command(
                    "Target.disposeBrowserContext", {"browserContextId": context}
                )
        self._left_contexts = False

    async def close_left(self) -> None:
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
            self.watcher.logbook.writer.record(
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
        url = f"http://127.0.0.1:{self.watcher.settings.recorder_port}/end_all"
        token = self.watcher.settings.control_token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with self.watcher.http.post(
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
        if self.watcher.end_connections is not None:
            await self.watcher.end_connections(name, True, "this scope was closed")

    async def close_scope(self, name: str) -> None:
        """The second half of ``scopes/close``: every context it made disposed
        of, every connection still in it ended, its downloads emptied, its
        quotas and log share dropped; its name free again."""
        self.openings.get(name)
        await self.revoke_scope(name)
        await self._clear_scope(name, "this scope was closed")
        self.watcher.logbook.writer.forget(name)
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
        if self.watcher.end_connections is not None:
            await self.watcher.end_connections(name, False, why)
        making = self._making.get(name)
        if making is not None:
            # A context being made for it (a connection that came as it
            # closed): made first, then disposed of with the rest.
            await asyncio.wait([making], timeout=15)
        scope = self.watcher.scopes.drop(name)
        if scope is not None:
            for context in [scope.context, *sorted(scope.made)]:
                if context != self.watcher.default_context:
                    await self.watcher.own_command(
                        "Target.disposeBrowserContext", {"browserContextId": context}
                    )
        self.watcher.quotas.shares.drop(name)
        self.watcher.vault.clear(name)  # a scope closed or made new holds no credential
        await self.watcher.downloads.empty(name)

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
        if name == self.watcher.scopes.home:
            # Chromium's own default context: its tabs are there already.
            if self.watcher.default_context is None:
                raise UpstreamError(NOT_ANSWERING)
            home = Scope(name, self.watcher.default_context)
            self.watcher.scopes.made[name] = home
            return home
        try:
            made = await self.watcher.call("Target.createBrowserContext", {}, deadline_s=10)
        except (WatcherError, TimeoutError):
            raise UpstreamError(NOT_ANSWERING) from None
        context = made.get("result", {}).get("browserContextId")
        if not isinstance(context, str):
            raise UpstreamError(f"Chromium made no browser context for scope {name!r}", 502)
        scope = Scope(name, context)
        self.watcher.scopes.made[name] = scope
        try:
            await self.watcher.downloads.set_for(scope)
        except (WatcherError, TimeoutError, OSError) as exc:
            log.warning("scope %r: could not set its downloads folder: %s", name, exc)
        # Its first tab; if Chromium does not answer, the scope stands and
        # its clients open their own tabs.
        answer = await self.watcher.own_command(
            "Target.createTarget", {"url": "about:blank", "browserContextId": context}
        )
        opened = (answer or {}).get("result", {}).get("targetId")
        if isinstance(opened, str):
            self.watcher.known.learn(InContext(opened, context))
        return scope
