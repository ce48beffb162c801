"""``agentenv-app``: run the app server with settings from the environment."""

from __future__ import annotations

import sys

from agentenv import settings as settings_module
from agentenv.app.server import make_app
from agentenv.process import run_server, setup_logging

__all__ = ["main"]


def main() -> None:
    try:
        settings = settings_module.load()
    except settings_module.SettingsError as exc:
        sys.exit(f"agentenv-app: {exc}")
    setup_logging(settings, "app")
    run_server(make_app(settings), settings.app_host, settings.app_port)


if __name__ == "__main__":
    main()
