"""The native install's systemd unit, checked by systemd's own verifier
(no systemd runs here as PID 1 to start it: tests/integration/test_native_install.py
runs the launcher it starts)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.stack import ROOT

UNIT = ROOT / "images" / "browser" / "agentenv.service"


def _verify(text: str, folder: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    launcher = folder / "agentenv-computer"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    unit = folder / "agentenv.service"
    unit.write_text(text.replace("/opt/agentenv/bin/agentenv-computer", str(launcher)))
    return subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )


def test_the_unit_verifies(tmp_path: Path) -> None:
    done = _verify(UNIT.read_text(), tmp_path)
    assert done.returncode == 0 and "agentenv.service" not in done.stderr, done.stderr


def test_the_verifier_catches_a_broken_unit(tmp_path: Path) -> None:
    done = _verify(UNIT.read_text().replace("KillMode=mixed", "KillMode=sometimes"), tmp_path)
    assert "kill mode" in done.stderr, done.stderr
