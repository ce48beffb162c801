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
person driving the view sees the same rate: 5 frames a second (one every
200 ms); the time from an input to the frame that shows it is not measured
yet (issue 44's bench figure).

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

__all__ = ["FPS", "Live"]

FPS = 5
QUALITY = 60
#: A capture this recent is shared with the next watcher instead of a new one.
SHARE_S = 0.6 / FPS


@dataclass
class Live:
    browser: Browser
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _last: tuple[float, bytes] | None = None
    captures: int = 0

    async def frame(self) -> bytes:
        """The active tab now (or a capture under :data:`SHARE_S` old)."""
        async with self._lock:
            now = time.monotonic()
            if self._last is not None and now - self._last[0] < SHARE_S:
                return self._last[1]
            link = self.browser.shared
            try:
                tab = await active_tab(link)
                if tab is None:
                    raise OpError(409, "no tab is open: nothing to show until one opens")
                data = await capture(link, tab, "jpeg", QUALITY, fast=True)
            except (BrowserError, CdpError) as exc:
                raise OpError(503, f"cannot capture the active tab now ({exc}); retrying") from None
            if not data:  # Chromium answers an empty picture while a tab is not painted yet
                raise OpError(503, "the active tab has no picture yet; retrying")
            self.captures += 1
            self._last = (time.monotonic(), data)
            return data
