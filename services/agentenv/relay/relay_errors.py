"""The relay's exceptions (the whole tree: :mod:`agentenv.errors`).

::

    RelayError            a refusal of the relay's (agentenv.errors.Refusal): 500 unless named
    ├── UpstreamError     Chromium did not answer or refused (502/503/404)
    ├── WatcherError      the relay's own connection to Chromium is down (watcher.py)
    └── ControlRefused    an ``AgentEnv.*`` command refused: a -32602 answer (control.py)

Refusals of the caller are :class:`agentenv.access.AccessDenied`.
"""

from __future__ import annotations

from agentenv.errors import Refusal

__all__ = ["ControlRefused", "RelayError", "UpstreamError", "WatcherError"]


class RelayError(Refusal):
    """Root of the relay's errors; ``status`` is the HTTP status to answer."""


class UpstreamError(RelayError):
    """Chromium is not answering, or refused what was asked."""

    status = 503


class WatcherError(RelayError):
    """The relay's own connection to Chromium is down or did not answer."""


class ControlRefused(RelayError):
    """An ``AgentEnv.*`` command refused (:mod:`agentenv.relay.control_commands`): its
    connection is answered a -32602 error whose message is this one. A scope
    op's starts with the HTTP status the app answers it with ("409: ...")."""

    status = 400
