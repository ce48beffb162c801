"""The live view's doors: ``GET /live`` (the page), ``/live/frame`` (the
active tab as JPEG), ``/live/tabs`` (the scope's tabs) and ``POST
/live/input`` (a person's input).

Who may do what:

- Any token watches: an agent's its own scope, a person's (``role=human``)
  theirs, the control token the home scope or ``?scope=``. Watching is off
  the record (no entry, nothing changes in the browser).
- Only a person's token sends input; every other token's view is read-only
  and its input refused (403). A person's token opens no other door
  (:func:`agentenv.access.identify`).
- **One input path.** Each input is the pixel op a computer-use agent calls
  (:data:`LIVE_OPS`: ``input/move``, ``input/down``, ``input/up``,
  ``input/scroll``, ``input/key``, ``input/type``) or ``tabs/activate``
  (or, for ``answer``, the person's word to an agent waiting for one:
  :func:`agentenv.app.handoff.human_answer`),
  called by the same handler with the person as the caller (``via: human``,
  ``who``: their user; :mod:`agentenv.app.caller`). So the same scope check,
  the same action entry, the same password check (typed text withheld until
  the relay clears it: a password a person types is withheld as an agent's
  is) and the same log budget apply.
- **One controller at a time.** A person's input holds the scope's view for
  :data:`HOLD_S` seconds after it (:func:`take_control`); another person's
  input meanwhile is 409, naming who holds it and for how long: they watch.
- **The agents wait.** Meanwhile the scope's agents' acting commands and
  ops wait for the person to hand back (``AgentEnv.holdScope`` tells the
  relay; :func:`agentenv.app.acting.acting` holds the ops), at most
  :data:`~agentenv.protocol.control.HELD_WAIT_S`, then are refused (409, rule
  ``person-has-control``); their reads go on (relay/person_holds.py says why).
  Handing back (``answer``) lets go at once.
- A live input names no scope of its own (the view's ``?scope=`` does, and a
  person's token is held to its own scope): ``scope`` in the body is refused.
- The page's own ``fetch`` of an input is same-origin, and browsers send an
  ``Origin`` with a POST: for the live view's paths, an ``Origin`` that is
  this server's own host is taken (:func:`agentenv.access.check_origin`).
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from agentenv.app.app_errors import OpError, failure
from agentenv.app.app_requests import (
    browser_for,
    browsers_key,
    live_caller,
    lives_key,
    op_scope,
    parse,
)
from agentenv.app.caller import caller_of
from agentenv.app.handoff import human_answer
from agentenv.app.live import Live
from agentenv.app.live_page import live_page
from agentenv.app.optable import OPS, Handler
from agentenv.http import error_response, read_json
from agentenv.protocol.browser import HumanAnswer
from agentenv.protocol.control import Done, HoldScope
from agentenv.relay_link import BrowserError

__all__ = ["HOLD_S", "LIVE_INPUT_LIMIT", "LIVE_OPS", "add_live_routes", "live_op", "take_control"]

#: How long a person's input keeps the view theirs (seconds after it).
HOLD_S = 30.0

#: A live input's ``kind`` -> the op it is (docs/spec.md section 6, "Live view").
LIVE_OPS = {
    "move": "input/move",
    "down": "input/down",
    "up": "input/up",
    "wheel": "input/scroll",
    "key": "input/key",
    "text": "input/type",
    "tab": "tabs/activate",
    "answer": "human/answer",
}
#: What each live input is parsed as, and the handler it runs: the agents'
#: ops', and the person's word to a waiting agent (app/handoff.py).
_LIVE: dict[str, tuple[type[BaseModel], Handler]] = {
    **{op: (OPS[op].model, OPS[op].handler) for op in LIVE_OPS.values() if op in OPS},
    "human/answer": (HumanAnswer, human_answer),
}
#: The largest live input body (a paste of up to the op's 100,000 characters).
LIVE_INPUT_LIMIT = 512 * 1024


def live_op(body: dict[str, Any]) -> tuple[str, Any]:
    """The op a live input is, and its body as that op's model; 400 for an
    unknown kind, a ``scope`` (the view's address names it), or a bad field."""
    fields = dict(body)
    kind = fields.pop("kind", None)
    op = LIVE_OPS.get(kind) if isinstance(kind, str) else None
    if op is None:
        raise OpError(400, f"kind must be one of {', '.join(LIVE_OPS)}")
    if "scope" in fields:
        raise OpError(400, "a live input names no scope: the view's ?scope= does")
    return op, parse(_LIVE[op][0], fields)


def take_control(held: tuple[str, float] | None, who: str, now: float) -> tuple[str, float]:
    """The view's controller after ``who``'s input at ``now`` (monotonic
    seconds); 409 while another person holds it."""
    if held is not None and held[0] != who and held[1] > now:
        raise OpError(
            409,
            f"{held[0]} has control of this view for {held[1] - now:.0f} s more "
            f"({HOLD_S:.0f} s after their last input, or until they hand back): watch until then",
        )
    return (who, now + HOLD_S)


_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


async def page(request: web.Request) -> web.Response:
    """The live view's page: interactive for a person's token, read-only else."""
    identity = live_caller(request)
    return web.Response(
        text=live_page(drives=identity.human), content_type="text/html", headers=_PAGE_HEADERS
    )


async def frame(request: web.Request) -> web.Response:
    """The active tab now, as JPEG (captured only when asked): of the caller's
    scope for a user's token; of the home scope, or ``?scope=``, for the
    control token."""
    identity = live_caller(request)
    scope = op_scope(request, identity, request.query.get("scope"))
    browser = request.app[browsers_key].of(scope)
    lives = request.app[lives_key]
    live = lives.get(scope)
    if live is None or live.browser is not browser:  # a scope's browser made again
        live = lives[scope] = Live(browser)
    try:
        data = await live.frame()
    except OpError as exc:
        return error_response(exc.status, exc.message)
    return web.Response(body=data, content_type="image/jpeg", headers={"Cache-Control": "no-store"})


async def tabs(request: web.Request) -> web.Response:
    """The scope's tabs, the active one first, and an agent's request for a
    person waiting there (off the record, as watching is)."""
    identity = live_caller(request)
    browser = browser_for(request, identity, request.query.get("scope"))
    try:
        found = await browser.tabs()
    except BrowserError as exc:
        raise failure(exc) from None
    waiting = browser.waiting
    asked = (
        {
            "reason": waiting.reason,
            "who": waiting.who,
            "since": waiting.since,
            "until": waiting.until,
        }
        if waiting is not None and waiting.open
        else None
    )
    return web.json_response({"tabs": [t.model_dump(mode="json") for t in found], "request": asked})


async def live_input(request: web.Request) -> web.Response:
    """A person's input, as the op it is (:func:`live_op`), on the record as theirs."""
    identity = live_caller(request)
    if not identity.human:
        raise OpError(
            403,
            "this token may only watch: input through the live view needs a person's "
            "token (a user of role=human in AGENTENV_USERS)",
        )
    op, body = live_op(await read_json(request, LIVE_INPUT_LIMIT))
    scope = op_scope(request, identity, request.query.get("scope"))
    browser = request.app[browsers_key].of(scope)
    person = caller_of(identity, None, None, users=True)
    browser.controller = take_control(browser.controller, identity.user, time.monotonic())
    handler = _LIVE[op][1]
    try:
        # The relay holds the scope's agents' acting commands meanwhile.
        await browser.link.control(HoldScope(who=identity.user, seconds=HOLD_S), Done)
        await handler(browser, body, person)
        live = request.app[lives_key].get(scope)
        if live is not None and live.browser is browser:
            live.acted()  # the view's next frame shows it, not a capture from before
        if op == "human/answer" and browser.controller and browser.controller[0] == identity.user:
            browser.controller = None  # handed back: the agents act again
            await browser.link.control(HoldScope(who=identity.user, seconds=0), Done)
    except BrowserError as exc:
        raise failure(exc) from None
    return web.json_response({"ok": True, "op": op})


def add_live_routes(app: web.Application) -> None:
    app.router.add_get("/live", page)
    app.router.add_get("/live/frame", frame)
    app.router.add_get("/live/tabs", tabs)
    app.router.add_post("/live/input", live_input)
