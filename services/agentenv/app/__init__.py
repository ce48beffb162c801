"""The app server: the card, health, browser/v1 ops, /mcp and the live view.

It reaches Chromium only through the relay, like every other client
(:mod:`agentenv.relay_link`).

- :mod:`.app_server` — the aiohttp application: routes, checks, readiness, the
  card, ``/metrics``; :mod:`.app_requests` (its keys, and who calls, in which
  scope); :mod:`.peers` (the relay and the recorder, with the control token);
- :mod:`.optable` — browser/v1's ops, each with its model and handler:
  :mod:`.pixels` (navigate, screenshot, ``input/*``, with :mod:`.keys`),
  :mod:`.tabs`, :mod:`.cookies`, :mod:`.local_storage` (local storage),
  :mod:`.download_ops` (``downloads/list``, ``downloads/get``);
- :mod:`.data_ops` and :mod:`.browser_data` — ``log`` and ``data/*``: the HTTP side,
  and the browser's state as an archive, restored and cleared;
- :mod:`.acting` — ops on the record; :mod:`.caller` and :mod:`.toolcall` —
  who a call is on the record as (no I/O);
- :mod:`.op_browser` — the browser as the ops see it, one a scope;
- :mod:`.mcp` — Playwright MCP's tools, every call on the record, loaded by
  :mod:`.mcp_loader` on the first ``/mcp`` request; :mod:`.runtime` — whether
  its runtime starts here;
- :mod:`.live` — ``GET /live``; :mod:`.app_errors`.
"""

from __future__ import annotations

__all__: list[str] = []
