"""A CDP command's params as the log keeps them: the rules of the methods
whose params carry what the generic walk (:func:`agentenv.log.redact.redact`)
cannot tell is secret (bodies, cookies, a function's arguments, what a page
is given), then the walk for the rest. The list of what each rule withholds
is in :mod:`agentenv.log.redact`'s text."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from agentenv.log.redact import (
    CUT_AT,
    redact,
    redact_cards,
    redact_cut,
    redact_mapping,
    redact_text,
    withheld,
)

__all__ = ["Rule", "redact_params", "resolved"]


def _strings_withheld(value: Any) -> Any:
    if isinstance(value, str):
        return withheld("argument", value)
    if isinstance(value, Mapping):
        return {k: _strings_withheld(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_withheld(v) for v in value]
    return value


#: A method's rule: the params it replaces (already safe); the rest takes the
#: generic walk.
Rule = Callable[[Mapping[str, Any]], dict[str, Any] | None]


def _call_arguments(params: Mapping[str, Any]) -> dict[str, Any]:
    function = _code("functionDeclaration")(params) or {}
    arguments = params.get("arguments")
    if not isinstance(arguments, list):
        return function
    return {
        **function,
        "arguments": {
            "withheld": "arguments",
            "values": [
                {k: _strings_withheld(v) if k == "value" else v for k, v in a.items()}
                if isinstance(a, Mapping)
                else _strings_withheld(a)
                for a in arguments
            ],
        },
    }


def _withhold_fields(*fields: str, limit: int = 0, kind: str = "body") -> Rule:
    """Replace each named string field (longer than ``limit``) by its length."""
    if len(fields) == 1:
        (only,) = fields

        def one(params: Mapping[str, Any]) -> dict[str, Any] | None:
            body = params.get(only)
            if isinstance(body, str) and len(body) > limit:
                return {only: withheld(kind, body)}
            return None  # nothing replaced (the common case, kept lean)

        return one

    def rule(params: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in fields:
            body = params.get(field)
            if isinstance(body, str) and len(body) > limit:
                out[field] = withheld(kind, body)
        return out

    return rule


def _code(field: str) -> Rule:
    """Code an agent runs: on the record with its source (docs/spec.md section 1,
    "Acting or reading"), redacted; past :data:`CUT_AT` characters its first
    part, its length and the SHA-256 of the whole (so the script run can be
    told from any other, however it was padded)."""

    def rule(params: Mapping[str, Any]) -> dict[str, Any] | None:
        code = params.get(field)
        if not isinstance(code, str) or len(code) <= CUT_AT:
            return None  # the generic walk keeps it whole, redacted
        kept = redact_cut(code)
        assert isinstance(kept, dict)
        kept["sha256"] = hashlib.sha256(code.encode(errors="surrogatepass")).hexdigest()
        return {field: kept}

    return rule


def _withhold_values(*fields: str, kind: str) -> Rule:
    """Replace each named field, whatever it holds (an object of secrets: a
    credential's private key, a card), by the marker."""

    def rule(params: Mapping[str, Any]) -> dict[str, Any]:
        return {f: withheld(kind, params[f]) for f in fields if params.get(f) is not None}

    return rule


def _cookie(value: Any) -> Any:
    """A cookie a command sets: every field redacted, its value withheld
    (whether or not it carries a field that marks a cookie elsewhere)."""
    if not isinstance(value, Mapping) or "value" not in value:
        return redact(value)
    return {k: withheld("cookie", v) if k == "value" else redact(v) for k, v in value.items()}


def _set_cookies(params: Mapping[str, Any]) -> dict[str, Any]:
    """``Network.setCookie`` (the params are the cookie), ``Network.setCookies``
    and ``Storage.setCookies`` (a list under ``cookies``)."""
    out: dict[str, Any] = {}
    if "value" in params:
        out["value"] = withheld("cookie", params["value"])
    cookies = params.get("cookies")
    if isinstance(cookies, list):
        out["cookies"] = [_cookie(c) for c in cookies]
    return out


def _typed_text(params: Mapping[str, Any]) -> dict[str, Any] | None:
    """Text typed where the relay's check cleared (no password field): kept,
    card numbers out (a card typed into a field that does not say it is
    one's; a field that says so is withheld as a password)."""
    text = params.get("text")
    if isinstance(text, str) and len(text) >= 13:
        kept = redact_cards(text)
        if kept != text:
            return {"text": redact_text(kept)}
    return None


def _attribute_value(params: Mapping[str, Any]) -> dict[str, Any]:
    """A ``value`` attribute set by CDP: withheld like typing, since the relay
    cannot tell from a client's node id whether it is a password input."""
    name = params.get("name")
    if isinstance(name, str) and name.strip().lower() == "value" and "value" in params:
        return {"value": withheld("password", params["value"])}
    return {}


_METHOD_RULES: dict[str, Rule] = {
    "DOM.setAttributeValue": _attribute_value,
    "Input.insertText": _typed_text,
    "Input.imeSetComposition": _typed_text,
    "DOM.setAttributesAsText": _withhold_fields("text"),
    "Fetch.fulfillRequest": _withhold_fields("body", "binaryResponseHeaders"),
    "Fetch.continueRequest": _withhold_fields("postData"),
    "Fetch.continueResponse": _withhold_fields("binaryResponseHeaders"),
    "Network.setCookie": _set_cookies,
    "Network.setCookies": _set_cookies,
    "Storage.setCookies": _set_cookies,
    "Page.setDocumentContent": _withhold_fields("html"),
    # What an agent answers a prompt() with: the page may have asked for a
    # password, which the relay cannot tell.
    "Page.handleJavaScriptDialog": _withhold_fields("promptText", kind="prompt"),
    # Code an agent runs, wherever it runs.
    "Runtime.evaluate": _code("expression"),
    "Runtime.compileScript": _code("expression"),
    "Debugger.evaluateOnCallFrame": _code("expression"),
    "Debugger.setScriptSource": _code("scriptSource"),
    "Debugger.setBreakpoint": _code("condition"),
    "Debugger.setBreakpointByUrl": _code("condition"),
    "Debugger.setBreakpointOnFunctionCall": _code("condition"),
    "Page.addScriptToEvaluateOnNewDocument": _code("source"),
    "Page.addScriptToEvaluateOnLoad": _code("scriptSource"),
    # Page content an agent writes, which may hold what a field holds.
    "DOM.setOuterHTML": _withhold_fields("outerHTML"),
    "DOM.setNodeValue": _withhold_fields("value", kind="password"),
    # Storage values, and the secrets of virtual devices and forms.
    "DOMStorage.setDOMStorageItem": _withhold_fields("value", kind="storage"),
    "WebAuthn.addCredential": _withhold_values("credential", kind="credential"),
    "Autofill.trigger": _withhold_values("card", "address", kind="autofill"),
    "Autofill.setAddresses": _withhold_values("addresses", kind="autofill"),
    "DigitalCredentials.setVirtualWalletBehavior": _withhold_values("response", kind="credential"),
    "Runtime.callFunctionOn": _call_arguments,
}


def resolved(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with deferred params redacted, in place. The relay keeps an
    acting command's params as a ``(method, params)`` pair until its line is
    written, after the client has its answer: off the agent's round trip
    (params are never tuples in JSON)."""
    params = fields.get("params")
    if type(params) is tuple:
        fields["params"] = redact_params(params[0], params[1])
    return fields


def redact_params(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A CDP command's params as the log keeps them (withheld whole if they
    nest too deep to walk: the relay refuses those before they get here)."""
    if not params:
        return {}
    rule = _METHOD_RULES.get(method)
    try:
        replaced = rule(params) if rule is not None else None
        if not replaced:
            return redact_mapping(params)
        rest = redact_mapping({k: v for k, v in params.items() if k not in replaced})
    except RecursionError:
        return {"withheld": "too deep"}
    try:
        return {k: replaced[k] if k in replaced else rest[k] for k in params}
    except KeyError:  # a key holding a secret's shape, written redacted
        pass
    # In the params' order; the rest's keys as the walk wrote them.
    others = iter(rest.items())
    out: dict[str, Any] = {}
    for key in params:
        if key in replaced:
            out[key] = replaced[key]
        else:
            name, value = next(others)
            out[name] = value
    return out
