"""A batch's sums of its computers' ``/metrics`` (``agentenv run``'s table).

Counters add up over every computer seen, each at the last value it answered
(a computer's counts outlive it: the harness reads them once more before
stopping it); gauges add up over the computers that answered the latest
round only. What the computers count: :mod:`agentenv.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["GAUGES", "Fleet", "Sample", "samples"]

Sample = tuple[str, frozenset[tuple[str, str]]]


def samples(text: str) -> dict[Sample, float]:
    """Each sample of a ``/metrics`` text: (name, labels) -> value.

    :class:`ValueError` when ``text`` is not Prometheus' text format.
    """
    found: dict[Sample, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not math.isnan(sample.value):
                found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


#: Gauges: what is open now, summed over the computers answering now.
GAUGES = frozenset(
    {
        "agentenv_cdp_connections",
        "agentenv_recordings_open",
        "agentenv_mcp_sessions",
        "agentenv_log_write_seconds",
    }
)


@dataclass
class Fleet:
    """A batch's sums of its computers' ``/metrics`` (see the module's docstring)."""

    #: Each computer's latest samples, by its address.
    latest: dict[str, dict[Sample, float]] = field(default_factory=dict)
    #: The computers that answered the latest round.
    answering: set[str] = field(default_factory=set)
    #: Computers whose last counts are in (read as they stopped).
    final: set[str] = field(default_factory=set)

    def seen(self, computer: str, text: str | None, final: bool = False) -> bool:
        """Keep what ``computer`` answered; False when it did not answer (None),
        not in the format, or its final counts are in already (its last counts
        stay). ``final``: these are its last."""
        if computer in self.final:
            return False
        if final:
            self.final.add(computer)
        if text is None:
            return False
        try:
            self.latest[computer] = samples(text)
        except ValueError:
            return False
        return True

    def round(self, answered: Iterable[str]) -> None:
        """The computers that answered the latest round: only they count for the gauges."""
        self.answering = set(answered) & self.latest.keys()

    def total(self, name: str, **labels: str) -> float:
        """``name``'s samples with ``labels``, added up over the fleet."""
        within = self.answering if name in GAUGES else self.latest.keys()
        wanted = set(labels.items())
        return sum(
            value
            for computer in within
            for (sample, have), value in self.latest[computer].items()
            if sample == name and wanted <= have
        )

    def line(self) -> str:
        """One line for the table."""
        t = self.total
        return (
            f"fleet: {len(self.answering)} of {len(self.latest)} computers answering; "
            f"{t('agentenv_cdp_connections', kind='agent'):.0f} agent connections open; "
            f"{t('agentenv_cdp_commands_total'):.0f} CDP commands "
            f"({t('agentenv_cdp_commands_total', acts='acting'):.0f} acting), "
            f"{t('agentenv_guard_refusals_total'):.0f} refused by the guard, "
            f"{t('agentenv_cdp_connections_refused_total'):.0f} connections over the limit; "
            f"{t('agentenv_log_lines_total'):.0f} log lines; "
            f"{t('agentenv_frames_total'):.0f} frames, "
            f"{t('agentenv_frames_missing_total'):.0f} missing; "
            f"{t('agentenv_mcp_sessions'):.0f} MCP sessions; "
            f"{t('agentenv_chromium_restarts_total'):.0f} Chromium restarts"
        )
