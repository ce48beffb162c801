"""The relay's rules on picows, in callbacks: a measurement, not the relay.

What the relay would cost with picows on both sides (``bench/bare_picows.py``'s
sockets) and its rules carried out in the frame callbacks, with no task
switch a message: each client message goes through the real
:class:`~agentenv.relay.connection.Connection` (parse, guard, decision), its
entry is begun on a real :class:`~agentenv.relay.logbook.Logbook` (a log
file with its hash chain), and Chromium's messages are read by the same
``Connection`` (``answer_first``, ``chromium``) and end their entries, as
:mod:`agentenv.relay.to_client` does. The client is an agent (``alice``),
so every command is on the record.

Only what the bench sends is carried out: commands the rules send on or
refuse, answers and events. A need (a tab's page, the relay's world, a
person) is met at once, as if the wait had found it; password checks,
recordings' descriptions, memory meters and the HTTP door are not here.

    python -m bench.picows_relay UPSTREAM_WS_URL PORT LOG_FOLDER [MODE]

MODE splits what the relay's own work costs into its parts:

- ``logged`` (the default): as above;
- ``rules``: the ``Connection`` reads and decides both halves, with no
  entries;
- ``parse``: each command is parsed and written again as the relay writes
  what Chromium gets (``ids.encode``), no rule read; Chromium's messages go
  as they came. Any relay that sends only what it checked pays this.
"""

from __future__ import annotations

import asyncio
import sys
import urllib.request
from pathlib import Path

import orjson
from picows import (
    WSCloseCode,
    WSError,
    WSFrame,
    WSListener,
    WSMsgType,
    WSTransport,
    WSUpgradeRequest,
    ws_connect,
    ws_create_server,
)

from agentenv.access import Identity
from agentenv.log.writer import LogWriter
from agentenv.protocol.log import ACTING
from agentenv.relay import core, ids
from agentenv.relay.client_state import InLog
from agentenv.relay.commands import acts
from agentenv.relay.connection import Connection, Looked, Ready, TabPage, WorldDone
from agentenv.relay.core import ClientState, Down, Pending
from agentenv.relay.decision import Refuse, Send
from agentenv.relay.effects import Ended
from agentenv.relay.known import Known, TargetSeen
from agentenv.relay.logbook import Logbook

MAX_FRAME = 1 << 30
MODES = ("logged", "rules", "parse")
DOWNLOADS = "/tmp/agentenv-bench-downloads"


class _Upstream(WSListener):
    """Chromium's half: the Connection reads each message, answers end entries."""

    def __init__(self, bridge: _Client) -> None:
        self.bridge = bridge

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type != WSMsgType.TEXT:
            return
        bridge = self.bridge
        if bridge.mode == "parse":
            bridge.client.send(WSMsgType.TEXT, frame.get_payload_as_memoryview())
            return
        client, connection = bridge.client, bridge.connection
        data = frame.get_payload_as_utf8_text()
        if connection.answer_first(data):
            client.send(WSMsgType.TEXT, frame.get_payload_as_memoryview())
            down = connection.chromium(data)
        else:
            down = connection.chromium(data)
            for command in down.upstream:
                transport.send(WSMsgType.TEXT, command.encode())
            if down.kind is Down.PASS:
                out = down.data if down.data is not None else data
                client.send(WSMsgType.TEXT, out.encode())
        pending = down.pending
        if pending is not None and pending.in_log is InLog.LOGGED and bridge.logged:
            bridge.book.end(Ended(pending.entry, down.ok, down.error, opened=down.opened))

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.bridge.client.disconnect()


class _Client(WSListener):
    """The client's half: each message read and decided, begun, sent on."""

    def __init__(self, upstream: str, number: int, book: Logbook, known: Known, mode: str) -> None:
        self.url = upstream
        self.book = book
        self.mode = mode
        self.logged = mode == "logged"
        self.state = ClientState(number, Identity("alice"), known=known)
        self.connection = Connection(self.state, DOWNLOADS, book)
        self.up: WSTransport | None = None
        self.early: list[str] = []
        self.closed = False

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.client = transport
        self.opening = asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        try:
            up, _ = await ws_connect(lambda: _Upstream(self), self.url, max_frame_size=MAX_FRAME)
        except (OSError, TimeoutError, WSError):
            self.client.send_close(WSCloseCode.BAD_GATEWAY)
            self.client.disconnect()
            return
        if self.closed:
            up.disconnect()
            return
        self.up = up
        for data in self.early:
            self._command(data)
        self.early.clear()

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type == WSMsgType.TEXT:
            data = frame.get_payload_as_utf8_text()
            if self.up is None:
                self.early.append(data)
            else:
                self._command(data)
        elif frame.msg_type == WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code())
            transport.disconnect()

    def _command(self, data: str) -> None:
        if self.mode == "parse":
            message = orjson.loads(data)
            params, session = message.get("params"), message.get("sessionId")
            again = ids.encode(message["id"], message["method"], params, session)
            assert self.up is not None
            self.up.send(WSMsgType.TEXT, again.encode())
            return
        connection, state = self.connection, self.state
        read = connection.client(data)
        while not isinstance(read, Ready):  # met at once (see the docstring)
            read = connection.learn(Looked() if isinstance(read, TabPage) else WorldDone())
        step, decision = read
        if isinstance(decision, Refuse):
            if decision.logged and self.logged:
                entry = self.book.begin(core.begin_of(state, step, None))
                self.book.end_refused(entry, decision.why, decision.guard)
            self.client.send(WSMsgType.TEXT, orjson.dumps(decision.answer))
            return
        if not isinstance(decision, Send):
            raise NotImplementedError(f"the bench's relay carries out Send and Refuse: {decision}")
        entry = self.book.begin(core.begin_of(state, step, None)) if self.logged else 0
        acting = acts(step.method, step.params) == ACTING
        key = (step.session, step.call if step.call is not None else -1)
        state.pending[key] = Pending(entry, step.method, step.params, step.tab, acting)
        assert self.up is not None
        self.up.send(WSMsgType.TEXT, step.data.encode())
        if decision.guarded is not None and self.logged:
            self.book.guarded(entry, decision.guarded)

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.closed = True
        if self.up is not None:
            self.up.disconnect()


def _known(upstream: str) -> Known:
    """Chromium's targets, as the relay's watcher would know them."""
    host = upstream.split("/")[2]
    with urllib.request.urlopen(f"http://{host}/json/list", timeout=10) as answer:
        targets = orjson.loads(answer.read())
    known = Known()
    for target in targets:
        known.learn(TargetSeen(target["id"], target["type"], target.get("url", ""), None))
    return known


async def serve(upstream: str, port: int, folder: Path, mode: str) -> None:
    book = Logbook(LogWriter.open(folder / "browser-bench.jsonl"))
    known = _known(upstream)
    numbers = iter(range(1, 1 << 30))

    def listener(request: WSUpgradeRequest) -> _Client:
        return _Client(upstream, next(numbers), book, known, mode)

    server = await ws_create_server(
        listener, "127.0.0.1", port, max_frame_size=MAX_FRAME, websocket_handshake_timeout=10
    )
    await server.serve_forever()


def main() -> None:
    import uvloop

    mode = sys.argv[4] if len(sys.argv) > 4 else "logged"
    if mode not in MODES:
        raise SystemExit(f"MODE is one of {', '.join(MODES)}, not {mode!r}")
    uvloop.run(serve(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), mode))


if __name__ == "__main__":
    main()
