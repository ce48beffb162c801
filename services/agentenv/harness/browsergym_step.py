"""The ``run_browsergym`` step's two ends, apart from running it: the
environment the episode's driver (:mod:`agentenv.browsergym_episode`) is
given, and what of its result file the step keeps.

The driver runs in a Python with ``agentenv[browsergym]``, the agent its
child; the reward is BrowserGym's, read from the result file the agent is
never given. An env that failed is an infrastructure failure (the driver's
:data:`~agentenv.browsergym_episode.EXIT_ENV`); an agent that failed or
went silent fails the task.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentenv.browsergym_episode import EXIT_ENV
from agentenv.harness import steps as s
from agentenv.harness.harness_errors import StepFailed
from agentenv.log.redact import redact_text

__all__ = ["EPISODE_FIELDS", "episode_env", "episode_result", "episode_status"]

#: What of a BrowserGym episode's result the step keeps (never its actions).
EPISODE_FIELDS = (
    "env",
    "seed",
    "reward",
    "steps",
    "terminated",
    "truncated",
    "stopped",
    "error",
    "action_errors",
)


def episode_env(step: s.RunBrowsergym, result_file: Path) -> dict[str, str]:
    """The driver's environment: the caller's, the step's, and the episode's settings."""
    env = dict(
        os.environ,
        **step.env,
        AGENTENV_BROWSERGYM_ENV=step.gym_env,
        AGENTENV_BROWSERGYM_MAX_STEPS=str(step.max_steps),
        AGENTENV_BROWSERGYM_TURN_S=str(step.turn_s),
        AGENTENV_BROWSERGYM_TASK_KWARGS=json.dumps(step.task_kwargs),
        AGENTENV_BROWSERGYM_RESULT=str(result_file),
    )
    if step.seed is not None:
        env["AGENTENV_BROWSERGYM_SEED"] = str(step.seed)
    return env


def episode_result(result_file: Path, python: str, log: Path, status: int) -> dict[str, Any]:
    """What the step keeps of the driver's result (:data:`EPISODE_FIELDS`),
    an error's words redacted; none at all is an infrastructure failure."""
    try:
        played = json.loads(result_file.read_text())
    except (OSError, ValueError):
        raise StepFailed(
            f"the BrowserGym driver ({python}) left no result, status {status}: is "
            f"agentenv[browsergym] installed there? (its output: {log})",
            infrastructure=True,
        ) from None
    found = {k: played.get(k) for k in EPISODE_FIELDS}
    if isinstance(found["error"], str):  # an exception's words: no credential in them
        found["error"] = redact_text(found["error"])
    return found


def episode_status(found: dict[str, Any], status: int, log: Path) -> None:
    """Raise when the episode failed: the env's failure is infrastructure."""
    if status != 0:
        why = found["error"] or found["stopped"]
        raise StepFailed(
            f"the episode failed: {why} (its output: {log})", infrastructure=status == EXIT_ENV
        )
