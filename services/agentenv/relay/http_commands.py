"""The relay's HTTP commands that act: ``PUT /json/new?<url>``,
``/json/close/<id>`` and ``/json/activate/<id>``. Each is on the record as
the CDP command it stands for, and goes through the core as that command
would from a CDP client on the browser's session (:func:`_read`): the same
guard, the same scope walls, one place that decides.

``/json/new?<url>`` is decoded once, as Chromium decodes it, checked, and the
tab is opened by the relay itself with ``Target.createTarget``: the raw query
never reaches Chromium, so the check and the browser cannot read it apart. It
takes only PUT, as Chromium does: a GET can come from any web page the user
visits (an ``<img>`` sends one, with no ``Origin``), and with no users
configured it would open tabs in the computer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_to_bytes

import aiohttp
from aiohttp import web

from agentenv.http import error_response
from agentenv.relay import core, discovery
from agentenv.relay.connection import Connection
from agentenv.relay.core import Step
from agentenv.relay.decision import BAD_REQUEST, NOT_FOUND, Refuse, Send
from agentenv.relay.effects import Ended
from agentenv.relay.needs import settled
from agentenv.relay.relay_errors import RelayError, UpstreamError
from agentenv.relay.relay_requests import (
    TARGET_ID,
    client_address,
    client_key,
    client_state,
    identity_of,
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


async def _read(request: web.Request, method: str, params: dict[str, Any]) -> tuple[Step, int]:
    """The command an HTTP call stands for, read by the core as a client's
    message on the browser's session (the guard and the scope walls decide, as
    for any CDP client), and its entry begun. A refusal is decided, answered
    and recorded as for a CDP client (:func:`agentenv.relay.decision.decide`),
    and raised with its HTTP status: 404 for another scope's target (as for
    one that does not exist), 403 for the guard's others, 400 for what is not
    a command, 503 when the log is full, 429 when the agent's share is spent."""
    identity = identity_of(request)
    settings = request.app[settings_key]
    logbook = request.app[logbook_key]
    watcher = request.app[watcher_key]
    scope = await scope_of(request, identity)
    state = client_state(request, identity, request.query.get("tag"), scope)
    connection = Connection(state, str(settings.downloads_dir), logbook, watcher.holds)
    step, decision = await settled(watcher, connection.http(method, params), connection.learn)
    if isinstance(decision, Refuse) and not decision.logged:  # the log's bound: no entry
        raise RelayError(decision.why, decision.status)
    entry = logbook.begin(core.begin_of(state, step))
    if isinstance(decision, Refuse):
        logbook.end_refused(entry, decision.why, decision.guard)
        if decision.status == NOT_FOUND:  # as for a target that does not exist
            target = str(params.get("targetId", ""))[:64]
            raise RelayError(f"no such target {target!r}: list pages with /json/list", NOT_FOUND)
        raise RelayError(decision.why, decision.status)
    if not isinstance(decision, Send):
        why = f"{method} cannot be sent this way"
        logbook.end(Ended(entry, False, why))
        raise RelayError(why, BAD_REQUEST)
    if decision.guarded is not None:
        logbook.guarded(entry, decision.guarded)  # sent as the guard rewrote it
    return step, entry


async def json_new(request: web.Request) -> web.Response:
    settings = request.app[settings_key]
    logbook = request.app[logbook_key]
    url = new_tab_url(request.rel_url.raw_query_string) or "about:blank"
    step, entry = await _read(request, "Target.createTarget", {"url": url})
    try:
        opened = await request.app[watcher_key].create_target(step.params or {"url": url})
    except RelayError as exc:
        logbook.end(Ended(entry, False, exc.message))
        raise
    logbook.end(Ended(entry, True, opened=opened))
    listed = await upstream_json(request, "/json/list")
    found = next(
        (t for t in listed if isinstance(t, dict) and t.get("id") == opened),
        {"id": opened, "type": "page", "url": url, "title": ""},
    )
    upstream = f"{settings.chromium_host}:{settings.chromium_port}"
    return web.json_response(discovery.rewrite(found, upstream, client_address(request)))


async def _json_target_op(request: web.Request, op: str, method: str) -> web.Response:
    settings = request.app[settings_key]
    logbook = request.app[logbook_key]
    target = request.match_info["id"]
    if not TARGET_ID.match(target):
        # The id goes into a URL of Chromium's: nothing but an id may (../list).
        raise RelayError("no such target: ids are letters, digits and dashes (/json/list)", 404)
    step, entry = await _read(request, method, {"targetId": target})
    sent = (step.params or {}).get("targetId", target)
    url = f"{settings.chromium_http}/json/{op}/{sent}"
    try:
        async with request.app[client_key].get(url) as answer:
            text = await answer.text()
    except (aiohttp.ClientError, OSError, TimeoutError):
        logbook.end(Ended(entry, False, "Chromium is not answering"))
        raise UpstreamError("Chromium is not answering; retry when /readyz says ready") from None
    logbook.end(Ended(entry, answer.status == 200, None if answer.status == 200 else text))
    return web.Response(status=answer.status, text=text, content_type="text/plain")


async def json_close(request: web.Request) -> web.Response:
    return await _json_target_op(request, "close", "Target.closeTarget")


async def json_activate(request: web.Request) -> web.Response:
    return await _json_target_op(request, "activate", "Target.activateTarget")
