"""``GET /live``: watch the computer's active tab as it changes.

On a computer of two scopes or more, an agent's token watches its own
scope's active tab; the control token watches the home scope's, or the one
``?scope=`` names.

For an agent's token or the control token (``Authorization: Bearer …``, or
``?token=`` on the page's address, which the page then drops from its
address bar and sends as a header). The page fetches ``/live/frame`` about
:data:`FPS` times a second while it is shown, and stops when it is hidden or
closed: the computer captures only while someone watches, and watchers at the
same moment share one capture.

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

__all__ = ["FPS", "PAGE", "Live"]

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
            self.captures += 1
            self._last = (time.monotonic(), data)
            return data


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; connect-src 'self'; img-src blob:; style-src 'unsafe-inline';
 script-src 'unsafe-inline'">
<title>agentenv live</title>
<style>
 body { margin: 0; background: #222; color: #ddd; font: 13px system-ui, sans-serif; }
 #screen { display: block; max-width: 100vw; max-height: calc(100vh - 24px); margin: 0 auto; }
 #status { height: 24px; line-height: 24px; padding: 0 8px; }
</style></head>
<body>
<img id="screen" alt="the active tab">
<div id="status">connecting…</div>
<script>
const query = new URLSearchParams(location.search);
const token = query.get("token");
const scope = query.get("scope");
const scoped = scope ? "?scope=" + encodeURIComponent(scope) : "";
const frameUrl = "/live/frame" + scoped;
if (token) history.replaceState(null, "", location.pathname + scoped);  // not in the address bar
const headers = token ? {Authorization: "Bearer " + token} : {};
const screen = document.getElementById("screen");
const status = document.getElementById("status");
const every = 1000 / __FPS__;
let frames = 0;
async function once() {
  const answer = await fetch(frameUrl, {headers, cache: "no-store"});
  if (!answer.ok) {
    let message = answer.status + "";
    try { message = (await answer.json()).error.message; } catch (e) {}
    status.textContent = message;
    return;
  }
  const url = URL.createObjectURL(await answer.blob());
  await new Promise((done) => {
    screen.onload = screen.onerror = () => { URL.revokeObjectURL(url); done(); };
    screen.src = url;
  });
  frames += 1;
  screen.dataset.frames = String(frames);
  status.textContent = "live · " + new Date().toLocaleTimeString();
}
async function loop() {
  for (;;) {
    const began = performance.now();
    if (!document.hidden) {
      try { await once(); } catch (e) { status.textContent = "the computer is not answering"; }
    }
    await new Promise((r) => setTimeout(r, Math.max(20, every - (performance.now() - began))));
  }
}
loop();
</script>
</body></html>
""".replace("__FPS__", str(FPS))
