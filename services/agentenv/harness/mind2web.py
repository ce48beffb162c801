"""Online-Mind2Web's v2 layout, from a recording (no I/O but the writes).

``<out>/<task_id>/result.json``::

    {"schema_version": "online-mind2web-v2", "task", "task_id",
     "reference_length"?, "agent_final_answer",
     "action_history": [{"step", "screenshot", "url", "action", "action_status",
                         "thought": null}]}

and ``<out>/<task_id>/trajectory/NNNN.jpg``: one step per action frame, its
``action`` what the agent did in words (:mod:`.words`); the last step is
``TASK_COMPLETE -> ANSWER: …``. A step's ``screenshot`` is the image's name
relative to ``<task_id>/trajectory/``, as Online-Mind2Web's ``src/run.py``
joins it (``os.path.join(trajectories_dir, task_id, "trajectory",
step["screenshot"])``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from agentenv.harness.store import safe_name
from agentenv.harness.words import describe
from agentenv.protocol.log import agent_act, read_lines
from agentenv.protocol.recording import BrowserRecordingManifest

__all__ = ["SCHEMA_VERSION", "export"]

SCHEMA_VERSION = "online-mind2web-v2"


def export(
    manifest: BrowserRecordingManifest,
    recording_folder: Path,
    out: Path,
    task: str,
    task_id: str,
    answer: str | None,
    reference_length: int | None = None,
    video: bool = False,
) -> Path:
    """Write the v2 layout; returns ``<out>/<task_id>``. With ``video``, the
    recording's video chunks go beside it (``video/NNNN.mp4``) and
    ``result.json``'s ``video`` names them, each history step with its time in
    the video (``video_time``, seconds), so a reviewer can watch what a step's
    screenshot froze."""
    log_file = recording_folder / "log.jsonl"
    found = read_lines(log_file.read_bytes()) if log_file.exists() else []
    lines = {x["seq"]: x for x in found}
    target = out / task_id
    trajectory = target / "trajectory"
    trajectory.mkdir(parents=True, exist_ok=True)
    history: list[dict[str, Any]] = []
    for frame in manifest.frames:
        if frame.kind != "action" or frame.error:
            continue
        step = len(history)
        name = f"{step:04d}.jpg"
        source = recording_folder / frame.file
        if source.exists():
            shutil.copyfile(source, trajectory / name)
        entries = [lines[s] for s in frame.after if s in lines]
        acts = [a for e in entries if (a := agent_act(e)) is not None]
        history.append(
            {
                "step": step,
                "screenshot": name,
                "url": frame.url,
                "action": describe(entries),
                "action_status": "success" if all(a.get("ok") for a in acts) else "failed",
                "thought": None,
            }
        )
    last = manifest.frames[-1] if manifest.frames else None
    final_step = len(history)
    final_name = f"{final_step:04d}.jpg"
    if last is not None and not last.error and (recording_folder / last.file).exists():
        shutil.copyfile(recording_folder / last.file, trajectory / final_name)
    history.append(
        {
            "step": final_step,
            "screenshot": final_name,
            "url": last.url if last else None,
            "action": f"TASK_COMPLETE -> ANSWER: {answer or ''}",
            "action_status": "success",
            "thought": None,
        }
    )
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "task": task,
        "task_id": task_id,
        "agent_final_answer": answer or "",
        "action_history": history,
    }
    if reference_length is not None:
        result["reference_length"] = reference_length
    if video and manifest.video is not None:
        result["video"] = _copy_video(manifest, recording_folder, target, history)
    (target / "result.json").write_text(json.dumps(result, indent=2))
    return target


def _copy_video(
    manifest: BrowserRecordingManifest,
    recording_folder: Path,
    target: Path,
    history: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The video's chunks copied beside the export; each step its time."""
    assert manifest.video is not None
    (target / "video").mkdir(exist_ok=True)
    copied = []
    for chunk in manifest.video.chunks:
        name = safe_name(chunk.file)
        source = recording_folder / name if name is not None else None
        if name is None or source is None or not source.is_file():
            continue
        shutil.copyfile(source, target / name)
        copied.append({"file": name, "offset_s": chunk.offset_s})
    steps = [f for f in manifest.frames if f.kind == "action" and not f.error]
    for step, frame in zip(history, steps, strict=False):
        at = manifest.video.frames_at.get(str(frame.index))
        if at is not None:
            step["video_time"] = at
    return copied
