"""``agentenv-relay``: run the CDP relay with settings from the environment."""

from __future__ import annotations

import sys

from agentenv import settings as settings_module
from agentenv.log.errors import LogError
from agentenv.process import run_server, setup_logging
from agentenv.relay.server import make_app

__all__ = ["main"]


def main() -> None:
    try:
        settings = settings_module.load()
    except settings_module.SettingsError as exc:
        sys.exit(f"agentenv-relay: {exc}")
    setup_logging(settings, "relay")
    try:
        run_server(make_app(settings), settings.relay_host, settings.relay_port)
    except LogError as exc:
        sys.exit(f"agentenv-relay: {exc}")


if __name__ == "__main__":
    main()
