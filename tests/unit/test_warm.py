"""The warm pool's rule (relay/warm.py): how many to make, which to hand
over, which to throw away; and what a link that sees every scope is shown
of a warm context (nothing). No browser."""

from __future__ import annotations

import json
from typing import Any

import orjson

from agentenv.access import Identity
from agentenv.relay import core
from agentenv.relay.client_state import InLog
from agentenv.relay.core import ClientState, Down, Kind, Pending
from agentenv.relay.warm import FAILURE_WAIT_MAX_S, FAILURE_WAIT_S, Warm, WarmPool
from tests.support.known import known


def _filled(pool: WarmPool, *names: str) -> None:
    for name in names:
        generation = pool.begin()
        pool.named(generation, name)
        assert pool.made(generation, Warm(name, f"tab-{name}"))


def test_it_makes_as_many_as_its_size_counting_those_under_way() -> None:
    pool = WarmPool(2)
    assert pool.wanted() == 2
    generation = pool.begin()
    assert pool.wanted() == 1  # one under way counts
    pool.named(generation, "c1")
    assert pool.made(generation, Warm("c1", "t1"))
    assert pool.wanted() == 1
    _filled(pool, "c2")
    assert pool.wanted() == 0
    assert WarmPool(0).wanted() == 0


def test_it_hands_over_the_oldest_once_and_asks_for_another() -> None:
    pool = WarmPool(2)
    _filled(pool, "c1", "c2")
    taken = pool.take()
    assert taken == Warm("c1", "tab-c1")
    assert not pool.withheld("c1")  # the scope's now: no longer hidden from it
    assert pool.withheld("c2")
    assert pool.wanted() == 1
    assert pool.take() == Warm("c2", "tab-c2")
    assert pool.take() is None  # none ready: the caller makes one now


def test_a_context_is_hidden_from_the_moment_chromium_names_it() -> None:
    """Its tab's first event comes before the make ends: it is withheld
    already, and never handed over before it is ready."""
    pool = WarmPool(1)
    generation = pool.begin()
    pool.named(generation, "c1")
    assert pool.withheld("c1") and pool.take() is None
    assert pool.contexts() == ["c1"]
    assert not pool.withheld(None) and not pool.withheld("other")


def test_a_reset_throws_away_every_warm_context_and_every_make_under_way() -> None:
    pool = WarmPool(2)
    _filled(pool, "c1")
    old = pool.begin()
    pool.named(old, "c2")
    assert sorted(pool.reset()) == ["c1", "c2"]
    assert not pool.withheld("c1") and not pool.withheld("c2")
    # The make begun before the reset ends after it: stale, disposed of.
    assert not pool.made(old, Warm("c2", "t2"))
    assert pool.take() is None
    assert pool.wanted() == 2  # the new generation fills again
    assert pool.failed(old, "c3") == 0.0  # a stale failure changes nothing
    assert pool.wanted() == 2


def test_a_spoiled_context_leaves_the_pool_and_is_never_handed_over() -> None:
    pool = WarmPool(2)
    _filled(pool, "c1")
    assert pool.spoiled("c1")
    assert pool.take() is None
    assert not pool.spoiled("c1")  # once
    assert not pool.spoiled(None) and not pool.spoiled("a-scope's")
    # Spoiled while being made: thrown away when the make ends.
    generation = pool.begin()
    pool.named(generation, "c2")
    assert pool.spoiled("c2")
    assert not pool.made(generation, Warm("c2", "t2"))
    assert pool.take() is None
    assert pool.wanted() == 2


def test_failures_wait_longer_each_time_bounded_and_a_success_starts_over() -> None:
    pool = WarmPool(1)
    waits = []
    for _ in range(10):
        generation = pool.begin()
        waits.append(pool.failed(generation))
    assert waits[:3] == [FAILURE_WAIT_S, 2 * FAILURE_WAIT_S, 4 * FAILURE_WAIT_S]
    assert max(waits) == FAILURE_WAIT_MAX_S
    assert pool.wanted() == 1  # tried again, never given up
    _filled(pool, "c1")
    generation = pool.begin()
    assert pool.failed(generation, "c2") == FAILURE_WAIT_S
    assert not pool.withheld("c2")


# -- what a link that sees every scope (the control token's) is shown ---------

WARM_CONTEXT, WARM_TAB, OPEN_CONTEXT, OPEN_TAB = "CTX-WARM", "T-WARM", "CTX-OPEN", "T-OPEN"


def _control() -> ClientState:
    contexts = {WARM_TAB: WARM_CONTEXT, OPEN_TAB: OPEN_CONTEXT}
    return ClientState(
        9,
        Identity("agentenv", control=True),
        known=known(contexts, withheld=lambda context: context == WARM_CONTEXT),
    )


def _send(state: ClientState, method: str, params: dict[str, Any]) -> core.Step:
    message = {"id": 3, "method": method, "params": params}
    return core.receive(state, json.dumps(message), "/var/lib/agentenv/downloads")


def _up(state: ClientState, message: dict[str, Any]) -> core.Downstream:
    return core.from_upstream(state, orjson.dumps(message).decode())


def _answer(state: ClientState, method: str, result: dict[str, Any]) -> core.Downstream:
    state.pending[(None, 3)] = Pending(0, method, {}, in_log=InLog.KEPT)
    return _up(state, {"id": 3, "result": result})


def test_the_control_token_reaches_no_warm_context_by_id() -> None:
    state = _control()
    for method in ("Target.attachToTarget", "Target.closeTarget", "Target.activateTarget"):
        flat = {"flatten": True} if method == "Target.attachToTarget" else {}
        step = _send(state, method, {"targetId": WARM_TAB, **flat})
        assert step.kind is Kind.BLOCK and step.verdict is not None, method
        assert step.verdict.rule == "scope" and step.verdict.message.startswith("No target")
        assert _send(state, method, {"targetId": OPEN_TAB, **flat}).kind is not Kind.BLOCK, method
    for method, params in (
        ("Target.createTarget", {"url": "about:blank", "browserContextId": WARM_CONTEXT}),
        ("Target.disposeBrowserContext", {"browserContextId": WARM_CONTEXT}),
        ("Storage.getCookies", {"browserContextId": WARM_CONTEXT}),
    ):
        assert _send(state, method, params).kind is Kind.BLOCK, method
        opened = {**params, "browserContextId": OPEN_CONTEXT}
        assert _send(state, method, opened).kind is not Kind.BLOCK, method


def test_the_control_tokens_listings_events_and_auto_attach_leave_warm_contexts_out() -> None:
    state = _control()
    infos = [
        {"targetId": t, "type": "page", "url": "about:blank", "browserContextId": c}
        for t, c in ((WARM_TAB, WARM_CONTEXT), (OPEN_TAB, OPEN_CONTEXT))
    ]
    down = _answer(state, "Target.getTargets", {"targetInfos": infos})
    assert down.data is not None
    listed = orjson.loads(down.data)["result"]["targetInfos"]
    assert [i["targetId"] for i in listed] == [OPEN_TAB]
    down = _answer(
        state,
        "Target.getBrowserContexts",
        {"browserContextIds": [WARM_CONTEXT, OPEN_CONTEXT], "defaultBrowserContextId": "D"},
    )
    assert down.data is not None
    assert orjson.loads(down.data)["result"] == {
        "browserContextIds": [OPEN_CONTEXT],
        "defaultBrowserContextId": "D",
    }
    for method in ("Target.targetCreated", "Target.targetInfoChanged"):
        warm = {"method": method, "params": {"targetInfo": infos[0]}}
        assert _up(state, warm).kind is Down.DROP, method
        assert _up(state, {"method": method, "params": {"targetInfo": infos[1]}}).kind is Down.PASS
    for method in ("Target.targetDestroyed", "Target.targetCrashed"):
        assert _up(state, {"method": method, "params": {"targetId": WARM_TAB}}).kind is Down.DROP
        assert _up(state, {"method": method, "params": {"targetId": OPEN_TAB}}).kind is Down.PASS
    attached = {
        "method": "Target.attachedToTarget",
        "params": {"sessionId": "X", "targetInfo": infos[0], "waitingForDebugger": True},
    }
    down = _up(state, attached)
    assert down.kind is Down.DETACH and down.session == "X" and down.resume
    attached["params"] = {"sessionId": "Y", "targetInfo": infos[1], "waitingForDebugger": False}
    assert _up(state, attached).kind is Down.PASS


def test_with_no_warm_context_the_control_tokens_view_is_untouched() -> None:
    state = ClientState(9, Identity("agentenv", control=True))
    info = {"targetId": "T", "type": "page", "url": "about:blank", "browserContextId": "C"}
    assert _up(state, {"method": "Target.targetCreated", "params": {"targetInfo": info}}).kind is (
        Down.PASS
    )
    assert (
        _send(state, "Target.attachToTarget", {"targetId": "T", "flatten": True}).kind
        is not Kind.BLOCK
    )
