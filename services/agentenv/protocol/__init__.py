"""Wire models shared by every program of the computer and by the harness.

Inbound models refuse unknown fields; everything is serialized in one place
(:func:`dump`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["dump"]


def dump(model: BaseModel) -> dict[str, Any]:
    """A model as its JSON-ready wire form."""
    return model.model_dump(mode="json", exclude_none=True)
