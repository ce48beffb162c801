"""Scopes opened on demand under attack at their edges (issue 41): what an
agent holding an opened scope's token can do while its scope is closed or
reset, and what the metrics token reaches. Against the built image with a
fixed user (alice, the home scope), a control token, ``AGENTENV_MAX_SCOPES``,
a metrics token, and one connection each (so a second one waits in the
queue).

- A connection waiting in the queue when its scope closes is refused once let
  in: it lands neither in the closed scope, nor in a scope made again under
  its name, nor in the home scope (alice's cookies, tabs).
- A scope opened again under that name finds no context, cookie or tab of
  what the waiting connection could have made.
- One let in from the queue after its scope closed altogether is refused:
  it would have acted in the home scope, alice's.
- An op whose scope closed while its body came is refused, not done in the
  home scope; a scopes/open whose caller went away while it waited opens no
  scope for no one; data/get of a scope opened again exports none of the
  closed one's log; the metrics token is withheld from the auth record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.security.attacks import agent, clean
from tests.support.container import SITE, Computer, computer
from tests.support.timing import deadline, wait_for

ALICE_COOKIE = "alice-home-cookie-7301"
QUEUED_COOKIE = "queued-after-close-4412"
METRICS_TOKEN = "metrics-token-9d2e51c7"


@pytest.fixture(scope="module")
def pc(image: str) -> Iterator[Computer]:
    env = {
        "AGENTENV_MAX_SCOPES": "3",
        "AGENTENV_MAX_CONNECTIONS": "2",
        "AGENTENV_MAX_CONNECTIONS_PER_USER": "1",
        "AGENTENV_QUEUE_LENGTH": "4",
        "AGENTENV_QUEUE_WAIT_S": "30",
        "AGENTENV_METRICS_TOKEN": METRICS_TOKEN,
    }
    with computer(image, users={"alice": "alice-token-5f1c"}, env=env) as running:
        running.serve_site()
        yield running


def _metric(pc: Computer, name: str) -> float:
    text = requests.get(
        pc.app + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
    ).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"no {name} in /metrics")


async def _queued(pc: Computer, token: str) -> tuple[int, list[dict[str, Any]]]:
    """Connect as ``token`` (waiting in the queue), then, if let in, try to
    read the browser it sees: the handshake's status, and the answers."""
    url = f"ws://{pc.relay_address}/devtools/browser?token={token}"
    answers: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(url, max_msg_size=0)
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status, answers
        async with ws:
            calls = [
                ("Storage.getCookies", {}),
                ("Target.getTargets", {}),
                (
                    "Storage.setCookies",
                    {"cookies": [{"name": "q", "value": QUEUED_COOKIE, "url": SITE}]},
                ),
                ("Target.createBrowserContext", {}),
            ]
            for number, (method, params) in enumerate(calls, 1):
                try:
                    await ws.send_json({"id": number, "method": method, "params": params})
                    while True:
                        got = await ws.receive(timeout=deadline(10))
                        if got.type is not aiohttp.WSMsgType.TEXT:
                            return 101, answers
                        message = got.json()
                        if message.get("id") == number:
                            answers.append(message)
                            break
                except (ConnectionError, aiohttp.ClientError, TimeoutError):
                    return 101, answers
        return 101, answers


async def test_a_connection_queued_when_its_scope_closes_is_let_into_no_scope(
    pc: Computer,
) -> None:
    made = pc.op("scopes/open", {"name": "queued"})
    token = made["token"]
    async with agent(pc, "alice") as alice:
        await alice.call(
            "Storage.setCookies",
            {"cookies": [{"name": "a", "value": ALICE_COOKIE, "url": SITE}]},
        )
    pc.users["queued"] = token
    async with agent(pc, "queued"):
        # Its one connection is open: a second waits in the queue.
        second = asyncio.create_task(_queued(pc, token))
        await asyncio.to_thread(
            wait_for,
            lambda: _metric(pc, "agentenv_cdp_queue_length") == 1,
            "the second connection in the queue",
        )
        await asyncio.to_thread(pc.op, "scopes/close", {"scope": "queued"})
    status, answers = await asyncio.wait_for(second, deadline(60))
    assert ALICE_COOKIE not in str(answers), "a closed scope's connection read alice's cookies"
    worked = [a for a in answers if "result" in a]
    assert not worked, (status, worked)
    # The name opened again holds nothing the waiting connection could have made.
    again = pc.op("scopes/open", {"name": "queued"})
    pc.users["queued"] = again["token"]
    async with agent(pc, "queued") as fresh:
        contexts = (await fresh.call("Target.getBrowserContexts"))["result"]
        assert contexts["browserContextIds"] == [], contexts
        cookies = (await fresh.call("Storage.getCookies"))["result"]["cookies"]
        assert cookies == [], cookies
    async with agent(pc, "alice") as alice:
        cookies = (await alice.call("Storage.getCookies"))["result"]["cookies"]
        assert QUEUED_COOKIE not in str(cookies), cookies
    pc.op("scopes/close", {"scope": "queued"})
    clean(pc, token, again["token"])


async def test_a_connection_let_in_after_its_scope_closed_lands_in_no_scope(
    pc: Computer,
) -> None:
    """A connection of an opened scope waits for a place of the computer's
    (AGENTENV_MAX_CONNECTIONS, both held: alice's and another scope's); its
    scope is closed, altogether; then a place frees and it is let in. It
    must be refused, not put in the home scope (alice's browser)."""
    late = pc.op("scopes/open", {"name": "late"})
    other = pc.op("scopes/open", {"name": "other"})
    pc.users["other"] = other["token"]
    async with agent(pc, "alice") as alice:
        await alice.call(
            "Storage.setCookies",
            {"cookies": [{"name": "a", "value": ALICE_COOKIE, "url": SITE}]},
        )
        async with agent(pc, "other"):
            waiting = asyncio.create_task(_queued(pc, late["token"]))
            await asyncio.to_thread(
                wait_for,
                lambda: _metric(pc, "agentenv_cdp_queue_length") == 1,
                "late's connection in the queue",
            )
            await asyncio.to_thread(pc.op, "scopes/close", {"scope": "late"})
        # other's connection ended: a place is free, and late's is let in.
        status, answers = await asyncio.wait_for(waiting, deadline(60))
    assert ALICE_COOKIE not in str(answers), "a closed scope's connection read alice's cookies"
    assert status == 401 and not answers, (status, answers)
    pc.op("scopes/close", {"scope": "other"})
    clean(pc, late["token"], other["token"])


def test_the_metrics_token_sent_as_a_name_is_withheld_from_the_auth_record(
    pc: Computer,
) -> None:
    """A harness that put its metrics token where a name goes (``?user=``,
    ``AgentEnv-Role``) with no token or a wrong one is refused (401), and the
    ``auth`` line keeps the names it claimed: the metrics token is withheld
    there, as every other token the computer knows is."""
    refused = [
        requests.get(f"{pc.relay}/json/list?user={METRICS_TOKEN}", timeout=10),
        requests.post(
            f"{pc.app}/v1/browser/tabs/list",
            json={},
            headers={"Authorization": "Bearer wrong-token-1", "AgentEnv-Role": METRICS_TOKEN},
            timeout=10,
        ),
    ]
    assert [r.status_code for r in refused] == [401, 401]

    def recorded() -> list[Any] | None:
        lines = [x["auth"] for x in pc.log()[0] if "auth" in x]
        claims = [line.get("claimed", {}) for line in lines]
        mine = [c for c in claims if {"user", "role"} & set(c)]
        return mine if len(mine) >= 2 else None

    claims = wait_for(recorded, "the two refusals on the record", timeout_s=20)
    assert all(set(c.values()) == {"withheld"} for c in claims), "the metrics token was kept"
    clean(pc, METRICS_TOKEN)


def test_an_open_whose_caller_went_away_while_queued_opens_no_scope_for_nobody(
    pc: Computer,
) -> None:
    """Past AGENTENV_MAX_SCOPES a scopes/open waits; its caller gives up (its
    own timeout) and goes. When a scope closes, the place is not spent on a
    scope whose token no one was told: it would hold one of the computer's
    scopes until someone found it in scopes/list."""
    names = [pc.op("scopes/open")["scope"] for _ in range(3)]
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(
            f"{pc.app}/v1/browser/scopes/open", json={}, headers=pc.headers(None), timeout=2
        )
    wait_for(lambda: _metric(pc, "agentenv_queue_length") == 1, "the open in the queue")
    pc.op("scopes/close", {"scope": names.pop()})
    wait_for(lambda: _metric(pc, "agentenv_queue_length") == 0, "the queue emptied")
    wait_for(
        lambda: sorted(s["scope"] for s in pc.op("scopes/list")["scopes"]) == sorted(names),
        "no scope opened for the caller that went",
        timeout_s=10,
    )
    for name in [s["scope"] for s in pc.op("scopes/list")["scopes"]]:
        pc.op("scopes/close", {"scope": name})


async def _slow_op(pc: Computer, op: str, token: str, body: bytes, go: asyncio.Event) -> bytes:
    """An op whose body is sent in two parts: the headers and the first byte
    now, the rest once ``go`` is set. What the app answered, whole."""
    host, port = pc.app.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST /v1/browser/{op} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body[:1])
    await writer.drain()
    await go.wait()
    writer.write(body[1:])
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), deadline(30))
    writer.close()
    return answer


async def test_an_op_whose_scope_closed_while_its_body_came_acts_in_no_other_scope(
    pc: Computer,
) -> None:
    """An opened scope's agent starts an op (its token checked), sends its
    body slowly, and the scope is closed meanwhile: the op must not act in
    the home scope (alice's tabs) once the body is in, but be refused."""
    async with agent(pc, "alice") as alice:
        tab, _ = await alice.page(SITE + "/?alice-private-page")
        made = pc.op("scopes/open", {"name": "slow"})
        go = asyncio.Event()
        slow = asyncio.create_task(_slow_op(pc, "tabs/list", made["token"], b"{}", go))
        await asyncio.sleep(0.5)
        await asyncio.to_thread(pc.op, "scopes/close", {"scope": "slow"})
        go.set()
        answer = await slow
        await alice.call("Target.closeTarget", {"targetId": tab})
    status = answer.split(b"\r\n", 1)[0]
    assert b"alice-private-page" not in answer, "a closed scope's op listed alice's tabs"
    assert b" 401 " in status, status
    clean(pc, made["token"])


def _exported_log(pc: Computer, scope: str) -> bytes:
    """The log in a ``data/get`` archive of ``scope`` (the task's export)."""
    import io
    import tarfile

    archive = pc.op("data/get", {"scope": scope})
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.extractfile("browser-log.jsonl")
        assert member is not None
        return member.read()


async def test_the_export_of_a_scope_opened_again_holds_nothing_of_the_closed_ones_log(
    pc: Computer,
) -> None:
    """A task's export (``data/get`` of its scope) carries its scope's own log
    lines: a scope opened again under a closed one's name must not export the
    closed scope's actions (the earlier task's pages, commands)."""
    first = pc.op("scopes/open", {"name": "reused"})
    pc.users["reused"] = first["token"]
    async with agent(pc, "reused") as earlier:
        await earlier.page(SITE + "/?earlier-tasks-page-5521")
    assert b"earlier-tasks-page-5521" in _exported_log(pc, "reused")
    pc.op("scopes/close", {"scope": "reused"})
    again = pc.op("scopes/open", {"name": "reused"})
    pc.users["reused"] = again["token"]
    async with agent(pc, "reused") as later:
        await later.page(SITE + "/?later-tasks-page")
    exported = _exported_log(pc, "reused")
    assert b"later-tasks-page" in exported
    assert b"earlier-tasks-page-5521" not in exported, "the earlier scope's log was exported"
    pc.op("scopes/close", {"scope": "reused"})
    clean(pc, first["token"], again["token"])
