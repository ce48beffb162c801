"""URLs compared as the browser shows them (no I/O).

Scheme and host lowercased, a host in another script as punycode (IDNA UTS 46,
non-transitional: ``faß.example`` → ``xn--fa-hia.example``), the scheme's
default port dropped, ``/`` for an empty path.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import idna

from agentenv.protocol.browser import Tab

__all__ = ["normalize", "tab_showing"]

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _host(host: str) -> str:
    host = host.lower()
    if host.startswith("[") or host.isascii():
        return host
    try:
        return idna.encode(host, uts46=True, transitional=False).decode("ascii")
    except idna.IDNAError:
        return host


def normalize(url: str) -> str:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if not parts.netloc:
        return urlunsplit((scheme, "", parts.path, parts.query, parts.fragment))
    host = _host(parts.hostname or "")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        netloc = f"{userinfo}@{netloc}"
    path = parts.path or ("/" if scheme in _DEFAULT_PORTS else "")
    return urlunsplit((scheme, netloc, path, parts.query, parts.fragment))


def tab_showing(tabs: Sequence[Tab], url: str) -> str:
    """The id of the one tab of ``tabs`` showing ``url`` as the browser shows
    it; LookupError, in words naming the open tabs, for none or several."""
    wanted = normalize(url)
    found = [t for t in tabs if normalize(t.url) == wanted]
    if len(found) != 1:
        shown = ", ".join(t.url for t in tabs) or "(none)"
        what = "no tab shows" if not found else f"{len(found)} tabs show"
        raise LookupError(f"{what} {url}; the open tabs: {shown}")
    return found[0].id
