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
