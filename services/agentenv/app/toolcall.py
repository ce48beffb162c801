"""The ``AgentEnv-Tool-Call`` and ``AgentEnv-Role`` headers (no I/O).

An op called for an agent's MCP tool call carries::

    AgentEnv-Tool-Call: tool=<name>; call=<id>; args=<base64url JSON>

``args`` is left out when the arguments would make the header too long
(over :data:`MAX_ARGS` characters encoded); the op is then logged with its
tool and call alone. ``AgentEnv-Role`` names a role (see :mod:`agentenv.app.caller`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from agentenv.app.app_errors import AppError
from agentenv.protocol import MAX_DEPTH, too_deep

__all__ = ["MAX_ARGS", "ToolCall", "ToolCallError", "encode", "parse", "role"]

MAX_ARGS = 6000
_NAME_LIMIT = 200


class ToolCallError(AppError, ValueError):
    """A malformed header; the message says how to write it."""


@dataclass(frozen=True)
class ToolCall:
    tool: str
    call: str
    args: Any = None


def _printable(value: str, what: str) -> str:
    if not value or len(value) > _NAME_LIMIT or not value.isprintable():
        raise ToolCallError(
            f"AgentEnv-Tool-Call: {what} must be 1 to {_NAME_LIMIT} printable characters"
        )
    return value


def parse(header: str | None) -> ToolCall | None:
    """The tool call a header names, None without one."""
    if header is None:
        return None
    fields: dict[str, str] = {}
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise ToolCallError(
                "AgentEnv-Tool-Call: write tool=<name>; call=<id>; args=<base64url JSON>"
            )
        fields[key.strip().lower()] = value.strip()
    tool = _printable(fields.get("tool", ""), "tool")
    call = _printable(fields.get("call", ""), "call")
    args = None
    if fields.get("args"):
        raw = fields["args"]
        try:
            args = orjson.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        except (binascii.Error, ValueError, orjson.JSONDecodeError):
            raise ToolCallError("AgentEnv-Tool-Call: args must be base64url-encoded JSON") from None
        if too_deep(args):
            raise ToolCallError(f"AgentEnv-Tool-Call: args nest deeper than {MAX_DEPTH} levels")
    return ToolCall(tool, call, args)


def encode(call: ToolCall) -> str:
    """The header for a tool call (args dropped when too long to carry)."""
    header = f"tool={call.tool}; call={call.call}"
    if call.args is not None:
        args = base64.urlsafe_b64encode(orjson.dumps(call.args)).decode().rstrip("=")
        if len(args) <= MAX_ARGS:
            header += f"; args={args}"
    return header


def role(header: str | None) -> str | None:
    """The role a caller names with ``AgentEnv-Role`` (None without one)."""
    value = (header or "").strip()
    if not value:
        return None
    if len(value) > _NAME_LIMIT or not value.isprintable():
        raise ToolCallError(f"AgentEnv-Role must be 1 to {_NAME_LIMIT} printable characters")
    return value
