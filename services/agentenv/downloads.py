"""The files in a downloads folder, listed and opened safely; used by the
app's ``downloads/*`` ops and by recordings that keep their downloads.

Only regular files directly in the folder count: links and folders are
passed over, and a file is opened without following a link
(``O_NOFOLLOW``), non-blocking (a FIFO cannot hang the caller), and only if
it is a regular file.
"""

from __future__ import annotations

import contextlib
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from agentenv.protocol.browser import Download
from agentenv.settings import Settings

__all__ = ["PARTIAL", "SERVER_FOLDER", "folder_bytes", "listed", "opened", "scope_share"]

#: What Chromium names a file it is still writing.
PARTIAL = ".crdownload"
#: How the folder of a ``/playwright`` server in a scope's downloads folder
#: begins (app/playwright_door.py): its uploads and videos count against
#: the scope's share.
SERVER_FOLDER = ".playwright-"


def _tree_bytes(folder: str) -> int:
    total = 0
    stack = [folder]
    while stack:
        with contextlib.suppress(OSError):
            for entry in os.scandir(stack.pop()):
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
    return total


def folder_bytes(folder: Path) -> int:
    """The bytes a scope's downloads folder holds against its share: its
    files (a download under way, its ``.crdownload``, is counted by its
    progress instead) and everything in its ``/playwright`` servers'
    folders. Links are never followed."""
    total = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False) and not entry.name.endswith(PARTIAL):
                    total += entry.stat(follow_symlinks=False).st_size
                elif entry.name.startswith(SERVER_FOLDER) and entry.is_dir(follow_symlinks=False):
                    total += _tree_bytes(entry.path)
    return total


def scope_share(settings: Settings) -> int:
    """The bytes one scope's downloads may hold: ``AGENTENV_SCOPE_DOWNLOAD_BYTES``,
    else the downloads folder's file system over every scope that may be
    open at once (opened on demand too: a share does not shrink under a
    scope's downloads as others open); 0 when neither is known."""
    if settings.scope_download_bytes:
        return settings.scope_download_bytes
    try:
        found = os.statvfs(settings.downloads_dir)
    except OSError:
        return 0
    return found.f_blocks * found.f_frsize // max(1, settings.scope_capacity)


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
