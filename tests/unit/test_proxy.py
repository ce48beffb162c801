"""The bridge's loop from Chromium to the client (``proxy._Bridge.to_client``).

Its two sockets are stand-ins that replay Chromium's messages and record what
the client was sent; the core, the logbook and the log file are the real
ones. What is under test is the loop's order: when an answer is read relative
to when the client has it, and what happens when the client is gone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from aiohttp import WSMsgType

from agentenv.access import Identity
from agentenv.log.writer import LogWriter
from agentenv.relay.connection import Connection
from agentenv.relay.core import ClientState, Pending
from agentenv.relay.effects import Begin
from agentenv.relay.logbook import Logbook
from agentenv.relay.person_holds import PersonHolds
from agentenv.relay.proxy import Shared, _Bridge


@dataclass
class Message:
    type: WSMsgType
    data: str


class Chromium:
    """Chromium's side: its messages, in order, then the socket ends."""

    def __init__(self, *messages: str) -> None:
        self.messages = messages

    async def _replay(self) -> AsyncIterator[Message]:
        for data in self.messages:
            yield Message(WSMsgType.TEXT, data)

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._replay()


class Client:
    """The client's side: what it was sent, and what the relay knew then."""

    def __init__(self, seen: Callable[[], Any] = lambda: None, fail: bool = False) -> None:
        self.closed = False
        self.sent: list[tuple[str, Any]] = []
        self.seen, self.fail = seen, fail

    async def send_str(self, data: str) -> None:
        self.sent.append((data, self.seen()))
        if self.fail:  # what aiohttp raises once the client's socket is gone
            raise ConnectionResetError("Cannot write to closing transport")


def _bridge(tmp_path: Path, chromium: Chromium, client: Client) -> tuple[_Bridge, Logbook]:
    book = Logbook(LogWriter.open(tmp_path / "log.jsonl"))
    state = ClientState(3, Identity("alice"))
    # The watcher's one part a bridge reads at start: who holds a scope.
    watcher = SimpleNamespace(holds=PersonHolds())
    shared = Shared(book, cast(Any, watcher), cast(Any, None))
    connection = Connection(state, "/d", book, watcher.holds)
    bridge = _Bridge(cast(Any, client), cast(Any, chromium), connection, shared)
    return bridge, book


def _send(bridge: _Bridge, book: Logbook, call: int, method: str, params: dict[str, Any]) -> int:
    """A command the client sent: its entry begun, waiting for its answer."""
    state = bridge.state
    entry = book.begin(Begin(state.identity, state.number, None, method, params, None))
    state.pending[(None, call)] = Pending(entry, method, params)
    return entry


def _log(tmp_path: Path) -> dict[int, dict[str, Any]]:
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    return {x["seq"]: x["action"] for x in lines if "action" in x}


def test_an_answer_handed_over_first_still_ends_its_entry(tmp_path: Path) -> None:
    answer = '{"id":1,"result":{"result":{"type":"number","value":1}}}'
    client = Client()
    bridge, book = _bridge(tmp_path, Chromium(answer), client)
    client.seen = lambda: list(bridge.state.pending)  # in flight when the client had it
    entry = _send(bridge, book, 1, "Runtime.evaluate", {"expression": "1"})
    asyncio.run(bridge.down.run())
    assert client.sent == [(answer, [(None, 1)])]  # before the relay read it
    assert not bridge.state.pending and bridge.down.settled.is_set()
    assert _log(tmp_path)[entry]["ok"] is True


def test_answers_that_change_what_comes_next_are_read_before_the_client_has_them(
    tmp_path: Path,
) -> None:
    answers = (
        '{"id":1,"result":{"sessionId":"S9"}}',
        '{"id":2,"result":{}}',
        '{"id":3,"result":{"targetId":"T2"}}',
    )
    client = Client()
    bridge, book = _bridge(tmp_path, Chromium(*answers), client)
    state = bridge.state
    client.seen = lambda: ("S9" in state.sessions, state.downloads_changed, len(state.pending))
    _send(bridge, book, 1, "Target.attachToTarget", {"targetId": "T1", "flatten": True})
    _send(bridge, book, 2, "Page.setDownloadBehavior", {"behavior": "deny"})
    opened = _send(bridge, book, 3, "Target.createTarget", {"url": "about:blank"})
    asyncio.run(bridge.down.run())
    assert [seen for _, seen in client.sent] == [(True, False, 2), (True, True, 1), (True, True, 0)]
    assert state.sessions["S9"].tab == "T1"
    assert _log(tmp_path)[opened]["tab"] == "T2"


def test_a_client_gone_under_a_send_still_has_every_answer_logged(tmp_path: Path) -> None:
    client = Client(fail=True)
    bridge, book = _bridge(
        tmp_path, Chromium('{"id":1,"result":{}}', '{"id":2,"error":{"message":"No node"}}'), client
    )
    first = _send(bridge, book, 1, "Runtime.evaluate", {"expression": "1"})
    second = _send(bridge, book, 2, "DOM.describeNode", {"nodeId": 5})
    asyncio.run(bridge.down.run())  # no exception: the loop reads on
    assert bridge.down.client_gone and len(client.sent) == 1  # nothing more was tried
    entries = _log(tmp_path)
    assert entries[first]["ok"] is True
    assert entries[second]["ok"] is False and entries[second]["error"] == "No node"
    assert not bridge.state.pending
