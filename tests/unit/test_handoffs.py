"""A person's spans in a recording (issue 44, item 4): the manifest's
``handoffs``, read again by verify; the Mind2Web export's marked steps; the
count a task's results line carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from agentenv.harness.attest import evidence, results_fields
from agentenv.harness.mind2web import PERSON_STEP, export
from agentenv.protocol.chain import chain_run, line_hash, recording_check
from agentenv.protocol.handoffs import Handoff, handoffs_in, human_entries
from agentenv.protocol.log import ActionLine, LogLine
from agentenv.protocol.recording import BrowserRecordingManifest, FrameEntry, FrameKind, LogEntry

AT = "2026-12-06T00:00:00.000Z"
PASSWORD = {"withheld": "password", "length": 11}


def _lines(*actions: dict[str, Any]) -> list[LogLine]:
    return [
        cast(ActionLine, {"seq": n, "at": f"2026-12-06T00:00:{n:02d}.000Z", "action": a})
        for n, a in enumerate(actions, 1)
    ]


def agent(op: str, **args: Any) -> dict[str, Any]:
    return {"via": "api", "who": "alice", "op": op, "acts": "acting", "args": args, "ok": True}


def person(op: str, who: str = "carol", **args: Any) -> dict[str, Any]:
    return {"via": "human", "who": who, "op": op, "acts": "acting", "args": args, "ok": True}


#: An agent clicks, asks; carol clicks, types a password, hands back; the
#: agent goes on; then dora steps in unasked, and the agent acts again.
SESSION = _lines(
    agent("input/click", x=10, y=10),  # 1
    agent("request_human", reason="type the code on the card", timeout_s=120),  # 2
    person("input/move", x=40, y=60),  # 3
    person("input/down", x=40, y=60),  # 4
    person("input/up", x=40, y=60),  # 5
    person("input/type", text=PASSWORD),  # 6
    person("human/answer", word="done"),  # 7
    agent("input/click", x=20, y=20),  # 8
    person("input/key", "dora", keys="Enter"),  # 9
    agent("input/type", text="thanks"),  # 10
)


def test_a_request_and_an_unasked_step_in_are_two_handoffs() -> None:
    asked, unasked = handoffs_in(SESSION)
    assert asked == Handoff(
        request=2,
        agent="alice",
        reason="type the code on the card",
        answer=7,
        word="done",
        entries=[3, 4, 5, 6],
        people=["carol"],
        started_at=SESSION[1]["at"],
        ended_at=SESSION[6]["at"],
    )
    assert (unasked.request, unasked.answer, unasked.entries, unasked.people) == (
        None,
        None,
        [9],
        ["dora"],
    )
    assert human_entries(SESSION) == 6
    # No person: no handoff.
    assert handoffs_in(SESSION[:1]) == [] and human_entries(SESSION[:1]) == 0


def test_a_request_no_one_answered_ends_at_the_next() -> None:
    lines = _lines(
        agent("request_human", reason="first"),
        person("input/key", keys="a"),
        agent("request_human", reason="second"),
        person("input/key", keys="b"),
        person("human/answer", word="cannot"),
    )
    first, second = handoffs_in(lines)
    assert (first.reason, first.entries, first.answer) == ("first", [2], None)
    assert (second.reason, second.entries, second.word) == ("second", [4], "cannot")


#: The frames of SESSION's recording when the recorder did not frame a
#: person's bursts (before ``kind: person``).
AGENT_FRAMES: list[tuple[FrameKind, list[int]]] = [
    ("first", []),
    ("action", [1, 2]),
    ("action", [8]),
    ("action", [10]),
    ("last", []),
]


def _recording(
    tmp_path: Path,
    lines: list[LogLine],
    kinds: list[tuple[FrameKind, list[int]]] = AGENT_FRAMES,
    failed: frozenset[int] = frozenset(),
) -> tuple[Path, BrowserRecordingManifest]:
    """A recording folder of ``lines``: its slice, chain and frames."""
    folder = tmp_path / "rec"
    (folder / "frames").mkdir(parents=True)
    raws: list[bytes] = []
    prev = "0" * 32  # what the file's first line chains from
    for line in lines:
        raws.append(
            json.dumps(
                {
                    "seq": line["seq"],
                    "at": line["at"],
                    "prev": prev,
                    **{k: v for k, v in line.items() if k not in ("seq", "at")},
                }
            ).encode()
        )
        prev = line_hash(raws[-1])
    (folder / "log.jsonl").write_bytes(b"".join(r + b"\n" for r in raws))
    run = chain_run([(r, True) for r in raws])
    (folder / "log.chain.jsonl").write_bytes(run.chain)
    frames = [
        FrameEntry(
            index=i,
            kind=kind,
            after=after,
            tab="T",
            url=f"https://shop.example/{i}",
            at=AT,
            file=f"frames/{i:04d}-{kind}.jpg",
            type="jpeg",
            error="the capture timed out" if i in failed else None,
        )
        for i, (kind, after) in enumerate(kinds)
    ]
    for frame in frames:
        if not frame.error:
            (folder / frame.file).write_bytes(b"\xff\xd8" + bytes([frame.index]))
    manifest = BrowserRecordingManifest(
        recording_id="rec",
        request_id="r",
        name="r",
        started_at=AT,
        ended_at=AT,
        reason="completed",
        start_seq=1,
        end_seq=len(lines),
        frames=frames,
        log=LogEntry(file="log.jsonl", lines=len(lines), chain="log.chain.jsonl"),
        missing_frames=0,
        log_missing=[],
        limits_hit=[],
        scope="shop",
        handoffs=handoffs_in(lines),
        chain_first=run.first,
        chain_last=run.last,
    )
    (folder / "manifest.json").write_text(manifest.model_dump_json())
    return folder, manifest


def _check(folder: Path, manifest: dict[str, Any]) -> list[str]:
    def read(name: str) -> bytes | None:
        path = folder / name
        return path.read_bytes() if path.is_file() else None

    return recording_check(read, manifest).problems


def test_verify_reads_the_handoffs_again_from_the_slice(tmp_path: Path) -> None:
    folder, manifest = _recording(tmp_path, SESSION)
    written = json.loads(manifest.model_dump_json())
    assert len(written["handoffs"]) == 2
    assert _check(folder, written) == []
    # A person's entry taken out of a handoff (the slice unchanged): found.
    changed = json.loads(manifest.model_dump_json())
    changed["handoffs"][0]["entries"] = [3, 4, 5]
    assert any("handoffs are not what log.jsonl says" in p for p in _check(folder, changed))
    # A handoff left out of the manifest: found.
    changed["handoffs"] = changed["handoffs"][1:]
    assert any("handoffs are not what" in p for p in _check(folder, changed))
    # Not a list of handoffs: said so.
    changed["handoffs"] = [{"request": "two"}]
    assert "the manifest's handoffs are not a list of handoffs" in _check(folder, changed)
    # A manifest from before handoffs lists none: not checked.
    del changed["handoffs"]
    assert _check(folder, changed) == []


def test_the_export_marks_a_persons_steps_where_they_happened(tmp_path: Path) -> None:
    folder, manifest = _recording(tmp_path, SESSION)
    out = export(manifest, folder, tmp_path / "out", "Sign in", "t-1", "signed in")
    steps = json.loads((out / "result.json").read_text())["action_history"]
    said = [(s["action"], s.get("by")) for s in steps]
    assert said == [
        ("click at (10, 10); request_human", None),
        (
            f"{PERSON_STEP} (asked by alice: 'type the code on the card'): press the mouse at "
            "(40, 60); release the mouse at (40, 60); type •••• (11 characters); handed back: done",
            "human",
        ),
        ("click at (20, 20)", None),
        (f"{PERSON_STEP}: press Enter; not handed back", "human"),
        ('type "thanks"', None),
        ("TASK_COMPLETE -> ANSWER: signed in", None),
    ]
    assert [s["step"] for s in steps] == list(range(6))
    assert steps[1]["people"] == ["carol"] and steps[3]["people"] == ["dora"]
    # Each person's step pictured by the first action frame after it.
    pictures = [(out / "trajectory" / s["screenshot"]).read_bytes() for s in steps]
    assert pictures == [b"\xff\xd8" + bytes([i]) for i in (1, 2, 2, 3, 3, 4)]
    # The password a person typed: its length, never its text (the line held none).
    assert "withheld" not in (out / "result.json").read_text()


def test_a_persons_step_is_pictured_by_the_persons_own_frame(tmp_path: Path) -> None:
    kinds: list[tuple[FrameKind, list[int]]] = [
        ("first", []),
        ("action", [1, 2]),
        ("person", [3, 4, 5, 6]),  # carol's burst; her answer (7) is no act on the page
        ("action", [8]),
        ("person", [9]),  # dora's
        ("action", [10]),
        ("last", []),
    ]
    folder, manifest = _recording(tmp_path, SESSION, kinds)
    out = export(manifest, folder, tmp_path / "out", "Sign in", "t-1", "signed in")
    steps = json.loads((out / "result.json").read_text())["action_history"]
    # The same steps as without the person's frames; a person's frame is no agent's step.
    assert [s.get("by") for s in steps] == [None, "human", None, "human", None, None]
    pictures = [(out / "trajectory" / s["screenshot"]).read_bytes() for s in steps]
    assert pictures == [b"\xff\xd8" + bytes([i]) for i in (1, 2, 3, 4, 5, 6)]


def test_a_tasks_results_line_counts_a_persons_entries(tmp_path: Path) -> None:
    folder, _ = _recording(tmp_path, SESSION)
    found = evidence(folder, "ed25519:k")
    assert (found["human_entries"], found["handoffs"]) == (6, 2)
    metadata = {"recordings": {"rec": {"name": "r", "evidence": found, "problems": []}}}
    line = results_fields(metadata)
    assert (line["human_entries"], line["handoffs"], line["verified"]) == (6, 2, True)
    # Two recordings: the task's count is both's.
    other = {**found, "human_entries": 1}
    metadata["recordings"]["rec2"] = {"name": "s", "evidence": other, "problems": []}
    assert results_fields(metadata)["human_entries"] == 7


def test_the_viewer_says_what_a_person_did_before_their_frame(tmp_path: Path) -> None:
    from agentenv.harness.viewer import frame_items, log_items

    kinds: list[tuple[FrameKind, list[int]]] = [("first", []), ("person", [3, 4, 5, 6])]
    _, manifest = _recording(tmp_path, SESSION, kinds)
    items = frame_items(manifest, SESSION)
    assert items[1]["kind"] == "person" and items[1]["who"] == ["carol"]
    assert items[1]["words"] == [
        "press the mouse at (40, 60)",
        "release the mouse at (40, 60)",
        "type •••• (11 characters)",
    ]
    listed = [(x["seq"], x["who"]) for x in log_items(SESSION, items, {})]
    # The person's steps are listed with the agent's; the pointer's move (3) and
    # the answer (no act on the page, 7) are not.
    people = [(4, "carol"), (5, "carol"), (6, "carol"), (9, "dora")]
    assert listed == sorted([(1, "alice"), (2, "alice"), (8, "alice"), (10, "alice"), *people])


def test_an_action_frame_whose_capture_failed_is_a_step_all_the_same(tmp_path: Path) -> None:
    folder, manifest = _recording(tmp_path, SESSION, failed=frozenset({2}))
    out = export(manifest, folder, tmp_path / "out", "Sign in", "t-1", "signed in")
    steps = json.loads((out / "result.json").read_text())["action_history"]
    assert [s["action"] for s in steps][2] == "click at (20, 20)"  # frame 2's
    assert steps[2]["frame_error"] == "the capture timed out"
    assert all("frame_error" not in s for i, s in enumerate(steps) if i != 2)
    pictures = [(out / "trajectory" / s["screenshot"]).read_bytes() for s in steps]
    assert pictures[2] == b"\xff\xd8" + bytes([3])  # the next frame's picture
