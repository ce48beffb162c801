"""``navigate``, ``screenshot`` and the pixel actions ``input/*`` on the active
tab, as computer-use agents call them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agentenv.app.acting import acting, reading
from agentenv.app.app_errors import OpError
from agentenv.app.caller import Caller
from agentenv.app.keys import key_events
from agentenv.app.op_browser import Browser
from agentenv.protocol.answers import Navigated, OpDone
from agentenv.protocol.browser import (
    InputButton,
    InputClick,
    InputKey,
    InputMove,
    InputScroll,
    InputType,
    Navigate,
    Screenshot,
)
from agentenv.relay_link import capture

__all__ = [
    "Image",
    "input_click",
    "input_down",
    "input_key",
    "input_move",
    "input_scroll",
    "input_type",
    "input_up",
    "navigate",
    "screenshot",
]


@dataclass(frozen=True)
class Image:
    data: bytes
    content_type: str


async def navigate(browser: Browser, body: Navigate, caller: Caller) -> Navigated:
    tab = await browser.tab(body.tab)
    async with acting(browser, caller, "navigate", body, tab) as ctx:
        session = await browser.link.session(tab)
        result = await browser.link.call(
            "Page.navigate", {"url": body.url}, session=session, deadline_s=60
        )
        if result.get("errorText"):
            ctx.ok, ctx.error = False, str(result["errorText"])
            raise OpError(502, f"the navigation failed: {result['errorText']}")
    return Navigated(tab=tab, url=body.url)


async def screenshot(browser: Browser, body: Screenshot, caller: Caller) -> Any:
    tab = await browser.tab(body.tab)
    async with reading(browser, caller, "screenshot", body, tab):
        data = await capture(browser.link, tab, body.format, body.quality)
    return Image(data, f"image/{body.format}")


async def _input(
    browser: Browser,
    caller: Caller,
    op: str,
    body: BaseModel,
    send: Callable[[str], Awaitable[None]],
    typing: list[str] | None = None,
) -> OpDone:
    tab = await browser.active()
    async with acting(browser, caller, op, body, tab, typing=typing):
        await send(await browser.link.session(tab))
    return OpDone()


async def input_click(browser: Browser, body: InputClick, caller: Caller) -> OpDone:
    async def send(session: str) -> None:
        base = {"x": body.x, "y": body.y}
        await browser.link.call(
            "Input.dispatchMouseEvent", {"type": "mouseMoved", **base}, session=session
        )
        for n in range(1, body.clicks + 1):
            for kind in ("mousePressed", "mouseReleased"):
                await browser.link.call(
                    "Input.dispatchMouseEvent",
                    {"type": kind, **base, "button": body.button, "clickCount": n},
                    session=session,
                )

    return await _input(browser, caller, "input/click", body, send)


async def _button(browser: Browser, body: InputButton, caller: Caller, kind: str) -> OpDone:
    async def send(session: str) -> None:
        base = {"x": body.x, "y": body.y}
        if kind == "mousePressed":  # where the press lands, as a pointer gets there first
            await browser.link.call(
                "Input.dispatchMouseEvent", {"type": "mouseMoved", **base}, session=session
            )
        await browser.link.call(
            "Input.dispatchMouseEvent",
            {"type": kind, **base, "button": body.button, "clickCount": body.clicks},
            session=session,
        )

    op = "input/down" if kind == "mousePressed" else "input/up"
    return await _input(browser, caller, op, body, send)


async def input_down(browser: Browser, body: InputButton, caller: Caller) -> OpDone:
    return await _button(browser, body, caller, "mousePressed")


async def input_up(browser: Browser, body: InputButton, caller: Caller) -> OpDone:
    return await _button(browser, body, caller, "mouseReleased")


async def input_move(browser: Browser, body: InputMove, caller: Caller) -> OpDone:
    async def send(session: str) -> None:
        await browser.link.call(
            "Input.dispatchMouseEvent",
            {"type": "mouseMoved", "x": body.x, "y": body.y},
            session=session,
        )

    return await _input(browser, caller, "input/move", body, send)


async def input_scroll(browser: Browser, body: InputScroll, caller: Caller) -> OpDone:
    async def send(session: str) -> None:
        await browser.link.call(
            "Input.dispatchMouseEvent",
            {"type": "mouseWheel", "x": body.x, "y": body.y, "deltaX": body.dx, "deltaY": body.dy},
            session=session,
        )

    return await _input(browser, caller, "input/scroll", body, send)


async def input_type(browser: Browser, body: InputType, caller: Caller) -> OpDone:
    async def send(session: str) -> None:
        await browser.link.call("Input.insertText", {"text": body.text}, session=session)

    return await _input(browser, caller, "input/type", body, send, typing=["text"])


async def input_key(browser: Browser, body: InputKey, caller: Caller) -> OpDone:
    events = key_events(body.keys)

    async def send(session: str) -> None:
        for event in events:
            await browser.link.call("Input.dispatchKeyEvent", event, session=session)

    return await _input(browser, caller, "input/key", body, send, typing=["keys"])
