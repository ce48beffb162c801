"""One client WebSocket bridged to its own upstream WebSocket to Chromium,
with every command on the record.

Client to Chromium, in arrival order (a command is written upstream only
after the one before it, so a click never overtakes typing that waits on
its password check): each text message is parsed; ``AgentEnv.*``
pseudo-commands are answered here; the guard may answer a command with a
CDP error instead of sending it; typing waits on the focus check; every
command gets an entry (:class:`~agentenv.relay.logbook.Logbook`) and is
sent as the bytes the client sent.

Chromium to client, as answers are ready: answers end their entries;
``Target.attachedToTarget``/``detachedFromTarget`` keep the map from
flattened sessions to tabs.

When the client leaves, commands still unanswered are waited for (up to
:data:`SETTLE_S`) so their entries and effects are settled as if answered.
When Chromium goes away, the client gets a close frame (1011).

A control connection's commands outside any open action it is in the scope
of are the computer's own reads: they are forwarded but not logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import WSMsgType, web

from agentenv.access import Identity
from agentenv.log.errors import LogError
from agentenv.log.marks import method_acts
from agentenv.log.redact import redact_params
from agentenv.relay import guard, password
from agentenv.relay.logbook import Logbook
from agentenv.relay.tabs import TAB_METHODS
from agentenv.relay.watcher import Watcher

__all__ = ["BROWSER_GONE", "SETTLE_S", "Connection", "bridge"]

log = logging.getLogger("agentenv.relay")

#: The close frame a client gets when Chromium exits under it.
BROWSER_GONE = (1011, b"Chromium exited; reconnect when /readyz says ready")
#: How long a left client's unanswered commands are waited for.
SETTLE_S = 10.0

_AGENTENV_METHODS = (
    "AgentEnv.beginAction",
    "AgentEnv.endAction",
    "AgentEnv.whoami",
    "AgentEnv.reset",
    "AgentEnv.tabs",
)


@dataclass
class _Pending:
    entry: int
    method: str
    params: Any
    tab: str | None = None
    acting: bool = False


@dataclass
class Connection:
    """A client's relay connection: number (from 1 per relay boot), who it
    is, an optional tag (``AgentEnv-Tag``), and the tab of a page endpoint."""

    number: int
    identity: Identity
    path: str
    tag: str | None = None
    page: str | None = None
    sessions: dict[str, str] = field(default_factory=dict)  # sessionId -> tab
    pending: dict[tuple[str | None, int], _Pending] = field(default_factory=dict)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    answered: asyncio.Event = field(default_factory=asyncio.Event)  # an answer came back

    def tab_of(self, session: object, method: str, params: Any) -> str | None:
        if isinstance(params, dict) and method.startswith("Target."):
            target = params.get("targetId")
            if isinstance(target, str):
                return target
        if isinstance(session, str):
            return self.sessions.get(session)
        return self.page


class _Bridge:
    def __init__(
        self,
        client: web.WebSocketResponse,
        upstream: aiohttp.ClientWebSocketResponse,
        conn: Connection,
        logbook: Logbook,
        watcher: Watcher,
        downloads: str,
    ) -> None:
        self.client = client
        self.upstream = upstream
        self.conn = conn
        self.logbook = logbook
        self.watcher = watcher
        self.downloads = downloads

    # -- client to Chromium --------------------------------------------------

    async def to_upstream(self) -> None:
        async for msg in self.client:
            if msg.type is WSMsgType.TEXT:
                await self._command(msg.data)
            elif msg.type is WSMsgType.BINARY:
                await self.upstream.send_bytes(msg.data)
            elif msg.type is WSMsgType.ERROR:
                break

    async def _answer(self, message: dict[str, Any]) -> None:
        if not self.client.closed:
            await self.client.send_str(orjson.dumps(message).decode())

    async def _error(self, call: object, session: object, code: int, text: str) -> None:
        message: dict[str, Any] = {"error": {"code": code, "message": text}}
        if isinstance(call, int):
            message = {"id": call, **message}
        if isinstance(session, str):
            message["sessionId"] = session
        await self._answer(message)

    def _invalid(self, error: str) -> None:
        entry = self.logbook.begin_command(
            self.conn.identity, self.conn.number, self.conn.tag, "(invalid)", None, None
        )
        self.logbook.end_command(entry, False, error)

    async def _command(self, data: str) -> None:
        conn = self.conn
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            text = "malformed JSON: send one CDP command object per message"
            self._invalid(text)
            await self._error(None, None, -32700, text)
            return
        call = message.get("id") if isinstance(message, dict) else None
        method = message.get("method") if isinstance(message, dict) else None
        if not isinstance(call, int) or isinstance(call, bool) or not isinstance(method, str):
            session = message.get("sessionId") if isinstance(message, dict) else None
            text = "a CDP command needs an integer id and a method name"
            self._invalid(text)
            await self._error(call, session, -32600, text)
            return
        session = message.get("sessionId")
        params = message.get("params")
        if method.startswith("AgentEnv."):
            await self._agentenv(call, session, method, params)
            return
        # An unknown sessionId goes on: Chromium answers it with an error, and
        # the entry is written with no tab.
        tab = conn.tab_of(session, method, params)
        verdict = guard.check(method, params if isinstance(params, dict) else None, self.downloads)
        if conn.identity.control and self.logbook.within(conn.number, conn.tag) is None:
            # The computer's own reads (an app op that only reads, the
            # recorder's captures) are not on the record; its acting ops
            # report an action first, and their commands are logged within it.
            if verdict is not None:
                await self._error(call, session, guard.GUARD_ERROR_CODE, verdict.message)
                return
            if method in TAB_METHODS:
                key = self.logbook.unlogged_command(method, params, tab)
                conn.pending[(session if isinstance(session, str) else None, call)] = _Pending(
                    key, method, params
                )
            await self.upstream.send_str(data)
            return
        typing = verdict is None and password.is_typing(
            method, params if isinstance(params, dict) else None
        )
        typed = password.withhold_typing(method, params) if typing else None
        entry = self.logbook.begin_command(
            conn.identity, conn.number, conn.tag, method, params, tab, typed
        )
        if verdict is not None and verdict.action == "withheld":
            self.logbook.end_command(entry, True, guard=verdict.as_entry())
            answer: dict[str, Any] = {"id": call, "result": {}}
            if isinstance(session, str):
                answer["sessionId"] = session
            await self._answer(answer)
            return
        if verdict is not None:
            self.logbook.end_command(entry, False, verdict.message, guard=verdict.as_entry())
            await self._error(call, session, guard.GUARD_ERROR_CODE, verdict.message)
            return
        if typing:
            try:
                await self._earlier_answered(tab)
                focus = await self.watcher.focus(tab)
            except BaseException:
                self.logbook.end_command(
                    entry, False, "the connection ended during the password check"
                )
                raise
            if focus == "no":
                fields = self.logbook.writer.fields(entry)
                if fields is not None:
                    fields["params"] = redact_params(
                        method, params if isinstance(params, dict) else None
                    )
            self.logbook.typing_checked(conn.number, conn.tag, focus == "no")
        conn.pending[(session if isinstance(session, str) else None, call)] = _Pending(
            entry, method, params, tab, method_acts(method)
        )
        conn.settled.clear()
        try:
            await self.upstream.send_str(data)
        except (ConnectionError, RuntimeError, aiohttp.ClientError) as exc:
            conn.pending.pop((session if isinstance(session, str) else None, call), None)
            self.logbook.end_command(entry, False, f"could not send to Chromium: {exc}")
            raise

    async def _earlier_answered(self, tab: str | None) -> None:
        """Wait (bounded) until this connection's earlier acting commands on the
        tab are answered, so the focus check sees where they moved focus (a
        click on a password field sent just before the typing)."""
        deadline = asyncio.get_running_loop().time() + password.CHECK_TIMEOUT_S
        while (
            any(p.tab == tab and p.acting for p in self.conn.pending.values())
            and asyncio.get_running_loop().time() < deadline
        ):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.conn.answered.wait(), 0.05)
            self.conn.answered.clear()

    async def _agentenv(self, call: int, session: object, method: str, params: Any) -> None:
        conn = self.conn
        if not conn.identity.control:
            await self._error(
                call,
                session,
                -32601,
                "AgentEnv.* commands need the control token (AGENTENV_CONTROL_TOKEN)",
            )
            return
        if not isinstance(params, dict):
            params = {}
        try:
            if method == "AgentEnv.beginAction":
                result: dict[str, Any] = {"entry": self.logbook.begin_action(conn.number, params)}
            elif method == "AgentEnv.endAction":
                self.logbook.end_action(conn.number, params)
                result = {}
            elif method == "AgentEnv.whoami":
                result = {"conn": conn.number, "user": conn.identity.user}
            elif method == "AgentEnv.tabs":
                causes = self.logbook.causes
                result = {"active": causes.active, "order": list(causes.front)}
            elif method == "AgentEnv.reset":
                reason = params.get("reason")
                if not isinstance(reason, str) or not reason:
                    raise ValueError("reason must be a non-empty string")
                result = {"entry": self.logbook.reset(reason[:200])}
            else:
                await self._error(
                    call,
                    session,
                    -32601,
                    f"unknown {method}; the relay knows {', '.join(_AGENTENV_METHODS)}",
                )
                return
        except ValueError as exc:
            await self._error(call, session, -32602, f"{method}: {exc}")
            return
        await self._answer({"id": call, "result": result})

    # -- Chromium to client --------------------------------------------------

    async def to_client(self) -> None:
        async for msg in self.upstream:
            if msg.type is WSMsgType.TEXT:
                data = msg.data
                try:
                    if data.startswith('{"method":'):
                        if data.startswith('{"method":"Target.', 0):
                            self._target_event(data)
                    else:
                        self._answered(data)
                except LogError as exc:  # a full disk must not cut the agent off
                    log.error("conn %d: %s", self.conn.number, exc)
                if not self.client.closed:
                    await self.client.send_str(data)
            elif msg.type is WSMsgType.BINARY:
                if not self.client.closed:
                    await self.client.send_bytes(msg.data)
            elif msg.type is WSMsgType.ERROR:
                break
            if not self.conn.pending:
                self.conn.settled.set()

    def _target_event(self, data: str) -> None:
        if not (
            data.startswith('{"method":"Target.attachedToTarget"')
            or data.startswith('{"method":"Target.detachedFromTarget"')
        ):
            return
        message = orjson.loads(data)
        params = message.get("params") or {}
        session = params.get("sessionId")
        if not isinstance(session, str):
            return
        if message["method"] == "Target.detachedFromTarget":
            self.conn.sessions.pop(session, None)
            return
        info = params.get("targetInfo") or {}
        target = info.get("targetId")
        if info.get("type") == "page" or not isinstance(message.get("sessionId"), str):
            tab = target
        else:  # a frame or worker inside a page: its tab is the page's
            tab = self.conn.sessions.get(message["sessionId"], target)
        if isinstance(tab, str):
            self.conn.sessions[session] = tab

    def _answered(self, data: str) -> None:
        if not self.conn.pending:
            return  # nothing awaits an answer: do not parse it (screenshots are MBs)
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        call = message.get("id")
        session = message.get("sessionId")
        pending = self.conn.pending.pop((session if isinstance(session, str) else None, call), None)
        if pending is None:
            # Chromium answers a command for an unknown session without the
            # sessionId: match on the id alone.
            key = next((k for k in self.conn.pending if k[1] == call), None)
            if key is None:
                return
            pending = self.conn.pending.pop(key)
        self.conn.answered.set()
        error = message.get("error")
        ok = error is None
        result = message.get("result") if ok else None
        opened = None
        if ok and isinstance(result, dict):
            if pending.method == "Target.createTarget":
                opened = result.get("targetId") if isinstance(result.get("targetId"), str) else None
            elif pending.method == "Target.attachToTarget":
                new = result.get("sessionId")
                target = (
                    pending.params.get("targetId") if isinstance(pending.params, dict) else None
                )
                if isinstance(new, str) and isinstance(target, str):
                    self.conn.sessions[new] = target
        if pending.entry < 0:  # the computer's own, not on the record
            self.logbook.end_unlogged(pending.entry, ok, opened)
            return
        text = None
        if not ok:
            text = error.get("message") if isinstance(error, dict) else str(error)
            text = str(text)
        self.logbook.end_command(pending.entry, ok, text, opened=opened)

    def end_pending(self, why: str) -> None:
        for pending in self.conn.pending.values():
            if pending.entry < 0:
                self.logbook.end_unlogged(pending.entry, False)
            else:
                self.logbook.end_command(pending.entry, False, why)
        self.conn.pending.clear()
        self.conn.settled.set()


async def bridge(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    conn: Connection,
    logbook: Logbook,
    watcher: Watcher,
    downloads: str,
) -> None:
    """Move messages until either side ends; settle what is in flight; close."""
    b = _Bridge(client, upstream, conn, logbook, watcher, downloads)
    to_upstream = asyncio.create_task(b.to_upstream(), name=f"conn{conn.number}-up")
    to_client = asyncio.create_task(b.to_client(), name=f"conn{conn.number}-down")
    try:
        done, _ = await asyncio.wait({to_upstream, to_client}, return_when=asyncio.FIRST_COMPLETED)
        if to_upstream in done and not to_client.done() and conn.pending:
            # The client left: let Chromium answer what it was sent.
            conn.settled.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(conn.settled.wait(), SETTLE_S)
    finally:
        for task in (to_upstream, to_client):
            task.cancel()
        for task in (to_upstream, to_client):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    upstream_ended = to_client in done and not client.closed
    if conn.pending:
        b.end_pending(
            "Chromium exited before answering"
            if upstream_ended
            else f"no answer within {SETTLE_S:.0f} s after the client left"
        )
    logbook.drop_owner(conn.number)
    if upstream_ended:
        code, message = BROWSER_GONE
        log.info("conn %d: Chromium closed its side; closing the client", conn.number)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(code=code, message=message), 5.0)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(upstream.close(), 5.0)
    if not client.closed:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 5.0)
