"""The harness's exceptions.

::

    HarnessError
    ├── TaskError       the task file is wrong (preflight; nothing deployed): exit 2
    ├── ComputerError   a computer refused, failed or could not be reached: exit 3
    ├── StepFailed      a step failed (the agent's task, or infrastructure): exit 1 or 3
    └── ExportError     an export cannot be written from what the run made (a step fails)

Each is defined beside the code that raises it (steps, computer, store);
StepFailed, which the runner and the agent's process raise, is here.
"""

from __future__ import annotations

from agentenv.errors import AgentEnvError

__all__ = ["HarnessError", "StepFailed"]


class HarnessError(AgentEnvError):
    """Root of the harness's errors."""


class StepFailed(HarnessError):
    """A step failed: the agent's task (exit 1), or the infrastructure (exit 3)."""

    def __init__(self, message: str, infrastructure: bool = False) -> None:
        super().__init__(message)
        self.infrastructure = infrastructure
