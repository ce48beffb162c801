"""Who is calling, and may they: tokens, ``Host`` and ``Origin`` (no I/O).

Shared by the relay and the app server, which check callers the same way.

- With users configured, a request needs a known token (``Authorization:
  Bearer`` or ``?token=``), else 401; ``/json/version`` alone is open, since
  clients such as Puppeteer fetch it bare and it reveals no tab or secret.
- With no users configured, the user is ``?user=``, else ``default``.
- The control token is always recognised and makes the caller ``agentenv``.
- A scope opened on demand (``scopes/open``) has a token the relay minted:
  it makes the caller the scope's name, as a fixed user's makes them theirs
  (:mod:`agentenv.opened`). Scopes that may be opened need tokens as users do.
- A person's token (a user of ``role=human``) opens the live view of its
  scope and no other door: at the relay, the ops and ``/mcp`` it is refused
  (403), so everything a person does is on the record as theirs (``via:
  human``) through the view's one input path (:mod:`agentenv.app.live_input`).
- ``Host`` must be an IP literal, ``localhost`` or an allowed name, so a DNS
  rebinding page cannot reach the relay under a name it controls. The host
  is never echoed back in an error.
- A browser ``Origin`` not allowed gets 403; clients that send none are fine.

Tokens are compared in constant time against every known token, and no
message here ever contains one.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from dataclasses import dataclass

from agentenv.errors import Refusal
from agentenv.opened import opened_of
from agentenv.settings import AGENTENV_USER, Settings

__all__ = [
    "DEFAULT_USER",
    "AccessDenied",
    "Identity",
    "bearer_token",
    "check_host",
    "check_origin",
    "host_name",
    "identify",
    "parse_host",
]

DEFAULT_USER = "default"


class AccessDenied(Refusal):
    """The caller may not use this door; ``status`` is the HTTP status (401/403/400)."""

    status = 403


@dataclass(frozen=True)
class Identity:
    """Who a connection acts as. ``control`` marks the harness's token."""

    user: str
    control: bool = False
    #: A person (``role=human`` in ``AGENTENV_USERS``): the live view is their door.
    human: bool = False
    #: A person of a scope opened on demand (``scopes/open {person}``): that
    #: scope (a fixed user's scope comes from ``AGENTENV_USERS``).
    scope: str | None = None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if any."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _matches(candidate: str, token: str) -> bool:
    return hmac.compare_digest(candidate.encode(), token.encode())


def identify(
    settings: Settings,
    token: str | None,
    user_param: str | None,
    *,
    open_path: bool = False,
    live: bool = False,
) -> Identity:
    """The identity a request acts as; raises :class:`AccessDenied`.

    ``open_path`` marks paths that answer without a token (``/json/version``);
    ``live`` the live view's paths, the only ones a person's token opens.
    """
    found = _identify(settings, token, user_param, open_path)
    if found.human and not live:
        raise AccessDenied(
            "a person's token (role=human) opens the live view only: use /live?token=…, "
            "or an agent's token here"
        )
    return found


def _identify(
    settings: Settings, token: str | None, user_param: str | None, open_path: bool
) -> Identity:
    if token is not None:
        found: Identity | None = None
        # Compare against every token, so timing tells nothing about which
        # one (or how much of one) matched.
        if settings.control_token is not None and _matches(token, settings.control_token):
            found = Identity(AGENTENV_USER, control=True)
        for name, known in settings.users.items():
            if _matches(token, known) and found is None:
                found = Identity(name, human=name in settings.humans)
        if settings.max_scopes:
            opened = opened_of(settings.scopes_file)
            scope = opened.scope_of(token)
            if scope is not None and found is None:
                found = Identity(scope)
            person = opened.person_of(token)
            if person is not None and found is None:
                found = Identity(person[1], human=True, scope=person[0])
        if found is not None:
            return found
        if settings.tokens_required or (
            settings.control_token is not None and not settings.control_open
        ):
            raise AccessDenied(
                "unknown token: use a token from AGENTENV_USERS or scopes/open (as "
                "'Authorization: Bearer <token>' or '?token=<token>'); a closed scope's "
                "token is revoked",
                status=401,
            )
    if settings.tokens_required:
        if open_path:
            return Identity(DEFAULT_USER)
        raise AccessDenied(
            "a token is required: send 'Authorization: Bearer <token>' or add "
            "'?token=<token>' to the URL (tokens are set in AGENTENV_USERS, or given by "
            "scopes/open)",
            status=401,
        )
    if user_param is not None:
        user = user_param.strip()
        if not user or len(user) > 64 or not user.isprintable():
            raise AccessDenied("?user= must be 1 to 64 printable characters", status=400)
        if user == AGENTENV_USER:
            raise AccessDenied(
                f"?user={AGENTENV_USER} is reserved for the computer's own actions; "
                "pick another name",
                status=400,
            )
        return Identity(user)
    return Identity(DEFAULT_USER)


_HOST_NAME = re.compile(r"^[a-z0-9_]([a-z0-9._-]{0,251}[a-z0-9_])?$")


def parse_host(host_header: str) -> tuple[str, int | None]:
    """A ``Host`` header as ``(host, port)``, lowercased, brackets removed;
    :class:`AccessDenied` (400) unless it is exactly ``host[:port]`` with a
    host name, an IPv4 address or a bracketed IPv6 address (no user info,
    no path, no spaces)."""
    text = host_header.strip().lower()
    port: int | None = None
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[1:end], text[end + 1 :]
        if end < 0 or ":" not in host:
            raise _bad_host()
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _bad_host() from None
    else:
        host, sep, rest = text.partition(":")
        rest = sep + rest
        if not _HOST_NAME.match(host):
            raise _bad_host()
    if rest:
        digits = rest[1:]
        if not rest.startswith(":") or not digits.isdigit() or not 0 < int(digits) < 65536:
            raise _bad_host()
        port = int(digits)
    return host, port


def _bad_host() -> AccessDenied:
    # Never echo the header: it is the attacker's text.
    return AccessDenied("malformed Host header: send host[:port]", status=400)


def host_name(host_header: str) -> str:
    """The host part of a ``Host`` header (see :func:`parse_host`)."""
    return parse_host(host_header)[0]


def check_host(settings: Settings, host_header: str | None) -> str:
    """Refuse a ``Host`` that is malformed, or not an IP, ``localhost`` or
    allowed; returns it normalized (``host[:port]``, IPv6 in brackets)."""
    if not host_header:
        raise AccessDenied("a Host header is required", status=400)
    name, port = parse_host(host_header)
    shown = f"[{name}]" if ":" in name else name
    normal = f"{shown}:{port}" if port is not None else shown
    if name == "localhost" or name in settings.allowed_hosts:
        return normal
    try:
        ipaddress.ip_address(name)
    except ValueError:
        raise AccessDenied(
            "Host not allowed: connect by IP address or localhost, or add the "
            "name to AGENTENV_ALLOWED_HOSTS"
        ) from None
    return normal


def check_origin(settings: Settings, origin: str | None, own_host: str | None = None) -> None:
    """Refuse a browser ``Origin`` that is not allowed (none is fine).

    ``own_host``: the ``Host`` of a request to a page's own door (the live
    view's): an ``Origin`` of exactly ``http(s)://<that host>`` is the page
    itself (its same-origin POST sends one) and is taken."""
    if origin is None:
        return
    if own_host is not None and origin.strip().lower() in (
        f"http://{own_host.strip().lower()}",
        f"https://{own_host.strip().lower()}",
    ):
        return
    if "*" in settings.allowed_origins or origin.strip().lower() in settings.allowed_origins:
        return
    raise AccessDenied(
        "Origin not allowed: browser pages may not drive this computer unless "
        "their origin is in AGENTENV_ALLOWED_ORIGINS"
    )
