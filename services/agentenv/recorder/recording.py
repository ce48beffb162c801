"""One recording's life: frames as bursts settle, uploads as taken, an end.

The recorder follows the log file (the interface between programs) and hands
each new line to every open recording (:meth:`Recording.seen`); a recording's
frame loop takes a frame when its burst settles. Captures go through the
relay as ``agentenv``, so they are not on the record, and never bring a tab
to the front. Each upload and each frame is noted in the recording's journal
(:mod:`.journal`); a recording restored from its journal (its recorder
restarted mid-recording) only ends, like any other, its manifest rebuilt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv.calls import SESSION_GONE
from agentenv.downloads import listed, opened
from agentenv.log.lines import BROWSER_EXITED, iso, seconds_of
from agentenv.log.reader import LogReader
from agentenv.log.redact import redact_cut, redact_text
from agentenv.metrics import RecorderCounts
from agentenv.protocol.chain import CHAIN_FILE, Run, chain_run
from agentenv.protocol.control import Open, OpenEntries, TabOrder, Tabs
from agentenv.protocol.log import LogLine, action_of, agent_act, parse_line, scope_of
from agentenv.protocol.recording import (
    BrowserRecordingManifest,
    DownloadEntry,
    FrameEntry,
    FrameKind,
    Gap,
    Grant,
    ImageType,
    LogEntry,
    Start,
    VideoEntry,
    frame_file,
)
from agentenv.recorder.bursts import Bursts, FrameDue
from agentenv.recorder.grants import Listed, Uploader, UploadError, open_grant
from agentenv.recorder.har import Har
from agentenv.recorder.journal import Journal, Journaled, start_line
from agentenv.recorder.provenance import Provenance, sign_manifest
from agentenv.recorder.typed import Typed
from agentenv.recorder.video import Video, moves_video
from agentenv.relay_link import (
    CAPTURE_DEADLINE_S,
    SECOND_CAPTURE_S,
    BrowserError,
    BrowserLink,
    CdpError,
    active_tab,
    capture,
    pages,
)

__all__ = ["END_WAIT_S", "LOAD_WAIT_S", "Recording"]

#: The recorder's counts (``/metrics``).

log = logging.getLogger("agentenv.recorder")

#: How long an end waits for entries still in flight to be written.
END_WAIT_S = 10.0
#: How long a frame waits for its tab's page to finish loading.
LOAD_WAIT_S = 5.0
#: How long one frame may take to find its tab and capture it, its tabs
#: closing under it; a try begins only with :data:`_TRY_LEAST_S` left. An
#: end gives the frame in hand :data:`_LOOP_END_S` (the rest for its upload).
FRAME_WAIT_S = 20.0
_TRY_LEAST_S = 2.0
_LOOP_END_S = 30.0
#: How long the relay's front tab may still name a tab just closed.
_FRONT_WAIT_S = 1.0
#: How many tabs one frame tries when each closes under its capture.
_TAB_TRIES = 3
#: Chromium's answer to a command on a page being closed, and how long such
#: a page is given to leave the tab list.
_CLOSING = "Not attached to an active page"
_CLOSING_WAIT_S = 1.0
_ERROR_CUT = 2000


@dataclass
class _Aim:
    """The tab a frame shows and its URL, as far as the frame got."""

    tab: str | None
    url: str | None = None


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
    _last_capture: dict[str, tuple[bytes, ImageType]] = field(default_factory=dict)
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
    #: When each frame's picture was taken (its ``at`` is when the frame began).
    _shot_at: dict[int, float] = field(default_factory=dict)
    #: What the computer is (start.json's, the manifest's) and its key.
    provenance: Provenance | None = None
    #: What it wrote, for a restarted recorder (:mod:`.journal`); the
    #: journal it was restored from, when its recorder restarted mid-recording.
    journal: Journal | None = None
    restored: Journaled | None = None

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
        if self.bursts.pending:
            self._wake.set()
        video, acted = self.video, agent_act(line)
        if video is not None and acted is not None and moves_video(acted):
            tab = acted.get("tab")
            if isinstance(tab, str) and tab != video.tab:
                self._following = asyncio.ensure_future(video.follow(tab))  # it acts there

    # -- frames ------------------------------------------------------------------

    async def _page_loaded(self, tab: str, until: float) -> bool:
        """Wait for ``tab``'s page to have loaded, at most :data:`LOAD_WAIT_S`
        and never past ``until`` (monotonic); False if it cannot say.

        A navigation in flight (the relay hears its main frame start loading,
        before the new page answers) is waited for, so a slow page's frame
        shows the new page, not the old one still on screen."""
        deadline = min(time.monotonic() + LOAD_WAIT_S, until)
        try:
            session = await self.link.session(tab)
            while time.monotonic() < deadline:
                known = await self.link.control(
                    Tabs(), TabOrder, deadline_s=max(0.2, min(2.0, deadline - time.monotonic()))
                )
                if tab in known.loading:
                    await asyncio.sleep(0.05)
                    continue
                try:
                    result = await self.link.call(
                        "Runtime.evaluate",
                        {"expression": "document.readyState", "returnByValue": True},
                        session=session,
                        deadline_s=max(0.2, deadline - time.monotonic()),
                    )
                except CdpError:
                    # The document went away under the call (a navigation): ask again.
                    await asyncio.sleep(0.05)
                    session = await self.link.session(tab)
                    continue
                if result.get("result", {}).get("value") == "complete":
                    return True
                await asyncio.sleep(0.05)
        except (BrowserError, CdpError):
            return False
        return True  # loading past the limit: frame it as it is

    async def _open_tabs(self) -> dict[str, dict[str, Any]]:
        return {p["targetId"]: p for p in await pages(self.link)}

    async def _front(self, aim: _Aim) -> dict[str, dict[str, Any]]:
        """Aim at ``aim.tab`` if it is open, else at the tab in front; the open tabs.

        The relay hears a tab close on its own connection to Chromium, so
        just after a close it may still name the closed tab as the one in
        front: it is asked again for up to :data:`_FRONT_WAIT_S`, then the
        first open tab is taken."""
        open_tabs = await self._open_tabs()
        if aim.tab in open_tabs:
            return open_tabs
        aim.url = None
        end = time.monotonic() + _FRONT_WAIT_S
        while True:
            aim.tab = await active_tab(self.link)
            if aim.tab is None:
                raise BrowserError("no tab is open")
            open_tabs = await self._open_tabs()
            if aim.tab in open_tabs:
                return open_tabs
            if time.monotonic() > end:
                break
            await asyncio.sleep(0.1)
        if not open_tabs:
            raise BrowserError("no tab is open")
        aim.tab = next(iter(open_tabs))
        return open_tabs

    async def _gone(self, tab: str, exc: BrowserError) -> bool:
        """Whether ``tab`` went away under a capture that failed with ``exc``.
        A page being closed answers "Not attached to an active page", and its
        session ends, while it is still listed: it is given
        :data:`_CLOSING_WAIT_S` to go. Not knowing (the tab list not
        answering) counts as not gone."""
        closing = isinstance(exc, CdpError) and (
            _CLOSING in exc.message or exc.code == SESSION_GONE["code"]
        )
        try:
            if tab not in await self._open_tabs():
                return True
            if not closing:
                return False
            end = time.monotonic() + _CLOSING_WAIT_S
            while time.monotonic() < end:
                await asyncio.sleep(0.1)
                if tab not in await self._open_tabs():
                    return True
        except BrowserError:
            pass
        return False

    async def _picture(self, aim: _Aim, index: int) -> tuple[bytes, ImageType]:
        """One frame's picture, ``aim`` left at the tab and URL it shows.

        A tab that closes while its frame waits or is captured (the agent's
        last act was closing it: Chromium answers the capture "Session with
        given id not found", "Not attached to an active page", or never)
        gives way to the tab in front, whose page is waited for in turn; a
        session that ended under a tab still open gives way to a new one.
        At most :data:`_TAB_TRIES` tries, all within :data:`FRAME_WAIT_S`
        (each later try's load wait and capture cut to the time left). A page
        that cannot paint (a dialog) gives its last capture, as it was.
        """
        end = time.monotonic() + FRAME_WAIT_S
        why = f"the tabs closed under {_TAB_TRIES} captures in a row"
        for _ in range(_TAB_TRIES):
            if end - time.monotonic() < _TRY_LEAST_S:
                why = f"the tabs closed under its captures for {FRAME_WAIT_S:.0f} s"
                break
            await self._front(aim)
            tab = aim.tab
            assert tab is not None
            answered = await self._page_loaded(tab, end - _TRY_LEAST_S / 2)
            open_tabs = await self._front(aim)  # it may have closed while loading
            if aim.tab != tab:
                continue  # the tab in front, its own page waited for
            # The URL shown when the capture is taken (after the load wait).
            raw = str(open_tabs[tab].get("url", ""))
            aim.url = _safe_url(raw) if raw else None
            session: str | None = None
            try:
                session = await self.link.session(tab)
                if not answered and tab in self._last_capture:
                    raise BrowserError("the page does not answer (a dialog?)")
                left = end - time.monotonic() - SECOND_CAPTURE_S
                left = min(CAPTURE_DEADLINE_S, max(_TRY_LEAST_S / 2, left))
                data = await capture(self.link, tab, "jpeg", 80, deadline_s=left)
            except (BrowserError, CdpError) as exc:
                if await self._gone(tab, exc):
                    continue  # it closed under the capture: the tab in front
                if isinstance(exc, CdpError) and exc.code == SESSION_GONE["code"]:
                    if session is not None:  # it ended under a tab still open
                        self.link.forget(tab, session)
                    continue
                if tab not in self._last_capture:
                    raise
                return self._last_capture[tab]
            self._last_capture[tab] = (data, "jpeg")
            self._shot_at[index] = time.time()
            if self.video is not None and tab == self.video.tab:
                self.video.picture(data, self._shot_at[index])  # the same picture
            return data, "jpeg"
        raise BrowserError(why)

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
            aim = _Aim(tab)
            try:
                data, fmt = await self._picture(aim, index)
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
                await self.take("action", due.after, due.tab)

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
                self.video = video
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
            settling = self.bursts.flush()
            if settling is not None:  # a burst still settling: its frame before the last
                await self.take("action", settling.after, settling.tab)
            await self.take("last", [], self.last_tab)
            async with self.link.action(
                via="agentenv",
                who="agentenv",
                op="browser-recording/end",
                acts="reading",
                args={"recording_id": self.recording_id, "reason": reason},
            ) as action:
                end_seq = action.entry
            kept, missing, chain = await self._log_slice(end_seq)
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
            downloads = await self._downloads()
            video = None
            if self.video is not None:
                self.video.upload = self.upload
                video = await self.video.stop(time.time())
            elif self.restored is not None:  # the chunks uploaded before the restart
                video = self.restored.video()
            if video is not None:
                video.frames_at = _times(
                    video,
                    ((str(f.index), self._shot_iso(f.index) or f.at) for f in self.frames),
                )
                video.entries_at = _times(video, ((str(x["seq"]), x["at"]) for _, x in kept))
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
        self._last_capture.clear()
        self._shot_at.clear()
        self.har, self.video, self.har_link = None, None, None

    def _facts(self) -> dict[str, Any]:
        """What the computer is, as start.json said (no key: signing adds it)."""
        if self.provenance is None:
            return {}
        facts = self.provenance.facts()
        facts.pop("key")
        return facts

    def _shot_iso(self, index: int) -> str | None:
        shot = self._shot_at.get(index)
        return iso(shot) if shot is not None else None

    async def _downloads(self) -> list[DownloadEntry]:
        """The files downloaded since the start (changed since, whole), in the
        recording's scope's folder; uploaded under ``downloads/`` when the
        start asked, up to the recorder's budget for them."""
        if self.downloads_folder is None:
            return []
        found = await asyncio.to_thread(listed, self.downloads_folder)
        made = [d for d in found if d.modified >= self.started_at and not d.partial]
        out: list[DownloadEntry] = []
        left = self.download_bytes
        for download in made:
            entry = DownloadEntry(name=download.name, bytes=download.bytes)
            out.append(entry)
            if not self.start.downloads:
                continue
            if download.bytes > left:
                entry.why = "past the recording's budget (AGENTENV_RECORDING_DOWNLOAD_BYTES)"
                continue
            data = await asyncio.to_thread(_read, self.downloads_folder, download.name)
            if data is None:
                entry.why = "gone before it could be read"
                continue
            try:
                await self.upload.put(
                    f"downloads/{download.name}", data, "application/octet-stream"
                )
            except UploadError as exc:
                log.error("%s: %s", self.recording_id, exc)
                entry.why = "the upload failed"
                continue
            left -= len(data)
            entry.file = f"downloads/{download.name}"
        return out

    async def _log_slice(self, end_seq: int) -> tuple[list[tuple[bytes, LogLine]], list[int], Run]:
        """The log's lines (each as written, and read) from the start's entry to
        the end's, in ``seq`` order, waiting (bounded) for entries still in
        flight; what is still unwritten is listed; and the hash chain across
        the run of the file they are in. A
        scoped recording waits for its own scope's only: an entry another
        scope holds open (a command Chromium never answers) is not its own,
        and is no gap in it (``AgentEnv.pending`` names each open entry's scope).
        It keeps its scope's lines, and the breaks (the computer's own word
        that lines were lost to a crash, naming no other scope's content)."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + END_WAIT_S
        others: set[int] = set()
        while True:
            await loop.run_in_executor(None, self.reader.read, end_seq, 1)
            if self.reader.contiguous >= end_seq or time.monotonic() >= deadline:
                break
            if self.scope is not None:
                others = await self._others_open()
                if others and set(range(self.reader.contiguous + 1, end_seq + 1)) <= (
                    others | await self._written(self.reader.contiguous + 1, end_seq)
                ):
                    break
            await asyncio.sleep(0.1)
        if self.scope is not None and self.reader.contiguous < end_seq:
            # Read before the run is: an entry of another scope's that is
            # written between the two is in this set or in the run, never in
            # neither (read after, it was in neither and counted as missing).
            others = await self._others_open()
        run = await loop.run_in_executor(None, self.reader.read_run, self.start_seq, end_seq)
        parsed: list[tuple[bytes, LogLine]] = []
        marked: list[tuple[bytes, bool]] = []  # the run, and whether the slice keeps each
        have: set[int] = set()
        for raw, ours in run:
            line = parse_line(raw) if ours else None
            if line is not None:
                have.add(line["seq"])
            # another scope's entries are not this recording's
            keep = line is not None and (
                self.scope is None or scope_of(line) == self.scope or "break" in line
            )
            marked.append((raw, keep))
            if keep and line is not None:
                parsed.append((raw, line))
        parsed.sort(key=lambda x: x[1]["seq"])
        missing = [
            n for n in range(self.start_seq, end_seq + 1) if n not in have and n not in others
        ]
        return parsed, missing, chain_run(marked)

    async def _others_open(self) -> set[int]:
        """Entries open now that act in another scope than this recording's."""
        try:
            answer = await self.link.control(OpenEntries(), Open, deadline_s=2.0)
        except Exception as exc:  # the relay is away: every unwritten entry counts
            log.warning("%s: could not read the open entries: %s", self.recording_id, exc)
            return set()
        return {int(seq) for seq, scope in answer.entries.items() if scope != self.scope}

    async def _written(self, first: int, last: int) -> set[int]:
        """The numbers from ``first`` to ``last`` that have their line."""
        loop = asyncio.get_running_loop()
        lines = await loop.run_in_executor(None, self.reader.read_range, first, last)
        return {parse_line(raw)["seq"] for raw in lines}


def _times(video: VideoEntry, items: Iterable[tuple[str, str | None]]) -> dict[str, float]:
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


def _safe_url(url: str) -> str:
    """A frame's URL as the log writes it: credentials out, cut when long."""
    redacted = redact_cut(url)
    return redacted if isinstance(redacted, str) else str(redacted["cut"])
