"""Named profiles' wire models (docs/spec.md section 3, "Profiles"): the
bodies of ``profiles/save`` and ``profiles/load``, what they answer, and the
profile document itself. No I/O.

A profile is one JSON document holding a scope's sign-in state:

- ``cookies``: every cookie of the scope's browser context, as
  ``Storage.getCookies`` gives them (``Storage.setCookies`` takes them back);
- ``origins``: per origin (``scheme://host[:port]``), its local storage items
  and its IndexedDB databases: each database's name and version, each object
  store's key path, key generator and indexes, and every record (key and
  value). Values are JSON values only: a record holding a ``Date``, a
  ``Blob``, an ``ArrayBuffer``, a ``Map`` or any other structured-clone type
  JSON cannot carry makes the save fail naming the origin, database and
  store (a profile that restores something else than was saved is worse
  than none);
- ``format`` (:data:`PROFILE_FORMAT`) and ``chromium`` (the major version
  that saved it). The document is plain JSON read and written by page
  scripts, so any Chromium loads it: loading refuses only another
  ``format``, and keeps ``chromium`` to say where a profile came from.

- ``permissions``: the permission settings the scope's clients made
  (``Browser.grantPermissions`` and ``Browser.setPermission`` that
  succeeded, in order, since the scope's permissions were last reset), each
  its command's method and params without a ``browserContextId``. Chromium
  cannot list a context's permission overrides, but every one was made by a
  command on the record: a load sends the same commands again, in the same
  order, into the new scope, through the relay's rules (a profile cannot
  grant what an agent could not). At most :data:`MAX_PROFILE_PERMISSIONS`:
  a save past it fails with 413, none is dropped in silence.

- ``session_storage``: per origin, the session storage items of the
  scope's open tabs that show a page of it (a tab holds one per origin it
  visited, and only the one it shows can be read; of two tabs of one origin,
  the one listed first). A load gives them to the scope's tab in front, the
  one its agent starts in: that tab visits each origin served blank, is
  given the items, and goes back to the page it showed, with one entry of
  history (:mod:`agentenv.app.session_storage`).

Not kept: HTTP cache, service workers, cache storage.

Bounds: the document is at most :data:`PROFILE_LIMIT` bytes as JSON
(:func:`bounded`). A save past it fails with 413 and saves nothing; the
page script stops reading an origin as soon as its part passes the bound, so
a site with a huge database costs no more than the bound to refuse. At most
:data:`MAX_PROFILE_ORIGINS` origins are read.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from agentenv.protocol import problems
from agentenv.protocol.browser import Scoped, origin_of

__all__ = [
    "MAX_PROFILE_ORIGINS",
    "MAX_PROFILE_PERMISSIONS",
    "PERMISSION_METHODS",
    "PROFILE_FORMAT",
    "PROFILE_LIMIT",
    "IndexedDatabase",
    "ObjectIndex",
    "ObjectStore",
    "OriginState",
    "PermissionSetting",
    "Profile",
    "ProfileError",
    "ProfileLoaded",
    "ProfileName",
    "ProfileSaved",
    "ProfilesLoad",
    "ProfilesSave",
    "StoredRecord",
    "bounded",
    "profile_bytes",
    "read_profile",
]

#: The document's format: a load of another is refused.
PROFILE_FORMAT = 1
#: The largest profile document, as JSON bytes (16 MiB).
PROFILE_LIMIT = 16 * 1024 * 1024
#: The most origins one profile holds (each costs a hidden tab to read).
MAX_PROFILE_ORIGINS = 200
#: The most permission commands one profile holds (a save past it fails).
MAX_PROFILE_PERMISSIONS = 200
#: The commands that set a permission, as a profile keeps them.
PERMISSION_METHODS = ("Browser.grantPermissions", "Browser.setPermission")

#: A profile's name: letters, digits, ``.``, ``_`` and ``-``, as a store key
#: part and a file name take it (no ``/``, no ``..``).
ProfileName = Annotated[
    str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
]

#: An IndexedDB key path: none (out-of-line keys), one path, or several.
KeyPath = str | list[str] | None


class ProfileError(ValueError):
    """A profile document that cannot be used: too large, malformed, another format."""


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ObjectIndex(_Doc):
    name: str
    key_path: KeyPath
    unique: bool = False
    multi_entry: bool = False


class StoredRecord(_Doc):
    """One record: its key (JSON: a string, a number or an array of them) and value."""

    key: Any
    value: Any


class ObjectStore(_Doc):
    name: str
    key_path: KeyPath = None
    auto_increment: bool = False
    indexes: list[ObjectIndex] = Field(default_factory=list)
    records: list[StoredRecord] = Field(default_factory=list)


class IndexedDatabase(_Doc):
    name: str
    version: int = Field(ge=1)
    stores: list[ObjectStore] = Field(default_factory=list)


class OriginState(_Doc):
    """An origin's storage in a profile."""

    local_storage: dict[str, str] = Field(default_factory=dict)
    indexeddb: list[IndexedDatabase] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.local_storage and not self.indexeddb


class PermissionSetting(_Doc):
    """A permission command a client sent in the scope, to send again on load."""

    method: Literal["Browser.grantPermissions", "Browser.setPermission"]
    params: dict[str, Any]

    @model_validator(mode="after")
    def _params(self) -> PermissionSetting:
        """The command's own params and no others: no context named (a load's
        command acts in the scope it loads into), nothing a log line cut."""
        params = self.params
        if "browserContextId" in params:
            raise ValueError("a permission's params name no browserContextId")
        for key in ("origin", "embeddedOrigin"):
            if key in params and not isinstance(params[key], str):
                raise ValueError(f"a permission's {key} is a string")
        if self.method == "Browser.grantPermissions":
            names = params.get("permissions")
            if set(params) - {"permissions", "origin"} or not (
                isinstance(names, list) and names and all(isinstance(n, str) for n in names)
            ):
                raise ValueError("Browser.grantPermissions takes permissions (names) and origin")
        else:
            wanted = params.get("permission")
            if (
                set(params) - {"permission", "setting", "origin", "embeddedOrigin"}
                or params.get("setting") not in ("granted", "denied", "prompt")
                or not isinstance(wanted, dict)
                or not isinstance(wanted.get("name"), str)
            ):
                raise ValueError(
                    "Browser.setPermission takes permission {name, ...}, setting "
                    "(granted, denied or prompt), origin and embeddedOrigin"
                )
        return self


class Profile(_Doc):
    """A scope's sign-in state (the module's docstring says what is in it)."""

    format: Literal[1] = 1  # PROFILE_FORMAT
    chromium: int | None = None
    cookies: list[dict[str, Any]] = Field(default_factory=list)
    origins: dict[str, OriginState] = Field(default_factory=dict, max_length=MAX_PROFILE_ORIGINS)
    permissions: list[PermissionSetting] = Field(
        default_factory=list, max_length=MAX_PROFILE_PERMISSIONS
    )
    session_storage: dict[str, dict[str, str]] = Field(
        default_factory=dict, max_length=MAX_PROFILE_ORIGINS
    )

    @field_validator("origins", "session_storage")
    @classmethod
    def _origins(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Each key an origin as the browser writes it (``scheme://host[:port]``,
        nothing more): a load opens a tab there."""
        for at in value:
            try:
                same = origin_of(at) == at
            except ValueError:
                same = False
            if not same:
                raise ValueError("each origin must be scheme://host[:port], as saved")
        return value


_PROFILE = TypeAdapter(Profile)


def profile_bytes(profile: Profile) -> bytes:
    """The document as JSON bytes (what is bounded and what is sealed)."""
    return _PROFILE.dump_json(profile, exclude_none=True)


def bounded(size: int, limit: int = PROFILE_LIMIT) -> None:
    """Refuse a document of ``size`` bytes past ``limit``, naming it."""
    if size > limit:
        raise ProfileError(
            f"the profile would be {size} bytes, more than the {limit} bytes a profile "
            "holds: sign in with less stored, or clear what the site keeps that it "
            "does not need"
        )


def read_profile(data: bytes, limit: int = PROFILE_LIMIT) -> Profile:
    """A document back from bytes: bounded, then checked whole."""
    bounded(len(data), limit)
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ProfileError("the profile is not JSON") from None
    if isinstance(raw, dict) and raw.get("format", PROFILE_FORMAT) != PROFILE_FORMAT:
        raise ProfileError(
            f"the profile has format {raw.get('format')!r}; this computer loads format "
            f"{PROFILE_FORMAT}: save it again with this version"
        )
    try:
        return _PROFILE.validate_python(raw)
    except ValidationError as exc:
        said = "; ".join(problems(exc, "profile")[:3])
        raise ProfileError(f"the profile is malformed: {said}") from None


class ProfilesSave(Scoped):
    """``profiles/save`` (control token): the scope's sign-in state, answered
    as a profile document named ``name``."""

    name: ProfileName


class ProfilesLoad(Scoped):
    """``profiles/load`` (control token): ``profile`` restored into the scope,
    which must be fresh (no cookie, and no storage in the profile's origins)."""

    name: ProfileName
    profile: Profile


class ProfileSaved(BaseModel):
    name: str
    profile: Profile
    cookies: int
    origins: int
    databases: int
    permissions: int = 0
    #: Origins whose session storage was kept.
    session_storage: int = 0
    bytes: int


class ProfileLoaded(BaseModel):
    name: str
    cookies: int
    origins: int
    databases: int
    permissions: int = 0
    session_storage: int = 0
