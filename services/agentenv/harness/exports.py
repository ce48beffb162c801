"""What graders read, exported from an ended recording: Online-Mind2Web's
task folder (:mod:`.mind2web`) and WebArena-Verified's run (:mod:`.webarena_verified`).

Each takes the recording's manifest and the folder it was downloaded into,
the step, and the agent's answer (the step's own words first), and returns
the folder written; the runner adds the attestation.
"""

from __future__ import annotations

from pathlib import Path

from agentenv.harness import mind2web, webarena_verified
from agentenv.harness import steps as s
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.store import safe_name
from agentenv.protocol.recording import BrowserRecordingManifest

__all__ = ["mind2web_task", "webarena_run"]


def mind2web_task(
    manifest: BrowserRecordingManifest,
    folder: Path,
    out: Path,
    step: s.ExportMind2web,
    answer: str | None,
) -> Path:
    """The task folder under ``out/mind2web`` WebJudge's loader reads."""
    return mind2web.export(
        manifest,
        folder,
        out / "mind2web",
        step.task,
        step.task_id,
        step.agent_final_answer or answer,
        step.reference_length,
        video=step.video,
    )


def webarena_run(
    manifest: BrowserRecordingManifest,
    folder: Path,
    out: Path,
    step: s.ExportWebarenaVerified,
    answer: str | None,
) -> Path:
    """The run under ``out/webarena-verified`` its evaluator scores: the
    recording's HAR and the agent's response."""
    har = manifest.har
    name = safe_name(har.file) if har is not None and har.file is not None else None
    if name is None or not (folder / name).is_file():
        raise StepFailed(
            f"recording {step.recording!r} has no network.har: start it with har: {{}}"
        )
    try:
        response = (
            webarena_verified.parse_response(step.response)
            if step.response is not None
            else webarena_verified.response_from_answer(answer)
        )
        return webarena_verified.export(
            (folder / name).read_bytes(),
            out / "webarena-verified",
            step.task_id,
            response,
            step.sites,
        )
    except webarena_verified.ExportError as exc:
        raise StepFailed(str(exc)) from None
