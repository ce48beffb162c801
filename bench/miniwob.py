"""MiniWoB++ episodes a minute: ``agentenv run --browsergym`` against
BrowserGym's own local launch, in the same run (issue 43, item 3's figures).

The documented sample of 30 tasks (tests/support/miniwob.py: 15 the
scripted oracle solves, 15 it gives up on at once), seed 7, four at a time
each way, in turn:

- **BrowserGym's own launch**: four processes of
  tests/clients/browsergym_session.py ``local``, each playing a quarter of
  the sample one env after another, each env launching Debian's Chromium
  (BrowserGym's way: an env, a browser, and its chat window's), the pages
  served on the host;
- **agentenv, scopes** (``--parallel 4``, ``--scopes-per-computer 4``: one
  warm computer), each episode recorded through the run's store, and the
  same **without recordings** (``--no-browsergym-record``): the recording's
  cost;
- **agentenv, a computer per episode** (``--scopes-per-computer 1``).

The agentenv runs' pages come from a container on a network of their own
(``--network``). Episodes a minute: the sample over the wall time, the
batch's start (its store, its computers) to its end; rewards are summed to
show each way scored the same.

Needs a Docker engine, the image (make image; ``AGENTENV_TEST_IMAGE``
names another), Debian's chromium and build/clients/browsergym
(scripts/test-clients.sh browsergym).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import fleet
from bench.stats import table
from tests.support.miniwob import (
    PARALLEL,
    SAMPLE,
    SEED,
    html_of,
    pages_here,
    pages_on,
    run_sample,
)
from tests.support.stack import ROOT

IMAGE = os.environ.get("AGENTENV_TEST_IMAGE", fleet.IMAGE)
PYTHON = ROOT / "build/clients/browsergym/bin/python"
SESSION = ROOT / "tests/clients/browsergym_session.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _site(html: Path) -> Iterator[tuple[str, str]]:
    """The pages from a container on a network of its own: (network, MINIWOB_URL)."""
    import docker

    network = docker.from_env().networks.create(f"agentenv-bench-miniwob-{uuid.uuid4().hex[:8]}")
    try:
        with pages_on(IMAGE, html, network) as pages:
            yield str(network.name), pages
    finally:
        network.remove()


def _local(pages: str) -> tuple[float, float, list[str]]:
    """BrowserGym's own launch, four processes: (seconds, rewards summed,
    the episodes that failed other than by the oracle giving up)."""
    shares = [SAMPLE[i::PARALLEL] for i in range(PARALLEL)]
    env = {**os.environ, "CHROMIUM": shutil.which("chromium") or "/usr/bin/chromium"}
    env["MINIWOB_URL"] = pages
    began = time.monotonic()
    running = [
        subprocess.Popen(
            [str(PYTHON), str(SESSION), "local", ",".join(share)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for share in shares
    ]
    rewards, failed = 0.0, []
    for process in running:
        out, _ = process.communicate(timeout=1800)
        for line in out.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                rewards += sum(e.get("reward", 0.0) for e in row["episodes"])
                error = row.get("error") or ""
                if error and "no plan for" not in error:
                    failed.append(f"{row['task']}: {error[:200]}")
    return time.monotonic() - began, rewards, failed


def _agentenv(folder: Path, network: str, pages: str, *options: str) -> tuple[float, float]:
    """One ``agentenv run --browsergym`` of the sample: (seconds, rewards summed)."""
    out = folder / f"run-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    done = run_sample(str(PYTHON), IMAGE, network, pages, out, *options)
    took = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"agentenv run {' '.join(options)} failed:\n{done.stdout[-3000:]}")
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return took, sum(r.get("reward", 0.0) for r in results)


def run() -> str:
    html = html_of(str(PYTHON))
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as scratch, _site(html) as (network, pages):
        folder = Path(scratch)
        with pages_here(html, _free_port()) as host_pages:
            local = _local(host_pages)
        found = {
            "agentenv, scopes (K = 4), recorded": _agentenv(folder, network, pages),
            "agentenv, scopes (K = 4), no recording": _agentenv(
                folder, network, pages, "--no-browsergym-record"
            ),
            "agentenv, a computer per episode, recorded": _agentenv(
                folder, network, pages, "--scopes-per-computer", "1"
            ),
        }
    per_minute = len(SAMPLE) * 60 / local[0]
    rows.append(
        [
            "BrowserGym's own launch",
            f"{local[0]:.1f} s",
            f"{per_minute:.1f}",
            "1.00x",
            f"{local[1]:g}",
        ]
    )
    for name, (took, rewards) in found.items():
        rate = len(SAMPLE) * 60 / took
        rows.append(
            [name, f"{took:.1f} s", f"{rate:.1f}", f"{rate / per_minute:.2f}x", f"{rewards:g}"]
        )
    shown = table(
        f"MiniWoB++: the sample of {len(SAMPLE)} episodes, {PARALLEL} at a time, seed {SEED}",
        ["route", "wall", "episodes a minute", "vs own launch", "rewards"],
        rows,
    )
    return shown + "".join(f"\nown launch, failed: {x}" for x in local[2])


def main() -> None:
    print(run(), flush=True)


if __name__ == "__main__":
    main()
