"""A handoff an agent asks for (issue 44, item 3): ``request_human {reason,
timeout_s?}``, answered when a person hands back through the live view.

- **The request is on the record**: an action entry of the agent's (``op:
  request_human``, ``args: {reason, timeout_s}``), open while it waits and
  ended when it is answered (ok), or not ok with why (no answer in time). An
  agent whose HTTP call went away still holds the scope's one request until
  its timeout (aiohttp does not cancel a handler whose client left). The
  person's word is an entry of theirs (``via: human``, ``op: human/answer``,
  ``args: {word, note}``); what they did meanwhile, their inputs, lies
  between the two.
- **One request at a time a scope**: a second while one waits is 409; the
  first's reason is not echoed to the second caller (it may be another
  agent of the scope), only that one waits and since when.
- **Bounded**: ``timeout_s`` (default 300, at most 3600). Past it the agent
  gets 504 saying no person answered and the request is withdrawn; a word
  sent after that is 409.
- **The person's word**: ``done`` (handed back, the task can go on) or
  ``cannot`` (they could not either); both answer the agent's call with
  ``{word, who, note}`` (``note`` null when none): the agent decides what ``cannot`` means for it.
- The request takes no control away by itself: the agent's other calls go
  on while it waits, until a person's input holds the scope (their acting
  calls then wait: relay/person_holds.py, app/acting.py; one person at a
  time: app/live_doors.py). ``request_human`` itself is never held. The
  harness asks the same way with its ``wait_for_human`` step
  (harness/human_steps.py).
- ``/metrics``' ``agentenv_human_requests_waiting`` counts scopes whose agent
  waits (:meth:`agentenv.app.op_browser.Browsers.waiting`); the live view
  shows the reason and the two words to a person of the scope.
"""

from __future__ import annotations

import asyncio
import time

from agentenv.app.acting import acting
from agentenv.app.app_errors import OpError
from agentenv.app.caller import Caller
from agentenv.app.op_browser import Browser, Waiting
from agentenv.protocol.answers import HumanAnswered, OpDone
from agentenv.protocol.browser import HumanAnswer, RequestHuman

__all__ = ["human_answer", "request_human"]


async def request_human(browser: Browser, body: RequestHuman, caller: Caller) -> HumanAnswered:
    """Wait (bounded) for a person of the scope to hand back."""
    if browser.waiting is not None and browser.waiting.open:
        since = time.strftime("%H:%M:%S", time.gmtime(browser.waiting.since))
        raise OpError(
            409,
            f"a request for a person already waits in this scope (since {since} UTC): "
            "wait for its answer, then ask again",
        )
    now = time.time()
    future: asyncio.Future[tuple[str, str, str | None]] = asyncio.get_running_loop().create_future()
    waiting = Waiting(body.reason, caller.who, now, now + body.timeout_s, future)
    browser.waiting = waiting
    try:
        async with acting(browser, caller, "request_human", body) as ctx:
            try:
                word, who, note = await asyncio.wait_for(asyncio.shield(future), body.timeout_s)
            except TimeoutError:
                said = f"no person answered within {body.timeout_s:g} s"
                ctx.ok, ctx.error = False, said
                raise OpError(
                    504, f"{said}: the request is withdrawn; ask again, or go on without one"
                ) from None
    finally:
        if not future.done():
            future.cancel()  # a word sent now finds none waiting
        if browser.waiting is waiting:
            browser.waiting = None
    return HumanAnswered(word=word, who=who, note=note, entries=list(waiting.entries))


async def human_answer(browser: Browser, body: HumanAnswer, caller: Caller) -> OpDone:
    """A person's word to the agent waiting in their scope, on the record as theirs."""
    waiting = browser.waiting
    if waiting is None or not waiting.open:
        raise OpError(409, "no agent waits for a person in this scope: nothing to hand back")
    async with acting(browser, caller, "human/answer", body):
        if waiting.open:
            waiting.answer.set_result((body.word, caller.who, body.note))
    return OpDone()
