"""The harness's exceptions.

::

    HarnessError
    ├── TaskError       the task file is wrong (preflight; nothing deployed): exit 2
    ├── ComputerError   a computer refused, failed or could not be reached: exit 3
    └── StepFailed      a step failed (the agent's task, or infrastructure): exit 1 or 3

Each is defined beside the code that raises it (steps, computer, runner).
"""

from __future__ import annotations

from agentenv.errors import AgentEnvError

__all__ = ["HarnessError"]


class HarnessError(AgentEnvError):
    """Root of the harness's errors."""
