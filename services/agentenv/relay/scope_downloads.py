"""Each scope's downloads: where they go, and its share of the folder.

The relay's watcher (:mod:`agentenv.relay.watcher`) hands this Chromium's
download events and asks it to set where downloads go. Every scope has a
folder of its own in the downloads folder, made before any agent connects
(no name of one is free for another scope's download to take), and each
browser context downloads into its scope's.

On a computer of two scopes or more it bounds each scope's downloads: its
own download events on (``eventsEnabled``: Chromium sends them to every
connection that asked), it cancels a download (``Browser.cancelDownload``)
once its scope's folder and downloads under way would hold more than the
scope's share of the downloads folder (``AGENTENV_SCOPE_DOWNLOAD_BYTES``,
else the folder's size over the number of scopes), on the record (rule
``download-share``), so one agent cannot fill the downloads for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentenv.downloads import folder_bytes, scope_share
from agentenv.relay.relay_errors import WatcherError
from agentenv.relay.watching import Watching
from agentenv.scopes import Scope
from agentenv.settings import AGENTENV_USER

__all__ = ["Downloads"]

log = logging.getLogger("agentenv.relay.scope_downloads")


def _make_folder(folder: Path) -> None:
    """A scope's downloads folder, which Chromium (group downloads) writes in.
    Anything else by its name (a download another scope named so, from a
    context of its own, before the folder was made) goes first. Sticky, so
    Chromium's user cannot rename or remove what the computer's user made
    in it (a ``/playwright`` server's folder, app/playwright_door.py)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
    folder.mkdir(exist_ok=True)
    with contextlib.suppress(OSError):  # one made before, by Chromium or by hand
        os.chmod(folder, 0o3770)


def empty_folder(folder: Path) -> int:
    """Remove everything in ``folder`` (a scope's downloads, when the scope is
    closed or reset; the folder stays, where Chromium puts them); how many
    entries went. Links are removed, never followed."""
    removed = 0
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed += 1
    return removed


def _frame_ids(tree: Any) -> set[str]:
    """Every frame id in a ``Page.getFrameTree`` answer's tree."""
    found: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        frame = node.get("frame")
        if isinstance(frame, dict) and isinstance(frame.get("id"), str):
            found.add(frame["id"])
        children = node.get("childFrames")
        if isinstance(children, list):
            stack.extend(children)
    return found


class Downloads:
    """The downloads of every scope, as the watcher sees them."""

    def __init__(self, watcher: Watching) -> None:
        self.watcher = watcher
        self.settings = watcher.settings
        self.logbook = watcher.logbook
        #: Downloads under way: guid -> (scope, context, bytes received).
        self._downloading: dict[str, tuple[str, str | None, int]] = {}
        #: Each scope's folder's bytes, measured at most once a second.
        self._held: dict[str, tuple[float, int]] = {}

    def forget(self) -> None:
        """Chromium went: no download of it is under way any more, and the
        folders are measured anew."""
        self._downloading.clear()
        self._held.clear()

    async def empty(self, scope: str) -> None:
        """``scope``'s downloads folder emptied (off the loop), and its
        downloads under way and measures forgotten (closed or reset)."""
        for guid in [g for g, known in self._downloading.items() if known[0] == scope]:
            del self._downloading[guid]
        self._held.pop(scope, None)
        folder = self.settings.downloads_for(scope)
        if folder == self.settings.downloads_dir:  # never every scope's at once
            return
        await asyncio.get_running_loop().run_in_executor(None, empty_folder, folder)

    def make_folders(self) -> None:
        """Every scope's downloads folder, before any agent connects: no name
        of one is free for another scope's download to take."""
        for name in self.settings.scope_folders:
            try:
                _make_folder(self.settings.downloads_dir / name)
            except OSError as exc:
                log.warning("could not make the downloads folder %s: %s", name, exc)

    async def for_context(self, context: str, scope: str) -> None:
        """A context an agent of ``scope`` made downloads into the scope's folder
        (Chromium's policy folder, every scope's parent, otherwise)."""
        try:
            await self._to(self.settings.downloads_for(scope), context)
        except (WatcherError, TimeoutError) as exc:
            log.warning("could not set a made context's downloads folder: %s", exc)

    async def set_for(self, scope: Scope | None = None) -> None:
        """Downloads of ``scope``'s context (Chromium's default one for None,
        or the home scope) to its downloads folder (settings.downloads_for)."""
        name = scope.name if scope is not None else self.watcher.scopes.home
        folder = self.settings.downloads_for(name if self.watcher.scopes.isolated else None)
        if folder != self.settings.downloads_dir:
            _make_folder(folder)
        await self._to(folder, scope.context if scope is not None else None)

    async def _to(self, folder: Path, context: str | None) -> None:
        params: dict[str, Any] = {"behavior": "allow", "downloadPath": str(folder)}
        if self.watcher.scopes.isolated:  # the events of every download, for the shares
            params["eventsEnabled"] = True
        if context is not None and context != self.watcher.default_context:
            params["browserContextId"] = context
        await self.watcher.call("Browser.setDownloadBehavior", params, deadline_s=10)

    def reset(self, scope: Scope | None = None) -> None:
        """Set downloads back to the downloads folder (a client that changed
        where they go has left; Chromium would fall back to the profile's own):
        of ``scope``'s context, the client's (None: Chromium's default one)."""

        async def reset() -> None:
            try:
                await self.set_for(scope)
            except (WatcherError, TimeoutError) as exc:
                log.warning("could not set the download folder back: %s", exc)

        self.watcher.spawn(reset())

    def began(self, params: dict[str, Any]) -> None:
        guid, frame = params.get("guid"), params.get("frameId")
        if not isinstance(guid, str) or not self.watcher.scopes.isolated:
            return
        # A page's main frame has the page's id, an out-of-process frame its
        # target's; a frame in its page's process is found in the frame trees.
        context = self.watcher.known.context_of(frame) if isinstance(frame, str) else None
        if context is None and isinstance(frame, str):
            self._downloading[guid] = ("", None, 0)  # its scope is not known yet
            self.watcher.spawn(self._find_scope(guid, frame))
            return
        scope = self.watcher.scope_name(context) or self.watcher.scopes.home or ""
        self._downloading[guid] = (scope, context, 0)

    async def _sessions(self) -> AsyncIterator[tuple[str, str]]:
        """A session of ours on each page: the quotas' first (a page with an
        origin), then the probes' on the others (attached on need: a page at
        ``about:blank`` or ``data:`` has no quota's session, and its frames
        can download too)."""
        held = dict(self.watcher.quotas.sessions)
        for page, session in held.items():
            yield page, session
        for page, (kind, _url) in list(self.watcher.known.targets.items()):
            if kind == "page" and page not in held:
                with contextlib.suppress(WatcherError, TimeoutError):
                    probe = await self.watcher.probes.session(page)
                    if probe is not None:
                        yield page, probe

    async def _find_scope(self, guid: str, frame: str) -> None:
        """Which target's frame tree holds ``frame``: the download is its scope's."""
        async for page, session in self._sessions():
            with contextlib.suppress(WatcherError, TimeoutError):
                tree = await self.watcher.call(
                    "Page.getFrameTree", {}, session=session, deadline_s=2.0
                )
                if frame in _frame_ids(tree.get("result", {}).get("frameTree")):
                    context = self.watcher.known.context_of(page)
                    scope = self.watcher.scope_name(context) or self.watcher.scopes.home or ""
                    known = self._downloading.get(guid)
                    if known is not None:
                        self._downloading[guid] = (scope, context, known[2])
                    return
        log.warning("watcher: download %s's frame is no known page's", guid[:64])

    def moved(self, params: dict[str, Any]) -> None:
        guid, received = params.get("guid"), params.get("receivedBytes")
        known = self._downloading.get(guid) if isinstance(guid, str) else None
        if known is None or not isinstance(guid, str):
            return
        if params.get("state") != "inProgress":
            self._downloading.pop(guid, None)
            if known[0]:  # what it left is measured anew
                self.watcher.spawn(self._measure(known[0]))
            return
        scope, context, _ = known
        got = int(received) if isinstance(received, (int, float)) else 0
        self._downloading[guid] = (scope, context, got)
        share = self.share()
        if not share or not scope:  # no share, or its scope still being found
            return
        under_way = sum(b for s, _, b in self._downloading.values() if s == scope)
        held = self._held_by(scope)
        if held + under_way <= share:
            return
        self._downloading.pop(guid, None)
        self.logbook.refused(
            AGENTENV_USER,
            0,
            "Browser.downloadProgress",
            "download-share",
            f"cancelled by agentenv guard download-share: scope {scope[:64]}'s downloads "
            f"would hold {held + under_way} bytes, past its share of the downloads folder "
            f"({share} bytes, AGENTENV_SCOPE_DOWNLOAD_BYTES): delete or hand on what it "
            "downloaded (data/reset empties it)",
            action="cancelled",
            scope=scope,
        )
        self.watcher.spawn(self._cancel(guid, context))

    async def _cancel(self, guid: str, context: str | None) -> None:
        """Cancel ``guid`` in its context (each scope's in turn, if not known)."""
        contexts: list[str | None] = [context] if context is not None else [None]
        if context is None:
            contexts += [scope.context for scope in self.watcher.scopes.made.values()]
        for candidate in contexts:
            params: dict[str, Any] = {"guid": guid}
            if candidate is not None and candidate != self.watcher.default_context:
                params["browserContextId"] = candidate
            with contextlib.suppress(WatcherError, TimeoutError):
                answer = await self.watcher.call("Browser.cancelDownload", params)
                if "error" not in answer:
                    return
        log.warning("watcher: could not cancel download %s", guid[:64])

    def share(self) -> int:
        return scope_share(self.settings)

    def _held_by(self, scope: str) -> int:
        """The bytes ``scope``'s downloads folder holds, as last measured: a
        measure older than a second is taken again in a thread (the loop is
        every agent's), and this one is used meanwhile."""
        now = time.monotonic()
        known = self._held.get(scope)
        if known is None or now - known[0] >= 1.0:
            self._held[scope] = (now, known[1] if known is not None else 0)
            self.watcher.spawn(self._measure(scope))
        return known[1] if known is not None else 0

    async def _measure(self, scope: str) -> None:
        folder = self.settings.downloads_for(scope)
        total = await asyncio.get_running_loop().run_in_executor(None, folder_bytes, folder)
        self._held[scope] = (time.monotonic(), total)
