"""Manifests: built as a recording goes, and rebuilt from an upload (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentenv.protocol.recording import BrowserRecordingManifest, FrameEntry, LogEntry

__all__ = ["FRAME_NAME", "frame_file", "rebuild"]

#: ``frames/<index>-<kind>.<ext>``
FRAME_NAME = re.compile(r"^frames/(\d+)-(first|action|last)\.(jpg|png)$")


def frame_file(index: int, kind: str, fmt: str) -> str:
    return f"frames/{index:04d}-{kind}.{'jpg' if fmt == 'jpeg' else 'png'}"


def rebuild(
    recording_id: str, names: Iterable[str], log_lines: int | None
) -> BrowserRecordingManifest:
    """A manifest from the names of an upload's files (relative to the recording).

    Used when the computer no longer knows the recording: each frame takes its
    index and type from its file name; its kind and time are not known.
    """
    frames: list[FrameEntry] = []
    for name in sorted(names):
        found = FRAME_NAME.match(name)
        if found is None:
            continue
        index, _kind, ext = found.groups()
        frames.append(
            FrameEntry(
                index=int(index),
                kind=None,
                after=[],
                tab=None,
                url=None,
                at=None,
                file=name,
                type="jpeg" if ext == "jpg" else "png",
            )
        )
    frames.sort(key=lambda f: f.index)
    return BrowserRecordingManifest(
        recording_id=recording_id,
        request_id=None,
        name=None,
        started_at=None,
        ended_at=None,
        reason=None,
        start_seq=None,
        end_seq=None,
        frames=frames,
        log=LogEntry(file="log.jsonl", lines=log_lines) if log_lines is not None else None,
        missing_frames=0,
        log_missing=[],
        limits_hit=[],
        rebuilt=True,
    )
