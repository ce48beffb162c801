"""``python -m bench [NAME ...]``: log, log-filed, relay, socket-memory, mcp, recorder,
viewer, live, live-input, container, ready, swarm-grow, fleet, batch-scopes, scope-memory,
density, a-core, fairness, video, har, verify, simulate, miniwob, playwright-files (default:
every one, in that order). Each is the module of its name (``log-filed``:
``bench.log_filed``), whose ``run()`` returns the figures it prints."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys

#: Every benchmark, in the order they run.
NAMES = (
    "log",
    "log-filed",
    "relay",
    "socket-memory",
    "mcp",
    "recorder",
    "viewer",
    "live",
    "live-input",
    "container",
    "ready",
    "swarm-grow",
    "fleet",
    "batch-scopes",
    "scope-memory",
    "density",
    "a-core",
    "fairness",
    "video",
    "har",
    "verify",
    "simulate",
    "miniwob",
    "playwright-files",
)


def main() -> None:
    asked = sys.argv[1:]
    unknown = [name for name in asked if name not in NAMES]
    if unknown:
        sys.exit(f"bench: no benchmark {', '.join(unknown)}; the names: {' '.join(NAMES)}")
    for name in [n for n in NAMES if n in asked] if asked else NAMES:
        run = importlib.import_module(f"bench.{name.replace('-', '_')}").run
        figures = asyncio.run(run()) if inspect.iscoroutinefunction(run) else run()
        print(figures, flush=True)


if __name__ == "__main__":
    main()
