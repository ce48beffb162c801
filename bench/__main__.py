"""``python -m bench [NAME ...]``: log, log-filed, relay, mcp, recorder, viewer, live,
container, fleet, density, fairness, video, har, verify (default: every one)."""

from __future__ import annotations

import asyncio
import sys


def main() -> None:
    wanted = set(sys.argv[1:]) or {
        "log",
        "log-filed",
        "relay",
        "mcp",
        "recorder",
        "viewer",
        "live",
        "container",
        "fleet",
        "density",
        "fairness",
        "video",
        "har",
        "verify",
    }
    if "log" in wanted:
        from bench import log

        print(log.run(), flush=True)
    if "log-filed" in wanted:
        from bench import log_filed

        print(log_filed.run(), flush=True)
    if "relay" in wanted:
        from bench import relay

        print(asyncio.run(relay.run()), flush=True)
    if "mcp" in wanted:
        from bench import mcp

        print(mcp.run(), flush=True)
    if "recorder" in wanted:
        from bench import recorder

        print(recorder.run(), flush=True)
    if "viewer" in wanted:
        from bench import viewer

        print(viewer.run(), flush=True)
    if "live" in wanted:
        from bench import live

        print(live.run(), flush=True)
    if "container" in wanted:
        from bench import container

        print(container.run(), flush=True)
    if "fleet" in wanted:
        from bench import fleet

        print(fleet.run(), flush=True)
    if "density" in wanted:
        from bench import density

        print(density.run(), flush=True)
    if "fairness" in wanted:
        from bench import fairness

        print(fairness.run(), flush=True)
    if "video" in wanted:
        from bench import video

        print(video.run(), flush=True)
    if "har" in wanted:
        from bench import har

        print(har.run(), flush=True)
    if "verify" in wanted:
        from bench import verify

        print(verify.run(), flush=True)


if __name__ == "__main__":
    main()
