"""How a program of the browser computer runs: its process log and server.

Each program logs to stderr (which supervisord sends to the container's
stdout) and to ``<log_dir>/<program>.log``. When the log folder cannot be
written (a developer's machine without /var/log/agentenv), ``.agentenv/`` in
the working directory is used instead, with one warning.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import os
import sys
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from agentenv import settings as settings_module
from agentenv.log.log_errors import LogError
from agentenv.settings import Settings

__all__ = ["log_dir", "main", "run_server", "setup_logging"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_dir(settings: Settings) -> tuple[Path, str | None]:
    """The folder logs go to, and a warning when it is the fallback."""
    wanted = settings.log_dir
    try:
        wanted.mkdir(parents=True, exist_ok=True)
        if os.access(wanted, os.W_OK):
            return wanted, None
    except OSError:
        pass
    fallback = Path.cwd() / ".agentenv"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback, f"{wanted} cannot be written; logging to {fallback} instead"


def setup_logging(settings: Settings, program: str) -> Path:
    """Send ``program``'s log to stderr and to its file; returns the folder."""
    folder, warning = log_dir(settings)
    root = logging.getLogger()
    root.setLevel(settings.log_level)
    formatter = logging.Formatter(_FORMAT)
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(formatter)
    file = logging.handlers.RotatingFileHandler(
        folder / f"{program}.log", maxBytes=10 * 1024 * 1024, backupCount=2
    )
    file.setFormatter(formatter)
    root.handlers[:] = [stream, file]
    if warning:
        logging.getLogger(program).warning(warning)
    return folder


def run_server(app: web.Application, host: str, port: int) -> None:
    """Serve ``app`` until SIGTERM/SIGINT, closing connections on the way out.

    On uvloop when it is installed (it is in the image): the relay's round trip
    is mostly event-loop wake-ups, which uvloop makes cheaper.
    """
    try:
        import uvloop
    except ImportError:
        pass
    else:
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    web.run_app(
        app,
        host=host,
        port=port,
        access_log=None,
        print=None,
        shutdown_timeout=5.0,
        handle_signals=True,
    )


def main(
    program: str,
    make_app: Callable[[Settings], web.Application],
    address: Callable[[Settings], tuple[str, int]],
) -> None:
    """Run ``program``'s server with settings from the environment; a bad
    setting or a log another writer holds ends it with one clear line."""
    try:
        settings = settings_module.load()
    except settings_module.SettingsError as exc:
        sys.exit(f"agentenv-{program}: {exc}")
    setup_logging(settings, program)
    host, port = address(settings)
    try:
        run_server(make_app(settings), host, port)
    except LogError as exc:
        sys.exit(f"agentenv-{program}: {exc}")
