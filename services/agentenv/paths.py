"""Whether a path an agent names stays inside a folder it may use. No I/O
beyond resolving links (``os.path.realpath``)."""

from __future__ import annotations

import os

__all__ = ["inside"]


def inside(path: object, *roots: str, base: str | None = None) -> bool:
    """Whether ``path`` is inside one of ``roots`` after resolving ``..`` and links.

    A relative path is taken from ``base`` (refused without one); an empty
    path, a path with a NUL byte, or one that is not a string is refused.
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        return False
    if not os.path.isabs(path):
        if base is None:
            return False
        path = os.path.join(base, path)
    real = os.path.realpath(path)
    for root in roots:
        if not root:
            continue
        top = os.path.realpath(root)
        if real == top or real.startswith(top + os.sep):
            return True
    return False
