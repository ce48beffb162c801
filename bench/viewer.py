"""``agentenv view`` on a 500-frame recording, beside reading and encoding its
frames alone (the anchor: the least any self-contained page must do).

The recording is made up here: 500 action frames of a real 1280x800 JPEG
(about 30 KB, a busy page), each after five log entries (a click, typing, a
key), and a tab event every tenth frame.
"""

from __future__ import annotations

import base64
import json
import tempfile
import time
from pathlib import Path

from agentenv.harness.viewer import view
from agentenv.protocol.chain import CHAIN_FILE, GENESIS, chain_run, line_hash
from agentenv.protocol.recording import BrowserRecordingManifest, FrameEntry, LogEntry
from bench.stats import table

FRAMES = 500


def _jpeg() -> bytes:
    """A real capture of a busy page, from headless Chromium."""
    import shutil

    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_content(
            "<body style='margin:0'>"
            + "".join(
                f"<p style='color:hsl({i * 37 % 360},70%,40%)'>line {i} " * 3 for i in range(60)
            )
        )
        data = page.screenshot(type="jpeg", quality=80)
        browser.close()
    return data


def _recording(folder: Path, jpeg: bytes) -> None:
    (folder / "frames").mkdir(parents=True)
    lines, frames, seq = [], [], 1
    for index in range(FRAMES):
        after = []
        for method, params in (
            ("Input.dispatchMouseEvent", {"type": "mousePressed", "x": 10, "y": 20}),
            ("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": 10, "y": 20}),
            ("Input.insertText", {"text": f"query {index}"}),
            ("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter", "text": "\r"}),
            ("Runtime.evaluate", {"expression": "1"}),
        ):
            action = {"via": "cdp", "who": "bench", "method": method, "acts": "acting"}
            lines.append(
                {
                    "seq": seq,
                    "at": f"2026-11-30T00:{index // 60:02d}:{index % 60:02d}.000Z",
                    "action": {**action, "params": params, "ok": True},
                }
            )
            after.append(seq)
            seq += 1
        if index % 10 == 0:
            lines.append(
                {
                    "seq": seq,
                    "at": f"2026-11-30T00:{index // 60:02d}:{index % 60:02d}.000Z",
                    "tab": {
                        "event": "navigated",
                        "id": "T",
                        "url": f"https://x.test/{index}",
                        "by": {"kind": "page", "after": seq - 1},
                    },
                }
            )
            seq += 1
        name = f"frames/{index:04d}-action.jpg"
        (folder / name).write_bytes(jpeg)
        frames.append(
            FrameEntry(
                index=index,
                kind="action",
                after=after,
                tab="T",
                url=f"https://x.test/{index}",
                at=f"2026-11-30T00:{index // 60:02d}:{index % 60:02d}.500Z",
                file=name,
                type="jpeg",
            )
        )
    # Chained as the log's writer chains them (prev third), with their run.
    written, prev = [], GENESIS
    for line in lines:
        raw = json.dumps({"seq": line.pop("seq"), "at": line.pop("at"), "prev": prev, **line})
        written.append(raw.encode())
        prev = line_hash(written[-1])
    (folder / "log.jsonl").write_bytes(b"".join(raw + b"\n" for raw in written))
    run = chain_run((raw, True) for raw in written)
    (folder / CHAIN_FILE).write_bytes(run.chain)
    manifest = BrowserRecordingManifest(
        recording_id="rec-bench",
        request_id="r",
        name="bench",
        started_at=None,
        ended_at=None,
        reason="completed",
        start_seq=1,
        end_seq=seq,
        frames=frames,
        log=LogEntry(file="log.jsonl", lines=len(lines), chain=CHAIN_FILE),
        chain_first=run.first,
        chain_last=run.last,
        missing_frames=0,
        log_missing=[],
        limits_hit=[],
    )
    (folder / "manifest.json").write_text(manifest.model_dump_json())


def run() -> str:
    jpeg = _jpeg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rec"
        _recording(folder, jpeg)
        began = time.perf_counter()
        encoded = [base64.b64encode(p.read_bytes()) for p in sorted((folder / "frames").iterdir())]
        anchor = time.perf_counter() - began
        runs = []
        for _ in range(3):
            began = time.perf_counter()
            page = view(str(folder))
            runs.append(time.perf_counter() - began)
        size = page.stat().st_size
    rows = [
        [
            f"agentenv view, {FRAMES} frames ({len(jpeg):,} B each)",
            f"{min(runs):.2f} s",
            f"read + base64 alone {anchor:.2f} s",
            f"{size / 1e6:.1f} MB page",
        ],
    ]
    assert len(encoded) == FRAMES
    return table("viewer", ["case", "best of 3", "anchor", "output"], rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
