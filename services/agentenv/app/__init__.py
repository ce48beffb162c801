"""The app server: the card, health, and (as they land) browser/v1 ops and /mcp.

It reaches Chromium only through the relay, like every other client.
"""

from __future__ import annotations

__all__: list[str] = []
