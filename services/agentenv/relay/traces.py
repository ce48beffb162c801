"""Traces: the browser's one trace, one scope's at a time and of its own
pages only (docs/spec.md section 7). No I/O.

Chromium keeps one trace for the whole browser: while one session traces,
every other ``Tracing.start`` fails ("Tracing has already been started"), and
a trace started on a page's session holds every process's events, other
browser contexts' renderers and the browser process's included, with their
URLs, titles and ids (Chromium 156, measured). On a computer of two scopes
or more the relay therefore:

- **holds the trace for one agent at a time**: a ``Tracing.start`` while
  another agent's trace runs is refused (rule ``trace``) with when it began
  and when it ends at the latest; the relay ends a trace itself after
  ``AGENTENV_TRACE_MAX_S`` (:meth:`Traces.overdue`), and when its session
  detaches or its connection ends;
- **keeps what the holder reads to its own pages**: it asks Chromium for the
  events (``transferMode: ReportEvents``), collects them (up to
  ``AGENTENV_TRACE_MAX_BYTES``; past it the trace says ``dataLossOccurred``),
  and when the trace completes keeps (:mod:`.trace_filter`) only the traced
  tab's renderers' events and, of the browser process, the few events that
  name the traced tab's frames. Everything of any
  other process (other scopes' renderers, the GPU and utility processes) is
  dropped, and so is the rest of the browser process's. The client gets its
  trace as it asked: ``Tracing.dataCollected`` events, or a stream the relay
  serves itself (``IO.read``/``IO.close`` on its own handle, gzip if asked).
  A ``proto`` stream cannot be read to be kept, so it is refused.

With one scope, or for the control token, nothing here applies.
"""

from __future__ import annotations

import base64
import gzip
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentenv.relay.guard import Verdict
from agentenv.relay.trace_filter import keep_own
from agentenv.settings import Settings

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_S",
    "GRACE_S",
    "METHODS",
    "READ_BYTES",
    "STREAM_PREFIX",
    "Ending",
    "Finished",
    "Holder",
    "Trace",
    "TraceCommand",
    "TraceStream",
    "Traces",
    "command",
    "event",
    "finish",
]

#: How long one agent may hold the browser's trace (AGENTENV_TRACE_MAX_S).
DEFAULT_MAX_S: float = Settings.trace_max_s
#: The most bytes of a trace the relay collects (AGENTENV_TRACE_MAX_BYTES).
DEFAULT_MAX_BYTES: int = Settings.trace_max_bytes
#: After its bound, how long a trace the relay ended may take to complete
#: before the hold is let go anyway (Chromium never answered).
GRACE_S = 30.0
#: An ``IO.read`` without ``size`` reads this much of a relay stream.
READ_BYTES = 4 * 1024 * 1024
#: The relay's stream handles (Chromium's are numbers): ``trace-<n>``.
STREAM_PREFIX = "trace-"
#: Finished traces a connection may leave unread before the oldest is let go.
MAX_STREAMS = 2
#: The bytes of finished traces left unread, every connection's together:
#: past it the oldest are let go (its reader is told the handle is unknown),
#: so unread traces never hold the relay's memory (a red team's unread
#: streams took it to its limit, and another scope's agent was disconnected).
STREAMS_BUDGET = 64 * 1024 * 1024
#: After a hold that made another scope wait, its holder's scope waits this
#: long before it may take the trace again: the others go first (one agent
#: starting again at each completion kept the trace for good).
TURN_S = 10.0


@dataclass
class Trace:
    """A trace the relay collects for its holder."""

    #: The traced tab (its main frame's id): the frames kept hang from it.
    tab: str
    session: str | None
    #: What the client asked for.
    stream: bool = False
    gzip: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    #: Chromium's ``Tracing.dataCollected`` messages, as they came.
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    #: Chunks dropped past ``max_bytes``.
    lost: bool = False

    def collect(self, data: str | bytes) -> None:
        raw = data.encode() if isinstance(data, str) else data
        if self.size + len(raw) > self.max_bytes:
            self.lost = True
            return
        self.size += len(raw)
        self.chunks.append(raw)


@dataclass
class Holder:
    """Who holds the browser's trace: a connection's session, since when."""

    number: int
    session: str | None
    call: int
    user: str
    scope: str
    since: float
    until: float
    trace: Trace
    #: Chromium answered the ``Tracing.start``.
    started: bool = False
    #: The relay sent ``Tracing.end`` itself (the bound passed).
    ended_by_relay: bool = False


@dataclass
class TraceStream:
    """A finished trace served by the relay: ``IO.read`` pages through it."""

    data: bytes
    base64: bool
    offset: int = 0

    def read(self, offset: object, size: object) -> dict[str, Any]:
        if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0:
            self.offset = min(offset, len(self.data))
        want = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0
        end = min(len(self.data), self.offset + (want or READ_BYTES))
        if not self.base64:
            # Text streams are cut on a character's first byte, as UTF-8 reads.
            while end < len(self.data) and (self.data[end] & 0xC0) == 0x80:
                end += 1
        piece = self.data[self.offset : end]
        self.offset = end
        eof = end >= len(self.data)
        if self.base64:
            return {"base64Encoded": True, "data": base64.b64encode(piece).decode(), "eof": eof}
        return {"data": piece.decode(), "eof": eof}


@dataclass
class Ending:
    """A trace that completed: what was collected, and Chromium's
    ``Tracing.tracingComplete`` message."""

    trace: Trace
    complete: dict[str, Any]


@dataclass
class Finished:
    """A trace filtered: its ``dataCollected`` messages, its
    ``tracingComplete``, and the stream it names if one was asked for."""

    messages: list[str]
    complete: dict[str, Any]
    stream: TraceStream | None = None

    def deliver(self, traces: Traces, number: int) -> list[str]:
        """The messages connection ``number`` gets, its stream kept to read."""
        if self.stream is not None:
            self.complete["params"]["stream"] = traces.keep_stream(number, self.stream)
        return [*self.messages, orjson.dumps(self.complete).decode()]


@dataclass
class TraceCommand:
    """What the relay does with a scoped client's trace command (None from
    :func:`command`: forward it as sent)."""

    #: Refused (rule ``trace``).
    verdict: Verdict | None = None
    #: Forwarded with these params instead of the client's.
    params: dict[str, Any] | None = None
    #: Answered by the relay with this result.
    result: dict[str, Any] | None = None
    #: Answered at once with this CDP error (bad params, an unknown stream).
    error: tuple[int, str] | None = None


#: The commands :func:`command` reads.
METHODS = frozenset(
    {
        "Tracing.start",
        "Tracing.recordClockSyncMarker",
        "Tracing.requestMemoryDump",
        "IO.read",
        "IO.close",
    }
)
_TRANSFER_MODES = ("ReportEvents", "ReturnAsStream")
_FORMATS = ("json", "proto")
_COMPRESSIONS = ("none", "gzip")


class Traces:
    """The browser's one trace, shared by every connection of the relay,
    and the finished traces each connection is reading."""

    def __init__(
        self,
        max_s: float = DEFAULT_MAX_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_s = max_s
        self.max_bytes = max_bytes
        self.clock = clock
        self.holder: Holder | None = None
        #: connection number -> handle -> stream.
        self.streams: dict[int, dict[str, TraceStream]] = {}
        self._handles = 0
        #: Scopes refused during the current hold (they wait their turn).
        self.waiting: set[str] = set()
        #: After a hold others waited on: its scope, and until when it waits.
        self.turn: tuple[str, float] | None = None

    # -- the hold ------------------------------------------------------------

    def held(self, number: int, session: str | None, scope: str) -> Verdict | None:
        """The refusal for a trace command while another holds the trace."""
        holder = self.holder
        now = self.clock()
        if holder is not None and now > holder.until + GRACE_S:
            self._release()  # the relay's end never completed
            holder = None
        if holder is None:
            turn = self.turn
            if turn is not None and turn[0] == scope and now < turn[1]:
                return Verdict(
                    "trace",
                    "blocked by agentenv guard trace: other agents waited for the browser's "
                    f"one trace while yours held it; they go first until {_when(turn[1])}, "
                    "then start yours again",
                    code=-32000,
                )
            return None
        if holder.number == number and holder.session == session:
            return None
        if holder.scope != scope:
            self.waiting.add(scope)
        if holder.number == number:
            who = "your own trace on another of your tabs holds it: end that one first"
        elif holder.scope == scope:
            who = f"{holder.user}'s trace (in your scope) holds it"
        else:
            who = "another agent's trace holds it"
        return Verdict(
            "trace",
            "blocked by agentenv guard trace: Chromium records one trace for the whole "
            f"browser, and {who}, since {_when(holder.since)}, until {_when(holder.until)} "
            "at the latest (AGENTENV_TRACE_MAX_S); start yours after it ends",
            code=-32000,
        )

    def take(
        self,
        number: int,
        session: str | None,
        call: int,
        user: str,
        scope: str,
        trace: Trace,
    ) -> Holder:
        now = self.clock()
        trace.max_bytes = self.max_bytes
        if self.turn is not None and self.turn[0] != scope:
            self.turn = None  # another scope took its turn
        self.waiting.discard(scope)
        self.holder = Holder(number, session, call, user, scope, now, now + self.max_s, trace)
        return self.holder

    def _release(self) -> None:
        """The hold ends: if other scopes waited on it, its scope waits
        :data:`TURN_S` before it may take the trace again."""
        holder, self.holder = self.holder, None
        if holder is not None and self.waiting - {holder.scope}:
            self.turn = (holder.scope, self.clock() + TURN_S)
        self.waiting.clear()

    def holding(self, number: int, session: str | None) -> Holder | None:
        holder = self.holder
        if holder is not None and holder.number == number and holder.session == session:
            return holder
        return None

    def answered(self, number: int, session: str | None, call: int, ok: bool) -> Holder | None:
        """Chromium answered a ``Tracing.start``: the hold is let go if it
        failed. The holder, when it started."""
        holder = self.holding(number, session)
        if holder is None or holder.call != call or holder.started:
            return None
        if not ok:
            self.holder = None  # it never held: no turn is owed
            return None
        holder.started = True
        return holder

    def let_go(self, number: int, session: str | None = None, every: bool = False) -> None:
        """A session detached (Chromium ends its trace), or the connection
        ended (``every``): its hold, and with the connection its streams, go."""
        holder = self.holder
        if holder is not None and holder.number == number and (every or holder.session == session):
            self._release()
        if every:
            self.streams.pop(number, None)

    def overdue(self, holder: Holder, own_id: int) -> str | None:
        """The relay's own ``Tracing.end`` for a trace past its bound, or None
        when it no longer holds the trace or was already ended."""
        if self.holder is not holder or holder.ended_by_relay:
            return None
        holder.ended_by_relay = True
        command: dict[str, Any] = {"id": own_id, "method": "Tracing.end"}
        if holder.session is not None:
            command["sessionId"] = holder.session
        return orjson.dumps(command).decode()

    def completed(self, number: int, session: str | None) -> Trace | None:
        """``Tracing.tracingComplete`` on the holder's session: the hold is
        let go and its trace handed to be filtered."""
        holder = self.holding(number, session)
        if holder is None:
            return None
        self._release()
        return holder.trace

    # -- streams ---------------------------------------------------------------

    def keep_stream(self, number: int, stream: TraceStream) -> str:
        self._handles += 1
        handle = f"{STREAM_PREFIX}{self._handles}"
        mine = self.streams.setdefault(number, {})
        while len(mine) >= MAX_STREAMS:
            del mine[next(iter(mine))]
        mine[handle] = stream
        self._within_budget()
        return handle

    def _within_budget(self) -> None:
        """Let the oldest unread streams go, of any connection, until the
        rest fit :data:`STREAMS_BUDGET` (handles are numbered in order)."""
        kept = [
            (int(handle[len(STREAM_PREFIX) :]), number, handle, len(stream.data))
            for number, mine in self.streams.items()
            for handle, stream in mine.items()
        ]
        total = sum(size for *_, size in kept)
        for _, number, handle, size in sorted(kept):
            if total <= STREAMS_BUDGET or len(kept) <= 1:
                break
            del self.streams[number][handle]
            total -= size

    def stream(self, number: int, handle: object) -> TraceStream | None:
        if not isinstance(handle, str):
            return None
        return self.streams.get(number, {}).get(handle)

    def close(self, number: int, handle: str) -> bool:
        return self.streams.get(number, {}).pop(handle, None) is not None


def command(
    traces: Traces,
    number: int,
    user: str,
    scope: str,
    session: str | None,
    tab: str | None,
    call: int,
    method: str,
    params: dict[str, Any] | None,
) -> TraceCommand | None:
    """A scoped client's trace command (one of :data:`METHODS`), on its
    connection ``number``'s ``session`` (``tab``: the tab it is on)."""
    params = params or {}
    if method in ("IO.read", "IO.close"):
        handle = params.get("handle")
        if not (isinstance(handle, str) and handle.startswith(STREAM_PREFIX)):
            return None  # Chromium's own stream (a PDF, a response body)
        stream = traces.stream(number, handle)
        if stream is None:
            return TraceCommand(error=(-32602, "Invalid stream handle"))
        if method == "IO.close":
            traces.close(number, handle)
            return TraceCommand(result={})
        return TraceCommand(result=stream.read(params.get("offset"), params.get("size")))
    refused = traces.held(number, session, scope)
    if refused is not None:
        return TraceCommand(verdict=refused)
    if method != "Tracing.start" or traces.holding(number, session) is not None:
        return None  # the holder's own: Chromium answers as it does
    mode = params.get("transferMode", "ReportEvents")
    form = params.get("streamFormat", "json")
    packed = params.get("streamCompression", "none")
    if mode not in _TRANSFER_MODES or form not in _FORMATS or packed not in _COMPRESSIONS:
        return TraceCommand(
            error=(
                -32602,
                "Tracing.start: transferMode is ReportEvents or ReturnAsStream, streamFormat "
                "json or proto, streamCompression none or gzip",
            )
        )
    if form == "proto":
        return TraceCommand(
            verdict=Verdict(
                "trace",
                "blocked by agentenv guard trace: a proto trace cannot be read by the relay, "
                "which keeps a trace to your own pages (Chromium records every agent's); "
                "ask for streamFormat json (the default)",
            )
        )
    if tab is None:
        return TraceCommand(
            verdict=Verdict(
                "trace",
                "blocked by agentenv guard trace: a trace is kept to the tab it is started "
                "on; send Tracing.start on a page's session",
            )
        )
    trace = Trace(tab, session, stream=mode == "ReturnAsStream", gzip=packed == "gzip")
    traces.take(number, session, call, user, scope, trace)
    sent = {k: v for k, v in params.items() if k not in ("streamFormat", "streamCompression")}
    # Chromium hands the events to the relay, which keeps the tab's own.
    sent["transferMode"] = "ReportEvents"
    return TraceCommand(params=sent)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def finish(ending: Ending) -> Finished:
    """The trace as its client asked for it, kept to its own tab: its
    ``Tracing.dataCollected`` messages, then Chromium's ``tracingComplete``
    (naming the relay's stream, when one was asked for: :meth:`Finished.deliver`).
    Pure, and slow on big traces (about a second for 70 MB): the relay runs
    it off its event loop."""
    trace = ending.trace
    chunks, trace.chunks = trace.chunks, []  # keep_own lets each go once read
    kept = keep_own(chunks, trace.tab)
    params = ending.complete.get("params")
    lost = bool(params.get("dataLossOccurred")) if isinstance(params, dict) else False
    lost = lost or trace.lost
    session = {"sessionId": trace.session} if trace.session is not None else {}
    complete: dict[str, Any] = {
        "method": "Tracing.tracingComplete",
        "params": {"dataLossOccurred": lost},
        **session,
    }
    if not trace.stream:
        tail = orjson.dumps(session)[1:-1]
        messages = [
            (
                b'{"method":"Tracing.dataCollected","params":{"value":'
                + events
                + (b"}," + tail + b"}" if tail else b"}}")
            ).decode()
            for events in kept.chunks
            if events != b"[]"
        ]
        return Finished(messages, complete)
    body = (
        b'{"traceEvents":['
        + b",".join(events[1:-1] for events in kept.chunks if events != b"[]")
        + b"]}"
    )
    kept.chunks = []
    complete["params"] |= {
        "traceFormat": "json",
        "streamCompression": "gzip" if trace.gzip else "none",
    }
    data = gzip.compress(body, 6) if trace.gzip else body
    return Finished([], complete, TraceStream(data, base64=trace.gzip))


def event(traces: Traces, number: int, data: str) -> Ending | None:
    """A ``Tracing.*`` event to a scoped client, which never gets one as
    Chromium sent it (it holds every scope's events): the holder's data is
    collected, its ``tracingComplete`` ends the hold and is handed back for
    :func:`finish`; buffer usage (the whole browser's) and anything else
    are dropped."""
    holder = traces.holder
    mine = holder is not None and holder.number == number
    if data.startswith('{"method":"Tracing.dataCollected"'):
        if holder is not None and mine and _on_session(data, holder.session):
            holder.trace.collect(data)
        return None
    if mine and data.startswith('{"method":"Tracing.tracingComplete"'):
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        session = message.get("sessionId") if isinstance(message, dict) else None
        trace = traces.completed(number, session if isinstance(session, str) else None)
        return Ending(trace, message) if trace is not None else None
    return None


def _on_session(data: str, session: str | None) -> bool:
    """Whether an event Chromium wrote (``sessionId`` last) is on ``session``."""
    if session is None:
        return '"sessionId":' not in data[-200:]
    return data.endswith(f'"sessionId":"{session}"}}')
