"""Bounded waits for tests: every wait has a deadline, scaled by one factor.

``AGENTENV_TEST_TIMEOUT_FACTOR`` (default 1) stretches every deadline, for
slow or busy machines.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["FACTOR", "deadline", "wait_for"]

T = TypeVar("T")

FACTOR = float(os.environ.get("AGENTENV_TEST_TIMEOUT_FACTOR", "1"))


def deadline(seconds: float) -> float:
    """Seconds scaled by the factor."""
    return seconds * FACTOR


def wait_for(
    probe: Callable[[], T | None],
    what: str,
    timeout_s: float = 30.0,
    interval_s: float = 0.1,
) -> T:
    """Call ``probe`` until it returns something truthy; fail after the deadline.

    An error the probe raises (a server still starting, a file not yet
    written) is waited out; a failed assert in it is not: it fails at once,
    with its own message.
    """
    end = time.monotonic() + deadline(timeout_s)
    last_error: Exception | None = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except AssertionError:
            raise
        except Exception as exc:  # the probe's failure is what we wait out
            last_error = exc
        if time.monotonic() > end:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise TimeoutError(f"waited {deadline(timeout_s):.0f} s for {what}{detail}")
        time.sleep(interval_s)
