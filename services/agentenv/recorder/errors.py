"""The recorder's exceptions.

::

    RecorderError
    ├── GrantError     a grant that cannot be used (malformed, expired, not allowed): 400
    ├── UploadError    an upload failed; names the destination, never a credential: 502
    └── Refused        an op refused with its own HTTP status (an unknown recording)
"""

from __future__ import annotations

__all__ = ["GrantError", "RecorderError", "Refused", "UploadError"]


class RecorderError(Exception):
    """Root of the recorder's errors."""


class GrantError(RecorderError, ValueError):
    """A grant that cannot be used (malformed, expired, or not allowed here)."""


class UploadError(RecorderError):
    """An upload failed; the message names the destination, never a credential."""


class Refused(RecorderError):
    """An op refused: an HTTP status and what to do next."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message
