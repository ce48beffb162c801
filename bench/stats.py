"""Percentiles and the table every benchmark prints."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["percentile", "row", "table"]


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def row(name: str, values: Sequence[float], unit: str = "ms") -> list[str]:
    return [
        name,
        f"{percentile(values, 50):.3f} {unit}",
        f"{percentile(values, 99):.3f} {unit}",
        f"{statistics.fmean(values):.3f} {unit}",
        str(len(values)),
    ]


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"\n## {title}",
        "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
    ]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        lines.append(
            "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
        )
    return "\n".join(lines)
