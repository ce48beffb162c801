"""The relay writes failed authentication to the action log: its own door's
(``cdp``) and the app server's (``AgentEnv.authFailed``), under one bound
(:class:`agentenv.log.auth.AuthRecord`). Only the log file here."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from agentenv.log.auth import AuthRecord, Failure
from agentenv.log.log_errors import LogError
from agentenv.log.writer import LogWriter

__all__ = ["AuthLog"]

log = logging.getLogger("agentenv.relay")


@dataclass
class AuthLog:
    writer: LogWriter
    record: AuthRecord = field(default_factory=AuthRecord)

    def refused(self, failure: Failure) -> None:
        """One request refused for its token: its line, or its count."""
        self._write(self.record.note(failure, self.writer.monotonic()))

    def tick(self) -> None:
        """A minute's count lines, once it is over (called every second)."""
        self._write(self.record.due(self.writer.monotonic()))

    def _write(self, bodies: list[dict[str, Any]]) -> None:
        for body in bodies:
            try:
                self.writer.record("auth", body)
            except LogError as exc:  # the disk: the relay's own log says so
                log.error("a failed authentication could not be written: %s", exc)
