"""``network.har``: the recorded scope's requests, as HAR 1.2 (docs/spec.md
section 4, "More in a recording"), with the log's secrets rules applied.

How it stays out of the agents' way: the collector has a relay connection
of its own (the control token, in the recording's scope), attaches its own
sessions to the scope's pages (and, through them, their out-of-process
frames) and turns ``Network`` on in those sessions only. Chromium keeps each
session's domains apart, so an agent's sessions see nothing new, and a
collector that dies leaves the pages as they were (Chromium lets a target go
on when a session that held it detaches). A tab made during the recording is
held at its start (``Target.setAutoAttach`` with ``waitForDebuggerOnStart``)
until the collector has ``Network`` on in it, then let go: its very first
request is in the HAR (an agent that opens a tab and navigates at once, as
Playwright's ``new_page`` and ``goto`` do, lost it before), at the cost of
one round trip to the collector on a new tab. Its commands are the
computer's own and are not on the action log.

What is written (:func:`agentenv.recorder.har_entry.entry`): URLs and query values with credentials
replaced; ``Cookie``, ``Set-Cookie``, ``Authorization`` and every secret
header's value withheld; cookies by name only. Bodies only when the start
asks (``har: {bodies: true}``), each cut to :data:`BODY_CAP`, by the rules of
:mod:`agentenv.log.bodies`: what a page sends is withheld unless shown
harmless (structure and keys kept; a value only where a key that names no
credential names it and it has no secret's shape), what a server answers
keeps its text with the log's rules; binary left out.

**Typed text.** A request sent by a tab while a password field in it held
text the relay withheld has every string and number of its body withheld,
and of its answer (which may echo it). The window, per tab
(:meth:`Har._typed`): from the latest withheld typing on that tab (read from
the action log: :mod:`agentenv.recorder.typed`) on, every request of the tab
is in it, except those a document sent that the tab's main frame navigated
to after that typing (its ``loaderId``, and not that navigation's own
request: a form's submission is sent by the document it leaves). So a
form's post, a beacon sent as the page unloads, a page restored from the
back-forward cache, the tab's frames and workers are in it, until the tab
moves to a new document; that document's own requests are not. A request is
judged only once the log has been read past the time it was sent (the
page's script can send typed text before the relay has written the
typing's line): with bodies on, entries wait for that, and the end judges
what is left with the recording's whole slice of the log (a log not yet read
from its start counts as typing on every tab). Without bodies, nothing
waits: nothing typed is written.

Each hop of a redirect is an entry with its own
headers: Chromium sends the headers as sent and received (``…ExtraInfo``,
with the cookies) apart from the requests, a redirect's often after the next
hop began, so they are matched to the hops in order when the last one ends.

Entries are kept up to :data:`MAX_ENTRIES` (the rest counted as dropped), and
uploaded in parts of :data:`PART_ENTRIES` finished entries as they come
(``network/NNNN.har``), then whole as ``network.har`` at the end, so a
computer that dies loses at most one part.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentenv.protocol.recording import HarEntry
from agentenv.recorder.grants import Uploader, UploadError
from agentenv.recorder.har_entry import BODY_CAP, HarRequest, body_bytes, document, entry, texty
from agentenv.recorder.har_people import mark_people
from agentenv.recorder.typed import Typed
from agentenv.relay_link import BrowserError, BrowserLink

__all__ = ["ENTRIES_BYTES", "MAX_ENTRIES", "PART_ENTRIES", "Har"]

log = logging.getLogger("agentenv.recorder")

#: The most entries one recording keeps, and how many make an uploaded part.
MAX_ENTRIES = 20_000
PART_ENTRIES = 500
#: The bytes every entry together may hold before further requests are dropped.
ENTRIES_BYTES = 32 * 1024 * 1024
#: How far the log's clock must be past a request before it is judged, and
#: past a typing before a navigation counts as after it: the relay's and
#: Chromium's clocks are the same wall clock, read at different moments.
CLOCK_MARGIN_S = 0.25
#: Main-frame navigations remembered a tab (older ones count as before any typing).
_NAVIGATIONS_KEPT = 256
_EXTRA_INFO = frozenset({"Network.requestWillBeSentExtraInfo", "Network.responseReceivedExtraInfo"})
#: Requests whose ``…ExtraInfo`` headers are kept while they wait for them,
#: and the hops of one (Chromium follows 20 redirects at most).
_EXTRA_KEPT, _HOPS = 1000, 21
#: A response's flags for an answer that never went to the network.
_CACHED = ("fromDiskCache", "fromPrefetchCache", "fromServiceWorker", "fromEarlyHints")


@dataclass
class Har:
    """One recording's network log (see the module's docstring)."""

    link: BrowserLink
    upload: Uploader
    bodies: bool = False
    #: What the action log says was typed into password fields (the
    #: recorder's follower feeds it; see the module's text).
    typed: Typed = field(default_factory=Typed)
    sessions: dict[str, str] = field(default_factory=dict)  # session -> tab
    pending: dict[str, HarRequest] = field(default_factory=dict)  # requestId (by session)
    done: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    parts: list[str] = field(default_factory=list)
    _uploaded: int = 0
    _parts_made: int = 0
    _uploading: asyncio.Lock = field(default_factory=asyncio.Lock)
    _held: int = 0  # bytes the kept entries hold, about
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    #: Each request's ``…ExtraInfo`` headers as sent and as received, one of
    #: each a hop that went to the network, in order. Chromium sends them
    #: apart from the requests, before or after, a redirect's after the next
    #: hop began: they are matched to the hops when the last one ends.
    _extra: dict[str, tuple[list[Any], list[tuple[Any, Any]]]] = field(default_factory=dict)
    #: Each tab's main-frame navigations: their ``loaderId`` and when they began.
    _navigations: dict[str, OrderedDict[str, float]] = field(default_factory=dict)
    #: Finished requests (their hops) waiting to be judged, and their bytes.
    _waiting: deque[list[HarRequest]] = field(default_factory=deque)
    _waiting_bytes: int = 0

    async def start(self) -> None:
        self.link.on_event = self._event
        # Each page of the scope, there already or made later, attached once:
        # a new one held until ``_watch`` has turned Network on in it.
        await self.link.call(
            "Target.setAutoAttach",
            {
                "autoAttach": True,
                "waitForDebuggerOnStart": True,
                "flatten": True,
                "filter": [{"type": "page"}],
            },
        )

    def logged(self) -> None:
        """The log was read further: judge the requests it now covers."""
        if self._waiting:
            self._judge(final=False)

    async def stop(self, lines: list[bytes] | None = None) -> HarEntry | None:
        """Stop collecting; upload what is left and the whole ``network.har``.
        ``lines``: the recording's slice of the log, so that every request
        still waiting is judged knowing all the typing before the end."""
        self.link.on_event = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(BrowserError):
            await self.link.close()
        for key in list(self.pending):  # still open at the end: written as they stand
            self._finish(key)
        self.typed.read(lines or [])
        self._judge(final=True)
        await self._upload_parts(final=True)
        mark_people(self.done, lines or [])  # the whole file's: the parts are uploaded
        try:
            await self.upload.put("network.har", document(self.done), "application/json")
        except UploadError as exc:
            log.error("network.har: %s", exc)
            return HarEntry(
                file=None, entries=len(self.done), parts=self.parts, dropped=self.dropped
            )
        return HarEntry(
            file="network.har", entries=len(self.done), parts=self.parts, dropped=self.dropped
        )

    # -- sessions ---------------------------------------------------------------

    def _later(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self, session: str, tab: str, pages: bool, waiting: bool) -> None:
        """Network on in ``session`` (a page's, or a frame's or worker's of
        it), then, if Chromium holds it for us, let it run: always, even
        when turning Network on failed, so no page is left waiting."""
        self.sessions[session] = tab
        # Without bodies, Chromium keeps no response bodies for this session.
        buffers = {} if self.bodies else {"maxTotalBufferSize": 0, "maxResourceBufferSize": 0}
        try:
            await self.link.call("Network.enable", buffers, session=session, deadline_s=5)
            if pages:  # its out-of-process frames and workers, through this session
                await self.link.call(
                    "Target.setAutoAttach",
                    {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
                    session=session,
                    deadline_s=5,
                )
        except BrowserError as exc:
            log.info("network.har: not watching %s: %s", tab[:64], exc)
        finally:
            if waiting:
                with contextlib.suppress(BrowserError):
                    await self.link.call(
                        "Runtime.runIfWaitingForDebugger", {}, session=session, deadline_s=5
                    )

    # -- events -----------------------------------------------------------------

    def _event(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") or {}
        session = message.get("sessionId")
        if method == "Target.attachedToTarget":
            attached = params.get("sessionId")
            info = params.get("targetInfo") or {}
            waiting = bool(params.get("waitingForDebugger"))
            if not isinstance(attached, str):
                return
            if session is None:  # a page of the scope's
                tab = str(info.get("targetId"))
                self._later(self._watch(attached, tab, pages=True, waiting=waiting))
            elif session in self.sessions:  # a frame or worker of a page's
                tab = self.sessions[session]
                self._later(self._watch(attached, tab, pages=False, waiting=waiting))
            return
        if method == "Target.detachedFromTarget":
            self.sessions.pop(str(params.get("sessionId")), None)
            return
        if not isinstance(method, str) or not method.startswith("Network."):
            return
        if session not in self.sessions:
            return
        request_id = params.get("requestId")
        if not isinstance(request_id, str):
            return
        key = f"{session}:{request_id}"
        if method == "Network.requestWillBeSent":
            self._sent(key, self.sessions[session], params)
            return
        if method in _EXTRA_INFO:
            sent, got = self._extra.setdefault(key, ([], []))
            if len(sent) + len(got) < 2 * _HOPS:
                headers = params.get("headers")
                if method == "Network.requestWillBeSentExtraInfo":
                    sent.append(headers)
                else:
                    got.append((params.get("statusCode"), headers))
            if len(self._extra) > _EXTRA_KEPT:  # the oldest: heard after its request ended
                self._extra.pop(next(iter(self._extra)))
            return
        known = self.pending.get(key)
        if known is None:
            return
        if method == "Network.responseReceived":
            known.response = params.get("response") or {}
            known.kind = str(params.get("type") or known.kind)
        elif method == "Network.loadingFinished":
            known.size = int(params.get("encodedDataLength") or 0)
            known.finished = float(params.get("timestamp") or known.monotonic)
            if self.bodies:
                self._later(self._body_then_finish(key, session, request_id))
            else:
                self._finish(key)
        elif method == "Network.loadingFailed":
            known.failed = str(params.get("errorText") or "failed")
            known.finished = float(params.get("timestamp") or known.monotonic)
            self._finish(key)

    def _sent(self, key: str, tab: str, params: dict[str, Any]) -> None:
        redirected = params.get("redirectResponse")
        hops: list[HarRequest] = []
        if isinstance(redirected, dict) and key in self.pending:
            earlier = self.pending.pop(key)
            earlier.response = redirected
            earlier.finished = float(params.get("timestamp") or earlier.monotonic)
            hops, earlier.before = [*earlier.before, earlier], []
        held = self._held + self._waiting_bytes
        if len(self.done) + len(self.pending) >= MAX_ENTRIES or held >= ENTRIES_BYTES:
            self.dropped += 1
            self._write(key, hops)
            return
        self._finish(key)  # the same id again, not redirected: the earlier as it stands
        request_id, loader = str(params.get("requestId") or ""), str(params.get("loaderId") or "")
        started = float(params.get("wallTime") or 0.0)
        kind = str(params.get("type") or "")
        if kind == "Document" and request_id == loader and params.get("frameId") == tab:
            # The main frame's navigation (a page's main frame has its tab's id).
            navigations = self._navigations.setdefault(tab, OrderedDict())
            navigations.setdefault(loader, started)
            while len(navigations) > _NAVIGATIONS_KEPT:
                navigations.popitem(last=False)
        self.pending[key] = HarRequest(
            tab=tab,
            request=params.get("request") or {},
            started=started,
            monotonic=float(params.get("timestamp") or 0.0),
            kind=kind,
            request_id=request_id,
            loader=loader,
            before=hops,
        )

    async def _body_then_finish(self, key: str, session: str, request_id: str) -> None:
        known = self.pending.get(key)
        if known is not None and texty(known.response) and 0 <= known.size <= BODY_CAP:
            with contextlib.suppress(BrowserError):
                got = await self.link.call(
                    "Network.getResponseBody", {"requestId": request_id}, session=session
                )
                if not got.get("base64Encoded"):
                    known.body = str(got.get("body", ""))
        self._finish(key)

    def _finish(self, key: str) -> None:
        known = self.pending.pop(key, None)
        if known is not None:
            self._write(key, [*known.before, known])

    def _write(self, key: str, hops: list[HarRequest]) -> None:
        """A request's hops (its redirects, then it), with their headers as
        sent and received, as entries."""
        if not hops:
            return
        sent, got = self._extra.pop(key, ([], []))
        _match(hops, sent, got)
        if not self.bodies:  # nothing typed is written: nothing to wait for
            self._entries(hops, typed=False)
            return
        self._waiting.append(hops)
        self._waiting_bytes += sum(body_bytes(hop) for hop in hops)
        self._judge(final=False)

    def _judge(self, final: bool) -> None:
        """Write the waiting requests the log's clock is past (every one, at
        the end), each judged by :meth:`_typed`."""
        typed = self.typed
        while self._waiting:
            hops = self._waiting[0]
            if not final and not (
                typed.ready and typed.clock > max(h.started for h in hops) + CLOCK_MARGIN_S
            ):
                break
            self._waiting.popleft()
            self._waiting_bytes -= sum(body_bytes(hop) for hop in hops)
            for hop in hops:
                self._entries([hop], typed=self._typed(hop))

    def _typed(self, hop: HarRequest) -> bool:
        """Whether a request was sent while a password field of its tab held
        text the relay withheld (the window: see the module's text)."""
        if not self.typed.ready:
            return True  # the log not read from its start: any tab may have been typed into
        typing = self.typed.at(hop.tab)
        if typing is None:
            return False
        if hop.loader and hop.loader != hop.request_id:
            navigations = self._navigations.get(hop.tab)
            began = navigations.get(hop.loader) if navigations is not None else None
            if began is not None and began > typing + CLOCK_MARGIN_S:
                return False  # sent by a document the tab moved to after the typing
        return True

    def _entries(self, hops: list[HarRequest], typed: bool) -> None:
        for hop in hops:
            try:
                made = entry(hop, self.bodies, typed=typed)
            except (RecursionError, ValueError, TypeError) as exc:  # a page's odd message
                log.info("network.har: a request left out: %s", type(exc).__name__)
                self.dropped += 1
                continue
            self._held += len(orjson.dumps(made))
            self.done.append(made)
        if len(self.done) - self._uploaded >= PART_ENTRIES and not self._uploading.locked():
            self._later(self._upload_parts(final=False))

    async def _upload_parts(self, final: bool) -> None:
        async with self._uploading:  # one at a time: each part its own name
            while len(self.done) - self._uploaded >= (1 if final else PART_ENTRIES):
                part = self.done[self._uploaded : self._uploaded + PART_ENTRIES]
                name = f"network/{self._parts_made:04d}.har"
                self._parts_made += 1
                self._uploaded += len(part)
                try:
                    await self.upload.put(name, document(part), "application/json")
                except UploadError as exc:
                    log.error("%s: %s", name, exc)
                    continue
                self.parts.append(name)


def _match(hops: list[HarRequest], sent: list[Any], got: list[tuple[Any, Any]]) -> None:
    """Each hop that went to the network (not answered from a cache) takes
    the next headers as sent, and the next as received whose status is its."""
    networked = [h for h in hops if not any((h.response or {}).get(k) for k in _CACHED)]
    for hop, headers in zip(networked, sent, strict=False):
        if isinstance(headers, dict):
            hop.sent_headers = headers
    for hop in networked:
        status = (hop.response or {}).get("status")
        for n, (code, headers) in enumerate(got):
            if code is None or status is None or code == status:
                if isinstance(headers, dict):
                    hop.got_headers = headers
                del got[: n + 1]
                break
