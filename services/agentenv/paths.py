"""Whether a path an agent names stays inside a folder it may use. No I/O
beyond resolving links (``os.path.realpath``)."""

from __future__ import annotations

import os

__all__ = ["inside"]


def inside(path: object, *roots: str, base: str | None = None) -> bool:
    """Whether ``path`` is inside one of ``roots`` after resolving ``..`` and links.

    A relative path is taken from ``base`` (refused without one); an empty
    path, a path with a NUL byte, or one that is not a string is refused, and
    so is one whose links cannot be read (``/proc/1/cwd/…`` for a user not
    allowed there): an error there once dropped the connection unrecorded.
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        return False
    if not os.path.isabs(path):
        if base is None:
            return False
        path = os.path.join(base, path)
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    for root in roots:
        if not root:
            continue
        try:
            top = os.path.realpath(root)
        except (OSError, ValueError):
            continue
        if real == top or real.startswith(top + os.sep):
            return True
    return False
