"""``downloads/list`` and ``downloads/get {name}``: the files an agent's
browser downloaded, read back from the computer (SPEC.md section 3).

Each scope has its own downloads folder (``Settings.downloads_for``): an
agent's token reads its own scope's, the control token the one it names.
A name is a file's name only (no folder, no ``..``: the model refuses them),
opened without following a link (``O_NOFOLLOW``) and only if it is a regular
file, so no name reaches outside the folder. The file is streamed, not read
whole: a scope's downloads may be hundreds of megabytes.

Playwright's ``download.save_as`` over ``connect_over_cdp`` cannot work on
a remote browser (the file is on the computer, and Playwright looks for it
on the client's disk); ``downloads/get`` is how to fetch it instead.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO

from agentenv.app.acting import reading
from agentenv.app.browser import Browser
from agentenv.app.caller import Caller
from agentenv.app.errors import OpError
from agentenv.protocol.browser import Download, DownloadsGet, ScopeOnly

__all__ = ["DownloadFile", "downloads_get", "downloads_list", "listed"]

#: What Chromium names a file it is still writing.
PARTIAL = ".crdownload"


@dataclass
class DownloadFile:
    """An op's answer that is a file: streamed by the server, then closed."""

    file: BinaryIO
    name: str
    size: int


def listed(folder: str) -> list[Download]:
    """The regular files directly in ``folder`` (links and folders passed
    over), by name; none when the folder does not exist yet."""
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


def _open(folder: str, name: str) -> DownloadFile:
    try:
        fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise OpError(404, f"no download {name[:64]!r}: downloads/list shows the files") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OpError(404, f"no download {name[:64]!r}: downloads/list shows the files")
    os.set_blocking(fd, True)
    return DownloadFile(os.fdopen(fd, "rb"), name, info.st_size)


async def downloads_list(browser: Browser, body: ScopeOnly, caller: Caller) -> Any:
    async with reading(browser, caller, "downloads/list", None, None):
        found = await asyncio.to_thread(listed, browser.downloads)
    return [d.model_dump() for d in found]


async def downloads_get(browser: Browser, body: DownloadsGet, caller: Caller) -> Any:
    async with reading(browser, caller, "downloads/get", body, None):
        return await asyncio.to_thread(_open, browser.downloads, body.name)
