"""The HTTP side of the ``log`` op and the data ops (``data/get``,
``data/add``, ``data/reset``; control token): reading the body, choosing the
scope, running the file work off the event loop. What they do to the
browser is :mod:`agentenv.app.browser_data`."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from agentenv.app import browser_data
from agentenv.app.app_errors import OpError
from agentenv.app.app_requests import (
    acting_caller,
    answer,
    browser_for,
    browser_key,
    browsers_key,
    op_scope,
    parse,
    reader_key,
    require_control,
    scopes_key,
    settings_key,
)
from agentenv.app.peers import recorder_call
from agentenv.http import BODY_LIMIT, read_body, read_json
from agentenv.log.lines import iso_ms
from agentenv.opened import opened_of
from agentenv.protocol.browser import Empty, ScopeOnly
from agentenv.protocol.data import ARCHIVE_LIMIT, ArchiveError, pack, unpack
from agentenv.protocol.log import LogRequest, page_bytes

log = logging.getLogger("agentenv.app")

__all__ = ["data_op", "log_op"]


async def log_op(request: web.Request) -> web.Response:
    require_control(request)
    ask: LogRequest = parse(LogRequest, await read_json(request, BODY_LIMIT))
    reader = request.app[reader_key]
    page = await asyncio.get_running_loop().run_in_executor(None, reader.read, ask.after, ask.limit)
    return web.Response(body=page_bytes(page.lines, page.last), content_type="application/json")


async def data_op(request: web.Request, name: str) -> web.StreamResponse:
    """data/get, data/add, data/reset (control token)."""
    identity = require_control(request)
    who = acting_caller(request, identity)
    loop = asyncio.get_running_loop()
    if name == "data/get":
        ask: ScopeOnly = parse(ScopeOnly, await read_json(request, BODY_LIMIT))
        scope = op_scope(request, identity, ask.scope)
        saved = await browser_data.state(request.app[browsers_key].of(scope))
        scopes = request.app[scopes_key]
        # The scope's own lines (two scopes or more): its browser's record only.
        only = (scope or scopes.home) if scopes.isolated else None
        # A scope opened on demand: its own lines since it opened, none of a
        # closed scope that had its name (an earlier task's).
        opened = opened_of(request.app[settings_key].scopes_file).scopes().get(only or "")
        since = iso_ms(int(opened.opened * 1000)) if opened is not None else None
        lines = await loop.run_in_executor(
            None, browser_data.whole_log, request.app[reader_key], only, since
        )
        archive = await loop.run_in_executor(None, pack, saved, lines)
        return web.Response(
            body=archive,
            content_type="application/gzip",
            headers={"Content-Disposition": 'attachment; filename="browser-data.tar.gz"'},
        )
    if name == "data/add":
        raw = await read_body(request, ARCHIVE_LIMIT)
        try:
            state = await loop.run_in_executor(None, unpack, raw)
        except ArchiveError as exc:
            raise OpError(400, str(exc)) from None
        into = browser_for(request, identity, request.query.get("scope"))
        return answer("data/add", await browser_data.restore(into, state, who))
    # data/reset: every scope (the contexts of scopes other than home are
    # disposed of, and made again on their next connection).
    parse(Empty, await read_json(request, BODY_LIMIT))
    browser = request.app[browser_key]
    # The sites to clear first: a reset that would not clear them all is
    # refused before anything changes.
    seen = await loop.run_in_executor(
        None, browser_data.visited_since, request.app[reader_key], browser.reset_seq
    )
    if len(seen) > browser_data.MAX_RESET_ORIGINS:
        raise OpError(
            503,
            f"{len(seen)} sites were visited since the last reset, more than data/reset "
            f"clears ({browser_data.MAX_RESET_ORIGINS}): start a fresh computer for the next task",
        )
    # Open recordings end first, so their log and manifest upload.
    ended = await recorder_call(request.app, "end_all", b'{"reason": "reset"}')
    if ended.status != 200:
        log.warning("data/reset: the recorder could not end its recordings")
    await request.app[browsers_key].forget_others()
    settings = request.app[settings_key]
    every = browser_data.ResetDownloads(str(settings.downloads_dir), settings.scope_folders)
    return answer("data/reset", await browser_data.reset(browser, who, seen, every))
