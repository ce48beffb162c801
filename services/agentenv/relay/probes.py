"""The relay's probes in a tab, on a session of the watcher's own: the
password check before typing (:mod:`agentenv.relay.password`) and what a
press lands on (:mod:`agentenv.relay.elements`), each in an isolated world
of the relay's (:mod:`agentenv.relay.worlds`) made fresh under a name no one
can predict, so a page's script cannot change what the DOM tells them. The
session is attached on first need and its Runtime is on, so the watcher
hears of every context the worlds get (and hides them from every client)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from agentenv.relay.elements import DESCRIBE_TIMEOUT_S, describe_expression, target
from agentenv.relay.once import once
from agentenv.relay.password import (
    CHECK_TIMEOUT_S,
    HOST_EXPRESSION,
    Focus,
    check_expression,
    field_named,
    host_pending,
    host_verdict,
    verdict,
)
from agentenv.relay.relay_errors import WatcherError
from agentenv.relay.watching import Watching

__all__ = ["Probes"]


class Probes:
    """The watcher's sessions on tabs, and what it asks there."""

    def __init__(self, watcher: Watching) -> None:
        self.watcher = watcher
        self.sessions: dict[str, str] = {}  # tab -> our session
        self.tabs_of: dict[str, str] = {}  # our session -> its tab
        #: tab -> set when the world being made there is made (or failed).
        self._made: dict[str, asyncio.Event] = {}
        self._attaching: dict[str, asyncio.Task[str | None]] = {}

    def forget(self) -> None:
        """Chromium went, and every session of ours with it."""
        self.sessions.clear()
        self.tabs_of.clear()
        for task in self._attaching.values():
            task.cancel()
        self._attaching.clear()

    def gone(self, tab: str) -> None:
        """``tab`` went: its session and world with it."""
        ours = self.sessions.pop(tab, None)
        if ours is not None:
            self.tabs_of.pop(ours, None)
        self.watcher.worlds.gone(tab)
        self._made.pop(tab, None)

    def detached(self, session: str) -> None:
        """A session of ours detached: the tab's world is made again on need."""
        for tab, ours in list(self.sessions.items()):
            if ours == session:
                del self.sessions[tab]
                self.tabs_of.pop(ours, None)
                self.watcher.worlds.gone(tab)

    async def _attach(self, tab: str) -> str | None:
        answer = await self.watcher.call(
            "Target.attachToTarget", {"targetId": tab, "flatten": True}, deadline_s=CHECK_TIMEOUT_S
        )
        session = answer.get("result", {}).get("sessionId")
        if not isinstance(session, str):
            return None
        self.sessions[tab] = session
        self.tabs_of[session] = tab
        # Runtime on our own session: we hear of every context our worlds
        # get in the tab's frames (a check that looks into a same-origin
        # frame makes one there), so every one is refused to agents.
        await self.watcher.call("Runtime.enable", {}, session=session, deadline_s=CHECK_TIMEOUT_S)
        return session

    async def session(self, tab: str) -> str | None:
        session = self.sessions.get(tab)
        if session is not None:
            return session
        return await once(self._attaching, tab, self._attach)

    async def world_made(self, tab: str | None, timeout_s: float) -> None:
        """Wait (bounded) while our world in ``tab`` is being made."""
        done = self._made.get(tab) if tab is not None else None
        if done is not None and tab in self.watcher.worlds.making:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout_s)

    async def _world(self, tab: str, session: str, timeout_s: float) -> int | None:
        """Our isolated world in ``tab``'s main frame (its context id): the
        page's own script cannot reach into it, so it cannot change what the
        DOM's getters tell the checks (a password field's ``type``, say)."""
        worlds = self.watcher.worlds
        context = worlds.contexts.get(tab)
        if context is not None:
            return context
        tree = await self.watcher.call(
            "Page.getFrameTree", {}, session=session, deadline_s=timeout_s
        )
        frame = tree.get("result", {}).get("frameTree", {}).get("frame", {}).get("id")
        if not isinstance(frame, str):
            return None
        # Until its number is known, commands naming a context in this tab wait.
        name = worlds.begin(tab)
        done = self._made.setdefault(tab, asyncio.Event())
        done.clear()
        try:
            made = await self.watcher.call(
                "Page.createIsolatedWorld",
                {"frameId": frame, "worldName": name, "grantUniveralAccess": False},
                session=session,
                deadline_s=timeout_s,
            )
            context = made.get("result", {}).get("executionContextId")
            if not isinstance(context, int):
                return None
            marking = worlds.made(tab, context)
        finally:
            worlds.making.discard(tab)
            done.set()
        try:
            marked = await self.watcher.call(
                "Runtime.evaluate",
                {
                    "expression": marking,
                    "returnByValue": True,
                    "contextId": context,
                    "silent": True,
                    "disableBreaks": True,
                },
                session=session,
                deadline_s=timeout_s,
            )
        except BaseException:
            worlds.forget(tab)
            raise
        if marked.get("result", {}).get("result", {}).get("value") is not True:
            worlds.forget(tab)
            return None
        return context

    async def _evaluate(
        self,
        tab: str | None,
        expression: str,
        timeout_s: float,
        again: bool = False,
        group: str | None = None,
    ) -> dict[str, Any] | None:
        """``expression``'s answer in ``tab``, in our isolated world, on the
        relay's own connection; None when it cannot be had within
        ``timeout_s``. An answer saying the world is gone (a document replaced
        by a navigation) makes the world again; with ``again``, any error
        answer is asked again (a new document gets its context a moment later)."""
        if tab is None:
            return None
        try:
            async with asyncio.timeout(timeout_s):
                session = await self.session(tab)
                if session is None:
                    return None
                remade = False
                while True:
                    context = await self._world(tab, session, timeout_s)
                    if context is None:
                        return None
                    params: dict[str, Any] = {
                        "expression": self.watcher.worlds.sealed(tab, expression),
                        "returnByValue": group is None,
                        "silent": True,
                        "contextId": context,
                        # Nothing pauses the relay's own script: no pause
                        # request, breakpoint or debugger statement (with
                        # silent, no exception either). A pause in its world
                        # held a frame there that an agent's
                        # evaluateOnCallFrame reached (worlds.shown).
                        "disableBreaks": True,
                    }
                    if group is not None:  # an object to pass on, released after
                        params["objectGroup"] = group
                    answer = await self.watcher.call(
                        "Runtime.evaluate", params, session=session, deadline_s=timeout_s
                    )
                    if "error" not in answer:
                        return answer
                    if self.watcher.worlds.contexts.get(tab) == context:
                        self.watcher.worlds.forget(tab)  # most likely gone with its document
                    if again:
                        await asyncio.sleep(0.02)
                    elif remade:
                        return answer
                    remade = True
        except (WatcherError, TimeoutError, aiohttp.ClientError, OSError):
            return None

    async def ask(self, tab: str, expression: str, timeout_s: float) -> dict[str, Any] | None:
        """``expression``'s answer in ``tab``'s main frame, in the relay's
        world (the credential fill's check: :mod:`agentenv.relay.filling`)."""
        return await self._evaluate(tab, expression, timeout_s)

    async def describe(self, tab: str | None, point: tuple[float, float]) -> dict[str, str] | None:
        """The role and name of the element at ``point`` in ``tab`` (a press
        while a recording is open), or None when the page cannot say in time."""
        answer = await self._evaluate(
            tab, describe_expression(point), DESCRIBE_TIMEOUT_S, again=True
        )
        return target(answer) if answer is not None else None

    async def checked(
        self, tab: str | None, point: tuple[float, float] | None = None, describe: bool = False
    ) -> tuple[Focus, dict[str, str] | None]:
        """Whether typing in ``tab`` goes into a password field (the focused
        field, or the element at ``point``, a drop; undecided on any doubt),
        and with ``describe`` the field's role and name."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        answer = await self._evaluate(tab, check_expression(point, describe), CHECK_TIMEOUT_S)
        if answer is None:
            return "undecided", None
        focus = verdict(answer)
        if host_pending(answer):
            left = CHECK_TIMEOUT_S - (loop.time() - began)
            focus = await self._host_checked(tab, left) if left > 0 else "undecided"
        return focus, field_named(answer) if describe else None

    async def _host_checked(self, tab: str | None, timeout_s: float) -> Focus:
        """Whether the element a check left as "host" hosts a closed shadow
        root, as Chromium says (a script cannot see one)."""
        group = "agentenv-host"
        answer = await self._evaluate(tab, HOST_EXPRESSION, timeout_s, group=group)
        found = (answer or {}).get("result", {}).get("result", {})
        session = self.sessions.get(tab) if tab is not None else None
        if not isinstance(found, dict) or "objectId" not in found or session is None:
            return "undecided"
        try:
            described = await self.watcher.call(
                "DOM.describeNode",
                {"objectId": found["objectId"], "depth": 0, "pierce": True},
                session=session,
                deadline_s=timeout_s,
            )
        except (WatcherError, TimeoutError, aiohttp.ClientError, OSError):
            return "undecided"
        finally:
            self._release(session, group)
        return host_verdict(described)

    def _release(self, session: str, group: str) -> None:
        async def release() -> None:
            # An error: the document went, and its objects with it.
            with contextlib.suppress(WatcherError, TimeoutError, aiohttp.ClientError, OSError):
                await self.watcher.call(
                    "Runtime.releaseObjectGroup", {"objectGroup": group}, session
                )

        self.watcher.spawn(release())
