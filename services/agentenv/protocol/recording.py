"""browser-recording/v1 wire models (docs/spec.md section 4)."""

from __future__ import annotations

import ipaddress
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, StrictBool, field_validator

from agentenv.protocol import Inbound
from agentenv.protocol.chain import CHAIN_FILE
from agentenv.protocol.handoffs import Handoff

__all__ = [
    "REASONS",
    "RECORDING_ID",
    "VIDEO_CHUNK_S",
    "BrowserRecordingManifest",
    "DownloadEntry",
    "End",
    "EndAll",
    "FrameEntry",
    "FrameKind",
    "Gap",
    "Grant",
    "HarAsk",
    "HarEntry",
    "ImageType",
    "LogEntry",
    "Start",
    "VideoAsk",
    "VideoChunk",
    "VideoEntry",
    "frame_file",
    "new_recording_id",
    "public_enough",
    "rebuild",
]

#: Why a recording ended.
REASONS = ("completed", "failed", "cancelled", "timeout", "reset", "stopped", "max_duration")
Reason = Literal["completed", "failed", "cancelled", "timeout", "reset", "stopped", "max_duration"]


#: Host names of cloud metadata services (their addresses are link-local or listed).
METADATA_HOSTS = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "169.254.169.254"}
)
#: Metadata addresses outside the link-local ranges (Alibaba Cloud, AWS over IPv6).
METADATA_ADDRESSES = frozenset({"100.100.100.200", "fd00:ec2::254"})


def public_enough(host: str) -> bool:
    """Whether an upload endpoint's host (a name or an address) is one the
    computer may reach: not link-local, not a metadata service, not
    unspecified or multicast. Names are checked again once resolved
    (:func:`agentenv.recorder.grants.check_endpoint`)."""
    name = host.strip("[]").lower().rstrip(".")
    if name in METADATA_HOSTS or name in METADATA_ADDRESSES:
        return False
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return True
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:169.254.169.254 is 169.254.169.254
    if str(address) in METADATA_ADDRESSES or str(address) in METADATA_HOSTS:
        return False
    return not (address.is_link_local or address.is_unspecified or address.is_multicast)


class Grant(Inbound):
    """Where and how to upload: a folder (``file:///…``) or S3 (``s3://bucket/prefix``).

    Credentials never reach a log, a manifest or an error.
    """

    url: str = Field(min_length=1, max_length=4096)
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = Field(default=None, repr=False)
    secret_access_key: str | None = Field(default=None, repr=False)
    session_token: str | None = Field(default=None, repr=False)
    expires_at: datetime | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
                raise ValueError("a file grant needs an absolute folder: file:///path/to/folder")
        elif parts.scheme == "s3":
            if not parts.netloc:
                raise ValueError("an s3 grant needs a bucket: s3://bucket/prefix")
        else:
            raise ValueError("must be file:///folder or s3://bucket/prefix")
        return v

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is None:
            return None
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL of the S3-compatible store")
        if not public_enough(parts.hostname):
            raise ValueError("names a link-local or metadata address; give the store's own address")
        return v

    def expired(self, now: datetime | None = None) -> bool:
        if self.expires_at is None:
            return False
        moment = now or datetime.now(UTC)
        expires = self.expires_at if self.expires_at.tzinfo else self.expires_at.replace(tzinfo=UTC)
        return expires <= moment

    def where(self) -> str:
        """The grant's destination without credentials, for manifests and errors."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}{parts.path}"


class VideoAsk(Inbound):
    """``video``: frames a second, at most the card's ``video_fps_max``."""

    fps: int = Field(5, ge=1, le=30)


class HarAsk(Inbound):
    """``har``: the requests' bodies too (cut, and their secrets out)."""

    bodies: StrictBool = False


class Start(Inbound):
    request_id: str = Field(min_length=1, max_length=200)
    upload: Grant
    frames: StrictBool = True
    name: str | None = Field(None, max_length=200)
    max_frames: int | None = Field(None, ge=1, le=100_000)
    max_duration_s: float | None = Field(None, gt=0, le=7 * 24 * 3600)
    #: The scope recorded (docs/spec.md section 7): its tabs framed, its entries in
    #: the log slice. Left out: the home scope (every tab on a computer of one).
    scope: str | None = Field(None, min_length=1, max_length=256)
    #: Upload the files downloaded while it ran under ``downloads/`` (they
    #: are listed in the manifest either way).
    downloads: StrictBool = False
    #: Record the scope's requests as ``network.har`` (HAR 1.2).
    har: HarAsk | None = None
    #: A video of the tab the recorded agent acts in (H.264 MP4 chunks).
    video: VideoAsk | None = None


class End(Inbound):
    recording_id: str = Field(min_length=1, max_length=200)
    upload: Grant | None = None
    reason: Reason = "completed"


class EndAll(Inbound):
    reason: Reason = "stopped"
    #: Only the recordings of this scope (a scope being closed); every one if none.
    scope: Annotated[str, Field(min_length=1, max_length=256)] | None = None


#: ``action``: after an agent's burst; ``person``: after a person's, through
#: the live view.
FrameKind = Literal["first", "action", "person", "last"]
ImageType = Literal["jpeg", "png"]


class FrameEntry(BaseModel):
    index: int
    kind: FrameKind | None
    after: list[int]
    tab: str | None
    url: str | None
    at: str | None
    file: str
    type: ImageType
    error: str | None = None


class Gap(BaseModel):
    """Where a recording's browser went away (Chromium exited and restarted):
    the log's entry saying so, when, and why."""

    seq: int
    at: str | None
    why: str


class LogEntry(BaseModel):
    """The log slice (``file``, its ``lines``) and the hash chain across it
    (``chain``: :data:`agentenv.protocol.chain.CHAIN_FILE`)."""

    file: str
    lines: int
    chain: str | None = None


class VideoChunk(BaseModel):
    """One uploaded MP4 of the video: when it starts and ends (the log's
    clock), where it starts in the video (``offset_s``), its frames and bytes."""

    file: str
    start_at: str
    end_at: str
    offset_s: float
    frames: int
    bytes: int


class VideoEntry(BaseModel):
    """The video: time 0 is ``start_at`` (the recording's start); each frame
    and each log entry of the slice at its time in it (``frames_at`` by the
    frame's index, ``entries_at`` by ``seq``, seconds)."""

    fps: int
    format: str
    codec: str
    start_at: str
    seconds: float
    chunks: list[VideoChunk]
    frames_at: dict[str, float] = Field(default_factory=dict)
    entries_at: dict[str, float] = Field(default_factory=dict)


class HarEntry(BaseModel):
    """``network.har`` (None when its upload failed), how many requests it
    holds, the parts uploaded as it went, and the requests past its bound."""

    file: str | None
    entries: int
    parts: list[str]
    dropped: int


class DownloadEntry(BaseModel):
    """A file downloaded while the recording ran (in its scope's folder): its
    name and size, and where it was uploaded (``downloads/<name>``; None when
    not asked for, or left out: ``why``)."""

    name: str
    bytes: int
    file: str | None = None
    why: str | None = None


class BrowserRecordingManifest(BaseModel):
    recording_id: str
    request_id: str | None
    name: str | None
    started_at: str | None
    ended_at: str | None
    reason: str | None
    start_seq: int | None
    end_seq: int | None
    frames: list[FrameEntry]
    log: LogEntry | None
    missing_frames: int
    log_missing: list[int]
    limits_hit: list[str]
    #: Not made by a recorder that followed it to its end: rebuilt by the
    #: computer from the recording's journal (its recorder restarted
    #: mid-recording; ``rebuilt_why`` says what it lacks), or by the harness
    #: from a store's file names (no ``rebuilt_why``, no signature).
    rebuilt: bool = False
    rebuilt_why: str | None = None
    #: The scope recorded (computers of two scopes or more).
    scope: str | None = None
    #: Chromium went away while it was open: frames and entries are missing
    #: there, not lost silently.
    gaps: list[Gap] = Field(default_factory=list)
    #: The files downloaded while it ran (:class:`DownloadEntry`).
    downloads: list[DownloadEntry] = Field(default_factory=list)
    #: Its network log, when the start asked (:class:`HarEntry`).
    har: HarEntry | None = None
    #: Its video, when the start asked (:class:`VideoEntry`).
    video: VideoEntry | None = None
    #: When a person stepped in, asked or not (:mod:`agentenv.protocol.handoffs`),
    #: read from the log slice; ``agentenv verify`` reads them again.
    handoffs: list[Handoff] = Field(default_factory=list)
    #: The hash chain across the log slice (:mod:`agentenv.protocol.chain`):
    #: what its run's first line chains from, and its last line's hash.
    chain_first: str | None = None
    chain_last: str | None = None
    #: The evidence (docs/spec.md section 7, :mod:`agentenv.protocol.attestation`):
    #: the hex SHA-256 of every file the recording uploaded, by name (every
    #: file but manifest.json); None in a manifest the harness rebuilt.
    files: dict[str, str] | None = None
    #: ``sha256:…`` of the computer's own files, made when its image was
    #: built (None: a stack run from a source tree, ``make dev``).
    image_digest: str | None = None
    #: Chromium's version (its /json/version ``Browser``) and its browser
    #: process's command line switches, as it runs.
    chromium: str | None = None
    chromium_flags: list[str] | None = None
    #: The computer's public key (``ed25519:…``), and its signature of this
    #: manifest (base64), over ``manifest.json`` less this member
    #: (:func:`agentenv.protocol.attestation.signed_part`).
    key: str | None = None
    signature: str | None = None


#: ``frames/<index>-<kind>.<ext>``
FRAME_NAME = re.compile(r"^frames/(\d+)-(first|action|last)\.(jpg|png)$")
#: A video's chunks (``video/NNNN.mp4``, each this many seconds) and the
#: network log's parts (``network/NNNN.har``).
VIDEO_NAME = re.compile(r"^video/(\d{4})\.mp4$")
VIDEO_CHUNK_S = 10.0
HAR_PART = re.compile(r"^network/\d{4}\.har$")


#: A recording's id, as the recorder makes it (:func:`new_recording_id`).
RECORDING_ID = re.compile(r"^rec-[0-9a-f]{16}$")


def new_recording_id() -> str:
    return f"rec-{uuid.uuid4().hex[:16]}"


def frame_file(index: int, kind: str, fmt: str) -> str:
    return f"frames/{index:04d}-{kind}.{'jpg' if fmt == 'jpeg' else 'png'}"


def rebuild(
    recording_id: str, names: Iterable[str], log_lines: int | None
) -> BrowserRecordingManifest:
    """A manifest from the names of an upload's files (relative to the recording).

    Used when the computer no longer knows the recording: each frame takes its
    index and type from its file name; its kind and time are not known. The
    video's chunks that were uploaded are listed in order, each at its place
    in the video (:data:`VIDEO_CHUNK_S` apart), and the network log's parts.
    """
    names = sorted(names)
    chunks = [
        VideoChunk(
            file=name,
            start_at="",
            end_at="",
            offset_s=int(found.group(1)) * VIDEO_CHUNK_S,
            frames=0,
            bytes=0,
        )
        for name in names
        if (found := VIDEO_NAME.match(name)) is not None
    ]
    parts = [name for name in names if HAR_PART.match(name)]
    frames: list[FrameEntry] = []
    for name in names:
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
        log=LogEntry(
            file="log.jsonl",
            lines=log_lines,
            chain=CHAIN_FILE if CHAIN_FILE in names else None,
        )
        if log_lines is not None
        else None,
        missing_frames=0,
        log_missing=[],
        limits_hit=[],
        rebuilt=True,
        video=VideoEntry(
            fps=0,
            format="mp4",
            codec="h264",
            start_at="",
            seconds=round(len(chunks) * VIDEO_CHUNK_S, 3),
            chunks=chunks,
        )
        if chunks
        else None,
        har=HarEntry(
            file="network.har" if "network.har" in names else None,
            entries=0,
            parts=parts,
            dropped=0,
        )
        if parts or "network.har" in names
        else None,
    )
