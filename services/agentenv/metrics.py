"""What a computer counts, for a fleet to watch (``GET /metrics``, Prometheus' text format).

Each program keeps its own counts and serves them, with the control token, to
the app server, which answers ``/metrics`` with its own and theirs as one text
(the names do not overlap). The maintained ``prometheus-client`` writes the
format; counts on the relay's path per command are plain integers read when
scraped (no lock, no label lookup per command).

- relay: ``agentenv_cdp_connections{kind}`` (``agent``, ``computer``),
  ``agentenv_cdp_connections_refused_total`` (answered 429 past the queue),
  ``agentenv_cdp_connections_capacity``, ``agentenv_cdp_queue_length``,
  ``agentenv_cdp_queue_oldest_wait_seconds`` (:mod:`agentenv.admission`),
  ``agentenv_scopes_open``, ``agentenv_scopes_capacity``,
  ``agentenv_scopes_warm``, ``agentenv_scopes_warm_target`` (warm scopes),
  ``agentenv_queue_length``, ``agentenv_queue_oldest_wait_seconds`` (the
  ``scopes/open`` queue),
  ``agentenv_cdp_commands_total{acts}``, ``agentenv_guard_refusals_total{rule}``,
  ``agentenv_log_lines_total``, ``agentenv_log_bytes``,
  ``agentenv_log_full_refusals_total`` (past ``AGENTENV_LOG_MAX_BYTES``),
  ``agentenv_log_write_seconds`` (one write in 256, timed: the latest),
  ``agentenv_chromium_restarts_total``, ``agentenv_storage_rounds_total``,
  ``agentenv_relay_start_time_seconds``
  (when this relay process started: a batch on scopes sees it restarted);
- recorder: ``agentenv_frames_total{kind}``, ``agentenv_frames_missing_total``,
  ``agentenv_recordings_open``;
- app server: ``agentenv_mcp_sessions``, ``agentenv_app_start_time_seconds``.

The other side, a batch's sums over the computers it scrapes, is the
harness's :class:`agentenv.harness.fleet.Fleet`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

__all__ = [
    "CONTENT_TYPE",
    "AppCounts",
    "RecorderCounts",
    "RelayCounts",
    "render",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(eq=False)
class RelayCounts:
    agents: int = 0
    own: int = 0
    refused: int = 0
    acting: int = 0
    reading: int = 0
    guard: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    #: Rounds of the watcher sharing each scope's storage quotas out again
    #: (every few seconds), counted as each ends.
    storage_rounds: int = 0
    #: The log's numbered lines so far, and its latest timed write, read when scraped.
    lines: Callable[[], int] = lambda: 0
    log_write_s: Callable[[], float] = lambda: 0.0
    log_bytes: Callable[[], int] = lambda: 0
    #: Agents' commands refused because the log was past AGENTENV_LOG_MAX_BYTES.
    log_full: int = 0
    #: Agents' connections the relay takes at once (0: unbounded), those
    #: waiting for a place, and how long the first of them has waited.
    capacity: int = 0
    queued: Callable[[], int] = lambda: 0
    oldest_wait_s: Callable[[], float] = lambda: 0.0
    #: Scopes opened on demand: open now, at most at once (AGENTENV_MAX_SCOPES),
    #: and the ``scopes/open`` calls waiting for one to close: what an
    #: autoscaler reads (deploy/kubernetes/prometheus/rules.yaml).
    scopes_open: Callable[[], int] = lambda: 0
    scopes_capacity: int = 0
    scopes_queued: Callable[[], int] = lambda: 0
    scopes_oldest_wait_s: Callable[[], float] = lambda: 0.0
    #: Warm scopes ready to hand over, and how many are kept (relay/warm.py).
    scopes_warm: Callable[[], int] = lambda: 0
    scopes_warm_target: int = 0
    #: When this relay process started (seconds since the epoch): a relay
    #: that restarts closes the scopes opened before it, so a reader that
    #: sees it change knows the tasks in them lost their browser.
    started: float = field(default_factory=time.time)

    def refused_by(self, rule: str, count: int = 1) -> None:
        self.guard[rule] = self.guard.get(rule, 0) + count

    def collect(self) -> Iterator[Metric]:
        connections = GaugeMetricFamily(
            "agentenv_cdp_connections", "CDP connections open", labels=["kind"]
        )
        connections.add_metric(["agent"], self.agents)
        connections.add_metric(["computer"], self.own)
        yield connections
        yield CounterMetricFamily(
            "agentenv_cdp_connections_refused",
            "agent connections answered 429: the queue was full or their wait ran out",
            value=self.refused,
        )
        yield GaugeMetricFamily(
            "agentenv_cdp_connections_capacity",
            "agent connections taken at once (AGENTENV_MAX_CONNECTIONS; 0: unbounded)",
            value=self.capacity,
        )
        yield GaugeMetricFamily(
            "agentenv_cdp_queue_length",
            "agent connections waiting for a place",
            value=self.queued(),
        )
        yield GaugeMetricFamily(
            "agentenv_cdp_queue_oldest_wait_seconds",
            "how long the first agent connection waiting has waited",
            value=self.oldest_wait_s(),
        )
        yield GaugeMetricFamily(
            "agentenv_scopes_open", "scopes opened on demand, open now", value=self.scopes_open()
        )
        yield GaugeMetricFamily(
            "agentenv_scopes_capacity",
            "scopes this computer holds open at once (AGENTENV_MAX_SCOPES)",
            value=self.scopes_capacity,
        )
        yield GaugeMetricFamily(
            "agentenv_scopes_warm",
            "warm scopes ready: scopes/open hands one over at once",
            value=self.scopes_warm(),
        )
        yield GaugeMetricFamily(
            "agentenv_scopes_warm_target",
            "warm scopes kept ready (AGENTENV_WARM_SCOPES, at most AGENTENV_MAX_SCOPES)",
            value=self.scopes_warm_target,
        )
        yield GaugeMetricFamily(
            "agentenv_queue_length",
            "scopes/open calls waiting for a scope to close",
            value=self.scopes_queued(),
        )
        yield GaugeMetricFamily(
            "agentenv_queue_oldest_wait_seconds",
            "how long the first scopes/open call waiting has waited",
            value=self.scopes_oldest_wait_s(),
        )
        commands = CounterMetricFamily(
            "agentenv_cdp_commands", "CDP commands on the record, by mark", labels=["acts"]
        )
        commands.add_metric(["acting"], self.acting)
        commands.add_metric(["reading"], self.reading)
        yield commands
        guard = CounterMetricFamily(
            "agentenv_guard_refusals", "commands the guard refused, by rule", labels=["rule"]
        )
        for rule, count in sorted(self.guard.items()):
            guard.add_metric([rule], count)
        yield guard
        yield CounterMetricFamily(
            "agentenv_log_lines", "action log lines written", value=self.lines()
        )
        yield GaugeMetricFamily(
            "agentenv_log_bytes", "the action log's size", value=self.log_bytes()
        )
        yield CounterMetricFamily(
            "agentenv_log_full_refusals",
            "agents' commands refused: the log was past AGENTENV_LOG_MAX_BYTES",
            value=self.log_full,
        )
        yield GaugeMetricFamily(
            "agentenv_log_write_seconds",
            "one action log write (one in 256 is timed: the latest)",
            value=self.log_write_s(),
        )
        yield CounterMetricFamily(
            "agentenv_chromium_restarts",
            "times Chromium's connection ended",
            value=self.restarts,
        )
        yield CounterMetricFamily(
            "agentenv_storage_rounds",
            "rounds of the watcher sharing each scope's storage quotas out again from what "
            "its origins use",
            value=self.storage_rounds,
        )
        yield GaugeMetricFamily(
            "agentenv_relay_start_time_seconds",
            "when this relay process started, seconds since the epoch",
            value=self.started,
        )


@dataclass(eq=False)
class RecorderCounts:
    frames: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    open: Callable[[], int] = lambda: 0

    def collect(self) -> Iterator[Metric]:
        frames = CounterMetricFamily("agentenv_frames", "frames taken, by kind", labels=["kind"])
        for kind in ("first", "action", "last"):
            frames.add_metric([kind], self.frames.get(kind, 0))
        yield frames
        yield CounterMetricFamily(
            "agentenv_frames_missing",
            "frames that could not be taken or uploaded",
            value=self.missing,
        )
        yield GaugeMetricFamily("agentenv_recordings_open", "recordings open", value=self.open())


@dataclass(eq=False)
class AppCounts:
    sessions: Callable[[], int] = lambda: 0
    #: Scopes whose agent waits for a person (request_human).
    waiting: Callable[[], int] = lambda: 0
    #: When this app server process started (seconds since the epoch): MCP
    #: sessions and ops in flight do not outlive it.
    started: float = field(default_factory=time.time)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "agentenv_mcp_sessions", "Playwright MCP sessions running", value=self.sessions()
        )
        yield GaugeMetricFamily(
            "agentenv_human_requests_waiting",
            "agents' requests for a person (request_human) waiting for an answer",
            value=self.waiting(),
        )
        yield GaugeMetricFamily(
            "agentenv_app_start_time_seconds",
            "when this app server process started, seconds since the epoch",
            value=self.started,
        )


def render(counts: RelayCounts | RecorderCounts | AppCounts) -> bytes:
    """``counts`` in Prometheus' text format (a collector: it has ``collect``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(counts)
    return bytes(generate_latest(registry))
