"""The card: what a browser computer is and which ops it serves (``GET /card``).

A client checks the card before calling an op and fails with a clear message
naming the op it lacks (:meth:`Card.require`). A card is read as a tolerant
reader reads: a field a newer computer adds is passed over, so an older
harness still drives it (as the harness sends only the fields it set, for
an older computer: :func:`agentenv.protocol.request_dump`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from agentenv.errors import AgentEnvError

__all__ = ["BROWSER_RECORDING_V1", "BROWSER_V1", "Attestation", "Card", "Extension", "MissingOp"]

BROWSER_V1 = "browser/v1"
BROWSER_RECORDING_V1 = "browser-recording/v1"


class MissingOp(AgentEnvError, LookupError):
    """The computer does not serve an op the caller needs."""


class Extension(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ops: list[str]
    params: list[str] = []
    #: The computer's budgets for what the extension does (``max_frames``,
    #: ``max_duration_s`` for recordings): a call may ask for less.
    limits: dict[str, int] = {}


class Attestation(BaseModel):
    """How the computer signs its recordings (docs/spec.md section 7)."""

    model_config = ConfigDict(extra="ignore")

    #: Its Ed25519 public key, ``ed25519:<base64>`` (made at boot).
    key: str


class Card(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    versions: dict[str, str]
    extensions: dict[str, Extension]
    #: None: a computer that signs nothing (older, or its key could not be made).
    attestation: Attestation | None = None

    def serves(self, extension: str, op: str) -> bool:
        found = self.extensions.get(extension)
        return found is not None and op in found.ops

    def require(self, extension: str, op: str) -> None:
        """Raise :class:`MissingOp` unless this computer serves ``extension``'s ``op``."""
        if not self.serves(extension, op):
            raise MissingOp(f"serves no {extension} {op}: rebuild the image on a newer agentenv")

    def require_param(self, extension: str, param: str) -> None:
        """Raise :class:`MissingOp` unless ``extension``'s ops take ``param``."""
        found = self.extensions.get(extension)
        if found is None or param not in found.params:
            raise MissingOp(
                f"takes no {param!r} on {extension}: rebuild the image on a newer agentenv"
            )
