"""One client WebSocket bridged to its own upstream WebSocket to Chromium:
the socket loops around :mod:`agentenv.relay.core`.

Client to Chromium, in arrival order (a command is written upstream only
after the one before it, so a click never overtakes typing that waits on its
password check): the core says what to do with each message, and this layer
does it, writing the entry through the :class:`~agentenv.relay.logbook.Logbook`.
A binary frame closes the connection (1003) with a reason: CDP is JSON text.

Chromium to client, as answers are ready: answers end their entries, most
of them right after the client has them (:func:`~agentenv.relay.core.answer_first`);
the relay's own commands' answers are dropped; attaches to targets that are
not web content are detached before the client sees them. If a send to the
client fails (it left), nothing more is sent and Chromium's answers are
still read, so their entries end as answered.

An agent's connection reads through two meters
(:class:`~agentenv.relay.memory.Meter`), one each way: its WebSocket readers
are wrapped (:class:`~agentenv.relay.metered.MeteredReader`) so the bytes of a message not yet
whole count against its user's share of the relay's memory; past it the
connection is closed (1009, rule memory).

When the client leaves, commands still unanswered are waited for (up to
:data:`LEFT_WAIT_S`) so their entries and effects are settled as if answered, and
a download folder it changed is set back. When Chromium goes away, the client
gets a close frame (1011).

A control connection's commands outside any open action it is in the scope
of are the computer's own reads: they are forwarded but not logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import WebSocketError, WSCloseCode, WSMsgType, web

from agentenv.log.cdp_params import redact_params
from agentenv.protocol.control import (
    AskHuman,
    ControlResult,
    FillCredential,
    Filled,
    OpenScope,
    ScopeMade,
)
from agentenv.protocol.credentials import WITHHELD
from agentenv.protocol.log import ACTING
from agentenv.relay import core, elements, password
from agentenv.relay.asking import ask_human
from agentenv.relay.auth_log import AuthLog
from agentenv.relay.causes import TAB_METHODS
from agentenv.relay.client_state import InLog
from agentenv.relay.commands import acts
from agentenv.relay.connection import Connection, Ready
from agentenv.relay.control_commands import Control
from agentenv.relay.core import Kind, Pending, Step
from agentenv.relay.decision import AgentEnvCommand, Answered, Own, Refuse
from agentenv.relay.effects import Ended
from agentenv.relay.filling import fill
from agentenv.relay.logbook import Logbook
from agentenv.relay.memory import AT_LIMIT, COUNTED, SCANNED, InFlight, Meter, held_bytes
from agentenv.relay.metered import MeteredReader
from agentenv.relay.needs import settled
from agentenv.relay.relay_errors import ControlRefused, RelayError
from agentenv.relay.to_client import FAIR_TURN, ToClient
from agentenv.relay.tokens import Granted
from agentenv.relay.vault import HOME, FillRefused, Vault
from agentenv.relay.watcher import Watcher

__all__ = ["BINARY_REFUSED", "BROWSER_GONE", "LEFT_WAIT_S", "Shared", "bridge"]

log = logging.getLogger("agentenv.relay")

#: The close frame a client gets when Chromium exits under it.
BROWSER_GONE = (1011, b"Chromium exited; reconnect when /readyz says ready")
#: The close frame for a binary message.
BINARY_REFUSED = (1003, b"CDP messages are JSON text frames; binary frames are not accepted")
#: How long a left client's unanswered commands are waited for.
LEFT_WAIT_S = 10.0


#: A refused big message's id, session and method, read from its ends only.
#: Listings of the browser: every link's answer leaves out warm contexts.
_LISTINGS = frozenset({"Target.getTargets", "Target.getBrowserContexts"})
#: What the relay reads the answer to on every link, the computer's own too.
_READ_ALWAYS = _LISTINGS | {core.BROWSER_TARGET}
_ID = re.compile(r'"id"\s*:\s*(\d{1,16})')
_SESSION = re.compile(r'"sessionId"\s*:\s*"([0-9A-Za-z_.-]{1,128})"')
_METHOD = re.compile(r'"method"\s*:\s*"([A-Za-z.]{1,100})"')


@dataclass(frozen=True)
class Shared:
    """What every connection's bridge shares: the log, the watcher, the tokens
    granted, and the memory bounds (``inflight``: bytes sent to Chromium and not
    yet answered; ``reading``: bytes read and not yet handed on; None: unbounded)."""

    logbook: Logbook
    watcher: Watcher
    granted: Granted
    inflight: InFlight | None = None
    reading: InFlight | None = None
    #: Failed authentication on the record (the app reports its own).
    auth: AuthLog | None = None
    #: The credential vault: a password it filled is withheld from agents (vault.py).
    vault: Vault | None = None


class _Bridge:
    def __init__(
        self,
        client: web.WebSocketResponse,
        upstream: aiohttp.ClientWebSocketResponse,
        connection: Connection,
        shared: Shared,
    ) -> None:
        logbook, watcher, granted = shared.logbook, shared.watcher, shared.granted
        state = connection.state
        self.client = client
        self.inflight = shared.inflight or InFlight(0, 0)
        who = state.identity.user
        #: What the agent sends, and what Chromium answers it, not yet whole.
        self.sent = Meter(shared.reading or InFlight(0, 0), who)
        self.answers = Meter(shared.reading or InFlight(0, 0), who)
        #: Why the connection was closed for memory (its pending entries say so).
        self.over: str | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.upstream = upstream
        self.state = state
        self.logbook = logbook
        self.watcher = watcher
        self.granted = granted
        self.refused_binary = False
        #: The rules for this connection's messages, both ways.
        self.connection = connection
        #: Chromium to the client: its loop, and what it says back.
        self.down = ToClient(
            client, upstream, self.connection, logbook, watcher, self.answers, self._over_memory
        )
        #: The control token's AgentEnv.* commands.
        self.control = Control(state, logbook, watcher, granted, shared.auth)

    # -- client to Chromium --------------------------------------------------

    async def to_upstream(self) -> None:
        who = self.state.identity.user
        bounded = not self.state.identity.control
        turn = 0
        async for msg in self.client:
            self.sent.handed_on(msg.data if isinstance(msg.data, (str, bytes)) else b"")
            turn += 1
            if turn == FAIR_TURN:  # others' connections get the loop too
                turn = 0
                await asyncio.sleep(0)
            if msg.type is WSMsgType.TEXT:
                data: str = msg.data
                if len(data) < SCANNED or not bounded:
                    await self._command(data)
                    continue
                held = held_bytes(data, self.inflight.bound)  # as text and parsed
                if held < COUNTED:
                    await self._command(data)
                    continue
                why = self.inflight.take(who, held)
                if why is not None:
                    await self._refuse_memory(data, why, held)
                    continue
                try:
                    await self._command(data)
                finally:
                    self.inflight.give(who, held)
                # A big one's reading took the loop a while: the others'
                # commands run before this sender's next.
                turn = 0
                await asyncio.sleep(0)
            elif msg.type is WSMsgType.BINARY:
                self.refused_binary = True
                code, reason = BINARY_REFUSED
                await self.client.close(code=code, message=reason)
                break
            elif msg.type is WSMsgType.ERROR:
                if isinstance(msg.data, MemoryError):  # aiohttp's reader caught it
                    self._over_memory(AT_LIMIT)
                else:
                    self._too_big(msg.data)
                break

    async def _refuse_memory(self, data: str, why: str, held: int) -> None:
        """A big message past the bytes in flight: answered at once, its text
        dropped unparsed, on the record by its size (rule ``memory``)."""
        state = self.state
        if held > 2 * len(data):  # its values, not its length, are what it holds
            why = (
                f"{why} (this message's {len(data)} bytes hold about {held} once read: "
                "a value each costs the relay an object; send fewer values at once)"
            )
        head = data[:300]
        call = _ID.search(head)
        session = _SESSION.search(head) or _SESSION.search(data[-300:])
        method = _METHOD.search(head)
        self.logbook.refused(
            state.identity.user,
            state.number,
            method.group(1)[:100] if method else "(unparsed)",
            "memory",
            why,
            bytes=len(data),
        )
        if call is not None:
            answer: dict[str, Any] = {
                "id": int(call.group(1)),
                "error": {"code": -32000, "message": why},
            }
            if session is not None:
                answer["sessionId"] = session.group(1)
            await self._answer(answer)

    def meter(self, client_reads: Any, upstream_reads: Any) -> None:
        """Count what the two WebSocket readers are fed (an agent's
        connection): ``*_reads`` are aiohttp's protocols, each holding its
        reader as ``_payload_parser``."""
        for protocol, meter, what in (
            (client_reads, self.sent, "its messages"),
            (upstream_reads, self.answers, "Chromium's answers to it"),
        ):
            parser = getattr(protocol, "_payload_parser", None)
            if parser is None:  # aiohttp changed: the bound is off, and says so
                log.warning("conn %d: cannot meter %s", self.state.number, what)
                continue
            protocol._payload_parser = MeteredReader(parser, meter, self._over_memory)

    def _over_memory(self, why: str) -> None:
        """A meter went past its bound: the connection is closed (1009),
        on the record with rule memory, its unanswered commands ended."""
        if self.over is not None:
            return
        self.over = why if why == AT_LIMIT else f"{why} (bytes read count until handed on)"
        self._disconnected(self.over[:500], bytes=max(self.sent.seen, self.answers.seen))
        task = asyncio.get_running_loop().create_task(self._close_for_memory())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_for_memory(self) -> None:
        reason = (
            b"the relay is at its memory limit: see the action log (rule memory)"
            if self.over == AT_LIMIT
            else b"past this user's share of the relay's memory: see the action log (rule memory)"
        )
        for ws in (self.client, self.upstream):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    ws.close(code=WSCloseCode.MESSAGE_TOO_BIG, message=reason), 1.0
                )

    def _too_big(self, error: object) -> None:
        """A message over the agent's bound: aiohttp closed the connection
        (1009) before holding it; on the record, with rule ``memory``."""
        if not isinstance(error, WebSocketError) or error.code != WSCloseCode.MESSAGE_TOO_BIG:
            return
        self._disconnected(
            f"disconnected by agentenv guard memory: {error}"[:500]
            + " (AGENTENV_AGENT_MESSAGE_BYTES bounds an agent's message: send less at once)"
        )

    def _disconnected(self, why: str, **more: Any) -> None:
        """This connection closed for memory, on the record (rule memory)."""
        state = self.state
        self.logbook.refused(
            state.identity.user,
            state.number,
            None,
            "memory",
            why,
            action="disconnected",
            **more,
        )

    async def _answer(self, message: dict[str, Any]) -> None:
        if not self.client.closed:
            await self.client.send_str(orjson.dumps(message).decode())

    def _entry(self, step: Step, typed: dict[str, Any] | None = None) -> int:
        return self.logbook.begin(core.begin_of(self.state, step, typed))

    async def _command(self, data: str) -> None:
        read = self.connection.client(data)
        if not isinstance(read, Ready):  # the rules must learn something first
            read = await settled(self.watcher, read, self.connection.learn)
        step, decision = read
        if isinstance(decision, AgentEnvCommand):
            await self._control_command(step)
            return
        if isinstance(decision, Refuse):
            if decision.logged:
                self.logbook.end_refused(self._entry(step), decision.why, decision.guard)
            await self._answer(decision.answer)
            return
        if isinstance(decision, Own):
            await self._own(step)
            return
        if isinstance(decision, Answered):
            entry = self._entry(step)
            try:
                await self._kept(step)
            except (ConnectionError, RuntimeError, aiohttp.ClientError) as exc:
                self.logbook.end(Ended(entry, False, f"could not send to Chromium: {exc}"))
                raise
            self.logbook.end(Ended(entry, True))
            return
        typed = password.withhold_typing(step.method, step.params or {}) if step.typing else None
        entry = self._entry(step, typed)
        if step.typing:
            await self._check_typing(step, entry)
        elif self.logbook.recordings and step.kind is Kind.FORWARD:
            point = elements.is_press(step.method, step.params)
            if point is not None:
                await self._describe(step, entry, point)
        params = step.params
        if len(step.data) >= COUNTED:
            # A big message is held once: its line's params redacted now, and
            # its parsed form not kept for the answer (none of these read it).
            self.logbook.settle_params(entry)
            if step.method not in core.READ_FIRST:
                params = None
        acting = acts(step.method, step.params) == ACTING
        await self._send(step, Pending(entry, step.method, params, step.tab, acting))
        if decision.guarded is not None:
            self.logbook.guarded(entry, decision.guarded)  # sent as the guard rewrote it

    async def _kept(self, step: Step) -> None:
        """An ANSWER step: the relay's own commands that carry it out in the
        sender's scope, then the client's answer."""
        for turn, command in enumerate(step.upstream, start=1):
            await self.upstream.send_str(command)
            if turn % FAIR_TURN == 0:
                await asyncio.sleep(0)  # one connection's many sessions: others' turns too
        answer: dict[str, Any] = {"id": step.call, "result": step.result or {}}
        if step.session is not None:
            answer["sessionId"] = step.session
        await self._answer(answer)

    async def _own(self, step: Step) -> None:
        """The computer's own command, outside any action: not on the record."""
        if step.kind is Kind.ANSWER:
            await self._kept(step)
            return
        pending: Pending | None = None
        if step.method in TAB_METHODS:
            key = self.logbook.unlogged_command(step.method, step.params, step.tab)
            pending = Pending(key, step.method, step.params, in_log=InLog.UNLOGGED)
        elif step.method in core.READ_FIRST and (
            self.state.scope is not None or step.method in _READ_ALWAYS
        ):
            # A scoped link's listing: its answer is kept to the scope (no
            # entry); every link's, without the warm contexts (relay/warm.py);
            # a session on the browser target, known as one when it lands.
            pending = Pending(0, step.method, step.params, in_log=InLog.KEPT)
        await self._send(step, pending)

    async def _check_typing(self, step: Step, entry: int) -> None:
        try:
            await self._earlier_answered(step.tab)
            focus, field = await self.watcher.probes.checked(
                step.tab, step.point, describe=bool(self.logbook.recordings)
            )
        except BaseException:
            self.logbook.end(Ended(entry, False, "the connection ended during the password check"))
            raise
        if field is not None:
            self.logbook.target(entry, field)
        if focus == "no":
            self.logbook.writer.amend(entry, {"params": redact_params(step.method, step.params)})
        state = self.state
        self.logbook.typing_checked(state.number, state.tag, focus == "no", state.identity)

    async def _describe(self, step: Step, entry: int, point: tuple[float, float]) -> None:
        """Name what a press lands on (a recording is open), before it is sent."""
        try:
            found = await self.watcher.probes.describe(step.tab, point)
        except BaseException:
            self.logbook.end(Ended(entry, False, "the connection ended before the press was sent"))
            raise
        if found is not None:
            self.logbook.target(entry, found)

    async def _send(self, step: Step, pending: Pending | None) -> None:
        key = (step.session, step.call if step.call is not None else -1)
        if pending is not None:
            self.state.pending[key] = pending
            self.down.settled.clear()
        try:
            await self.upstream.send_str(step.data)
        except (ConnectionError, RuntimeError, aiohttp.ClientError) as exc:
            self.state.pending.pop(key, None)
            if pending is not None and pending.in_log is InLog.LOGGED:
                self.logbook.end(Ended(pending.entry, False, f"could not send to Chromium: {exc}"))
            raise

    async def _earlier_answered(self, tab: str | None) -> None:
        """Wait (bounded) until this connection's earlier acting commands on the
        tab are answered, so the check sees where they moved focus (a click on
        a password field sent just before the typing)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + password.CHECK_TIMEOUT_S
        while True:
            # Cleared before the look: an answer after it sets it again.
            self.down.answered.clear()
            if not any(p.tab == tab and p.acting for p in self.state.pending.values()):
                return
            left = deadline - loop.time()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.down.answered.wait(), left)

    # -- AgentEnv.* ------------------------------------------------------------

    async def _control_command(self, step: Step) -> None:
        if step.control is None:
            if not self.state.identity.control:  # an agent's bad fill is on the record
                self.logbook.end(Ended(self._entry(step), False, step.error))
            await self._answer(step.error_answer())
            return
        if isinstance(step.control, AskHuman):  # an agent's; waits beside its others
            self.watcher.spawn(self._ask_human(step))
            return
        if not self.state.identity.control:
            await self._agent_fill(step)  # core._agent_control
            return
        if isinstance(step.control, OpenScope):
            # It may wait in the scopes' queue for a close, which comes on
            # this same link: the link reads on meanwhile.
            self.watcher.spawn(self._open_scope(step))
            return
        await self._control_run(step)

    async def _ask_human(self, step: Step) -> None:
        """``AgentEnv.requestHuman``: the app asks a person (relay/asking.py)."""
        answer, unasked = await ask_human(self.watcher, self.state, step)
        if unasked is not None:
            self.logbook.end(Ended(self._entry(step), False, unasked))
        await self._answer(answer)

    async def _agent_fill(self, step: Step) -> None:
        """``AgentEnv.fillCredential`` on an agent's tab session: an entry like
        any command's (its params the name and field, the value withheld),
        the typing the relay's own (relay/filling.py), off every record."""
        state = self.state
        control = step.control
        assert isinstance(control, FillCredential) and step.tab is not None
        typed = {"name": control.name, "field": control.field, "value": dict(WITHHELD)}
        entry = self._entry(step, typed)
        scope = state.scope.name if state.scope is not None else HOME
        try:
            await fill(self.watcher, scope, step.tab, control.name, control.field)
        except FillRefused as exc:
            self.logbook.end(Ended(entry, False, exc.message))
            await self._answer(step.failed(-32000, f"{step.method}: {exc.message}").error_answer())
            return
        self.logbook.end(Ended(entry, True))
        done = Filled(name=control.name, field=control.field, tab=step.tab)
        answer: dict[str, Any] = {"id": step.call, "result": done.model_dump(mode="json")}
        if step.session is not None:
            answer["sessionId"] = step.session
        await self._answer(answer)

    async def _open_scope(self, step: Step) -> None:
        result = await self._control_run(step)
        if self.client.closed and isinstance(result, ScopeMade):
            # Nobody was told its token: a scope opened for no one closes again.
            with contextlib.suppress(RelayError):
                await self.watcher.keeper.close_scope(result.scope)

    async def _control_run(self, step: Step) -> ControlResult | None:
        assert step.control is not None
        try:
            result = await self.control.run(step.control)
        except ControlRefused as exc:
            await self._answer(step.failed(-32602, f"{step.method}: {exc}").error_answer())
            return None
        await self._answer({"id": step.call, "result": result.model_dump(mode="json")})
        return result


async def bridge(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    connection: Connection,
    shared: Shared,
    reads: Any = None,
) -> None:
    """Move messages until either side ends; settle what is in flight; close.
    ``connection`` holds the client's rules (the door made it, to judge the
    page endpoint first). ``reading`` bounds what an agent's connection has
    read and not handed on (``reads``: the client side's aiohttp protocol)."""
    state = connection.state
    b = _Bridge(client, upstream, connection, shared)
    try:
        await _bridged(b, shared.reading, reads)
    finally:  # after the closes, which read on (or a cancel): nothing it held is kept
        b.sent.stop()
        b.answers.stop()
        state.traces.let_go(state.number, every=True)  # Chromium ended its trace


async def _bridged(b: _Bridge, reading: InFlight | None, reads: Any) -> None:
    client, upstream, state = b.client, b.upstream, b.state
    logbook, watcher, granted = b.logbook, b.watcher, b.granted
    if reading is not None and not state.identity.control:
        b.meter(reads, getattr(getattr(upstream, "_conn", None), "protocol", None))
    to_upstream = asyncio.create_task(b.to_upstream(), name=f"conn{state.number}-up")
    to_client = asyncio.create_task(b.down.run(), name=f"conn{state.number}-down")
    try:
        done, _ = await asyncio.wait({to_upstream, to_client}, return_when=asyncio.FIRST_COMPLETED)
        if to_upstream in done and not to_client.done() and state.pending and b.over is None:
            # The client left: let Chromium answer what it was sent.
            b.down.settled.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(b.down.settled.wait(), LEFT_WAIT_S)
    finally:
        for task in (to_upstream, to_client):
            task.cancel()
        for task in (to_upstream, to_client):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if any(
        t.done() and not t.cancelled() and isinstance(t.exception(), MemoryError)
        for t in (to_upstream, to_client)
    ):
        # The relay's own limit (AGENTENV_RELAY_MEMORY_MB) was reached while
        # this connection was being served: it is the one closed.
        b.over = AT_LIMIT
        with contextlib.suppress(Exception):
            b._disconnected(b.over)
    upstream_ended = (
        to_client in done and not client.closed and not b.down.client_gone and b.over is None
    )
    try:
        if state.pending:
            b.down.end_pending(
                b.over
                or (
                    "Chromium exited before answering"
                    if upstream_ended
                    else f"no answer within {LEFT_WAIT_S:.0f} s after the client left"
                )
            )
    finally:  # whatever the log did, the connection's grants and actions end
        logbook.drop_owner(state.number)
        granted.drop_owner(state.number)
        # A debugger leaving may end its tabs' pauses: their frames go.
        for tab in {state.own_tab(s) for s in state.sessions} | {state.own_tab(None)}:
            state.worlds.resumed(tab)

    if state.downloads_changed and not upstream_ended:
        watcher.downloads.reset(state.scope)
    if upstream_ended:
        code, message = BROWSER_GONE
        log.info("conn %d: Chromium closed its side; closing the client", state.number)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(code=code, message=message), 5.0)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(upstream.close(), 5.0)
    if not client.closed:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 5.0)
