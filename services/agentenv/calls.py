"""Commands sent on one CDP connection and their answers, matched by id:
the one matcher under the app's and recorder's link to the relay
(:mod:`agentenv.relay_link`) and the relay's own connection to Chromium
(:mod:`agentenv.relay.watcher`). No reading loop here: each connection's
reader hands every message with an integer id to :meth:`Calls.answered`."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import aiohttp
import orjson

__all__ = ["SESSION_GONE", "Calls"]

#: The answer to a command on a session that ended under it (Chromium's
#: words and code for a session it does not have).
SESSION_GONE: dict[str, Any] = {
    "code": -32001,
    "message": "Session with given id not found (it ended while the command waited)",
}


class Calls:
    """The commands in flight on one connection, by id (from 1)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        #: The session of each command in flight that was sent on one.
        self._on: dict[int, str] = {}

    async def send(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        method: str,
        params: dict[str, Any],
        session: str | None,
        deadline_s: float,
    ) -> dict[str, Any]:
        """Send a command and wait (bounded) for its whole answer. A send that
        fails raises what the socket raised; no answer in time, TimeoutError;
        a connection that ended, what :meth:`fail` was given."""
        call = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call] = future
        message: dict[str, Any] = {"id": call, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
            self._on[call] = session
        try:
            await ws.send_str(orjson.dumps(message).decode())
            return await asyncio.wait_for(future, deadline_s)
        finally:
            self._waiting.pop(call, None)
            self._on.pop(call, None)

    def answered(self, message: dict[str, Any]) -> bool:
        """Whether ``message`` is an answer (an integer id): it ends the
        command waiting for it, if one still is."""
        call = message.get("id")
        if not isinstance(call, int):
            return False
        future = self._waiting.pop(call, None)
        if future is not None and not future.done():
            future.set_result(message)
        return True

    def detached(self, session: str) -> None:
        """``session`` ended (its tab closed): Chromium never answers the
        commands still waiting on it, so each is answered here, as Chromium
        answers a command sent on a session it no longer has."""
        for call in [c for c, on in self._on.items() if on == session]:
            future = self._waiting.pop(call, None)
            self._on.pop(call, None)
            if future is not None and not future.done():
                future.set_result({"id": call, "error": SESSION_GONE})

    def fail(self, error: Exception) -> None:
        """The connection ended: every command still waiting fails with ``error``."""
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(error)
        self._waiting.clear()
        self._on.clear()
