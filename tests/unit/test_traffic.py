"""The relay's rules on both halves of real clients' traffic.

``tests/unit/traffic/both/`` holds what five real clients (Playwright,
Puppeteer, Selenium's chromedriver, Stagehand, browser-use) and Chromium said to each
other, in the order it passed (recorded with ``tests.support.traffic
--both`` in front of a plain Chromium). Each recording is replayed through
the relay's sans-I/O rules, one :class:`~agentenv.relay.connection.Connection`
for each of the client's connections (its commands through ``client``,
Chromium's messages through ``chromium``), with a real logbook, and what the
watcher would know of each target (its context and type) learned from
Chromium's own messages as they pass:

- **in its own scope** (the scope's context is the recording's), the client
  is refused nothing and loses nothing: every command goes on (a rewrite
  keeps its meaning), every message of Chromium reaches it;
- **from another scope** (a scope whose context is not the recording's),
  nothing of the recorded browser reaches the client: no event, answer or
  listing names one of its targets, sessions or contexts, and every command
  naming one is refused. Chromium's messages for commands the rules did not
  send, or for sessions the client never got, are not replayed (Chromium
  never sends them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentenv.access import Identity
from agentenv.log.writer import LogWriter
from agentenv.relay import core, guard
from agentenv.relay.connection import Connection, Looked, Read, Ready, TabPage, WorldDone
from agentenv.relay.core import ClientState, Down, Pending
from agentenv.relay.decision import Refuse, Send
from agentenv.relay.known import InContext, Known, PageOfTab, TargetSeen
from agentenv.relay.logbook import Logbook
from agentenv.scopes import Scope
from tests.support.traffic import load

BOTH = Path(__file__).parent / "traffic" / "both"
RECORDED = sorted(p.stem for p in BOTH.glob("*.jsonl"))
DOWNLOADS = "/var/lib/agentenv/downloads"


def _infos(value: Any) -> Iterator[dict[str, Any]]:
    """Every targetInfo-shaped object in a message."""
    if isinstance(value, dict):
        if isinstance(value.get("targetId"), str) and "type" in value:
            yield value
        for item in value.values():
            yield from _infos(item)
    elif isinstance(value, list):
        for item in value:
            yield from _infos(item)


class Watcher:
    """What the relay's watcher knows, learned from Chromium's messages as
    the relay's does: facts into a :class:`Known`."""

    def __init__(self) -> None:
        self.known = Known()
        self.attached: dict[str, str] = {}  # session -> its target

    def learn(self, message: dict[str, Any]) -> None:
        for info in _infos(message):
            context = info.get("browserContextId")
            seen = TargetSeen(
                info["targetId"],
                str(info["type"]),
                str(info.get("url", "")),
                context if isinstance(context, str) else None,
            )
            self.known.learn(seen)
        if message.get("method") != "Target.attachedToTarget":
            return
        params = message.get("params") or {}
        info = params.get("targetInfo") or {}
        self.attached[params.get("sessionId", "")] = info.get("targetId", "")
        parent = self.attached.get(message.get("sessionId", ""))
        parents = self.known.target(parent) if parent else None
        if parent and parents is not None and parents[0] == "tab" and info.get("type") == "page":
            # A tab-type target's page (the watcher finds it by attaching).
            self.known.learn(PageOfTab(parent, info["targetId"]))


def _wire(message: dict[str, Any]) -> str:
    """A message as Chromium and clients write it: compact, keys in order
    (the core reads events by their first bytes)."""
    return json.dumps(message, separators=(",", ":"))


def _recording(name: str) -> list[dict[str, Any]]:
    lines = load(BOTH / f"{name}.jsonl")
    assert {line["from"] for line in lines} == {"client", "chromium"}, name
    return lines


def _home_context(lines: list[dict[str, Any]]) -> str:
    for line in lines:
        for info in _infos(line["message"]):
            if isinstance(info.get("browserContextId"), str):
                return str(info["browserContextId"])
    raise AssertionError("the recording names no browser context")


def _connection(number: int, scope: Scope, watcher: Watcher, book: Logbook) -> Connection:
    state = ClientState(number, Identity("alice"), scope=scope, known=watcher.known)
    return Connection(state, DOWNLOADS, book)


def _ready(connection: Connection, read: Read) -> Ready:
    """What the door does for a need: the replay's watcher already knows
    what Chromium said, and no world is being made."""
    while not isinstance(read, Ready):
        read = connection.learn(Looked() if isinstance(read, TabPage) else WorldDone())
    return read


def _send(state: ClientState, step: core.Step) -> None:
    """What the relay's socket loop does with a command it sends: awaits its answer."""
    if step.call is not None:
        state.pending[(step.session, step.call)] = Pending(1, step.method, step.params, step.tab)


def _about_ui_only(message: dict[str, Any]) -> bool:
    """A message about targets no client is given (the browser's own UI)."""
    infos = list(_infos(message))
    return bool(infos) and not any(
        guard.web_target((str(i["type"]), str(i.get("url", "")))) for i in infos
    )


def _unseen(state: ClientState, session: object) -> bool:
    """A session the client was never given (another scope's, the browser's
    own UI: the relay detached it): the client cannot name it, and Chromium
    says nothing more on it."""
    if not isinstance(session, str):
        return False
    info = state.sessions.get(session)
    return info is None or not info.web


@pytest.mark.parametrize("client", RECORDED)
def test_in_its_own_scope_a_client_is_refused_nothing_and_loses_nothing(
    client: str, tmp_path: Path
) -> None:
    lines = _recording(client)
    scope = Scope("alice", _home_context(lines))
    watcher = Watcher()
    book = Logbook(LogWriter.open(tmp_path / "browser-t.jsonl"))
    connections: dict[str, Connection] = {}
    refused: list[tuple[str, Any]] = []
    lost: list[str] = []
    commands = events = 0
    for line in lines:
        path = line["path"]
        if path not in connections:
            connections[path] = _connection(len(connections) + 1, scope, watcher, book)
        connection = connections[path]
        state = connection.state
        message = line["message"]
        data = _wire(message)
        if _unseen(state, message.get("sessionId")):
            continue  # through the relay the client never had this session
        if line["from"] == "client":
            commands += 1
            step, decision = _ready(connection, connection.client(data))
            if not isinstance(decision, Send):
                refused.append((step.method, step.verdict or step.error))
            else:
                _send(state, step)
            continue
        events += 1
        watcher.learn(message)
        # The relay's own detach of a session it never gave the client.
        detached = (message.get("params") or {}).get("sessionId")
        hidden = message.get("method") == "Target.detachedFromTarget" and _unseen(state, detached)
        down = connection.chromium(data)
        if down.kind is not Down.PASS and not _about_ui_only(message) and not hidden:
            lost.append(data[:200])
        elif down.data is not None:  # an answer kept to the scope: the same targets
            assert {i["targetId"] for i in _infos(json.loads(down.data))} == {
                i["targetId"] for i in _infos(message)
            }, data[:300]
    assert refused == [], refused
    assert lost == [], lost
    assert commands > 50 and events > 50, (commands, events)
    assert all(not c.state.pending for c in connections.values()), "commands left unanswered"


@pytest.mark.parametrize("client", RECORDED)
def test_from_another_scope_nothing_of_the_recorded_browser_comes_through(
    client: str, tmp_path: Path
) -> None:
    lines = _recording(client)
    theirs = _home_context(lines)
    scope = Scope("bob", "CTX-BOB-ELSEWHERE")
    watcher = Watcher()
    for line in lines:  # the watcher knows every target from the start
        if line["from"] == "chromium":
            watcher.learn(line["message"])
    foreign = {t for t in watcher.known.targets if watcher.known.context_of(t) == theirs}
    assert foreign, "the recording names no target"
    book = Logbook(LogWriter.open(tmp_path / "browser-t.jsonl"))
    connections: dict[str, Connection] = {}
    sent: set[tuple[str, str | None, int]] = set()
    passed: list[str] = []
    naming_refused = withheld = 0
    for line in lines:
        path = line["path"]
        if path not in connections:
            connections[path] = _connection(len(connections) + 1, scope, watcher, book)
        connection = connections[path]
        state = connection.state
        message = line["message"]
        data = _wire(message)
        session = message.get("sessionId")
        if _unseen(state, session):
            continue  # a session the client never got
        if line["from"] == "client":
            step, decision = _ready(connection, connection.client(data))
            params = step.params or {}
            named = params.get("targetId") in foreign or params.get("browserContextId") == theirs
            if named:
                assert isinstance(decision, Refuse), (step.method, params)
                naming_refused += 1
            if isinstance(decision, Send) and isinstance(message.get("id"), int):
                sent.add((path, session, message["id"]))
                _send(state, step)
            continue
        call = message.get("id")
        if isinstance(call, int) and (path, session, call) not in sent:
            continue  # an answer to a command the rules never sent
        down = connection.chromium(data)
        made = down.opened if down.pending is not None else None
        if made is not None:
            # A tab it opened: Chromium made it in its own context (the
            # rules sent the command with it); in the recording it is the
            # recorded browser's.
            foreign.discard(made)
            watcher.known.learn(InContext(made, scope.context))
            continue
        names_theirs = any(t in data for t in foreign) or theirs in data
        if down.kind is Down.PASS:
            shown = down.data if down.data is not None else data
            if any(t in shown for t in foreign) or theirs in shown:
                passed.append(shown[:300])
            elif names_theirs:
                withheld += 1  # an answer kept to the scope
        elif names_theirs:
            withheld += 1
    assert passed == [], passed
    # The replay met the recorded browser: the client named its targets
    # (refused) or Chromium's messages named them (kept out). Met, refused
    # and kept out: browser-use 1 and 7, Playwright 1 and 10, Puppeteer 0
    # and 30, Selenium 4 and 8, Stagehand 0 and 17.
    assert naming_refused + withheld >= 8, (naming_refused, withheld)
