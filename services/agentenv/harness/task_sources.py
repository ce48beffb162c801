"""What a batch runs (``agentenv run`` with several sources): task files, a
folder of them, Online-Mind2Web's JSON lines made into tasks (open the
site, record the agent, export for WebJudge), and BrowserGym's envs made
into tasks (record an episode, scored by BrowserGym), each with a name
unique in the batch. No I/O but reading the sources.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv.harness.steps import Task, TaskError, load_task

__all__ = [
    "TASK_SUFFIXES",
    "BrowserGymPlan",
    "Planned",
    "browsergym_task",
    "mind2web_task",
    "pick_envs",
    "plan",
]

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


@dataclass(frozen=True)
class BrowserGymPlan:
    """``--browsergym SUITE``: its envs (as the driver listed them) and how
    each episode runs."""

    envs: tuple[str, ...]
    seed: int = 0
    max_steps: int = 10
    python: str | None = None
    #: A recording of each episode (the default; off only to measure its cost).
    record: bool = True


def pick_envs(suite: str, listed: list[str], names: list[str] | None) -> tuple[str, ...]:
    """The envs of ``suite`` to run: every one listed, or those ``names``
    picks (``click-button``, or the whole id); :class:`TaskError` for a name
    the suite does not have."""
    prefix = f"browsergym/{suite}."
    known = [n for n in listed if n.startswith(prefix)]
    if not known:
        raise TaskError(
            f"--browsergym {suite}: the suite has no envs (is browsergym-{suite} installed "
            "beside agentenv[browsergym]?)"
        )
    if not names:
        return tuple(known)
    picked: list[str] = []
    for name in names:
        full = name if name.startswith(prefix) else prefix + name
        if full not in known:
            raise TaskError(f"--browsergym-tasks: {suite} has no {name!r}; it has e.g. {known[0]}")
        picked.append(full)
    return tuple(dict.fromkeys(picked))


def browsergym_task(env: str, agent: str, image: str | None, how: BrowserGymPlan) -> Task:
    """A task for one BrowserGym env: a computer (or a scope), the agent's
    episode recorded, its reward BrowserGym's."""
    episode: dict[str, Any] = {
        "id": "episode",
        "type": "run_browsergym",
        "env_id": "gym",
        "gym_env": env,
        "command": agent,
        "seed": how.seed,
        "max_steps": how.max_steps,
        **({"python": how.python} if how.python else {}),
    }
    start = {"type": "start_browser_recording", "env_id": "gym", "name": "episode"}
    end = {"type": "end_browser_recording", "env_id": "gym", "name": "episode"}
    steps: list[dict[str, Any]] = [
        {"type": "deploy_env", "env_id": "gym", **({"image": image} if image else {})},
        {"type": "browser_connect_cdp", "env_id": "gym", "agent": "agent"},
        *([start] if how.record else []),
        episode,
        *([end] if how.record else []),
    ]
    raw = {"envs": {"gym": {"versions": {1: {"browsers": ["main"]}}}}, "steps": steps}
    return Task.model_validate(raw)


def plan(
    sources: list[Path],
    agent: str | None = None,
    image: str | None = None,
    browsergym: BrowserGymPlan | None = None,
) -> list[Planned]:
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
    if browsergym is not None:
        if agent is None:
            raise TaskError("--browsergym needs --agent COMMAND (it reads each turn on its stdin)")
        for env in browsergym.envs:
            task = browsergym_task(env, agent, image, browsergym)
            found.append(Planned(_name(env.removeprefix("browsergym/"), taken), task, env))
    return found
