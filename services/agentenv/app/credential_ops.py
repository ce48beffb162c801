"""The credential vault's ops (docs/spec.md section 3, "Credentials"):
``credentials/set``, ``credentials/list``, ``credentials/clear`` (control
token) and ``credentials/fill`` (an agent's token, in its own scope; or the
control token naming one).

The app holds no credential: ``credentials/set`` hands it to the relay over
the scope's control link (``AgentEnv.setCredential``) and drops it with the
request (:mod:`agentenv.relay.vault` says why the relay holds them). Each op
is an action on the record whose arguments are the name and origin, or the
name and field; the values never are, and a fill's entry says
``{"withheld": "password"}`` where its value would be, which the recorder
reads as typing into a password field on that tab (recorder/typed.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentenv.app.acting import acting, reading
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.app.scope_ops import refusal
from agentenv.protocol import Inbound, dump
from agentenv.protocol.control import (
    ClearCredentials,
    ClearedCredentials,
    Credentials,
    Done,
    FillCredential,
    Filled,
    ListCredentials,
    SetCredential,
)
from agentenv.protocol.credentials import (
    WITHHELD,
    CredentialField,
    CredentialFilled,
    CredentialInfo,
    CredentialList,
    CredentialName,
    CredentialsClear,
    CredentialsCleared,
    CredentialsFill,
    CredentialsSet,
)
from agentenv.relay_link import BrowserError, BrowserLink

__all__ = [
    "FillArgs",
    "credentials_clear",
    "credentials_fill",
    "credentials_list",
    "credentials_set",
    "fill_args",
    "fill_on_link",
]


class _Set(BaseModel):
    """What the record keeps of a ``credentials/set``: no value."""

    scope: str | None = None
    name: str
    origin: str


class _Fill(BaseModel):
    """What the record keeps of a fill: its value withheld."""

    scope: str | None = None
    name: str
    field: CredentialField
    value: dict[str, Any]


def fill_args(name: str, field: CredentialField) -> dict[str, Any]:
    """A fill's arguments as the log keeps them (the MCP tool's too)."""
    return {"name": name, "field": field, "value": dict(WITHHELD)}


async def credentials_set(browser: Browser, body: CredentialsSet, caller: Caller) -> CredentialInfo:
    logged = _Set(scope=body.scope, name=body.name, origin=body.origin)
    held = SetCredential(
        name=body.name,
        origin=body.origin,
        username=body.username,
        password=body.password,
        totp_secret=body.totp_secret,
    )
    try:
        async with acting(browser, caller, "credentials/set", None, args=dump(logged)):
            await browser.link.control(held, Done)
    except BrowserError as exc:
        raise refusal(exc) from None
    fields: list[CredentialField] = ["username", "password"]
    if body.totp_secret is not None:
        fields.append("totp")
    return CredentialInfo(name=body.name, origin=body.origin, fields=fields)


async def credentials_list(browser: Browser, body: BaseModel, caller: Caller) -> CredentialList:
    try:
        async with reading(browser, caller, "credentials/list", body, None):
            found = await browser.link.control(ListCredentials(), Credentials)
    except BrowserError as exc:
        raise refusal(exc) from None
    return CredentialList(credentials=found.credentials)


async def credentials_clear(
    browser: Browser, body: CredentialsClear, caller: Caller
) -> CredentialsCleared:
    try:
        async with acting(browser, caller, "credentials/clear", body):
            gone = await browser.link.control(ClearCredentials(name=body.name), ClearedCredentials)
    except BrowserError as exc:
        raise refusal(exc) from None
    return CredentialsCleared(cleared=gone.cleared)


async def credentials_fill(
    browser: Browser, body: CredentialsFill, caller: Caller
) -> CredentialFilled:
    """Types into the focused field of the scope's active tab."""
    tab = await browser.active()
    logged = _Fill(scope=body.scope, **fill_args(body.name, body.field))
    try:
        async with acting(browser, caller, "credentials/fill", None, tab, args=dump(logged)):
            done = await fill_on(browser, body.name, body.field, tab)
    except BrowserError as exc:
        raise refusal(exc) from None
    return CredentialFilled(name=done.name, field=done.field, tab=done.tab)


async def fill_on(browser: Browser, name: str, field: CredentialField, tab: str) -> Filled:
    """The relay's fill of ``tab`` on the browser's (scoped) control link."""
    return await fill_on_link(browser.link, name, field, tab)


async def fill_on_link(link: BrowserLink, name: str, field: CredentialField, tab: str) -> Filled:
    """The relay's fill of ``tab`` on a control link of its scope."""
    return await link.control(FillCredential(name=name, field=field, tab=tab), Filled)


class FillArgs(Inbound):
    """``fill_credential``'s arguments (the MCP tool)."""

    name: CredentialName
    field: CredentialField
