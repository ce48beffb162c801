"""Aiming and taking one frame's picture: the tab it shows, its page
loaded, and a capture that survives its tab closing under it.

Captures go through the relay as ``agentenv`` (:mod:`agentenv.relay_link`),
so they are not on the record and never bring a tab to the front. A
:class:`~.recording_life.Recording` owns one :class:`Camera` and decides when a
frame is taken (:mod:`.bursts`); this module decides what it shows.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from agentenv.calls import SESSION_GONE
from agentenv.log.redact import redact_cut
from agentenv.protocol.control import TabOrder, Tabs
from agentenv.protocol.recording import ImageType
from agentenv.recorder.video import Video
from agentenv.relay_link import (
    CAPTURE_DEADLINE_S,
    SECOND_CAPTURE_S,
    BrowserError,
    BrowserLink,
    CdpError,
    active_tab,
    capture,
    pages,
)

__all__ = ["FRAME_WAIT_S", "LOAD_WAIT_S", "Aim", "Camera"]

#: How long a frame waits for its tab's page to finish loading.
LOAD_WAIT_S = 5.0
#: How long one frame may take to find its tab and capture it, its tabs
#: closing under it; a try begins only with :data:`TRY_LEAST_S` left.
FRAME_WAIT_S = 20.0
TRY_LEAST_S = 2.0
#: How long the relay's front tab may still name a tab just closed.
_FRONT_WAIT_S = 1.0
#: How many tabs one frame tries when each closes under its capture.
_TAB_TRIES = 3
#: Chromium's answer to a command on a page being closed, and how long such
#: a page is given to leave the tab list.
_CLOSING = "Not attached to an active page"
_CLOSING_WAIT_S = 1.0


@dataclass
class Aim:
    """The tab a frame shows and its URL, as far as the frame got."""

    tab: str | None
    url: str | None = None


@dataclass
class Camera:
    """One recording's pictures, on its link to the relay (in its scope)."""

    link: BrowserLink
    #: The video (``start.video``), fed the same picture when its tab is shot.
    video: Video | None = None
    #: When each frame's picture was taken (its ``at`` is when the frame began).
    shot_at: dict[int, float] = field(default_factory=dict)
    #: Each tab's last picture: a page that cannot paint (a dialog) gives it.
    _last: dict[str, tuple[bytes, ImageType]] = field(default_factory=dict)

    def release(self) -> None:
        """Let go of the pictures kept (the recording ended)."""
        self._last.clear()
        self.shot_at.clear()
        self.video = None

    async def page_loaded(self, tab: str, until: float) -> bool:
        """Wait for ``tab``'s page to have loaded, at most :data:`LOAD_WAIT_S`
        and never past ``until`` (monotonic); False if it cannot say.

        A navigation in flight (the relay hears its main frame start loading,
        before the new page answers) is waited for, so a slow page's frame
        shows the new page, not the old one still on screen."""
        deadline = min(time.monotonic() + LOAD_WAIT_S, until)
        try:
            session = await self.link.session(tab)
            while time.monotonic() < deadline:
                known = await self.link.control(
                    Tabs(), TabOrder, deadline_s=max(0.2, min(2.0, deadline - time.monotonic()))
                )
                if tab in known.loading:
                    await asyncio.sleep(0.05)
                    continue
                try:
                    result = await self.link.call(
                        "Runtime.evaluate",
                        {"expression": "document.readyState", "returnByValue": True},
                        session=session,
                        deadline_s=max(0.2, deadline - time.monotonic()),
                    )
                except CdpError:
                    # The document went away under the call (a navigation): ask again.
                    await asyncio.sleep(0.05)
                    session = await self.link.session(tab)
                    continue
                if result.get("result", {}).get("value") == "complete":
                    return True
                await asyncio.sleep(0.05)
        except (BrowserError, CdpError):
            return False
        return True  # loading past the limit: frame it as it is

    async def _open_tabs(self) -> dict[str, dict[str, Any]]:
        return {p["targetId"]: p for p in await pages(self.link)}

    async def front(self, aim: Aim) -> dict[str, dict[str, Any]]:
        """Aim at ``aim.tab`` if it is open, else at the tab in front; the open tabs.

        The relay hears a tab close on its own connection to Chromium, so
        just after a close it may still name the closed tab as the one in
        front: it is asked again for up to :data:`_FRONT_WAIT_S`, then the
        first open tab is taken."""
        open_tabs = await self._open_tabs()
        if aim.tab in open_tabs:
            return open_tabs
        aim.url = None
        end = time.monotonic() + _FRONT_WAIT_S
        while True:
            aim.tab = await active_tab(self.link)
            if aim.tab is None:
                raise BrowserError("no tab is open")
            open_tabs = await self._open_tabs()
            if aim.tab in open_tabs:
                return open_tabs
            if time.monotonic() > end:
                break
            await asyncio.sleep(0.1)
        if not open_tabs:
            raise BrowserError("no tab is open")
        aim.tab = next(iter(open_tabs))
        return open_tabs

    async def gone(self, tab: str, exc: BrowserError) -> bool:
        """Whether ``tab`` went away under a capture that failed with ``exc``.
        A page being closed answers "Not attached to an active page", and its
        session ends, while it is still listed: it is given
        :data:`_CLOSING_WAIT_S` to go. Not knowing (the tab list not
        answering) counts as not gone."""
        closing = isinstance(exc, CdpError) and (
            _CLOSING in exc.message or exc.code == SESSION_GONE["code"]
        )
        try:
            if tab not in await self._open_tabs():
                return True
            if not closing:
                return False
            end = time.monotonic() + _CLOSING_WAIT_S
            while time.monotonic() < end:
                await asyncio.sleep(0.1)
                if tab not in await self._open_tabs():
                    return True
        except BrowserError:
            pass
        return False

    async def picture(self, aim: Aim, index: int) -> tuple[bytes, ImageType]:
        """Frame ``index``'s picture, ``aim`` left at the tab and URL it shows.

        A tab that closes while its frame waits or is captured (the agent's
        last act was closing it: Chromium answers the capture "Session with
        given id not found", "Not attached to an active page", or never)
        gives way to the tab in front, whose page is waited for in turn; a
        session that ended under a tab still open gives way to a new one.
        At most :data:`_TAB_TRIES` tries, all within :data:`FRAME_WAIT_S`
        (each later try's load wait and capture cut to the time left). A page
        that cannot paint (a dialog) gives its last capture, as it was.
        """
        end = time.monotonic() + FRAME_WAIT_S
        why = f"the tabs closed under {_TAB_TRIES} captures in a row"
        for _ in range(_TAB_TRIES):
            if end - time.monotonic() < TRY_LEAST_S:
                why = f"the tabs closed under its captures for {FRAME_WAIT_S:.0f} s"
                break
            await self.front(aim)
            tab = aim.tab
            assert tab is not None
            answered = await self.page_loaded(tab, end - TRY_LEAST_S / 2)
            open_tabs = await self.front(aim)  # it may have closed while loading
            if aim.tab != tab:
                continue  # the tab in front, its own page waited for
            # The URL shown when the capture is taken (after the load wait).
            raw = str(open_tabs[tab].get("url", ""))
            aim.url = safe_url(raw) if raw else None
            session: str | None = None
            try:
                session = await self.link.session(tab)
                if not answered and tab in self._last:
                    raise BrowserError("the page does not answer (a dialog?)")
                left = end - time.monotonic() - SECOND_CAPTURE_S
                left = min(CAPTURE_DEADLINE_S, max(TRY_LEAST_S / 2, left))
                data = await capture(self.link, tab, "jpeg", 80, deadline_s=left)
            except (BrowserError, CdpError) as exc:
                if await self.gone(tab, exc):
                    continue  # it closed under the capture: the tab in front
                if isinstance(exc, CdpError) and exc.code == SESSION_GONE["code"]:
                    if session is not None:  # it ended under a tab still open
                        self.link.forget(tab, session)
                    continue
                if tab not in self._last:
                    raise
                return self._last[tab]
            self._last[tab] = (data, "jpeg")
            self.shot_at[index] = time.time()
            if self.video is not None and tab == self.video.tab:
                self.video.picture(data, self.shot_at[index])  # the same picture
            return data, "jpeg"
        raise BrowserError(why)


def safe_url(url: str) -> str:
    """A frame's URL as the log writes it: credentials out, cut when long."""
    redacted = redact_cut(url)
    return redacted if isinstance(redacted, str) else str(redacted["cut"])
