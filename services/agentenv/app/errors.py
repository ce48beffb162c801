"""The app server's exceptions.

::

    AppError
    ├── OpError          an op refused or failed: an HTTP status and what to do next
    │   └── KeyError_    a key combination that names no key (400)
    └── ToolCallError    a malformed AgentEnv-Tool-Call or AgentEnv-Role header

Errors of the browser link (:class:`agentenv.relay_link.BrowserError`,
:class:`agentenv.relay_link.CdpError`) become an :class:`OpError` in :func:`failure`;
bodies that cannot be read are :class:`agentenv.http.BodyError`.
"""

from __future__ import annotations

from agentenv.errors import AgentEnvError, Refusal
from agentenv.relay_link import BrowserError, CdpError

__all__ = ["AppError", "OpError", "failure"]


class AppError(AgentEnvError):
    """Root of the app server's errors."""


class OpError(AppError, Refusal):
    """An op that could not be done: an HTTP status and a message that says
    what to do next."""

    def __init__(self, status: int, message: str) -> None:
        Refusal.__init__(self, message, status)


def failure(exc: BrowserError | OpError) -> OpError:
    """The HTTP answer for an error met while doing an op."""
    if isinstance(exc, OpError):
        return exc
    if isinstance(exc, CdpError):
        if "agentenv guard log-budget" in exc.message:
            # The caller's share of the log is spent: too many, not forbidden.
            return OpError(429, exc.message.removeprefix("AgentEnv.beginAction: "))
        if "agentenv guard" in exc.message:
            return OpError(403, exc.message)
        if "No target with given id" in exc.message or "No such target" in exc.message:
            return OpError(404, "no such tab: tabs/list shows the open tabs")
        return OpError(502, f"Chromium refused {exc.method}: {exc.message}")
    return OpError(503, str(exc))
