"""``agentenv-app``: run the app with settings from the environment."""

from __future__ import annotations

from agentenv import process
from agentenv.app.app_server import make_app

__all__ = ["main"]


def main() -> None:
    process.main("app", make_app, lambda s: (s.app_host, s.app_port))


if __name__ == "__main__":
    main()
