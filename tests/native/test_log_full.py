"""``AGENTENV_LOG_MAX_BYTES``: an agent flooding the log cannot fill the disk.

Past the limit, agents' commands and ops are refused at once with a clear
error (what is not written is not done), the connection stays open, and the
log stops growing; the computer's own reads and its bookkeeping go on.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests

from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.site import Site
from tests.support.stack import NativeStack

CONTROL = "full-control-token-31"
ALICE = "alice-token-full-1"
LIMIT = 60_000


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    env = {
        "AGENTENV_LOG_MAX_BYTES": str(LIMIT),
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "AGENTENV_USERS": f"alice:{ALICE}",
    }
    with NativeStack(tmp_path_factory.mktemp("small-log"), extra_env=env) as stack:
        yield stack


def _op(stack: NativeStack, op: str, body: dict[str, Any], token: str) -> requests.Response:
    return requests.post(
        f"{stack.app_http}/v1/{op}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def test_a_full_log_refuses_agents_and_stops_growing(
    small: NativeStack, site: Site, tmp_path: Path
) -> None:
    tab = _op(small, "browser/tabs/open", {"url": site.url + "/"}, CONTROL).json()["id"]
    log = small.log_dir / "browser-browser.jsonl"

    async def flood() -> tuple[int, str, str]:
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(browser_ws_url(small.relay_http, f"token={ALICE}")) as ws,
        ):
            cdp = RawCdp(ws)
            attached = await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
            session = attached["result"]["sessionId"]
            long = "'" + "x" * 1900 + "'"
            for sent in range(1, 200):
                answer = await cdp.call("Runtime.evaluate", {"expression": long}, sessionId=session)
                if "error" in answer:
                    again = await cdp.call(
                        "Runtime.evaluate", {"expression": "1"}, sessionId=session
                    )
                    return sent, answer["error"]["message"], again["error"]["message"]
            raise AssertionError("200 commands of 2 KB each and the log never said it was full")

    sent, refused, again = asyncio.run(flood())
    assert sent > 20  # it took a flood: the limit is the log's size, not a count
    assert "action log is full (AGENTENV_LOG_MAX_BYTES=60000)" in refused, refused
    assert again == refused  # the connection stays open; each command is answered at once
    size = log.stat().st_size
    assert LIMIT <= size < LIMIT + 10_000, size
    # An agent's op is refused too, saying why; nothing more is written for it.
    navigate = _op(small, "browser/navigate", {"url": site.url + "/?late=1"}, ALICE)
    assert navigate.status_code >= 400 and "action log is full" in navigate.text, navigate.text
    assert log.stat().st_size == size
    # The computer's own reads go on: the log itself, a recording's frames.
    read = _op(small, "browser/log", {"after": 0, "limit": 5}, CONTROL)
    assert read.status_code == 200 and len(read.json()["lines"]) == 5
    started = _op(
        small,
        "browser-recording/start",
        {"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{tmp_path}"}},
        CONTROL,
    )
    assert started.status_code == 200, started.text
    ended = _op(
        small, "browser-recording/end", {"recording_id": started.json()["recording_id"]}, CONTROL
    )
    assert ended.status_code == 200, ended.text
    metrics = requests.get(
        small.app_http + "/metrics", headers={"Authorization": f"Bearer {CONTROL}"}, timeout=30
    ).text
    assert "agentenv_log_full_refusals_total 2.0" in metrics, metrics
    [size_line] = [x for x in metrics.splitlines() if x.startswith("agentenv_log_bytes ")]
    assert float(size_line.split()[1]) >= LIMIT
