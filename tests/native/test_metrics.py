"""``/metrics`` (Prometheus' text format), ``AGENTENV_MAX_CONNECTIONS`` and
the queue past it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import wait_for

CONTROL = "metrics-control-token-12"
READER = "metrics-reader-token-34"


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    """A computer taking two agent connections at once, one more waiting for
    at most 3 s, with a control token."""
    env = {
        "AGENTENV_MAX_CONNECTIONS": "2",
        # Below the computer's two (one user's share may not hold every place).
        "AGENTENV_MAX_CONNECTIONS_PER_USER": "1",
        "AGENTENV_QUEUE_LENGTH": "1",
        "AGENTENV_QUEUE_WAIT_S": "3",
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "AGENTENV_METRICS_TOKEN": READER,
        "AGENTENV_USERS": "alice:alice-token-1,bob:bob-token-2,carol:carol-token-3",
    }
    with NativeStack(tmp_path_factory.mktemp("limited"), extra_env=env) as stack:
        yield stack


def _samples(stack: NativeStack) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = requests.get(
        stack.app_http + "/metrics", headers={"Authorization": f"Bearer {CONTROL}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "not answering" not in answer.text, answer.text
    out = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _ws(stack: NativeStack, token: str) -> str:
    return browser_ws_url(stack.relay_http, f"token={token}")


def test_metrics_take_the_control_token(limited: NativeStack) -> None:
    for headers in ({}, {"Authorization": "Bearer alice-token-1"}):
        refused = requests.get(limited.app_http + "/metrics", headers=headers, timeout=30)
        assert refused.status_code in (401, 403), refused.status_code
    relay = requests.get(
        limited.relay_http + "/metrics",
        headers={"Authorization": "Bearer alice-token-1"},
        timeout=30,
    )
    assert relay.status_code == 403 and "app's /metrics" in relay.text


def test_the_metrics_token_reads_metrics_and_nothing_else(limited: NativeStack) -> None:
    """What a fleet's Prometheus holds (AGENTENV_METRICS_TOKEN) instead of the
    control token, which could do anything on every computer."""
    reader = {"Authorization": f"Bearer {READER}"}
    read = requests.get(limited.app_http + "/metrics", headers=reader, timeout=30)
    assert read.status_code == 200 and "agentenv_cdp_queue_length" in read.text, read.text[:300]
    assert "not answering" not in read.text
    for path in ("/v1/browser/tabs/list", "/v1/browser/data/reset", "/v1/browser-recording/end"):
        op = requests.post(limited.app_http + path, json={}, headers=reader, timeout=30)
        assert op.status_code == 401, (path, op.status_code, op.text)
    mcp = requests.post(limited.app_http + "/mcp", json={}, headers=reader, timeout=30)
    assert mcp.status_code == 401, mcp.status_code
    relay = requests.get(limited.relay_http + "/json/list", headers=reader, timeout=30)
    assert relay.status_code == 401, relay.status_code

    async def connect() -> int:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
                await http.ws_connect(_ws(limited, READER))
            return caught.value.status

    assert asyncio.run(connect()) == 401


def test_counts_move_with_what_agents_do(limited: NativeStack, site: Site, tmp_path: Path) -> None:
    before = _samples(limited)
    tab = requests.post(
        limited.app_http + "/v1/browser/tabs/open",
        json={"url": site.url + "/"},
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=30,
    ).json()["id"]
    recording = requests.post(
        limited.app_http + "/v1/browser-recording/start",
        json={"request_id": uuid.uuid4().hex, "upload": {"url": f"file://{tmp_path}"}},
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=60,
    ).json()["recording_id"]

    async def agent() -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(_ws(limited, "alice-token-1")) as ws,
        ):
            cdp = RawCdp(ws)
            during = _samples(limited)
            assert during[("agentenv_cdp_connections", (("kind", "agent"),))] == 1
            session = (await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True}))[
                "result"
            ]["sessionId"]
            await cdp.call("Runtime.evaluate", {"expression": "1"}, sessionId=session)
            blocked = await cdp.call(
                "Page.navigate", {"url": "file:///etc/passwd"}, sessionId=session
            )
            assert "error" in blocked

    asyncio.run(agent())
    wait_for(lambda: (tmp_path / recording / "frames").is_dir(), "a frame")
    requests.post(
        limited.app_http + "/v1/browser-recording/end",
        json={"recording_id": recording},
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=60,
    ).raise_for_status()
    after = _samples(limited)

    def moved(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert moved("agentenv_cdp_commands_total", acts="acting") >= 1
    assert moved("agentenv_cdp_commands_total", acts="reading") >= 1
    assert moved("agentenv_guard_refusals_total", rule="local-url") == 1
    assert moved("agentenv_frames_total", kind="first") == 1
    assert moved("agentenv_frames_total", kind="last") == 1
    assert moved("agentenv_log_lines_total") >= 4
    assert after[("agentenv_cdp_connections", (("kind", "agent"),))] == 0
    assert after[("agentenv_recordings_open", ())] == 0
    assert ("agentenv_mcp_sessions", ()) in after
    # When the relay and the app started: a batch on scopes sees either restart.
    for started in ("agentenv_relay_start_time_seconds", "agentenv_app_start_time_seconds"):
        assert after[(started, ())] == before[(started, ())] > 0


def test_agent_connections_past_the_limit_wait_in_the_queue_then_get_429(
    limited: NativeStack,
) -> None:
    upgrade = {
        "Authorization": "Bearer carol-token-3",
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }

    async def run() -> None:
        async with aiohttp.ClientSession() as http:
            first = await http.ws_connect(_ws(limited, "alice-token-1"))
            second = await http.ws_connect(_ws(limited, "bob-token-2"))
            # The third waits; while it does, the queue (one place) is full.
            waiting = asyncio.ensure_future(http.ws_connect(_ws(limited, "carol-token-3")))
            await asyncio.to_thread(
                wait_for,
                lambda: _samples(limited)[("agentenv_cdp_queue_length", ())] == 1,
                "the third connection in the queue",
            )
            async with http.get(limited.relay_http + "/devtools/browser", headers=upgrade) as full:
                body = await full.json()
                assert full.status == 429, body
                assert 1 <= int(full.headers["Retry-After"]) <= 3, full.headers
                said = body["error"]["message"]
                assert "all 2 agent connections are taken (AGENTENV_MAX_CONNECTIONS)" in said
                assert "the queue is full (AGENTENV_QUEUE_LENGTH 1" in said
            # Its wait runs out: 429 too.
            with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
                await asyncio.wait_for(waiting, 30)
            assert caught.value.status == 429
            assert caught.value.headers is not None
            assert int(caught.value.headers["Retry-After"]) >= 1
            # The computer's own connections are not counted: its ops still work.
            listed = requests.post(
                limited.app_http + "/v1/browser/tabs/list",
                json={},
                headers={"Authorization": f"Bearer {CONTROL}"},
                timeout=30,
            )
            assert listed.status_code == 200
            # One waiting is let in as soon as a place frees.
            waiting = asyncio.ensure_future(http.ws_connect(_ws(limited, "carol-token-3")))
            await asyncio.to_thread(
                wait_for,
                lambda: _samples(limited)[("agentenv_cdp_queue_length", ())] == 1,
                "the third connection in the queue again",
            )
            assert _samples(limited)[("agentenv_cdp_queue_oldest_wait_seconds", ())] >= 0
            await first.close()
            third = await asyncio.wait_for(waiting, 30)
            await third.send_json({"id": 1, "method": "Browser.getVersion"})
            assert "result" in await third.receive_json(timeout=30)
            await third.close()
            await second.close()

    asyncio.run(run())
    samples = _samples(limited)
    assert samples[("agentenv_cdp_connections_refused_total", ())] >= 2
    assert samples[("agentenv_cdp_connections_capacity", ())] == 2
    assert samples[("agentenv_cdp_queue_length", ())] == 0
