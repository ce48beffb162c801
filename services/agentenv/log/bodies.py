"""Request and response bodies as the record keeps them (docs/spec.md section 7,
``har``), with the log's rules (:mod:`agentenv.log.redact`): one key rule
(:func:`~agentenv.log.secret_names.credential_key`), one text rule
(:func:`~agentenv.log.redact.redact_text`), one card rule.

**What a page sends is withheld unless shown harmless.** A body is read as
JSON whatever its type says (``fetch`` sends a string as ``text/plain``), then
as a form (``application/x-www-form-urlencoded``, or ``text/plain`` that reads
as one: ``a=1&b=2``, or a ``text/plain`` form's ``name=value`` lines), then as
a GraphQL document. Its structure and keys are kept (a key is itself read by
the text rule: a key holding a credential or a card number is written
redacted). ``null``, ``true`` and ``false`` are kept. A string or a number is
kept only when all of these hold:

- a key names it: an array's items and a body that is one value are
  withheld (no key says what they are: JSON-RPC's positional ``params``);
- the key is not a credential's: every key :func:`credential_key` names, in
  any spelling (``password1``, ``password_confirmation``,
  ``passwordConfirmation``, ``user[password]``, ``pass``, ``passwordHash``),
  cards' (``card_number``, ``cvc``, ``cvv``), one-time codes and PINs
  (``otp``, ``pin``, ``code``): its value is withheld whole;
- it is not an argument of a call: JSON-RPC's ``params`` and GraphQL's
  ``variables`` hold what a function is given, which its names do not show
  harmless: every string and number under them is withheld;
- it has no secret's shape: a card number (13 to 19 digits passing Luhn's
  check) is replaced, and so is every credential the text rule finds (URL
  credentials, ``"password": "…"``, ``pin: 1234``, a JWT's signature); a
  string that is a JSON document is read as one, by these rules; a GraphQL
  document keeps its shape and loses every literal (strings, numbers, and a
  bare value given to an argument named like a credential).

Withheld values become ``{"withheld": kind, "length": N}``: ``value`` (no key
names it), ``argument``, ``secret``, ``card``, ``password``. A form writes
``REDACTED`` in place of a value. A multipart body is kept as its fields'
names; any other body a page sends (XML, binary, text that is neither JSON
nor a form) is withheld whole, with its length.

**Typed text.** A body sent while a password field of its page held text the
relay withheld (``typed``: the network log decides when, see
:mod:`agentenv.recorder.har`) keeps its structure and keys only: every
string and number in it is withheld (``password``), and so is the answer to
it, which may echo it.

**What a server answers** keeps its text: JSON with the values of
credentials' keys withheld and the text rule on every string; anything else
through the text rule.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, quote_plus

from agentenv.log.redact import (
    REDACTED,
    card_number,
    redact_cards,
    redact_text,
    withheld,
)
from agentenv.log.secret_names import credential_key

__all__ = ["answered_body", "graphql", "sent_body", "sent_value"]

_FORM = "application/x-www-form-urlencoded"
#: How deep JSON inside a string (inside a string...) is read as JSON.
_NESTED = 3
#: The start of a GraphQL document: a selection set, or an operation or
#: fragment's keyword (comments before it).
_GRAPHQL = re.compile(
    r"\s*(?:#[^\n]*\n\s*)*(?:\{|(?:query|mutation|subscription|fragment)\b[^{}]{0,4096}\{)"
)
# A GraphQL document's literals: block strings, strings (one never closed runs
# to the end), comments, numbers, and a bare name given to an argument
# (groups 1-3: the argument, its colon, the value).
_GRAPHQL_TOKEN = re.compile(
    r'"""(?:[^"\\]|\\[\s\S]?|"(?!""))*(?:"""|\Z)'
    r'|"(?:[^"\\]|\\[\s\S]?)*(?:"|\Z)'
    r"|#[^\n]*"
    r"|(?<![\w$.])-?\d[\d.eE+-]*"
    r"|\b([_A-Za-z]\w*)(\s*:\s*)([_A-Za-z]\w*)"
)
#: Bare GraphQL values that carry nothing: kept after any argument.
_GRAPHQL_KEPT = frozenset({"true", "false", "null"})


def graphql(document: str) -> str:
    """A GraphQL document with its shape kept and every literal replaced
    (see the module's text)."""

    def token(found: re.Match[str]) -> str:
        text = found.group(0)
        if text.startswith('"'):
            return f'"{REDACTED}"'
        if text.startswith("#"):
            return "#"
        if found.group(1) is None:
            return REDACTED  # a number
        name, colon, value = found.group(1), found.group(2), found.group(3)
        if value in _GRAPHQL_KEPT or not credential_key(name):
            return text
        return f"{name}{colon}{REDACTED}"

    return _GRAPHQL_TOKEN.sub(token, document)


def _key(key: str, out: dict[str, Any]) -> str:
    """A key as written: the text and card rules on it, numbered when two
    come out alike (so none is lost)."""
    name = redact_cards(redact_text(key))
    if name == key and key not in out:
        return key
    base, n = name, 2
    while name in out:
        name = f"{base}#{n}"
        n += 1
    return name


def _call(value: dict[str, Any]) -> str | None:
    """The key of a call's arguments in an object that is a call: JSON-RPC's
    ``params``, GraphQL's ``variables``."""
    if "params" in value and ("jsonrpc" in value or isinstance(value.get("method"), str)):
        return "params"
    if "variables" in value and (
        "query" in value or "operationName" in value or "extensions" in value
    ):
        return "variables"
    return None


def _something(value: Any) -> bool:
    """Whether a value carries more than its kind (an empty string, null,
    true and false are kept even under a credential's key)."""
    return value is not None and not isinstance(value, bool) and value != ""


def _secret(value: Any) -> dict[str, Any]:
    return withheld("secret", value if isinstance(value, str | list | dict) else str(value))


def _number(value: int | float, why: str | None) -> Any:
    if why is not None:
        return withheld(why, str(value))
    if isinstance(value, int) and not -(10**12) < value < 10**12 and card_number(str(abs(value))):
        return withheld("card", str(value))
    return value


def sent_value(value: Any, *, typed: bool = False) -> Any:
    """A JSON value a page sent, by the module's rules (``typed``: every
    string and number withheld)."""
    return _sent(value, "password" if typed else "value", 0)


def _sent(value: Any, why: str | None, depth: int) -> Any:
    """``why``: why a string or number here is withheld (no key names it, a
    call's argument, typed text), or None where a harmless key names it."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, dict):
        call = _call(value)
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _key(str(key), out)
            if credential_key(str(key)) and _something(item):
                out[name] = _secret(item)
            elif why == "password":
                out[name] = _sent(item, why, depth)
            elif key == call:
                out[name] = _sent(item, "argument", depth)
            else:
                out[name] = _sent(item, None if why != "argument" else why, depth)
        return out
    if isinstance(value, list):
        kept_why = why if why is not None else "value"
        return [_sent(item, kept_why, depth) for item in value]
    if isinstance(value, str):
        return withheld(why, value) if why is not None else _sent_text(value, depth)
    if isinstance(value, int | float):
        return _number(value, why)
    return withheld(why or "value", str(value))


def _sent_text(text: str, depth: int) -> Any:
    """A string a harmless key names: JSON in it read as JSON, a GraphQL
    document's literals out, the text and card rules."""
    opening = text.lstrip()[:1]
    if opening in ("{", "[") and depth < _NESTED:
        try:
            inner = json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            return json.dumps(_sent(inner, None, depth + 1), ensure_ascii=False)
    if opening in ("{", "q", "m", "s", "f", "#") and _GRAPHQL.match(text) is not None:
        return graphql(text)
    return redact_text(text)


def _form_pairs(text: str, kind: str) -> list[tuple[str, str]] | None:
    """A form's pairs, or None when the text does not read as one. A
    ``text/plain`` form sends ``name=value`` lines, unencoded."""
    if "=" not in text:
        return None
    if kind.startswith("text/plain") and ("\r\n" in text or text.endswith("\n")):
        lines = [line for line in text.replace("\r\n", "\n").split("\n") if line]
        if all("=" in line for line in lines):
            return [(k, v) for k, _, v in (line.partition("=") for line in lines)]
        return None
    if any(c in text for c in '\n{}"<>') and not kind.startswith(_FORM):
        return None
    try:
        return parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        return None if not kind.startswith(_FORM) else parse_qsl(text, keep_blank_values=True)


def _form(pairs: list[tuple[str, str]], typed: bool) -> str:
    written: list[str] = []
    for key, value in pairs:
        name = redact_cards(redact_text(key))  # a form may repeat a key
        if typed or credential_key(key):
            kept = REDACTED
        else:
            found = _sent_text(value, 0)
            kept = found if isinstance(found, str) else REDACTED
        written.append(f"{quote_plus(name, safe='[]')}={quote_plus(kept, safe='')}")
    return "&".join(written)


def sent_body(text: str, kind: str, *, typed: bool = False, length: int | None = None) -> str:
    """A request's body as the record keeps it (``text``: as much as is kept;
    ``length``: the whole body's, when more was sent)."""
    kind = kind.strip().lower()
    whole = len(text) if length is None else length
    if kind.startswith("multipart/"):
        names = re.findall(r'(?im)^content-disposition:[^\n]*?\bname="([^"]{0,200})"', text)
        return json.dumps({"fields": names, "withheld": "form", "length": whole})
    try:
        return json.dumps(sent_value(json.loads(text), typed=typed), ensure_ascii=False)
    except (ValueError, RecursionError):
        pass
    pairs = _form_pairs(text, kind)
    if pairs is not None:
        return _form(pairs, typed)
    if (kind.startswith("application/graphql") or _GRAPHQL.match(text) is not None) and not typed:
        return graphql(text)
    return json.dumps(withheld("password" if typed else "body", text) | {"length": whole})


def _answered(value: Any) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _key(str(key), out)
            if credential_key(str(key)) and _something(item):
                out[name] = _secret(item)
            else:
                out[name] = _answered(item)
        return out
    if isinstance(value, list):
        return [_answered(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _number(value, None)
    return value


def answered_body(text: str, kind: str, *, typed: bool = False) -> str:
    """A response's body as the record keeps it (``typed``: the answer to a
    request sent with typed text: withheld but for its JSON's shape)."""
    del kind  # read by what it holds, as a request's is
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        if typed:
            return json.dumps(withheld("password", text))
        return redact_text(text)
    try:
        return json.dumps(sent_value(found, typed=True) if typed else _answered(found))
    except RecursionError:
        return json.dumps(withheld("body", text))
