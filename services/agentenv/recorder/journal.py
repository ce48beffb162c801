"""A recording's journal: what its recorder wrote, so that a recorder killed
mid-recording (supervisord restarts it) can still end the recording with a
manifest the computer signs (docs/spec.md section 4, "Rebuilt from the journal").

**Where.** ``<AGENTENV_KEY_DIR>/journal/<recording_id>.jsonl``
(:attr:`agentenv.settings.Settings.journal_dir`), beside the key, in the
service user's 0700 folder (in the image a tmpfs of ``agentenv``'s): a
restart of the recorder keeps it; ``browser``, pages and agents cannot reach
it. A recording's id is checked (:data:`RECORDING_ID`) before it names a file.

**What.** A first line of what the start knew (:class:`JournalStart`: the
recording, its request and name, scope, ``start_seq``, ``started_at``, the
start as asked less its grant, what the computer is), then a line for each
file uploaded, written right after its upload succeeded
(:class:`JournalFile`: ``{file, sha256, bytes, type, at}``), and one for each
frame listed (``{"frame": FrameEntry}``). No credential is written: a
``file:`` grant's URL is kept (it has none); an S3 grant is not, so the
end of a restored recording must bring one.

**Bounded.** A recording's files are bounded already (``max_frames``, a video
chunk every 10 s of ``max_duration_s``, the network log's parts, one log, its
downloads), at about 400 bytes a frame in the journal; a journal also stops
at :data:`JOURNAL_BYTES` (10,000 frames fit), saying so in its last line
(``{"full": true}``): what was uploaded after that is not listed, so
``agentenv verify`` names it. A journal is removed when its recording ends.
One whose recording never gets its end is removed :data:`MARGIN_S` after the
recording's ``max_duration_s`` ran out, and at most :data:`KEPT` of them are
kept (:func:`prune`, at the recorder's start and at each recording's).

Writing never fails a recording: a journal that cannot be written logs why
and stops (that recording then cannot be restored after a restart).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from agentenv.errors import AgentEnvError
from agentenv.log.lines import iso, seconds_of
from agentenv.protocol.recording import (
    VIDEO_CHUNK_S,
    FrameEntry,
    HarEntry,
    Start,
    VideoEntry,
    rebuild,
)

__all__ = [
    "JOURNAL_BYTES",
    "KEPT",
    "MARGIN_S",
    "RECORDING_ID",
    "Journal",
    "JournalError",
    "JournalFile",
    "JournalStart",
    "Journaled",
    "journal_file",
    "parse",
    "prune",
    "read_journal",
    "stale",
    "start_line",
]

log = logging.getLogger("agentenv.recorder")

#: The ids the recorder makes (``rec-`` and 16 hex digits); no other names a file.
RECORDING_ID = re.compile(r"^rec-[0-9a-f]{16}$")
#: A journal's most bytes; past them it stops, its last line saying so.
JOURNAL_BYTES = 4 * 1024 * 1024
#: How long after its recording's ``max_duration_s`` a journal with no end is kept.
MARGIN_S = 3600.0
#: The most journals kept of recordings that are not open (the newest).
KEPT = 8
_FULL = b'{"full":true}\n'
#: The most a first line may take when :func:`prune` reads it.
_FIRST_BYTES = 64 * 1024


class JournalError(AgentEnvError, ValueError):
    """A recording id that cannot name a journal, or a journal folder that is
    not the service user's alone."""


class JournalStart(BaseModel):
    """A journal's first line: what the recording's start knew."""

    recording_id: str
    request_id: str
    name: str | None
    scope: str | None
    start_seq: int
    started_at: str
    #: The start as asked (:class:`Start`), less its grant.
    ask: dict[str, Any]
    #: A ``file:`` grant's URL (it holds no credential); None for S3.
    grant: str | None = None
    image_digest: str | None = None
    chromium: str | None = None
    chromium_flags: list[str] | None = None


class JournalFile(BaseModel):
    """A file the recording uploaded: its name, SHA-256, size, type, and when."""

    file: str
    sha256: str
    bytes: int
    type: str
    at: str


def start_line(
    start: Start,
    recording_id: str,
    scope: str | None,
    start_seq: int,
    started_at: str,
    facts: dict[str, Any],
) -> JournalStart:
    """The first line of ``recording_id``'s journal (``facts``: the
    provenance's image digest, Chromium and its flags)."""
    url = start.upload.url
    return JournalStart(
        recording_id=recording_id,
        request_id=start.request_id,
        name=start.name,
        scope=scope,
        start_seq=start_seq,
        started_at=started_at,
        ask=start.model_dump(mode="json", exclude={"upload"}),
        grant=url if url.startswith("file:") else None,
        image_digest=facts.get("image_digest"),
        chromium=facts.get("chromium"),
        chromium_flags=facts.get("chromium_flags"),
    )


def journal_file(folder: Path, recording_id: str) -> Path:
    """Where ``recording_id``'s journal is; :class:`JournalError` for an id
    the recorder did not make (no path of another's)."""
    if not RECORDING_ID.match(recording_id):
        raise JournalError(f"{recording_id[:80]!r} is not a recording id of this computer's")
    return folder / f"{recording_id}.jsonl"


@dataclass
class Journaled:
    """A journal as read: its start, the files uploaded (by name), the frames
    listed, and whether it stopped full."""

    start: JournalStart
    files: dict[str, JournalFile] = field(default_factory=dict)
    listed: dict[int, FrameEntry] = field(default_factory=dict)
    full: bool = False

    @property
    def hashes(self) -> dict[str, str]:
        return {name: f.sha256 for name, f in self.files.items()}

    def frames(self) -> list[FrameEntry]:
        """Every frame listed, and any uploaded but not yet listed (from its name)."""
        by_index = {f.index: f for f in rebuild("", self.files, None).frames}
        by_index.update(self.listed)
        return [by_index[i] for i in sorted(by_index)]

    def video(self) -> VideoEntry | None:
        """The video's chunks uploaded, each at its place, timed from the start."""
        found = rebuild("", self.files, None).video
        if found is None:
            return None
        began = seconds_of(self.start.started_at)
        video = self.start.ask.get("video")
        found.fps = int(video.get("fps", 0)) if isinstance(video, dict) else 0
        found.start_at = self.start.started_at
        for chunk in found.chunks:
            chunk.bytes = self.files[chunk.file].bytes
            if began is not None:
                chunk.start_at = iso(began + chunk.offset_s)
                chunk.end_at = iso(began + chunk.offset_s + VIDEO_CHUNK_S)
        return found

    def har(self) -> HarEntry | None:
        """The network log's parts uploaded (its whole file uploads at the end)."""
        return rebuild("", self.files, None).har

    def why(self) -> str:
        """What a manifest rebuilt from this journal lacks, in a sentence."""
        last = max((f.at for f in self.files.values()), default=self.start.started_at)
        said = (
            "its recorder restarted mid-recording: the frames, video and network log "
            f"after its last upload before the restart ({last}) are not in it (its log "
            "and its last frame are)"
        )
        if self.full:
            said += (
                f"; its journal was full ({JOURNAL_BYTES // (1024 * 1024)} MiB), so files "
                "uploaded after that are not listed"
            )
        return said


def parse(data: bytes) -> Journaled | None:
    """A journal's bytes, read: None when its first line is not a start. A
    line that does not parse (cut by the kill) is passed over."""
    lines = data.splitlines()
    if not lines:
        return None
    try:
        found = Journaled(JournalStart.model_validate_json(lines[0]))
    except ValidationError:
        return None
    for raw in lines[1:]:
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                continue
            if body.get("full") is True:
                found.full = True
            elif "frame" in body:
                frame = FrameEntry.model_validate(body["frame"])
                found.listed[frame.index] = frame
            else:
                entry = JournalFile.model_validate(body)
                found.files[entry.file] = entry
        except (orjson.JSONDecodeError, ValidationError):
            continue
    return found


def _open(path: Path, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def read_journal(folder: Path, recording_id: str) -> Journaled | None:
    """``recording_id``'s journal, read; None when it has none (or the id is
    none of this computer's)."""
    try:
        path = journal_file(folder, recording_id)
        fd = _open(path, os.O_RDONLY)
    except (JournalError, OSError):
        return None
    try:
        data = os.read(fd, JOURNAL_BYTES + _FIRST_BYTES)
    finally:
        os.close(fd)
    found = parse(data)
    return found if found is not None and found.start.recording_id == recording_id else None


def _own_folder(folder: Path) -> None:
    """Make ``folder`` (and its parent, the key's) 0700; refuse one that is
    not a folder of this user's alone."""
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o077:
        raise JournalError(
            f"{folder} is not a folder of the service user's alone (0700): remove it "
            "and find what made it"
        )


class Journal:
    """The journal a recording writes as it goes (see the module's docstring).

    Lines noted before :meth:`begin` (``start.json``, uploaded before the
    start's entry is known) wait, and are written after the first line."""

    def __init__(self, folder: Path, recording_id: str) -> None:
        self.folder = folder
        self.recording_id = recording_id
        self.path = journal_file(folder, recording_id)
        self._waiting: list[bytes] = []
        self._begun = False
        self._stopped = False
        self._size = 0

    @classmethod
    def resumed(cls, folder: Path, recording_id: str, found: Journaled) -> Journal:
        """The journal of a recording restored from it: appended to as its end uploads."""
        journal = cls(folder, recording_id)
        journal._begun, journal._stopped = True, found.full
        try:
            journal._size = journal.path.stat().st_size
        except OSError:
            journal._stopped = True
        return journal

    def begin(self, first: JournalStart) -> None:
        try:
            _own_folder(self.folder)
            line = orjson.dumps(first.model_dump(mode="json")) + b"\n"
            fd = _open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except (OSError, JournalError) as exc:
            self._stop(exc)
            return
        self._begun, self._size = True, len(line)
        waiting, self._waiting = self._waiting, []
        for line in waiting:
            self._append(line)

    def file(self, name: str, sha256: str, size: int, content_type: str) -> None:
        """Note a file uploaded (right after its upload succeeded)."""
        entry = JournalFile(file=name, sha256=sha256, bytes=size, type=content_type, at=iso())
        self._add(entry.model_dump(mode="json"))

    def frame(self, entry: FrameEntry) -> None:
        """Note a frame listed (taken and uploaded, or kept with its error)."""
        self._add({"frame": entry.model_dump(mode="json")})

    def remove(self) -> None:
        """The recording ended: its journal goes."""
        self._stopped = True
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            log.error("%s: could not remove its journal: %s", self.recording_id, exc.strerror)

    def _add(self, body: dict[str, Any]) -> None:
        line = orjson.dumps(body) + b"\n"
        if not self._begun:
            if not self._stopped:
                self._waiting.append(line)
            return
        self._append(line)

    def _append(self, line: bytes) -> None:
        if self._stopped:
            return
        if self._size + len(line) > JOURNAL_BYTES:
            line, self._stopped = _FULL, True
            log.warning("%s: its journal is full; later files are not in it", self.recording_id)
        try:
            fd = _open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, line)  # one write: a kill leaves whole lines, or a cut last one
            finally:
                os.close(fd)
        except OSError as exc:
            self._stop(exc)
            return
        self._size += len(line)

    def _stop(self, exc: Exception) -> None:
        self._stopped = True
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        log.error(
            "%s: no journal (%s): a restart of the recorder would lose this recording's manifest",
            self.recording_id,
            why,
        )


def stale(first: JournalStart | None, modified: float, now: float) -> bool:
    """Whether a journal is past keeping: its recording's ``max_duration_s``
    and :data:`MARGIN_S` have run out (a journal with no start: since it was
    last written)."""
    began = seconds_of(first.started_at) if first is not None else None
    if first is None or began is None:
        return now - modified > MARGIN_S
    limit = first.ask.get("max_duration_s")
    seconds = float(limit) if isinstance(limit, int | float) else 0.0
    return now > began + seconds + MARGIN_S


def _first(path: Path) -> JournalStart | None:
    try:
        fd = _open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        head = os.read(fd, _FIRST_BYTES)
    finally:
        os.close(fd)
    try:
        return JournalStart.model_validate_json(head.split(b"\n", 1)[0])
    except ValidationError:
        return None


def prune(folder: Path, now: float, open_ids: Collection[str]) -> list[str]:
    """Remove the journals of recordings not open (``open_ids``) that are
    :func:`stale`, and all but the :data:`KEPT` newest of the rest; the ids
    removed."""
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".jsonl"]
    except OSError:
        return []
    kept: list[tuple[float, Path]] = []
    removed: list[str] = []
    for path in paths:
        if not RECORDING_ID.match(path.stem) or path.stem in open_ids:
            continue
        try:
            modified = path.lstat().st_mtime
        except OSError:
            continue
        if stale(_first(path), modified, now):
            removed.append(path.stem)
        else:
            kept.append((modified, path))
    kept.sort(reverse=True)
    removed += [path.stem for _, path in kept[KEPT:]]
    for name in removed:
        try:
            (folder / f"{name}.jsonl").unlink(missing_ok=True)
        except OSError as exc:
            log.error("could not remove the journal %s: %s", name, exc.strerror)
    return removed
