"""``agentenv-recorder``: run the recorder with settings from the environment."""

from __future__ import annotations

from agentenv import process
from agentenv.recorder.recorder_server import make_app

__all__ = ["main"]


def main() -> None:
    process.main("recorder", make_app, lambda s: ("127.0.0.1", s.recorder_port))


if __name__ == "__main__":
    main()
