"""The bounds of agents' big messages in flight (relay/memory.py)."""

from __future__ import annotations

from agentenv.relay.memory import InFlight


def test_a_users_big_messages_are_bounded_and_others_are_not() -> None:
    mib = 1024 * 1024
    inflight = InFlight(per_user=64 * mib, total=100 * mib)
    assert inflight.take("alice", 30 * mib) is None
    assert inflight.take("alice", 30 * mib) is None
    refused = inflight.take("alice", 30 * mib)
    assert refused is not None and "AGENTENV_USER_INFLIGHT_BYTES" in refused
    assert inflight.take("bob", 30 * mib) is None  # Bob's own share
    everyone = inflight.take("carol", 30 * mib)
    assert everyone is not None and "AGENTENV_RELAY_INFLIGHT_BYTES" in everyone
    inflight.give("alice", 30 * mib)
    assert inflight.take("carol", 30 * mib) is None
    inflight.give("alice", 30 * mib)
    inflight.give("bob", 30 * mib)
    inflight.give("carol", 30 * mib)
    assert inflight.held == {} and inflight.everyone == 0
    assert InFlight(0, 0).take("anyone", 10**12) is None  # no bounds
