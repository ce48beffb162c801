"""``data/get`` archives: ``browser-state.json`` and ``browser-log.jsonl`` in a tar.gz.

The state is what ``data/add`` restores: cookies, local storage per origin,
and tabs (their URLs, the active one first).
"""

from __future__ import annotations

import io
import tarfile
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "ARCHIVE_LIMIT",
    "LOG_FILE",
    "STATE_FILE",
    "ArchiveError",
    "BrowserState",
    "pack",
    "unpack",
]

STATE_FILE = "browser-state.json"
LOG_FILE = "browser-log.jsonl"
#: The largest archive data/add takes (its log is not read, only skipped).
ARCHIVE_LIMIT = 512 * 1024 * 1024


class ArchiveError(ValueError):
    """An archive data/add cannot take; the message says why."""


class SavedTab(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    title: str = ""
    active: bool = False


class BrowserState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cookies: list[dict[str, Any]] = Field(default_factory=list)
    local_storage: dict[str, dict[str, str]] = Field(default_factory=dict)
    tabs: list[SavedTab] = Field(default_factory=list)


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


def unpack(data: bytes) -> BrowserState:
    """The state in a data/get archive (its log is passed over)."""
    if len(data) > ARCHIVE_LIMIT:
        raise ArchiveError(f"the archive is over {ARCHIVE_LIMIT // (1024 * 1024)} MiB")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            member = next((m for m in tar.getmembers() if m.name == STATE_FILE), None)
            if member is None or not member.isfile():
                raise ArchiveError(f"the archive has no {STATE_FILE}: send what data/get answered")
            extracted = tar.extractfile(member)
            raw = extracted.read() if extracted is not None else b""
    except (tarfile.TarError, EOFError, OSError):
        raise ArchiveError("the body is not a tar.gz: send what data/get answered") from None
    try:
        return BrowserState.model_validate_json(raw)
    except ValidationError as exc:
        where = "; ".join(
            ".".join(str(p) for p in e["loc"]) + ": " + e["msg"]
            for e in exc.errors(include_input=False, include_url=False)
        )
        raise ArchiveError(f"{STATE_FILE} is not a browser state: {where}") from None
