"""The error body every server of the computer answers with (docs/spec.md section
3), and how a guard's refusal reads (docs/spec.md section 2).

Every refusal of the computer's guards says ``<what> by agentenv guard
<rule>: <why and what to do next>`` (``what``: blocked, rewritten,
disconnected, cancelled, refused, counted), in CDP error answers and log entries
alike. :func:`guard_rule` reads the rule back, so the app can answer a
refusal by its rule (``log-budget``: 429; any other: 403) without looking for
words in the text.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

__all__ = ["ErrorBody", "ErrorDetail", "guard_rule"]

_GUARD = re.compile(
    r"^(?:AgentEnv\.\w+: )?(?:blocked|rewritten|disconnected|cancelled|refused|counted) "
    r"by agentenv guard ([a-z][a-z0-9-]*):"
)


def guard_rule(message: str) -> str | None:
    """The rule of a guard's refusal (None: ``message`` is not one). A command
    the relay refused while the app's action began reads ``AgentEnv.<command>:
    <refusal>``."""
    found = _GUARD.match(message)
    return found.group(1) if found else None


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: int
    message: str


class ErrorBody(BaseModel):
    """``{"error": {"code": <HTTP status>, "message": <what to do next>}}``."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail
