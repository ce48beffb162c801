"""The relay's HTTP commands that act: ``PUT /json/new?<url>``,
``/json/close/<id>`` and ``/json/activate/<id>``. Each is on the record as
the CDP command it stands for, checked by the guard and kept to the caller's
scope.

``/json/new?<url>`` is decoded once, as Chromium decodes it, checked, and the
tab is opened by the relay itself with ``Target.createTarget``: the raw query
never reaches Chromium, so the check and the browser cannot read it apart. It
takes only PUT, as Chromium does: a GET can come from any web page the user
visits (an ``<img>`` sends one, with no ``Origin``), and with no users
configured it would open tabs in the computer.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

import aiohttp
from aiohttp import web

from agentenv.http import error_response
from agentenv.relay import discovery, guard
from agentenv.relay.errors import RelayError, UpstreamError
from agentenv.relay.requests import (
    TARGET_ID,
    client_address,
    client_key,
    http_entry,
    identity_of,
    in_scope,
    logbook_key,
    scope_of,
    settings_key,
    upstream_json,
    watcher_key,
)

__all__ = ["json_activate", "json_close", "json_new", "json_new_get", "new_tab_url"]

_error = error_response


def new_tab_url(raw_query: str) -> str:
    """``/json/new``'s URL as Chromium reads it: the raw query without the
    ``token=``/``user=``/``tag=`` pairs the relay read, percent-decoded once."""
    kept = [p for p in raw_query.split("&") if p.split("=", 1)[0] not in ("token", "user", "tag")]
    return unquote_to_bytes("&".join(kept)).decode("utf-8", errors="replace")


async def json_new_get(request: web.Request) -> web.Response:
    """GET /json/new: refused, as Chromium refuses it (a drive-by page's verb)."""
    answer = _error(
        405,
        "GET /json/new is refused, as Chromium refuses it: any web page can send a GET "
        "(an <img>) and would open tabs here; send PUT /json/new?<url>",
    )
    answer.headers["Allow"] = "PUT"
    return answer


async def json_new(request: web.Request) -> web.Response:
    identity = identity_of(request)
    settings = request.app[settings_key]
    logbook = request.app[logbook_key]
    url = new_tab_url(request.rel_url.raw_query_string)
    params = {"url": url or "about:blank"}
    scope = await scope_of(request, identity)
    entry = http_entry(request, identity, "Target.createTarget", params, scope)
    verdict = guard.check_url(params["url"])
    if verdict is not None:
        logbook.end_command(entry, False, verdict.message, guard=verdict.as_entry())
        raise RelayError(verdict.message, 403)
    try:
        context = scope.context if scope is not None else None
        opened = await request.app[watcher_key].create_target(params["url"], context)
    except RelayError as exc:
        logbook.end_command(entry, False, exc.message)
        raise
    logbook.end_command(entry, True, opened=opened)
    listed = await upstream_json(request, "/json/list")
    found = next(
        (t for t in listed if isinstance(t, dict) and t.get("id") == opened),
        {"id": opened, "type": "page", "url": params["url"], "title": ""},
    )
    upstream = f"{settings.chromium_host}:{settings.chromium_port}"
    return web.json_response(discovery.rewrite(found, upstream, client_address(request)))


async def _json_target_op(request: web.Request, op: str, method: str) -> web.Response:
    identity = identity_of(request)
    settings = request.app[settings_key]
    logbook = request.app[logbook_key]
    target = request.match_info["id"]
    if not TARGET_ID.match(target):
        # The id goes into a URL of Chromium's: nothing but an id may (../list).
        raise RelayError("no such target: ids are letters, digits and dashes (/json/list)", 404)
    params = {"targetId": target}
    scope = await scope_of(request, identity)
    entry = http_entry(request, identity, method, params, scope)
    if not in_scope(request, scope, target):
        logbook.end_command(
            entry,
            False,
            "No target with given id found",
            guard={"rule": "scope", "action": "blocked"},
        )
        raise RelayError(f"no such target {target[:64]!r}: list pages with /json/list", 404)
    verdict = guard.check(
        method, params, str(settings.downloads_dir), request.app[watcher_key].target
    )
    if verdict is not None:
        logbook.end_command(entry, False, verdict.message, guard=verdict.as_entry())
        raise RelayError(verdict.message, 403)
    url = f"{settings.chromium_http}/json/{op}/{target}"
    try:
        async with request.app[client_key].get(url) as answer:
            text = await answer.text()
    except (aiohttp.ClientError, OSError, TimeoutError):
        logbook.end_command(entry, False, "Chromium is not answering")
        raise UpstreamError("Chromium is not answering; retry when /readyz says ready") from None
    logbook.end_command(entry, answer.status == 200, None if answer.status == 200 else text)
    return web.Response(status=answer.status, text=text, content_type="text/plain")


async def json_close(request: web.Request) -> web.Response:
    return await _json_target_op(request, "close", "Target.closeTarget")


async def json_activate(request: web.Request) -> web.Response:
    return await _json_target_op(request, "activate", "Target.activateTarget")
