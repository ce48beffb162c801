"""The one call/answer matcher under both CDP links (agentenv.calls)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentenv.calls import Calls


class _Socket:
    """What Calls needs of a WebSocket: sent texts, kept."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_str(self, text: str) -> None:
        self.sent.append(json.loads(text))


async def test_answers_end_their_own_command_and_others_are_not_answers() -> None:
    calls, ws = Calls(), _Socket()
    first = asyncio.create_task(calls.send(ws, "A.a", {}, None, 5))  # type: ignore[arg-type]
    second = asyncio.create_task(calls.send(ws, "B.b", {"x": 1}, "S", 5))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert [m["id"] for m in ws.sent] == [1, 2] and ws.sent[1]["sessionId"] == "S"
    assert not calls.answered({"method": "Page.loadEventFired", "params": {}})
    assert calls.answered({"id": 2, "result": {"b": True}})
    assert calls.answered({"id": 99, "result": {}})  # an answer, though no one waits for it
    assert (await second)["result"] == {"b": True}
    calls.fail(ConnectionError("gone"))
    with pytest.raises(ConnectionError, match="gone"):
        await first


async def test_no_answer_in_time_is_a_timeout_and_nothing_is_kept() -> None:
    calls, ws = Calls(), _Socket()
    with pytest.raises(TimeoutError):
        await calls.send(ws, "A.a", {}, None, 0.01)  # type: ignore[arg-type]
    assert not calls._waiting


async def test_a_session_that_ends_answers_only_the_commands_waiting_on_it() -> None:
    """Chromium answers nothing sent on a session whose tab closed (a capture
    of a busy page waits forever): its end answers each, as Chromium answers
    a session it does not have; other sessions' commands and the browser's wait."""
    calls, ws = Calls(), _Socket()
    on_s = asyncio.create_task(calls.send(ws, "Page.captureScreenshot", {}, "S", 5))  # type: ignore[arg-type]
    on_t = asyncio.create_task(calls.send(ws, "Page.captureScreenshot", {}, "T", 5))  # type: ignore[arg-type]
    browser = asyncio.create_task(calls.send(ws, "Target.getTargets", {}, None, 5))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    calls.detached("S")
    answer = await on_s
    assert answer["id"] == 1 and answer["error"]["code"] == -32001, answer
    assert "Session with given id not found" in answer["error"]["message"]
    await asyncio.sleep(0)
    assert not on_t.done() and not browser.done()
    assert calls.answered({"id": 2, "result": {"data": ""}})
    assert calls.answered({"id": 3, "result": {"targetInfos": []}})
    assert (await on_t)["result"] == {"data": ""} and "error" not in await browser
    assert not calls._waiting and not calls._on
