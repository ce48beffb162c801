"""``log {after, limit}`` → ``{lines, last}`` (SPEC.md sections 1 and 3)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LogPage", "LogRequest"]


class LogRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    after: int = Field(0, ge=0, description="return lines with seq greater than this")
    limit: int = Field(1000, ge=1, le=10000, description="at most this many lines")


class LogPage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lines: list[dict[str, Any]]
    last: int
