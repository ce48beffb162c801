"""Chromium's ``/json/*`` answers, rewritten to the relay's address (no I/O).

Chromium builds ``webSocketDebuggerUrl`` and ``devtoolsFrontendUrl`` from the
address the relay used to reach it (127.0.0.1:6666, unreachable from
outside); every one is rewritten to the address the client used, which
:func:`agentenv.relay.access.check_host` has already accepted. A client that
authenticated with ``?token=`` (or named itself with ``?user=``) gets it
carried on, since it is a client that cannot set headers and Playwright
drops the endpoint's query when it follows ``webSocketDebuggerUrl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

__all__ = ["DISCOVERY_PATHS", "ClientAddress", "rewrite"]

#: Discovery paths served by the relay (``/json/version/`` is accepted too).
DISCOVERY_PATHS = ("/json/version", "/json/list", "/json", "/json/protocol")


@dataclass(frozen=True)
class ClientAddress:
    """How the client reached the relay."""

    host: str  # the Host header, "host:port"
    secure: bool = False  # reached through TLS (X-Forwarded-Proto: https)
    token: str | None = None  # the ?token= the client used, carried on
    user: str | None = None  # the ?user= the client used, carried on

    @property
    def ws_scheme(self) -> str:
        return "wss" if self.secure else "ws"


def _ws_url(url: str, client: ClientAddress) -> str:
    parts = urlsplit(url)
    query = parts.query
    for key, value in (("token", client.token), ("user", client.user)):
        if value is not None:
            carried = f"{key}={quote(value, safe='')}"
            query = f"{query}&{carried}" if query else carried
    return urlunsplit((client.ws_scheme, client.host, parts.path, query, parts.fragment))


def _frontend_url(url: str, upstream: str, client: ClientAddress) -> str:
    key = "wss=" if client.secure else "ws="
    return url.replace(f"ws={upstream}", key + client.host)


def _rewrite_one(item: dict[str, Any], upstream: str, client: ClientAddress) -> dict[str, Any]:
    out = dict(item)
    ws = out.get("webSocketDebuggerUrl")
    if isinstance(ws, str):
        out["webSocketDebuggerUrl"] = _ws_url(ws, client)
    front = out.get("devtoolsFrontendUrl")
    if isinstance(front, str):
        out["devtoolsFrontendUrl"] = _frontend_url(front, upstream, client)
    return out


def rewrite(body: Any, upstream: str, client: ClientAddress) -> Any:
    """``body`` (a decoded ``/json/*`` answer) with every URL made the relay's.

    ``upstream`` is Chromium's ``host:port`` as the relay reached it.
    """
    if isinstance(body, dict):
        return _rewrite_one(body, upstream, client)
    if isinstance(body, list):
        return [_rewrite_one(i, upstream, client) if isinstance(i, dict) else i for i in body]
    return body
