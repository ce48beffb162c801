"""Which tab a frame shows when tabs close under it (recorder/camera.py
``Camera.picture``), against a browser whose tabs close as Chromium's do: the
page still listed while it answers "Not attached to an active page", its
session ending, the relay's front tab naming a tab just closed. (The
closing under a real capture is tests/native/test_recordings.py's.)"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentenv.calls import SESSION_GONE
from agentenv.protocol.control import TabOrder
from agentenv.recorder import camera as camera_module
from agentenv.recorder.camera import Aim, Camera
from agentenv.relay_link import CAPTURE_DEADLINE_S, BrowserError, BrowserLink, CdpError

URLS = {"B": "https://busy.test/", "F": "https://front.test/"}

#: What a capture of a tab does: answer its picture, or fail as Chromium does.
Shot = Callable[["_Browser", str], Any]


class _Browser:
    """The recorder's link to the relay: tabs that open, close and answer."""

    def __init__(self, active: str, shots: dict[str, Shot]) -> None:
        self.listed = dict(URLS)
        self.active: str | None = active
        self.shots = shots
        self.forgotten: list[tuple[str, str]] = []
        self.deadlines: list[float] = []
        self.sessions = 0

    def close(self, tab: str, after_s: float = 0.0, front: str | None = "F") -> None:
        """``tab`` leaves the list ``after_s`` from now; the relay's front tab later."""

        def gone() -> None:
            self.listed.pop(tab, None)
            loop.call_later(0.3, setattr, self, "active", front)

        loop = asyncio.get_running_loop()
        loop.call_later(after_s, gone) if after_s else gone()

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        deadline_s: float = 15.0,
    ) -> dict[str, Any]:
        if method == "Target.getTargets":
            infos = [{"targetId": t, "type": "page", "url": u} for t, u in self.listed.items()]
            return {"targetInfos": infos}
        if method == "Runtime.evaluate":
            return {"result": {"value": "complete"}}
        assert method == "Page.captureScreenshot" and session is not None, method
        self.deadlines.append(deadline_s)
        result: dict[str, Any] = await self.shots[session.split(":")[0]](self, session)
        error = result.get("error")
        if error is not None:  # as the link raises an error answer
            raise CdpError(method, error["message"], error["code"])
        return result

    async def control(
        self, params: Any, answer: type[TabOrder], deadline_s: float = 15.0
    ) -> TabOrder:
        return TabOrder(active=self.active, order=list(self.listed))

    async def session(self, tab: str) -> str:
        self.sessions += 1
        return f"{tab}:{self.sessions}"

    def forget(self, tab: str, session: str) -> None:
        self.forgotten.append((tab, session))


async def _picture(tab: str) -> dict[str, Any]:
    return {"data": base64.b64encode(tab.encode()).decode()}


async def _front(browser: _Browser, session: str) -> dict[str, Any]:
    return await _picture("F")


def _camera(browser: _Browser) -> Camera:
    return Camera(browser)  # type: ignore[arg-type]


def _frame(browser: _Browser, aim: Aim) -> bytes:
    """One frame's picture, ``aim`` left where the frame got."""
    data, _ = asyncio.run(_camera(browser).picture(aim, 0))
    return data


def test_a_page_still_listed_while_it_closes_gives_way_to_the_front_tab() -> None:
    """Its capture answers "Not attached to an active page" while the page is
    still listed for 0.4 s: the frame waits for it to go and shows the front."""

    async def closing(browser: _Browser, session: str) -> dict[str, Any]:
        browser.close("B", after_s=0.4)
        raise CdpError("Page.captureScreenshot", "Not attached to an active page", -32000)

    browser = _Browser("B", {"B": closing, "F": _front})
    aim = Aim("B")
    assert (_frame(browser, aim), aim.tab, aim.url) == (b"F", "F", URLS["F"])


def test_the_relays_front_tab_naming_the_closed_tab_is_asked_again() -> None:
    """The session ends under the capture and the tab leaves the list, but for
    0.3 s the relay still names it as the one in front."""

    async def ended(browser: _Browser, session: str) -> dict[str, Any]:
        browser.close("B")
        return {"error": SESSION_GONE}  # as the link answers it at the detach

    browser = _Browser("B", {"B": ended, "F": _front})
    aim = Aim("B")
    assert (_frame(browser, aim), aim.tab) == (b"F", "F") and browser.forgotten == []


def test_a_session_that_keeps_ending_under_an_open_tab_is_tried_anew_three_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tab stays open and each new session ends under its capture: a new
    session each try (only the one that ended forgotten), then a missing frame
    that says why, its tab and URL those it got to."""

    async def ends(browser: _Browser, session: str) -> dict[str, Any]:
        return {"error": SESSION_GONE}

    monkeypatch.setattr(camera_module, "_CLOSING_WAIT_S", 0.2)
    browser = _Browser("B", {"B": ends, "F": _front})
    aim = Aim("B")
    with pytest.raises(BrowserError, match="closed under 3 captures"):
        _frame(browser, aim)
    assert [tab for tab, _ in browser.forgotten] == ["B", "B", "B"]
    assert len({session for _, session in browser.forgotten}) == 3
    assert (aim.tab, aim.url) == ("B", URLS["B"])


def test_one_frame_ends_within_its_time_whatever_its_tabs_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A capture that never answers is cut to the frame's time left, and no
    try begins past it: the frame ends inside what an end waits for it."""
    monkeypatch.setattr(camera_module, "FRAME_WAIT_S", 3.0)

    async def hangs(browser: _Browser, session: str) -> dict[str, Any]:
        await asyncio.sleep(browser.deadlines[-1])
        raise BrowserError(f"Page.captureScreenshot got no answer within {browser.deadlines[-1]}")

    browser = _Browser("B", {"B": hangs, "F": _front})
    began = time.monotonic()
    with pytest.raises(BrowserError, match="no answer"):
        _frame(browser, Aim("B"))
    assert time.monotonic() - began < 3.0 + 1.0
    assert browser.deadlines and all(d <= min(CAPTURE_DEADLINE_S, 3.0) for d in browser.deadlines)


def test_a_link_forgets_only_the_session_that_ended() -> None:
    link = BrowserLink(None, None)  # type: ignore[arg-type]
    link._sessions["T"] = "new"
    link.forget("T", "old")  # ended, but a newer one was made since
    assert link._sessions == {"T": "new"}
    link.forget("T", "new")
    assert link._sessions == {}
