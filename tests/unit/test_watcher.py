"""The relay's watcher on a stand-in Chromium's browser connection
(:mod:`tests.support.fake_chromium`): what Chromium reports of its targets
becomes tab lines in a real log, each with its cause, through the logbook;
commands the test sends stand for a client's, begun and answered as the
bridge does. A round trip on the watcher's own connection (Chromium
answers in order) marks that every event before it was handled."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentenv.access import Identity
from agentenv.log.lines import BROWSER_EXITED
from agentenv.log.writer import LogWriter
from agentenv.relay.effects import Begin, Ended
from agentenv.relay.logbook import Logbook
from agentenv.relay.watcher import Watcher
from tests.support.fake_chromium import FakeChromium, target_info
from tests.support.servers import computer
from tests.support.timing import deadline

ALICE = Identity("alice")


class Watched:
    """A watcher running against ``chromium``, its log on ``tmp_path``."""

    def __init__(self, tmp_path: Path, chromium: FakeChromium, http: aiohttp.ClientSession) -> None:
        self.chromium = chromium
        self.path = tmp_path / "browser-test.jsonl"
        self.book = Logbook(LogWriter.open(self.path))
        settings = computer(tmp_path, chromium_port=str(chromium.port))
        self.watcher = Watcher(settings, http, self.book)

    async def handled(self) -> None:
        """Every event Chromium sent so far has been handled."""
        await self.watcher.call("Browser.getVersion", {}, deadline_s=deadline(5))

    def command(self, method: str, params: dict[str, Any], tab: str | None) -> int:
        return self.book.begin(Begin(ALICE, 3, None, method, params, tab))

    def lines(self) -> list[dict[str, Any]]:
        found = [json.loads(x) for x in self.path.read_bytes().splitlines()]
        return sorted(found, key=lambda x: x["seq"])

    def tabs(self) -> list[dict[str, Any]]:
        return [x["tab"] for x in self.lines() if "tab" in x]


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[Watched]:
    async with (
        FakeChromium(target_info("A", "http://a.test/")) as chromium,
        aiohttp.ClientSession() as http,
    ):
        w = Watched(tmp_path, chromium, http)
        running = asyncio.create_task(w.watcher.run())
        try:
            await asyncio.wait_for(w.watcher.connected.wait(), deadline(5))
            yield w
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            w.book.writer.close()


async def test_a_tab_open_at_start_is_known_without_an_event(watched: Watched) -> None:
    await watched.handled()
    assert watched.book.causes.url("A") == "http://a.test/"
    assert watched.lines() == []
    sent = [method for method, _ in watched.chromium.received]
    assert sent[:2] == ["Target.setDiscoverTargets", "Target.getBrowserContexts"]
    discover = watched.chromium.received[0][1]
    assert discover["discover"] is True
    assert {"type": "browser", "exclude": True} in discover["filter"]


async def test_chromiums_target_events_are_tab_lines_each_with_its_cause(
    watched: Watched,
) -> None:
    chromium, book = watched.chromium, watched.book
    click = watched.command(
        "Input.dispatchMouseEvent", {"type": "mousePressed", "x": 1, "y": 2}, "A"
    )
    book.end(Ended(click, True))
    # A popup the click opened, then where it went (a credential in its URL).
    await chromium.event("Target.targetCreated", {"targetInfo": target_info("B", "", opener="A")})
    secret = "https://b.test/cb?code=AUTH-CODE-123&next=1"
    await chromium.event("Target.targetInfoChanged", {"targetInfo": target_info("B", secret)})
    # What is no tab event: a title change, a worker, the browser's own UI.
    await chromium.event(
        "Target.targetInfoChanged", {"targetInfo": target_info("A", "http://a.test/")}
    )
    worker = target_info("W", "http://a.test/sw.js", kind="service_worker")
    await chromium.event("Target.targetCreated", {"targetInfo": worker})
    await chromium.event(
        "Target.targetCreated", {"targetInfo": target_info("UI", "chrome://newtab-footer/")}
    )
    await chromium.event("Target.targetDestroyed", {"targetId": "W"})
    await watched.handled()
    # alice's navigate in flight claims the navigation Chromium reports.
    go = watched.command("Page.navigate", {"url": "http://a.test/next"}, "A")
    await chromium.event(
        "Target.targetInfoChanged", {"targetInfo": target_info("A", "http://a.test/next")}
    )
    await watched.handled()
    book.end(Ended(go, True))
    # alice closes the popup.
    close = watched.command("Target.closeTarget", {"targetId": "B"}, "B")
    await chromium.event("Target.targetDestroyed", {"targetId": "B"})
    await watched.handled()
    book.end(Ended(close, True))

    alice = {"via": "cdp", "who": "alice"}
    assert watched.tabs() == [
        {"event": "opened", "id": "B", "url": "", "by": {"kind": "page", "after": click}},
        {
            "event": "navigated",
            "id": "B",
            "url": "https://b.test/cb?code=REDACTED&next=1",
            "by": {"kind": "page", "after": click},
        },
        {
            "event": "navigated",
            "id": "A",
            "url": "http://a.test/next",
            "by": {"kind": "command", "entry": go, **alice},
        },
        {
            "event": "closed",
            "id": "B",
            "url": "https://b.test/cb?code=REDACTED&next=1",
            "by": {"kind": "command", "entry": close, **alice},
        },
    ]
    assert b"AUTH-CODE-123" not in watched.path.read_bytes()
    assert [x["seq"] for x in watched.lines()] == list(range(1, 8))
    assert watched.watcher.target("W") is None  # gone, and forgotten
    assert watched.watcher.target("UI") == ("page", "chrome://newtab-footer/")


async def test_chromium_exiting_closes_every_tab_by_exit_and_the_watcher_comes_back(
    watched: Watched,
) -> None:
    await watched.chromium.event(
        "Target.targetCreated", {"targetInfo": target_info("C", "http://c.test/")}
    )
    await watched.handled()
    await watched.chromium.drop()
    # Chromium is back (supervisord restarts it) and the watcher connects
    # again: only after it wrote what the exit did (one loop: watch, write, retry).
    await asyncio.wait_for(watched.chromium.connected.wait(), deadline(5))
    lines = watched.lines()
    assert [x["seq"] for x in lines] == [1, 2, 3, 4]
    assert lines[0]["tab"] == {
        "event": "opened",
        "id": "C",
        "url": "http://c.test/",
        "by": {"kind": "page", "after": None},
    }
    assert {(x["tab"]["id"], x["tab"]["event"], x["tab"]["by"]["kind"]) for x in lines[1:3]} == {
        ("A", "closed", "exit"),
        ("C", "closed", "exit"),
    }
    exited = lines[3]["action"]
    assert exited["op"] == BROWSER_EXITED and exited["ok"] is False
    assert "Chromium's connection ended" in exited["error"]
    await asyncio.wait_for(watched.watcher.connected.wait(), deadline(5))
    await watched.chromium.event(
        "Target.targetCreated", {"targetInfo": target_info("D", "http://d.test/")}
    )
    await watched.handled()
    assert watched.tabs()[-1]["id"] == "D" and watched.tabs()[-1]["event"] == "opened"


async def test_a_restarted_relay_closes_the_scopes_opened_before_it(tmp_path: Path) -> None:
    """The open scopes' file lists a scope a relay before this one opened, and
    Chromium holds contexts that relay made: the new relay revokes the
    scope's token before it connects, disposes of every context but the
    default one on its first connection, and closes the scope, on the
    record with why (the recorder, unreachable here, is only asked)."""
    from agentenv.opened import REVOKED, Opened, OpenedScope, digest, forget_all, mint_token

    forget_all()
    token = mint_token()
    settings = computer(tmp_path, max_scopes="2", warm_scopes="0")
    settings.downloads_dir.mkdir(parents=True)
    Opened(settings.scopes_file).write({"left": OpenedScope("left", digest(token), 1.0)})
    async with FakeChromium() as chromium, aiohttp.ClientSession() as http:
        chromium.contexts = ["LEFT-SCOPE", "LEFT-AGENTS"]
        path = tmp_path / "browser-test.jsonl"
        book = Logbook(LogWriter.open(path))
        watcher = Watcher(
            computer(tmp_path, max_scopes="2", warm_scopes="0", chromium_port=str(chromium.port)),
            http,
            book,
        )
        # Revoked at once, before any connection: no door takes the token.
        assert Opened(settings.scopes_file).scope_of(token) is None
        assert watcher.keeper.openings.open["left"].digest == REVOKED
        running = asyncio.create_task(watcher.run())
        try:
            await asyncio.wait_for(watcher.connected.wait(), deadline(5))
            for _ in range(200):
                if not watcher.keeper.left_open:
                    break
                await asyncio.sleep(0.05)
            assert not watcher.keeper.left_open
            assert chromium.contexts == []
            disposed = [
                p["browserContextId"]
                for m, p in chromium.received
                if m == "Target.disposeBrowserContext"
            ]
            assert disposed == ["LEFT-SCOPE", "LEFT-AGENTS"]
            assert Opened(settings.scopes_file).names() == frozenset()
            assert watcher.keeper.openings.was_closed("left")
            lines = [json.loads(x) for x in path.read_bytes().splitlines()]
            closes = [x["action"] for x in lines if x.get("action", {}).get("op") == "scopes/close"]
            assert [c["args"] for c in closes] == [{"scope": "left"}]
            assert "relay restarted" in closes[0]["why"]
            assert token not in path.read_text()
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            book.writer.close()
