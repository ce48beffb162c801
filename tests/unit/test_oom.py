"""The kernel's kills for memory, read on both cgroup versions (issue 40: the
exit line said "killed or crashed" on a cgroup v1 engine, where
``memory.events`` does not exist)."""

from __future__ import annotations

from pathlib import Path

from agentenv.relay.oom import RECENT_S, OomKills, OomWatch, oom_kills, read_oom_kills, why_exited

#: cgroup v2's memory.events, as the kernel writes it.
V2 = "low 0\nhigh 0\nmax 532\noom 1\noom_kill 1\noom_group_kill 0\n"
#: cgroup v1's memory.oom_control (Linux 4.13 and later), as read on this engine.
V1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"


def test_cgroup_v2_memory_events() -> None:
    assert oom_kills(V2, None) == OomKills(1, "memory.events")


def test_cgroup_v1_oom_control() -> None:
    assert oom_kills(None, V1) == OomKills(3, "memory.oom_control")


def test_v2_is_read_first_when_both_are_there() -> None:
    assert oom_kills(V2, V1) == OomKills(1, "memory.events")


def test_no_count_is_none_not_zero() -> None:
    """A v1 kernel older than 4.13 has no oom_kill line; memory.failcnt
    (limit hits, kills or not) is not read as kills."""
    old_v1 = "oom_kill_disable 0\nunder_oom 0\n"
    assert oom_kills(None, old_v1) is None
    assert oom_kills(None, None) is None
    assert oom_kills("oom_kill many\n", None) is None
    assert oom_kills("", "") is None


def test_the_exit_names_a_kill_on_either_version() -> None:
    v2_later = V2.replace("oom_kill 1", "oom_kill 2")
    v1_later = V1.replace("oom_kill 3", "oom_kill 4")
    for before, after, source in (
        (oom_kills(V2, None), oom_kills(v2_later, None), "memory.events"),
        (oom_kills(None, V1), oom_kills(None, v1_later), "memory.oom_control"),
    ):
        why = why_exited(before, after)
        assert why is not None and why.startswith("out of memory")
        assert f"{source} oom_kill" in why
        assert why_exited(before, before) is None  # no new kill: no cause named
    assert why_exited(None, OomKills(1, "memory.events")) is None


def test_read_from_a_cgroup_tree(tmp_path: Path) -> None:
    assert read_oom_kills(tmp_path) is None
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory/memory.oom_control").write_text(V1)
    assert read_oom_kills(tmp_path) == OomKills(3, "memory.oom_control")
    (tmp_path / "memory.events").write_text(V2)
    assert read_oom_kills(tmp_path) == OomKills(1, "memory.events")


def test_a_look_between_the_kill_and_the_exit_still_names_it() -> None:
    """The periodic look fell after the kill and before the connection's
    end (seen on a loaded machine): the exit still says out of memory."""
    watch = OomWatch(last=OomKills(0, "memory.events"))
    watch.looked(OomKills(1, "memory.events"), now=100.0)
    why = watch.exited(OomKills(1, "memory.events"), now=101.0)
    assert why is not None and "oom_kill 0 -> 1" in why


def test_an_old_kill_is_not_named_and_a_rise_is_named_once() -> None:
    watch = OomWatch(last=OomKills(0, "memory.events"))
    watch.looked(OomKills(1, "memory.events"), now=100.0)
    assert watch.exited(OomKills(1, "memory.events"), now=100.0 + RECENT_S + 1) is None
    # A rise at the exit itself is named; the next exit, with no rise, is not.
    assert watch.exited(OomKills(2, "memory.events"), now=200.0) is not None
    assert watch.exited(OomKills(2, "memory.events"), now=201.0) is None
    # No count at all (a kernel without it): nothing named.
    assert OomWatch().exited(None, now=1.0) is None
