"""browser/v1 ops: each op's body model, handler, who may call it, and the
largest body it takes (docs/spec.md section 3)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agentenv.app import (
    cookies,
    credential_ops,
    download_ops,
    handoff,
    local_storage,
    pixels,
    tabs,
)
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.http import BODY_LIMIT
from agentenv.protocol import browser as wire
from agentenv.protocol import credentials as vault

__all__ = ["BODY_LIMIT", "DATA_OPS", "OPS", "PROFILE_OPS", "SCOPE_OPS", "Op", "all_ops"]


Handler = Callable[[Browser, Any, Caller], Awaitable[Any]]


@dataclass(frozen=True)
class Op:
    """An op: its body model, its handler, and whether it needs the control token."""

    model: type[BaseModel]
    handler: Handler
    control: bool
    limit: int = BODY_LIMIT


#: browser/v1 ops served from the op modules (``log`` and ``data/*`` live in the server).
OPS: dict[str, Op] = {
    "tabs/list": Op(wire.ScopeOnly, tabs.tabs_list, control=False),
    "tabs/open": Op(wire.TabsOpen, tabs.tabs_open, control=True),
    "tabs/close": Op(wire.TabRef, tabs.tabs_close, control=True),
    "tabs/activate": Op(wire.TabRef, tabs.tabs_activate, control=True),
    "cookies/get": Op(wire.CookiesGet, cookies.cookies_get, control=True),
    "cookies/set": Op(wire.CookiesSet, cookies.cookies_set, control=True),
    "cookies/delete": Op(wire.CookiesDelete, cookies.cookies_delete, control=True),
    "local_storage/get": Op(wire.LocalStorageGet, local_storage.local_storage_get, control=True),
    "local_storage/set": Op(wire.LocalStorageSet, local_storage.local_storage_set, control=True),
    "local_storage/clear": Op(
        wire.LocalStorageClear, local_storage.local_storage_clear, control=True
    ),
    "navigate": Op(wire.Navigate, pixels.navigate, control=False),
    "screenshot": Op(wire.Screenshot, pixels.screenshot, control=False),
    "input/click": Op(wire.InputClick, pixels.input_click, control=False),
    "input/move": Op(wire.InputMove, pixels.input_move, control=False),
    "input/down": Op(wire.InputButton, pixels.input_down, control=False),
    "input/up": Op(wire.InputButton, pixels.input_up, control=False),
    "input/scroll": Op(wire.InputScroll, pixels.input_scroll, control=False),
    "input/type": Op(wire.InputType, pixels.input_type, control=False),
    "input/key": Op(wire.InputKey, pixels.input_key, control=False),
    # An agent asks a person to step in, and waits for their word (app/handoff.py).
    "request_human": Op(wire.RequestHuman, handoff.request_human, control=False),
    "downloads/list": Op(wire.ScopeOnly, download_ops.downloads_list, control=False),
    "downloads/get": Op(wire.DownloadsGet, download_ops.downloads_get, control=False),
    # The credential vault (app/credential_ops.py): set, list and clear are
    # the harness's; a fill is an agent's, in its own scope.
    "credentials/set": Op(vault.CredentialsSet, credential_ops.credentials_set, control=True),
    "credentials/list": Op(wire.ScopeOnly, credential_ops.credentials_list, control=True),
    "credentials/clear": Op(vault.CredentialsClear, credential_ops.credentials_clear, control=True),
    "credentials/fill": Op(vault.CredentialsFill, credential_ops.credentials_fill, control=False),
}

DATA_OPS = ("data/get", "data/add", "data/reset")

#: Named profiles (control token; app/profile_ops.py).
PROFILE_OPS = ("profiles/save", "profiles/load")

#: The scopes opened on demand (control token; app/scope_ops.py).
SCOPE_OPS = ("scopes/open", "scopes/close", "scopes/reset", "scopes/list")


def all_ops() -> list[str]:
    """Every browser/v1 op the app server answers, as the card lists them."""
    return [*OPS, "log", *DATA_OPS, *SCOPE_OPS, *PROFILE_OPS]
