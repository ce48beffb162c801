"""The ``ffmpeg`` a ``/playwright`` server records videos with
(``agentenv-playwright-ffmpeg``), made of PyAV, which the image has.

Playwright's server records ``record_video_dir`` by piping the page's frames
(JPEG, in a Matroska stream on standard input) to its own build of ffmpeg,
which it downloads with ``playwright install ffmpeg``. The computer has no
network for that, and Debian's ffmpeg would add about 100 MB to the image.
This program takes the arguments Playwright gives (its ``FfmpegVideoRecorder``
in playwright-core 1.65) and does what they ask with the libraries PyAV
bundles: decode the frames, pad with gray or crop to the video's size from
the top left corner, and write VP9 in WebM at a constant frame rate (a frame
shown until the next one comes), to the file named last. Arguments it does
not read are taken as Playwright's defaults.
"""

from __future__ import annotations

import re
import resource
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise

import av
from av.filter import Graph
from av.video.frame import VideoFrame
from av.video.stream import VideoStream

__all__ = ["Asked", "asked", "main"]

_PAD = re.compile(r"pad=(\d+):(\d+)")


@dataclass(frozen=True)
class Asked:
    """What Playwright's arguments ask for."""

    output: str
    width: int
    height: int
    fps: int = 25
    bitrate: int = 1_000_000


def asked(args: Sequence[str]) -> Asked:
    """Read Playwright's ffmpeg arguments; raises ValueError when they name
    no output or no size."""
    if not args or args[-1].startswith("-"):
        raise ValueError("the last argument is the output file")
    found: dict[str, str] = {}
    for flag, value in pairwise(args):
        if flag in ("-r", "-b:v", "-vf"):
            found[flag] = value
    size = _PAD.search(found.get("-vf", ""))
    if size is None:
        raise ValueError("-vf pad=W:H:... names the video's size")
    rate = found.get("-b:v", "1000k")
    bitrate = int(rate[:-1]) * 1000 if rate.endswith("k") else int(rate)
    return Asked(
        output=args[-1],
        width=int(size.group(1)),
        height=int(size.group(2)),
        fps=int(found.get("-r", "25")),
        bitrate=bitrate,
    )


def record(want: Asked) -> int:
    """Frames from standard input to ``want.output``; how many were written."""
    source = av.open(sys.stdin.buffer, format="matroska", mode="r")
    sink = av.open(want.output, mode="w", format="webm")
    stream = sink.add_stream("libvpx-vp9", rate=want.fps)
    assert isinstance(stream, VideoStream)
    stream.width, stream.height, stream.pix_fmt = want.width, want.height, "yuv420p"
    stream.bit_rate = want.bitrate
    stream.options = {"deadline": "realtime", "cpu-used": "8", "crf": "8", "lag-in-frames": "0"}
    graph: Graph | None = None
    written = 0
    shown: VideoFrame | None = None

    def put(frame: VideoFrame, pts: int) -> None:
        nonlocal written
        frame.pts, frame.time_base = pts, Fraction(1, want.fps)
        for packet in stream.encode(frame):
            sink.mux(packet)
        written += 1

    try:
        for frame in source.decode(video=0):
            at = frame.time or 0.0
            if graph is None:
                graph = Graph()
                graph.link_nodes(
                    graph.add_buffer(template=source.streams.video[0]),
                    graph.add("pad", f"{want.width}:{want.height}:0:0:gray"),
                    graph.add("crop", f"{want.width}:{want.height}:0:0"),
                    graph.add("format", "yuv420p"),
                    graph.add("buffersink"),
                ).configure()
            if shown is not None:
                # The frame before shows until this one comes.
                while written < round(at * want.fps):
                    put(shown, written)
            graph.push(frame)
            out = graph.pull()
            assert isinstance(out, VideoFrame)
            shown = out
        if shown is not None:
            put(shown, written)
        for packet in stream.encode(None):
            sink.mux(packet)
    finally:
        sink.close()
        source.close()
    return written


#: The memory it may take (RLIMIT_DATA): a 1920x1080 video's frames and
#: encoder need a fraction of it (app/playwright_rules.py bounds the size).
MEMORY_BYTES = 1 << 30


def main() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_BYTES, MEMORY_BYTES))
    try:
        want = asked(sys.argv[1:])
    except ValueError as exc:
        print(f"agentenv-playwright-ffmpeg: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        record(want)
    except (av.FFmpegError, OSError, MemoryError) as exc:
        print(f"agentenv-playwright-ffmpeg: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
