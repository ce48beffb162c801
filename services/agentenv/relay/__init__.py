"""The CDP relay: the only door to Chromium.

Every CDP client (agents, Playwright MCP, the app server, the recorder)
reaches Chromium through this program, so it is the one place that checks
who is calling and, with the action log, records what they did.

- :mod:`.access` — who is who: tokens, ``Host`` and ``Origin`` checks (pure);
- :mod:`.discovery` — ``/json/*`` answers rewritten to the relay's address (pure);
- :mod:`.proxy` — one upstream WebSocket per client, bytes moved both ways;
- :mod:`.server` — the aiohttp application tying them together.
"""

from __future__ import annotations

__all__: list[str] = []
