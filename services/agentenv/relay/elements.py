"""What a click lands on, for the words a judge reads (docs/spec.md section 5).

While a recording is open, the relay asks a tab what element is at a mouse
press's point before it sends the press (:func:`describe_expression`, run in
the tab by the relay's own connection, bounded by :data:`DESCRIBE_TIMEOUT_S`):
the nearest element a person would call clickable (a link, a button, a
field, anything with a role) and its role and accessible name, as an
assistive technology names it: ``aria-label``, ``aria-labelledby``, the
field's label, a button's value, an image's ``alt``, the element's text (for
roles named from their content: a link, a button, a heading, …), its
``title`` or ``placeholder``. A field's value is never read (a password field
is named by its label). The answer (:func:`target`) is redacted and cut; a
press the page cannot answer for goes without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentenv.log.redact import redact_text

__all__ = [
    "DESCRIBE_FUNCTION",
    "DESCRIBE_TIMEOUT_S",
    "ELEMENT_AT_FUNCTION",
    "NAME_LIMIT",
    "describe_expression",
    "is_press",
    "named",
    "target",
]

#: How long the relay holds a press to ask what it lands on (as long as the
#: password check may hold typing: 0.5 s was too short under load).
DESCRIBE_TIMEOUT_S = 1.0
NAME_LIMIT = 100

#: ``describeElement(el)``: ``{role, name}`` of the clickable element at or above ``el``.
DESCRIBE_FUNCTION = r"""
  const describeElement = (el) => {
  if (!el) return null;
  const clickable = "a[href],button,input,select,textarea,summary,option,label,[role]," +
    "[onclick],[contenteditable=''],[contenteditable='true']";
  let hit = el;
  for (let up = 0; hit && up < 8 && !(hit.matches && hit.matches(clickable)); up++) {
    hit = hit.parentElement;
  }
  if (hit && hit.matches && hit.matches(clickable)) el = hit;
  const tag = el.tagName.toLowerCase();
  const type = ("" + (el.getAttribute("type") || "")).toLowerCase();
  const inputs = {checkbox: "checkbox", radio: "radio", button: "button", submit: "button",
    reset: "button", image: "button", range: "slider", number: "spinbutton",
    search: "searchbox"};
  const tags = {button: "button", select: el.multiple ? "listbox" : "combobox",
    textarea: "textbox", img: "img", summary: "button", option: "option", li: "listitem",
    h1: "heading", h2: "heading", h3: "heading", h4: "heading", h5: "heading",
    h6: "heading", label: "label", nav: "navigation", form: "form"};
  let role = ("" + (el.getAttribute("role") || "")).split(/\s+/)[0];
  if (!role && tag === "a") role = el.hasAttribute("href") ? "link" : "generic";
  if (!role && tag === "input") role = inputs[type] || "textbox";
  if (!role) role = tags[tag] || (el.isContentEditable ? "textbox" : "generic");
  const clean = (s) => ("" + (s || "")).replace(/\s+/g, " ").trim();
  const owner = el.ownerDocument;
  let name = clean(el.getAttribute("aria-label"));
  const by = el.getAttribute("aria-labelledby");
  if (!name && by) {
    name = clean(by.split(/\s+/).map((id) => {
      const found = owner.getElementById(id);
      return found ? found.textContent : "";
    }).join(" "));
  }
  if (!name && el.labels && el.labels.length) name = clean(el.labels[0].textContent);
  if (!name && tag === "input" && ["button", "submit", "reset"].includes(type)) {
    name = clean(el.value || (type === "submit" ? "Submit" : type === "reset" ? "Reset" : ""));
  }
  if (!name && tag === "img") name = clean(el.alt);
  const fromContent = ["button", "link", "heading", "option", "listitem", "label", "menuitem",
    "menuitemcheckbox", "menuitemradio", "tab", "treeitem", "cell", "gridcell", "checkbox",
    "radio", "switch", "columnheader", "rowheader", "tooltip"];
  if (!name && fromContent.includes(role) && !["input", "textarea", "select"].includes(tag)) {
    name = clean(el.innerText || el.textContent);
  }
  if (!name) name = clean(el.getAttribute("title") || el.getAttribute("placeholder"));
  return {role: role, name: name.slice(0, 400)};
  };
"""

#: ``elementAt(x, y)``: the element at a viewport point, through open shadow
#: roots and same-origin frames; ``undefined`` when it lands in a frame that
#: cannot be seen into. The password check uses it for drops.
ELEMENT_AT_FUNCTION = r"""
  const elementAt = (x, y) => {
    let doc = document, el = null;
    for (let depth = 0; depth < 32; depth++) {
      el = doc.elementFromPoint(x, y);
      while (el && el.shadowRoot) {
        const inner = el.shadowRoot.elementFromPoint(x, y);
        if (!inner || inner === el) break;
        el = inner;
      }
      if (el && (el.tagName === "IFRAME" || el.tagName === "FRAME")) {
        let inner = null;
        try { inner = el.contentDocument; } catch (e) { return undefined; }
        if (!inner) return undefined;
        const box = el.getBoundingClientRect();
        x -= box.left + el.clientLeft; y -= box.top + el.clientTop;
        doc = inner;
        continue;
      }
      break;
    }
    return el;
  };
"""

_DESCRIBE = (
    "((x, y) => {"
    + DESCRIBE_FUNCTION
    + ELEMENT_AT_FUNCTION
    + """
  const el = elementAt(x, y);
  return el ? describeElement(el) : null;
})"""
)


def describe_expression(point: tuple[float, float]) -> str:
    """The script that names the element at ``point`` (CSS pixels of the viewport)."""
    return f"{_DESCRIBE}({float(point[0])!r}, {float(point[1])!r})"


def is_press(method: str, params: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """A mouse press's point, else None."""
    if method != "Input.dispatchMouseEvent" or not params or params.get("type") != "mousePressed":
        return None
    x, y = params.get("x"), params.get("y")
    if isinstance(x, int | float) and isinstance(y, int | float):
        return float(x), float(y)
    return None


def target(answer: object) -> dict[str, str] | None:
    """An evaluation's answer (the ``Runtime.evaluate`` answer message) as
    ``{role, name}``, redacted and cut, or None."""
    if not isinstance(answer, Mapping):
        return None
    outer = answer.get("result")
    inner = outer.get("result") if isinstance(outer, Mapping) else None
    return named(inner.get("value") if isinstance(inner, Mapping) else None)


def named(value: object) -> dict[str, str] | None:
    """``describeElement``'s value as ``{role, name}``, redacted and cut, or None."""
    if not isinstance(value, Mapping):
        return None
    role, name = value.get("role"), value.get("name")
    if not isinstance(role, str) or not isinstance(name, str):
        return None
    return {
        "role": role[:40],
        "name": redact_text(name[: NAME_LIMIT * 4])[:NAME_LIMIT],
    }
