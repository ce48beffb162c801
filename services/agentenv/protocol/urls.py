"""Which URLs an agent may open: read as Chromium's URL parser reads them. No I/O.

Tabs and newlines anywhere are dropped, leading and trailing control
characters and spaces too, the scheme is case-insensitive and never
percent-decoded (Chromium does not decode it either, so ``%66ile:`` is no
scheme at all). Allowed: ``http``, ``https``, ``data``, ``about:blank`` and
``about:srcdoc`` (Chromium turns other ``about:`` pages into ``chrome://``
ones), ``blob:`` of a web origin, and ``view-source:`` of any of those. Not
``file:``, ``chrome:``, ``chrome-extension:``, ``devtools:``, ``javascript:``
or anything else.
"""

from __future__ import annotations

__all__ = ["WEB_TARGET_TYPES", "scheme_of", "tab", "web_target", "web_url"]

#: Target types an agent may attach to: web content only, never the browser's UI.
WEB_TARGET_TYPES = frozenset({"page", "iframe", "worker", "shared_worker", "service_worker", "tab"})

_WEB_SCHEMES = frozenset({"http", "https", "data"})
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+-.")
_DROPPED = {ord("\t"): None, ord("\n"): None, ord("\r"): None}
_EDGES = "".join(map(chr, range(33)))


def scheme_of(url: str) -> tuple[str | None, str]:
    """``(scheme, rest)`` as Chromium's parser splits them; scheme None when
    there is no valid one."""
    u = url.translate(_DROPPED).strip(_EDGES)
    colon = u.find(":")
    if colon <= 0:
        return None, u
    scheme = u[:colon].lower()
    if not scheme[0].isalpha() or not all(c in _SCHEME_CHARS for c in scheme):
        return None, u
    return scheme, u[colon + 1 :]


def web_url(url: str, *, empty_ok: bool = True) -> bool:
    """Whether an agent may open ``url`` (``""`` too when ``empty_ok``: a blank tab)."""
    scheme, rest = scheme_of(url)
    if scheme is None:
        return empty_ok and rest == ""
    if scheme in _WEB_SCHEMES:
        return True
    if scheme == "about":
        page = rest.lower().split("?", 1)[0].split("#", 1)[0]
        return page in ("blank", "srcdoc")
    if scheme == "blob":
        inner, _ = scheme_of(rest)
        return inner in ("http", "https")
    if scheme == "view-source":
        return web_url(rest, empty_ok=False)
    return False


def web_target(info: tuple[str, str] | None) -> bool:
    """Whether a target (``(type, url)``) is web content an agent may attach to.

    The browser's own UI is no web content, whatever its type says (Chromium
    156 lists its omnibox popup as a ``page`` at a ``chrome://`` URL). A tab
    showing an error page (``chrome-error:``) is still a tab.
    """
    if info is None:
        return False
    kind, url = info
    return kind in WEB_TARGET_TYPES and (web_url(url) or url.startswith("chrome-error:"))


def tab(info: tuple[str, str]) -> bool:
    """Whether a target is one of the browser's tabs (a web page, not its UI)."""
    return info[0] == "page" and web_target(info)
