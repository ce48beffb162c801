"""What a batch runs (``agentenv run`` with several sources): task files, a
folder of them, and Online-Mind2Web's JSON lines made into tasks (open the
site, record the agent, export for WebJudge), each with a name unique in
the batch. No I/O but reading the sources.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv.harness.steps import Task, TaskError, load_task

__all__ = ["TASK_SUFFIXES", "Planned", "mind2web_task", "plan"]

TASK_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Planned:
    name: str
    task: Task
    source: str


def _name(raw: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-.") or "task"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def mind2web_task(
    line: dict[str, Any], agent: str, image: str | None, where: str
) -> tuple[str, Task]:
    """A task from one Online-Mind2Web line: open the site, record the agent, export."""
    task_id = line.get("task_id")
    text = line.get("confirmed_task") or line.get("task")
    site = line.get("website")
    if not isinstance(task_id, str) or not isinstance(text, str) or not isinstance(site, str):
        raise TaskError(f"{where}: a Mind2Web task needs task_id, confirmed_task and website")
    reference = line.get("reference_length")
    steps: list[dict[str, Any]] = [
        {"type": "deploy_env", "env_id": "web", **({"image": image} if image else {})},
        {"type": "browser_open_tab", "env_id": "web", "url": site},
        {"type": "browser_connect_cdp", "env_id": "web", "agent": "agent"},
        {"type": "start_browser_recording", "env_id": "web", "name": "trajectory"},
        {
            "id": "agent",
            "type": "run_agent",
            "command": agent,
            "env": {"AGENTENV_TASK": text, "AGENTENV_TASK_ID": task_id},
        },
        {"type": "end_browser_recording", "env_id": "web", "name": "trajectory"},
        {
            "type": "export_mind2web",
            "recording": "trajectory",
            "task": text,
            "task_id": task_id,
            **({"reference_length": reference} if isinstance(reference, int) else {}),
        },
    ]
    raw = {"envs": {"web": {"versions": {1: {"browsers": ["main"]}}}}, "steps": steps}
    try:
        return task_id, Task.model_validate(raw)
    except ValueError as exc:
        raise TaskError(f"{where}: {exc}") from None


def plan(sources: list[Path], agent: str | None = None, image: str | None = None) -> list[Planned]:
    """The tasks named by ``sources``; :class:`TaskError` for the first bad one."""
    found: list[Planned] = []
    taken: set[str] = set()
    for source in sources:
        if source.is_dir():
            files = sorted(p for p in source.rglob("*") if p.suffix in TASK_SUFFIXES)
            if not files:
                raise TaskError(f"{source}: no task files (.yaml, .yml, .json) in it")
            for file in files:
                found.append(Planned(_name(file.stem, taken), load_task(file), str(file)))
        elif source.suffix == ".jsonl":
            if agent is None:
                raise TaskError(
                    f"{source}: Online-Mind2Web tasks need --agent COMMAND (it gets the "
                    "task in AGENTENV_TASK and the browser in AGENTENV_CDP_URL)"
                )
            try:
                text = source.read_text()
            except OSError as exc:
                raise TaskError(f"{source}: cannot read it: {exc.strerror}") from None
            for number, raw in enumerate(text.splitlines(), start=1):
                if not raw.strip():
                    continue
                where = f"{source}:{number}"
                try:
                    line = json.loads(raw)
                except ValueError:
                    raise TaskError(f"{where}: not a JSON line") from None
                if not isinstance(line, dict):
                    raise TaskError(f"{where}: a task is a JSON object")
                task_id, task = mind2web_task(line, agent, image, where)
                found.append(Planned(_name(task_id, taken), task, where))
        else:
            found.append(Planned(_name(source.stem, taken), load_task(source), str(source)))
    return found
