"""The error body every server of the computer answers with (SPEC.md section 3)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ErrorBody", "ErrorDetail"]


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: int
    message: str


class ErrorBody(BaseModel):
    """``{"error": {"code": <HTTP status>, "message": <what to do next>}}``."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail
