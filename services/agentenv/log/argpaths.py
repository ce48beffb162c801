"""Paths into a tool call's or an op's arguments (no I/O): the typed text to
withhold and put back (``text``, ``fields.*.value``), every string a typing
call's arguments hold, and every argument naming a file, at any depth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentenv.log.redact import withheld

__all__ = [
    "FILE_ARGS",
    "READ_ARGS",
    "file_args",
    "restore_paths",
    "rooted",
    "typed_paths",
    "withhold_path",
]

#: Arguments naming files: allowed only in the session's own folder (where
#: Playwright MCP writes its snapshots, screenshots and PDFs) or the downloads folder.
FILE_ARGS = ("filename", "paths", "path")
#: Of those, the ones naming files to read (``browser_file_upload``'s, read
#: by Chromium); the others name files Playwright MCP writes.
READ_ARGS = frozenset({"paths"})


def withhold_path(args: Any, path: str) -> dict[str, Any]:
    """Replace the typed text at ``path`` (``text``, ``fields.*.value``) with a
    withheld marker; returns the concrete paths and the values taken."""
    taken: dict[str, Any] = {}

    def walk(node: Any, parts: list[str], here: str) -> None:
        if not parts:
            return
        head, rest = parts[0], parts[1:]
        if head == "*" and isinstance(node, list | dict):
            keys = range(len(node)) if isinstance(node, list) else list(node)
            for key in keys:
                where = f"{here}.{key}" if here else str(key)
                if rest:
                    walk(node[key], rest, where)
                else:
                    taken[where] = node[key]
                    node[key] = withheld("password", node[key])
            return
        if head.isdigit() and isinstance(node, list) and int(head) < len(node):
            where = f"{here}.{head}" if here else head
            if rest:
                walk(node[int(head)], rest, where)
            else:
                taken[where] = node[int(head)]
                node[int(head)] = withheld("password", node[int(head)])
            return
        if isinstance(node, dict) and head in node:
            where = f"{here}.{head}" if here else head
            if rest:
                walk(node[head], rest, where)
            else:
                taken[where] = node[head]
                node[head] = withheld("password", node[head])

    walk(args, path.split("."), "")
    return taken


def restore_paths(args: Any, taken: Mapping[str, Any]) -> None:
    """Put back values taken by :func:`withhold_path` (every check cleared)."""
    for where, value in taken.items():
        node = args
        parts = where.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value


def typed_paths(args: Any, typed: set[Any]) -> list[str]:
    """The dotted paths in ``args`` to withhold if the typing goes into a
    password field: every string, once anything is typed. A tool call's
    arguments are the caller's own words and need not hold the typed text
    as such: a harness typing a password key by key sent the whole password
    in each call's arguments, a red team padded it ("type X please")."""
    if not typed:
        return []
    paths: list[str] = []

    def walk(node: Any, here: str) -> None:
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else []
        )
        for key, value in items:
            where = f"{here}.{key}" if here else str(key)
            if isinstance(value, str):
                paths.append(where)
            else:
                walk(value, where)

    walk(args, "")
    return paths


def file_args(value: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """Every argument named like a file (:data:`FILE_ARGS`), at any depth:
    a tool may take them inside an object or a list."""
    found: list[tuple[str, Any]] = []
    if depth > 16:
        return [("arguments", "/")]  # too deep to read: refused as outside
    if isinstance(value, dict):
        for key, item in value.items():
            if key in FILE_ARGS:
                found.append((key, item))
            found.extend(file_args(item, depth + 1))
    elif isinstance(value, list):
        for item in value:
            found.extend(file_args(item, depth + 1))
    return found


def rooted(value: Any, folder: str, depth: int = 0) -> Any:
    """``value`` with every relative file name it writes (:data:`FILE_ARGS`
    but :data:`READ_ARGS`) made one in ``folder``, at any depth (a copy)."""
    if depth > 16:
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in FILE_ARGS and key not in READ_ARGS and isinstance(item, str) and item:
                out[key] = item if item.startswith("/") else f"{folder.rstrip('/')}/{item}"
            else:
                out[key] = rooted(item, folder, depth + 1)
        return out
    if isinstance(value, list):
        return [rooted(item, folder, depth + 1) for item in value]
    return value
