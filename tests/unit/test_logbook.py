"""The relay's logbook over a real log file, driven as the bridge drives it
(:mod:`agentenv.relay.proxy`): each client message read by the core, its
entry begun before it is sent, ended by its answer; the watcher's tab
events in between. What is asserted is the JSON lines a reader gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentenv.access import Identity
from agentenv.log.cdp_params import redact_params
from agentenv.log.lines import BROWSER_EXITED
from agentenv.log.writer import LogWriter
from agentenv.protocol.control import BeginAction, EndAction
from agentenv.relay import core, password
from agentenv.relay.commands import UNUSED_KEPT
from agentenv.relay.core import ClientState, Kind, Step
from agentenv.relay.effects import Begin, Ended
from agentenv.relay.logbook import Logbook

DOWNLOADS = "/var/lib/agentenv/downloads"
ALICE = Identity("alice")
CONTROL = Identity("agentenv", control=True)


class Book:
    """A logbook on ``tmp_path``, and the bridge's calls into it."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "browser-test.jsonl"
        self.book = Logbook(LogWriter.open(self.path))
        self._ids = 0

    def send(
        self, state: ClientState, method: str, params: dict[str, Any], session: str | None = None
    ) -> tuple[int, Step]:
        """A client's command read by the core and its entry begun, as
        ``_Bridge._command`` does (typing starts withheld)."""
        self._ids += 1
        message: dict[str, Any] = {"id": self._ids, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        step = core.receive(state, json.dumps(message), DOWNLOADS)
        typed = password.withhold_typing(step.method, step.params or {}) if step.typing else None
        entry = self.book.begin(core.begin_of(state, step, typed))
        return entry, step

    def checked(self, state: ClientState, entry: int, step: Step, focus: str) -> None:
        """The password check's verdict on a typing command, as ``_check_typing``
        takes it: only a "no" puts the text back."""
        if focus == "no":
            assert self.book.writer.amend(
                entry, {"params": redact_params(step.method, step.params)}
            )
        self.book.typing_checked(state.number, state.tag, focus == "no", state.identity)

    def answer(self, entry: int, ok: bool = True, **more: Any) -> None:
        self.book.end(Ended(entry, ok, **more))

    def raw(self) -> bytes:
        return self.path.read_bytes()

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.raw().splitlines()]

    def by_seq(self) -> dict[int, dict[str, Any]]:
        return {x["seq"]: x for x in self.lines()}

    def action(self, entry: int) -> dict[str, Any]:
        found: dict[str, Any] = self.by_seq()[entry]["action"]
        return found

    def tabs(self) -> list[dict[str, Any]]:
        return [x["tab"] for x in sorted(self.lines(), key=lambda x: x["seq"]) if "tab" in x]


def page(number: int, tab: str, identity: Identity = ALICE, tag: str | None = None) -> ClientState:
    """A client connected to ``/devtools/page/<tab>``."""
    return ClientState(number, identity, tag, tab)


def command_by(entry: int, who: str = "alice", **more: Any) -> dict[str, Any]:
    return {"kind": "command", "entry": entry, "via": "cdp", "who": who, **more}


def test_entries_are_numbered_as_they_begin_written_as_they_end_and_none_is_skipped(
    tmp_path: Path,
) -> None:
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    alice = page(3, "A")
    read, _ = b.send(alice, "DOM.getDocument", {})
    refused, step = b.send(alice, "Browser.close", {})
    assert step.kind is Kind.BLOCK and step.verdict is not None
    b.answer(refused, False, error=step.verdict.message, guard=step.verdict.as_entry())
    click, _ = b.send(alice, "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 5, "y": 6})
    b.book.navigated("A", "http://a.test/next")  # a line at once, between
    b.answer(click)
    b.answer(read)
    assert (read, refused, click) == (1, 2, 3)
    lines = b.lines()
    assert [x["seq"] for x in lines] == [2, 4, 3, 1]  # the file's order is the ends'
    assert sorted(x["seq"] for x in lines) == list(range(1, 5))
    assert all(x["at"].endswith("Z") for x in lines)
    assert b.action(read) == {
        "via": "cdp",
        "who": "alice",
        "conn": 3,
        "method": "DOM.getDocument",
        "acts": "reading",
        "tab": "A",
        "url": "http://a.test/",
        "ok": True,
    }  # a reading command keeps no params
    assert b.action(click)["acts"] == "acting"
    assert b.action(click)["params"] == {"type": "mousePressed", "x": 5, "y": 6}
    blocked = b.action(refused)
    assert blocked["ok"] is False and blocked["guard"]["action"] == "blocked"
    assert blocked["guard"]["rule"] and blocked["error"] == step.verdict.message
    # The tab moved by the page, after the latest acting entry there: the click.
    assert b.tabs() == [
        {
            "event": "navigated",
            "id": "A",
            "url": "http://a.test/next",
            "by": {"kind": "page", "after": click},
        }
    ]


def test_a_tab_a_command_opens_is_credited_to_it_and_its_entry_takes_the_tab(
    tmp_path: Path,
) -> None:
    b = Book(tmp_path)
    alice = ClientState(4, ALICE)  # a browser connection
    opening, _ = b.send(alice, "Target.createTarget", {"url": "about:blank"})
    b.book.created("T2", "about:blank", None)  # Chromium tells before it answers
    assert b.tabs() == []  # held: the open in flight may be its cause
    b.answer(opening, opened="T2")
    b.book.navigated("T2", "http://b.test/")  # its first navigation is the open's too
    b.book.navigated("T2", "http://b.test/2")  # the next is the page's, after nothing
    assert b.action(opening)["tab"] == "T2"
    assert b.action(opening)["params"] == {"url": "about:blank"}
    assert b.tabs() == [
        {"event": "opened", "id": "T2", "url": "about:blank", "by": command_by(opening)},
        {"event": "navigated", "id": "T2", "url": "http://b.test/", "by": command_by(opening)},
        {
            "event": "navigated",
            "id": "T2",
            "url": "http://b.test/2",
            "by": {"kind": "page", "after": None},
        },
    ]


def test_a_navigate_in_flight_claims_its_navigation_and_a_close_claims_the_close(
    tmp_path: Path,
) -> None:
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    alice_page = page(6, "A")
    go, _ = b.send(alice_page, "Page.navigate", {"url": "http://a.test/login"})
    b.book.navigated("A", "http://a.test/login")
    b.answer(go)
    close, _ = b.send(alice_page, "Target.closeTarget", {"targetId": "A"})
    b.book.destroyed("A")
    b.answer(close)
    assert b.tabs() == [
        {"event": "navigated", "id": "A", "url": "http://a.test/login", "by": command_by(go)},
        {"event": "closed", "id": "A", "url": "http://a.test/login", "by": command_by(close)},
    ]
    assert b.action(close)["tab"] == "A" and b.action(close)["ok"] is True


def test_the_computers_commands_inside_an_action_are_its_callers_and_say_within(
    tmp_path: Path,
) -> None:
    """Playwright MCP's connection (the control token) acting for bob's tool
    call: its commands are bob's, ``within`` the call, and so is the tab event
    they cause. alice's connection, tagged like the call's scope, stays hers."""
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    call = b.book.begin_action(
        1,
        BeginAction(
            via="mcp", who="bob", tool="browser_navigate", call="c-1", scope=[9, "mcp-bob"], tab="A"
        ),
    )
    mcp = page(9, "A", CONTROL)
    go, _ = b.send(mcp, "Page.navigate", {"url": "http://a.test/bob"})
    alice = page(10, "A", ALICE, tag="mcp-bob")
    hers, _ = b.send(alice, "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 1, "y": 1})
    b.book.navigated("A", "http://a.test/bob")
    b.answer(go)
    b.answer(hers)
    b.book.end_action(1, EndAction(entry=call, ok=True))
    outside, _ = b.send(mcp, "DOM.getDocument", {})  # after the call: the computer's own
    b.answer(outside)
    assert b.action(call) == {
        "via": "mcp",
        "who": "bob",
        "tool": "browser_navigate",
        "call": "c-1",
        "acts": "acting",
        "tab": "A",
        "url": "http://a.test/",
        "ok": True,
    }
    assert b.action(go)["who"] == "bob" and b.action(go)["within"] == call
    assert b.action(hers)["who"] == "alice" and "within" not in b.action(hers)
    assert b.action(outside)["who"] == "agentenv" and "within" not in b.action(outside)
    assert b.tabs() == [
        {
            "event": "navigated",
            "id": "A",
            "url": "http://a.test/bob",
            "by": command_by(go, "bob", within=call),
        }
    ]


def test_each_field_a_command_begins_with_reaches_its_entry(tmp_path: Path) -> None:
    """``Begin`` is unpacked by its fields' order (``Logbook.begin``): each
    one, given a value no other field could take, shows where it belongs."""
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    b.book.begin_action(1, BeginAction(via="mcp", who="bob", tool="t", scope=["mcp-bob"]))
    withheld = {"text": {"withheld": "password"}}
    typed = b.book.begin(
        Begin(CONTROL, 9, "mcp-bob", "Input.insertText", {"text": "s3"}, "A", withheld, scope="s")
    )
    b.answer(typed)
    line = b.action(typed)
    assert (line["who"], line["conn"], line["tab"], line["scope"]) == ("bob", 9, "A", "s")
    assert line["params"] == withheld and "within" in line
    b.book.navigated("A", "http://a.test/1")
    # Not sent (refused): on the record, and not what the page acted after.
    unsent = b.book.begin(Begin(ALICE, 3, None, "Input.insertText", {"text": "x"}, "A", sent=False))
    b.answer(unsent, False, error="refused")
    # A frame's navigate claims no navigation of its tab.
    framed = b.book.begin(
        Begin(ALICE, 3, None, "Page.navigate", {"url": "http://a.test/2"}, "A", frame_only=True)
    )
    b.book.navigated("A", "http://a.test/2")
    b.answer(framed)
    assert b.action(unsent)["ok"] is False and b.action(framed)["method"] == "Page.navigate"
    assert [t["by"] for t in b.tabs()] == [
        {"kind": "page", "after": typed},
        {"kind": "page", "after": framed},
    ]


@pytest.mark.parametrize("focus", ["password", "undecided"])
def test_text_typed_into_a_password_field_is_withheld_and_its_entry_is_written(
    tmp_path: Path, focus: str
) -> None:
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/login")
    alice = page(3, "A")
    secret = "hunter2-SECRET-value"
    typed, step = b.send(alice, "Input.insertText", {"text": secret})
    key, key_step = b.send(
        alice, "Input.dispatchKeyEvent", {"type": "keyDown", "key": "x", "text": "x"}
    )
    assert step.typing and key_step.typing
    b.checked(alice, typed, step, focus)
    b.checked(alice, key, key_step, focus)
    b.answer(typed)
    b.answer(key)
    assert secret.encode() not in b.raw()
    assert b.action(typed) == {
        "via": "cdp",
        "who": "alice",
        "conn": 3,
        "method": "Input.insertText",
        "acts": "acting",
        "tab": "A",
        "url": "http://a.test/login",
        "params": {"text": {"withheld": "password", "length": len(secret)}},
        "ok": True,
    }
    assert b.action(key)["params"] == {
        "type": "keyDown",
        "text": {"withheld": "password", "length": 1},
    }


def test_text_the_check_clears_is_kept(tmp_path: Path) -> None:
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/search")
    alice = page(3, "A")
    typed, step = b.send(alice, "Input.insertText", {"text": "red shoes"})
    b.checked(alice, typed, step, "no")
    b.answer(typed)
    assert b.action(typed)["params"] == {"text": "red shoes"}


@pytest.mark.parametrize(
    ("verdicts", "kept"),
    [((), False), (("no", "password"), False), (("no", "undecided"), False), (("no", "no"), True)],
)
def test_a_tool_calls_typed_text_is_kept_only_when_every_check_it_made_cleared(
    tmp_path: Path, verdicts: tuple[str, ...], kept: bool
) -> None:
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/login")
    secret = "s3cret-TOOL-value"
    call = b.book.begin_action(
        1,
        BeginAction(
            via="mcp",
            who="bob",
            tool="browser_type",
            call="c-7",
            args={"element": "Password", "ref": "e5", "text": secret},
            typing=["text"],
            scope=[9],
        ),
    )
    mcp = page(9, "A", CONTROL)
    for focus in verdicts:
        entry, step = b.send(mcp, "Input.insertText", {"text": secret})
        b.checked(mcp, entry, step, focus)
        b.answer(entry)
    b.book.end_action(1, EndAction(entry=call, ok=True))
    args = b.action(call)["args"]
    assert args["element"] == "Password" and args["ref"] == "e5"
    if kept:
        assert args["text"] == secret
    else:
        assert args["text"] == {"withheld": "password", "length": len(secret)}
        assert secret not in json.dumps(b.by_seq()[call])  # (a command that cleared keeps its own)
    assert len(b.lines()) == 1 + len(verdicts)


def test_parameters_no_command_uses_are_logged_by_their_size_past_the_bound(
    tmp_path: Path,
) -> None:
    """``Page.navigate`` takes ``url``; a made-up parameter is kept whole up
    to UNUSED_KEPT bytes (its JSON), by count and size past it."""
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    alice = page(3, "A")
    room = UNUSED_KEPT - len(orjson.dumps({"pad": ""}))  # the longest kept whole
    small, _ = b.send(alice, "Page.navigate", {"url": "http://a.test/1", "pad": "y" * room})
    big, _ = b.send(alice, "Page.navigate", {"url": "http://a.test/2", "pad": "z" * (room + 1)})
    flood, _ = b.send(
        alice,
        "Page.navigate",
        {"url": "http://a.test/3", "referrer": "http://r.test/", "a": "q" * 5000, "b": [1] * 300},
    )
    for entry in (small, big, flood):
        b.answer(entry)
    assert b.action(small)["params"] == {"url": "http://a.test/1", "pad": "y" * room}
    assert b.action(big)["params"] == {
        "url": "http://a.test/2",
        "unused": {"count": 1, "bytes": UNUSED_KEPT + 1},
    }
    unused = {"a": "q" * 5000, "b": [1] * 300}
    assert b.action(flood)["params"] == {
        "url": "http://a.test/3",
        "referrer": "http://r.test/",
        "unused": {"count": 2, "bytes": len(orjson.dumps(unused))},
    }
    assert b"zzzz" not in b.raw() and b"qqqq" not in b.raw()


def test_a_command_the_guard_refused_is_not_what_the_page_acted_after(tmp_path: Path) -> None:
    """alice clicks a link, then asks for file:///etc/passwd (refused, never
    sent); the click's navigation comes: it follows the click, not the refusal."""
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    alice = page(3, "A")
    click, _ = b.send(alice, "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 5, "y": 6})
    b.answer(click)
    refused, step = b.send(alice, "Page.navigate", {"url": "file:///etc/passwd"})
    assert step.kind is Kind.BLOCK and step.verdict is not None
    b.answer(refused, False, error=step.verdict.message, guard=step.verdict.as_entry())
    b.book.navigated("A", "http://a.test/linked")
    assert b.action(refused)["guard"]["action"] == "blocked"
    assert b.tabs()[0]["by"] == {"kind": "page", "after": click}


def test_a_tool_call_naming_no_tab_takes_the_tab_its_latest_acting_command_acted_on(
    tmp_path: Path,
) -> None:
    """Playwright MCP picks its own tab: the tool call's entry (begun with no
    tab) says where it acted, from its own acting commands, not its reads."""
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    b.book.causes.known("B", "http://b.test/?token=SECRET123")
    call = b.book.begin_action(
        1, BeginAction(via="mcp", who="bob", tool="browser_click", call="c-2", scope=[9])
    )
    looked, _ = b.send(page(9, "A", CONTROL), "DOM.getDocument", {})  # a read: not where it acted
    b.answer(looked)
    clicked, _ = b.send(
        page(9, "B", CONTROL), "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 1, "y": 1}
    )
    b.answer(clicked)
    b.book.end_action(1, EndAction(entry=call, ok=True))
    entry = b.action(call)
    assert (entry["tab"], entry["url"]) == ("B", b.action(clicked)["url"])
    assert "SECRET123" not in entry["url"] and "SECRET123" not in b.raw().decode()
    # A call that named its tab keeps it, whatever its commands touch.
    named = b.book.begin_action(
        1, BeginAction(via="mcp", who="bob", tool="browser_type", scope=[9], tab="A")
    )
    typed, _ = b.send(page(9, "B", CONTROL), "Input.dispatchMouseEvent", {"type": "mouseMoved"})
    b.answer(typed)
    b.book.end_action(1, EndAction(entry=named, ok=True))
    assert b.action(named)["tab"] == "A"


def test_a_tool_calls_input_says_its_tab_not_the_scripts_it_runs_in_every_tab_after(
    tmp_path: Path,
) -> None:
    """Playwright MCP clicks in its own tab B (behind A, in front), then reads
    every tab's title with a script: the call acted on B. A call of scripts
    alone takes the tab of its latest one."""
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/front")
    b.book.causes.known("B", "http://b.test/own")
    call = b.book.begin_action(
        1, BeginAction(via="mcp", who="bob", tool="browser_mouse_click_xy", call="c-1", scope=[9])
    )
    for tab, method, params in (
        ("B", "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 1, "y": 1}),
        ("B", "Runtime.callFunctionOn", {"functionDeclaration": "() => document.title"}),
        ("A", "Runtime.callFunctionOn", {"functionDeclaration": "() => document.title"}),
    ):
        sent, _ = b.send(page(9, tab, CONTROL), method, params)
        b.answer(sent)
    b.book.end_action(1, EndAction(entry=call, ok=True))
    assert (b.action(call)["tab"], b.action(call)["url"]) == ("B", "http://b.test/own")
    scripted = b.book.begin_action(
        1, BeginAction(via="mcp", who="bob", tool="browser_evaluate", call="c-2", scope=[9])
    )
    for tab in ("B", "A"):
        sent, _ = b.send(page(9, tab, CONTROL), "Runtime.evaluate", {"expression": "1"})
        b.answer(sent)
    b.book.end_action(1, EndAction(entry=scripted, ok=True))
    assert b.action(scripted)["tab"] == "A"


def test_credentials_in_a_tabs_url_never_reach_its_lines(tmp_path: Path) -> None:
    b = Book(tmp_path)
    b.book.causes.known("A", "https://a.test/cb?code=AUTHCODE123&state=STATE456&page=2")
    alice = page(3, "A")
    click, _ = b.send(alice, "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 1, "y": 1})
    b.answer(click)
    b.book.navigated("A", "https://a.test/home?access_token=TOKEN789&tab=news")
    # The next command's entry takes the tab's new URL (each tab keeps its
    # URL as the log writes it, made again when the tab moves).
    again, _ = b.send(alice, "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 2, "y": 2})
    b.answer(again)
    raw = b.raw()
    for secret in (b"AUTHCODE123", b"STATE456", b"TOKEN789"):
        assert secret not in raw
    assert b.action(click)["url"] == "https://a.test/cb?code=REDACTED&state=REDACTED&page=2"
    assert b.tabs()[0]["url"] == "https://a.test/home?access_token=REDACTED&tab=news"
    assert b.action(again)["url"] == "https://a.test/home?access_token=REDACTED&tab=news"


def test_chromium_exiting_closes_every_tab_by_exit_and_says_so(tmp_path: Path) -> None:
    b = Book(tmp_path)
    b.book.causes.known("A", "http://a.test/")
    b.book.causes.known("B", "http://b.test/")
    b.book.ended("exit")
    lines = sorted(b.lines(), key=lambda x: x["seq"])
    assert [x["seq"] for x in lines] == [1, 2, 3]
    assert [x["tab"] for x in lines[:2]] == [
        {"event": "closed", "id": "A", "url": "http://a.test/", "by": {"kind": "exit"}},
        {"event": "closed", "id": "B", "url": "http://b.test/", "by": {"kind": "exit"}},
    ]
    exited = lines[2]["action"]
    assert exited["op"] == BROWSER_EXITED and exited["who"] == "agentenv"
    assert exited["ok"] is False and "every tab closed" in exited["error"]
    b.book.ended("stop")  # nothing open any more: nothing more to write
    assert len(b.lines()) == 3
