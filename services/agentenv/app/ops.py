"""browser/v1 ops (SPEC.md section 3), reaching Chromium only through the relay.

Each op that acts is an action on the record (:meth:`BrowserLink.action`):
``via: agentenv`` for the harness's ops, ``via: mcp`` with the tool, call
and role when the request carries ``AgentEnv-Tool-Call`` (then reading ops
are on the record too, as reading). The computer's own reads are not.

Which tab is active is what Chromium shows: the one page whose
``document.visibilityState`` is ``visible``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel

from agentenv.app.keys import KeyError_, key_events
from agentenv.app.toolcall import ToolCall
from agentenv.cdp import (
    ActionContext,
    BrowserError,
    BrowserLink,
    CdpError,
    capture,
    pages,
    visible,
)
from agentenv.protocol.browser import (
    CookiesDelete,
    CookiesGet,
    CookiesSet,
    InputClick,
    InputKey,
    InputMove,
    InputScroll,
    InputType,
    LocalStorageClear,
    LocalStorageGet,
    LocalStorageSet,
    Navigate,
    Screenshot,
    Tab,
    TabRef,
    TabsOpen,
)
from agentenv.protocol.data import BrowserState, SavedTab

__all__ = ["OPS", "Caller", "Op", "OpFailed", "Ops"]

log = logging.getLogger("agentenv.app.ops")

#: What data/reset clears per origin ("all" fails in headless Chromium).
CLEARED_STORAGE = "local_storage,indexeddb,cache_storage,service_workers,file_systems,websql"
_BLANK_PAGE = base64.b64encode(b"<!doctype html><title>agentenv</title>").decode()


class OpFailed(Exception):
    """An op that could not be done: an HTTP status and what to do next."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Caller:
    via: str  # "agentenv" or "mcp"
    who: str
    tool: ToolCall | None = None


@dataclass(frozen=True)
class Image:
    data: bytes
    content_type: str


def failure(exc: Exception) -> OpFailed:
    """The HTTP answer for a browser error."""
    if isinstance(exc, OpFailed):
        return exc
    if isinstance(exc, CdpError):
        if "agentenv guard" in exc.message:
            return OpFailed(403, exc.message)
        if "No target with given id" in exc.message or "No such target" in exc.message:
            return OpFailed(404, "no such tab: tabs/list shows the open tabs")
        return OpFailed(502, f"Chromium refused {exc.method}: {exc.message}")
    if isinstance(exc, BrowserError):
        return OpFailed(503, str(exc))
    if isinstance(exc, KeyError_):
        return OpFailed(400, str(exc))
    raise exc


def _typed_paths(args: Any, typed: set[Any]) -> tuple[Any, list[str]]:
    """The dotted paths in ``args`` whose value is one of the typed strings."""
    paths: list[str] = []

    def walk(node: Any, here: str) -> None:
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else []
        )
        for key, value in items:
            where = f"{here}.{key}" if here else str(key)
            if isinstance(value, str) and value in typed:
                paths.append(where)
            else:
                walk(value, where)

    walk(args, "")
    return args, paths


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return f"{parts.scheme}://{parts.netloc}".lower()
    return None


_COOKIE_PARAMS = (
    "name",
    "value",
    "domain",
    "path",
    "secure",
    "httpOnly",
    "sameSite",
    "expires",
    "priority",
    "sameParty",
    "sourceScheme",
    "sourcePort",
    "partitionKey",
)


def _settable(cookie: dict[str, Any]) -> dict[str, Any]:
    """A cookie as Storage.getCookies gave it, as Storage.setCookies takes it."""
    out = {k: v for k, v in cookie.items() if k in _COOKIE_PARAMS}
    if out.get("expires", 0) in (-1, 0) or cookie.get("session"):
        out.pop("expires", None)
    return out


def _cookie_matches(cookie: dict[str, Any], url: str) -> bool:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    domain = str(cookie.get("domain", "")).lower()
    bare = domain.lstrip(".")
    if domain.startswith("."):
        if host != bare and not host.endswith("." + bare):
            return False
    elif host != bare:
        return False
    path = parts.path or "/"
    cookie_path = str(cookie.get("path") or "/")
    if not (path == cookie_path or path.startswith(cookie_path.rstrip("/") + "/")):
        return False
    return not (cookie.get("secure") and parts.scheme != "https")


@dataclass
class Ops:
    link: BrowserLink
    downloads: str = ""
    #: Counts calls that switched the active tab, so a background open does
    #: not undo a switch another call made meanwhile.
    switches: int = 0
    #: Origins whose local storage this computer wrote (data/get saves them,
    #: with the origins of open tabs: Chromium cannot list them all).
    storage_origins: set[str] = field(default_factory=set)
    _storage_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    # -- helpers -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _acting(
        self,
        caller: Caller,
        op: str,
        body: BaseModel | None,
        tab: str | None = None,
        typing: list[str] | None = None,
        acts: str = "acting",
    ) -> AsyncIterator[ActionContext]:
        args: Any
        if caller.tool is not None:
            args = caller.tool.args
            if typing and args is not None and body is not None:
                # The tool's own arguments hold the typed text under names of its
                # own: every string equal to it is typed text.
                typed = {getattr(body, t, None) for t in typing} - {None, ""}
                args, paths = _typed_paths(args, typed)
                typing = paths
        else:
            args = body.model_dump(mode="json", exclude_none=True) if body is not None else None
        async with self.link.action(
            via=caller.via,
            who=caller.who,
            op=op,
            tool=caller.tool.tool if caller.tool else None,
            call=caller.tool.call if caller.tool else None,
            args=args,
            tab=tab,
            typing=typing,
            acts=acts,
        ) as ctx:
            yield ctx

    @contextlib.asynccontextmanager
    async def _reading(
        self, caller: Caller, op: str, body: BaseModel | None, tab: str | None
    ) -> AsyncIterator[None]:
        """A read: on the record only when made for a tool call."""
        if caller.tool is None:
            yield
            return
        async with self._acting(caller, op, body, tab, acts="reading"):
            yield

    async def tabs(self) -> list[Tab]:
        """The tabs, the one in front first, as the relay keeps them (it sees every
        command; a page's own visibility lies once a client emulates focus)."""
        found = await pages(self.link)
        order = await self.link.call("AgentEnv.tabs")
        front: list[str] = order.get("order") or []
        active = order.get("active")
        if active is None:  # the relay does not know yet: ask the pages
            shown = await asyncio.gather(*(visible(self.link, p["targetId"]) for p in found))
            active = next((p["targetId"] for p, v in zip(found, shown, strict=True) if v), None)
        rank = {tab: n for n, tab in enumerate(front)}
        found.sort(key=lambda p: (p["targetId"] != active, rank.get(p["targetId"], len(rank))))
        return [
            Tab(
                id=p["targetId"],
                url=p.get("url", ""),
                title=p.get("title", ""),
                active=p["targetId"] == active,
            )
            for p in found
        ]

    async def active(self) -> str:
        tabs = await self.tabs()
        for t in tabs:
            if t.active:
                return t.id
        if tabs:
            return tabs[0].id
        raise OpFailed(409, "no tab is open: open one with tabs/open")

    async def _close(self, tab: str) -> None:
        """Close ``tab`` and wait (bounded) until Chromium lists it no more, so
        the op's caller never sees a tab that is on its way out."""
        await self.link.call("Target.closeTarget", {"targetId": tab})
        for _ in range(100):
            if tab not in {p["targetId"] for p in await pages(self.link)}:
                return
            await asyncio.sleep(0.05)

    async def _tab(self, tab: str | None) -> str:
        if tab is None:
            return await self.active()
        ids = {p["targetId"] for p in await pages(self.link)}
        if tab not in ids:
            raise OpFailed(404, f"no tab {tab!r}: tabs/list shows the open tabs")
        return tab

    # -- tabs ----------------------------------------------------------------

    async def tabs_list(self, body: BaseModel, caller: Caller) -> Any:
        async with self._reading(caller, "tabs/list", None, None):
            return [t.model_dump() for t in await self.tabs()]

    async def tabs_open(self, body: TabsOpen, caller: Caller) -> Any:
        before = await self.active() if body.background else None
        switches = self.switches
        async with self._acting(caller, "tabs/open", body):
            params: dict[str, Any] = {"url": body.url or "about:blank"}
            if body.background:
                params["background"] = True
            tab = str((await self.link.call("Target.createTarget", params))["targetId"])
            if before is not None:
                # Chromium may give the new tab focus anyway: bring the old one
                # back, unless another call switched tabs meanwhile.
                if await visible(self.link, tab) and self.switches == switches:
                    await self.link.call("Target.activateTarget", {"targetId": before})
            else:
                self.switches += 1
        return {"id": tab}

    async def tabs_close(self, body: TabRef, caller: Caller) -> Any:
        tab = await self._tab(body.id)
        async with self._acting(caller, "tabs/close", body, tab):
            await self._close(tab)
        self.switches += 1
        return {}

    async def tabs_activate(self, body: TabRef, caller: Caller) -> Any:
        tab = await self._tab(body.id)
        async with self._acting(caller, "tabs/activate", body, tab):
            await self.link.call("Target.activateTarget", {"targetId": tab})
        self.switches += 1
        return {}

    # -- cookies -------------------------------------------------------------

    async def _cookies(self) -> list[dict[str, Any]]:
        return list((await self.link.call("Storage.getCookies"))["cookies"])

    async def cookies_get(self, body: CookiesGet, caller: Caller) -> Any:
        async with self._reading(caller, "cookies/get", body, None):
            cookies = await self._cookies()
        if body.urls:
            cookies = [c for c in cookies if any(_cookie_matches(c, u) for u in body.urls)]
        return {"cookies": cookies}

    async def cookies_set(self, body: CookiesSet, caller: Caller) -> Any:
        async with self._acting(caller, "cookies/set", body):
            cookies = [c.model_dump(exclude_none=True) for c in body.cookies]
            await self.link.call("Storage.setCookies", {"cookies": cookies})
        return {}

    async def cookies_delete(self, body: CookiesDelete, caller: Caller) -> Any:
        def wanted(c: dict[str, Any]) -> bool:
            return (
                (body.name is None or c.get("name") == body.name)
                and (
                    body.domain is None
                    or str(c.get("domain", "")).lstrip(".").lower()
                    == body.domain.lstrip(".").lower()
                )
                and (body.path is None or c.get("path") == body.path)
            )

        async with self._acting(caller, "cookies/delete", body):
            doomed = [c for c in await self._cookies() if wanted(c)]
            if doomed:
                session = await self.link.session(await self.active())
                for c in doomed:
                    await self.link.call(
                        "Network.deleteCookies",
                        {"name": c["name"], "domain": c["domain"], "path": c.get("path", "/")},
                        session=session,
                    )
        return {"deleted": len(doomed)}

    # -- local storage ---------------------------------------------------------

    async def _on_origin(self, origin: str, expression: str) -> Any:
        """Evaluate ``expression`` in a hidden tab at ``origin``, served blank.

        The tab loads nothing from the network: every request to the origin is
        answered with an empty page (Fetch), as Playwright's storage state
        does. The tab is closed after.
        """
        async with self._storage_lock:
            created = await self.link.call(
                "Target.createTarget", {"url": "about:blank", "background": True}
            )
            tab = str(created["targetId"])
            try:
                session = await self.link.session(tab)
                await self.link.call(
                    "Fetch.enable", {"patterns": [{"urlPattern": f"{origin}/*"}]}, session=session
                )
                with self.link.events("Fetch.requestPaused", session) as paused:
                    navigate = asyncio.create_task(
                        self.link.call("Page.navigate", {"url": f"{origin}/"}, session=session)
                    )
                    try:
                        request = await asyncio.wait_for(paused.get(), 10)
                    except TimeoutError:
                        navigate.cancel()
                        raise OpFailed(
                            502,
                            f"the page at {origin} did not load within 10 s: give the origin as "
                            "the browser shows it (the scheme it ends on, no default port)",
                        ) from None
                    await self.link.call(
                        "Fetch.fulfillRequest",
                        {
                            "requestId": request["requestId"],
                            "responseCode": 200,
                            "responseHeaders": [{"name": "Content-Type", "value": "text/html"}],
                            "body": _BLANK_PAGE,
                        },
                        session=session,
                    )
                    await navigate
                result = await self.link.call(
                    "Runtime.evaluate",
                    {"expression": expression, "returnByValue": True},
                    session=session,
                )
                if "exceptionDetails" in result:
                    detail = result["exceptionDetails"].get("text", "an exception")
                    raise OpFailed(502, f"the page at {origin} refused local storage: {detail}")
                return result.get("result", {}).get("value")
            finally:
                with contextlib.suppress(BrowserError, CdpError):
                    await self._close(tab)

    async def local_storage_get(self, body: LocalStorageGet, caller: Caller) -> Any:
        async with self._reading(caller, "local_storage/get", body, None):
            items = await self._on_origin(
                body.origin, "Object.fromEntries(Object.entries(localStorage))"
            )
        return {"origin": body.origin, "items": items or {}}

    async def local_storage_set(self, body: LocalStorageSet, caller: Caller) -> Any:
        script = (
            f"(() => {{ const items = {orjson.dumps(body.items).decode()};"
            " for (const [k, v] of Object.entries(items)) localStorage.setItem(k, v);"
            " return localStorage.length; })()"
        )
        async with self._acting(caller, "local_storage/set", body):
            await self._on_origin(body.origin, script)
        self.storage_origins.add(body.origin)
        return {}

    async def local_storage_clear(self, body: LocalStorageClear, caller: Caller) -> Any:
        async with self._acting(caller, "local_storage/clear", body):
            if body.origin is not None:
                await self._on_origin(body.origin, "localStorage.clear()")
            else:
                session = await self.link.session(await self.active())
                for origin in sorted(self.storage_origins | await self._tab_origins()):
                    await self.link.call(
                        "Storage.clearDataForOrigin",
                        {"origin": origin, "storageTypes": "local_storage"},
                        session=session,
                    )
        return {}

    async def _tab_origins(self) -> set[str]:
        return {o for o in (_origin(p.get("url", "")) for p in await pages(self.link)) if o}

    # -- data: the browser's state as an archive ----------------------------------

    async def _local_storage(self, tabs: list[Tab]) -> dict[str, dict[str, str]]:
        saved: dict[str, dict[str, str]] = {}
        read = "JSON.stringify(Object.fromEntries(Object.entries(localStorage)))"
        for tab in tabs:
            origin = _origin(tab.url)
            if origin is None or origin in saved:
                continue
            with contextlib.suppress(BrowserError, CdpError):
                session = await self.link.session(tab.id)
                result = await self.link.call(
                    "Runtime.evaluate",
                    {"expression": read, "returnByValue": True},
                    session=session,
                    deadline_s=5,
                )
                value = result.get("result", {}).get("value")
                if isinstance(value, str):
                    saved[origin] = orjson.loads(value)
        for origin in sorted(self.storage_origins - saved.keys()):
            items = await self._on_origin(origin, read)
            if isinstance(items, str):
                saved[origin] = orjson.loads(items)
        return {origin: items for origin, items in saved.items() if items}

    async def state(self) -> BrowserState:
        """Cookies, local storage per origin and tabs, as data/get saves them."""
        tabs = await self.tabs()
        return BrowserState(
            cookies=await self._cookies(),
            local_storage=await self._local_storage(tabs),
            tabs=[SavedTab(url=t.url, title=t.title, active=t.active) for t in tabs],
        )

    async def restore(self, state: BrowserState, caller: Caller) -> Any:
        """data/add: cookies, local storage and tabs back as saved."""
        async with self._acting(caller, "data/add", None):
            if state.cookies:
                await self.link.call(
                    "Storage.setCookies", {"cookies": [_settable(c) for c in state.cookies]}
                )
            for origin, items in state.local_storage.items():
                script = (
                    f"(() => {{ const items = {orjson.dumps(items).decode()};"
                    " for (const [k, v] of Object.entries(items)) localStorage.setItem(k, v); })()"
                )
                await self._on_origin(origin, script)
                self.storage_origins.add(origin)
            ordered = sorted(state.tabs, key=lambda t: t.active)  # the active one last: in front
            for tab in ordered:
                await self.link.call("Target.createTarget", {"url": tab.url or "about:blank"})
            self.switches += 1
        return {
            "cookies": len(state.cookies),
            "local_storage": len(state.local_storage),
            "tabs": len(state.tabs),
        }

    async def reset(self, caller: Caller) -> Any:
        """data/reset: one blank tab, no cookies or storage, a reset line."""
        async with self._acting(caller, "data/reset", None):
            found = await pages(self.link)
            origins = {o for o in (_origin(p.get("url", "")) for p in found) if o}
            origins |= self.storage_origins
            blank = (await self.link.call("Target.createTarget", {"url": "about:blank"}))[
                "targetId"
            ]
            for page in found:
                with contextlib.suppress(CdpError):
                    await self._close(page["targetId"])
            await self.link.call("Storage.clearCookies")
            # Storage.clearDataForOrigin answers only on a page's session.
            session = await self.link.session(blank)
            for origin in sorted(origins):
                await self.link.call(
                    "Storage.clearDataForOrigin",
                    {"origin": origin, "storageTypes": CLEARED_STORAGE},
                    session=session,
                )
            self.storage_origins.clear()
            self.switches += 1
            entry = (await self.link.call("AgentEnv.reset", {"reason": "data/reset"}))["entry"]
        return {"tab": blank, "reset": entry}

    # -- navigation and pixels ----------------------------------------------------

    async def navigate(self, body: Navigate, caller: Caller) -> Any:
        tab = await self._tab(body.tab)
        async with self._acting(caller, "navigate", body, tab) as ctx:
            session = await self.link.session(tab)
            result = await self.link.call(
                "Page.navigate", {"url": body.url}, session=session, deadline_s=60
            )
            if result.get("errorText"):
                ctx.ok, ctx.error = False, str(result["errorText"])
                raise OpFailed(502, f"the navigation failed: {result['errorText']}")
        return {"tab": tab, "url": body.url}

    async def screenshot(self, body: Screenshot, caller: Caller) -> Any:
        tab = await self._tab(body.tab)
        async with self._reading(caller, "screenshot", body, tab):
            data = await capture(self.link, tab, body.format, body.quality)
        return Image(data, f"image/{body.format}")

    async def _input(
        self,
        caller: Caller,
        op: str,
        body: BaseModel,
        send: Callable[[str], Awaitable[None]],
        typing: list[str] | None = None,
    ) -> Any:
        tab = await self.active()
        async with self._acting(caller, op, body, tab, typing=typing):
            await send(await self.link.session(tab))
        return {}

    async def input_click(self, body: InputClick, caller: Caller) -> Any:
        async def send(session: str) -> None:
            base = {"x": body.x, "y": body.y}
            await self.link.call(
                "Input.dispatchMouseEvent", {"type": "mouseMoved", **base}, session=session
            )
            for n in range(1, body.clicks + 1):
                for kind in ("mousePressed", "mouseReleased"):
                    await self.link.call(
                        "Input.dispatchMouseEvent",
                        {"type": kind, **base, "button": body.button, "clickCount": n},
                        session=session,
                    )

        return await self._input(caller, "input/click", body, send)

    async def input_move(self, body: InputMove, caller: Caller) -> Any:
        async def send(session: str) -> None:
            await self.link.call(
                "Input.dispatchMouseEvent",
                {"type": "mouseMoved", "x": body.x, "y": body.y},
                session=session,
            )

        return await self._input(caller, "input/move", body, send)

    async def input_scroll(self, body: InputScroll, caller: Caller) -> Any:
        async def send(session: str) -> None:
            await self.link.call(
                "Input.dispatchMouseEvent",
                {
                    "type": "mouseWheel",
                    "x": body.x,
                    "y": body.y,
                    "deltaX": body.dx,
                    "deltaY": body.dy,
                },
                session=session,
            )

        return await self._input(caller, "input/scroll", body, send)

    async def input_type(self, body: InputType, caller: Caller) -> Any:
        async def send(session: str) -> None:
            await self.link.call("Input.insertText", {"text": body.text}, session=session)

        return await self._input(caller, "input/type", body, send, typing=["text"])

    async def input_key(self, body: InputKey, caller: Caller) -> Any:
        events = key_events(body.keys)

        async def send(session: str) -> None:
            for event in events:
                await self.link.call("Input.dispatchKeyEvent", event, session=session)

        return await self._input(caller, "input/key", body, send, typing=["keys"])


@dataclass(frozen=True)
class Op:
    """An op: its body model, handler name, and whether it needs the control token."""

    model: type[BaseModel]
    handler: str
    control: bool


class _Empty(BaseModel):
    model_config = {"extra": "forbid"}


#: browser/v1 ops served by :class:`Ops` (``log`` and ``data/*`` live beside).
OPS: dict[str, Op] = {
    "tabs/list": Op(_Empty, "tabs_list", control=False),
    "tabs/open": Op(TabsOpen, "tabs_open", control=True),
    "tabs/close": Op(TabRef, "tabs_close", control=True),
    "tabs/activate": Op(TabRef, "tabs_activate", control=True),
    "cookies/get": Op(CookiesGet, "cookies_get", control=True),
    "cookies/set": Op(CookiesSet, "cookies_set", control=True),
    "cookies/delete": Op(CookiesDelete, "cookies_delete", control=True),
    "local_storage/get": Op(LocalStorageGet, "local_storage_get", control=True),
    "local_storage/set": Op(LocalStorageSet, "local_storage_set", control=True),
    "local_storage/clear": Op(LocalStorageClear, "local_storage_clear", control=True),
    "navigate": Op(Navigate, "navigate", control=False),
    "screenshot": Op(Screenshot, "screenshot", control=False),
    "input/click": Op(InputClick, "input_click", control=False),
    "input/move": Op(InputMove, "input_move", control=False),
    "input/scroll": Op(InputScroll, "input_scroll", control=False),
    "input/type": Op(InputType, "input_type", control=False),
    "input/key": Op(InputKey, "input_key", control=False),
}
