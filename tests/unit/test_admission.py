"""The queue instead of a refusal (:mod:`agentenv.admission`)."""

from __future__ import annotations

import asyncio

import pytest

from agentenv.admission import Admission, Full, Gate, Place


def _rule(capacity: int = 2, per_key: int = 0, queue: int = 2, wait: float = 10) -> Admission:
    return Admission(capacity, per_key, queue, wait, what="connections")


def test_places_are_taken_then_newcomers_wait_in_order_then_the_queue_is_full() -> None:
    rule = _rule()
    assert rule.ask("a", 0) == Place("a")
    assert rule.ask("b", 0) == Place("b")
    first, second = rule.ask("c", 1), rule.ask("d", 2)
    assert isinstance(first, int) and isinstance(second, int)
    assert rule.length() == 2 and rule.oldest_wait(5) == 4
    with pytest.raises(Full) as full:
        rule.ask("e", 3)
    # By the first waiter's end (1 + 10) a place in the queue has freed.
    assert full.value.retry_after == 8
    assert "all 2 connections are taken" in full.value.why
    assert "the queue is full" in full.value.why
    assert rule.release(Place("a")) == [(first, Place("c"))]
    assert rule.release(Place("b")) == [(second, Place("d"))]
    assert rule.length() == 0 and rule.taken == 2


def test_a_waiter_held_by_its_own_share_holds_up_no_one_behind_it() -> None:
    rule = _rule(capacity=3, per_key=1)
    assert rule.ask("a", 0) == Place("a")
    held = rule.ask("a", 0)  # a's own share is spent
    assert isinstance(held, int)
    assert rule.ask("b", 1) == Place("b")  # room for b: it does not queue behind a
    assert rule.release(Place("b")) == []  # still no room for a
    assert rule.release(Place("a")) == [(held, Place("a"))]
    assert rule.by_key == {"a": 1}


def test_giving_up_leaves_the_queue_and_says_why() -> None:
    rule = _rule(capacity=1, per_key=1)
    rule.ask("a", 0)
    ticket = rule.ask("a", 0)
    assert isinstance(ticket, int)
    refusal = rule.give_up(ticket, 10)
    assert refusal is not None and "a holds 1 connections" in refusal.why
    assert "waited 10 s" in refusal.why and refusal.retry_after == 1
    assert rule.length() == 0 and rule.give_up(ticket, 11) is None
    assert rule.release(Place("a")) == [] and rule.taken == 0 and rule.by_key == {}


def test_no_queue_refuses_at_once_and_no_bound_never_waits() -> None:
    rule = _rule(capacity=1, queue=0)
    rule.ask("a", 0)
    with pytest.raises(Full):
        rule.ask("b", 0)
    free = _rule(capacity=0, per_key=0, queue=0)
    assert all(free.ask("a", 0) == Place("a") for _ in range(100))


async def test_the_gate_lets_a_waiter_in_when_a_place_frees() -> None:
    gate = Gate(_rule(capacity=1, queue=4, wait=5))
    order: list[str] = []
    released = asyncio.Event()

    async def first() -> None:
        async with gate.enter("a"):
            order.append("a in")
            await released.wait()
        order.append("a out")

    async def second() -> None:
        async with gate.enter("b"):
            order.append("b in")

    one = asyncio.create_task(first())
    await asyncio.sleep(0)
    two = asyncio.create_task(second())
    await asyncio.sleep(0.05)
    assert order == ["a in"] and gate.admission.length() == 1
    released.set()
    await asyncio.wait_for(asyncio.gather(one, two), 5)
    assert order == ["a in", "a out", "b in"]
    assert gate.admission.taken == 0 and gate.admission.length() == 0


async def test_the_gate_answers_full_when_the_wait_runs_out_or_the_client_went() -> None:
    gate = Gate(_rule(capacity=1, queue=4, wait=0.3))
    async with gate.enter("a"):
        with pytest.raises(Full) as full:
            await asyncio.wait_for(gate.enter("b").__aenter__(), 5)
        assert "waited 0 s in the queue" in full.value.why
        gone = asyncio.get_running_loop().time() + 0.1
        slow = Gate(_rule(capacity=1, queue=4, wait=30))
        async with slow.enter("a"):
            with pytest.raises(Full):
                waiting = slow.enter("b", gone=lambda: asyncio.get_running_loop().time() > gone)
                await asyncio.wait_for(waiting.__aenter__(), 5)
            assert slow.admission.length() == 0
        assert gate.admission.length() == 0
    assert gate.admission.taken == 0


async def test_a_waiter_cancelled_gives_its_place_on() -> None:
    gate = Gate(_rule(capacity=1, queue=4, wait=30))
    held = asyncio.Event()
    let_go = asyncio.Event()

    async def holder() -> None:
        async with gate.enter("a"):
            held.set()
            await let_go.wait()

    async def waiter(name: str, into: list[str]) -> None:
        async with gate.enter(name):
            into.append(name)

    got: list[str] = []
    first = asyncio.create_task(holder())
    await held.wait()
    cancelled = asyncio.create_task(waiter("b", got))
    behind = asyncio.create_task(waiter("c", got))
    await asyncio.sleep(0.05)
    cancelled.cancel()
    let_go.set()
    await asyncio.wait_for(asyncio.gather(first, behind), 5)
    assert got == ["c"] and cancelled.cancelled()
    assert gate.admission.taken == 0 and gate.admission.length() == 0


def test_one_key_fills_no_more_of_the_queue_than_its_share() -> None:
    rule = _rule(capacity=2, per_key=1, queue=8)
    rule.ask("a", 0)
    assert isinstance(rule.ask("a", 0), int)
    with pytest.raises(Full) as full:
        rule.ask("a", 0)
    assert "as many of its own wait" in full.value.why
    rule.ask("b", 0)
    assert isinstance(rule.ask("b", 0), int)  # b's own place in the queue
