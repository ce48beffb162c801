"""One recording's life: its begin, frames as bursts settle, uploads as
taken, and its end.

The recorder follows the log file (the interface between programs) and hands
each new line to every open recording (:meth:`Recording.seen`); a recording's
frame loop takes a frame when its burst settles, its picture from
:mod:`.camera`. The end reads the log's slice (:mod:`.log_slice`), lists the
downloads and the video's times (:mod:`.manifest`) and signs the manifest
(:mod:`.provenance`). Each upload and each frame is noted in the recording's journal
(:mod:`.journal`); a recording restored from its journal (its recorder
restarted mid-recording) only ends, like any other, its manifest rebuilt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv.log.lines import BROWSER_EXITED, iso, seconds_of
from agentenv.log.reader import LogReader
from agentenv.log.redact import redact_text
from agentenv.metrics import RecorderCounts
from agentenv.protocol.chain import CHAIN_FILE
from agentenv.protocol.handoffs import handoffs_in
from agentenv.protocol.log import LogLine, action_of, agent_act, person_act, scope_of
from agentenv.protocol.recording import (
    BrowserRecordingManifest,
    FrameEntry,
    FrameKind,
    Gap,
    Grant,
    ImageType,
    LogEntry,
    Start,
    frame_file,
)
from agentenv.recorder.bursts import Bursts, FrameDue
from agentenv.recorder.camera import Aim, Camera
from agentenv.recorder.grants import Listed, Uploader, UploadError, open_grant
from agentenv.recorder.har import Har
from agentenv.recorder.journal import Journal, Journaled, start_line
from agentenv.recorder.log_slice import log_slice
from agentenv.recorder.manifest import downloads_made, times_in
from agentenv.recorder.provenance import Provenance, sign_manifest
from agentenv.recorder.typed import Typed
from agentenv.recorder.video import Video, moves_video
from agentenv.relay_link import (
    BrowserError,
    BrowserLink,
    CdpError,
    active_tab,
)

__all__ = ["Recording"]

log = logging.getLogger("agentenv.recorder")

#: An end gives the frame in hand this long (the rest for its upload).
_LOOP_END_S = 30.0
_ERROR_CUT = 2000


@dataclass
class Recording:
    start: Start
    link: BrowserLink
    reader: LogReader
    upload: Uploader
    recording_id: str
    #: Folders a file: grant may write in (AGENTENV_UPLOAD_ROOTS).
    roots: tuple[Path, ...] = ()
    #: The scope recorded (None: every entry; a computer of one scope):
    #: ``link`` acts in it, so the frames are its tabs; its entries only
    #: make bursts and the log slice.
    scope: str | None = None
    bursts: Bursts = field(default_factory=Bursts)
    frames: list[FrameEntry] = field(default_factory=list)
    start_seq: int = 0
    started_at: str = ""
    limits_hit: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    manifest: BrowserRecordingManifest | None = None
    last_tab: str | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _ending: bool = False
    _take: asyncio.Lock = field(default_factory=asyncio.Lock)
    _loop: asyncio.Task[None] | None = None
    _timer: asyncio.Task[None] | None = None
    _end_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _began: float = field(default_factory=time.monotonic)
    #: The recorder's counts for ``/metrics`` (its :class:`Recorder` shares one).
    counts: RecorderCounts = field(default_factory=RecorderCounts)
    #: The scope's downloads folder, and how much of it an upload may take.
    downloads_folder: str | None = None
    download_bytes: int = 0
    #: A relay connection of the network log's own (``start.har``), and the log.
    har_link: BrowserLink | None = None
    har: Har | None = None
    #: What the log says was typed into password fields (the recorder's
    #: follower feeds it): the network log's window for typed text.
    typed: Typed = field(default_factory=Typed)
    #: The video (``start.video``, on the recording's own link), and its bytes a minute.
    video_budget: int = 0
    video: Video | None = None
    _following: asyncio.Future[None] | None = None
    #: What the computer is (start.json's, the manifest's) and its key.
    provenance: Provenance | None = None
    #: What it wrote, for a restarted recorder (:mod:`.journal`); the
    #: journal it was restored from, when its recorder restarted mid-recording.
    journal: Journal | None = None
    restored: Journaled | None = None
    #: What the frames show, on ``link``.
    camera: Camera = field(init=False)

    def __post_init__(self) -> None:
        self.camera = Camera(self.link)

    @property
    def files(self) -> dict[str, str]:
        """The SHA-256 of every file uploaded so far, by name."""
        return self.upload.files if isinstance(self.upload, Listed) else {}

    # -- lines from the log ----------------------------------------------------

    def seen(self, line: LogLine) -> None:
        if self._ending or self.restored is not None or line["seq"] <= self.start_seq:
            return
        action = action_of(line)
        if action is not None and action.get("op") == BROWSER_EXITED:
            # Every scope's browser went away: this recording's too.
            why = action.get("error") or ""
            self.gaps.append(Gap(seq=line["seq"], at=line["at"], why=why))
            return
        if self.scope is not None and scope_of(line) != self.scope:
            return
        self.bursts.seen(line, time.monotonic())
        if self.bursts.waiting:
            self._wake.set()
        video, acted = self.video, agent_act(line) or person_act(line)
        if video is not None and acted is not None and moves_video(acted):
            tab = acted.get("tab")
            if isinstance(tab, str) and tab != video.tab:
                self._following = asyncio.ensure_future(video.follow(tab))  # it acts there

    # -- frames ------------------------------------------------------------------

    async def take(self, kind: FrameKind, after: list[int], tab: str | None) -> None:
        """Take, upload and list one frame (one at a time)."""
        if not self.start.frames:
            return
        async with self._take:
            limit = self.start.max_frames
            if limit is not None and len(self.frames) >= limit:
                if "max_frames" not in self.limits_hit:
                    self.limits_hit.append("max_frames")
                return
            index = len(self.frames)
            at = iso()
            error: str | None = None
            data: bytes | None = None
            fmt: ImageType = "jpeg"
            aim = Aim(tab)
            try:
                data, fmt = await self.camera.picture(aim, index)
            except (BrowserError, CdpError) as exc:
                error = redact_text(str(exc)[: _ERROR_CUT * 2])[:_ERROR_CUT]
            tab, url = aim.tab, aim.url
            file = frame_file(index, kind, fmt)
            if data is not None:
                try:
                    await self.upload.put(file, data, f"image/{fmt}")
                except UploadError as exc:
                    error = str(exc)[:_ERROR_CUT]
            self.counts.frames[kind] = self.counts.frames.get(kind, 0) + 1
            if error is not None:
                self.counts.missing += 1
            entry = FrameEntry(
                index=index,
                kind=kind,
                after=after,
                tab=tab,
                url=url,
                at=at,
                file=file,
                type=fmt,
                error=error,
            )
            self.frames.append(entry)
            if self.journal is not None:
                self.journal.frame(entry)
            if tab is not None:
                self.last_tab = tab

    async def _run(self) -> None:
        await self.take("first", [], None)
        while not self._ending:
            wait = self.bursts.wait_s(time.monotonic())
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait if wait is not None else 1.0)
            due: FrameDue | None = self.bursts.due(time.monotonic())
            if due is not None and not self._ending:
                await self.take(due.kind, due.after, due.tab)

    async def _limit(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.limits_hit.append("max_duration_s")
        await self.end("max_duration", None)

    async def begin(self) -> None:
        async with self.link.action(
            via="agentenv",
            who="agentenv",
            op="browser-recording/start",
            acts="reading",
            args={
                "request_id": self.start.request_id,
                "name": self.start.name,
                "frames": self.start.frames,
                "downloads": self.start.downloads,
                "recording_id": self.recording_id,
            },
        ) as action:
            self.start_seq = action.entry
        self.started_at = iso()
        if self.journal is not None:
            self.journal.begin(
                start_line(
                    self.start,
                    self.recording_id,
                    self.scope,
                    self.start_seq,
                    self.started_at,
                    self._facts(),
                )
            )
        if self.start.har is not None and self.har_link is not None:
            har = Har(self.har_link, self.upload, bodies=self.start.har.bodies, typed=self.typed)
            try:
                await har.start()
                self.har = har
            except BrowserError as exc:  # the recording goes on; its manifest has no har
                log.error("%s: no network log: %s", self.recording_id, exc)
                await har.stop()
        if self.start.video is not None:
            began = seconds_of(self.started_at) or time.time()
            video = Video(
                self.link, self.upload, self.start.video.fps, began, budget=self.video_budget
            )
            try:
                await video.start(await active_tab(self.link))
                self.video = self.camera.video = video
            except BrowserError as exc:
                log.error("%s: no video: %s", self.recording_id, exc)
        self._loop = asyncio.create_task(self._run(), name=self.recording_id)
        if self.start.max_duration_s is not None:
            self._timer = asyncio.create_task(self._limit(self.start.max_duration_s))

    # -- the end -------------------------------------------------------------------

    async def end(self, reason: str, grant: Grant | None) -> BrowserRecordingManifest:
        """End (once; again answers the same manifest), upload log and manifest."""
        async with self._end_lock:
            if self.manifest is not None:
                return self.manifest
            if grant is not None:
                # refused before anything ends; the files uploaded so far stay listed
                self.upload = Listed(
                    await open_grant(grant, self.recording_id, self.roots),
                    self.files,
                    self.journal,
                )
            self._ending = True
            self._wake.set()
            if self._loop is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(self._loop, _LOOP_END_S)
            if self._timer is not None and self._timer is not asyncio.current_task():
                self._timer.cancel()
            while (settling := self.bursts.flush()) is not None:
                # A burst still settling: its frame before the last.
                await self.take(settling.kind, settling.after, settling.tab)
            await self.take("last", [], self.last_tab)
            async with self.link.action(
                via="agentenv",
                who="agentenv",
                op="browser-recording/end",
                acts="reading",
                args={"recording_id": self.recording_id, "reason": reason},
            ) as action:
                end_seq = action.entry
            sliced = await log_slice(self.reader, self.link, self.scope, self.start_seq, end_seq)
            kept, missing, chain = sliced.kept, sliced.missing, sliced.chain
            lines = [raw for raw, _ in kept]
            log_entry: LogEntry | None = LogEntry(file="log.jsonl", lines=len(lines))
            try:
                await self.upload.put(
                    "log.jsonl", b"".join(x + b"\n" for x in lines), "application/x-ndjson"
                )
            except UploadError as exc:
                log.error("%s: %s", self.recording_id, exc)
                log_entry = None
            if log_entry is not None:
                try:
                    await self.upload.put(CHAIN_FILE, chain.chain, "application/x-ndjson")
                    log_entry.chain = CHAIN_FILE
                except UploadError as exc:
                    log.error("%s: %s", self.recording_id, exc)
            downloads = (
                await downloads_made(
                    self.downloads_folder,
                    self.started_at,
                    self.upload if self.start.downloads else None,
                    self.download_bytes,
                    self.recording_id,
                )
                if self.downloads_folder is not None
                else []
            )
            video = None
            if self.video is not None:
                self.video.upload = self.upload
                video = await self.video.stop(time.time())
            elif self.restored is not None:  # the chunks uploaded before the restart
                video = self.restored.video()
            if video is not None:
                video.frames_at = times_in(
                    video,
                    ((str(f.index), self._shot_iso(f.index) or f.at) for f in self.frames),
                )
                video.entries_at = times_in(video, ((str(x["seq"]), x["at"]) for _, x in kept))
            har = None
            if self.har is not None:
                self.har.upload = self.upload  # the end's grant, when it named one
                har = await self.har.stop(lines)
            elif self.restored is not None:
                har = self.restored.har()
            manifest = BrowserRecordingManifest(
                recording_id=self.recording_id,
                request_id=self.start.request_id,
                name=self.start.name,
                started_at=self.started_at,
                ended_at=iso(),
                reason=reason,
                start_seq=self.start_seq,
                end_seq=end_seq,
                frames=self.frames,
                log=log_entry,
                chain_first=chain.first,
                chain_last=chain.last,
                missing_frames=sum(1 for f in self.frames if f.error),
                log_missing=missing,
                limits_hit=self.limits_hit,
                scope=self.scope,
                gaps=self.gaps,
                handoffs=handoffs_in(x for _, x in kept),
                downloads=downloads,
                har=har,
                video=video,
                files=dict(self.files),
                rebuilt=self.restored is not None,
                rebuilt_why=self.restored.why() if self.restored is not None else None,
                **self._facts(),
            )
            manifest, data = sign_manifest(
                manifest, self.provenance.signer if self.provenance else None
            )
            try:
                await self.upload.put("manifest.json", data, "application/json")
            except UploadError as exc:
                log.error("%s: %s", self.recording_id, exc)
            if self.journal is not None:
                await asyncio.to_thread(self.journal.remove)
            self.manifest = manifest
            self._release()
            return manifest

    def _release(self) -> None:
        """Let go of what only a recording still going needs: the store's
        client, the last pictures, the network log and the video. An ended
        recording is kept for its manifest alone (a retried end answers it)."""
        self.upload.close()
        self.camera.release()
        self.har, self.video, self.har_link = None, None, None

    def _facts(self) -> dict[str, Any]:
        """What the computer is, as start.json said (no key: signing adds it)."""
        if self.provenance is None:
            return {}
        facts = self.provenance.facts()
        facts.pop("key")
        return facts

    def _shot_iso(self, index: int) -> str | None:
        shot = self.camera.shot_at.get(index)
        return iso(shot) if shot is not None else None
