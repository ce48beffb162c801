"""``downloads/list`` and ``downloads/get {name}``: the files an agent's
browser downloaded, read back from the computer (docs/spec.md section 3).

Each scope has its own downloads folder (``Settings.downloads_for``): an
agent's token reads its own scope's, the control token the one it names.
A name is a file's name only (no folder, no ``..``: the model refuses them),
and only regular files are listed or opened (:mod:`agentenv.downloads`), so
no name reaches outside the folder. The file is streamed, not read whole: a
scope's downloads may be hundreds of megabytes.

Playwright's ``download.save_as`` over ``connect_over_cdp`` cannot work on
a remote browser (the file is on the computer, and Playwright looks for it
on the client's disk); ``downloads/get`` is how to fetch it instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, BinaryIO

from agentenv.app.acting import reading
from agentenv.app.app_errors import OpError
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser
from agentenv.downloads import listed, opened
from agentenv.protocol.browser import Download, DownloadsGet, ScopeOnly

__all__ = ["DownloadFile", "downloads_get", "downloads_list"]


@dataclass
class DownloadFile:
    """An op's answer that is a file: streamed by the server, then closed."""

    file: BinaryIO
    name: str
    size: int


def _open(folder: str, name: str) -> DownloadFile:
    found = opened(folder, name)
    if found is None:
        raise OpError(404, f"no download {name[:64]!r}: downloads/list shows the files")
    return DownloadFile(found[0], name, found[1])


async def downloads_list(browser: Browser, body: ScopeOnly, caller: Caller) -> list[Download]:
    async with reading(browser, caller, "downloads/list", None, None):
        found = await asyncio.to_thread(listed, browser.downloads)
    return found


async def downloads_get(browser: Browser, body: DownloadsGet, caller: Caller) -> Any:
    async with reading(browser, caller, "downloads/get", body, None):
        return await asyncio.to_thread(_open, browser.downloads, body.name)
