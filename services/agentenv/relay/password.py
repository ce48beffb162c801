"""Typing into password fields never reaches the log (SPEC.md section 1).

Before a typing command is sent, the relay asks its tab whether focus is in
a password field (:data:`FOCUS_CHECK`, run in the tab by the relay's own
connection). While the check is pending the entry is withheld; the text is
kept only once a check says no; a check that cannot decide (no tab, a
timeout, focus in a cross-origin frame) counts as a password.

Typing: ``Input.insertText``, ``Input.imeSetComposition``, and
``Input.dispatchKeyEvent`` with ``text`` or with a one-character ``key`` (a
key-up names the character it releases).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from agentenv.log.redact import withheld

__all__ = ["CHECK_TIMEOUT_S", "FOCUS_CHECK", "Focus", "is_typing", "verdict", "withhold_typing"]

Focus = Literal["password", "no", "undecided"]

#: How long a focus check may take before it counts as a password.
CHECK_TIMEOUT_S = 1.0

#: Evaluated in the tab: "password", "no" or "undecided".
FOCUS_CHECK = r"""(() => {
  const secret = /(^|\s)(current-password|new-password|one-time-code|cc-[a-z-]+)(\s|$)/;
  let el = document.activeElement;
  for (let depth = 0; el && depth < 32; depth++) {
    const inner = el.shadowRoot && el.shadowRoot.activeElement;
    if (inner) { el = inner; continue; }
    if (el.tagName === "IFRAME" || el.tagName === "FRAME") {
      let doc = null;
      try { doc = el.contentDocument; } catch (e) { return "undecided"; }
      if (!doc) return "undecided";
      el = doc.activeElement;
      continue;
    }
    break;
  }
  if (!el) return "no";
  if (el.tagName === "INPUT" && String(el.type).toLowerCase() === "password") return "password";
  const ac = String(el.getAttribute && el.getAttribute("autocomplete") || "").toLowerCase();
  if (secret.test(ac)) return "password";
  // Only a field that shows what it holds clears; anything else (a closed
  // shadow root's host, say) cannot be seen into.
  if (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.isContentEditable) return "no";
  if (el === document.body || el === document.documentElement) return "no";
  return "undecided";
})()"""

_TYPING = frozenset({"Input.insertText", "Input.imeSetComposition"})


def is_typing(method: str, params: Mapping[str, Any] | None) -> bool:
    """Whether a command types text that might be a password."""
    if method in _TYPING:
        return True
    if method == "Input.dispatchKeyEvent" and params:
        key = params.get("key")
        return bool(params.get("text")) or (isinstance(key, str) and len(key) == 1)
    return False


def verdict(answer: object) -> Focus:
    """A focus check's answer (the ``Runtime.evaluate`` answer message) as a verdict."""
    if isinstance(answer, Mapping):
        outer = answer.get("result")
        inner = outer.get("result") if isinstance(outer, Mapping) else None
        if isinstance(inner, Mapping) and inner.get("value") in ("password", "no"):
            value: Focus = inner["value"]
            return value
    return "undecided"


def withhold_typing(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A typing command's params with every trace of the typed text removed."""
    text = params.get("text")
    if not isinstance(text, str):
        key = params.get("key")
        text = key if isinstance(key, str) else ""
    out: dict[str, Any] = {"text": withheld("password", text)}
    if method == "Input.dispatchKeyEvent" and "type" in params:
        out = {"type": params["type"], **out}
    return out
