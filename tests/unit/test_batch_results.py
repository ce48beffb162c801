"""What a batch writes and says of its tasks (agentenv.harness.batch_results)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.harness.batch_results import summary, table
from agentenv.harness.runner import EXIT_INFRA, EXIT_OK, EXIT_TASK_FAILED


def _done(name: str, seconds: float) -> dict[str, Any]:
    return {"task": name, "status": "done", "seconds": seconds}


@pytest.mark.parametrize(
    ("last", "expected"),
    [
        (_done("c", 3.0), EXIT_OK),
        (
            {"task": "c", "status": "failed", "seconds": 3.0, "failures": ["agent: exit 1"]},
            EXIT_TASK_FAILED,
        ),
        ({"task": "c", "status": "not run"}, EXIT_INFRA),
        ({"task": "c", "status": "infrastructure", "failures": ["deploy: no engine"]}, EXIT_INFRA),
    ],
)
def test_the_summary_writes_every_line_and_gives_the_worst_status(
    tmp_path: Path, last: dict[str, Any], expected: int
) -> None:
    results = [_done("a", 1.0), _done("b", 2.0), last]
    path = tmp_path / "results.jsonl"
    lines, status = summary(results, 12.34, path, "fleet: 1 computer")
    assert status == expected
    assert [json.loads(x) for x in path.read_text().splitlines()] == results
    assert lines[0].startswith("summary: ")
    assert "3 tasks in 12.3s" in lines[0] and "median 2.0s" in lines[0], lines[0]
    assert lines[1] == "fleet: 1 computer"
    assert lines[2:] == [f"  c: {f}" for f in last.get("failures", [])]


def test_the_table_names_each_running_task_and_its_step() -> None:
    shown = table([("task-01", "3/7 run_agent")], 4, 9, "fleet: 2 computers")
    assert shown.splitlines() == [
        "running 1, finished 4 of 9:",
        f"  {'task-01':<32} 3/7 run_agent",
        "fleet: 2 computers",
    ]
