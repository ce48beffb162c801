"""The browser computer's supervisord stack, run natively on the host.

The same ``images/browser/supervisord.conf`` the image runs, with every path
under a private folder and free ports, so tests and benchmarks can run beside
a ``make up`` computer. Needs Debian's ``chromium`` and ``supervisor``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.support.timing import deadline, wait_for

__all__ = ["ROOT", "NativeStack", "free_port", "missing_tools"]

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing_tools() -> list[str]:
    """The host programs the native stack needs and this host lacks."""
    return [tool for tool in ("chromium", "supervisord") if shutil.which(tool) is None]


@dataclass
class NativeStack:
    folder: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    relay_port: int = field(default_factory=free_port)
    chromium_port: int = field(default_factory=free_port)
    app_port: int = field(default_factory=free_port)
    recorder_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_dir(self) -> Path:
        return self.folder / "log"

    @property
    def relay_http(self) -> str:
        return f"http://127.0.0.1:{self.relay_port}"

    @property
    def chromium_http(self) -> str:
        return f"http://127.0.0.1:{self.chromium_port}"

    @property
    def app_http(self) -> str:
        return f"http://127.0.0.1:{self.app_port}"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or "TEST" in k}
        env.update(
            AGENTENV_IMAGE_DIR=str(ROOT / "images" / "browser"),
            AGENTENV_VENV=str(Path(sys.prefix)),
            AGENTENV_LOG_DIR=str(self.log_dir),
            AGENTENV_RUN_DIR=str(self.folder / "run"),
            AGENTENV_PROFILE_DIR=str(self.folder / "profile"),
            AGENTENV_DOWNLOADS_DIR=str(self.folder / "downloads"),
            AGENTENV_CHROMIUM_USER="",
            AGENTENV_RELAY_PORT=str(self.relay_port),
            AGENTENV_CHROMIUM_PORT=str(self.chromium_port),
            AGENTENV_APP_PORT=str(self.app_port),
            AGENTENV_RECORDER_PORT=str(self.recorder_port),
            AGENTENV_RELAY_HOST="127.0.0.1",
            AGENTENV_APP_HOST="127.0.0.1",
            # Tests hand file:// grants in their temporary folders.
            AGENTENV_UPLOAD_ROOTS=tempfile.gettempdir(),
        )
        env.update(self.extra_env)
        return env

    def start(self) -> NativeStack:
        self.folder.mkdir(parents=True, exist_ok=True)
        out = open(self.folder / "supervisord.out", "ab")  # noqa: SIM115 - kept for the child
        self.process = subprocess.Popen(
            [str(ROOT / "images/browser/launch/supervisord.sh")],
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        self.wait_ready()
        return self

    def op(self, name: str, body: dict[str, Any] | None = None, **headers: str) -> Any:
        """A browser/v1 op that must succeed: its JSON answer (or image bytes)."""
        answer = requests.post(
            f"{self.app_http}/v1/browser/{name}",
            json=body or {},
            headers=headers,
            timeout=deadline(60),
        )
        assert answer.status_code == 200, (name, answer.status_code, answer.text[:500])
        if answer.headers["Content-Type"].startswith("image/"):
            return answer.content
        return answer.json()

    def ready(self) -> bool:
        try:
            return requests.get(self.app_http + "/readyz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        def probe() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"supervisord exited; see {self.folder / 'supervisord.out'}")
            return self.ready()

        wait_for(probe, "the native stack to be ready", timeout_s)

    def ctl(self, *args: str) -> str:
        done = subprocess.run(
            ["supervisorctl", "-c", str(ROOT / "images/browser/supervisord.conf"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=deadline(30),
        )
        return done.stdout.strip()

    def pid(self, program: str) -> int:
        return int(self.ctl("pid", program))

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=deadline(30))
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def __enter__(self) -> NativeStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
