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

#: JSON-RPC's code for invalid params, which Chromium answers for an unknown target id.
INVALID_PARAMS = -32602
#: The ops' commands whose only parameter is a target's id.
_BY_TARGET_ID = frozenset({"Target.activateTarget", "Target.closeTarget", "Target.attachToTarget"})


class AppError(AgentEnvError):
    """Root of the app server's errors."""


class OpError(AppError, Refusal):
    """An op that could not be done: an HTTP status and a message that says
    what to do next."""

    def __init__(self, status: int, message: str) -> None:
        Refusal.__init__(self, message, status)


#: Guard rules whose refusal is the computer's state, not the caller's ask:
#: its status (any other rule: 403).
_RULE_STATUS = {
    "log-budget": 429,  # the caller's share of the log is spent: too many, not forbidden
    "mcp-sessions": 429,
    "log-full": 503,  # the computer takes no more: as the relay's own HTTP commands answer
    "memory": 503,  # the caller's messages in flight, or the relay's: retry
}


def failure(exc: BrowserError | OpError) -> OpError:
    """The HTTP answer for an error met while doing an op: a guard's refusal
    by its rule, a refusal of the relay's own (an ``AgentEnv.*`` command) as
    the relay's, 502 only for what Chromium itself refused."""
    if isinstance(exc, OpError):
        return exc
    if isinstance(exc, CdpError):
        said = exc.message.removeprefix(f"{exc.method}: ")
        if exc.rule is not None:
            return OpError(_RULE_STATUS.get(exc.rule, 403), said)
        if exc.method.startswith("AgentEnv."):
            # Never sent to Chromium: the relay's own answer.
            return OpError(503, f"the computer's relay refused {exc.method}: {said}")
        if exc.code == INVALID_PARAMS and exc.method in _BY_TARGET_ID:
            # Its one parameter is the tab's id: the tab is gone (or never was
            # this caller's, which the relay answers the same way).
            return OpError(404, "no such tab: tabs/list shows the open tabs")
        return OpError(502, f"Chromium refused {exc.method}: {exc.message}")
    return OpError(503, str(exc))
