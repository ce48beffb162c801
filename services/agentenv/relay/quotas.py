"""The quotas of every origin's storage, set through the watcher's own
sessions (issue 22; :mod:`agentenv.relay.storage_shares` says how much each gets).

As a page or an out-of-process frame opens an http(s) origin, a session of
the watcher's own on that target sets ``Storage.overrideQuotaForOrigin`` and
stays attached (Chromium withdraws an override when its session ends: when
the target goes, another target of the origin sets it again). Every few
seconds the quotas of a scope with two origins or more are shared out again
from what each uses (``Storage.getUsageAndQuota``).

A scope other than home is an off-the-record context: its IndexedDB and
Cache Storage live in the browser process's memory, with a quota Chromium
sizes from the host's memory (11 GB per origin on a 64 GB host), so one
agent's page could write the browser out of the container's memory for
everyone in seconds. A same-site frame of another origin (another port of
the same host, another subdomain) runs in its page's process and has no
target of its own: Runtime is on in the session of ours on each page, so
every frame's execution context, as it is made, names its origin, and that
origin is bounded too (Runtime, not Page: a session with Page on would make
Chromium hold every JavaScript dialog for an answer). Workers, ``blob:`` and
``about:blank`` documents store as the origin that made them. What a page
wrote before the override lands would not be held back; measured, the
override is there before a page storing from its own load has ended its
first transaction (docs/limits.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp

from agentenv.relay.once import once
from agentenv.relay.relay_errors import WatcherError
from agentenv.relay.storage_shares import Key, Shares
from agentenv.relay.watching import Watching
from agentenv.settings import AGENTENV_USER

__all__ = ["FULL_AT", "QUOTA_TOLD_S", "Quotas"]

#: The part of its quota an origin holds when it is on the record as at its
#: quota, and how often at most (seconds) each origin is.
FULL_AT = 0.9
QUOTA_TOLD_S = 60.0

log = logging.getLogger("agentenv.relay.quotas")


def _origin(url: str) -> str | None:
    """An http(s) URL's origin (``scheme://host[:port]``), else None."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}://{host}" if host else None


class Quotas:
    """Each origin's quota, held by a session of the watcher's on a target
    that shows it."""

    def __init__(self, watcher: Watching) -> None:
        self.watcher = watcher
        settings = watcher.settings
        #: The quotas given, per scope.
        self.shares = Shares(settings.origin_storage_bytes, settings.scope_storage_bytes)
        #: Origins whose storage is bounded, by the target whose session holds it.
        self._bounded: dict[str, set[str]] = {}
        #: Each origin's targets.
        self._hosts: dict[Key, set[str]] = {}
        #: Each such target's session of ours that holds its overrides, and
        #: the other way round.
        self.sessions: dict[str, str] = {}
        self._targets: dict[str, str] = {}
        self._attaching: dict[str, asyncio.Task[str | None]] = {}
        #: When each origin at its quota was last on the record.
        self._told: dict[Key, float] = {}

    def forget(self) -> None:
        """Chromium went, and every override with it."""
        self._bounded.clear()
        self.sessions.clear()
        self._targets.clear()
        self._told.clear()
        self._hosts.clear()
        self.shares.forget()

    def gone(self, target: str, context: str | None) -> None:
        """``target`` went: its overrides with it."""
        self._unhost(target, context)
        self._targets.pop(self.sessions.pop(target, ""), None)

    def detached(self, session: str) -> None:
        """A session of ours detached: the overrides it held are withdrawn."""
        for target, ours in list(self.sessions.items()):
            if ours == session:
                del self.sessions[target]
                self._unhost(target, self.watcher.known.context_of(target))
        self._targets.pop(session, None)

    def context_made(self, session: str, params: dict[str, Any]) -> None:
        """A frame's execution context was made in a page a session of ours
        is on (``Runtime.executionContextCreated``): its origin is bounded
        there too (a same-site frame of another origin has no target)."""
        target = self._targets.get(session)
        origin = (params.get("context") or {}).get("origin")
        if target is not None and isinstance(origin, str):
            self.bound(target, origin)

    def bound(self, target: str, url: str) -> None:
        """Bound the storage of ``url``'s origin, once per target."""
        origin = _origin(url)
        if origin is None:
            return
        done = self._bounded.setdefault(target, set())
        if origin in done:
            return
        done.add(origin)
        key = (self.watcher.known.context_of(target) or self.watcher.default_context or "", origin)
        self._hosts.setdefault(key, set()).add(target)
        self.watcher.spawn(self._override(target, key))

    def _scope_of(self, context: str) -> str:
        return self.watcher.scope_name(context) or self.watcher.scopes.home or ""

    def _unhost(self, target: str, context: str | None) -> None:
        """``target`` holds no overrides any more: each of its origins that
        another target still shows gets its quota set again there."""
        for origin in self._bounded.pop(target, set()):
            key = (context or self.watcher.default_context or "", origin)
            hosts = self._hosts.get(key)
            if hosts is None:
                continue
            hosts.discard(target)
            if hosts:
                self.watcher.spawn(self._override(next(iter(hosts)), key))
            else:
                del self._hosts[key]

    async def _override(self, target: str, key: Key) -> None:
        context, origin = key
        try:
            session = self.sessions.get(target) or await once(self._attaching, target, self._attach)
            if session is None:
                return  # gone already
            quota = self.shares.quota(self._scope_of(context), key)
            params = {"origin": origin, "quotaSize": quota}
            done = await self.watcher.call(
                "Storage.overrideQuotaForOrigin", params, session=session
            )
            if "error" in done:
                log.warning("watcher: %s's storage unbounded: %s", origin[:100], done["error"])
        except (WatcherError, TimeoutError) as exc:
            log.debug("watcher: could not bound %s's storage: %s", origin[:100], exc)

    async def share(self) -> None:
        """Each scope's quotas shared out again from what its origins use (a
        scope of one origin has nothing to share), and an origin at its
        quota on the record; the watcher asks every few seconds."""
        for scope, given in list(self.shares.given.items()):
            try:
                used = await self._usage(list(given))
                self._at_quota(scope, used)
                if len(given) >= 2:
                    await self._share_scope(scope, used)
            except (WatcherError, TimeoutError, OSError, aiohttp.ClientError) as exc:
                log.debug("watcher: could not share %s's storage: %s", scope[:64], exc)

    def _at_quota(self, scope: str, used: dict[Key, int]) -> None:
        """An origin that holds :data:`FULL_AT` of its quota or more is on
        the record (rule ``storage-quota``), once a minute at most: its
        pages' writes past it are refused by Chromium (``QuotaExceededError``),
        which the relay does not see itself."""
        now = self.watcher.logbook.monotonic()
        given = self.shares.given.get(scope, {})
        for key, usage in used.items():
            quota = given.get(key)
            if quota is None or usage < quota * FULL_AT:
                continue
            if now - self._told.get(key, -QUOTA_TOLD_S) < QUOTA_TOLD_S:
                continue
            self._told[key] = now
            self.watcher.logbook.refused(
                AGENTENV_USER,
                0,
                None,
                "storage-quota",
                f"refused by agentenv guard storage-quota: {key[1][:200]} in scope "
                f"{scope[:64]} holds {usage} of its {quota} bytes "
                "(AGENTENV_ORIGIN_STORAGE_BYTES, AGENTENV_SCOPE_STORAGE_BYTES): its pages' "
                "writes past it get QuotaExceededError; delete what it stored, or data/reset",
                scope=scope,
                origin=key[1][:200],
            )

    def _session_in(self, key: Key) -> str | None:
        """A session of ours that can read or set ``key``'s quota: one on a
        target showing the origin, else one on any target of its context
        (an origin's usage and override are its context's, whichever page
        asks)."""
        for host in self._hosts.get(key) or ():
            if host in self.sessions:
                return self.sessions[host]
        context = key[0]
        default = self.watcher.default_context or ""
        for shown, session in self.sessions.items():
            if (self.watcher.known.context_of(shown) or default) == context:
                return session
        return None

    async def _usage(self, keys: list[Key]) -> dict[Key, int]:
        """What each origin stores (one with no page of its context open is
        not measured)."""
        used: dict[Key, int] = {}
        for key in keys:
            session = self._session_in(key)
            if session is None:
                continue  # no page of its context is open: it keeps its quota
            answer = await self.watcher.call(
                "Storage.getUsageAndQuota", {"origin": key[1]}, session=session
            )
            usage = answer.get("result", {}).get("usage")
            if isinstance(usage, (int, float)):
                used[key] = int(usage)
        return used

    async def _share_scope(self, scope: str, used: dict[Key, int]) -> None:
        for key, quota in self.shares.rebalance(scope, used).items():
            session = self._session_in(key)
            if session is not None:
                await self.watcher.call(
                    "Storage.overrideQuotaForOrigin",
                    {"origin": key[1], "quotaSize": quota},
                    session=session,
                )

    async def _attach(self, target: str) -> str | None:
        answer = await self.watcher.call(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, deadline_s=5.0
        )
        session = answer.get("result", {}).get("sessionId")
        if isinstance(session, str) and self.watcher.known.target(target) is not None:
            self.sessions[target] = session
            self._targets[session] = target
            # Each frame's context, there already or made later, names its origin.
            self.watcher.spawn(self._runtime(session))
            return session
        return None

    async def _runtime(self, session: str) -> None:
        try:
            await self.watcher.call("Runtime.enable", {}, session=session)
        except (WatcherError, TimeoutError) as exc:
            log.debug("watcher: a page's frames' origins unbounded: %s", exc)
