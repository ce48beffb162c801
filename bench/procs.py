"""What the native-stack benches share: the CPU a process tree has used,
read from ``/proc`` (to compare a program's cost with and without a
feature), and an op of the stack's app server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import requests

from tests.support.stack import NativeStack

__all__ = ["app_op", "tree_cpu"]


def tree_cpu(root: int) -> float:
    """CPU seconds (user and system) of ``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(stat[1]), []).append(int(entry))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        todo += children.get(pid, [])
    return total


def app_op(stack: NativeStack, op: str, body: dict[str, Any]) -> Any:
    """``POST /v1/<op>`` on the stack's app server (``browser/…`` or
    ``browser-recording/…``): its JSON answer; an error status raises."""
    answer = requests.post(f"{stack.app_http}/v1/{op}", json=body, timeout=120)
    answer.raise_for_status()
    return answer.json()
