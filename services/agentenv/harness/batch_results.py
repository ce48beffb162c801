"""What a batch writes and says of its tasks: the table while they run,
each task's line of ``results.jsonl``, the summary, and the batch's exit status (0 every task
done, 1 one failed, 3 an infrastructure failure or a task not run). No
engine, no threads: the batch hands over what it holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentenv.harness.attest import results_fields
from agentenv.harness.runner import EXIT_INFRA, EXIT_OK, EXIT_TASK_FAILED, Run
from agentenv.harness.task_sources import Planned

__all__ = ["STATUS", "broke_result", "summary", "table", "task_result"]

#: A run's exit status as results.jsonl says it.
STATUS = {EXIT_OK: "done", EXIT_TASK_FAILED: "failed", EXIT_INFRA: "infrastructure"}


def task_result(
    planned: Planned, run: Run, status: int, took: float, folder: Path
) -> dict[str, Any]:
    """A task's line of results.jsonl, from its run."""
    return {
        "task": planned.name,
        "source": planned.source,
        "status": STATUS.get(status, "infrastructure"),
        "exit_status": status,
        "seconds": round(took, 2),
        "out": str(folder),
        "answer": run.answer,
        # A BrowserGym episode's, as BrowserGym scored it (run_browsergym).
        **({"reward": run.reward} if run.reward is not None else {}),
        "failures": [
            f"{k}: {v.get('error')}"
            for k, v in run.metadata.get("steps", {}).items()
            if not v.get("ok", True)
        ],
        # The evidence of its recording (harness/attest.py).
        **results_fields(run.metadata),
    }


def broke_result(planned: Planned, why: str) -> dict[str, Any]:
    """The line of a task whose worker raised: it ran, as infrastructure, with the cause."""
    return {
        "task": planned.name,
        "source": planned.source,
        "status": "infrastructure",
        "failures": [why],
    }


def table(running: list[tuple[str, str]], done: int, total: int, fleet: str) -> str:
    """The table printed while tasks run: each running task and its step,
    the tasks finished, and the fleet's line."""
    rows = [f"  {name:<32} {now}" for name, now in running]
    return "\n".join([f"running {len(running)}, finished {done} of {total}:", *rows, fleet])


def summary(
    results: list[dict[str, Any]], took: float, path: Path, fleet: str
) -> tuple[list[str], int]:
    """Write ``results`` to ``path`` (results.jsonl); the summary's lines and
    the batch's exit status."""
    with open(path, "w") as out:
        for result in results:
            out.write(json.dumps(result) + "\n")
    counts: dict[str, int] = {}
    for result in results:
        counts[result["status"]] = counts.get(result["status"], 0) + 1
    seconds = sorted(r["seconds"] for r in results if "seconds" in r)
    middle = seconds[len(seconds) // 2] if seconds else 0.0
    longest = seconds[-1] if seconds else 0.0
    parts = ", ".join(
        f"{counts.get(k, 0)} {k}" for k in ("done", "failed", "infrastructure", "not run")
    )
    lines = [
        f"summary: {parts}; {len(results)} tasks in {took:.1f}s; per task median "
        f"{middle:.1f}s, longest {longest:.1f}s; results in {path}",
        fleet,
    ]
    lines += [f"  {r['task']}: {failure}" for r in results for failure in r.get("failures", [])]
    if counts.get("infrastructure") or counts.get("not run"):
        return lines, EXIT_INFRA
    return lines, EXIT_TASK_FAILED if counts.get("failed") else EXIT_OK
