"""Burst timing, manifests rebuilt from uploads, grants (no browser)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentenv.log.lines import line
from agentenv.protocol.log import LogLine, is_agent_act, person_act
from agentenv.protocol.recording import End, Grant, Start, frame_file, rebuild
from agentenv.recorder.bursts import Bursts, FrameDue
from agentenv.recorder.grants import GrantError, uploader

AT = "2026-12-02T00:00:00.000Z"


def act(seq: int, tab: str | None = "T1", **over: Any) -> LogLine:
    action = {"via": "cdp", "who": "alice", "acts": "acting", "method": "Input.insertText"}
    if tab:
        action["tab"] = tab
    return line(seq, AT, "action", action | over)


def test_what_counts() -> None:
    assert is_agent_act(act(1))
    assert is_agent_act(act(1, via="mcp", tool="browser_type"))
    assert is_agent_act(act(1, via="api", op="input/click"))
    assert not is_agent_act(act(1, acts="reading"))
    assert not is_agent_act(act(1, who="agentenv"))
    assert not is_agent_act(act(1, via="agentenv", who="agentenv", op="tabs/open"))
    assert not is_agent_act(act(1, within=7))  # a tool call's own command: the call says it
    assert not is_agent_act(line(2, AT, "tab", {"event": "opened"}))


def test_typing_a_word_is_one_frame() -> None:
    b = Bursts()
    for n, t in enumerate((0.0, 0.1, 0.2, 0.3), start=10):
        b.seen(act(n), t)
        assert b.due(t) is None
    assert b.due(0.79) is None
    assert b.wait_s(0.79) == pytest.approx(0.01)
    assert b.due(0.8) == FrameDue([10, 11, 12, 13], "T1")
    assert b.due(5.0) is None and b.wait_s(5.0) is None


def test_reading_and_own_entries_do_not_restart_the_timer() -> None:
    b = Bursts()
    b.seen(act(1), 0.0)
    b.seen(act(2, acts="reading"), 0.4)
    b.seen(act(3, who="agentenv"), 0.45)
    assert b.due(0.5) == FrameDue([1], "T1")


def test_the_tab_of_the_last_entry_else_the_active_one() -> None:
    b = Bursts()
    b.seen(act(1, tab="A"), 0.0)
    b.seen(act(2, tab="B"), 0.1)
    assert b.due(1.0) == FrameDue([1, 2], "B")
    b.seen(act(3, tab="A"), 2.0)
    b.seen(act(4, tab=None, method="Storage.setCookies"), 2.1)
    assert b.due(3.0) == FrameDue([3, 4], None)


def test_a_burst_still_settling_is_flushed_at_the_end() -> None:
    b = Bursts()
    b.seen(act(7), 0.0)
    assert b.due(0.1) is None
    assert b.flush() == FrameDue([7], "T1")
    assert b.flush() is None


def test_a_persons_acts_make_bursts_of_their_own() -> None:
    def human(seq: int, **over: Any) -> LogLine:
        return act(seq, via="human", who="carol", op="input/down", **over)

    assert person_act(human(1)) is not None and not is_agent_act(human(1))
    assert person_act(act(1)) is None  # an agent's
    assert person_act(human(1, acts="reading")) is None
    assert person_act(human(1, within=3)) is None
    b = Bursts()
    b.seen(human(1), 0.0)
    b.seen(human(2, tab="T2"), 0.2)
    assert b.due(0.6) is None and b.wait_s(0.6) == pytest.approx(0.1)
    assert b.due(0.75) == FrameDue([1, 2], "T2", "person")
    # The agent acts again while the person's burst still settles: that burst
    # is due at once, on its own; the agent's settles as usual.
    b.seen(human(3), 1.0)
    b.seen(act(4), 1.1)
    assert b.wait_s(1.1) == 0.0
    assert b.due(1.1) == FrameDue([3], "T1", "person")
    assert b.due(1.2) is None
    assert b.due(1.6) == FrameDue([4], "T1", "action")
    # At the end, both still waiting come out in order.
    b.seen(act(5), 2.0)
    b.seen(human(6), 2.1)
    assert b.flush() == FrameDue([5], "T1", "action")
    assert b.flush() == FrameDue([6], "T1", "person")
    assert b.flush() is None and not b.waiting


def test_rebuild_from_the_upload() -> None:
    names = [
        frame_file(1, "action", "jpeg"),
        frame_file(0, "first", "jpeg"),
        frame_file(2, "last", "png"),
        "log.jsonl",
        "frames/README",
    ]
    manifest = rebuild("rec-1", names, log_lines=12)
    assert [(f.index, f.type, f.kind, f.at) for f in manifest.frames] == [
        (0, "jpeg", None, None),
        (1, "jpeg", None, None),
        (2, "png", None, None),
    ]
    assert manifest.rebuilt and manifest.log is not None and manifest.log.lines == 12
    assert rebuild("rec-2", [], None).log is None
    assert manifest.video is None and manifest.har is None


def test_a_recorders_death_leaves_the_video_chunks_and_network_parts_it_uploaded() -> None:
    names = ["video/0001.mp4", "video/0000.mp4", "video/notes.txt", "network/0000.har"]
    manifest = rebuild("rec-3", [*names, frame_file(0, "first", "jpeg")], None)
    assert manifest.video is not None and manifest.har is not None
    assert [(c.file, c.offset_s) for c in manifest.video.chunks] == [
        ("video/0000.mp4", 0.0),
        ("video/0001.mp4", 10.0),
    ]
    assert manifest.har.parts == ["network/0000.har"] and manifest.har.file is None


def test_grants_refused_when_malformed_or_expired(tmp_path: Any) -> None:
    for url in ("http://example.com/x", "file://relative/path", "s3://", "ftp://h/x"):
        with pytest.raises(ValidationError):
            Grant(url=url)
    past = datetime.now(UTC) - timedelta(seconds=1)
    with pytest.raises(GrantError, match="expired"):
        uploader(Grant(url=f"file://{tmp_path}", expires_at=past), "rec-1")
    with pytest.raises(GrantError, match="access_key_id"):
        uploader(Grant(url="s3://bucket/prefix"), "rec-1")
    secret = Grant(url="s3://b/p", access_key_id="AKIAEXAMPLE", secret_access_key="wJalrSECRET")
    assert "SECRET" not in repr(secret) and "AKIA" not in secret.where()
    with pytest.raises(ValidationError):
        End(recording_id="r", reason="because")
    with pytest.raises(ValidationError):
        Start(request_id="x", upload=Grant(url=f"file://{tmp_path}"), frames="yes")


def test_grants_refuse_stores_the_computer_must_not_reach() -> None:
    from agentenv.protocol.recording import public_enough

    keys = {"access_key_id": "A", "secret_access_key": "S"}
    for endpoint in (
        "http://169.254.169.254/",
        "http://[fe80::1]:5000/",
        "http://metadata.google.internal/",
        "http://100.100.100.200/",
        "ftp://store:21/",
        "file:///etc",
        "http://0.0.0.0:9000/",
        "s3.example.com",
    ):
        with pytest.raises(ValidationError) as refused:
            Grant(url="s3://b/p", endpoint_url=endpoint, **keys)
        assert "S" not in str(refused.value).replace("S3", "").replace("Sequence", "")
    Grant(url="s3://b/p", endpoint_url="http://s3:5000", **keys)
    Grant(url="s3://b/p", endpoint_url="https://10.0.0.5:9000", **keys)
    assert public_enough("127.0.0.1") and not public_enough("169.254.1.1")


async def test_file_grants_only_inside_the_upload_roots(tmp_path: Path) -> None:
    from agentenv.recorder.grants import open_grant

    allowed = tmp_path / "runs"
    allowed.mkdir()
    (allowed / "escape").symlink_to("/etc")
    inside = await open_grant(Grant(url=f"file://{allowed}/r"), "rec-1", [allowed])
    assert inside.where.startswith(f"file://{allowed}")
    for url in ("file:///etc", f"file://{allowed}/../x", f"file://{allowed}/escape"):
        with pytest.raises(GrantError, match="AGENTENV_UPLOAD_ROOTS"):
            await open_grant(Grant(url=url), "rec-1", [allowed])
    with pytest.raises(GrantError):
        await open_grant(Grant(url=f"file://{allowed}"), "rec-1", [])


def test_mapped_and_metadata_addresses_are_refused() -> None:
    from agentenv.protocol.recording import public_enough

    for host in (
        "::ffff:169.254.169.254",
        "[::ffff:a9fe:a9fe]",
        "fd00:ec2::254",
        "100.100.100.200",
    ):
        assert not public_enough(host), host


def test_every_s3_grant_shares_one_session_and_keeps_its_own_credentials() -> None:
    """A boto3 session loads S3's service model (MiBs of parsed JSON): one
    made per grant grew the recorder about 10 MiB a recording. Every grant's
    client now comes from one session, which holds no grant's keys: each
    client signs with its own grant's, and closing one leaves the other."""
    from agentenv.recorder import grants

    def grant(n: int) -> Grant:
        return Grant(
            url=f"s3://bucket-{n}/runs",
            endpoint_url="http://store.example:9000",
            access_key_id=f"AKIA{n}",
            secret_access_key=f"secret-{n}",
            session_token=f"token-{n}",
        )

    one, two = (uploader(grant(n), f"rec-{n}") for n in (1, 2))
    assert isinstance(one, grants.S3Uploader) and isinstance(two, grants.S3Uploader)
    assert one.client._loader is two.client._loader  # the model loaded once
    models = [u.client.meta.service_model._service_description for u in (one, two)]
    assert models[0] is models[1]
    keys = [u.client._request_signer._credentials.get_frozen_credentials() for u in (one, two)]
    assert [(k.access_key, k.secret_key, k.token) for k in keys] == [
        ("AKIA1", "secret-1", "token-1"),
        ("AKIA2", "secret-2", "token-2"),
    ]
    session = grants._SESSION
    assert session is not None and session.get_credentials() is None  # no grant's keys
    one.close()
    assert two.client._endpoint.http_session is not None
    assert two._key("x") == "runs/rec-2/x"


async def test_ended_recordings_are_kept_for_their_manifest_up_to_a_bound(
    tmp_path: Path,
) -> None:
    """A computer serving a batch ends thousands of recordings: the recorder
    keeps the newest :data:`ENDED_KEPT` ended ones (a retried end answers
    their manifest), never an open one, and forgets their start's request."""
    from types import SimpleNamespace

    from agentenv.log.reader import LogReader
    from agentenv.recorder import recorder_server as server
    from agentenv.relay_link import BrowserLink
    from agentenv.settings import Settings

    settings = Settings(log_dir=tmp_path)
    recorder = server.Recorder(settings, BrowserLink(settings, None), LogReader(tmp_path / "x"))  # type: ignore[arg-type]
    total = server.ENDED_KEPT + 5
    for n in range(total):
        ended = None if n in (0, total - 1) else {"manifest": n}
        start = SimpleNamespace(request_id=f"req-{n}")
        recorder.recordings[f"rec-{n}"] = SimpleNamespace(manifest=ended, start=start)  # type: ignore[assignment]
        recorder.by_request[f"req-{n}"] = f"rec-{n}"
    recorder._trim()
    kept = list(recorder.recordings)
    assert len(kept) == server.ENDED_KEPT + 2  # the two open ones, and the newest ended
    assert kept[0] == "rec-0" and kept[-1] == f"rec-{total - 1}"  # open: never forgotten
    assert "rec-1" not in kept and "rec-3" not in kept and "rec-4" in kept  # 259 ended: 3 go
    assert set(recorder.by_request.values()) == set(kept)
