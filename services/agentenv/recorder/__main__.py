"""``agentenv-recorder``: run the recorder with settings from the environment."""

from __future__ import annotations

import sys

from agentenv import settings as settings_module
from agentenv.process import run_server, setup_logging
from agentenv.recorder.server import make_app

__all__ = ["main"]


def main() -> None:
    try:
        settings = settings_module.load()
    except settings_module.SettingsError as exc:
        sys.exit(f"agentenv-recorder: {exc}")
    setup_logging(settings, "recorder")
    run_server(make_app(settings), "127.0.0.1", settings.recorder_port)


if __name__ == "__main__":
    main()
