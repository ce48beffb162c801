"""Online-Mind2Web's v2 layout, from a recording (no I/O but the writes).

``<out>/<task_id>/result.json``::

    {"schema_version": "online-mind2web-v2", "task", "task_id",
     "reference_length"?, "agent_final_answer",
     "action_history": [{"step", "screenshot", "url", "action", "action_status",
                         "thought": null}]}

and ``<out>/<task_id>/trajectory/NNNN.jpg``: one step per action frame, its
``action`` what the agent did in words (:mod:`.words`); the last step is
``TASK_COMPLETE -> ANSWER: …``. An action frame whose capture failed is a
step all the same (what the agent did is in the log), pictured by the next
frame that has a picture, its ``frame_error`` saying why. A person's span (a handoff,
:mod:`agentenv.protocol.handoffs`) is a step of its own where it happened,
marked: its ``action`` begins ``A PERSON STEPPED IN`` (who asked and why,
what the person did in words, the word they handed back with), its ``by``
is ``human``; its picture is the last frame of the person's own bursts
(``kind: person``), else the first frame after the span. WebJudge
reads the words, so a person's work is never taken for the agent's; a
grader that excludes it drops the steps whose ``by`` is ``human``.
A step's ``screenshot`` is the image's name relative to
``<task_id>/trajectory/``, as Online-Mind2Web's ``src/run.py`` joins it
(``os.path.join(trajectories_dir, task_id, "trajectory", step["screenshot"])``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from agentenv.harness.store import safe_name
from agentenv.harness.words import describe, person_words
from agentenv.protocol.handoffs import Handoff, handoffs_in
from agentenv.protocol.log import LogLine, agent_act, read_lines
from agentenv.protocol.recording import BrowserRecordingManifest, FrameEntry

__all__ = ["PERSON_STEP", "SCHEMA_VERSION", "export"]

SCHEMA_VERSION = "online-mind2web-v2"
#: How a person's step begins, in words a judge reads (its ``by`` is ``human``).
PERSON_STEP = "A PERSON STEPPED IN"
#: How much of an agent's reason for asking a person's step shows.
REASON_SHOWN = 200


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
    shown: list[FrameEntry] = []  # each step's picture
    for frame, step in _steps(manifest, lines, handoffs_in(found)):
        name = f"{len(history):04d}.jpg"
        source = recording_folder / frame.file
        if source.exists():
            shutil.copyfile(source, trajectory / name)
        history.append({"step": len(history), "screenshot": name, "url": frame.url, **step})
        shown.append(frame)
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
        result["video"] = _copy_video(manifest, recording_folder, target, history, shown)
    (target / "result.json").write_text(json.dumps(result, indent=2))
    return target


def _steps(
    manifest: BrowserRecordingManifest, lines: dict[int, LogLine], handoffs: list[Handoff]
) -> list[tuple[FrameEntry, dict[str, Any]]]:
    """The history's steps before the answer, in the log's order: one an
    action frame (the agent's burst it follows), and one a handoff (a
    person's span, pictured by the last frame of the person's own bursts,
    else the first frame after the span, else the recording's last), each
    with its picture and fields."""
    pictures = [f for f in manifest.frames if not f.error]
    steps: list[tuple[tuple[int, int], FrameEntry, dict[str, Any]]] = []
    for frame in (f for f in manifest.frames if f.kind == "action"):
        entries = [lines[s] for s in frame.after if s in lines]
        acts = [a for e in entries if (a := agent_act(e)) is not None]
        fields: dict[str, Any] = {
            "action": describe(entries),
            "action_status": "success" if all(a.get("ok") for a in acts) else "failed",
            "thought": None,
        }
        picture: FrameEntry | None = frame
        if frame.error:
            # Its capture failed: the step stays (what the agent did is in
            # the log), pictured by the next frame that has one, said so.
            later = [f for f in pictures if f.index > frame.index]
            picture = later[0] if later else (pictures[-1] if pictures else None)
            fields["frame_error"] = frame.error
        if picture is not None:
            steps.append(((max(frame.after, default=0), 0), picture, fields))
    for handoff in handoffs:
        seqs = [s for s in (handoff.request, *handoff.entries, handoff.answer) if s is not None]
        own = set(handoff.entries)
        person = [f for f in pictures if f.kind == "person" and own.intersection(f.after)]
        after = next((f for f in pictures if min(f.after, default=0) > max(seqs)), None)
        picture = (person[-1] if person else after) or (pictures[-1] if pictures else None)
        if picture is None:
            continue
        steps.append(((min(seqs), 1), picture, _person_step(handoff, lines)))
    steps.sort(key=lambda x: x[0])
    return [(frame, fields) for _, frame, fields in steps]


def _person_step(handoff: Handoff, lines: dict[int, LogLine]) -> dict[str, Any]:
    """A handoff as a history step, marked as a person's (docs/harness.md)."""
    said = person_words(lines[s] for s in handoff.entries if s in lines)
    asked = ""
    if handoff.request is not None:
        reason = (handoff.reason or "")[:REASON_SHOWN]
        asked = f" (asked by {handoff.agent}: {reason!r})"
    back = f"; handed back: {handoff.word}" if handoff.word else "; not handed back"
    return {
        "action": f"{PERSON_STEP}{asked}: {'; '.join(said) or '(no action)'}{back}",
        "action_status": "failed" if handoff.word == "cannot" else "success",
        "thought": None,
        "by": "human",
        "people": handoff.people,
    }


def _copy_video(
    manifest: BrowserRecordingManifest,
    recording_folder: Path,
    target: Path,
    history: list[dict[str, Any]],
    shown: list[FrameEntry],
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
    for step, frame in zip(history, shown, strict=False):
        at = manifest.video.frames_at.get(str(frame.index))
        if at is not None:
            step["video_time"] = at
    return copied
