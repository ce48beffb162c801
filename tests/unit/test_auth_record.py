"""Failed authentication on the record (agentenv.log.auth): which failures
are written, the bound a flood meets, and what a line holds (never a token)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agentenv.access import AccessDenied
from agentenv.http import auth_middleware, error_middleware
from agentenv.log.auth import (
    NAMED,
    PER_SOURCE,
    TOTAL,
    AuthRecord,
    Failure,
    claimed,
    door_of_app_path,
    path_shape,
)
from agentenv.settings import Settings

WRONG = "wrong-token-8c1f"


def _failure(source: str | None = "10.0.0.1", door: Any = "op") -> Failure:
    return Failure(door, source, "/v1/browser/tabs", "unknown token")


def _refused(lines: list[dict[str, Any]]) -> int:
    return sum(line.get("refused", 0) for line in lines)


def _one_by_one(lines: list[dict[str, Any]]) -> int:
    return sum(1 for line in lines if "why" in line)


def test_the_first_failures_of_an_address_are_written_then_counted() -> None:
    record = AuthRecord()
    lines = [body for n in range(1000) for body in record.note(_failure(), 5.0 + n * 0.01)]
    assert _one_by_one(lines) == PER_SOURCE and len(lines) == PER_SOURCE
    assert record.due(59.0) == []  # the minute lasts
    counted = record.due(61.0)
    assert counted == [{"source": "10.0.0.1", "refused": 1000 - PER_SOURCE, "doors": ["op"]}]
    assert record.due(62.0) == []  # said once


def test_a_new_minute_writes_the_last_ones_count_first_then_starts_again() -> None:
    record = AuthRecord()
    for _ in range(PER_SOURCE + 3):
        record.note(_failure(door="cdp"), 1.0)
    lines = record.note(_failure(door="live"), 60.5)
    assert lines[0] == {"source": "10.0.0.1", "refused": 3, "doors": ["cdp"]}
    assert lines[1]["door"] == "live" and lines[1]["why"] == "unknown token"


def test_every_failure_is_accounted_for_whatever_the_flood() -> None:
    """100,000 failures from 20,000 addresses over three minutes: each one
    is a line of its own or counted in one, and no minute writes more than
    TOTAL + NAMED + 1 lines."""
    record = AuthRecord(max_held=1000)
    per_minute: dict[int, int] = {}
    lines: list[dict[str, Any]] = []
    for n in range(100_000):
        now = n * 180.0 / 100_000
        got = record.note(_failure(f"10.{n % 20_000 // 256}.{n % 256}.1", "mcp"), now)
        per_minute[int(now // 60)] = per_minute.get(int(now // 60), 0) + len(got)
        lines += got
    last = record.due(240.0)
    per_minute[4] = len(last)
    lines += last
    assert _one_by_one(lines) + _refused(lines) == 100_000
    assert max(per_minute.values()) <= TOTAL + NAMED + 1, per_minute
    assert any(line.get("source", "") is None for line in lines)  # the rest, together


def test_one_address_cannot_take_every_line_of_a_minute() -> None:
    record = AuthRecord()
    for _ in range(500):
        record.note(_failure("10.0.0.66"), 1.0)
    others = [record.note(_failure(f"10.0.1.{n}"), 2.0) for n in range(TOTAL - PER_SOURCE)]
    assert all(len(lines) == 1 for lines in others)


def test_a_line_says_the_door_source_path_and_why() -> None:
    failure = Failure("cdp", "172.17.0.1", "/devtools/browser/x\x00y", "no token", {"user": "bob"})
    assert failure.body() == {
        "door": "cdp",
        "source": "172.17.0.1",
        "path": "/devtools/browser/…",
        "why": "no token",
        "claimed": {"user": "bob"},
    }


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/devtools/browser/x&token=alice-token-5f1c", "/devtools/browser/…"),
        ("/devtools/page/alice-token-5f1c", "/devtools/page/…"),
        ("/mcp&token=alice-token-5f1c", "/…"),
        ("/mcp/ALICETOKEN", "/mcp/…"),
        ("/v1/browser/tabs/list", "/…/browser/tabs/list"),
        ("/json/version", "/json/version"),
    ],
)
def test_a_path_keeps_its_routes_words_only(path: str, shape: str) -> None:
    """A red team put its real token in the path (``&token=`` with no ``?``):
    the line kept it. Only a route's words are kept now."""
    assert path_shape(path) == shape


def test_a_claimed_name_that_is_a_token_is_withheld() -> None:
    known = ["alice-token", "control-token"]
    got = claimed({"user": WRONG, "role": "alice-token"}, WRONG, known)
    assert got == {"user": "withheld", "role": "withheld"}
    got = claimed({"user": "bob\n" + "x" * 100, "role": None}, WRONG, known)
    assert got == {"user": "bob?" + "x" * 60}


def test_the_apps_doors() -> None:
    assert door_of_app_path("/mcp") == "mcp"
    assert door_of_app_path("/mcp/x") == "mcp"
    assert door_of_app_path("/live/frame") == "live"
    assert door_of_app_path("/v1/browser/tabs") == "op"
    assert door_of_app_path("/mcpx") == "op"
    assert door_of_app_path("/metrics") == "op"


async def test_a_refusal_for_the_token_is_reported_and_answered_as_before() -> None:
    """The middleware reports a 401 (never the token) and the client gets
    the same answer; other refusals are not reported."""
    settings = Settings(users={"alice": "alice-token"}, control_token="control-token")
    reported: list[Failure] = []

    async def report(failure: Failure) -> None:
        reported.append(failure)

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/forbidden":
            raise AccessDenied("not yours")
        raise AccessDenied("unknown token: use a token from AGENTENV_USERS", status=401)

    app = web.Application(
        middlewares=[
            error_middleware(lambda: "/x"),
            auth_middleware(settings, door_of_app_path, report),
        ]
    )
    app.router.add_get("/{path:.*}", handler)
    async with TestClient(TestServer(app)) as client:
        answer = await client.get(f"/live?token={WRONG}&user=bob")
        assert answer.status == 401
        assert "unknown token" in (await answer.json())["error"]["message"]
        answer = await client.get("/v1/x", headers={"AgentEnv-Role": "shopper"})
        assert answer.status == 401
        assert (await client.get("/forbidden")).status == 403
    assert [(f.door, f.why, dict(f.claimed)) for f in reported] == [
        ("live", "unknown token", {"user": "bob"}),
        ("op", "no token", {"role": "shopper"}),
    ]
    assert reported[0].source == "127.0.0.1"
    assert WRONG not in json.dumps([f.body() for f in reported])
