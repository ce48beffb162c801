"""The MiniWoB++ tasks the tests and the bench play (docs/harness.md): the
15 the scripted oracle solves (tests/clients/browsergym_session.py's
``plan``) and 15 it gives up on at once, the documented sample of 30; the
pages served here or on a network, and the sample through ``agentenv run``."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.stack import ROOT
from tests.support.timing import deadline, wait_for

#: The seed of every episode, and the episodes at once (:func:`run_sample`).
SEED, PARALLEL = 7, 4
#: The scripted agent as ``agentenv run --browsergym`` runs it.
AGENT = ROOT / "tests/clients/miniwob_agent.py"

#: The documented subset the scripted agent solves.
SOLVED = [
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-collapsible",
    "click-dialog",
    "click-link",
    "click-option",
    "click-tab",
    "click-test",
    "click-test-2",
    "click-widget",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "focus-text",
]
#: Tasks the scripted agent has no plan for: it ends each at once (reward 0),
#: and the env still resets, observes and scores.
GIVEN_UP = [
    "ascending-numbers",
    "bisect-angle",
    "book-flight",
    "buy-ticket",
    "choose-date",
    "choose-list",
    "circle-center",
    "click-color",
    "click-menu",
    "click-pie",
    "click-scroll-list",
    "click-shades",
    "click-shape",
    "copy-paste",
    "count-shape",
]
#: What ``agentenv run --browsergym miniwob`` plays in CI.
SAMPLE = SOLVED + GIVEN_UP


def html_of(python: str) -> Path:
    """MiniWoB++'s pages: the ``html/`` of the miniwob package ``python`` has."""
    found = subprocess.run(
        [python, "-c", "import miniwob, pathlib; print(pathlib.Path(miniwob.__file__).parent)"],
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=True,
    )
    return Path(found.stdout.strip()) / "html"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def pages_here(html: Path, port: int) -> Iterator[str]:
    """MiniWoB++'s pages (the miniwob package's ``html/``) served on this
    machine at ``port``: their ``miniwob/`` address (``MINIWOB_URL``)."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", port), functools.partial(_Quiet, directory=str(html))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/miniwob/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def pages_on(image: str, html: Path, network: Any) -> Iterator[str]:
    """The pages served by a container on ``network`` (a docker SDK Network:
    the image's python3, the pages mounted read-only), what a batch's
    computers joining that network with ``--network`` load: its address."""
    import docker

    alias = f"miniwob-{uuid.uuid4().hex[:8]}"
    container = docker.from_env().containers.create(
        image,
        entrypoint=["python3", "-m", "http.server", "8000", "-d", "/srv"],
        volumes={str(html): {"bind": "/srv", "mode": "ro"}},
        detach=True,
    )
    try:
        network.connect(container, aliases=[alias])
        container.start()
        probe = ["python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/')"]
        wait_for(lambda: container.exec_run(probe).exit_code == 0, "the pages served", 60)
        yield f"http://{alias}:8000/miniwob/"
    finally:
        container.remove(force=True, v=True)  # the image's log volume too


def run_sample(
    python: str, image: str, network: str, pages: str, out: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    """``agentenv run --browsergym miniwob`` of :data:`SAMPLE` (:data:`SEED`,
    :data:`PARALLEL` at a time, the scripted agent), ``options`` after, in
    ``out``'s parent."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "agentenv",
            "run",
            *("--browsergym", "miniwob", "--browsergym-tasks", ",".join(SAMPLE)),
            *("--browsergym-python", python, "--browsergym-seed", str(SEED)),
            *("--agent", f"{python} {AGENT}", "--image", image),
            *("--parallel", str(PARALLEL), "--network", network, "--out", str(out)),
            *options,
        ],
        cwd=out.parent,
        env={**os.environ, "MINIWOB_URL": pages},
        capture_output=True,
        text=True,
        timeout=deadline(1500),
    )
