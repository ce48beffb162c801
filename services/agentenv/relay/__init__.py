"""The CDP relay: the only door to Chromium.

Every CDP client (agents, Playwright MCP, the app server, the recorder)
reaches Chromium through this program, so it is the one place that checks
who is calling and, with the action log, records what they did.

The connection's rules, without I/O:

- :mod:`.core` — what the relay does with each message of one connection:
  client to Chromium there, Chromium to client in :mod:`.downstream` (over
  :mod:`.chromium_text`: how Chromium writes its messages), the
  connection's state in :mod:`.connection`;
- :mod:`.guard` and :mod:`.commands` (over :mod:`.pinned`) — what an agent's
  command may do: every command of the shipped Chromium, classified;
- :mod:`.scopes` — each agent's browser inside the one Chromium;
- :mod:`.worlds` — the relay's own isolated worlds, out of every agent's reach;
- :mod:`.password` and :mod:`.elements` — the password check and what a press
  lands on (the expressions; the watcher runs them);
- :mod:`.causes` — what caused each tab event; :mod:`.front` — which tab is
  in front, and which are loading;
- :mod:`.memory`, :mod:`.storage_shares` — the bytes held and the storage shares;
- :mod:`.discovery` — ``/json/*`` answers rewritten to the relay's address;
- :mod:`.tokens` — tokens granted for one agent's connection.

The I/O around them:

- :mod:`.relay_server` — the aiohttp application: discovery over HTTP, CDP over
  WebSocket; :mod:`.http_commands` (``/json/new``, ``close``, ``activate``) and
  :mod:`.relay_requests` (its keys, and what handlers read from a request);
- :mod:`.proxy` — one client bridged to its own upstream connection, with
  :mod:`.to_client` (its Chromium-to-client loop), :mod:`.control_commands` (the
  ``AgentEnv.*`` commands) and :mod:`.metered` (its readers, counted);
- :mod:`.logbook` — what the relay writes to the action log;
- :mod:`.log_budget` — each user's share of the action log;
- :mod:`.watcher` — the relay's own connection to Chromium, with
  :mod:`.probes` (the password check, what a press lands on), :mod:`.quotas`
  (storage quotas), :mod:`.scope_downloads` (each scope's downloads) and
  :mod:`.scope_keeper` (the scopes' contexts, opened and closed, warm ones);
- :mod:`.once` — one run of a coroutine for every caller; :mod:`.relay_errors`.

Who is who (tokens, ``Host`` and ``Origin``) is :mod:`agentenv.access`.
"""

from __future__ import annotations

__all__: list[str] = []
