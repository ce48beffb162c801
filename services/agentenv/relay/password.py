"""Typing into password fields never reaches the log (docs/spec.md sections 1 and 2).

Before a typing command is sent, the relay asks its tab whether the field it
types into is a password field (:func:`check_expression`, run in the tab by
the relay's own connection, in an isolated world of its own: the page's
script cannot redefine the getters the check reads). While the check is
pending the entry is withheld; the text is kept only once a check says no; a
check that cannot decide (no tab, a timeout, a cross-origin frame) counts as
a password.

Typing: ``Input.insertText``, ``Input.imeSetComposition``,
``Input.dispatchKeyEvent`` with ``text`` or with a one-character ``key`` (a
key-up names the character it releases): the field is the focused one.
``Input.dispatchDragEvent`` carrying text: the field is the element at the
drop point. ``DOM.setAttributeValue`` of ``value`` and
``DOM.setAttributesAsText`` are withheld without a check (their node ids
belong to the client's session, which the relay does not read): see
:mod:`agentenv.log.redact`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from agentenv.log.redact import withheld
from agentenv.relay.elements import DESCRIBE_FUNCTION, ELEMENT_AT_FUNCTION, named

__all__ = [
    "CHECK_TIMEOUT_S",
    "FOCUS_OF",
    "HOST_EXPRESSION",
    "Focus",
    "check_expression",
    "drop_point",
    "evaluated_value",
    "field_named",
    "host_pending",
    "host_verdict",
    "is_typing",
    "verdict",
    "withhold_typing",
]

Focus = Literal["password", "no", "undecided"]

#: How long a check may take before it counts as a password.
CHECK_TIMEOUT_S = 1.0

# classify(el): "password", "no" or "undecided" for the element typed into.
_CLASSIFY = r"""
  const secret = /(^|\s)(current-password|new-password|one-time-code|cc-[a-z-]+)(\s|$)/;
  const classify = (el) => {
    if (!el) return "no";
    if (el.tagName === "INPUT" && ("" + el.type).toLowerCase() === "password") return "password";
    const ac = ("" + (el.getAttribute && el.getAttribute("autocomplete") || "")).toLowerCase();
    if (secret.test(ac)) return "password";
    // Only a field that shows what it holds clears; anything else (a closed
    // shadow root's host, say) cannot be seen into.
    if (el.tagName === "INPUT" || el.tagName === "TEXTAREA") return "no";
    // The page itself has the keys unless it matches :focus, which it does as
    // the host of a closed shadow root the focus is in.
    const page = el === el.ownerDocument.body || el === el.ownerDocument.documentElement;
    if (page && !el.matches(":focus")) return "no";
    // An editable element, or the page matching :focus, clears only if it
    // hosts no closed shadow root: a script cannot see one (nor trust the
    // caret, which a page moves where it likes), so the relay asks Chromium
    // (HOST_EXPRESSION, then DOM.describeNode).
    if (page || el.isContentEditable) { this.__agentenvHost = el; return "host"; }
    return "undecided";
  };
"""

#: focusOf(): where the keys go, the focused element followed through open
#: shadow roots and same-origin frames: ``{el}`` (null: nothing focused),
#: ``{frame}`` (a frame this world cannot look into: another origin, or
#: sandboxed), or ``{deep: true}``. The vault's fill reads it too
#: (:mod:`agentenv.relay.vault`), so both find the same field.
FOCUS_OF = r"""
  const focusOf = () => {
    let el = document.activeElement;
    for (let depth = 0; el; depth++) {
      // Deeper than this is not followed, so not cleared: the focus may be
      // further down (a field under 33 open roots was read as its host).
      if (depth >= 32) return {deep: true};
      const inner = el.shadowRoot && el.shadowRoot.activeElement;
      if (inner) { el = inner; continue; }
      if (el.tagName === "IFRAME" || el.tagName === "FRAME") {
        let doc = null;
        try { doc = el.contentDocument; } catch (e) { return {frame: el}; }
        if (!doc) return {frame: el};
        el = doc.activeElement;
        continue;
      }
      break;
    }
    return {el: el};
  };
"""

_FOCUS = (
    "(() => {"
    + _CLASSIFY
    + "/*OUT*/"
    + FOCUS_OF
    + r"""
  const found = focusOf();
  if (!("el" in found)) return "undecided";
  return out(found.el);
})()"""
)

_POINT = (
    "((x, y) => {"
    + _CLASSIFY
    + "/*OUT*/"
    + ELEMENT_AT_FUNCTION
    + """
  const el = elementAt(x, y);
  if (el === undefined) return "undecided";
  return out(el);
})"""
)

_TYPING = frozenset({"Input.insertText", "Input.imeSetComposition"})


_VERDICT_ONLY = "const out = (el) => classify(el);\n"
# With a recording open, the check also names the field (for the words judges read).
_DESCRIBED = DESCRIBE_FUNCTION + (
    "const out = (el) => ({verdict: classify(el), target: describeElement(el)});\n"
)


def check_expression(point: tuple[float, float] | None = None, describe: bool = False) -> str:
    """The script a check evaluates: the focused field, or the element at
    ``point``; with ``describe``, its role and name too."""
    out = _DESCRIBED if describe else _VERDICT_ONLY
    if point is None:
        return _FOCUS.replace("/*OUT*/", out, 1)
    return f"{_POINT.replace('/*OUT*/', out, 1)}({float(point[0])!r}, {float(point[1])!r})"


def _drag_texts(params: Mapping[str, Any]) -> bool:
    data = params.get("data")
    items = data.get("items") if isinstance(data, Mapping) else None
    return isinstance(items, list) and any(
        isinstance(i, Mapping) and isinstance(i.get("data"), str) and i.get("data") for i in items
    )


def is_typing(method: str, params: Mapping[str, Any] | None) -> bool:
    """Whether a command types text that might be a password."""
    if method in _TYPING:
        return True
    if not params:
        return False
    if method == "Input.dispatchKeyEvent":
        key = params.get("key")
        return bool(params.get("text")) or (isinstance(key, str) and len(key) == 1)
    if method == "Input.dispatchDragEvent":
        return _drag_texts(params)
    return False


def drop_point(method: str, params: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """Where a drag drops its text (the element there is the field), else None."""
    if method != "Input.dispatchDragEvent" or not params:
        return None
    x, y = params.get("x"), params.get("y")
    if isinstance(x, int | float) and isinstance(y, int | float):
        return float(x), float(y)
    return None


def evaluated_value(answer: object) -> object:
    """The value a ``Runtime.evaluate`` answer carries (None: none)."""
    if isinstance(answer, Mapping):
        outer = answer.get("result")
        inner = outer.get("result") if isinstance(outer, Mapping) else None
        if isinstance(inner, Mapping):
            return inner.get("value")
    return None


#: The element a check answered "host" for, as an object (our world's own
#: global, out of the page's reach), for ``DOM.describeNode``.
HOST_EXPRESSION = "this.__agentenvHost"


def host_pending(answer: object) -> bool:
    """Whether a check's answer waits on Chromium saying whether the element
    hosts a closed shadow root (:func:`host_verdict`)."""
    value = evaluated_value(answer)
    if isinstance(value, Mapping):
        value = value.get("verdict")
    return value == "host"


def host_verdict(described: object) -> Focus:
    """``DOM.describeNode``'s answer for a "host" element: "no" when every
    shadow root it hosts is open (focus inside one was already followed), else
    "undecided" (a closed root may hold the password field)."""
    result = described.get("result") if isinstance(described, Mapping) else None
    node = result.get("node") if isinstance(result, Mapping) else None
    if not isinstance(node, Mapping):
        return "undecided"
    roots = node.get("shadowRoots") or []
    if not isinstance(roots, list):
        return "undecided"
    open_only = all(isinstance(r, Mapping) and r.get("shadowRootType") == "open" for r in roots)
    return "no" if open_only else "undecided"


def verdict(answer: object) -> Focus:
    """A check's answer (the ``Runtime.evaluate`` answer message) as a verdict."""
    value = evaluated_value(answer)
    if isinstance(value, Mapping):
        value = value.get("verdict")
    if value == "password":
        return "password"
    return "no" if value == "no" else "undecided"


def field_named(answer: object) -> dict[str, str] | None:
    """The field a described check found (``check_expression(describe=True)``)."""
    value = evaluated_value(answer)
    return named(value.get("target")) if isinstance(value, Mapping) else None


def withhold_typing(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A typing command's params with every trace of the typed text removed."""
    if method == "Input.dispatchDragEvent":
        data = params.get("data")
        items = data.get("items", []) if isinstance(data, Mapping) else []
        kept = [
            {"mimeType": i.get("mimeType"), "data": withheld("password", i.get("data", ""))}
            for i in items
            if isinstance(i, Mapping)
        ]
        return {
            "type": params.get("type"),
            "x": params.get("x"),
            "y": params.get("y"),
            "data": {"items": kept},
        }
    text = params.get("text")
    if not isinstance(text, str):
        key = params.get("key")
        text = key if isinstance(key, str) else ""
    out: dict[str, Any] = {"text": withheld("password", text)}
    if method == "Input.dispatchKeyEvent" and "type" in params:
        out = {"type": params["type"], **out}
    return out
