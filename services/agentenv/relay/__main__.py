"""``agentenv-relay``: run the relay with settings from the environment."""

from __future__ import annotations

from agentenv import process
from agentenv.relay.relay_server import make_app

__all__ = ["main"]


def main() -> None:
    process.main("relay", make_app, lambda s: (s.relay_host, s.relay_port))


if __name__ == "__main__":
    main()
