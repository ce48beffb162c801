"""Secrets out of every value before it reaches the log (docs/spec.md section 1).

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
  ``Page.setDocumentContent`` html): withheld, length kept. Code an agent
  runs is kept, redacted (past 2,000 characters its first part, length and
  SHA-256: :mod:`agentenv.log.cdp_params`).
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
- Values under keys that name a secret: withheld. One key rule for URLs and
  every JSON object (:func:`~agentenv.log.secret_names.credential_key`: ``password2``,
  ``passwordConfirmation``, ``pass``, ``passwordHash``, ``credentials``,
  ``client_assertion``, ``pin``, ``otp``, ``cvc``, ``card_number``, in any
  spelling); a command's params and arguments set aside the protocols' own
  words (:func:`secret_field`: a keyboard's ``key`` and ``code``,
  ``sessionId``). A key holding a secret's shape is itself written redacted.
- In any text (errors, expressions): a key that names a secret and its
  value, as JSON, a repr, a script or GraphQL write one (``"pass": "…"``,
  ``pin: 1234``, escaped inside another string too): the value replaced.
- Card numbers (:func:`card_number`: 13 to 19 digits, a card network's
  first digit, Luhn's check digit) in texts, arguments and typed text:
  replaced. The relay's walk of every command's params stays lean: there a
  string is read for cards only when another shape sends it to the text
  rules (``redact(value, thorough=False)`` and :func:`redact_mapping`).
- JWT-shaped strings lose their signature part.
- Long strings are cut to 2,000 characters, after redaction, as
  ``{"cut": first_2000, "length": N}``.

Typed text in password fields is the relay's decision (it asks the page);
:func:`withheld` builds the marker it writes. This module redacts text and
values; the rules of each CDP method's params are :mod:`agentenv.log.cdp_params`;
request and response bodies (the network log's) are :mod:`agentenv.log.bodies`,
by these rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentenv.log.secret_names import (
    credential_key,
    secret_field,
    secret_header,
    secret_header_value,
)

__all__ = [
    "CUT_AT",
    "REDACTED",
    "card_number",
    "cut",
    "redact",
    "redact_cards",
    "redact_cut",
    "redact_mapping",
    "redact_text",
    "withheld",
]

REDACTED = "REDACTED"
CUT_AT = 2000

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
# The fragments are grouped by their first letter: the regex engine tries
# each branch at every character of a key, so fewer branches read faster
# (half the time of the plain list, with more fragments in it).
_CREDENTIAL_PAIR = re.compile(
    rf"{_PAIR_START}(?>{_KEY_CHAR}*?"
    r"(?:a(?:uth|ssert)|c(?:ode|red|ard|[cvs])|jwt|key|mfa|otp|p(?:ass|w|in)"
    r"|s(?:ess|i[dg]|ecret|tate|aml|sn)|t(?:oken|icket)|verifier|x-(?:amz|goog)-|%|\[))"
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

# A key and its colon in text (JSON, a repr, a script, GraphQL), its quotes
# perhaps escaped (JSON inside a JSON string). The look-behind starts a key
# only where one can start, so each run of key characters is read once.
_TEXT_PAIR = re.compile(
    r"(?<![\w$.\-\[\]\\])(\\*[\"']?)([A-Za-z_$][\w$.\-\[\]]{0,63})(\\*[\"']?)[ \t]*:[ \t]*"
)
#: Where a value written without quotes ends.
_BARE_END = re.compile(r"[\s,;)}\]&<>\"']")
#: A run of 13 to 19 digits, single spaces or dashes between them.
_CARD_RUN = re.compile(r"(?<![\d])\d(?:[ -]?\d){12,18}(?![\d])")

_COOKIE_HINTS = ("domain", "url", "path", "expires", "httpOnly", "secure", "sameSite", "size")


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


def _quoted_end(text: str, start: int) -> int:
    """Where a quoted value that opens at ``start`` ends (past its closing
    quote), read as JSON, a script or a Python repr write one, and as they
    write one inside another's string: ``\\"`` opens one that ``\\"``
    closes. A value never closed runs to the text's end."""
    opening = start
    while text[opening] == "\\":
        opening += 1
    quote, depth, at = text[opening], opening - start, opening + 1
    while True:
        found = text.find(quote, at)
        if found < 0:
            return len(text)
        slashes = 0
        while text[found - 1 - slashes] == "\\":
            slashes += 1
        if (slashes == depth) if depth else slashes % 2 == 0:
            return found + 1
        at = found + 1


def _redact_text_pairs(text: str) -> str:
    """Each value of a key that names a secret, written as JSON, a repr, a
    script or GraphQL writes one (``"password": "…"``, ``pin: 1234``),
    replaced; quotes and the key stay."""
    parts: list[str] = []
    last = 0
    for found in _TEXT_PAIR.finditer(text):
        start = found.end()
        if start < last or start >= len(text) or not secret_field(found.group(2)):
            continue
        lead = start
        while lead < len(text) and text[lead] == "\\":
            lead += 1
        if lead < len(text) and text[lead] in "\"'":
            end = _quoted_end(text, start)
            closing = end - 1 if end <= len(text) and text[end - 1] == text[lead] else end
            while closing > lead + 1 and text[closing - 1] == "\\":
                closing -= 1
            parts.append(text[last : lead + 1])
            parts.append(REDACTED)
            parts.append(text[closing:end])
        else:
            stop = _BARE_END.search(text, start)
            end = stop.start() if stop is not None else len(text)
            if end == start:
                continue
            parts.append(text[last:start])
            parts.append(REDACTED)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _luhn(digits: str) -> bool:
    total = 0
    for n, char in enumerate(reversed(digits)):
        d = ord(char) - 48
        if n % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_number(digits: str) -> bool:
    """Whether a run of digits (spaces and dashes between them set aside) is
    a payment card's number: 13 to 19 digits, a card network's first digit
    (2 to 6), and Luhn's check digit. A time in milliseconds starts with 1."""
    digits = digits.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


def redact_cards(text: str) -> str:
    """``text`` with every card number in it replaced."""
    if len(text) < 13:
        return text
    return _CARD_RUN.sub(lambda m: REDACTED if card_number(m.group(0)) else m.group(0), text)


def _userinfo(text: str) -> str:
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", text)
    return _USER_ONLY.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def redact_text(text: str) -> str:
    """``text`` with URL credentials, the values of keys that name secrets
    (``"password": "…"``), card numbers and JWT signatures replaced."""
    return redact_cards(_redact_shapes(text))


def _redact_shapes(text: str) -> str:
    """:func:`redact_text` but cards: what a command's params are read for on
    the relay's path (a card is looked for in typed text and arguments)."""
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
    if ":" in text and ('"' in text or "'" in text or "\\" in text or " " in text):
        text = _redact_text_pairs(text)
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


def _shapes_cut(text: str) -> str | dict[str, Any]:
    """:func:`redact_cut` with :func:`_redact_shapes` (a command's params)."""
    if len(text) <= CUT_AT:
        return _redact_shapes(text)
    kept = _redact_shapes(text[: CUT_AT + REDACT_MARGIN])
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


_PLAIN, _HEADERS, _SECRET, _RENAMED = 0, 1, 2, 3


#: Each key's kind, learnt once (a dict read costs half an lru_cache call).
_KEY_KINDS: dict[str, int] = {}


def _key_kind(key: str) -> int:
    """A key's kind, learnt into ``_KEY_KINDS`` (the walk reads that first):
    its value's rule, or that the key itself holds a secret's shape."""
    if len(_KEY_KINDS) > 4096:  # a client inventing keys: stay bounded
        _KEY_KINDS.clear()
    if key.lower().endswith("headers"):
        kind = _HEADERS
    elif secret_field(key):
        kind = _SECRET
    elif not _plain_text(key) and redact_text(key) != key:
        kind = _RENAMED
    else:
        kind = _PLAIN
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
        and (":" not in value or ('"' not in value and "'" not in value))
    )


def _card_int(value: int) -> bool:
    return not -(10**12) < value < 10**12 and card_number(str(abs(value)))


def redact(value: Any, *, thorough: bool = True) -> Any:
    """A copy of a JSON value with every secret shape replaced. ``thorough``
    (the default: an op's or a tool's arguments, a header) also reads every
    string and number for a card's; a CDP command's params
    (:func:`redact_mapping`, on the relay's path for every command) are not,
    but for typed text (:mod:`agentenv.log.cdp_params`)."""
    out = _redact(value)
    return _cards(out) if thorough else out


def _redact(value: Any) -> Any:
    # Exact type checks first: this runs on every acting command, and an
    # isinstance against the Mapping ABC costs more than the rest together.
    kind_of = type(value)
    if kind_of is str or (kind_of is not dict and isinstance(value, str)):
        return value if _plain_text(value) else _shapes_cut(value)
    if kind_of is dict or isinstance(value, Mapping):
        return redact_mapping(value)
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def _cards(value: Any) -> Any:
    """Card numbers out of an already redacted value (a second walk: the
    params' walk stays lean)."""
    kind_of = type(value)
    if kind_of is str:
        return redact_cards(value) if len(value) >= 13 else value
    if kind_of is dict:
        if "withheld" in value:
            return value
        return {k: _cards(v) for k, v in value.items()}
    if kind_of is list:
        return [_cards(v) for v in value]
    if kind_of is int and _card_int(value):
        return withheld("card", str(value))
    return value


def _renamed(key: str, out: Mapping[str, Any]) -> str:
    """A key that holds a secret's shape, redacted (numbered when two come
    out alike, so none is lost)."""
    name = redact_text(key)
    n = 2
    while name in out:
        name = f"{redact_text(key)}#{n}"
        n += 1
    return name


def redact_mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`redact` of a JSON object, not thorough (a command's params:
    its caller knows the type, so the walk starts here)."""
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
                    and (":" not in item or ('"' not in item and "'" not in item))
                    else _shapes_cut(item)
                )
            elif leaf in _SCALARS:
                out[key] = item
            elif leaf is dict:
                out[key] = redact_mapping(item)
            elif isinstance(item, str | Mapping | list):
                out[key] = _redact(item)
            else:
                out[key] = item
        elif cookie and key == "value":
            out[key] = withheld("cookie", item)
        elif kind == _HEADERS:
            out[key] = _headers(item)
        elif kind == _SECRET and item not in (None, "", True, False):
            out[key] = withheld("secret", item)
        elif kind == _RENAMED:
            out[_renamed(key, out)] = _redact(item)
        elif isinstance(item, str | Mapping | list):
            out[key] = _redact(item)
        else:
            out[key] = item
    return out


#: JSON's scalars other than strings: nothing in them to redact.
_SCALARS = frozenset({int, float, bool, type(None)})
