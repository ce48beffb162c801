"""The log's exceptions.

::

    LogError
    └── LogLocked     another writer holds the file's lock
"""

from __future__ import annotations

from agentenv.errors import AgentEnvError

__all__ = ["LogError", "LogLocked"]


class LogError(AgentEnvError):
    """Root of the log's errors."""


class LogLocked(LogError):
    """A second writer tried to open a log file that already has one."""
