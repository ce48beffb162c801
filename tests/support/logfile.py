"""Reading the action log in tests: through the app's log op, and raw."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from agentenv.protocol.log import LogPage
from tests.support.timing import wait_for

__all__ = ["HELD_S", "actions", "all_bytes", "read_log", "read_until", "settle", "tab_events"]

#: How long a read may wait for lines held back by another agent's command
#: still in flight: the log writes such a command as unfinished after 60 s.
HELD_S = 90.0


def read_log(
    app_http: str, after: int = 0, token: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Every line after ``after`` through POST /v1/browser/log, page by page."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    lines: list[dict[str, Any]] = []
    last = after
    while True:
        answer = requests.post(
            app_http + "/v1/browser/log",
            json={"after": last, "limit": 1000},
            headers=headers,
            timeout=30,
        )
        answer.raise_for_status()
        LogPage.model_validate_json(answer.content)  # every line is one of the wire's kinds
        page = answer.json()
        lines += page["lines"]
        if page["last"] == last:
            return lines, last
        last = page["last"]


def read_until(
    app_http: str,
    after: int,
    enough: Callable[[list[dict[str, Any]]], bool],
    what: str,
    token: str | None = None,
) -> list[dict[str, Any]]:
    """The lines after ``after`` once ``enough`` says they hold what the test
    made. The browser is shared: another agent's command still in flight (a
    Playwright wait) holds later lines back until it ends, or 60 s."""

    def probe() -> list[dict[str, Any]] | None:
        lines, _ = read_log(app_http, after, token)
        return lines if enough(lines) else None

    return wait_for(probe, what, timeout_s=HELD_S, interval_s=0.2)


def settle(log_file: Path) -> list[dict[str, Any]]:
    """All lines, once every number up to the highest has its line."""

    def complete() -> list[dict[str, Any]] | None:
        lines = [json.loads(x) for x in log_file.read_bytes().splitlines()]
        seqs = {x["seq"] for x in lines}
        return lines if seqs and seqs == set(range(1, max(seqs) + 1)) else None

    return wait_for(complete, f"every entry of {log_file.name} to be written", timeout_s=30)


def actions(lines: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {x["seq"]: x["action"] | {"at": x["at"]} for x in lines if "action" in x}


def tab_events(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        x["tab"] | {"seq": x["seq"]} for x in sorted(lines, key=lambda x: x["seq"]) if "tab" in x
    ]


def all_bytes(folder: Path) -> bytes:
    """Every byte of every file under ``folder``."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
