"""Secrets out of every value before it reaches the log (SPEC.md section 1).

Pure functions. What goes:

- URL credentials, in any string at any depth (params, args, errors): the
  values of credential query keys (also in fragments, as OAuth's implicit
  flow puts them; numbered, nested or holding a secret word as a part:
  ``password1``, ``user[password]``, ``password_confirm``; and a pair
  percent-encoded inside another's value) become ``REDACTED``, and so does a
  user info with no password long enough to be a token, and a password in user info
  (in every form Chromium's URL parser reads as user info: backslashes,
  missing slashes, tabs and newlines);
  scheme, host, path and the keys stay.
- Cookie values: a cookie object keeps its name, domain and flags; its value
  becomes ``{"withheld": "cookie", "length": N}`` (every cookie a
  ``setCookie(s)`` command sets, whatever fields it carries).
- Headers ``Authorization``, ``Cookie``, ``Set-Cookie``,
  ``Proxy-Authorization`` and any named like a secret (``…-Token``,
  ``…-Key``, ``…-Secret``, ``Auth…``, ``…-Session-Id``, ``…-Password``):
  values withheld, whitespace around the name no disguise.
- Bodies and page content (``Fetch.fulfillRequest`` body and binary
  headers, ``Fetch.continueRequest`` post data,
  ``Page.setDocumentContent`` html, ``Runtime.evaluate`` expressions over
  2 KB): withheld, length kept.
- A ``value`` attribute set through ``DOM.setAttributeValue``, and the text
  of ``DOM.setAttributesAsText``: withheld as a password, since the field
  they set may be one.
- What the protocol table now lets agents send that holds secrets:
  ``DOMStorage.setDOMStorageItem`` values, ``DOM.setOuterHTML`` and
  ``DOM.setNodeValue`` (a field's text), a virtual authenticator's
  credential (``WebAuthn.addCredential``: its private key), autofill cards
  and addresses, a virtual wallet's response: withheld.
- ``Runtime.callFunctionOn`` argument strings: withheld, length kept.
  Playwright's ``fill()`` hands the text to its injected script as an
  argument before it types it, password fields included, and nothing at that
  point says which field it is for.
- Values under keys that name a secret (``password``, ``client_secret``,
  ``*_token``, ...): withheld.
- JWT-shaped strings lose their signature part.
- Long strings are cut to 2,000 characters, after redaction, as
  ``{"cut": first_2000, "length": N}``.

Typed text in password fields is the relay's decision (it asks the page);
:func:`withheld` builds the marker it writes. This module redacts text and
values; the rules of each CDP method's params are :mod:`agentenv.log.cdp_params`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

__all__ = [
    "CUT_AT",
    "EXPRESSION_LIMIT",
    "REDACTED",
    "credential_key",
    "cut",
    "redact",
    "redact_cut",
    "redact_mapping",
    "redact_text",
    "secret_header",
    "secret_header_value",
    "withheld",
]

REDACTED = "REDACTED"
CUT_AT = 2000
EXPRESSION_LIMIT = 2048

_CREDENTIAL_KEYS = frozenset(
    k.lower()
    for k in [
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "key",
        "api_key",
        "apikey",
        "code",
        "code_verifier",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "secret",
        "session",
        "sessionid",
        "sid",
        "sig",
        "signature",
        "auth",
        "authorization",
        "credential",
        "state",
        "SAMLRequest",
        "SAMLResponse",
        "pass",
        "passphrase",
        "passcode",
        "otp",
        "jwt",
        "ticket",
        "jsessionid",
        "phpsessid",
        "sessid",
        "auth_code",
        "authorization_code",
        "device_code",
        "private_key",
        "access_key",
        "secret_key",
        "pin",
        "pw",
        "totp",
        "mfa_code",
        "otp_code",
        "verification_code",
        "x_auth",
    ]
)
#: The keys above, and the key read, with case, "-" and "_" set aside:
#: accessToken, access-token and ACCESS_TOKEN are one key.
_CREDENTIAL_COMPACT = frozenset(k.replace("_", "") for k in _CREDENTIAL_KEYS)
#: Words that make any key holding them a credential's.
_STRONG_PARTS = frozenset({"password", "passwd", "passphrase", "pwd", "secret"})
_CREDENTIAL_PREFIXES = ("x_amz_", "x_goog_")
_CREDENTIAL_SUFFIXES = ("_token", "_secret", "_key")
#: Endings of a compacted key that name a credential whatever comes before
#: (clientSecret, authToken, oauth_verifier, newPassword, PHPSESSID).
_CREDENTIAL_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "verifier",
    "sessid",
    "sessionid",
    "signature",
)
#: A lower-case letter or digit before a capital: a camelCase word's start.
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
#: What splits a bracketed or dotted key: user[password], data.token, token[].
_KEY_PARTS = re.compile(r"[\[\].]+")

# Keys of JSON objects whose values are secrets. Narrower than the URL list:
# CDP uses ``key`` and ``code`` for keyboard keys, which are not secrets.
_SECRET_FIELDS = frozenset(
    [
        "password",
        "passwd",
        "pwd",
        "secret",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "client_secret",
        "api_key",
        "apikey",
        "authorization",
        "credential",
        "credentials",
        "proxy_authorization",
        "secret_access_key",
        "session_token",
        "passphrase",
        "passcode",
        # What a prompt() is answered with (MCP's browser_handle_dialog too).
        "prompt_text",
    ]
)
_SECRET_FIELD_SUFFIXES = ("_token", "_secret", "_password", "accesskey", "secretkey")

_SECRET_HEADERS = frozenset({"authorization", "cookie", "set-cookie", "proxy-authorization"})
# A header named like a secret: a secret's word anywhere in the name
# (X-Api-Key, Private-Token, Authentication, X-Session-Id, X-Hub-Signature-256,
# X-Csrf-Token, Cookie2, X-Secret-Value, X-Password-Hash, X-Passcode), or a
# short one as a word of its own (X-Access-Key-Id, X-Api-Keyid, X-Pass,
# X-Pwd, X-Otp, Sid, X-Sig, X-GitHub-PAT, X-MFA).
_SECRET_HEADER_NAME = re.compile(
    r"token|secret|passw|passcode|passphrase|signature|cookie|csrf|xsrf|credential|auth"
    r"|session|apikey|jwt|totp"
    r"|(?:^|[-_\s])(?:[a-z]*keys?(?:id)?|sig|pass|pwd|pw|pin|otp|mfa|pat|sid)(?:$|[-_\s\d])",
    re.IGNORECASE,
)
#: A header value that is a credential whatever the header's name: an
#: authorization scheme and its credentials (Bearer, Basic, GitHub's "token",
#: AWS signatures, Okta's SSWS).
_SECRET_VALUE = re.compile(
    r"\s*(?:bearer|basic|digest|negotiate|ntlm|token|oauth|aws|ssws|aws4-hmac-sha\d+)\s",
    re.IGNORECASE,
)

#: Where a query pair starts: after ? & ; # or their percent-encoded forms
#: (a URL inside another's query: ?next=/cb%3Fcode=…, ?r=https://b/cb%26code=…).
_ENCODED_SEP = r"%3[fFbB]|%2[36]"
_PAIR_START = rf"(?:^|[?&;#]|{_ENCODED_SEP})"
#: A key's character: none of a pair's separators, encoded ones included, so
#: every key run stops at the next pair's start (each is read once: linear).
_KEY_CHAR = rf"(?:(?!{_ENCODED_SEP})[^=&#?;\s\"'<>])"
# A pair whose key holds a fragment of a credential key's, a "%" or a "[":
# the cheap first look; credential_key then decides on each pair
# (_redact_pairs). The atomic groups keep it linear: without them a long key
# run holding many fragments and no "=" is retried from each (quadratic).
_CREDENTIAL_PAIR = re.compile(
    rf"{_PAIR_START}(?>{_KEY_CHAR}*?"
    r"(?:token|secret|passw|pwd|pass|pw|key|code|sess|sid|sig|auth|credential|state|ticket"
    r"|otp|jwt|verifier|saml|pin|mfa|x-amz-|x-goog-|%|\[))"
    rf"(?>{_KEY_CHAR}*)=",
    re.IGNORECASE,
)
# Any query pair; tried only once _CREDENTIAL_PAIR found one worth redacting.
# A value runs to the next separator, or to a "?" (or an encoded separator)
# that starts another pair: an unencoded URL in a query, ?next=/cb?code=SECRET.
# The look-ahead's key takes no "%", so it stops at the next one (linear).
_ANY_PAIR = re.compile(
    rf"({_PAIR_START})((?>{_KEY_CHAR}+))="
    rf"((?:(?!(?:\?|{_ENCODED_SEP})[^=&#?;%\s\"'<>]+=)[^&#;\s\"'<>])*)"
)
#: Where a credential's value ends whatever it holds: "?" and "=" may be in it.
_VALUE_END = re.compile(r"[&#;\s\"'<>]")
# A URL's user info, read as Chromium's URL parser reads it: after any scheme
# and two slashes, or after http(s), ws(s) or ftp and any number of slashes
# (none included: "http:u:p@h" is http://u:p@h); a backslash counts as a
# slash. The password runs to the last "@" of the authority (a password may
# hold one). Tabs and newlines, which the parser drops, are seen to by
# redact_text.
_AUTHORITY = (
    r"(?<![A-Za-z0-9+.\-])((?:[A-Za-z][A-Za-z0-9+.\-]*:[/\\]{2}|(?:https?|wss?|ftp):[/\\]*))"
)
_USERINFO = re.compile(
    _AUTHORITY + r"([^/\\?#@\s:\"'<>]*):([^/\\?#\s\"'<>]*)@",
    re.IGNORECASE,
)
# User info with no password that is long enough to be a token or an API key
# (https://ghp_…@github.com/): the user part goes. Short names (git@) stay.
_USER_ONLY = re.compile(_AUTHORITY + r"([^/\\?#@\s:\"'<>]{16,})@", re.IGNORECASE)
#: What Chromium's URL parser removes from anywhere in a URL before reading it.
_DROPPED = str.maketrans("", "", "\t\n\r")
# A URL inside another's query, percent-encoded: ?next=https%3A%2F%2Fb%2F%3Fcode%3DSECRET
# Also at a value's start or after an encoded space: ?q=token%3DSECRET.
_ENCODED_PAIR = re.compile(
    r"(%3[fF]|%26|%23|%3[bB]|%20|\+|=)([^=&#?;%+\s\"'<>]+)(%3[dD])"
    r"((?:(?!%26|%23|%3[bB])[^&#;\s\"'<>])*)"
)
# Lookbehinds anchor each match where a scheme or a token can start: without
# them the search restarts at every position of a long run (quadratic time).
_JWT = re.compile(
    r"(?<![A-Za-z0-9_\-])(eyJ[A-Za-z0-9_\-]{2,}\.eyJ[A-Za-z0-9_\-]{2,})\.[A-Za-z0-9_\-]{2,}"
)

_COOKIE_HINTS = ("domain", "url", "path", "expires", "httpOnly", "secure", "sameSite", "size")


@functools.lru_cache(maxsize=4096)
def credential_key(name: str) -> bool:
    """Whether a URL query key carries a credential: in any case, camelCase,
    with "-" or "_", percent-encoded, or as a part of a bracketed or dotted
    key (``user[password]``)."""
    if "%" in name:
        name = unquote(name)
    if "[" in name or "]" in name or "." in name:
        return any(credential_key(part) for part in _KEY_PARTS.split(name) if part)
    n = _CAMEL.sub(r"\1_\2", name).lower().replace("-", "_")
    # Numbered: password1, token_2, pass2.
    n = n.rstrip("0123456789_") or n
    compact = n.replace("_", "")
    return (
        compact in _CREDENTIAL_COMPACT
        or n.startswith(_CREDENTIAL_PREFIXES)
        or n.endswith(_CREDENTIAL_SUFFIXES)
        # A secret word as any part: password_confirm, passwordConfirm.
        or not _STRONG_PARTS.isdisjoint(n.split("_"))
        or compact.endswith(_CREDENTIAL_ENDINGS)
    )


def _secret_field(name: str) -> bool:
    n = _CAMEL.sub(r"\1_\2", name).lower().replace("-", "_")
    return n in _SECRET_FIELDS or n.endswith(_SECRET_FIELD_SUFFIXES)


def secret_header(name: str) -> bool:
    """Whether a header's value must be withheld (whitespace around the name
    is no disguise)."""
    name = name.strip()
    return name.lower() in _SECRET_HEADERS or bool(_SECRET_HEADER_NAME.search(name))


def secret_header_value(value: object) -> bool:
    """Whether a header's value is a credential whatever its name
    (``Bearer …``, ``Basic …``, an AWS signature)."""
    return isinstance(value, str) and _SECRET_VALUE.match(value[:64]) is not None


def withheld(kind: str, value: object) -> dict[str, Any]:
    """The marker written in place of a secret: its kind and length."""
    length = len(value) if isinstance(value, str | bytes | list | dict) else None
    out: dict[str, Any] = {"withheld": kind}
    if length is not None:
        out["length"] = length
    return out


def _redact_pairs(text: str) -> str:
    """Each credential's value replaced, up to where a value surely ends (a
    "?" or "=" inside it is no end): pairs found inside it are skipped."""
    parts: list[str] = []
    last = 0
    for found in _ANY_PAIR.finditer(text):
        if found.start(3) < last or not credential_key(found.group(2)):
            continue
        parts.append(text[last : found.start(3)])
        parts.append(REDACTED)
        end = _VALUE_END.search(text, found.start(3))
        last = end.start() if end is not None else len(text)
    parts.append(text[last:])
    return "".join(parts)


def _userinfo(text: str) -> str:
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", text)
    return _USER_ONLY.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def redact_text(text: str) -> str:
    """``text`` with URL credentials and JWT signatures replaced."""
    if "@" in text and ":" in text:
        text = _userinfo(text)
        if "\t" in text or "\n" in text or "\r" in text:
            # Chromium drops tabs and newlines from a URL before reading it:
            # a password split by them is one. Such a text is written as the
            # parser reads it, without them, when that shows one more.
            joined = text.translate(_DROPPED)
            if any(m.group(3) != REDACTED for m in _USERINFO.finditer(joined)):
                text = _userinfo(joined)
    if "=" in text and _CREDENTIAL_PAIR.search(text) is not None:
        text = _redact_pairs(text)
    if "%3" in text and _ENCODED_PAIR.search(text) is not None:
        text = _ENCODED_PAIR.sub(
            lambda m: (
                m.group(0)
                if not credential_key(m.group(2))
                else f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}"
            ),
            text,
        )
    if "eyJ" in text:
        text = _JWT.sub(lambda m: f"{m.group(1)}.{REDACTED}", text)
    return text


#: How much past the cut a long string is read for redaction: enough to hold
#: a credential that starts in the kept part (a token, a signed query).
REDACT_MARGIN = 8192


def cut(text: str) -> str | dict[str, Any]:
    """``text``, or its first 2,000 characters with the full length."""
    if len(text) <= CUT_AT:
        return text
    return {"cut": text[:CUT_AT], "length": len(text)}


def redact_cut(text: str) -> str | dict[str, Any]:
    """``text`` redacted and cut. Only what is kept, and a margin past it, is
    read: redacting a 100 MB string whole would hold up the relay's loop."""
    if len(text) <= CUT_AT:
        return redact_text(text)
    kept = redact_text(text[: CUT_AT + REDACT_MARGIN])
    return {"cut": kept[:CUT_AT], "length": len(text)}


def _headers(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            k: withheld("header", v)
            if secret_header(str(k)) or secret_header_value(v)
            else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, Mapping) and (
                secret_header(str(item.get("name", ""))) or secret_header_value(item.get("value"))
            ):
                kept = {k: redact(v) for k, v in item.items() if k != "value"}
                kept["value"] = withheld("header", item.get("value", ""))
                out.append(kept)
            else:
                out.append(redact(item))
        return out
    return redact(value)


def _is_cookie(value: Mapping[str, Any]) -> bool:
    return "name" in value and "value" in value and any(h in value for h in _COOKIE_HINTS)


_PLAIN, _HEADERS, _SECRET = 0, 1, 2


#: Each key's kind, learnt once (a dict read costs half an lru_cache call).
_KEY_KINDS: dict[str, int] = {}


def _key_kind(key: str) -> int:
    """A key's kind, learnt into ``_KEY_KINDS`` (the walk reads that first)."""
    if len(_KEY_KINDS) > 4096:  # a client inventing keys: stay bounded
        _KEY_KINDS.clear()
    if key.lower().endswith("headers"):
        kind = _HEADERS
    else:
        kind = _SECRET if _secret_field(key) else _PLAIN
    _KEY_KINDS[key] = kind
    return kind


def _plain_text(value: str) -> bool:
    """A string with no secret shape in it: the common case, kept cheap."""
    return (
        len(value) <= CUT_AT
        and "=" not in value
        and "@" not in value
        and "eyJ" not in value
        and "%3" not in value
    )


def redact(value: Any) -> Any:
    """A copy of a JSON value with every secret shape replaced."""
    # Exact type checks first: this runs on every acting command, and an
    # isinstance against the Mapping ABC costs more than the rest together.
    kind_of = type(value)
    if kind_of is str or (kind_of is not dict and isinstance(value, str)):
        return value if _plain_text(value) else redact_cut(value)
    if kind_of is dict or isinstance(value, Mapping):
        return redact_mapping(value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`redact` of a JSON object (a command's params: its caller knows
    the type, so the walk starts here)."""
    cookie = "value" in value and "name" in value and _is_cookie(value)
    out: dict[str, Any] = {}
    kinds = _KEY_KINDS
    for key, item in value.items():
        kind = kinds.get(key)
        if kind is None:
            kind = _key_kind(key)
        if kind == _PLAIN and not cookie:
            leaf = type(item)
            if leaf is str:  # _plain_text, inlined
                out[key] = (
                    item
                    if len(item) <= CUT_AT
                    and "=" not in item
                    and "@" not in item
                    and "eyJ" not in item
                    and "%3" not in item
                    else redact_cut(item)
                )
            elif leaf in _SCALARS:
                out[key] = item
            elif leaf is dict:
                out[key] = redact_mapping(item)
            elif isinstance(item, str | Mapping | list):
                out[key] = redact(item)
            else:
                out[key] = item
        elif cookie and key == "value":
            out[key] = withheld("cookie", item)
        elif kind == _HEADERS:
            out[key] = _headers(item)
        elif kind == _SECRET and item not in (None, "", True, False):
            out[key] = withheld("secret", item)
        elif isinstance(item, str | Mapping | list):
            out[key] = redact(item)
        else:
            out[key] = item
    return out


#: JSON's scalars other than strings: nothing in them to redact.
_SCALARS = frozenset({int, float, bool, type(None)})
