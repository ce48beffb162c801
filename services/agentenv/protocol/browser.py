"""browser/v1 wire models (docs/spec.md section 3): bodies of ``POST /v1/browser/<op>``.

Inbound models refuse unknown fields. Errors name the field, never its value
(a cookie's value is a secret).
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, StrictBool, field_validator, model_validator

from agentenv.protocol import Inbound

__all__ = [
    "INPUT_LIMIT",
    "CookieToSet",
    "CookiesDelete",
    "CookiesGet",
    "CookiesSet",
    "Download",
    "DownloadsGet",
    "Empty",
    "HumanAnswer",
    "InputButton",
    "InputClick",
    "InputKey",
    "InputMove",
    "InputScroll",
    "InputType",
    "LocalStorageClear",
    "LocalStorageGet",
    "LocalStorageSet",
    "Navigate",
    "RequestHuman",
    "ScopeList",
    "ScopeName",
    "ScopeOnly",
    "ScopeOpened",
    "ScopeRef",
    "ScopeState",
    "Scoped",
    "ScopesOpen",
    "Screenshot",
    "Tab",
    "TabRef",
    "TabsOpen",
    "absolute_url",
    "origin_of",
]


class Empty(Inbound):
    """The body of an op that takes no params (``{}`` or none)."""


#: A scope's name, as ``AGENTENV_USERS`` gives it (its third field, else the
#: user's name): checked against the computer's scopes by the op.
ScopeName = Annotated[str, Field(min_length=1, max_length=256)]


class Scoped(Inbound):
    """An op that acts in one scope (docs/spec.md section 7): the control token
    names it with ``scope`` (the home scope when left out); a user's token
    acts in its own scope, and may name only that one."""

    scope: ScopeName | None = None


class ScopeOnly(Scoped):
    """The body of a scoped op that takes no other params."""


def absolute_url(value: str) -> str:
    """``value`` if it is an absolute URL, else ValueError naming what to send."""
    parts = urlsplit(value.strip())
    if not parts.scheme or (parts.scheme in ("http", "https") and not parts.netloc):
        raise ValueError("must be an absolute URL such as https://example.com/")
    return value.strip()


def origin_of(value: str) -> str:
    """``value`` as an origin (``scheme://host[:port]``), else ValueError."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError("must be an origin such as https://example.com (scheme, host, port)")
    if parts.query or parts.fragment:
        raise ValueError("must be an origin such as https://example.com (no query or fragment)")
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    default = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


Url = Annotated[str, Field(min_length=1, max_length=65536)]


class Tab(BaseModel):
    id: str
    url: str
    title: str
    active: bool


class TabsOpen(Scoped):
    url: Url | None = None
    background: StrictBool = False

    @field_validator("url")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        return absolute_url(v) if v is not None else None


class TabRef(Scoped):
    id: str = Field(min_length=1, max_length=256)


class DownloadsGet(Scoped):
    """``downloads/get``: one file of the scope's downloads folder, by the
    name ``downloads/list`` gives (a file name: no folder, no ``..``)."""

    name: str = Field(min_length=1, max_length=255, pattern=r"^[^/\\\x00]+$")

    @field_validator("name")
    @classmethod
    def _plain(cls, value: str) -> str:
        if value in (".", ".."):
            raise ValueError("must be a file's name, as downloads/list gives it")
        return value


class Download(BaseModel):
    """One file in ``downloads/list``: its name, size, when it last changed
    (UTC ISO 8601), and whether Chromium is still writing it."""

    name: str
    bytes: int
    modified: str
    partial: bool


class CookieToSet(Inbound):
    name: str = Field(min_length=1, max_length=4096)
    value: str = Field(max_length=16384)
    url: str | None = None
    domain: str | None = Field(None, min_length=1, max_length=1024)
    path: str | None = Field(None, max_length=4096)
    secure: StrictBool | None = None
    httpOnly: StrictBool | None = None
    sameSite: Literal["Strict", "Lax", "None"] | None = None
    expires: float | None = Field(None, ge=0)

    @field_validator("url")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        return absolute_url(v) if v is not None else None

    @model_validator(mode="after")
    def _where(self) -> CookieToSet:
        if self.url is None and self.domain is None:
            raise ValueError("needs url, or domain (and path)")
        return self


class CookiesGet(Scoped):
    urls: list[Url] | None = None


class CookiesSet(Scoped):
    cookies: list[CookieToSet] = Field(min_length=1, max_length=1000)


class CookiesDelete(Scoped):
    name: str | None = None
    domain: str | None = None
    path: str | None = None


class LocalStorageGet(Scoped):
    origin: str

    @field_validator("origin")
    @classmethod
    def _origin(cls, v: str) -> str:
        return origin_of(v)


class LocalStorageSet(LocalStorageGet):
    items: dict[str, str]


class LocalStorageClear(Scoped):
    origin: str | None = None

    @field_validator("origin")
    @classmethod
    def _origin(cls, v: str | None) -> str | None:
        return origin_of(v) if v is not None else None


class Navigate(Scoped):
    url: Url
    tab: str | None = None

    @field_validator("url")
    @classmethod
    def _absolute(cls, v: str) -> str:
        return absolute_url(v)


class Screenshot(Scoped):
    tab: str | None = None
    format: Literal["jpeg", "png"] = "jpeg"
    quality: int | None = Field(None, ge=1, le=100)


#: The largest coordinate or scroll an input op takes, in CSS pixels. Past
#: float32's range Chromium reads infinity, rejects the input message, and
#: the tab takes no input from anyone again (a red team's x=3.5e38).
INPUT_LIMIT = 1_000_000.0


class InputClick(Scoped):
    x: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)
    y: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)
    button: Literal["left", "right", "middle"] = "left"
    clicks: int = Field(1, ge=1, le=3)


class InputButton(Scoped):
    """``input/down`` and ``input/up``: a button pressed or released at a
    point (a drag, or a person's press and release in the live view);
    ``clicks`` is the press's count (2: the second press of a double click)."""

    x: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)
    y: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)
    button: Literal["left", "right", "middle"] = "left"
    clicks: int = Field(1, ge=1, le=3)


class RequestHuman(Scoped):
    """``request_human``: an agent asks a person to step in, and waits (at most
    ``timeout_s``) for their word."""

    reason: str = Field(min_length=1, max_length=500)
    timeout_s: float = Field(300.0, ge=1, le=3600, allow_inf_nan=False)


class HumanAnswer(Inbound):
    """A person's word, handing back through the live view (``kind: answer``)."""

    word: Literal["done", "cannot"]
    note: str | None = Field(None, max_length=500)


class InputMove(Scoped):
    x: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)
    y: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)


class InputScroll(Scoped):
    x: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)
    y: float = Field(ge=0, le=INPUT_LIMIT, allow_inf_nan=False)
    dx: float = Field(0, ge=-INPUT_LIMIT, le=INPUT_LIMIT, allow_inf_nan=False)
    dy: float = Field(0, ge=-INPUT_LIMIT, le=INPUT_LIMIT, allow_inf_nan=False)


class InputType(Scoped):
    text: str = Field(max_length=100_000)


class InputKey(Scoped):
    keys: str = Field(min_length=1, max_length=200)


class ScopesOpen(Inbound):
    """``scopes/open`` (control token): a scope opened on demand, under
    ``name`` (a scope's name as ``AGENTENV_USERS`` takes one), or one made up;
    with ``person``, a person of role human in it too (their token opens the
    scope's live view, and no other door), named ``<person>@<scope>``."""

    name: ScopeName | None = None
    person: ScopeName | None = None


class ScopeRef(Inbound):
    """``scopes/close``, ``scopes/reset`` (control token): the scope opened on demand."""

    scope: ScopeName


class ScopeOpened(BaseModel):
    """What ``scopes/open`` answers: the scope's name, its token (given here
    once: the computer keeps only its digest), and where its agents connect
    (the token goes as ``Authorization: Bearer`` or ``?token=``)."""

    scope: str
    token: str
    cdp_url: str
    mcp_url: str
    #: With ``person``: their token (given here once) and the live view's
    #: address, where they step in (the token goes as ``?token=``).
    person_token: str | None = None
    live_url: str | None = None


class ScopeState(BaseModel):
    """One scope opened on demand, as ``scopes/list`` lists it."""

    scope: str
    #: When it opened, in seconds since the epoch.
    opened: float
    #: Its token is revoked and its close is under way.
    closing: bool = False
    #: Its person's user name (``<person>@<scope>``), if opened with one.
    person: str | None = None


class ScopeList(BaseModel):
    """What ``scopes/list`` answers: the scopes opened on demand, how many
    may be open at once (``AGENTENV_MAX_SCOPES``), and the fixed scopes of
    ``AGENTENV_USERS`` (which do not count against it)."""

    scopes: list[ScopeState]
    max_scopes: int
    fixed: list[str]
