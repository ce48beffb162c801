"""Wire models shared by every program of the computer and by the harness.

Inbound models refuse unknown fields; everything is serialized in one place
(:func:`dump`), and a model's refusal is described in one place
(:func:`problems`).

- :mod:`.browser` — browser/v1's op bodies; :mod:`.data` — ``data/get``'s
  archive; :mod:`.log` — the ``log`` op; :mod:`.card` — ``GET /card``;
- :mod:`.recording` — browser-recording/v1: start, end, the manifest;
  :mod:`.attestation` — what makes a recording evidence: the key's text, what
  is signed, and the checks (no I/O);
- :mod:`.control` — the ``AgentEnv.*`` commands and their results;
- :mod:`.error_body` — the error body; :mod:`.urls` — which URLs an agent may open;
- :mod:`.chain` — the log's hash chain, and its checks (``agentenv verify``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["MAX_DEPTH", "Inbound", "dump", "problems", "request_dump", "too_deep"]

#: How deep a JSON value from outside may nest (CDP params, tool-call
#: arguments): no client sends more than a few levels, and the log must be
#: able to walk and serialize what it keeps.
MAX_DEPTH = 64


class Inbound(BaseModel):
    """What a program takes from outside: unknown fields refused."""

    model_config = ConfigDict(extra="forbid")


def dump(model: BaseModel) -> dict[str, Any]:
    """A model as its JSON-ready wire form."""
    return model.model_dump(mode="json", exclude_none=True)


def request_dump(model: BaseModel) -> dict[str, Any]:
    """A request as its sender named it: the fields it set, none of the
    defaults (so a newer harness's request means the same to an older
    computer, which refuses fields it does not know)."""
    # A credential's values are written out here, for the request (only a
    # model that asks for it reveals: protocol/credentials.py).
    reveal = {"agentenv_reveal": True}
    return model.model_dump(mode="json", exclude_none=True, exclude_unset=True, context=reveal)


def problems(exc: ValidationError, whole: str = "body", *, lower: bool = False) -> list[str]:
    """Each of a model's refusals as ``field: what is wrong``, never the value
    (``whole`` names a refusal of the value itself, with no field)."""
    said = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or whole
        said.append(f"{where}: {error['msg'].lower() if lower else error['msg']}")
    return said


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (iterative: a deep value
    must not exhaust the stack that checks it)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
    return False
