"""The recorder's exceptions.

::

    RecorderError
    ├── GrantError     a grant that cannot be used (malformed, expired, not allowed): 400
    ├── UploadError    an upload failed; names the destination, never a credential: 502
    └── Refused        an op refused with its own HTTP status (an unknown recording)
"""

from __future__ import annotations

from agentenv.errors import AgentEnvError, Refusal

__all__ = ["GrantError", "RecorderError", "Refused", "UploadError"]


class RecorderError(AgentEnvError):
    """Root of the recorder's errors."""


class GrantError(RecorderError, Refusal, ValueError):
    """A grant that cannot be used (malformed, expired, or not allowed here)."""

    status = 400


class UploadError(RecorderError, Refusal):
    """An upload failed; the message names the destination, never a credential."""

    status = 502


class Refused(RecorderError, Refusal):
    """An op refused: an HTTP status and what to do next."""

    def __init__(self, status: int, message: str) -> None:
        Refusal.__init__(self, message, status)
