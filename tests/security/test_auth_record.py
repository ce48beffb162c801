"""Failed authentication is on the record (issue 40, item 9).

A request refused for its token at any door (the relay's WebSocket upgrade,
an op, ``/mcp``, the live view) is an ``auth`` line of the action log: its
door, the address it came from, the names it claimed, never the token (nor
anything under /var/log/agentenv holding it). A flood of bad attempts writes
a bounded number of lines, and each attempt is a line or counted in one.
Before, none of them left any line, in the log or in relay.log."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import secrets
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from agentenv.log.auth import NAMED, TOTAL
from tests.security.attacks import attempt
from tests.support.container import Computer, computer
from tests.support.timing import wait_for

#: A wrong token, made for the run (never printed: assertions name no token).
WRONG = "wrong-" + secrets.token_hex(12)

#: The module's computer's window (``AGENTENV_AUTH_WINDOW_S``): its count
#: lines come within seconds, not a minute.
WINDOW_S = 10
#: Its failures written one by one from one address in a window
#: (``AGENTENV_AUTH_PER_SOURCE``): every test here but the flood knocks 9
#: times in all, so each sees its own lines whichever window they fall in.
PER_SOURCE_HERE = 12


@pytest.fixture(scope="module")
def own(image: str) -> Any:
    """A computer of this module's own. On the security tests' shared one,
    their 401s from this same address used up its 5 a minute, and a test's
    lines came as a count line (a fresh-clone CI run)."""
    env = {
        "AGENTENV_AUTH_WINDOW_S": str(WINDOW_S),
        "AGENTENV_AUTH_PER_SOURCE": str(PER_SOURCE_HERE),
    }
    with computer(image, env=env) as running:
        yield running


def _auth_lines(at: Computer, after: int) -> list[dict[str, Any]]:
    lines, _ = at.log(after)
    return [dict(line["auth"]) for line in lines if "auth" in line]


def _traces(data: bytes, secret: str) -> list[str]:
    """The forms of ``secret`` found in ``data``: plain, URL-encoded, base64."""
    forms = {
        "plain": secret.encode(),
        "url-encoded": quote(secret, safe="").encode(),
        "base64": base64.b64encode(secret.encode()).rstrip(b"="),
        "half": secret[len(secret) // 2 :].encode(),
    }
    return [name for name, form in forms.items() if form in data]


async def _cdp_upgrade(at: Computer, token: str, user: str | None = None) -> int:
    query = f"?token={token}" + (f"&user={user}" if user else "")
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(f"ws://{at.relay_address}/devtools/browser{query}"):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


async def _knock(http: aiohttp.ClientSession, at: Computer, door: str) -> int:
    """One request at ``door`` with the wrong token; its status."""
    bearer = {"Authorization": f"Bearer {WRONG}"}
    if door == "cdp":
        request = http.get(f"{at.relay}/json/list", headers=bearer)
    elif door == "op":
        request = http.post(f"{at.app}/v1/browser/tabs/list", json={}, headers=bearer)
    elif door == "mcp":
        request = http.post(f"{at.app}/mcp", json={}, headers=bearer)
    else:
        request = http.get(f"{at.app}/live/frame?token={WRONG}")
    async with request as answer:
        await answer.read()
        return answer.status


async def test_each_door_records_a_wrong_token_once_with_its_source(own: Computer) -> None:
    after = attempt(own)
    assert await _cdp_upgrade(own, WRONG, user="bob") == 401
    async with aiohttp.ClientSession() as http:
        bearer = {"Authorization": f"Bearer {WRONG}", "AgentEnv-Role": "shopper"}
        async with http.post(f"{own.app}/v1/browser/tabs/list", json={}, headers=bearer) as answer:
            assert answer.status == 401
        for door in ("mcp", "live"):
            assert await _knock(http, own, door) == 401

    def four() -> list[dict[str, Any]] | None:
        found = _auth_lines(own, after)
        return found if len(found) >= 4 else None

    lines = wait_for(four, "four auth lines in the log", timeout_s=20)
    by_door = {line["door"]: line for line in lines}
    assert sorted(line["door"] for line in lines) == ["cdp", "live", "mcp", "op"], lines
    sources = {line["source"] for line in lines}
    assert len(sources) == 1, sources  # one client, one address
    ipaddress.ip_address(sources.pop())
    assert all(line["why"] == "unknown token" for line in lines)
    assert by_door["cdp"]["path"] == "/devtools/browser"
    assert by_door["cdp"]["claimed"] == {"user": "bob"}
    assert by_door["op"]["path"] == "/…/browser/tabs/list"  # its route words only
    assert by_door["op"]["claimed"] == {"role": "shopper"}
    assert by_door["mcp"]["path"] == "/mcp" and by_door["live"]["path"] == "/live/frame"
    # The entries are there (above); the token is nowhere, in any form.
    assert _traces(own.all_log_bytes(), WRONG) == []


async def test_no_token_at_all_is_recorded_too(own: Computer) -> None:
    after = attempt(own)
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{own.relay}/json/list?user=mallory") as answer,
    ):
        assert answer.status == 401
    lines = wait_for(lambda: _auth_lines(own, after), "an auth line", timeout_s=20)
    assert lines == [
        {
            "door": "cdp",
            "source": lines[0]["source"],
            "path": "/json/list",
            "why": "no token",
            "claimed": {"user": "mallory"},
        }
    ]


async def test_a_flood_of_bad_attempts_writes_a_bounded_record(own: Computer) -> None:
    """5,000 wrong tokens at the four doors: at most PER_SOURCE_HERE lines of
    their own per window from this one address, then a count line once the
    window is over, and every attempt accounted for."""
    after = attempt(own)
    attempts = 5000
    doors = ("cdp", "op", "mcp", "live")
    limit = asyncio.Semaphore(32)

    async def one(http: aiohttp.ClientSession, n: int) -> int:
        async with limit:
            return await _knock(http, own, doors[n % len(doors)])

    loop = asyncio.get_running_loop()
    began = loop.time()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        statuses = await asyncio.gather(*(one(http, n) for n in range(attempts)))
    took = loop.time() - began
    assert set(statuses) == {401}, sorted(set(statuses))
    windows = int(took // WINDOW_S) + 2  # the windows the flood may have touched
    written = _auth_lines(own, after)
    one_by_one = [line for line in written if "why" in line]
    assert len(one_by_one) <= PER_SOURCE_HERE * windows, len(one_by_one)

    def accounted() -> list[dict[str, Any]] | None:
        lines = _auth_lines(own, after)
        mine = sum(1 for line in lines if "why" in line)
        counted = sum(line.get("refused", 0) for line in lines)
        return lines if mine + counted >= attempts else None

    # The count line comes once the window is over.
    lines = wait_for(accounted, "the flood's count line", timeout_s=WINDOW_S + 15 + took)
    mine = sum(1 for line in lines if "why" in line)
    counts = [line for line in lines if "refused" in line]
    assert mine + sum(line["refused"] for line in counts) == attempts
    assert len(lines) <= (TOTAL + NAMED + 1) * windows, len(lines)
    assert counts and all(line["doors"] for line in counts), counts
    assert {d for line in counts for d in line["doors"]} <= set(doors)
    assert _traces(own.all_log_bytes(), WRONG) == []


async def test_a_token_put_in_a_path_is_not_written(own: Computer) -> None:
    """A reviewer put alice's real token in the path (``&token=`` with no
    ``?``, and as a path's part): each was refused, and the ``auth`` line
    kept the path, token and all. Only a path's route words are kept now."""
    token = own.token("alice")
    before = attempt(own)
    async with aiohttp.ClientSession() as http:
        for path in (
            f"/devtools/browser/x&token={token}",
            f"/devtools/page/{token}",
            f"/json/list&token={token}",
        ):
            async with http.get(f"{own.relay}{path}") as answer:
                assert answer.status in (401, 404), (path, answer.status)
        async with http.post(f"{own.app}/mcp&token={token}") as answer:
            assert answer.status in (401, 404), answer.status

    def written() -> list[dict[str, Any]] | None:
        lines = [line for line in _auth_lines(own, before) if "path" in line]
        return lines if len(lines) >= 3 else None

    lines = wait_for(written, "the refusals' lines", 20)
    assert any("/devtools/" in line["path"] for line in lines), lines  # they are there
    assert _traces(own.all_log_bytes(), token) == []
