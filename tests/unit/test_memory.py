"""The bounds of agents' big messages in flight (relay/memory.py)."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from agentenv.relay.memory import (
    COUNTED,
    OBJECT_BYTES,
    STEP,
    STRINGS_SKIPPED,
    VALUE_BYTES,
    InFlight,
    Meter,
    held_bytes,
)


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


def test_a_meter_counts_what_is_read_until_it_is_handed_on() -> None:
    mib = 1024 * 1024
    reading = InFlight(per_user=4 * mib, total=6 * mib)
    first, second = Meter(reading, "alice"), Meter(reading, "alice")
    assert first.read(COUNTED - 1) is None and first.held == 0  # small: costs nothing
    assert first.read(2 * mib) is None and first.held >= first.seen
    assert first.held % STEP == 0
    assert second.read(1 * mib) is None
    why = second.read(1 * mib)  # alice's two partial messages: past her share
    assert why is not None and "AGENTENV_USER_INFLIGHT_BYTES" in why and "read" in why
    assert second.over == why and second.read(10) is None  # said once
    bobs = Meter(reading, "bob")
    assert bobs.read(2 * mib) is None  # Bob's own share...
    carol = Meter(reading, "carol")
    assert carol.read(2 * mib) is not None  # ...and the relay's bound
    first.handed_on(b"x" * first.seen)
    assert first.held == 0 and first.seen == 0
    for meter in (second, bobs, carol):
        meter.stop()
        assert meter.read(10 * mib) is None  # stopped: it counts no more
    assert reading.held == {} and reading.everyone == 0


def test_a_message_handed_on_lets_go_of_its_own_bytes_only() -> None:
    """A tiny message handed on must not let go of a big one read after it
    and not yet whole (one agent's sixteen connections held 496 MiB so)."""
    mib = 1024 * 1024
    reading = InFlight(per_user=64 * mib, total=256 * mib)
    meter = Meter(reading, "alice")
    meter.read(100)  # a tiny command
    meter.read(31 * mib)  # then most of a big one
    meter.handed_on(b"x" * 100)
    assert meter.held >= 31 * mib and reading.held["alice"] == meter.held
    meter.handed_on(b"x" * 31 * mib)
    assert meter.held == 0 and reading.held == {}


@pytest.mark.parametrize(
    "unit",
    [
        "{}",
        "[]",
        "0",
        "1.5",
        '"ab"',
        '{"a":1}',
        '{"a":"b","c":"d"}',
        '{"k":"v","n":[1,2]}',
        '[{"a":{"b":[]}}]',
        '{"abcdefgh":{"abcdefgh":{}}}',
        '"' + "x" * 100 + '"',
        "null",
    ],
)
def test_what_a_message_holds_is_never_less_than_its_parse_keeps(unit: str) -> None:
    """A message of many small values holds far more than its length once
    parsed (``[],[],…``: 20 times or more): held_bytes is at least what
    orjson's parse keeps, measured, for each shape."""
    text = "[" + ",".join([unit] * (256 * 1024 // (len(unit) + 1))) + "]"
    tracemalloc.start()
    try:
        parsed = orjson.loads(text)
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parsed  # it was read, and is still held
    assert held_bytes(text) >= kept, (unit, held_bytes(text), kept)


@pytest.mark.parametrize(
    "text",
    [
        "y" * (30 << 20),  # an evaluate's argument
        "a,b,[c]{d}," * (3 << 20),  # a CSV or a script: commas and brackets
        'var a = "x", b = [1, {c: "d"}];\n' * (1 << 20),  # quotes escaped in JSON
    ],
    ids=["plain", "commas", "escaped-quotes"],
)
def test_a_long_string_holds_about_its_length(text: str) -> None:
    """A 30 MiB string (an evaluate's argument, a script, a CSV) is not
    counted as more than it holds: the commas and brackets in it begin no
    value. Past a bound the string is skipped to count them; under it the
    first count stands."""
    message = orjson.dumps({"id": 1, "method": "Runtime.evaluate", "params": {"expression": text}})
    data = message.decode()
    assert held_bytes(data, 64 << 20) < len(data) + 10 * OBJECT_BYTES
    if text.startswith("y"):
        assert held_bytes(data) < len(data) + 10 * OBJECT_BYTES
    else:  # no bound: never skipped, counted larger
        assert held_bytes(data) > 2 * len(data)


def test_many_strings_are_counted_whole_past_what_is_skipped() -> None:
    """A message of more strings than :data:`STRINGS_SKIPPED` is not skipped
    string by string (microseconds each): every comma counts."""
    many = orjson.dumps({"pad": ["a,b"] * (STRINGS_SKIPPED + 10)}).decode()
    few = orjson.dumps({"pad": ["a,b" * 100] * (STRINGS_SKIPPED // 10)}).decode()
    assert held_bytes(many, 1) >= len(many) + VALUE_BYTES * 2 * STRINGS_SKIPPED
    assert held_bytes(few, 1) < len(few) + VALUE_BYTES * (STRINGS_SKIPPED // 10 + 5)
