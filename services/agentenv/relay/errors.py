"""The relay's exceptions.

::

    RelayError
    ├── UpstreamError     Chromium did not answer or refused (502/503/404)
    └── WatcherError      the relay's own connection to Chromium is down (watcher.py)

Refusals of the caller are :class:`agentenv.access.AccessDenied`.
"""

from __future__ import annotations

__all__ = ["RelayError", "UpstreamError"]


class RelayError(Exception):
    """Root of the relay's errors; ``status`` is the HTTP status to answer."""

    status = 500

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class UpstreamError(RelayError):
    """Chromium is not answering, or refused what was asked."""

    status = 503
