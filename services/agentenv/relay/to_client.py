"""The Chromium-to-client half of a bridged connection (:mod:`agentenv.relay.proxy`):
Chromium's messages as the connection's rules say
(:meth:`agentenv.relay.connection.Connection.chromium`), answers ending their
entries, most of them right after the client has them, the relay's own
commands the rules wrote sent (before a message the client could act on, or
in place of one it never sees), and
fair turns for every other connection. A class of its own: the bridge
(:class:`~agentenv.relay.proxy._Bridge`) hands it what it needs and runs
:meth:`ToClient.run` beside its client-to-Chromium loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import WSMsgType, web

from agentenv.log.log_errors import LogError
from agentenv.relay import core, traces
from agentenv.relay.client_state import InLog
from agentenv.relay.connection import Connection
from agentenv.relay.core import Down, Pending
from agentenv.relay.effects import Ended
from agentenv.relay.logbook import Logbook
from agentenv.relay.memory import AT_LIMIT, Meter
from agentenv.relay.watcher import Watcher

__all__ = ["FAIR_TURN", "ToClient"]

log = logging.getLogger("agentenv.relay")

#: Messages one connection handles before it lets the others' run: a read
#: of buffered messages and a send that needs no drain never yield, and one
#: agent's pipelined flood held every other agent's command behind it.
FAIR_TURN = 8


class ToClient:
    """Chromium to client, for one bridged connection: the bridge
    (:mod:`agentenv.relay.proxy`) makes it with what it reads and writes, and
    reads back ``answered``, ``settled`` and ``client_gone``."""

    def __init__(
        self,
        client: web.WebSocketResponse,
        upstream: aiohttp.ClientWebSocketResponse,
        connection: Connection,
        logbook: Logbook,
        watcher: Watcher,
        answers: Meter,
        over_memory: Callable[[str], None],
    ) -> None:
        self.client = client
        self.upstream = upstream
        self.connection = connection
        self.state = connection.state
        self.logbook = logbook
        self.watcher = watcher
        #: What Chromium answers this client, not yet whole.
        self.answers = answers
        #: The bridge's: the connection closed for memory, with this reason.
        self._over_memory = over_memory
        self.answered = asyncio.Event()  # an answer came back
        self.settled = asyncio.Event()  # nothing is in flight
        self.client_gone = False  # a send to the client failed: it left

    async def run(self) -> None:
        state, connection = self.state, self.connection
        turn = 0
        async for msg in self.upstream:
            turn += 1
            if turn == FAIR_TURN:
                turn = 0
                await asyncio.sleep(0)
            if msg.type is WSMsgType.TEXT:
                data = msg.data
                # The client has its answer first; its entry is written right
                # after, before this loop reads Chromium's next message (the
                # write is off the agent's round trip, not off the record).
                if connection.answer_first(data):
                    try:
                        await self._hand_over(data)
                    finally:
                        self._noted(connection.chromium(data))
                else:
                    down = connection.chromium(data)
                    for command in down.upstream:  # before the client can act on it
                        await self.upstream.send_str(command)
                    try:
                        if down.kind is Down.PASS:
                            await self._hand_over(down.data if down.data is not None else data)
                        elif down.ending is not None:
                            await self._trace_ended(down.ending)
                    finally:
                        self._noted(down)
                    if down.kind is Down.DETACH:
                        log.info(
                            "conn %d: detached a session not web content or not in its scope",
                            state.number,
                        )
                    elif down.kind is Down.RESUME:
                        log.info("conn %d: resumed a pause in the relay's own world", state.number)
            elif msg.type is WSMsgType.BINARY:
                await self._hand_over(msg.data)
            elif msg.type is WSMsgType.ERROR:
                if isinstance(msg.data, MemoryError):  # aiohttp's reader caught it
                    self._over_memory(AT_LIMIT)
                break
            self.answers.handed_on(msg.data if isinstance(msg.data, (str, bytes)) else b"")
            if not state.pending:
                self.settled.set()

    async def _trace_ended(self, ending: traces.Ending) -> None:
        """A trace of this client's completed: kept to its own tab off the
        event loop (a big one takes a second), then handed over."""
        try:
            finished = await asyncio.to_thread(traces.finish, ending)
            messages = finished.deliver(self.state.traces, self.state.number)
        except Exception:  # a trace the rules cannot read: none of it is shown
            log.exception("conn %d: could not keep a trace to its tab", self.state.number)
            done: dict[str, Any] = {
                "method": "Tracing.tracingComplete",
                "params": {"dataLossOccurred": True},
            }
            if ending.trace.session is not None:
                done["sessionId"] = ending.trace.session
            messages = [orjson.dumps(done).decode()]
        for message in messages:
            await self._hand_over(message)

    async def _trace_bound(self, holder: traces.Holder) -> None:
        """End this client's trace at its bound (AGENTENV_TRACE_MAX_S) if it
        still runs: the client gets its trace as if it had ended it."""
        await asyncio.sleep(max(0.0, holder.until - time.time()))
        command = self.state.traces.overdue(holder, self.state.own_id())
        if command is not None and not self.upstream.closed:
            log.info("conn %d: ended a trace at its bound", self.state.number)
            with contextlib.suppress(ConnectionError, RuntimeError, aiohttp.ClientError):
                await self.upstream.send_str(command)

    async def _hand_over(self, data: str | bytes) -> None:
        """Send a message from Chromium to the client. Once the client is gone
        (its socket failed under a send) nothing more is sent, and this loop
        goes on reading Chromium's answers so their entries end as answered."""
        if self.client_gone or self.client.closed:
            return
        try:
            if isinstance(data, str):  # no password the vault filled
                await self.client.send_str(self.connection.shown(data))
            else:
                await self.client.send_bytes(data)
        except (ConnectionError, aiohttp.ClientError) as exc:
            self.client_gone = True
            log.info("conn %d: the client went away under a send: %s", self.state.number, exc)

    def _noted(self, down: core.Downstream) -> None:
        """What an upstream message means for the log: an answer's entry, the
        commands a detach orphaned, a tab loading."""
        if down.traced is not None:
            self.watcher.spawn(self._trace_bound(down.traced))
        if down.page_of is not None:  # its entry ends once the tab's page is known
            self.watcher.spawn(self._noted_for_tab(down, down.page_of))
            return
        self._note(down)

    def _note(self, down: core.Downstream) -> None:
        scope = self.state.scope
        if down.made_context is not None and scope is not None:
            self.watcher.spawn(self.watcher.downloads.for_context(down.made_context, scope.name))
        try:
            if down.pending is not None:
                self._answered(down)
            for orphan in down.orphans:
                self._orphaned(orphan)
            if down.loading is not None:
                tab, started = down.loading
                self.logbook.causes.front.loading_changed(tab, started, time.monotonic())
        except LogError as exc:  # a full disk must not cut the agent off
            log.error("conn %d: %s", self.state.number, exc)

    async def _noted_for_tab(self, down: core.Downstream, tab: str) -> None:
        page = await self.watcher.page_of_tab(tab)
        self._note(self.connection.page_found(down, page))

    def _answered(self, down: core.Downstream) -> None:
        pending = down.pending
        assert pending is not None
        self.answered.set()
        if pending.in_log is InLog.UNLOGGED:
            self.logbook.end_unlogged(pending.entry, down.ok, down.opened)
        elif pending.in_log is InLog.LOGGED:
            self.logbook.end(Ended(pending.entry, down.ok, down.error, opened=down.opened))

    def _failed(self, pending: Pending, why: str) -> None:
        """A command Chromium will never answer: its entry ends as failed."""
        if pending.in_log is InLog.UNLOGGED:
            self.logbook.end_unlogged(pending.entry, False)
        elif pending.in_log is InLog.LOGGED:
            self.logbook.end(Ended(pending.entry, False, why))

    def _orphaned(self, pending: Pending) -> None:
        self.answered.set()  # it is in flight no more
        self._failed(pending, "the target went away before Chromium answered")

    def end_pending(self, why: str) -> None:
        for pending in self.state.pending.values():
            self._failed(pending, why)
        self.state.pending.clear()
        self.answered.set()
        self.settled.set()
