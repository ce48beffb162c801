"""The warm pool's rule (relay/warm.py): how many to make, which to hand
over, which to throw away. No browser."""

from __future__ import annotations

from agentenv.relay.warm import FAILURE_WAIT_MAX_S, FAILURE_WAIT_S, Warm, WarmPool


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
