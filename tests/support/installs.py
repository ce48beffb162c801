"""The pinned clients and readers scripts/test-clients.sh installs into
build/clients (idempotent: a stamp skips a second run)."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.stack import ROOT
from tests.support.timing import deadline


def installed(part: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    """scripts/test-clients.sh for one part."""
    return subprocess.run(
        [str(ROOT / "scripts/test-clients.sh"), part],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=deadline(timeout_s),
    )


def require(part: str, timeout_s: float = 900) -> None:
    """One part installed, or the test fails with the script's own words."""
    done = installed(part, timeout_s)
    if done.returncode != 0:
        pytest.fail(f"scripts/test-clients.sh {part} failed:\n{done.stderr[-3000:]}")


#: Node 22 from npm, with Puppeteer 25 and Playwright for Node.
NODE22 = ROOT / "build/clients/node22"


def node22() -> str:
    """Node 22's binary (build/clients/node22), installed first if need be."""
    require("node22")
    return str(NODE22 / "node_modules/.bin/node")
