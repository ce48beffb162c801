"""Reading the action log in tests: through the app's log op, and raw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import requests

from tests.support.timing import wait_for

__all__ = ["actions", "all_bytes", "read_log", "settle", "tab_events"]


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
        page = answer.json()
        lines += page["lines"]
        if page["last"] == last:
            return lines, last
        last = page["last"]


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
