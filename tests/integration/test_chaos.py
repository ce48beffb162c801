"""One hostile agent against everyone else (issue 22): against the built
image, started with users and a control token and hardened as compose runs
it, Alice runs one attack at a time while Bob, in a scope of his own, runs a
scripted Playwright scenario (typing a name and a password, a search, a
click, a navigation) inside a recording of his scope. For every attack:

- Bob's scenario succeeds, and his recording has every frame and line:
  no log entry missing, no gap, none of his entries unfinished;
- Alice's attempt is on the record (with the guard's rule where a guard
  refused it);
- nothing restarted: the four programs are the processes they were.

The computer takes a small per-minute log share for Alice's floods to
reach it (2 MiB; Bob's scenario writes far less). Everything else is as
shipped."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests
from playwright.sync_api import sync_playwright

from agentenv.harness.local_store import LocalStore
from agentenv.protocol.chain import recording_problems
from tests.security.attacks import (
    agent,
    browser_url,
    closed_with,
    fill_storage,
    frame,
    raw_socket,
)
from tests.support.container import SITE, SUPERVISORCTL, Computer, computer
from tests.support.mcp import initialize, raw_headers
from tests.support.timing import deadline, wait_for

MIB = 1024 * 1024
#: Bob's password: it must be in no byte the computer writes.
PASSWORD = "chaos-pw-5c1e09"
#: Ports of more origins on the computer (a directory listing each).
EXTRA_PORTS = (8001, 8002, 8003)
#: Evidence an attack left, read from the log lines after it began.
Evidence = Callable[[list[dict[str, Any]]], None]


@pytest.fixture(scope="module")
def pc(image: str, run_network: Any) -> Iterator[Computer]:
    env = {"AGENTENV_LOG_USER_BYTES_PER_MINUTE": str(2 * MIB)}
    with computer(image, env=env, network=run_network) as running:
        running.serve_site()
        for port in EXTRA_PORTS:  # more origins for the storage attack
            running.exec(
                "sh",
                "-c",
                f"setsid python3 -m http.server {port} --bind 127.0.0.1 -d /usr/share "
                ">/dev/null 2>&1 </dev/null &",
            )
        yield running


PROGRAMS = ("chromium", "relay", "app", "recorder")


def _pids(pc: Computer) -> dict[str, str]:
    """Each program's pid, once every one is running (bounded): an attack
    that failed restarts programs, and the next attack starts from a whole
    computer, so only the attack that did it fails."""

    def running() -> bool:
        rows = pc.container.get_wrapped_container().exec_run([*SUPERVISORCTL, "status"])
        states = [line.split()[:2] for line in rows.output.decode(errors="replace").splitlines()]
        return all([name, "RUNNING"] in states for name in PROGRAMS)

    wait_for(running, "every program of the computer to run", timeout_s=60)
    return {name: pc.exec(*SUPERVISORCTL, "pid", name).strip() for name in PROGRAMS}


def _scenario(pc: Computer) -> None:
    """Bob's Playwright: a name, a password, a search, a click, a navigation."""
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(browser_url(pc, "bob"), timeout=deadline(60) * 1000)
        try:
            page = browser.contexts[0].new_page()
            page.set_default_timeout(deadline(60) * 1000)
            page.goto(f"{SITE}/")
            page.fill("#user", "bob")
            page.type("#password", PASSWORD)
            page.fill("#search", "chaos")
            page.click("#go")
            assert page.text_content("#out") == "clicked:chaos"
            page.click("#next")
            page.wait_for_url(f"{SITE}/next")
            assert page.title() == "Next"
            page.close()
        finally:
            browser.close()


# -- the attacks: Alice's, each an asyncio function, and what it leaves ------


def _memory_lines(lines: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [
        x["action"]
        for x in lines
        if (x.get("action", {}).get("guard") or {}) == {"rule": "memory", "action": action}
        and x["action"].get("who") == "alice"
    ]


async def _huge_messages(pc: Computer) -> None:
    """Six connections, each sending a 200 MB message (the red team's)."""
    for _ in range(6):
        reader, writer = await raw_socket(browser_url(pc, "alice"))
        head = bytes([0x81, 0x80 | 127]) + (200 * MIB).to_bytes(8, "big") + b"\0\0\0\0"
        writer.write(head + b'{"id":1,"method":"Runtime.evaluate","params":{"expression":"')
        try:
            for _ in range(16):
                writer.write(b"x" * MIB)
                await writer.drain()
        except ConnectionError:
            pass
        assert await closed_with(reader) in (1009, 0)
        writer.close()


def _huge_messages_left(lines: list[dict[str, Any]]) -> None:
    refused = _memory_lines(lines, "disconnected")
    assert len(refused) >= 6, refused
    assert all("AGENTENV_AGENT_MESSAGE_BYTES" in x["error"] for x in refused), refused


async def _messages_in_parts(pc: Computer) -> None:
    """Three connections each holding 30 MiB of a message never finished."""
    writers = []
    try:
        for n in range(3):
            reader, writer = await raw_socket(browser_url(pc, "alice"))
            writers.append(writer)
            writer.write(frame(0x1, b'{"id":1,"method":"Runtime.evaluate","params":{"e":"', False))
            try:
                for _ in range(30):
                    writer.write(frame(0x0, b"x" * MIB, False))
                    await writer.drain()
            except ConnectionError:
                assert n == 2, "only the third goes past Alice's share"
        assert await closed_with(reader) in (1009, 0)
    finally:
        for writer in writers:
            writer.close()


def _messages_in_parts_left(lines: list[dict[str, Any]]) -> None:
    refused = _memory_lines(lines, "disconnected")
    assert refused and "AGENTENV_USER_INFLIGHT_BYTES" in refused[-1]["error"], refused


async def _big_answer(pc: Computer) -> None:
    """An 80 MB answer asked of Chromium."""
    async with agent(pc, "alice") as alice:
        _, session = await alice.page("about:blank")
        big = {"expression": "'q'.repeat(80 * 1024 * 1024)", "returnByValue": True}
        with pytest.raises(AssertionError, match="1009"):
            await alice.call("Runtime.evaluate", big, session)


def _big_answer_left(lines: list[dict[str, Any]]) -> None:
    assert _memory_lines(lines, "disconnected"), "no memory line for the big answer"


async def _unused_params(pc: Computer) -> None:
    """Commands carrying 2,000 unused parameters of 2 KB each (4 MB)."""
    params: dict[str, Any] = {f"u{i}": "p" * 2048 for i in range(2000)}
    params["expression"] = "1 + 1"
    async with agent(pc, "alice") as alice:
        _, session = await alice.page("about:blank")
        for _ in range(40):
            answer = await alice.call("Runtime.evaluate", params, session)
            assert "result" in answer or "log-budget" in str(answer), str(answer)[:300]


def _unused_params_left(lines: list[dict[str, Any]]) -> None:
    kept = [
        x["action"]
        for x in lines
        if x.get("action", {}).get("who") == "alice"
        and (x["action"].get("params") or {}).get("unused")
    ]
    assert kept and kept[0]["params"]["unused"]["count"] == 2000, kept[:1]
    assert max(len(json.dumps(x)) for x in kept) < 4096  # their size, not their bytes


async def _pipelined(pc: Computer) -> None:
    """10,000 commands sent without waiting: each answered, or refused past
    Alice's share of the log this minute."""
    expression = "'" + "z" * 1500 + "'.length"  # kept whole: under 2 KB
    async with agent(pc, "alice") as alice:
        _, session = await alice.page("about:blank")
        for n in range(10_000):
            await alice.ws.send_json(
                {
                    "id": n + 1000,
                    "method": "Runtime.evaluate",
                    "params": {"expression": expression},
                    "sessionId": session,
                }
            )
        answered = 0
        while answered < 10_000:
            got = await alice.ws.receive_json(timeout=deadline(60))
            answered += "id" in got


def _pipelined_left(lines: list[dict[str, Any]]) -> None:
    budget = [
        x["action"]
        for x in lines
        if (x.get("action", {}).get("guard") or {}).get("rule") == "log-budget"
        and x["action"].get("who") == "alice"
    ]
    assert budget, "Alice's flood never reached her share of the log"


async def _mcp_sessions(pc: Computer) -> None:
    """Bare MCP initialize calls, never used: past 16, 429, and Bob's go on."""
    async with aiohttp.ClientSession() as http:

        async def open_one(token: str) -> int:
            async with http.post(
                pc.app + "/mcp", json=initialize("chaos"), headers=raw_headers(token)
            ) as answer:
                return answer.status

        statuses = [await open_one(pc.token("alice")) for _ in range(200)]
        assert statuses.count(429) >= 150, statuses
        assert await open_one(pc.token("bob")) == 200


def _mcp_sessions_left(lines: list[dict[str, Any]]) -> None:
    refused = [
        x["action"]
        for x in lines
        if (x.get("action", {}).get("guard") or {}).get("rule") == "mcp-sessions"
        and x["action"].get("who") == "alice"
    ]
    # Once a minute, however many: the flood writes no more than that.
    assert len(refused) == 1, refused
    assert "AGENTENV_MCP_TRANSPORTS_PER_CALLER" in refused[0]["error"], refused


async def _storage(pc: Computer) -> None:
    """Five origins' IndexedDB filled (the red team's two, and more): each
    is refused past its quota, and all together past the scope's."""
    others = [f"http://127.0.0.1:{port}" for port in EXTRA_PORTS]
    async with agent(pc, "alice") as alice:
        for site in (SITE, SITE.replace("127.0.0.1", "localhost"), *others):
            _, session = await alice.page(site + "/")
            filled = json.loads(await alice.evaluate(session, fill_storage(most=200)))
            assert filled.get("error") == "QuotaExceededError", (site, filled)
        # The watcher reads each origin's use every 5 s: the pages stay open
        # until it has put an origin at its quota on the record.
        end = time.monotonic() + deadline(20)
        while not _at_quota(pc.log()[0]):
            assert time.monotonic() < end, "no origin at its quota on the record"
            await asyncio.sleep(0.5)


def _at_quota(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        x["action"]
        for x in lines
        if (x.get("action", {}).get("guard") or {}).get("rule") == "storage-quota"
    ]


def _storage_left(lines: list[dict[str, Any]]) -> None:
    """Chromium refuses the writes (the relay does not see them): the
    watcher puts each origin at its quota on the record, with its scope."""
    told = _at_quota(lines)
    assert told and all(x.get("scope") and x.get("origin") for x in told), told
    assert "QuotaExceededError" in told[0]["error"], told


#: Set when Bob's scenario has run (an attack that holds something open
#: through it waits for this, not for a time).
_SCENARIO_OVER = threading.Event()


async def _never_answered(pc: Computer) -> None:
    """A command Chromium never answers, held open through Bob's scenario."""
    async with agent(pc, "alice") as alice:
        _, session = await alice.page("about:blank")
        forever = {"expression": "new Promise(() => {})", "awaitPromise": True}
        await alice.ws.send_json(
            {"id": 99, "method": "Runtime.evaluate", "params": forever, "sessionId": session}
        )
        over = await asyncio.to_thread(_SCENARIO_OVER.wait, deadline(180))
        assert over, "Bob's scenario did not end"


def _never_answered_left(lines: list[dict[str, Any]]) -> None:
    """Its entry ends when Alice leaves, unanswered."""


async def _page_memory(pc: Computer) -> None:
    """Alice's own page takes memory until it dies (a page can; the crash
    commands are refused): her tab's renderer goes, the computer does not.
    Page.crash, asked first, is refused."""
    async with agent(pc, "alice") as alice:
        _, session = await alice.page(SITE + "/")
        refused = await alice.call("Page.crash", {}, session)
        assert "not-allowed" in str(refused), refused
        bomb = "const a = []; for (;;) a.push(new Array(1 << 22).fill(1.5));"
        await alice.ws.send_json(
            {
                "id": 88,
                "method": "Runtime.evaluate",
                "params": {"expression": bomb},
                "sessionId": session,
            }
        )
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline(90)
        while loop.time() < end:
            got = await alice.ws.receive_json(timeout=deadline(90))
            if got.get("method") in ("Inspector.targetCrashed", "Target.detachedFromTarget"):
                return
            if got.get("id") == 88:
                assert "error" in got, got  # no result: the renderer died under it
                return
        raise AssertionError("Alice's page never ran out of memory")


#: A page that makes Blobs of 64 MiB, kept, until Chromium refuses one: they
#: live in the browser process (up to 2 GiB a scope, Chromium's constant).
#: A Blob read from a stream first makes Chromium size its limits at once.
BLOBS = """(async () => {
  window.kept = window.kept || [];
  await (await fetch(location.href)).blob();
  let refused = null;
  for (let i = 0; i < 64 && !refused; i++) {
    const blob = new Blob([new Uint8Array(64 << 20).fill(i & 255)]);
    try { await blob.slice(0, 1).arrayBuffer(); window.kept.push(blob); }
    catch (e) { refused = String(e); }
  }
  return JSON.stringify({blobs: window.kept.length, refused});
})()"""
#: ArrayBuffers of 64 MiB, kept, until the page cannot have another: memory
#: outside the V8 heap.
BUFFERS = """(() => {
  window.held = window.held || [];
  try { for (;;) window.held.push(new Uint8Array(64 << 20).fill(7)); }
  catch (e) { return JSON.stringify({buffers: window.held.length, refused: String(e)}); }
})()"""


async def _until_it_dies(alice: Any, session: str, expression: str) -> str:
    """``expression`` run in the page until it ends: ``"died"`` (its renderer
    gone), ``"answered"``, or ``"hung"``: nothing heard from the tab within
    the bound (a renderer at its memory limit can spend minutes collecting
    garbage; that is Alice's own tab, and she closes it)."""
    ask = next(alice.ids)
    await alice.ws.send_json(
        {
            "id": ask,
            "method": "Runtime.evaluate",
            "params": {"expression": expression, "returnByValue": True},
            "sessionId": session,
        }
    )
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(120)
    while loop.time() < end:
        try:
            got = await alice.ws.receive_json(timeout=max(0.1, end - loop.time()))
        except TimeoutError:
            break
        died = got.get("method") in ("Inspector.targetCrashed", "Target.detachedFromTarget")
        if died and got.get("sessionId", got.get("params", {}).get("sessionId")) == session:
            return "died"
        if got.get("id") == ask:
            return "died" if "error" in got else "answered"  # an error: it died under it
    tabs = await alice.call("Target.getTargets")
    for info in tabs["result"]["targetInfos"]:
        if info["type"] == "page" and info.get("attached"):
            await alice.call("Target.closeTarget", {"targetId": info["targetId"]})
    return "hung"


async def _blobs_made(alice: Any, session: str) -> dict[str, Any]:
    """:data:`BLOBS` run in the page: 2 GiB through the browser's IPC takes
    past an ordinary call's 30 s on a loaded machine (bounded at 120 s)."""
    ask = next(alice.ids)
    await alice.ws.send_json(
        {
            "id": ask,
            "method": "Runtime.evaluate",
            "params": {"expression": BLOBS, "returnByValue": True, "awaitPromise": True},
            "sessionId": session,
        }
    )
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(120)
    while loop.time() < end:
        got = await alice.ws.receive_json(timeout=max(0.1, end - loop.time()))
        if got.get("id") == ask:
            return dict(json.loads(got["result"]["result"]["value"]))
    raise AssertionError("the Blobs were not made within the bound")


async def _blobs(pc: Computer) -> None:
    """The red team's: Blobs until refused (2 GiB in the browser process),
    then the page's heap until the tab dies. Only Alice's tab goes; the
    browser, and with it every other tab, stays."""
    async with agent(pc, "alice") as alice:
        _, session = await alice.page(SITE + "/")
        made = await _blobs_made(alice, session)
        assert made["blobs"] >= 7, made  # 448 MiB at least (Chromium's limit before sizing)
        bomb = "const a = []; for (;;) a.push(new Array(1 << 22).fill(1.5));"
        ended = await _until_it_dies(alice, session, bomb)
        assert ended == "died", f"Alice's tab outlived its heap: {ended}"


async def _blobs_and_buffers(pc: Computer) -> None:
    """Blobs until refused, then ArrayBuffers (outside the V8 heap) in that
    tab and in a second one, until the container is at its limit: the
    kernel kills a tab of Alice's, the largest, never the browser."""
    async with agent(pc, "alice") as alice:
        _, first = await alice.page(SITE + "/")
        made = await _blobs_made(alice, first)
        assert made["blobs"] >= 7, made
        # Each tab dies, answers (no more memory for it) or hangs in its
        # collector: all Alice's own; Bob's run and the browser are the test.
        await _until_it_dies(alice, first, BUFFERS)
        _, second = await alice.page(SITE + "/?second")
        await _until_it_dies(alice, second, BUFFERS)


def _blobs_left(lines: list[dict[str, Any]]) -> None:
    """Alice's Blobs are on the record, her command's words whole."""
    made = [
        x["action"]
        for x in lines
        if x.get("action", {}).get("who") == "alice"
        and "new Blob(" in str((x["action"].get("params") or {}).get("expression"))
    ]
    assert made, "Alice's Blobs are not on the record"


def _page_memory_left(lines: list[dict[str, Any]]) -> None:
    refused = [
        x["action"]
        for x in lines
        if x.get("action", {}).get("method") == "Page.crash"
        and (x["action"].get("guard") or {}).get("rule") == "not-allowed"
    ]
    assert refused, "Page.crash's refusal is not on the record"


ATTACKS: dict[str, tuple[Callable[[Computer], Coroutine[Any, Any, None]], Evidence]] = {
    "huge-messages": (_huge_messages, _huge_messages_left),
    "messages-in-parts": (_messages_in_parts, _messages_in_parts_left),
    "big-answer": (_big_answer, _big_answer_left),
    "unused-params": (_unused_params, _unused_params_left),
    "mcp-sessions": (_mcp_sessions, _mcp_sessions_left),
    "storage": (_storage, _storage_left),
    "never-answered": (_never_answered, _never_answered_left),
    "page-memory": (_page_memory, _page_memory_left),
    "blobs": (_blobs, _blobs_left),
    "blobs-and-buffers": (_blobs_and_buffers, _blobs_left),
    # Last: it spends Alice's share of the log for the minute.
    "pipelined": (_pipelined, _pipelined_left),
}


def _under_way(pc: Computer, before: int, thread: threading.Thread) -> None:
    """The attack is under way before Bob begins: Alice holds a connection or
    an MCP session (Bob holds none yet), or has a line on the record, or the
    attack is already over."""

    def seen() -> bool:
        lines = pc.op("log", {"after": before, "limit": 100})["lines"]
        if not thread.is_alive() or any(x.get("action", {}).get("who") == "alice" for x in lines):
            return True
        text = requests.get(pc.app + "/metrics", headers=pc.headers(None), timeout=10).text
        return any(
            line.split()[-1] not in ("0", "0.0")
            for line in text.splitlines()
            if line.startswith(('agentenv_cdp_connections{kind="agent"}', "agentenv_mcp_sessions "))
        )

    wait_for(lambda: seen() or None, "the attack under way", timeout_s=30)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_one_hostile_agent_stops_no_one_else(
    pc: Computer, run_store: LocalStore, tmp_path: Path, attack: str
) -> None:
    run, left = ATTACKS[attack]
    pids = _pids(pc)
    before = pc.log()[1]
    key = f"chaos-{uuid.uuid4().hex[:8]}/{attack}"
    started = pc.recording(
        "start",
        {
            "request_id": uuid.uuid4().hex,
            "upload": run_store.grant(key, started_here=False),
            "scope": "bob",
        },
    )["recording_id"]
    failed: list[str] = []

    def hostile() -> None:
        try:
            asyncio.run(run(pc))
        except BaseException:  # reported below, where it was, with Bob's outcome
            failed.append(traceback.format_exc(limit=-4))

    _SCENARIO_OVER.clear()
    thread = threading.Thread(target=hostile, daemon=True)
    thread.start()
    _under_way(pc, before, thread)
    try:
        _scenario(pc)
    finally:
        _SCENARIO_OVER.set()
    manifest = pc.recording(
        "end",
        {"recording_id": started, "upload": run_store.grant(key, started_here=False)},
    )
    thread.join(deadline(180))
    assert not thread.is_alive(), f"{attack} did not end"
    assert not failed, f"{attack}: {failed[0]}"
    # Bob's record is whole.
    assert manifest["scope"] == "bob" and manifest["log_missing"] == [], manifest
    missing = [f for f in manifest["frames"] if f.get("error")]
    assert manifest.get("gaps", []) == [] and manifest["missing_frames"] == 0, (missing, manifest)
    names, skipped = run_store.fetch(key, started, tmp_path)
    assert skipped == [] and "log.jsonl" in names, names
    slice_ = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    bobs = [x["action"] for x in slice_ if x.get("action", {}).get("who") == "bob"]
    assert len(bobs) > 10, bobs
    assert not [x for x in bobs if x.get("unfinished") or x.get("ok") is None], bobs
    assert {x.get("scope") for x in bobs} == {"bob"}
    assert any(x.get("method") == "Page.navigate" for x in bobs), bobs

    # It verifies on the log's hash chain, across alice's flood by hashes alone.
    def read(name: str) -> bytes | None:
        return (tmp_path / name).read_bytes() if (tmp_path / name).is_file() else None

    assert recording_problems(read, manifest) == []
    # Alice's attempt is on the record; nothing restarted; no secret written.
    lines = wait_for(
        lambda: (lambda got: got if got[1] > before else None)(pc.log(before)),
        "the attack's lines",
        timeout_s=30,
    )[0]
    left(lines)
    assert _pids(pc) == pids, f"{attack} restarted a program"
    exited = [x for x in lines if x.get("action", {}).get("op") == "browser/exited"]
    assert not exited, f"{attack} took Chromium down: {exited}"
    assert PASSWORD.encode() not in pc.all_log_bytes()
    assert PASSWORD.encode() not in (tmp_path / "log.jsonl").read_bytes()
