"""A recording's journal (no browser): ids checked before they name a file,
what is written and read back, a cut last line, the bound, pruning, and the
uploader noting only the uploads that succeeded."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from pathlib import Path

import pytest

from agentenv.log.lines import iso
from agentenv.protocol.recording import FrameEntry, FrameKind, Grant, Start, frame_file
from agentenv.recorder import journal as j
from agentenv.recorder.grants import Listed, uploader
from agentenv.recorder.journal import (
    KEPT,
    MARGIN_S,
    Journal,
    JournalError,
    journal_file,
    prune,
    read_journal,
    start_line,
)
from agentenv.recorder.recorder_errors import UploadError

RID = "rec-0123456789abcdef"
FACTS = {"image_digest": "sha256:" + "a" * 64, "chromium": "Chrome/150", "chromium_flags": ["-x"]}


def _start(tmp: Path, **more: object) -> Start:
    body = {"request_id": "req-1", "upload": {"url": f"file://{tmp}"}, "name": "r", **more}
    return Start.model_validate(body)


def _begin(
    folder: Path, tmp: Path, rid: str = RID, started_at: str = "", **more: object
) -> Journal:
    journal = Journal(folder, rid)
    start = _start(tmp, max_duration_s=60, **more)
    journal.begin(start_line(start, rid, "alice", 7, started_at or iso(), FACTS))
    return journal


def _frame(index: int, kind: FrameKind = "action", error: str | None = None) -> FrameEntry:
    return FrameEntry(
        index=index,
        kind=kind,
        after=[8, 9],
        tab="T1",
        url="http://127.0.0.1/next",
        at=iso(),
        file=frame_file(index, kind, "jpeg"),
        type="jpeg",
        error=error,
    )


@pytest.mark.parametrize(
    "bad", ["../key", "rec-../../etc/passwd", "rec-0123456789ABCDEF", "rec-1", "/abs", ""]
)
def test_an_id_the_recorder_did_not_make_names_no_file(tmp_path: Path, bad: str) -> None:
    with pytest.raises(JournalError, match="not a recording id of this computer's"):
        journal_file(tmp_path, bad)
    with pytest.raises(JournalError):
        Journal(tmp_path, bad)
    assert read_journal(tmp_path, bad) is None
    assert journal_file(tmp_path, RID) == tmp_path / f"{RID}.jsonl"


def test_what_a_recording_wrote_reads_back(tmp_path: Path) -> None:
    folder = tmp_path / "attest" / "journal"
    journal = Journal(folder, RID)
    journal.file("start.json", "ab" * 32, 120, "application/json")  # before the start's entry
    start = _start(tmp_path, video={"fps": 5}, har={}, downloads=True, max_duration_s=60)
    began = "2026-12-02T00:00:00.000Z"
    journal.begin(start_line(start, RID, "alice", 7, began, FACTS))
    journal.file("frames/0000-first.jpg", "cd" * 32, 5000, "image/jpeg")
    journal.frame(_frame(0, "first"))
    journal.frame(_frame(1, "action", error="the page does not answer"))  # no file
    journal.file("video/0000.mp4", "ef" * 32, 90_000, "video/mp4")
    journal.file("network/0000.har", "01" * 32, 7000, "application/json")
    journal.file("frames/0002-action.jpg", "23" * 32, 6000, "image/jpeg")  # killed: no frame line

    # Only the service user: the folder (and the key's) 0700, the file 0600.
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600

    found = read_journal(folder, RID)
    assert found is not None
    first = found.start
    assert (first.request_id, first.name, first.scope, first.start_seq) == (
        "req-1",
        "r",
        "alice",
        7,
    )
    assert first.started_at == began and first.grant == f"file://{tmp_path}"
    assert first.ask["video"] == {"fps": 5} and first.ask["downloads"] is True
    assert "upload" not in first.ask
    assert (first.image_digest, first.chromium, first.chromium_flags) == (
        FACTS["image_digest"],
        "Chrome/150",
        ["-x"],
    )
    assert found.hashes == {
        "start.json": "ab" * 32,
        "frames/0000-first.jpg": "cd" * 32,
        "video/0000.mp4": "ef" * 32,
        "network/0000.har": "01" * 32,
        "frames/0002-action.jpg": "23" * 32,
    }
    frames = found.frames()
    assert [(f.index, f.kind, f.error is not None) for f in frames] == [
        (0, "first", False),
        (1, "action", True),
        (2, None, False),  # known from its name only
    ]
    assert frames[0].after == [8, 9] and frames[0].tab == "T1"
    video = found.video()
    assert video is not None and video.fps == 5 and video.start_at == began
    assert [(c.file, c.offset_s, c.bytes) for c in video.chunks] == [
        ("video/0000.mp4", 0.0, 90_000)
    ]
    assert video.chunks[0].start_at == began
    assert video.chunks[0].end_at == "2026-12-02T00:00:10.000Z"
    har = found.har()
    assert har is not None and har.parts == ["network/0000.har"] and har.file is None
    last = found.files["frames/0002-action.jpg"].at
    assert found.why() == (
        "its recorder restarted mid-recording: the frames, video and network log after its "
        f"last upload before the restart ({last}) are not in it (its log and its last frame are)"
    )

    journal.remove()
    assert not journal.path.exists()
    assert read_journal(folder, RID) is None


def test_an_s3_grant_is_not_kept(tmp_path: Path) -> None:
    grant = {"url": "s3://b/p", "access_key_id": "AKIA-secret-id", "secret_access_key": "s3cret"}
    start = Start.model_validate({"request_id": "r", "upload": grant})
    Journal(tmp_path, RID).begin(start_line(start, RID, None, 1, iso(), {}))
    data = (tmp_path / f"{RID}.jsonl").read_bytes()
    assert b'"request_id":"r"' in data  # the line is there
    assert b"s3://" not in data and b"AKIA" not in data and b"s3cret" not in data


def test_a_line_cut_by_the_kill_is_passed_over(tmp_path: Path) -> None:
    journal = _begin(tmp_path, tmp_path)
    journal.file("frames/0000-first.jpg", "cd" * 32, 10, "image/jpeg")
    with journal.path.open("ab") as file:
        file.write(b'{"file":"frames/0001-action.jpg","sha2')
    found = read_journal(tmp_path, RID)
    assert found is not None and list(found.files) == ["frames/0000-first.jpg"]
    journal.path.write_bytes(b'{"recording_id": "rec-')  # no whole first line: no journal
    assert read_journal(tmp_path, RID) is None


def test_a_journal_stops_at_its_bound_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(j, "JOURNAL_BYTES", 2000)
    journal = _begin(tmp_path, tmp_path)
    for index in range(50):
        journal.file(frame_file(index, "action", "jpeg"), "cd" * 32, 10, "image/jpeg")
    size = journal.path.stat().st_size
    assert size <= 2000 + 20
    found = read_journal(tmp_path, RID)
    assert found is not None and found.full
    assert 0 < len(found.files) < 50
    assert "its journal was full" in found.why()
    journal.file("frames/0099-action.jpg", "cd" * 32, 10, "image/jpeg")
    assert journal.path.stat().st_size == size  # nothing more after the mark


def test_a_folder_not_the_service_users_alone_is_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "journal"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    with caplog.at_level(logging.ERROR, "agentenv.recorder"):
        journal = _begin(folder, tmp_path)
        journal.file("frames/0000-first.jpg", "cd" * 32, 10, "image/jpeg")
    assert not journal.path.exists()
    assert "not a folder of the service user's alone" in caplog.text


def test_a_link_in_place_of_a_journal_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    folder = tmp_path / "journal"
    folder.mkdir(mode=0o700)
    (folder / f"{RID}.jsonl").symlink_to(target)
    _begin(folder, tmp_path)
    assert target.read_text() == "keep"
    assert read_journal(folder, RID) is None


def test_journals_with_no_end_are_pruned(tmp_path: Path) -> None:
    now = time.time()
    old = iso(now - 60 - MARGIN_S - 5)  # max_duration_s 60, and the margin, ran out
    _begin(tmp_path, tmp_path, "rec-000000000000000a", started_at=old)
    _begin(tmp_path, tmp_path, "rec-000000000000000b", started_at=old)  # open: kept
    (tmp_path / "rec-000000000000000c.jsonl").write_bytes(b"{cut")  # no start, recent: kept
    (tmp_path / "notes.jsonl").write_text("not a journal")
    recent = [f"rec-{i:016x}" for i in range(0x100, 0x100 + KEPT + 2)]
    for n, rid in enumerate(recent):
        _begin(tmp_path, tmp_path, rid)
        os.utime(tmp_path / f"{rid}.jsonl", (now - 100 + n, now - 100 + n))
    removed = prune(tmp_path, now, {"rec-000000000000000b"})
    assert "rec-000000000000000a" in removed
    left = sorted(p.stem for p in tmp_path.glob("*.jsonl"))
    assert "rec-000000000000000a" not in left and "notes" in left
    assert "rec-000000000000000b" in left
    orphans = [x for x in left if x.startswith("rec-") and x != "rec-000000000000000b"]
    assert len(orphans) == KEPT  # the newest: the oldest two recent ones went
    assert recent[0] not in left and recent[1] not in left and recent[-1] in left
    assert "rec-000000000000000c" in left


async def test_the_uploader_notes_each_upload_that_succeeded(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    journal = _begin(tmp_path / "journal", tmp_path)
    upload = Listed(uploader(Grant(url=f"file://{store}"), RID, [store]), journal=journal)
    await upload.put("frames/0000-first.jpg", b"\xff\xd8 a frame", "image/jpeg")
    (store / RID / "video").write_text("a file where a folder should be")
    with pytest.raises(UploadError):
        await upload.put("video/0000.mp4", b"mp4", "video/mp4")
    found = read_journal(tmp_path / "journal", RID)
    assert found is not None
    assert list(found.files) == ["frames/0000-first.jpg"]
    entry = found.files["frames/0000-first.jpg"]
    assert (
        entry.sha256 == hashlib.sha256(b"\xff\xd8 a frame").hexdigest() == upload.files[entry.file]
    )
    assert (entry.bytes, entry.type) == (len(b"\xff\xd8 a frame"), "image/jpeg")
