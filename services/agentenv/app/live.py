"""The live view's frames: the scope's active tab, captured while watched.

The view's doors are :mod:`agentenv.app.live_doors`, its page
:mod:`agentenv.app.live_page`.

On a computer of two scopes or more, an agent's token watches its own
scope's active tab; the control token watches the home scope's, or the one
``?scope=`` names.

For an agent's token, a person's (``role=human``) or the control token
(``Authorization: Bearer …``, or ``?token=`` on the page's address, which the
page then drops from its address bar and sends as a header). The page
fetches ``/live/frame`` about :data:`FPS` times a second while it is shown,
and stops when it is hidden or closed: the computer captures only while
someone watches, and watchers at the same moment share one capture. A
person driving the view gets :data:`DRIVE_FPS` frames a second while they
act and :data:`DRIVING_S` after, and a frame as soon as each input is done
(the capture shared before it is dropped: :meth:`Live.acted`); the time
from a press to the picture showing it is ``python -m bench live-input``'s.

A frame is the active tab (as the relay keeps it) captured as JPEG through
the app's own relay connection: off the record, no domain enabled in any
page, the tab never brought to the front, so the agent sees and does exactly
what it would unwatched.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from agentenv.app.app_errors import OpError
from agentenv.app.op_browser import Browser
from agentenv.relay_link import BrowserError, CdpError, active_tab, capture

__all__ = ["DRIVE_FPS", "DRIVING_S", "FPS", "Live"]

FPS = 5
#: Frames a second while a person drives the view, and for how long after
#: their last input.
DRIVE_FPS = 10
DRIVING_S = 3.0
QUALITY = 60
#: A capture this recent is shared with the next watcher instead of a new one.
SHARE_S = 0.6 / DRIVE_FPS


@dataclass
class Live:
    browser: Browser
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _last: tuple[float, bytes] | None = None
    _acted: float = 0.0
    captures: int = 0

    def acted(self) -> None:
        """A person's input is done: no capture begun before it is shared."""
        self._acted = time.monotonic()

    async def frame(self) -> bytes:
        """The active tab now (or a capture under :data:`SHARE_S` old)."""
        async with self._lock:
            now = time.monotonic()
            last = self._last
            if last is not None and now - last[0] < SHARE_S and last[0] >= self._acted:
                return last[1]
            link = self.browser.shared
            try:
                began = time.monotonic()
                tab = await active_tab(link)
                if tab is None:
                    raise OpError(409, "no tab is open: nothing to show until one opens")
                data = await capture(link, tab, "jpeg", QUALITY, fast=True)
            except (BrowserError, CdpError) as exc:
                raise OpError(503, f"cannot capture the active tab now ({exc}); retrying") from None
            if not data:  # Chromium answers an empty picture while a tab is not painted yet
                raise OpError(503, "the active tab has no picture yet; retrying")
            self.captures += 1
            self._last = (began, data)  # when it began: an input after it is not in it
            return data
