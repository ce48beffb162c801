"""What a recording's manifest lists beside its frames and log: the files
downloaded in its scope (uploaded when the start asked, within a budget),
and where each frame and log entry falls in its video.

The manifest itself is the wire model
(:class:`~agentenv.protocol.recording.BrowserRecordingManifest`), signed by
:mod:`.provenance`; :meth:`~.recording.Recording.end` fills it in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from agentenv.downloads import listed, opened
from agentenv.log.lines import seconds_of
from agentenv.protocol.recording import DownloadEntry, VideoEntry
from agentenv.recorder.grants import Uploader, UploadError

__all__ = ["downloads_made", "times_in"]

log = logging.getLogger("agentenv.recorder")


async def downloads_made(
    folder: str,
    since: str,
    upload: Uploader | None,
    budget: int,
    recording_id: str,
) -> list[DownloadEntry]:
    """The files downloaded into ``folder`` (the recording's scope's) since
    ``since`` (changed since, whole); each uploaded under ``downloads/`` when
    ``upload`` is given (the start asked), up to ``budget`` bytes in all."""
    found = await asyncio.to_thread(listed, folder)
    made = [d for d in found if d.modified >= since and not d.partial]
    out: list[DownloadEntry] = []
    left = budget
    for download in made:
        entry = DownloadEntry(name=download.name, bytes=download.bytes)
        out.append(entry)
        if upload is None:
            continue
        if download.bytes > left:
            entry.why = "past the recording's budget (AGENTENV_RECORDING_DOWNLOAD_BYTES)"
            continue
        data = await asyncio.to_thread(_read, folder, download.name)
        if data is None:
            entry.why = "gone before it could be read"
            continue
        try:
            await upload.put(f"downloads/{download.name}", data, "application/octet-stream")
        except UploadError as exc:
            log.error("%s: %s", recording_id, exc)
            entry.why = "the upload failed"
            continue
        left -= len(data)
        entry.file = f"downloads/{download.name}"
    return out


def times_in(video: VideoEntry, items: Iterable[tuple[str, str | None]]) -> dict[str, float]:
    """Each item's time in the video (seconds from its start), those within it."""
    start = seconds_of(video.start_at) or 0.0
    out = {}
    for key, at in items:
        t = seconds_of(at)
        if t is not None and 0 <= t - start <= video.seconds + 1:
            out[key] = round(max(0.0, t - start), 3)
    return out


def _read(folder: str, name: str) -> bytes | None:
    found = opened(folder, name)
    if found is None:
        return None
    with found[0] as file:
        return file.read()
