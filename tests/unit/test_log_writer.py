"""The writer and reader: numbering, recovery, the lock, stalled actions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentenv.log.lines import encode, seq_of
from agentenv.log.log_errors import LogLocked
from agentenv.log.numbering import Numbering, recover
from agentenv.log.reader import LogIndex, LogReader
from agentenv.log.writer import LogWriter
from agentenv.relay.effects import Begin, Ended
from agentenv.relay.relay_errors import ControlRefused
from tests.support.stack import free_port
from tests.support.timing import wait_for


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_bytes().splitlines()]


def test_numbers_taken_at_begin_lines_written_at_end(tmp_path: Path) -> None:
    path = tmp_path / "browser-t.jsonl"
    w = LogWriter.open(path)
    first = w.begin({"via": "cdp", "method": "Page.navigate"})
    second = w.begin({"via": "cdp", "method": "Runtime.evaluate"})
    assert (first, second) == (1, 2)
    w.end(second, ok=True)
    w.end(first, ok=False, error="boom")
    tab = w.record("tab", {"event": "opened", "id": "T"})
    assert tab == 3
    got = _lines(path)
    assert [g["seq"] for g in got] == [2, 1, 3]  # file order is end order
    assert got[1]["action"] == {
        "via": "cdp",
        "method": "Page.navigate",
        "ok": False,
        "error": "boom",
    }
    r = LogReader(path)
    page = r.read(0, 10)
    assert [seq_of(x) for x in page.lines] == [1, 2, 3] and page.last == 3
    assert r.read(3).lines == [] and r.read(3).last == 3
    assert [seq_of(x) for x in r.read(1, 1).lines] == [2]
    w.close()


def test_reader_holds_back_behind_an_open_action(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    w = LogWriter.open(path)
    a = w.begin({"conn": 1})
    b = w.begin({"conn": 2})
    w.end(b, ok=True)
    r = LogReader(path)
    assert r.read(0).lines == [] and r.read(0).last == 0
    w.end(a, ok=True)
    assert [seq_of(x) for x in r.read(0).lines] == [1, 2]


def test_reads_across_a_stalled_action(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    mono = Clock()
    w = LogWriter.open(path, monotonic=mono, stalled_s=60)
    stuck = w.begin({"method": "Runtime.evaluate"})
    done = w.begin({"method": "Page.navigate"})
    w.end(done, ok=True)
    r = LogReader(path)
    assert r.read(0).last == 0
    mono.now += 59
    assert w.check_stalled() == 0
    mono.now += 2
    assert w.check_stalled() == 1
    assert w.check_stalled() == 0  # once
    page = r.read(0)
    assert [seq_of(x) for x in page.lines] == [1, 2]
    stalled = json.loads(page.lines[0])["action"]
    assert stalled["ok"] is None and stalled["unfinished"] is True
    w.end(stuck, ok=True)
    outcome = json.loads(r.read(2).lines[0])
    assert outcome["seq"] == 3 and outcome["outcome"] == {"entry": 1, "ok": True}


def test_at_is_the_wall_clock_and_follows_its_steps(tmp_path: Path) -> None:
    """An action's ``at`` comes from the monotonic clock plus the wall clock's
    offset, read again at each stalled check: a step shows by the next check."""
    mono, wall = Clock(), Clock()
    wall.now = 1_790_000_000.0  # 2026-09-21T14:13:20Z
    w = LogWriter.open(tmp_path / "l.jsonl", clock=wall, monotonic=mono)
    w.end(w.begin({"conn": 0}), ok=True)  # the first, before any check
    mono.now += 1.2345
    wall.now += 1.2345
    w.end(w.begin({"conn": 1}), ok=True)
    mono.now += 0.5
    wall.now += 0.5 + 3600  # and the wall clock is stepped an hour on
    w.end(w.begin({"conn": 2}), ok=True)  # not seen until the next check
    w.check_stalled()
    w.end(w.begin({"conn": 3}), ok=True)
    w.end(w.begin({"conn": 4}, now=mono.now - 2.0), ok=True)  # the caller's reading
    w.record("reset", {"reason": "r"})  # lines written at once: the same clock
    got = [line["at"] for line in _lines(tmp_path / "l.jsonl")]
    assert got == [
        "2026-09-21T14:13:20.000Z",
        "2026-09-21T14:13:21.234Z",
        "2026-09-21T14:13:21.734Z",
        "2026-09-21T15:13:21.734Z",
        "2026-09-21T15:13:19.734Z",
        "2026-09-21T15:13:21.734Z",
    ]


def test_second_writer_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    w = LogWriter.open(path)
    with pytest.raises(LogLocked, match="another writer"):
        LogWriter.open(path)
    # Also from another process (flock is per open file description).
    code = (
        "import sys; from pathlib import Path; from agentenv.log.writer import LogWriter\n"
        "from agentenv.log.log_errors import LogLocked\n"
        f"try:\n LogWriter.open(Path({str(path)!r}))\nexcept LogLocked: sys.exit(3)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 3
    w.close()
    LogWriter.open(path).close()


def test_restart_after_a_half_written_line(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    w = LogWriter.open(path)
    for n in range(4):
        w.begin({"conn": n})
    w.end(1, ok=True)
    w.end(2, ok=True)
    w.end(4, ok=True)  # 3 was taken and never written: the writer "dies"
    os.close(w._fd)  # as a process killed: its descriptor closes, nothing more written
    with open(path, "ab") as f:
        f.write(b'{"seq":5,"at":"2026-01-01T00:00:00.000Z","act')  # torn
    w2 = LogWriter.open(path)
    assert (tmp_path / "l.jsonl.partial").read_bytes().startswith(b'{"seq":5,')
    assert path.read_bytes().endswith(b"\n")
    got = _lines(path)
    # A break names what the crash lost (it takes the next number), then the lost line.
    brk: Any = got[-2]
    assert brk["seq"] == 5 and brk["break"]["lost"] == [3], brk
    assert brk["break"]["torn"]["bytes"] == 45, brk
    assert (tmp_path / "l.jsonl.open").exists()  # while a writer has it open
    assert got[-1]["seq"] == 3 and got[-1]["lost"] == {"entry": 3}
    assert w2.size == path.stat().st_size  # the half line cut off, the lost line counted
    assert w2.begin({"op": "after"}) == 6  # numbering carries on
    w2.end(6, ok=True)
    assert w2.size == path.stat().st_size
    page = LogReader(path).read(0)
    assert [seq_of(x) for x in page.lines] == [1, 2, 3, 4, 5, 6]
    w2.close()
    assert not (tmp_path / "l.jsonl.open").exists()


def test_recover_pure() -> None:
    data = b"".join(encode({"seq": s, "at": "t", "lost": {"entry": s}}) for s in (1, 2, 5))
    found = recover(data + b'{"seq":6')
    assert found.keep == len(data) and found.partial == b'{"seq":6'
    assert found.highest == 5 and found.missing == [3, 4]
    assert recover(b"").highest == 0


def test_numbering_pure() -> None:
    n = Numbering(next_seq=10, stalled_s=5)
    assert n.take() == 10 and n.next_seq == 11
    n.open[10] = (0.0, "t", {})
    n.open[11] = (1.0, "u", {})
    assert n.stalled(4.9) == [] and [seq for seq, _ in n.stalled(5.0)] == [10]
    assert [seq for seq, _ in n.stalled(9.0)] == [11]  # each once
    assert n.unfinished == {10, 11}


def test_an_action_ended_after_it_was_written_unfinished_gets_an_outcome_once(
    tmp_path: Path,
) -> None:
    mono = Clock()
    w = LogWriter.open(tmp_path / "l.jsonl", monotonic=mono, stalled_s=5)
    slow, quick = w.begin({"conn": 1}), w.begin({"conn": 2})
    mono.now += 5
    assert w.check_stalled() == 2
    w.end(slow, ok=False, error="late")
    w.end(slow, ok=True)  # ended twice: nothing more is written
    late = w.begin({"conn": 3})
    w.end(late, ok=True)  # a new action is not taken for unfinished
    w.end(quick, ok=True)
    got = _lines(tmp_path / "l.jsonl")
    assert [(x["seq"], next(k for k in x if k not in ("seq", "at", "prev"))) for x in got] == [
        (1, "action"),
        (2, "action"),
        (3, "outcome"),
        (4, "action"),
        (5, "outcome"),
    ]
    assert got[2]["outcome"] == {"entry": 1, "ok": False, "error": "late"}
    assert got[3]["action"] == {"conn": 3, "ok": True}
    assert got[4]["outcome"] == {"entry": 2, "ok": True}


def test_index_incremental_and_grows() -> None:
    index = LogIndex()
    first = encode({"seq": 2, "at": "t", "lost": {"entry": 2}})
    index.feed(first + b'{"seq":1,"at"')
    assert index.contiguous == 0 and index.scanned == len(first)
    rest = b'{"seq":1,"at":"t","lost":{"entry":1}}\n'
    index.feed(rest)
    assert index.contiguous == 2
    assert list(index.span(0, 1000)) == [1, 2]
    for s in range(3, 5000):
        index.feed(encode({"seq": s, "at": "t", "lost": {"entry": s}}))
    assert index.contiguous == 4999 and list(index.span(4990, 3)) == [4991, 4992, 4993]


def test_reader_follows_truncation(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(encode({"seq": 1, "at": "t", "lost": {"entry": 1}}))
    r = LogReader(path)
    assert r.read(0).last == 1
    os.truncate(path, 0)
    path.write_bytes(encode({"seq": 1, "at": "t2", "lost": {"entry": 1}}))
    assert b"t2" in r.read(0).lines[0]
    assert LogReader(tmp_path / "none.jsonl").read(5).last == 5


def test_iso_times() -> None:
    from agentenv.log.lines import iso

    assert iso(0) == "1970-01-01T00:00:00.000Z"
    assert iso(1764483601.1239) == "2025-11-30T06:20:01.123Z"
    assert iso(1764483601.9999) == "2025-11-30T06:20:01.999Z"
    assert iso(1764483602.0) == "2025-11-30T06:20:02.000Z"


def test_read_range_skips_gaps_and_long_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    long_line = encode({"seq": 3, "at": "t", "lost": {"entry": 3}, "pad": "x" * (5 * 1024 * 1024)})
    path.write_bytes(
        encode({"seq": 1, "at": "t", "lost": {"entry": 1}})
        + long_line
        + encode({"seq": 4, "at": "t", "lost": {"entry": 4}})
    )
    reader = LogReader(path)
    assert reader.read(0).last == 1  # 2 is not written: reads stop before it
    assert [seq_of(x) for x in reader.read_range(1, 4)] == [1, 3, 4]


def test_typed_text_is_kept_only_once_a_check_cleared(tmp_path: Path) -> None:
    from agentenv.protocol.control import BeginAction, EndAction
    from agentenv.relay.logbook import Logbook

    book = Logbook(LogWriter.open(tmp_path / "l.jsonl"))
    begin = BeginAction(
        via="mcp",
        who="r",
        tool="browser_type",
        args={"text": "hunter2"},
        typing=["text"],
        scope=["tag-1"],
    )
    unchecked = book.begin_action(1, begin)
    # failed before typing: no check ran
    book.end_action(1, EndAction(entry=unchecked, ok=False))
    cleared = book.begin_action(1, begin)
    book.typing_checked(99, "tag-1", cleared=True)
    book.end_action(1, EndAction(entry=cleared, ok=True))
    withheld_ = book.begin_action(1, begin)
    book.typing_checked(99, "tag-1", cleared=True)
    book.typing_checked(99, "tag-1", cleared=False)
    book.end_action(1, EndAction(entry=withheld_, ok=True))
    raw: list[Any] = _lines(tmp_path / "l.jsonl")
    lines = {x["seq"]: x["action"]["args"]["text"] for x in raw}
    assert lines[unchecked] == {"withheld": "password", "length": 7}
    assert lines[cleared] == "hunter2"
    assert lines[withheld_] == {"withheld": "password", "length": 7}


def test_a_drop_tools_data_is_withheld_by_its_keys() -> None:
    from agentenv.log.argpaths import restore_paths, withhold_path

    args = {"target": "#pw", "data": {"text/plain": "hunter3", "text/html": "<b>x</b>"}}
    taken = withhold_path(args, "data.*")
    assert args["data"] == {
        "text/plain": {"withheld": "password", "length": 7},
        "text/html": {"withheld": "password", "length": 8},
    }
    restore_paths(args, taken)
    assert args["data"]["text/plain"] == "hunter3"


def test_a_tag_an_agent_gives_itself_never_puts_it_inside_anothers_action(
    tmp_path: Path,
) -> None:
    from agentenv.access import Identity
    from agentenv.protocol.control import BeginAction
    from agentenv.relay.logbook import Logbook

    book = Logbook(LogWriter.open(tmp_path / "l.jsonl"))
    reported = BeginAction(via="mcp", who="bob", tool="browser_click", scope=["mcp-tag-1"])
    action = book.begin_action(1, reported)
    bobs = book.begin(Begin(Identity("bob"), 5, "mcp-tag-1", "DOM.getDocument", {}, None))
    alices = book.begin(Begin(Identity("alice"), 6, "mcp-tag-1", "DOM.getDocument", {}, None))
    computer = book.begin(
        Begin(Identity("agentenv", control=True), 7, "mcp-tag-1", "DOM.getDocument", {}, None)
    )
    assert (book.writer.fields(bobs) or {})["within"] == action
    assert "within" not in (book.writer.fields(alices) or {})
    fields = book.writer.fields(computer) or {}
    assert fields["within"] == action and fields["who"] == "bob"  # it acts for bob
    book.typing_checked(6, "mcp-tag-1", cleared=False, identity=Identity("alice"))
    assert not book.actions[action].checked  # alice's check is not bob's action's


def test_parameters_a_command_does_not_take_are_logged_by_size(tmp_path: Path) -> None:
    """An agent's 2,000 unused parameters of 2 KB a command filled the 1 GiB
    log in 26 s (issue 22): Chromium ignores them, and the line keeps only
    their count and size; the ones the command takes stay."""
    from agentenv.access import Identity
    from agentenv.relay.logbook import Logbook

    path = tmp_path / "l.jsonl"
    book = Logbook(LogWriter.open(path))
    junk = {f"junk{i}": "x" * 2000 for i in range(2000)}
    params: dict[str, object] = {"url": "https://a.example/", **junk}
    entry = book.begin(Begin(Identity("alice"), 7, None, "Page.navigate", params, "T1"))
    book.end(Ended(entry, True))
    plain = book.begin(
        Begin(Identity("alice"), 7, None, "Page.navigate", {"url": "https://b.example/"}, "T1")
    )
    book.end(Ended(plain, True))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    logged = {x["seq"]: x["action"] for x in lines if "action" in x}
    assert path.stat().st_size < 4096, path.stat().st_size
    assert logged[entry]["params"]["url"] == "https://a.example/"
    size = len(json.dumps(junk, separators=(",", ":")))
    assert logged[entry]["params"]["unused"] == {"count": 2000, "bytes": size}, logged[entry]
    assert logged[plain]["params"] == {"url": "https://b.example/"}


def test_nested_and_list_parameters_are_bounded_like_top_level_ones(tmp_path: Path) -> None:
    """A command's parameters it does take, nested or in lists (each string
    cut at 2,000 characters), wrote a 4 MB line (4th red team): past
    PARAMS_MAX a line's params, and an action's args, are logged by their
    size and count with their first part kept; small ones are whole."""
    from agentenv.access import Identity
    from agentenv.log.lines import PARAMS_KEPT, PARAMS_MAX
    from agentenv.protocol.control import BeginAction, EndAction
    from agentenv.relay.logbook import Logbook

    path = tmp_path / "l.jsonl"
    book = Logbook(LogWriter.open(path))
    cookies = [
        {"name": f"c{i}", "domain": "a.example", "path": "/" + "p" * 1990} for i in range(2000)
    ]
    big = book.begin(
        Begin(Identity("alice"), 7, None, "Network.setCookies", {"cookies": cookies}, "T")
    )
    book.end(Ended(big, True))
    deep = {"patterns": [{"urlPattern": "https://a.example/" + "q" * 1990}] * 100}
    stalled = book.begin(Begin(Identity("alice"), 7, None, "Fetch.enable", deep, "T"))
    small = book.begin(
        Begin(Identity("alice"), 7, None, "Network.setCookies", {"cookies": cookies[:2]}, "T")
    )
    book.end(Ended(small, True))
    tool = book.begin_action(
        1, BeginAction(via="mcp", who="alice", tool="browser_fill_form", args={"fields": cookies})
    )
    book.end_action(1, EndAction(entry=tool, ok=True))
    book.writer.close()  # the one still open is written unfinished, bounded too
    raw = path.read_bytes().splitlines()
    assert max(len(x) for x in raw) < PARAMS_MAX, max(len(x) for x in raw)
    logged: dict[int, Any] = {json.loads(x)["seq"]: json.loads(x)["action"] for x in raw}
    cut = logged[big]["params"]["cut"]
    assert cut["count"] == 1 and cut["bytes"] > 4_000_000, cut
    assert cut["kept"].startswith('{"cookies":[{"name":"c0"') and len(cut["kept"]) == PARAMS_KEPT
    assert logged[stalled]["unfinished"] and logged[stalled]["params"]["cut"]["count"] == 1
    assert logged[small]["params"] == {"cookies": cookies[:2]}
    assert logged[tool]["args"]["cut"]["count"] == 1, logged[tool]


def test_a_users_log_budget_stops_that_user_only(tmp_path: Path) -> None:
    """Past their share (in all, or this minute) a user's commands and
    actions are refused, with rule log-budget on the record once a minute;
    another user's and the computer's own entries go on (issue 22)."""
    from agentenv.access import Identity
    from agentenv.protocol.control import BeginAction
    from agentenv.relay.log_budget import LogBudget
    from agentenv.relay.logbook import Logbook

    now = [1000.0]
    path = tmp_path / "l.jsonl"
    writer = LogWriter.open(path, monotonic=lambda: now[0])
    book = Logbook(writer, budget=LogBudget(50_000, 5_000))

    def navigate(who: str, n: int) -> None:
        url = f"https://{who}.example/{'p' * 200}/{n}"
        entry = book.begin(Begin(Identity(who), 7, None, "Page.navigate", {"url": url}, "T"))
        book.end(Ended(entry, True))

    count = 0
    while book.over_budget("alice") is None:
        navigate("alice", count)
        count += 1
    assert 10 < count < 40, count
    said = book.over_budget("alice")
    assert said is not None and "log-budget" in said and "this minute" in said
    assert book.over_budget("bob") is None and book.over_budget("agentenv") is None
    for _ in range(3):
        book.budget_refused("alice", 7, "Page.navigate", said)
    with pytest.raises(ControlRefused, match="log-budget"):
        book.begin_action(7, BeginAction(via="api", who="alice", op="navigate", acts="acting"))
    navigate("bob", 0)  # Bob's go on
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    refusals = [
        x["action"] for x in lines if (x["action"].get("guard") or {}).get("rule") == "log-budget"
    ]
    assert len(refusals) == 1 and refusals[0]["refused"] == 1, refusals  # one line a minute
    # The next minute, Alice may write again, until her total share is spent.
    now[0] += 60
    assert book.over_budget("alice") is None
    for _ in range(1000):
        said = book.over_budget("alice")
        if said is not None and "this minute" in said:
            now[0] += 60  # wait the minute out
        elif said is not None:
            break
        navigate("alice", count)
        count += 1
    total = book.over_budget("alice")
    assert total is not None and "AGENTENV_LOG_USER_MAX_BYTES" in total, total
    assert book.over_budget("bob") is None


def test_a_programs_own_refusal_is_on_the_record_with_its_rule(tmp_path: Path) -> None:
    """AgentEnv.endAction's guard mark (the app refusing an MCP session)."""
    from agentenv.protocol.control import BeginAction, EndAction, GuardMark
    from agentenv.relay.logbook import Logbook

    book = Logbook(LogWriter.open(tmp_path / "l.jsonl"))
    begun = book.begin_action(1, BeginAction(via="mcp", who="alice", op="mcp/initialize"))
    mark = GuardMark(rule="mcp-sessions")
    book.end_action(1, EndAction(entry=begun, ok=False, error="refused", guard=mark))
    plain = book.begin_action(1, BeginAction(via="mcp", who="alice", op="mcp/initialize"))
    book.end_action(1, EndAction(entry=plain, ok=True))
    raw: list[Any] = _lines(tmp_path / "l.jsonl")
    by_seq = {x["seq"]: x["action"] for x in raw}
    assert by_seq[begun]["guard"] == {"rule": "mcp-sessions", "action": "blocked"}
    assert by_seq[begun]["ok"] is False and "guard" not in by_seq[plain]


def test_the_budgets_minute_turns_within_a_millisecond(tmp_path: Path) -> None:
    """A begin in the millisecond of the one before, but past the minute's
    end on the monotonic clock, turns the budgets' minute (the writer reads
    its millisecond only when it changes: the minute's end bounds that)."""
    mono, wall = Clock(), Clock()
    mono.now, wall.now = 59.9997, 1_790_000_000.0003  # the wall millisecond spans mono 60.0
    w = LogWriter.open(tmp_path / "l.jsonl", clock=wall, monotonic=mono)
    w.end(w.begin({"who": "alice"}), ok=True)
    assert w.minute == 0 and w.spent_this_minute("alice") > 0
    mono.now, wall.now = 60.0001, 1_790_000_000.0007  # the same wall millisecond
    w.end(w.begin({"who": "alice"}), ok=True)
    assert w.minute == 1
    assert 0 < w.spent_this_minute("alice") < w.spent["alice"]


def _any(path: Path) -> list[Any]:
    return _lines(path)


def test_a_pages_tab_lines_count_against_its_scopes_user(tmp_path: Path) -> None:
    """A page navigating itself costs the share of the user whose scope its
    tab is in; once that share is spent its lines are counted, one
    ``tabs/counted`` line a minute, and another user's lines go on (issue
    40: self-navigating tabs went on filling the log after their agent was
    refused, until every user was)."""
    from agentenv.access import Identity
    from agentenv.log.lines import TABS_COUNTED
    from agentenv.relay.log_budget import LogBudget
    from agentenv.relay.logbook import Logbook

    now = [1000.0]
    path = tmp_path / "l.jsonl"
    writer = LogWriter.open(path, monotonic=lambda: now[0])
    book = Logbook(writer, budget=LogBudget(20_000, 0))
    book.scope_of = {"CA": "alice", "CB": "bob"}.get  # type: ignore[assignment]
    book.users_of = lambda scope: [scope] if scope else []
    book.causes.known("A", "https://a.example/", context="CA")
    book.causes.known("B", "https://b.example/", context="CB")
    acted = book.begin(Begin(Identity("bob"), 8, None, "Input.insertText", {"text": "x"}, "B"))
    book.end(Ended(acted, True))
    for n in range(400):
        book.navigated("A", f"https://a.example/{'p' * 100}/{n}")
    book.navigated("B", "https://b.example/bob")
    lines = _any(path)
    tabs = [x["tab"] for x in lines if "tab" in x]
    alices = [t for t in tabs if t["id"] == "A"]
    assert writer.spent["alice"] >= 20_000 > writer.spent["alice"] - 400
    assert 50 < len(alices) < 150, len(alices)  # her share, and no more
    assert book.over_budget("alice") is not None and book.over_budget("bob") is None
    assert tabs[-1]["id"] == "B" and tabs[-1]["by"] == {"kind": "page", "after": acted}
    counted = [x["action"] for x in lines if x.get("action", {}).get("op") == TABS_COUNTED]
    assert len(counted) == 1 and counted[0]["count"] == 1, counted  # the first, at once
    assert counted[0]["share"] == "alice" and counted[0]["scope"] == "alice"
    assert counted[0]["guard"] == {"rule": "log-budget", "action": "counted"}
    # The rest are told once the minute turns (the relay's tick), in one line.
    book.tick()
    assert len([x for x in _any(path) if x.get("action", {}).get("op") == TABS_COUNTED]) == 1
    now[0] += 60
    book.tick()
    counted = [x["action"] for x in _any(path) if x.get("action", {}).get("op") == TABS_COUNTED]
    assert [c["count"] for c in counted] == [1, 400 - len(alices) - 1], counted
    assert counted[1]["tabs"] == ["A"]
    book.tick()  # nothing new: no line
    assert len([x for x in _any(path) if x.get("action", {}).get("op") == TABS_COUNTED]) == 2


def test_a_tab_lines_share_in_a_shared_scope(tmp_path: Path) -> None:
    """In a scope several users share, a page's own line costs the latest
    agent that acted in its tab (a popup: its opener's); a command's, its
    sender's (always written); a tab no agent acted in, the scope's tabs'
    own share; the computer's own, no one's."""
    from agentenv.access import Identity
    from agentenv.relay.log_budget import LogBudget, tab_share
    from agentenv.relay.logbook import Logbook

    page = {"kind": "page", "after": 3}
    assert tab_share(page, "team", ["alice", "bob"], "bob") == ("bob", True)
    assert tab_share(page, "team", ["alice", "bob"], None) == ("scope:team", True)
    assert tab_share(page, None, ["alice", "bob"], None) == ("scope:", True)
    assert tab_share(page, "alice", ["alice"], "bob") == ("alice", True)
    command = {"kind": "command", "entry": 3, "via": "cdp", "who": "alice"}
    assert tab_share(command, "team", ["alice", "bob"], "bob") == ("alice", False)
    assert tab_share({"kind": "command", "who": "agentenv"}, None, [], None) == (None, False)
    for kind in ("agentenv", "exit", "stop"):
        assert tab_share({"kind": kind}, "team", ["alice"], "alice") == (None, False)

    writer = LogWriter.open(tmp_path / "l.jsonl")
    book = Logbook(writer, budget=LogBudget(10**9, 0))
    book.users_of = lambda scope: ["alice", "bob"]
    book.causes.known("T", "https://a.example/")
    book.navigated("T", "https://a.example/1")  # no agent acted in it yet
    assert writer.spent.get("scope:", 0) > 0
    acted = book.begin(Begin(Identity("bob"), 8, None, "Input.insertText", {"text": "x"}, "T"))
    book.end(Ended(acted, True))
    before = writer.spent["bob"]
    book.navigated("T", "https://a.example/2")
    assert writer.spent["bob"] > before
    book.created("P", "https://a.example/popup", "T")  # a popup: its opener's payer
    assert book.causes.tabs["P"].payer == "bob"
    before = writer.spent["bob"]
    book.destroyed("P")
    assert writer.spent["bob"] > before


def test_a_closed_scopes_share_is_forgotten_this_minute_too(tmp_path: Path) -> None:
    """A scope closed (scopes/close) has its share forgotten whole: one
    opened again under its name in the same minute starts from nothing, its
    lines of this minute counted in full, not against the closed one's (a
    share of this minute below zero would let it write past its budget)."""
    mono, wall = Clock(), Clock()
    mono.now, wall.now = 10.0, 1_790_000_010.0
    w = LogWriter.open(tmp_path / "l.jsonl", clock=wall, monotonic=mono)
    w.end(w.begin({"who": "task"}), ok=True)
    mono.now, wall.now = 70.0, 1_790_000_070.0  # the next minute: its start remembered
    w.end(w.begin({"who": "task"}), ok=True)
    assert w.minute == 1 and 0 < w.spent_this_minute("task") < w.spent["task"]
    w.forget("task")
    assert "task" not in w.spent and w.spent_this_minute("task") == 0
    w.end(w.begin({"who": "task"}), ok=True)
    assert w.spent_this_minute("task") == w.spent["task"] > 0


def test_an_unwritable_log_folder_falls_back_to_the_working_folder_with_one_warning(
    tmp_path: Path,
) -> None:
    """The relay started where its log folder cannot be made (a path under a
    file: even root cannot) logs to ``.agentenv/`` in its working folder,
    action log and program log both, and says so once."""
    (tmp_path / "afile").write_text("")
    wanted = tmp_path / "afile" / "log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env.update(
        AGENTENV_LOG_DIR=str(wanted),
        AGENTENV_RUN_DIR=str(tmp_path / "run"),
        AGENTENV_PROFILE_DIR=str(tmp_path / "profile"),
        AGENTENV_DOWNLOADS_DIR=str(tmp_path / "downloads"),
        AGENTENV_RELAY_HOST="127.0.0.1",
        AGENTENV_RELAY_PORT=str(free_port()),
        AGENTENV_CHROMIUM_PORT="6666",  # nothing there: the relay waits for it
    )
    fallback = tmp_path / ".agentenv"
    relay = subprocess.Popen(
        [sys.executable, "-m", "agentenv.relay"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            lambda: "writing the action log" in _text(fallback / "relay.log"),
            "the relay to open its action log",
            timeout_s=30,
        )
    finally:
        relay.terminate()
        _, err = relay.communicate(timeout=30)
    warning = f"{wanted} cannot be written; logging to {fallback} instead"
    assert err.decode().count(warning) == 1, err.decode()
    assert _text(fallback / "relay.log").count(warning) == 1
    assert (fallback / "browser-browser.jsonl").is_file() and not wanted.exists()


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_an_open_line_changes_only_through_the_writer(tmp_path: Path) -> None:
    """amend adds and drops fields of an open line, settle redacts its params
    then; once written, amend says so and the written line stays as it was."""
    path = tmp_path / "l.jsonl"
    w = LogWriter.open(path)
    secret = "hunter2-never-logged"
    entry = w.begin(
        {
            "via": "cdp",
            "method": "Page.navigate",
            "url": "https://a.example/",
            "params": ("Page.navigate", {"url": f"https://a.example/?token={secret}"}),
        }
    )
    assert w.amend(entry, {"tab": "T2", "guard": {"rule": "r", "action": "rewrote"}}, drop=("url",))
    w.settle(entry)
    seen = w.fields(entry)
    assert seen is not None and secret not in json.dumps(seen) and "params" in seen
    w.end(entry, ok=True)
    assert not w.amend(entry, {"tab": "T3"})
    (written,) = _lines(path)
    action = written["action"]
    assert isinstance(action, dict)
    assert action["tab"] == "T2" and "url" not in action and action["guard"]["action"] == "rewrote"
    assert "params" in action and secret not in path.read_text()
