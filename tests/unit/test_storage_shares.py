"""Each scope's share of storage (relay/storage_shares.py)."""

from __future__ import annotations

from agentenv.relay.storage_shares import Shares

MIB = 1024 * 1024


def test_a_scopes_quotas_never_add_up_past_its_budget() -> None:
    shares = Shares(origin_bytes=128 * MIB, scope_bytes=256 * MIB)
    quotas = [shares.quota("bob", ("ctx", f"http://o{i}")) for i in range(10)]
    assert quotas[0] == 128 * MIB  # an origin alone gets its own bound
    assert quotas[1] == 64 * MIB  # then half of what is left, each time
    assert all(q >= 1 for q in quotas)  # never 0: Chromium reads 0 as none
    assert shares.reserved("bob") <= 256 * MIB
    assert shares.quota("bob", ("ctx", "http://o0")) == 128 * MIB  # asked again: the same
    assert shares.quota("alice", ("home", "http://o0")) == 128 * MIB  # another scope's own


def test_rebalancing_gives_each_what_it_uses_and_shares_what_is_free() -> None:
    shares = Shares(origin_bytes=128 * MIB, scope_bytes=256 * MIB)
    a, b, c = (("ctx", f"http://{n}") for n in "abc")
    for key in (a, b, c):
        shares.quota("bob", key)
    changed = shares.rebalance("bob", {a: 10 * MIB, b: 2 * MIB, c: 0})
    free = 256 * MIB - 12 * MIB
    each = free // 6
    assert changed[a] == 10 * MIB + each and changed[c] == each, changed
    assert shares.reserved("bob") <= 256 * MIB
    # One not measured keeps its quota, as if used up.
    before = shares.given["bob"][b]
    shares.rebalance("bob", {a: 10 * MIB, c: 0})
    assert shares.given["bob"][b] == before
    assert shares.reserved("bob") <= 256 * MIB
    # Used past the budget (written before an override landed): nothing grows.
    shares.rebalance("bob", {a: 200 * MIB, b: 100 * MIB, c: 0})
    assert shares.given["bob"][a] == 128 * MIB and shares.given["bob"][c] == 1
    shares.forget()
    assert shares.given == {}


def test_no_scope_budget_leaves_the_origins_bound() -> None:
    shares = Shares(origin_bytes=128 * MIB, scope_bytes=0)
    assert [shares.quota("bob", ("c", f"o{i}")) for i in range(3)] == [128 * MIB] * 3
    assert shares.rebalance("bob", {}) == {}
