"""What the computer answers: browser/v1's and browser-recording/v1's JSON
answers, one model per shape (docs/spec.md sections 3 and 4).

The bodies a computer takes are in :mod:`agentenv.protocol.browser` and
:mod:`agentenv.protocol.recording`; these are the other direction. The app
server and the recorder write their answers through :data:`ANSWERS` and
:data:`RECORDING_ANSWERS`, and the harness reads them back through the same
tables (:meth:`agentenv.harness.computer.Computer.op`), so both ends hold
one model of each answer.

Answers read unknown fields and let them pass (a newer computer may say
more); every field named here is required. Ops that answer bytes (an image,
a file, an archive) are in :data:`BINARY`, not in the tables.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter

from agentenv.protocol.browser import Download, ScopeList, ScopeOpened, Tab
from agentenv.protocol.credentials import (
    CredentialFilled,
    CredentialInfo,
    CredentialList,
    CredentialsCleared,
)
from agentenv.protocol.log import LogPage
from agentenv.protocol.profiles import ProfileLoaded, ProfileSaved
from agentenv.protocol.recording import BrowserRecordingManifest

__all__ = [
    "ANSWERS",
    "BINARY",
    "RECORDING_ANSWERS",
    "CookiesDeleted",
    "CookiesFound",
    "DataAdded",
    "DataReset",
    "HumanAnswered",
    "LocalStorageItems",
    "Navigated",
    "OpDone",
    "RecordingStarted",
    "ScopeDone",
    "TabOpened",
]


class OpDone(BaseModel):
    """An op that says no more than that it was done: ``{}``."""


class HumanAnswered(BaseModel):
    """``request_human``: what the person said (``done`` or ``cannot``), who
    they are, their note, and the entries they made meanwhile (``seq``s)."""

    word: str
    who: str
    note: str | None = None
    entries: list[int] = []


class TabOpened(BaseModel):
    """``tabs/open``: the tab's id (its target id)."""

    id: str


class Navigated(BaseModel):
    """``navigate``: the tab that navigated, and the URL it was sent to."""

    tab: str
    url: str


class CookiesFound(BaseModel):
    """``cookies/get``: the scope's cookies, as Chromium's ``Network.Cookie``s."""

    cookies: list[dict[str, Any]]


class CookiesDeleted(BaseModel):
    """``cookies/delete``: how many cookies matched and were deleted."""

    deleted: int


class LocalStorageItems(BaseModel):
    """``local_storage/get``: one origin's items."""

    origin: str
    items: dict[str, str]


class ScopeDone(BaseModel):
    """``scopes/close`` and ``scopes/reset``: the scope it was done to."""

    scope: str


class DataAdded(BaseModel):
    """``data/add``: how much of the archive was restored."""

    cookies: int
    local_storage: int
    tabs: int


class DataReset(BaseModel):
    """``data/reset``: the blank tab left, the log's reset entry, and how
    many sites' storage was cleared."""

    tab: str
    reset: int
    origins_cleared: int


class RecordingStarted(BaseModel):
    """browser-recording/v1 ``start``: the recording's id."""

    recording_id: str


#: browser/v1's JSON answers, by op. ``log``'s page is written from the
#: lines as the log holds them (:func:`agentenv.protocol.log.page_bytes`) and
#: read by its model here.
ANSWERS: dict[str, TypeAdapter[Any]] = {
    "log": TypeAdapter(LogPage),
    "tabs/list": TypeAdapter(list[Tab]),
    "tabs/open": TypeAdapter(TabOpened),
    "tabs/close": TypeAdapter(OpDone),
    "tabs/activate": TypeAdapter(OpDone),
    "cookies/get": TypeAdapter(CookiesFound),
    "cookies/set": TypeAdapter(OpDone),
    "cookies/delete": TypeAdapter(CookiesDeleted),
    "local_storage/get": TypeAdapter(LocalStorageItems),
    "local_storage/set": TypeAdapter(OpDone),
    "local_storage/clear": TypeAdapter(OpDone),
    "navigate": TypeAdapter(Navigated),
    "input/click": TypeAdapter(OpDone),
    "input/move": TypeAdapter(OpDone),
    "input/down": TypeAdapter(OpDone),
    "input/up": TypeAdapter(OpDone),
    "input/scroll": TypeAdapter(OpDone),
    "input/type": TypeAdapter(OpDone),
    "input/key": TypeAdapter(OpDone),
    "request_human": TypeAdapter(HumanAnswered),
    "downloads/list": TypeAdapter(list[Download]),
    "data/add": TypeAdapter(DataAdded),
    "data/reset": TypeAdapter(DataReset),
    "scopes/open": TypeAdapter(ScopeOpened),
    "scopes/close": TypeAdapter(ScopeDone),
    "scopes/reset": TypeAdapter(ScopeDone),
    "scopes/list": TypeAdapter(ScopeList),
    "credentials/set": TypeAdapter(CredentialInfo),
    "credentials/list": TypeAdapter(CredentialList),
    "credentials/clear": TypeAdapter(CredentialsCleared),
    "credentials/fill": TypeAdapter(CredentialFilled),
    "profiles/save": TypeAdapter(ProfileSaved),
    "profiles/load": TypeAdapter(ProfileLoaded),
}

#: browser/v1 ops whose answer is bytes: an image, a file, an archive.
BINARY = frozenset({"screenshot", "downloads/get", "data/get"})

#: browser-recording/v1's answers, by op.
RECORDING_ANSWERS: dict[str, TypeAdapter[Any]] = {
    "start": TypeAdapter(RecordingStarted),
    "end": TypeAdapter(BrowserRecordingManifest),
    "end_all": TypeAdapter(list[BrowserRecordingManifest]),
}
