"""``data/get`` archives: ``browser-state.json`` and ``browser-log.jsonl`` in a tar.gz.

The state is what ``data/add`` restores: cookies, local storage per origin,
and tabs (their URLs, the active one first). :func:`unpack` reads an archive
someone sent, so it is bounded: the archive's size (:data:`ARCHIVE_LIMIT`),
the state file's (:data:`STATE_LIMIT`) and all it decompresses before it
finds the state (:data:`UNPACK_LIMIT`); a gzip bomb is refused after that
much, not after filling memory. Every cookie, origin and tab URL is checked
before anything is restored.
"""

from __future__ import annotations

import io
import tarfile
import time
import zlib

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentenv.errors import AgentEnvError
from agentenv.protocol import problems
from agentenv.protocol.browser import origin_of
from agentenv.protocol.urls import web_url

__all__ = [
    "ARCHIVE_LIMIT",
    "LOG_FILE",
    "STATE_FILE",
    "STATE_LIMIT",
    "UNPACK_LIMIT",
    "ArchiveError",
    "BrowserState",
    "SavedCookie",
    "SavedTab",
    "pack",
    "unpack",
]

STATE_FILE = "browser-state.json"
LOG_FILE = "browser-log.jsonl"
#: The largest archive data/add takes (compressed).
ARCHIVE_LIMIT = 256 * 1024 * 1024
#: The largest browser-state.json it reads.
STATE_LIMIT = 32 * 1024 * 1024
#: The most it decompresses looking for browser-state.json.
UNPACK_LIMIT = 64 * 1024 * 1024


class ArchiveError(AgentEnvError, ValueError):
    """An archive data/add cannot take; the message says why."""


class SavedTab(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=65536)
    title: str = ""
    active: bool = False

    @field_validator("url")
    @classmethod
    def _openable(cls, v: str) -> str:
        if not web_url(v):
            raise ValueError("is not a web page URL (http, https, data: or about:blank)")
        return v


class SavedCookie(BaseModel):
    """A cookie as ``Storage.getCookies`` gives it (other fields are kept)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(max_length=4096)
    value: str = Field(max_length=16384)
    domain: str = Field(min_length=1, max_length=1024)
    path: str = Field("/", max_length=4096)


class BrowserState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cookies: list[SavedCookie] = Field(default_factory=list, max_length=10_000)
    local_storage: dict[str, dict[str, str]] = Field(default_factory=dict)
    tabs: list[SavedTab] = Field(default_factory=list, max_length=100)

    @field_validator("local_storage")
    @classmethod
    def _origins(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        return {origin_of(k): items for k, items in v.items()}


def _member(name: str, data: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    info.mode = 0o644
    return info


def pack(state: BrowserState, log: bytes) -> bytes:
    """The tar.gz data/get answers."""
    buffer = io.BytesIO()
    state_bytes = state.model_dump_json(indent=2).encode()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.addfile(_member(STATE_FILE, state_bytes), io.BytesIO(state_bytes))
        tar.addfile(_member(LOG_FILE, log), io.BytesIO(log))
    return buffer.getvalue()


def _state_bytes(data: bytes) -> bytes:
    """browser-state.json's bytes, read as a stream within the limits."""
    spent = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tar:
        for member in tar:
            if member.name == STATE_FILE and member.isfile():
                if member.size > STATE_LIMIT:
                    raise ArchiveError(f"{STATE_FILE} is over {STATE_LIMIT // (1024 * 1024)} MiB")
                extracted = tar.extractfile(member)
                return extracted.read(STATE_LIMIT + 1) if extracted is not None else b""
            spent += member.size
            if spent > UNPACK_LIMIT:
                break
    raise ArchiveError(f"the archive has no {STATE_FILE} first: send what data/get answered")


def unpack(data: bytes) -> BrowserState:
    """The state in a data/get archive (its log is passed over); blocking and
    CPU-bound, so callers run it off the event loop."""
    if len(data) > ARCHIVE_LIMIT:
        raise ArchiveError(f"the archive is over {ARCHIVE_LIMIT // (1024 * 1024)} MiB")
    try:
        raw = _state_bytes(data)
    except (tarfile.TarError, EOFError, OSError, zlib.error):
        raise ArchiveError("the body is not a tar.gz: send what data/get answered") from None
    try:
        return BrowserState.model_validate_json(raw)
    except ValidationError as exc:
        where = "; ".join(problems(exc, STATE_FILE))
        raise ArchiveError(f"{STATE_FILE} is not a browser state: {where}") from None
