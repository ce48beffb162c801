"""An agent's process, as ``run_agent`` runs it: in a session of its own (so
stopping it stops what it started too), its output to a file, bounded by its
step's timeout and by the run being cancelled; what it left running is
stopped when it exits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from agentenv.harness.harness_errors import StepFailed

__all__ = ["run_process"]

#: How often the run looks at the agent and at a cancel.
POLL_S = 0.2


def run_process(
    command: list[str], env: dict[str, str], log: Path, timeout_s: float, cancelled: threading.Event
) -> int:
    """Run ``command`` to its end; its exit status. Past ``timeout_s``, or on a
    cancel, its whole session is killed and the step fails saying which."""
    with open(log, "wb") as output:
        try:
            agent = subprocess.Popen(
                command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            raise StepFailed(f"the agent could not start: {exc.strerror}") from None
        ends = time.monotonic() + timeout_s
        while agent.poll() is None:
            if cancelled.is_set() or time.monotonic() > ends:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()
                if cancelled.is_set():
                    raise StepFailed("cancelled: the agent was stopped", infrastructure=True)
                raise StepFailed(f"the agent ran past {timeout_s:.0f} s (its output: {log})")
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.wait(timeout=POLL_S)
    with contextlib.suppress(ProcessLookupError):  # what it left running
        os.killpg(agent.pid, signal.SIGKILL)
    return agent.returncode
