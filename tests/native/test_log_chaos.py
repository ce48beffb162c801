"""The relay killed with -9 while agents send commands (the log's numbering and
hash chain carry on, the crash a named break); a second writer."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import aiohttp
import pytest

from agentenv.protocol.chain import GENESIS, log_check
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.stack import NativeStack, missing_tools
from tests.support.timing import deadline, wait_for


@pytest.fixture(scope="module")
def chaos_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    if missing_tools():
        pytest.skip("native stack needs chromium and supervisord: run `make test`")
    with NativeStack(tmp_path_factory.mktemp("chaos")) as running:
        yield running


async def _agent(stack: NativeStack, user: str, stop: asyncio.Event, sent: list[int]) -> None:
    """Send commands until told to stop, reconnecting when the relay dies."""
    while not stop.is_set():
        try:
            url = await asyncio.to_thread(browser_ws_url, stack.relay_http, f"user={user}")
            async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
                cdp = RawCdp(ws)
                while not stop.is_set():
                    await cdp.call("Runtime.evaluate", {"expression": "1"})
                    await cdp.call("Browser.getVersion")
                    sent[0] += 2
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError, KeyError, TypeError):
            await asyncio.sleep(0.05)


async def test_kill_the_relay_mid_traffic(chaos_stack: NativeStack) -> None:
    stack = chaos_stack
    log_file = stack.log_dir / "browser-browser.jsonl"
    stop = asyncio.Event()
    sent = [0]
    agents = [asyncio.create_task(_agent(stack, u, stop, sent)) for u in ("ann", "ben")]
    try:
        await asyncio.to_thread(wait_for, lambda: sent[0] > 200, "traffic before the kill")
        old = stack.pid("relay")
        os.kill(old, signal.SIGKILL)
        before = sent[0]
        await asyncio.to_thread(
            wait_for,
            lambda: stack.pid("relay") not in (old, 0) and stack.ready(),
            "supervisord to restart the relay",
            30,
        )
        await asyncio.to_thread(
            wait_for, lambda: sent[0] > before + 200, "traffic after the restart"
        )
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*agents), deadline(30))

    def whole() -> list[dict[str, object]] | None:
        raw = log_file.read_bytes()
        assert raw.endswith(b"\n"), "a torn last line"
        lines = [json.loads(x) for x in raw.splitlines()]  # every line parses: none torn
        seqs = sorted(int(str(x["seq"])) for x in lines)
        return lines if seqs == list(range(1, len(seqs) + 1)) else None

    lines = await asyncio.to_thread(wait_for, whole, "every number to be a line or a lost line")
    partial = log_file.with_name(log_file.name + ".partial")
    if partial.exists():  # a line torn by the kill was moved aside, whole
        assert partial.read_bytes().startswith(b'{"seq":')
    entries = sorted((int(str(x["seq"])), x["action"]) for x in lines if "action" in x)
    assert len(entries) > 400
    # Numbering carried on: the restarted relay said where it took up the
    # file, past every number the first one took, and wrote entries after it.
    starts = [
        int(line.rsplit("next entry ", 1)[1].rstrip(")"))
        for line in (stack.log_dir / "relay.log").read_text().splitlines()
        if "writing the action log" in line
    ]
    assert len(starts) == 2 and starts[0] == 1 and starts[1] > 200, starts
    assert any(seq >= starts[1] for seq, _ in entries), "no entry after the restart"
    # The hash chain links every line, across the kill, which a break names.
    chain = log_check(log_file.read_bytes().splitlines(), GENESIS)
    assert chain.problems == [], chain.problems
    assert len(chain.breaks) == 1 and "(a crash or a kill)" in chain.breaks[0], chain.breaks


def test_a_second_writer_is_refused(chaos_stack: NativeStack) -> None:
    env = dict(chaos_stack.env, AGENTENV_RELAY_PORT="0")
    done = subprocess.run(
        [sys.executable, "-m", "agentenv.relay"],
        env=env,
        capture_output=True,
        text=True,
        timeout=deadline(30),
    )
    assert done.returncode != 0
    assert "another writer holds" in done.stderr and "browser-browser.jsonl" in done.stderr
