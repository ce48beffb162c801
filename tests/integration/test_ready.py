"""Ready means ready: after any program is killed with ``kill -9``, once
``/readyz`` answers 200, every path works on its first try.

Against the image with users and a control token: each of Chromium, the
relay, the app server and the recorder is killed (SIGKILL, as the kernel's
OOM killer would), supervisord brings it back, the test waits for a new
process and for ``/readyz``, and then at once, with no retry: an MCP tool
call (on the session opened before the kill where the app outlived it, else
a new one), a CDP command, an op, and a recording start through the run's
local store.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
import requests

from agentenv.harness.local_store import LocalStore
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.container import SUPERVISORCTL, Computer, computer
from tests.support.mcp import text
from tests.support.timing import deadline, wait_for


@pytest.fixture(scope="module")
def store(run_store: LocalStore) -> LocalStore:
    return run_store


@pytest.fixture(scope="module")
def pc(image: str, run_network: Any) -> Iterator[Computer]:
    with computer(image, network=run_network) as running:
        yield running


def _pid(pc: Computer, program: str) -> str:
    return pc.exec(*SUPERVISORCTL, "pid", program).strip()


def _ready(pc: Computer) -> bool:
    try:
        return requests.get(pc.app + "/readyz", timeout=5).status_code == 200
    except requests.RequestException:
        return False


@asynccontextmanager
async def _mcp(pc: Computer) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {pc.token('alice')}"}, timeout=deadline(120)
    )
    transport = streamable_http_client(pc.app + "/mcp", http_client=http)
    async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
        yield client


async def _tabs_by_mcp(client: Any) -> str:
    """A tool that needs Playwright MCP's live connection to the browser."""
    title = f"ready-{uuid.uuid4().hex[:6]}"
    done = await client.call_tool(
        "browser_navigate", {"url": f"data:text/html,<title>{title}</title>"}
    )
    assert not done.is_error, text(done)
    assert title in text(done), text(done)
    return text(done)


async def _cdp(pc: Computer) -> None:
    url = browser_ws_url(pc.relay, f"token={pc.token('alice')}")
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        answer = await RawCdp(ws).call("Target.getTargets")
        assert "result" in answer, answer
        assert any(t["type"] == "page" for t in answer["result"]["targetInfos"]), answer


def _recording(pc: Computer, store: LocalStore) -> None:
    key = f"ready-{uuid.uuid4().hex[:8]}/r"
    body: dict[str, Any] = {
        "request_id": uuid.uuid4().hex,
        "upload": store.grant(key, started_here=False),
    }
    started = requests.post(
        f"{pc.app}/v1/browser-recording/start",
        json=body,
        headers=pc.headers(),
        timeout=deadline(60),
    )
    assert started.status_code == 200, started.text[:1000]
    ended = requests.post(
        f"{pc.app}/v1/browser-recording/end",
        json={"recording_id": started.json()["recording_id"]},
        headers=pc.headers(),
        timeout=deadline(60),
    )
    assert ended.status_code == 200, ended.text[:1000]


@pytest.mark.parametrize("program", ["relay", "chromium", "recorder", "app"])
async def test_after_kill_9_every_path_works_on_its_first_try(
    pc: Computer, store: LocalStore, program: str
) -> None:
    async with _mcp(pc) as before:
        await _tabs_by_mcp(before)  # its Playwright MCP is up, on a grant of the relay's
        old = _pid(pc, program)
        pc.exec("kill", "-9", old)
        wait_for(
            lambda: (lambda now: now not in ("", "0", old) and now)(_pid(pc, program)),
            f"supervisord to start {program} again",
            timeout_s=deadline(60),
            interval_s=0.05,
        )
        wait_for(lambda: _ready(pc), "/readyz", timeout_s=deadline(120), interval_s=0.05)
        # At once, each on its first try.
        if program != "app":  # the session outlived the kill: its next call works
            await _tabs_by_mcp(before)
    async with _mcp(pc) as after:  # a new session works at once too
        await _tabs_by_mcp(after)
    await _cdp(pc)
    tabs = pc.op("tabs/list")
    assert tabs and all("id" in t for t in tabs), tabs
    _recording(pc, store)
