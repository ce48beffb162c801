"""The computer's servers in-process for unit tests: settings read as the
programs read them (:func:`agentenv.settings.load`, from an environment
given here), with every inner port one nothing listens on unless a test
says otherwise, and a client on aiohttp's own test server."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agentenv.settings import Settings, load

__all__ = ["ALICE_TOKEN", "CONTROL_TOKEN", "Client", "computer", "serving", "unreachable_port"]

ALICE_TOKEN = "alice-token-0123456789"
CONTROL_TOKEN = "control-token-0123456789"

Client = TestClient[web.Request, web.Application]


def unreachable_port() -> int:
    """A port nothing listens on (taken from the kernel, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def computer(tmp_path: Path, **env: str) -> Settings:
    """Settings with one user (alice) and a control token, folders in
    ``tmp_path``, and Chromium, the relay and the recorder unreachable;
    ``env`` overrides (``AGENTENV_`` is added to each name)."""
    base = {
        "AGENTENV_NAME": "test",
        "AGENTENV_USERS": f"alice:{ALICE_TOKEN}",
        "AGENTENV_CONTROL_TOKEN": CONTROL_TOKEN,
        "AGENTENV_LOG_DIR": str(tmp_path / "log"),
        "AGENTENV_PROFILE_DIR": str(tmp_path / "profile"),
        "AGENTENV_DOWNLOADS_DIR": str(tmp_path / "downloads"),
        "AGENTENV_RUN_DIR": str(tmp_path / "run"),
        "AGENTENV_CHROMIUM_PORT": str(unreachable_port()),
        "AGENTENV_RELAY_PORT": str(unreachable_port()),
        "AGENTENV_RECORDER_PORT": str(unreachable_port()),
        # No quota overrides: the stand-in Chromium has no storage to bound.
        "AGENTENV_ORIGIN_STORAGE_BYTES": "0",
        "AGENTENV_SCOPE_STORAGE_BYTES": "0",
    }
    base.update({f"AGENTENV_{key.upper()}": value for key, value in env.items()})
    return load(base)


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[Client]:
    """``app`` served on 127.0.0.1 (its startup and cleanup run), and a client."""
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client
