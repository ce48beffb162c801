"""Which URLs an agent may open: read as Chromium's URL parser reads them. No I/O.

Tabs and newlines anywhere are dropped, leading and trailing control
characters and spaces too, the scheme is case-insensitive and never
percent-decoded (Chromium does not decode it either, so ``%66ile:`` is no
scheme at all). Allowed: ``http``, ``https``, ``data``, ``about:blank`` and
``about:srcdoc`` (Chromium turns other ``about:`` pages into ``chrome://``
ones), ``blob:`` of a web origin, and ``view-source:`` of any of those. Not
``file:``, ``chrome:``, ``chrome-extension:``, ``devtools:``, ``javascript:``
or anything else.

Where a URL goes is read the same way (:func:`loopback_port`): the host as
Chromium canonicalises it before it connects (percent-decoded, mapped as an
international name is, an IPv4 address in any of its forms: ``127.1``,
``2130706434``, ``0x7f000002``, ``0177.0.0.2``), so that every spelling of
the computer's own loopback is known as one.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from urllib.parse import unquote_to_bytes

__all__ = [
    "WEB_TARGET_TYPES",
    "canonical_address",
    "host_of",
    "loopback",
    "loopback_port",
    "scheme_of",
    "tab",
    "web_target",
    "web_url",
]

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


# -- where a URL goes -------------------------------------------------------------

#: Schemes whose URLs reach a host and port (the URL standard's "special"
#: schemes Chromium connects for), with their default ports.
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
#: Full stops an international name may be written with (UTS 46 maps them to ``.``).
_DOTS = {ord("\u3002"): ".", ord("\uff0e"): ".", ord("\uff61"): "."}


def host_of(url: str) -> tuple[str, int] | None:
    """``(host, port)`` a URL connects to, as Chromium reads them: the host
    lowercased, percent-decoded and mapped as an international name is, an
    IPv4 address in dotted decimal, an IPv6 one in brackets and compressed;
    the port the scheme's default when none is given. None for a URL that
    connects to no host (``data:``, ``about:``, ``blob:``) or that Chromium
    would not parse."""
    scheme, rest = scheme_of(url)
    if scheme == "view-source":
        return host_of(rest)
    default = _DEFAULT_PORTS.get(scheme or "")
    if default is None:
        return None
    # A special scheme's authority: past any slashes and backslashes, up to
    # the first slash, backslash, query or fragment; user info ends at its last @.
    authority = rest.lstrip("/\\")
    for end in "/\\?#":
        authority = authority.split(end, 1)[0]
    authority = authority.rpartition("@")[2]
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            return None
        host, port_text = authority[: close + 1], authority[close + 1 :]
        if port_text and not port_text.startswith(":"):
            return None
        port_text = port_text[1:]
    else:
        host, _, port_text = authority.partition(":")
    if port_text == "":
        port = default
    elif port_text.isascii() and port_text.isdigit() and int(port_text) <= 65535:
        port = int(port_text)
    else:
        return None
    canonical = _canonical_host(host)
    return None if canonical is None else (canonical, port)


def _canonical_host(host: str) -> str | None:
    if host.startswith("["):
        if "%" in host:  # a zone: no URL takes one
            return None
        try:
            return f"[{ipaddress.IPv6Address(host[1:-1])}]"
        except ValueError:
            return None
    try:
        name = unquote_to_bytes(host).decode()
    except UnicodeDecodeError:
        return None
    # UTS 46 as Chromium maps a name before it reads an address in it: width
    # and compatibility forms folded, ideographic full stops made dots,
    # invisible characters dropped (dropping too many only ever makes a
    # name look like an address, which the rules then refuse: the safe side).
    name = unicodedata.normalize("NFKC", name).translate(_DOTS)
    name = "".join(c for c in name if unicodedata.category(c) != "Cf" and c != "\u034f")
    name = unicodedata.normalize("NFKC", name).lower()
    if not name or "%" in name:  # escapes written in other forms: refused
        return None
    address = _ipv4(name)
    if address is False:
        return None  # ends in a number but is no address: Chromium refuses the URL
    return name if address is None else str(address)


def _ipv4(name: str) -> ipaddress.IPv4Address | bool | None:
    """The URL standard's IPv4 parser, as Chromium runs it: None when the
    name is no address (it does not end in a number), False when it ends
    in one but is not a valid address."""
    parts = name.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    last = parts[-1]
    if _number(last) is None and not (last.isascii() and last.isdigit()):
        return None
    numbers = [_number(part) for part in parts]
    if len(parts) > 4 or any(n is None for n in numbers):
        return False
    values = [n for n in numbers if n is not None]
    *head, final = values
    if any(n > 255 for n in head) or final >= 256 ** (5 - len(values)):
        return False
    value = final
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _number(part: str) -> int | None:
    """One part of an IPv4 address: decimal, ``0x`` hex or ``0`` octal."""
    if not part or not part.isascii():
        return None
    base, digits = 10, part
    if part[:2] in ("0x", "0X"):
        base, digits = 16, part[2:]
        if not digits:
            return 0
    elif len(part) > 1 and part[0] == "0":
        base, digits = 8, part[1:]
    try:
        return int(digits, base) if digits.isalnum() else None
    except ValueError:
        return None


def loopback(host: str) -> bool:
    """Whether a canonical host (:func:`host_of`) is this machine: any
    address of ``127.0.0.0/8``, ``0.0.0.0/8`` (Linux connects it to the
    machine itself), ``::1``, ``::``, either IPv4 one written as an
    IPv4-mapped IPv6 address, or the name ``localhost`` or one under it
    (Chromium answers those with loopback itself, asking no DNS)."""
    if host.startswith("["):
        address = ipaddress.IPv6Address(host[1:-1])
        mapped = address.ipv4_mapped
        if mapped is not None:
            return _loopback_v4(mapped)
        return address.is_loopback or address.is_unspecified
    try:
        return _loopback_v4(ipaddress.IPv4Address(host))
    except ValueError:
        name = host.removesuffix(".")
        return name == "localhost" or name.endswith(".localhost")


def _loopback_v4(address: ipaddress.IPv4Address) -> bool:
    return address.is_loopback or address in _THIS_NETWORK


_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")


def loopback_port(url: str, own: frozenset[str] = frozenset()) -> int | None:
    """The port ``url`` reaches on this machine: on its own loopback (any
    spelling of it: :func:`loopback`) or at one of its ``own`` addresses
    (canonical, as :func:`host_of` writes them: the container's address,
    where its doors listen too), else None."""
    found = host_of(url)
    if found is None or not (loopback(found[0]) or found[0] in own):
        return None
    return found[1]


def canonical_address(address: str) -> str | None:
    """An IP address as :func:`host_of` writes a host (IPv6 in brackets,
    compressed), or None if it is none."""
    try:
        found = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    return f"[{found.compressed}]" if found.version == 6 else found.compressed
