"""Scopes opened on demand at four edges a red team left open (issue 41,
item 1), against the built image with real clients:

- An MCP tool call from an opened scope's token racing its ``scopes/close``
  acts in that scope or nowhere: never in the home scope (alice's), whose
  tabs and log stay as they were.
- A relay restarted (``supervisorctl restart relay``) closes the scopes
  opened before it, as ``scopes/close`` does: their contexts disposed of in
  Chromium, their tokens refused, their recordings ended with a manifest,
  the close on the record with why; the home scope goes on.
- ``AGENTENV_MAX_CONNECTIONS`` at or under one user's share, on a computer of
  several users, is refused at start, both settings named.
- ``scopes/open``'s ``cdp_url`` names the relay at the port it is published
  on (``AGENTENV_PUBLISHED_RELAY_PORT``), not 9222, and the host the op was
  asked at, as the Host check passed it; an agent connects there.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import requests

from agentenv.harness.hardening import docker_kwargs
from tests.security.attacks import agent, attempt, clean
from tests.security.test_opened_scopes import _mcp
from tests.security.test_warm_scopes import _chromium
from tests.support.container import CONTROL, SITE, SUPERVISORCTL, Computer, computer
from tests.support.timing import deadline, wait_for

RECORDINGS = "/tmp/recordings"
COOKIE = "left-by-the-last-relay-6620"


@pytest.fixture(scope="module")
def pc(image: str) -> Iterator[Computer]:
    env = {"AGENTENV_MAX_SCOPES": "3", "AGENTENV_UPLOAD_ROOTS": RECORDINGS}
    with computer(image, users={"alice": "alice-token-5f1c"}, env=env) as running:
        running.exec("mkdir", "-p", RECORDINGS, user="agentenv")
        running.serve_site()
        yield running


def _open(pc: Computer, name: str) -> dict[str, Any]:
    made = pc.op("scopes/open", {"name": name})
    pc.users[name] = made["token"]
    return dict(made)


def _open_scopes(pc: Computer) -> list[str]:
    return [s["scope"] for s in pc.op("scopes/list")["scopes"]]


async def test_an_mcp_call_racing_its_scopes_close_never_acts_in_the_home_scope(
    pc: Computer,
) -> None:
    """Calls in flight on an opened scope's MCP session as the scope closes
    (each round: its Playwright MCP started, a burst of navigations sent,
    scopes/close asked at once): each acted in its own scope before the close
    or not at all. An action begun on the home scope's link would be on the
    record with ``scope: alice``, and a navigation there would be one of
    alice's tabs. The window is a few milliseconds wide (between Playwright
    MCP answering ``start`` and the action beginning), so this race rarely
    lands in it: tests/unit/test_mcp_scopes.py closes the scope exactly
    there, and fails without the rule."""
    home = [t["url"] for t in pc.op("tabs/list", user="alice")]
    before = attempt(pc)
    tokens = []
    for round_ in range(3):
        made = _open(pc, "racer")
        tokens.append(made["token"])
        async with _mcp(pc, made["token"]) as client:
            first = await client.call_tool("browser_navigate", {"url": f"{SITE}/?racer-{round_}"})
            assert not first.is_error

            async def call(n: int, client: Any = client, round_: int = round_) -> Any:
                try:
                    url = f"{SITE}/?raced-{round_}-{n}"
                    return await client.call_tool("browser_navigate", {"url": url})
                except Exception as exc:  # the session ended under it: any way it says so
                    return exc

            calls = [asyncio.create_task(call(n)) for n in range(10)]
            await asyncio.to_thread(pc.op, "scopes/close", {"scope": "racer"})
            done = await asyncio.wait_for(asyncio.gather(*calls), deadline(120))
            assert len(done) == 10
            late = await call(99)  # just after the close, on the same session
            assert isinstance(late, Exception) or late.is_error, late
    lines = pc.settled_log(before)
    actions = [x["action"] for x in lines if "action" in x]
    racer = [a for a in actions if a.get("who") == "racer"]
    assert racer, "the racer's calls are on the record"
    elsewhere = [a for a in racer if a.get("scope") != "racer"]
    assert not elsewhere, elsewhere[:3]
    after = [t["url"] for t in pc.op("tabs/list", user="alice")]
    assert after == home and "raced" not in str(after), (home, after)
    clean(pc, *tokens)


def test_a_restarted_relay_closes_the_scopes_opened_before_it(pc: Computer) -> None:
    made = _open(pc, "kept")
    started = pc.recording(
        "start",
        {
            "request_id": uuid.uuid4().hex,
            "scope": "kept",
            "upload": {"url": f"file://{RECORDINGS}"},
        },
    )

    async def use() -> None:
        async with agent(pc, "kept") as kept:
            cookie = {"name": "c", "value": COOKIE, "url": SITE}
            assert "result" in await kept.call("Storage.setCookies", {"cookies": [cookie]})
            await kept.call("Target.createBrowserContext", {})  # one of its agent's own

    asyncio.run(use())
    old = set(_chromium(pc, "list")["contexts"])
    assert len(old) >= 2, old  # the scope's and its agent's (warm ones too)
    before = attempt(pc)
    pc.exec(*SUPERVISORCTL, "restart", "relay")
    wait_for(
        lambda: requests.get(pc.app + "/readyz", timeout=5).status_code == 200,
        "the computer to be ready again",
        60,
    )
    wait_for(lambda: "kept" not in _open_scopes(pc), "the scope to be closed", 60)
    # Chromium holds none of the last relay's contexts.
    left = set(_chromium(pc, "list")["contexts"]) & old
    assert not left, left
    # Its token is refused at every door.
    bearer = {"Authorization": f"Bearer {made['token']}"}
    for answer in (
        requests.get(f"{pc.relay}/json/list", headers=bearer, timeout=10),
        requests.post(f"{pc.app}/v1/browser/tabs/list", json={}, headers=bearer, timeout=10),
    ):
        assert answer.status_code == 401, (answer.url, answer.status_code)
    # Its recording ended with a manifest; the close is on the record, with why.
    manifest = pc.recording("end", {"recording_id": started["recording_id"]})
    assert manifest["reason"] == "stopped" and manifest["scope"] == "kept", manifest
    closes = [
        x["action"]
        for x in pc.settled_log(before)
        if x.get("action", {}).get("op") == "scopes/close"
    ]
    assert [c.get("args") for c in closes] == [{"scope": "kept"}], closes
    assert "relay restarted" in closes[0]["why"], closes
    # Opened again under its name: nothing of the last one.
    again = _open(pc, "kept")

    async def fresh() -> None:
        async with agent(pc, "kept") as kept:
            cookies = (await kept.call("Storage.getCookies"))["result"]["cookies"]
            assert COOKIE not in str(cookies), cookies
            contexts = (await kept.call("Target.getBrowserContexts"))["result"]
            assert contexts["browserContextIds"] == [], contexts
        async with agent(pc, "alice") as alice:  # the home scope goes on
            assert "result" in await alice.call("Target.getTargets")

    asyncio.run(fresh())
    pc.op("scopes/close", {"scope": "kept"})
    clean(pc, made["token"], again["token"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(image: str, env: dict[str, str], ports: dict[str, Any]) -> Any:
    import docker

    return docker.from_env().containers.run(
        image, detach=True, environment=env, ports=ports, **docker_kwargs()
    )


def test_connections_no_more_than_one_users_share_are_refused_at_start(image: str) -> None:
    env = {
        "AGENTENV_USERS": "alice:alice-token-5f1c,bob:bob-token-9a2e",
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "AGENTENV_MAX_CONNECTIONS": "8",  # one user's share is 16 by default
    }
    container = _run(image, env, {"8080/tcp": ("127.0.0.1", None)})
    try:

        def said() -> str | None:
            # Each program says it as it starts; the recorder or the app may
            # say it before the relay does (a CI run checked too early).
            text = container.logs().decode(errors="replace")
            return (
                text if "agentenv-relay: AGENTENV_MAX_CONNECTIONS=8 is not above" in text else None
            )

        text = wait_for(said, "the relay to refuse the setting", 60)
        assert "starve" in text
        container.reload()
        port = container.ports["8080/tcp"][0]["HostPort"]
        try:  # the app server refused the setting too: nothing answers, or not ready
            ready = requests.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code
        except requests.ConnectionError:
            ready = None
        assert ready != 200
    finally:
        container.remove(force=True, v=True)  # and its anonymous log volume


def test_the_cdp_url_names_the_published_relay_port_and_an_agent_connects(image: str) -> None:
    relay_port, app_port = _free_port(), _free_port()
    assert 9222 not in (relay_port, app_port)
    env = {
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "AGENTENV_MAX_SCOPES": "2",
        "AGENTENV_PUBLISHED_RELAY_PORT": str(relay_port),
    }
    ports = {"9222/tcp": ("127.0.0.1", relay_port), "8080/tcp": ("127.0.0.1", app_port)}
    container = _run(image, env, ports)
    app = f"http://127.0.0.1:{app_port}"
    control = {"Authorization": f"Bearer {CONTROL}"}
    try:

        def ready() -> bool | None:
            try:
                return requests.get(app + "/readyz", timeout=5).status_code == 200 or None
            except requests.ConnectionError:
                return None

        wait_for(ready, "the computer to be ready", 120)

        def open_at(host: str) -> requests.Response:
            return requests.post(
                f"{app}/v1/browser/scopes/open",
                json={},
                headers={**control, "Host": host, "X-Forwarded-Host": "evil.example"},
                timeout=deadline(60),
            )

        answer = open_at(f"127.0.0.1:{app_port}")
        assert answer.status_code == 200, answer.text
        made = answer.json()
        assert made["cdp_url"] == f"ws://127.0.0.1:{relay_port}/devtools/browser", made
        assert made["mcp_url"] == f"{app}/mcp", made

        async def connect() -> Any:
            async with (
                aiohttp.ClientSession() as http,
                http.ws_connect(f"{made['cdp_url']}?token={made['token']}") as ws,
            ):
                await ws.send_json({"id": 1, "method": "Browser.getVersion"})
                return await ws.receive_json(timeout=deadline(30))

        assert "result" in asyncio.run(connect())
        named = open_at(f"localhost:{app_port}").json()
        assert named["cdp_url"] == f"ws://localhost:{relay_port}/devtools/browser", named
        # A Host that is not an allowed host[:port] is refused: no URL is made of it.
        for host in ("evil.example", f"127.0.0.1:{app_port}/x", f"a@127.0.0.1:{app_port}"):
            refused = open_at(host)
            assert refused.status_code in (400, 403), (host, refused.status_code)
            assert "cdp_url" not in refused.text
    finally:
        container.remove(force=True, v=True)  # and its anonymous log volume
