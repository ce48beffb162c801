"""The files in a downloads folder, listed and opened safely; used by the
app's ``downloads/*`` ops and by recordings that keep their downloads.

Only regular files directly in the folder count: links and folders are
passed over, and a file is opened without following a link
(``O_NOFOLLOW``), non-blocking (a FIFO cannot hang the caller), and only if
it is a regular file.
"""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from typing import BinaryIO

from agentenv.protocol.browser import Download

__all__ = ["PARTIAL", "listed", "opened"]

#: What Chromium names a file it is still writing.
PARTIAL = ".crdownload"


def listed(folder: str) -> list[Download]:
    """The regular files directly in ``folder``, by name; none when the
    folder does not exist yet."""
    found: list[Download] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if not stat.S_ISREG(info.st_mode):
            continue
        modified = datetime.fromtimestamp(info.st_mtime, UTC).isoformat(timespec="milliseconds")
        found.append(
            Download(
                name=entry.name,
                bytes=info.st_size,
                modified=modified.replace("+00:00", "Z"),
                partial=entry.name.endswith(PARTIAL),
            )
        )
    return sorted(found, key=lambda d: d.name)


def opened(folder: str, name: str) -> tuple[BinaryIO, int] | None:
    """The file ``name`` in ``folder``, open for reading, and its size; None
    when there is no regular file of that name (or it cannot be opened)."""
    if not name or "/" in name or "\x00" in name or name in (".", ".."):
        return None
    try:
        fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info.st_size
    except OSError:
        os.close(fd)
        return None
