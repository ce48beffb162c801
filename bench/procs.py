"""The CPU a process tree has used, read from ``/proc`` (the benches that
compare a program's cost with and without a feature)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["tree_cpu"]


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
