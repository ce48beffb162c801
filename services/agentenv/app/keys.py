"""Key combinations (``"ctrl+a"``, ``"Enter"``, ``"shift+Tab"``) as CDP key events. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentenv.app.app_errors import OpError

__all__ = ["KeyError_", "key_events"]


class KeyError_(OpError):
    """A key combination that names no key (400)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)


@dataclass(frozen=True)
class _Key:
    key: str
    code: str
    vk: int
    text: str = ""


_MODIFIERS = {
    "alt": 1,
    "option": 1,
    "ctrl": 2,
    "control": 2,
    "meta": 4,
    "cmd": 4,
    "command": 4,
    "super": 4,
    "shift": 8,
}
_MODIFIER_KEYS = {
    1: _Key("Alt", "AltLeft", 18),
    2: _Key("Control", "ControlLeft", 17),
    4: _Key("Meta", "MetaLeft", 91),
    8: _Key("Shift", "ShiftLeft", 16),
}

_NAMED = {
    "enter": _Key("Enter", "Enter", 13, "\r"),
    "return": _Key("Enter", "Enter", 13, "\r"),
    "tab": _Key("Tab", "Tab", 9),
    "escape": _Key("Escape", "Escape", 27),
    "esc": _Key("Escape", "Escape", 27),
    "backspace": _Key("Backspace", "Backspace", 8),
    "delete": _Key("Delete", "Delete", 46),
    "space": _Key(" ", "Space", 32, " "),
    "arrowup": _Key("ArrowUp", "ArrowUp", 38),
    "arrowdown": _Key("ArrowDown", "ArrowDown", 40),
    "arrowleft": _Key("ArrowLeft", "ArrowLeft", 37),
    "arrowright": _Key("ArrowRight", "ArrowRight", 39),
    "up": _Key("ArrowUp", "ArrowUp", 38),
    "down": _Key("ArrowDown", "ArrowDown", 40),
    "left": _Key("ArrowLeft", "ArrowLeft", 37),
    "right": _Key("ArrowRight", "ArrowRight", 39),
    "home": _Key("Home", "Home", 36),
    "end": _Key("End", "End", 35),
    "pageup": _Key("PageUp", "PageUp", 33),
    "pagedown": _Key("PageDown", "PageDown", 34),
    "insert": _Key("Insert", "Insert", 45),
    **{f"f{n}": _Key(f"F{n}", f"F{n}", 111 + n) for n in range(1, 13)},
}

_PUNCTUATION = {
    "-": ("Minus", 189),
    "=": ("Equal", 187),
    "[": ("BracketLeft", 219),
    "]": ("BracketRight", 221),
    ";": ("Semicolon", 186),
    "'": ("Quote", 222),
    ",": ("Comma", 188),
    ".": ("Period", 190),
    "/": ("Slash", 191),
    "\\": ("Backslash", 220),
    "`": ("Backquote", 192),
}


def _key(name: str) -> _Key:
    lowered = name.lower()
    if lowered in _NAMED:
        return _NAMED[lowered]
    if len(name) == 1:
        if name.isalpha() and name.isascii():
            return _Key(name, f"Key{name.upper()}", ord(name.upper()), name)
        if name.isdigit():
            return _Key(name, f"Digit{name}", ord(name), name)
        if name in _PUNCTUATION:
            code, vk = _PUNCTUATION[name]
            return _Key(name, code, vk, name)
    raise KeyError_(
        f"unknown key {name!r}: use a character, or Enter, Tab, Escape, Backspace, Delete, "
        "Space, arrows, Home, End, PageUp, PageDown, F1-F12, with ctrl/alt/shift/meta+"
    )


def key_events(keys: str) -> list[dict[str, Any]]:
    """``Input.dispatchKeyEvent`` params for one combination, presses then releases."""
    parts = [p.strip() for p in keys.split("+")] if keys != "+" else ["+"]
    if any(not p for p in parts):
        raise KeyError_("an empty key in the combination: write it like ctrl+a or shift+Tab")
    *mods, main = parts
    flags = 0
    for mod in mods:
        bit = _MODIFIERS.get(mod.lower())
        if bit is None:
            raise KeyError_(f"unknown modifier {mod!r}: use ctrl, alt, shift or meta")
        flags |= bit
    key = _key(main)
    text = key.text
    if text and flags & 8 and len(text) == 1 and text.isalpha():
        text = text.upper()
    if flags & (1 | 2 | 4):
        text = ""  # a shortcut types nothing
    events: list[dict[str, Any]] = []
    held = 0
    for bit in (2, 1, 4, 8):
        if flags & bit:
            held |= bit
            m = _MODIFIER_KEYS[bit]
            events.append(
                {
                    "type": "rawKeyDown",
                    "key": m.key,
                    "code": m.code,
                    "windowsVirtualKeyCode": m.vk,
                    "modifiers": held,
                }
            )
    down: dict[str, Any] = {
        "type": "keyDown" if text else "rawKeyDown",
        "key": key.key,
        "code": key.code,
        "windowsVirtualKeyCode": key.vk,
        "modifiers": flags,
    }
    if text:
        down["text"] = down["unmodifiedText"] = text
    events.append(down)
    events.append(
        {
            "type": "keyUp",
            "key": key.key,
            "code": key.code,
            "windowsVirtualKeyCode": key.vk,
            "modifiers": flags,
        }
    )
    for bit in (8, 4, 1, 2):
        if flags & bit:
            held &= ~bit
            m = _MODIFIER_KEYS[bit]
            events.append(
                {
                    "type": "keyUp",
                    "key": m.key,
                    "code": m.code,
                    "windowsVirtualKeyCode": m.vk,
                    "modifiers": held,
                }
            )
    return events
