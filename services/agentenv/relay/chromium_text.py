"""How Chromium writes its CDP messages, read with no rule: parsed, written
as Chromium writes them, an event's parts, a big answer's ends. No I/O.
The rules on them are :mod:`agentenv.relay.downstream`'s."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["answer", "answer_ends", "canonical", "event", "loads"]

#: A big answer's id, and its session, as Chromium writes them
#: (``{"id":N,"result":`` … ``,"sessionId":"S"}``; checked on the shipped
#: Chromium): a string in the result cannot end the message this way, its
#: quotes being escaped.
_ANSWER_HEAD = re.compile(r'\{"id":(\d{1,10}),"result":')
_ANSWER_TAIL = re.compile(r',"sessionId":"([0-9A-Za-z._-]{1,128})"\}\Z')


def answer_ends(data: str) -> tuple[str | None, int] | None:
    """The session (None: the browser's) and id of an answer with a result,
    read from its head and tail only; None when ``data`` does not begin as
    one (an error, an event, the relay's own negative ids)."""
    head = _ANSWER_HEAD.match(data)
    if head is None:
        return None
    tail = _ANSWER_TAIL.search(data, max(0, len(data) - 200))
    return (tail.group(1) if tail is not None else None, int(head.group(1)))


def loads(data: str) -> Any:
    """A message of Chromium's, parsed; None if it is not JSON. Chromium
    writes a renderer's lone surrogates as ``\\ud800`` escapes, which orjson
    refuses: the standard parser takes them (rarely needed, so tried second)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return json.loads(data)
        except ValueError:
            return None


def canonical(data: str) -> str | None:
    """``data`` written as Chromium writes it (``method``, else ``id``, first;
    no spaces); None when it is not a JSON object."""
    message = loads(data)
    if not isinstance(message, dict):
        return None
    for first in ("method", "id"):
        if first in message:
            rest = {k: v for k, v in message.items() if k != first}
            return orjson.dumps({first: message[first], **rest}).decode()
    return data  # neither an event nor an answer (an error with no id): as it came


def answer(message: dict[str, Any], result: dict[str, Any]) -> str:
    """Chromium's answer (``message``) to a client's command, with ``result``
    in place of its own."""
    return orjson.dumps({**message, "result": result}).decode()


def event(data: str) -> tuple[str, dict[str, Any], str | None] | None:
    """An event's method, params and session, or None if it is not one."""
    message = loads(data)
    if not isinstance(message, dict):
        return None
    method, params, session = message.get("method"), message.get("params"), message.get("sessionId")
    if not isinstance(method, str) or not isinstance(params, dict):
        return None
    return method, params, session if isinstance(session, str) else None
