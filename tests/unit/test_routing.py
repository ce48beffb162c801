"""The three servers' routing and refusals as a client sees them, each app
served in-process (aiohttp's test server) with no Chromium behind it: the
relay's watcher keeps retrying, the app's and the recorder's links to the
relay connect only on first use. The last tests put a stand-in Chromium
(:mod:`tests.support.fake_chromium`) behind the relay.

Every refusal is the one error body, ``{"error": {"code", "message"}}``
(agentenv.http), with a message saying what to do next and never echoing a
token or the caller's own ``Host``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agentenv.app.app_server import make_app as make_app_server
from agentenv.app.optable import all_ops
from agentenv.log.writer import LogWriter
from agentenv.recorder.recorder_server import make_app as make_recorder
from agentenv.relay.relay_requests import watcher_key
from agentenv.relay.relay_server import make_app as make_relay
from agentenv.settings import Settings
from tests.support.fake_chromium import FakeChromium, target_info
from tests.support.servers import ALICE_TOKEN, CONTROL_TOKEN, Client, computer, serving
from tests.support.timing import deadline

MiB = 1024 * 1024
CONTROL = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
ALICE = {"Authorization": f"Bearer {ALICE_TOKEN}"}
SERVERS: dict[str, Callable[[Settings], web.Application]] = {
    "relay": make_relay,
    "app": make_app_server,
    "recorder": make_recorder,
}


async def refusal(answer: aiohttp.ClientResponse) -> str:
    """The error body's message, checked to be the one shape every server answers."""
    assert answer.content_type == "application/json"
    body = await answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == answer.status
    message: str = body["error"]["message"]
    assert message
    return message


@asynccontextmanager
async def served(server: str, settings: Settings) -> AsyncIterator[Client]:
    """``server``'s app for ``settings``, served (and stopped at any moment:
    an app server stopped as its boot check of Playwright MCP's runtime ends
    must not wait out its cleanup, app/mcp_loader.serve_mcp)."""
    app = SERVERS[server](settings)
    async with serving(app) as client:
        yield client


def log_lines(settings: Settings) -> list[dict[str, Any]]:
    path = settings.log_file
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_bytes().splitlines()]


@pytest.fixture
async def relay(tmp_path: Path) -> AsyncIterator[Client]:
    async with served("relay", computer(tmp_path)) as client:
        yield client


@pytest.fixture
async def app_server(tmp_path: Path) -> AsyncIterator[Client]:
    async with served("app", computer(tmp_path)) as client:
        yield client


@pytest.fixture
async def recorder(tmp_path: Path) -> AsyncIterator[Client]:
    async with served("recorder", computer(tmp_path)) as client:
        yield client


# -- what the three share ---------------------------------------------------------

UNKNOWN_PATH = {
    "relay": "/json/version, /json/list, /json, /json/protocol, /json/new?<url>",
    "app": "/card, /healthz, /readyz, /mcp, /live, /playwright, /metrics, /v1/browser/tabs/list",
    "recorder": "/start, /end, /end_all, /healthz, /metrics",
}


@pytest.mark.parametrize("server", SERVERS)
async def test_an_unknown_path_is_404_naming_the_paths_the_server_has(
    tmp_path: Path, server: str
) -> None:
    async with served(server, computer(tmp_path)) as client:
        answer = await client.get("/no/such/thing", headers=CONTROL)
        assert answer.status == 404
        message = await refusal(answer)
    assert message.startswith("no such path here; this server has ")
    assert UNKNOWN_PATH[server] in message


#: A path each server has, a method it does not take there, and those it does.
WRONG_METHOD = {
    "relay": ("POST", "/json/version", "GET, HEAD"),
    "app": ("GET", "/v1/browser/log", "POST"),
    "recorder": ("GET", "/start", "POST"),
}


@pytest.mark.parametrize("server", SERVERS)
async def test_a_method_the_path_does_not_take_is_405_naming_those_it_does(
    tmp_path: Path, server: str
) -> None:
    method, path, allowed = WRONG_METHOD[server]
    async with served(server, computer(tmp_path)) as client:
        answer = await client.request(method, path, headers=CONTROL)
        assert answer.status == 405
        assert await refusal(answer) == f"{method} is not allowed here; use {allowed}"


@pytest.mark.parametrize("server", SERVERS)
async def test_a_405_says_in_its_allow_header_which_methods_the_path_takes(
    tmp_path: Path, server: str
) -> None:
    method, path, allowed = WRONG_METHOD[server]
    async with served(server, computer(tmp_path)) as client:
        answer = await client.request(method, path, headers=CONTROL)
        assert answer.status == 405
        assert answer.headers.get("Allow") == allowed


# -- the relay ----------------------------------------------------------------


async def test_get_json_new_is_refused_405_allow_put_and_opens_nothing(
    tmp_path: Path,
) -> None:
    settings = computer(tmp_path)
    async with served("relay", settings) as relay:
        for method in ("GET", "HEAD"):
            answer = await relay.request(method, "/json/new?http://example.test/", headers=ALICE)
            assert answer.status == 405
            assert answer.headers["Allow"] == "PUT"
        answer = await relay.get("/json/new?http://example.test/", headers=ALICE)
        message = await refusal(answer)
    assert "send PUT /json/new?<url>" in message
    assert log_lines(settings) == []  # no entry: nothing was attempted


async def test_discovery_needs_a_known_token_but_json_version_answers_without_one(
    relay: Client,
) -> None:
    bare = await relay.get("/json/list")
    assert bare.status == 401
    assert (await refusal(bare)).startswith("a token is required: send 'Authorization: Bearer")
    wrong = await relay.get("/json/list", headers={"Authorization": "Bearer not-a-known-token"})
    assert wrong.status == 401
    message = await refusal(wrong)
    assert message.startswith("unknown token") and "not-a-known-token" not in message
    query = await relay.get("/json/list?token=not-a-known-token")
    assert query.status == 401
    # /json/version is open: past the token check, it meets Chromium's absence.
    version = await relay.get("/json/version")
    assert version.status == 503
    assert "Chromium is not answering" in await refusal(version)


@pytest.mark.parametrize(
    "path",
    ["/json/version", "/json/version/", "/json/list", "/json", "/json/protocol", "/json/list/"],
)
async def test_each_discovery_path_is_routed_and_says_when_chromium_is_down(
    relay: Client, path: str
) -> None:
    answer = await relay.get(path, headers=ALICE)
    assert answer.status == 503
    assert (await refusal(answer)).endswith("retry when /readyz says ready")
    head = await relay.head(path, headers=ALICE)
    assert head.status == 503


async def test_a_host_not_allowed_and_a_browser_origin_are_refused_without_echoing_them(
    relay: Client,
) -> None:
    rebinding = await relay.get("/json/version", headers={"Host": "evil.example:9222"})
    assert rebinding.status == 403
    message = await refusal(rebinding)
    assert "AGENTENV_ALLOWED_HOSTS" in message and "evil" not in message
    malformed = await relay.get("/json/version", headers={"Host": "user@127.0.0.1"})
    assert malformed.status == 400
    assert await refusal(malformed) == "malformed Host header: send host[:port]"
    page = await relay.get("/json/version", headers={"Origin": "http://evil.example"})
    assert page.status == 403
    message = await refusal(page)
    assert "AGENTENV_ALLOWED_ORIGINS" in message and "evil" not in message


async def test_a_cdp_client_is_refused_before_the_upgrade(relay: Client) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as bare:
        await relay.ws_connect("/devtools/browser/any")
    assert bare.value.status == 401
    with pytest.raises(aiohttp.WSServerHandshakeError) as down:
        await relay.ws_connect("/devtools/browser/any", headers=ALICE)
    assert down.value.status == 503  # Chromium is down: no upgrade
    with pytest.raises(aiohttp.WSServerHandshakeError) as page:
        await relay.ws_connect("/devtools/page/../../etc", headers=ALICE)
    assert page.value.status == 404
    plain = await relay.get("/devtools/browser/any", headers=ALICE)
    assert plain.status == 400
    host = f"127.0.0.1:{relay.port}"
    assert f"ws://{host}/devtools/browser/any" in await refusal(plain)


async def test_the_relays_counts_take_the_control_token(relay: Client) -> None:
    agent = await relay.get("/metrics", headers=ALICE)
    assert agent.status == 403
    assert "control token" in await refusal(agent)
    own = await relay.get("/metrics", headers=CONTROL)
    assert own.status == 200
    assert "agentenv_cdp_commands_total" in await own.text()


async def test_json_close_and_activate_are_on_the_record_as_the_commands_they_stand_for(
    tmp_path: Path,
) -> None:
    settings = computer(tmp_path)
    async with served("relay", settings) as relay:
        close = await relay.get("/json/close/T1", headers=ALICE)
        activate = await relay.get("/json/activate/T2", headers=ALICE)
        bad = await relay.get("/json/close/..%2Flist", headers=ALICE)
        assert bad.status == 404
        assert "ids are letters, digits and dashes" in await refusal(bad)
        statuses = (close.status, activate.status)
        messages = (await refusal(close), await refusal(activate))
    entries = {x["seq"]: x["action"] for x in log_lines(settings) if "action" in x}
    assert [(e["method"], e["params"]) for _, e in sorted(entries.items())] == [
        ("Target.closeTarget", {"targetId": "T1"}),
        ("Target.activateTarget", {"targetId": "T2"}),
    ]
    assert statuses == (503, 503)
    assert messages == ("Chromium is not answering; retry when /readyz says ready",) * 2
    for entry in entries.values():
        assert entry["who"] == "alice" and entry["via"] == "cdp" and entry["acts"] == "acting"
        assert entry["ok"] is False and entry["error"] == "Chromium is not answering"


# -- the app server -------------------------------------------------------------


async def test_healthz_is_up_and_readyz_says_why_not_while_the_relay_is_down(
    app_server: Client,
) -> None:
    health = await app_server.get("/healthz")
    assert health.status == 200 and await health.json() == {"ok": True}
    ready = await app_server.get("/readyz")
    assert ready.status == 503
    assert await ready.json() == {"ready": False, "reason": "the relay is not answering"}


async def test_readyz_says_not_ready_while_the_relays_chromium_is_down(tmp_path: Path) -> None:
    """The app's readiness asks the real relay, whose Chromium is not there."""
    async with served("relay", computer(tmp_path / "relay")) as relay:
        settings = computer(tmp_path / "app", relay_port=str(relay.port))
        async with served("app", settings) as app:
            ready = await app.get("/readyz")
            assert ready.status == 503
            assert await ready.json() == {
                "ready": False,
                "reason": "the relay answered 503: Chromium not ready",
            }


async def test_the_card_lists_every_op_and_no_chromium_while_none_answers(
    app_server: Client,
) -> None:
    answer = await app_server.get("/card")
    assert answer.status == 200
    card = await answer.json()
    assert card["name"] == "test"
    assert card["extensions"]["browser/v1"]["ops"] == all_ops()
    recording = card["extensions"]["browser-recording/v1"]
    assert recording["ops"] == ["start", "end", "end_all"]
    assert set(card["versions"]) == {"agentenv", "protocol_table"}  # no "chromium"
    # The computer's public key, made on the first card and kept.
    key = card["attestation"]["key"]
    assert key.startswith("ed25519:") and len(key) == len("ed25519:") + 44
    again = await (await app_server.get("/card")).json()
    assert again["attestation"]["key"] == key


async def test_the_log_op_needs_the_control_token_and_returns_the_lines_after(
    tmp_path: Path,
) -> None:
    settings = computer(tmp_path)
    writer = LogWriter.open(settings.log_file)
    writer.record("reset", {"reason": "first"})
    writer.record("reset", {"reason": "second"})
    writer.close()
    async with served("app", settings) as app:
        bare = await app.post("/v1/browser/log", json={})
        assert bare.status == 401
        assert (await refusal(bare)).startswith("a token is required")
        agent = await app.post("/v1/browser/log", json={}, headers=ALICE)
        assert agent.status == 403
        assert (await refusal(agent)).startswith("this op needs the control token")
        recording = await app.post("/v1/browser-recording/start", json={}, headers=ALICE)
        assert recording.status == 403
        own = await app.post("/v1/browser/log", json={"after": 1}, headers=CONTROL)
        assert own.status == 200
        page = await own.json()
    assert page["last"] == 2
    assert [(x["seq"], x["reset"]) for x in page["lines"]] == [(2, {"reason": "second"})]


async def test_an_unknown_op_is_404_naming_the_ops_served(app_server: Client) -> None:
    browser = await app_server.post("/v1/browser/tabs/nope", json={}, headers=CONTROL)
    assert browser.status == 404
    message = await refusal(browser)
    assert message == f"unknown op 'tabs/nope': browser/v1 serves {', '.join(all_ops())}"
    recording = await app_server.post("/v1/browser-recording/nope", json={}, headers=CONTROL)
    assert recording.status == 404
    assert (await refusal(recording)).endswith("browser-recording/v1 serves start, end, end_all")


async def _chunks(size: int) -> AsyncIterator[bytes]:
    """A body sent chunked (no Content-Length): the reader must count."""
    yield b'{"after": 0, "pad": "'
    for _ in range(size // (64 * 1024)):
        yield b"x" * (64 * 1024)
    yield b'"}'


async def test_a_body_over_the_limit_is_413_and_a_malformed_one_400_naming_the_problem(
    app_server: Client,
) -> None:
    async def post(data: Any, path: str = "/v1/browser/log") -> tuple[int, str]:
        answer = await app_server.post(
            path, data=data, headers=CONTROL | {"Content-Type": "application/json"}
        )
        return answer.status, await refusal(answer)

    too_big = b'{"after": 0, "pad": "' + b"x" * MiB + b'"}'
    assert await post(too_big) == (413, "the body is over 1 MiB, the most this op takes")
    assert await post(_chunks(2 * MiB)) == (413, "the body is over 1 MiB, the most this op takes")
    assert await post(b"{not json") == (400, "the body is not JSON: send a JSON object")
    assert await post(b"[1, 2]") == (400, "the body must be a JSON object")
    status, message = await post(json.dumps({"after": -1, "secret_field": "VALUE-123"}))
    assert status == 400
    assert (
        message.startswith("after: ") and "secret_field: Extra inputs are not permitted" in message
    )
    assert "VALUE-123" not in message and "-1" not in message
    assert await post(b"x" * (MiB + 1), "/mcp") == (413, "an MCP message over 1 MiB is not taken")


async def test_an_op_while_the_relay_is_down_is_503_saying_when_to_retry(
    app_server: Client,
) -> None:
    answer = await app_server.post("/v1/browser/tabs/list", json={}, headers=ALICE)
    assert answer.status == 503
    assert await refusal(answer) == (
        "the browser is not reachable through the relay; retry when /readyz says ready"
    )


async def test_metrics_names_each_program_that_does_not_answer(app_server: Client) -> None:
    agent = await app_server.get("/metrics", headers=ALICE)
    assert agent.status == 403
    own = await app_server.get("/metrics", headers=CONTROL)
    assert own.status == 200
    text = await own.text()
    assert "# the relay is not answering" in text
    assert "# the recorder is not answering" in text


# -- the recorder -----------------------------------------------------------------


async def test_the_recorder_takes_the_control_token_and_its_healthz_none(
    recorder: Client,
) -> None:
    health = await recorder.get("/healthz")
    assert health.status == 200 and await health.json() == {"ok": True}
    for headers in ({}, ALICE, {"Authorization": "Bearer wrong"}):
        answer = await recorder.post("/end_all", json={}, headers=headers)
        assert answer.status == 401
        assert await refusal(answer) == (
            "the recorder takes the control token (call it through the app server)"
        )
    own = await recorder.post("/end_all", json={}, headers=CONTROL)
    assert own.status == 200 and await own.json() == []  # none was open


async def test_the_recorder_refuses_big_malformed_and_incomplete_bodies(
    recorder: Client,
) -> None:
    async def post(path: str, data: bytes) -> tuple[int, str]:
        answer = await recorder.post(
            path, data=data, headers=CONTROL | {"Content-Type": "application/json"}
        )
        return answer.status, await refusal(answer)

    big = b'{"request_id": "' + b"r" * MiB + b'"}'
    assert await post("/start", big) == (413, "the body is over 1 MiB, the most this op takes")
    assert await post("/start", b"{") == (400, "the body is not JSON: send a JSON object")
    status, message = await post("/start", b"{}")
    assert status == 400
    assert message == "request_id: Field required; upload: Field required"
    assert await post("/end", b'{"recording_id": "rec-nope"}') == (
        404,
        "no recording 'rec-nope' here (the recorder may have restarted: "
        "rebuild its manifest from the upload)",
    )


async def test_a_recording_is_refused_a_folder_outside_the_upload_roots(
    recorder: Client, tmp_path: Path
) -> None:
    start = {"request_id": "r-1", "upload": {"url": f"file://{tmp_path}/elsewhere"}}
    answer = await recorder.post("/start", json=start, headers=CONTROL)
    assert answer.status == 400
    assert "AGENTENV_UPLOAD_ROOTS" in await refusal(answer)
    assert not (tmp_path / "elsewhere").exists()


# -- the relay, with a stand-in Chromium behind it ------------------------------------


@pytest.fixture
async def chromium() -> AsyncIterator[FakeChromium]:
    async with FakeChromium(
        target_info("A1", "http://a.test/"),
        target_info("UI", "chrome://omnibox-popup.top-chrome/"),
        target_info("SW", "http://a.test/sw.js", kind="service_worker"),
    ) as fake:
        yield fake


def _relay_on(
    tmp_path: Path, chromium: FakeChromium
) -> tuple[Settings, AbstractAsyncContextManager[Client]]:
    settings = computer(tmp_path, chromium_port=str(chromium.port))
    return settings, served("relay", settings)


async def test_discovery_lists_web_pages_only_each_at_the_relays_address(
    tmp_path: Path, chromium: FakeChromium
) -> None:
    _, serve = _relay_on(tmp_path, chromium)
    async with serve as relay:
        listed = await relay.get(f"/json/list?token={ALICE_TOKEN}")
        assert listed.status == 200
        pages = await listed.json()
        version = await (await relay.get("/json/version")).json()
        here = f"127.0.0.1:{relay.port}"
    # Web content only: a page and a page's worker, never the browser's own UI.
    assert [p["id"] for p in pages] == ["A1", "SW"]
    assert pages[0]["webSocketDebuggerUrl"] == f"ws://{here}/devtools/page/A1?token={ALICE_TOKEN}"
    assert pages[0]["devtoolsFrontendUrl"].endswith(f"ws={here}/devtools/page/A1")
    assert version["webSocketDebuggerUrl"] == f"ws://{here}/devtools/browser/B1"


async def test_put_json_new_opens_the_tab_itself_and_the_log_credits_the_command(
    tmp_path: Path, chromium: FakeChromium
) -> None:
    settings, serve = _relay_on(tmp_path, chromium)
    async with serve as relay:
        watcher = relay.app[watcher_key]
        await asyncio.wait_for(watcher.connected.wait(), deadline(5))
        opened = await relay.put("/json/new?http://example.test/a%20b", headers=ALICE)
        assert opened.status == 200
        tab = await opened.json()
        refused = await relay.put("/json/new?FILE:%2F%2F%2Fetc%2Fpasswd", headers=ALICE)
        assert refused.status == 403
        refused_message = await refusal(refused)
        here = f"127.0.0.1:{relay.port}"
    creates = [params for method, params in chromium.received if method == "Target.createTarget"]
    assert creates == [{"url": "http://example.test/a b"}]  # decoded once; file: never sent
    assert tab["id"] == "OPENED1"
    assert tab["webSocketDebuggerUrl"] == f"ws://{here}/devtools/page/OPENED1"
    lines = sorted(log_lines(settings), key=lambda x: x["seq"])
    entries = {x["seq"]: x["action"] for x in lines if "action" in x}
    (made, blocked) = sorted(entries)
    assert entries[made] == {
        "via": "cdp",
        "who": "alice",
        "conn": entries[made]["conn"],
        "method": "Target.createTarget",
        "acts": "acting",
        "params": {"url": "http://example.test/a b"},
        "tab": "OPENED1",
        "url": "http://example.test/a b",
        "ok": True,
    }
    assert entries[blocked]["ok"] is False and entries[blocked]["guard"]["action"] == "blocked"
    assert entries[blocked]["params"] == {"url": "FILE:///etc/passwd"}
    assert entries[blocked]["error"] == refused_message
    tabs = [x["tab"] for x in lines if "tab" in x]
    assert tabs[0] == {
        "event": "opened",
        "id": "OPENED1",
        "url": "http://example.test/a b",
        "by": {"kind": "command", "entry": made, "via": "cdp", "who": "alice"},
    }
    # The relay stopping closes every tab it knows, by stop.
    assert {(t["event"], t["id"], t["by"]["kind"]) for t in tabs[1:]} == {
        ("closed", "A1", "stop"),
        ("closed", "OPENED1", "stop"),
    }
    assert [x["seq"] for x in lines] == list(range(1, len(lines) + 1))
