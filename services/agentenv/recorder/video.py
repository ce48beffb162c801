"""A recording's video (docs/spec.md section 4, "More in a recording"): the tab
the recorded agent acts in, as H.264 MP4 chunks on the log's clock.

How: the recording's relay connection (the computer's own, not on the
record; its frames are captured on it too) captures the tab
(``Page.captureScreenshot``, JPEG, optimized for speed, the visual viewport
at half scale, :data:`SCALE`) every frame interval. A picture that is the
last one again is not encoded: the video holds it (variable frame rate, each
picture timed on the wall clock, the log's clock). Captures work on tabs in
the background too, and never bring a tab to the front. When the agent acts
in another tab (input, or a move between pages and tabs: :func:`moves_video`
and ``protocol.log.says_where``), the video moves there. Chromium's own
screencast (``Page.startScreencast``) was the first design: its capture
pipeline cost Chromium 30 to 40 % of a core while
a page repainted, even with its frames throttled, against nothing measurable
for five captures a second (bench/README.md); and a client's own screencast
(Playwright tracing, chrome-devtools-mcp) is left alone.

The encoder is PyAV's (its wheel bundles FFmpeg with libx264, the same on
amd64 and arm64; the decision and its cost are in docs/decisions.md). A
chunk is a whole MP4 file of :data:`CHUNK_S` seconds, uploaded as it closes
(``video/NNNN.mp4``), so a computer that dies loses at most the chunk being
made. Each chunk starts with the picture the last one ended on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import logging
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from agentenv.log.lines import iso
from agentenv.protocol.log import ActionBody, says_where
from agentenv.protocol.recording import VIDEO_CHUNK_S, VideoChunk, VideoEntry
from agentenv.recorder.grants import Uploader, UploadError
from agentenv.relay_link import BrowserError, BrowserLink

__all__ = ["CHUNK_S", "SCALE", "Video", "moves_video"]

log = logging.getLogger("agentenv.recorder")

#: Seconds of video in one uploaded chunk.
CHUNK_S = VIDEO_CHUNK_S
#: The video's pictures are the viewport at this scale: a quarter of the
#: pixels for Chromium to capture and for the recorder to decode and encode
#: (bench/README.md: the cost at full size was +17.7 % of a core at 5 fps).
SCALE = 0.5
#: The largest picture the video holds (a larger one is scaled down to fit).
MAX_WIDTH, MAX_HEIGHT = 1280, 800
_MS = Fraction(1, 1000)


def moves_video(action: ActionBody) -> bool:
    """Whether an agent's act says which tab the video should show: input or
    a move between pages and tabs, an MCP tool call or a pixel op."""
    method = action.get("method")
    if action.get("via") != "cdp":
        return True
    return isinstance(method, str) and says_where(method)


@dataclass
class _Chunk:
    """One MP4 being written: from ``start`` (wall seconds) on."""

    index: int
    start: float
    width: int
    height: int
    buffer: io.BytesIO = field(default_factory=io.BytesIO)
    frames: int = 0
    last_pts: int = -1
    container: Any = None
    stream: Any = None

    def open(self, fps: int) -> None:
        import av  # the video's only user: the recorder imports it when asked

        self.container = av.open(self.buffer, mode="w", format="mp4")
        stream = self.container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = self.width, self.height, "yuv420p"
        stream.time_base = _MS
        stream.codec_context.time_base = _MS
        stream.options = {"preset": "veryfast", "crf": "30"}
        self.stream = stream

    def add(self, picture: Any, at: float) -> None:
        pts = max(int((at - self.start) * 1000), self.last_pts + 1)
        frame = picture.reformat(width=self.width, height=self.height, format="yuv420p")
        frame.pts, frame.time_base = pts, _MS
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.last_pts = pts
        self.frames += 1

    def close(self) -> bytes:
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        self.container.close()
        return self.buffer.getvalue()


@dataclass
class Video:
    """One recording's video (see the module's docstring)."""

    link: BrowserLink
    upload: Uploader
    fps: int
    started: float  # the recording's start, wall seconds: the video's 0
    tab: str | None = None
    session: str | None = None
    chunks: list[VideoChunk] = field(default_factory=list)
    _chunk: _Chunk | None = None
    _last: Any = None  # the latest picture, decoded
    _last_scale: float = SCALE  # its scale: the viewport at SCALE, or a whole frame
    _last_kept: float = 0.0
    _queue: asyncio.Queue[tuple[bytes, float, float] | None] = field(default_factory=asyncio.Queue)
    _worker: asyncio.Task[None] | None = None
    _ticker: asyncio.Task[None] | None = None
    _decoder: Any = None
    _moving: asyncio.Lock = field(default_factory=asyncio.Lock)
    _made: int = 0  # chunks opened
    _last_data: bytes = b""
    #: Bytes a minute the video may take (the card's budget); past it, it stops.
    budget: int = 0
    over: bool = False

    async def start(self, tab: str | None) -> None:
        import av

        self._decoder = av.CodecContext.create("mjpeg", "r")
        self._worker = asyncio.create_task(self._encode())
        self._ticker = asyncio.create_task(self._tick())
        if tab is not None:
            await self.follow(tab)

    async def follow(self, tab: str) -> None:
        """Film ``tab`` from now on (the agent acts there)."""
        async with self._moving:
            if tab == self.tab:
                return
            self.tab, self.session = tab, None
            try:
                self.session = await self.link.session(tab)  # the recording's own session there
            except (BrowserError, KeyError) as exc:
                log.info("video: not following %s: %s", tab[:64], exc)
                return
        await self._shoot()  # its picture now, not a frame interval later

    async def stop(self, ended: float) -> VideoEntry:
        """End the video at ``ended`` (wall seconds): the last chunk closes
        there and uploads; what each chunk holds, in the manifest's words."""
        if self._ticker is not None:
            self._ticker.cancel()
        self._queue.put_nowait(None)
        if self._worker is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._worker, 60)
        await self._close_chunk(ended)
        return VideoEntry(
            fps=self.fps,
            format="mp4",
            codec="h264",
            start_at=iso(self.started),
            seconds=round(max(0.0, ended - self.started), 3),
            chunks=self.chunks,
        )

    # -- frames -----------------------------------------------------------------

    async def _shoot(self) -> None:
        """One picture of the tab, queued unless it is the last one again."""
        session = self.session
        if session is None or self.over:
            return
        began = time.time()
        try:
            metrics = await self.link.call(
                "Page.getLayoutMetrics", {}, session=session, deadline_s=2
            )
            view = metrics["cssVisualViewport"]
            clip = {
                "x": view["pageX"],
                "y": view["pageY"],
                "width": view["clientWidth"],
                "height": view["clientHeight"],
                "scale": SCALE,
            }
            shot = await self.link.call(
                "Page.captureScreenshot",
                {"format": "jpeg", "quality": 70, "optimizeForSpeed": True, "clip": clip},
                session=session,
                deadline_s=2,
            )
            data = base64.b64decode(shot["data"])
        except (BrowserError, KeyError, ValueError, TypeError):
            return  # a tab going away, or one in the background slow to answer
        if data == self._last_data or self._queue.qsize() > 2 * self.fps:
            return  # nothing changed (the video holds it), or the encoder is behind
        self._last_data = data
        self._queue.put_nowait((data, (began + time.time()) / 2, SCALE))

    def picture(self, data: bytes, at: float) -> None:
        """A picture of the tab taken elsewhere (a recording's frame): in the
        video at its time, so the video shows what the frame shows."""
        if not self.over and data != self._last_data:
            self._last_data = data
            self._queue.put_nowait((data, at, 1.0))

    async def _tick(self) -> None:
        """A picture every frame interval; a chunk closed when its time is up."""
        while True:
            began = time.monotonic()
            chunk = self._chunk
            if chunk is not None and time.time() >= chunk.start + CHUNK_S:
                self._queue.put_nowait((b"", chunk.start + CHUNK_S, SCALE))
            await self._shoot()
            await asyncio.sleep(max(0.0, 1.0 / self.fps - (time.monotonic() - began)))

    async def _encode(self) -> None:
        while (item := await self._queue.get()) is not None:
            data, at, scale = item
            try:
                await self._add(data, at, scale)
            except Exception:  # a frame that cannot be decoded is passed over
                log.exception("video: a frame could not be encoded")

    async def _add(self, data: bytes, at: float, scale: float) -> None:
        at = max(at, self.started)
        chunk = self._chunk
        while chunk is not None and at >= chunk.start + CHUNK_S:
            chunk = await self._roll(chunk.start + CHUNK_S)
        if not data or self.over:
            return  # a tick: the chunk's time was up, and nothing new to show
        self._last = await asyncio.to_thread(self._decode, data)
        if self._last is None:
            return
        self._last_scale = scale
        if chunk is None:
            first = not self._made
            chunk = await self._open(self.started if first else at)
            if first:  # the video starts with the recording, on the first picture
                await asyncio.to_thread(chunk.add, self._last, chunk.start)
        await asyncio.to_thread(chunk.add, self._last, at)

    def _decode(self, data: bytes) -> Any:
        import av

        frames = self._decoder.decode(av.Packet(data))
        return frames[-1] if frames else self._last

    async def _open(self, start: float) -> _Chunk:
        # the viewport at SCALE, whichever picture the chunk starts on
        shrink = SCALE / self._last_scale
        width = min(MAX_WIDTH, int(self._last.width * shrink)) // 2 * 2
        height = min(MAX_HEIGHT, int(self._last.height * shrink)) // 2 * 2
        chunk = _Chunk(self._made, start, width, height)
        self._made += 1
        await asyncio.to_thread(chunk.open, self.fps)
        self._chunk = chunk
        return chunk

    async def _roll(self, boundary: float) -> _Chunk | None:
        """Close the chunk at ``boundary``; the next starts there, on the same
        picture (none once the video is past its budget)."""
        await self._close_chunk(boundary)
        if self.over:
            return None
        chunk = await self._open(boundary)
        await asyncio.to_thread(chunk.add, self._last, boundary)
        return chunk

    async def _close_chunk(self, end: float) -> None:
        chunk, self._chunk = self._chunk, None
        if chunk is None:
            return
        if self._last is not None and end * 1000 > chunk.start * 1000 + chunk.last_pts + 1:
            # the picture holds to the end: its last frame there
            await asyncio.to_thread(chunk.add, self._last, end - 0.001)
        data = await asyncio.to_thread(chunk.close)
        name = f"video/{chunk.index:04d}.mp4"
        try:
            await self.upload.put(name, data, "video/mp4")
        except UploadError as exc:
            log.error("%s: %s", name, exc)
            return
        if self.budget and len(data) > self.budget * (end - chunk.start) / 60 + 65536:
            self.over = True  # past its bytes a minute: this chunk is its last
            log.warning("%s: the video is past its budget of %d bytes a minute", name, self.budget)
        self.chunks.append(
            VideoChunk(
                file=name,
                start_at=iso(chunk.start),
                end_at=iso(end),
                offset_s=round(chunk.start - self.started, 3),
                frames=chunk.frames,
                bytes=len(data),
            )
        )
