"""The computer's own connection to the browser: through the relay, as ``agentenv``.

Used by the app server and the recorder. One CDP connection to the relay
with the control token, made on first use and again after it drops. Its
commands outside an action are the computer's own reads and are not logged;
an acting op opens an action first (:meth:`BrowserLink.action`), whose scope
is this connection, so its commands and the tab events they cause are
credited to it. :func:`capture` takes a screenshot without bringing the tab
to the front.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import orjson
from pydantic import ValidationError

from agentenv.calls import Calls
from agentenv.errors import AgentEnvError
from agentenv.protocol.control import (
    CONTROL_METHODS,
    CONTROL_RESULTS,
    Begun,
    ControlParams,
    ControlResult,
    Identified,
    TabOrder,
    Tabs,
)
from agentenv.protocol.credentials import REVEAL
from agentenv.protocol.error_body import guard_rule
from agentenv.protocol.urls import tab
from agentenv.settings import Settings

__all__ = ["BrowserError", "BrowserLink", "CdpError", "active_tab", "capture", "pages", "visible"]

log = logging.getLogger("agentenv.relay_link")

R = TypeVar("R", bound=ControlResult)

#: Each AgentEnv.* params model's method.
_CONTROL_METHOD = {model: name for name, model in CONTROL_METHODS.items()}

#: A capture still unanswered after this is followed by a second: Chromium
#: answers a capture of a tab behind the active one only once another arrives.
SECOND_CAPTURE_S = 0.5
CAPTURE_DEADLINE_S = 10.0


class BrowserError(AgentEnvError):
    """The browser could not be reached (HTTP 503 for a caller).

    ::

        BrowserError
        └── CdpError     Chromium (or the relay's guard) refused a command
    """


class CdpError(BrowserError):
    """Chromium (or the relay's guard) refused a command: its CDP error
    ``code`` and ``message``, and the guard's ``rule`` when a guard refused it
    (:func:`agentenv.protocol.error_body.guard_rule`)."""

    def __init__(self, method: str, message: str, code: int = 0) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method
        self.message = message
        self.code = code
        self.rule = guard_rule(message)


@dataclass
class ActionContext:
    entry: int
    ok: bool = True
    error: str | None = None
    #: A refusal of the program's own: ``{"rule": ..., "action": ...}``.
    guard: dict[str, str] | None = None


class BrowserLink:
    def __init__(
        self, settings: Settings, http: aiohttp.ClientSession, scope: str | None = None
    ) -> None:
        self.settings = settings
        self.http = http
        #: The scope the link acts in (``AgentEnv-Scope``); None: every scope.
        self.scope = scope
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._calls = Calls()
        self._sessions: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._listeners: dict[tuple[str | None, str], asyncio.Queue[dict[str, Any]]] = {}
        self.conn = 0
        #: Counts connections to the relay: what the relay granted on an
        #: earlier one (AgentEnv.grant) died with it.
        self.generation = 0
        #: Called with every event this connection gets (a network log's
        #: collector on a link of its own); None: events go to listeners only.
        self.on_event: Callable[[dict[str, Any]], None] | None = None

    async def _connect(self) -> aiohttp.ClientWebSocketResponse:
        async with self._lock:
            if self._ws is not None and not self._ws.closed:
                return self._ws
            headers = {}
            if self.settings.control_token:
                headers["Authorization"] = f"Bearer {self.settings.control_token}"
            if self.scope is not None:
                headers["AgentEnv-Scope"] = self.scope
            timeout = aiohttp.ClientTimeout(total=self.settings.upstream_timeout_s)
            try:
                async with self.http.get(
                    self.settings.relay_http + "/json/version", headers=headers, timeout=timeout
                ) as answer:
                    version = await answer.json(content_type=None)
                url = version["webSocketDebuggerUrl"]
                ws = await self.http.ws_connect(
                    url,
                    headers=headers,
                    max_msg_size=self.settings.max_message_bytes,
                    heartbeat=None,
                )
            except (aiohttp.ClientError, OSError, TimeoutError, KeyError, ValueError, TypeError):
                raise BrowserError(
                    "the browser is not reachable through the relay; retry when /readyz says ready"
                ) from None
            self._ws = ws
            self._sessions.clear()
            self._reader = asyncio.create_task(self._read(ws))
            found = await self._send(ws, "AgentEnv.whoami", {}, None, 10.0)
            try:
                self.conn = Identified.model_validate(found).conn
            except ValidationError:
                raise BrowserError("AgentEnv.whoami: the relay's answer is not one") from None
            self.generation += 1
            return ws

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    continue
                message = orjson.loads(msg.data)
                if self._calls.answered(message):
                    continue
                method = message.get("method")
                if self.on_event is not None:
                    try:
                        self.on_event(message)
                    except Exception:  # one odd event costs that event, not the link
                        log.exception("an event could not be handled: %s", method)
                queue = self._listeners.get((message.get("sessionId"), method))
                if queue is not None:
                    queue.put_nowait(message.get("params") or {})
                if method == "Target.detachedFromTarget":
                    session = message.get("params", {}).get("sessionId")
                    if isinstance(session, str):
                        self._calls.detached(session)
                    for tab, known in list(self._sessions.items()):
                        if known == session:
                            del self._sessions[tab]
        finally:
            self._calls.fail(BrowserError("the relay connection closed"))
            self._sessions.clear()
            if not ws.closed:  # the reader is gone: the next call connects afresh
                with contextlib.suppress(Exception):
                    await ws.close()

    async def _send(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        method: str,
        params: dict[str, Any],
        session: str | None,
        deadline_s: float,
    ) -> dict[str, Any]:
        try:
            answer = await self._calls.send(ws, method, params, session, deadline_s)
        except TimeoutError:
            raise BrowserError(f"{method} got no answer within {deadline_s:.0f} s") from None
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            raise BrowserError("the relay connection closed") from None
        error = answer.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise CdpError(method, str(error))
            code = error.get("code")
            raise CdpError(method, str(error.get("message")), code if isinstance(code, int) else 0)
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def current(self) -> int:
        """The generation of a link that is up now: reconnected first when the
        relay went away (what it granted on an earlier one died with it)."""
        await self._connect()
        return self.generation

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        deadline_s: float = 15.0,
    ) -> dict[str, Any]:
        ws = await self._connect()
        return await self._send(ws, method, params or {}, session, deadline_s)

    async def control(self, params: ControlParams, answer: type[R], deadline_s: float = 15.0) -> R:
        """An ``AgentEnv.*`` command, its params a model; its result as
        ``answer``, the model :data:`~agentenv.protocol.control.CONTROL_RESULTS`
        names for it (the relay answering something else is a BrowserError)."""
        assert CONTROL_RESULTS[type(params)] is answer, (type(params), answer)
        method = _CONTROL_METHOD[type(params)]
        # REVEAL: a credential's values travel this hop in clear (and only
        # this one: every other dump of them is masked, protocol/credentials.py).
        sent = params.model_dump(mode="json", exclude_none=True, context=REVEAL)
        found = await self.call(method, sent, deadline_s=deadline_s)
        try:
            return answer.model_validate(found)
        except ValidationError:
            raise BrowserError(f"{method}: the relay's answer is not one") from None

    @contextlib.contextmanager
    def events(self, method: str, session: str | None) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of ``method`` events on ``session`` while the block runs."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._listeners[(session, method)] = queue
        try:
            yield queue
        finally:
            self._listeners.pop((session, method), None)

    async def session(self, tab: str) -> str:
        """A flattened session on ``tab`` for this connection (made once)."""
        await self._connect()
        known = self._sessions.get(tab)
        if known is not None:
            return known
        result = await self.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        session = str(result["sessionId"])
        self._sessions[tab] = session
        return session

    def forget(self, tab: str, session: str) -> None:
        """Forget ``session`` on ``tab`` (Chromium said it has ended; not a
        newer one made since): the next :meth:`session` attaches anew."""
        if self._sessions.get(tab) == session:
            del self._sessions[tab]

    @contextlib.asynccontextmanager
    async def action(
        self,
        *,
        via: str,
        who: str,
        role: str | None = None,
        op: str | None = None,
        tool: str | None = None,
        call: str | None = None,
        args: Any = None,
        tab: str | None = None,
        typing: list[str] | None = None,
        acts: str = "acting",
        scope: list[int | str] | None = None,
    ) -> AsyncIterator[ActionContext]:
        """An action on the record around the commands made inside it.

        Its scope is this connection, unless ``scope`` names others (a
        Playwright MCP's connection tag).
        """
        await self._connect()
        params: dict[str, Any] = {"via": via, "who": who, "scope": scope or [self.conn]}
        for key, value in (
            ("role", role),
            ("op", op),
            ("tool", tool),
            ("call", call),
            ("args", args),
            ("tab", tab),
        ):
            if value is not None:
                params[key] = value
        if typing:
            params["typing"] = typing
        if acts != "acting":
            params["acts"] = acts
        begun = Begun.model_validate(await self.call("AgentEnv.beginAction", params))
        context = ActionContext(begun.entry)
        try:
            yield context
        except BaseException as exc:
            context.ok = False
            context.error = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise
        finally:
            end: dict[str, Any] = {"entry": context.entry, "ok": context.ok}
            if context.error:
                end["error"] = context.error
            if context.guard:
                end["guard"] = context.guard
            with contextlib.suppress(BrowserError, CdpError):
                await self.call("AgentEnv.endAction", end)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


async def capture(
    link: BrowserLink,
    tab: str,
    fmt: str,
    quality: int | None = None,
    fast: bool = False,
    deadline_s: float = CAPTURE_DEADLINE_S,
) -> bytes:
    """A screenshot of ``tab``, never bringing it to the front.

    A capture still unanswered after :data:`SECOND_CAPTURE_S` is followed by
    a second; the first answer wins; each has ``deadline_s``. ``fast``
    asks Chromium to encode for speed rather than size (the live view: it
    took the view's cost at five frames a second from 11.8 % of a core to
    9.8 %; a scaled ``clip`` made it 14.7 %, Chromium painting anew).
    """
    import base64

    session = await link.session(tab)
    params: dict[str, Any] = {"format": fmt}
    if fmt == "jpeg":
        params["quality"] = quality or 80
    if fast:
        params["optimizeForSpeed"] = True

    def shot() -> asyncio.Future[dict[str, Any]]:
        return asyncio.ensure_future(
            link.call("Page.captureScreenshot", params, session=session, deadline_s=deadline_s)
        )

    tasks = {shot()}
    done, _ = await asyncio.wait(tasks, timeout=SECOND_CAPTURE_S)
    if not done:
        tasks.add(shot())
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    answered = [t for t in done if t.exception() is None]  # both may fail at once
    answer = answered[0] if answered else next(iter(done))
    for task in tasks - {answer}:
        task.cancel()  # still waiting; one done is read already
    return base64.b64decode(answer.result()["data"])


async def pages(link: BrowserLink) -> list[dict[str, Any]]:
    """The browser's tabs (web page targets, not its own UI), in Chromium's order."""
    infos = (await link.call("Target.getTargets"))["targetInfos"]
    return [t for t in infos if tab((str(t.get("type")), str(t.get("url", ""))))]


async def visible(link: BrowserLink, tab: str, deadline_s: float = 2.0) -> bool:
    """Whether ``tab`` is the one Chromium shows (``document.visibilityState``)."""
    try:
        session = await link.session(tab)
        result = await link.call(
            "Runtime.evaluate",
            {"expression": "document.visibilityState", "returnByValue": True},
            session=session,
            deadline_s=deadline_s,
        )
    except (BrowserError, CdpError):
        return False
    return bool(result.get("result", {}).get("value") == "visible")


async def active_tab(link: BrowserLink) -> str | None:
    """The tab in front (as the relay keeps it), else the first tab, else None."""
    known = (await link.control(Tabs(), TabOrder)).active
    if known is not None:
        return str(known)
    found = await pages(link)
    shown = await asyncio.gather(*(visible(link, p["targetId"]) for p in found))
    for page, front in zip(found, shown, strict=True):
        if front:
            return str(page["targetId"])
    return str(found[0]["targetId"]) if found else None
