"""The recorder's HTTP ops on 127.0.0.1 (the app server forwards to them).

``POST /start``, ``/end``, ``/end_all`` with the wire models of
:mod:`agentenv.protocol.recording`; the control token is required. A
follower reads the log file and hands new lines to every open recording.
On shutdown every open recording is ended (reason ``stopped``) so its log
and manifest upload. The follower reads the log from its first line, for
what was typed into password fields (:mod:`.typed`: the network log's
window); only lines after the recorder's start go to recordings.

An ``end`` of a recording this recorder does not know, but has the journal
of (:mod:`.journal`: its recorder was killed mid-recording, and supervisord
started this one), restores it from the journal and ends it: a last frame,
the log's slice, its manifest rebuilt (``rebuilt``, ``rebuilt_why``) and
signed, listing only the files the journal names. ``end_all`` restores
none: an S3 grant is in no journal, so only an end bringing one can upload.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ValidationError

from agentenv.access import bearer_token
from agentenv.http import BODY_LIMIT, error_middleware, read_json
from agentenv.log.lines import iso
from agentenv.log.reader import LogReader
from agentenv.metrics import CONTENT_TYPE, RecorderCounts, render
from agentenv.opened import opened_of
from agentenv.process import log_dir
from agentenv.protocol import problems
from agentenv.protocol.answers import RECORDING_ANSWERS, RecordingStarted
from agentenv.protocol.log import parse_line
from agentenv.protocol.recording import End, EndAll, Grant, Start, new_recording_id
from agentenv.recorder.grants import Listed, open_grant, prove
from agentenv.recorder.journal import Journal, Journaled, prune, read_journal
from agentenv.recorder.provenance import Provenance, provenance, signer_of
from agentenv.recorder.recorder_errors import Refused
from agentenv.recorder.recording_life import Recording
from agentenv.recorder.typed import Typed
from agentenv.relay_link import BrowserError, BrowserLink
from agentenv.scopes import Scopes
from agentenv.settings import Settings

__all__ = ["Recorder", "make_app"]

log = logging.getLogger("agentenv.recorder")

settings_key = web.AppKey("settings", Settings)
recorder_key: web.AppKey[Recorder] = web.AppKey("recorder")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: How long an end reads the log to catch up with what was written before it.
CATCH_UP_S = 2.0
#: Ended recordings kept for a retried end (each is its manifest alone);
#: past these, the oldest go, and an end retried for one is answered 404
#: as after a restart (rebuild its manifest from the upload).
ENDED_KEPT = 256


class Recorder:
    def __init__(
        self,
        settings: Settings,
        link: BrowserLink,
        reader: LogReader,
        http: aiohttp.ClientSession | None = None,
    ) -> None:
        self.settings = settings
        self.link = link
        self.reader = reader
        self.http = http
        self.scopes = Scopes.of(settings)
        #: A link in each scope recorded (two scopes or more), made on first need.
        self.links: dict[str, BrowserLink] = {}
        self.recordings: dict[str, Recording] = {}
        #: What ``/metrics`` reads; every recording counts its frames here.
        self.counts = RecorderCounts(
            open=lambda: sum(1 for r in self.recordings.values() if r.manifest is None)
        )
        self.by_request: dict[str, str] = {}
        #: What the log says was typed into password fields, by tab (every
        #: recording's network log reads it).
        self.typed = Typed()
        self._lock = asyncio.Lock()
        self._last = 0
        #: One reader of the log at a time (the follower, or an end catching up).
        self._reading = asyncio.Lock()
        #: The log's end when the recorder started (the follower sets it).
        self._past = 0

    async def follow(self) -> None:
        """Hand each new log line to the open recordings, as it appears; and
        every line, from the log's first, to :attr:`typed`."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.reader.read, 0, 1)
        # Lines before the recorder started are read for typing only.
        self._past = self.reader.contiguous
        self._last = 0
        while True:
            try:
                full = await self._read_on()
            except Exception:  # keep following: a recording without frames is worse
                log.exception("reading the log failed; trying again")
                full = False
            if not full:
                await asyncio.sleep(0.05)

    async def _read_on(self) -> bool:
        """Hand the open recordings the lines written since the last read;
        whether there may be more (a full page)."""
        async with self._reading:
            loop = asyncio.get_running_loop()
            page = await loop.run_in_executor(None, self.reader.read, self._last, 1000)
            self.typed.read(page.lines)
            if page.last >= self._past:
                self.typed.ready = True
            open_ones = [r for r in self.recordings.values() if r.manifest is None]
            if open_ones and page.last > self._past:  # else the lines are passed over unparsed
                for raw in page.lines:
                    try:
                        line = parse_line(raw)
                        for recording in open_ones:
                            recording.seen(line)
                    except Exception:  # one odd line is passed over, not read forever
                        log.exception("a log line could not be followed")
            for recording in open_ones:
                if recording.har is not None:
                    recording.har.logged()
            self._last = page.last
            return len(page.lines) == 1000

    async def _caught_up(self) -> None:
        """Every line written before an end, seen by its recording: an agent
        that ends its recording right after its last answer had that act's
        line written, and not yet read (the follower reads every 50 ms), so
        it went unframed. Bounded: a log growing faster is read for at most
        :data:`CATCH_UP_S`."""
        until = time.monotonic() + CATCH_UP_S
        with contextlib.suppress(Exception):  # the follower reads on regardless
            while await self._read_on() and time.monotonic() < until:
                pass

    async def start(self, ask: Start) -> Recording:
        async with self._lock:
            known = self.by_request.get(ask.request_id)
            if known is not None:
                return self.recordings[known]  # a retried start joins the recording
            ask = within_budget(ask, self.settings)
            scope = self._scope(ask.scope)
            await self.prune()
            recording_id = new_recording_id()
            journal = Journal(self.settings.journal_dir, recording_id)
            upload = Listed(
                await open_grant(ask.upload, recording_id, self.settings.upload_roots),
                journal=journal,
            )
            made_by = await provenance(self.settings, self.link.http)
            await prove(upload, recording_id, iso(), {"scope": scope, **made_by.facts()})
            recording = self._recording(ask, upload, recording_id, scope, made_by, journal)
            await recording.begin()
            self.recordings[recording.recording_id] = recording
            self.by_request[ask.request_id] = recording.recording_id
            return recording

    def _recording(
        self,
        ask: Start,
        upload: Listed,
        recording_id: str,
        scope: str | None,
        made_by: Provenance,
        journal: Journal,
    ) -> Recording:
        return Recording(
            ask,
            self._link(scope),
            self.reader,
            upload,
            recording_id,
            roots=self.settings.upload_roots,
            scope=scope,
            counts=self.counts,
            downloads_folder=str(self.settings.downloads_for(scope)),
            download_bytes=self.settings.recording_download_bytes,
            har_link=BrowserLink(self.settings, self.http, scope)
            if ask.har is not None and self.http is not None
            else None,
            typed=self.typed,
            video_budget=self.settings.recording_video_bytes_per_minute,
            provenance=made_by,
            journal=journal,
        )

    async def prune(self) -> None:
        """Remove the journals of recordings that will get no end (:func:`prune`)."""
        open_ids = {k for k, r in self.recordings.items() if r.manifest is None}
        folder = self.settings.journal_dir
        removed = await asyncio.to_thread(prune, folder, time.time(), open_ids)
        if removed:
            log.info("removed the journals of %s (no end came)", ", ".join(removed))

    async def _restore(self, ask: End) -> Recording:
        """The recording ``ask`` ends, restored from its journal (its recorder
        restarted mid-recording); refused when it has none."""
        async with self._lock:
            known = self.recordings.get(ask.recording_id)
            if known is not None:
                return known
            folder = self.settings.journal_dir
            found = await asyncio.to_thread(read_journal, folder, ask.recording_id)
            if found is None:
                raise Refused(
                    404,
                    f"no recording {ask.recording_id!r} here (the recorder may have restarted: "
                    "rebuild its manifest from the upload)",
                )
            grant = ask.upload or (Grant(url=found.start.grant) if found.start.grant else None)
            if grant is None:
                raise Refused(
                    409,
                    f"recording {ask.recording_id!r} lost its recorder mid-recording, and "
                    "its S3 grant with it: end it with upload (a fresh grant) to have its "
                    "manifest rebuilt and signed",
                )
            recording = await self._restored(found, grant)
            self.recordings[ask.recording_id] = recording
            return recording

    async def _restored(self, found: Journaled, grant: Grant) -> Recording:
        first = found.start
        journal = Journal.resumed(self.settings.journal_dir, first.recording_id, found)
        roots = self.settings.upload_roots
        upload = Listed(await open_grant(grant, first.recording_id, roots), found.hashes, journal)
        made_by = Provenance(
            first.image_digest, first.chromium, first.chromium_flags, await signer_of(self.settings)
        )
        try:
            ask = Start.model_validate({**first.ask, "upload": grant})
        except ValidationError as exc:
            raise Refused(500, f"its journal's start does not read: {exc}") from None
        recording = self._recording(ask, upload, first.recording_id, first.scope, made_by, journal)
        recording.start_seq, recording.started_at = first.start_seq, first.started_at
        recording.frames, recording.restored = found.frames(), found
        recording.last_tab = next((f.tab for f in reversed(recording.frames) if f.tab), None)
        return recording

    def _scope(self, asked: str | None) -> str | None:
        """The scope a recording records (None: every entry, on a computer of
        one scope or none); refused when the computer has no such scope."""
        unknown = self.scopes.unknown(asked)
        if unknown is not None:
            raise Refused(400, f"scope: {unknown}")
        if asked is not None and self.scopes.on_demand:
            # A scope being closed has had its recordings ended (end_all) and
            # is not yet gone: one started now would outlive it and record
            # the next scope opened under its name.
            found = opened_of(self.settings.scopes_file).scopes().get(asked)
            if found is not None and found.closing:
                raise Refused(
                    409,
                    f"scope: {asked!r} is being closed: record a scope that is open (scopes/list)",
                )
        if not self.scopes.isolated:
            return None
        return asked or self.scopes.home

    def _link(self, scope: str | None) -> BrowserLink:
        if scope is None or self.http is None:
            return self.link
        found = self.links.get(scope)
        if found is None:
            found = self.links[scope] = BrowserLink(self.settings, self.http, scope)
        return found

    async def close(self) -> None:
        for link in [self.link, *self.links.values()]:
            await link.close()

    async def end(self, ask: End) -> Any:
        await self._caught_up()
        recording = self.recordings.get(ask.recording_id)
        grant = ask.upload
        if recording is None:
            recording = await self._restore(ask)
            if recording.restored is not None:  # the restore opened the end's grant
                grant = None
        manifest = await recording.end(ask.reason, grant)
        self._trim()
        return manifest

    def _trim(self) -> None:
        """Forget the oldest ended recordings past :data:`ENDED_KEPT` (a
        computer serving a batch ends thousands)."""
        ended = [k for k, r in self.recordings.items() if r.manifest is not None]
        for recording_id in ended[: max(0, len(ended) - ENDED_KEPT)]:
            gone = self.recordings.pop(recording_id)
            self.by_request.pop(gone.start.request_id, None)

    async def end_all(self, reason: str, scope: str | None = None) -> list[Any]:
        """End every open recording (of ``scope`` only, if named); one that
        fails does not stop the others (it stays open, and a retry ends it)."""
        await self._caught_up()
        open_ones = [
            r
            for r in self.recordings.values()
            if r.manifest is None and (scope is None or r.scope == scope)
        ]
        ended = await asyncio.gather(
            *(r.end(reason, None) for r in open_ones), return_exceptions=True
        )
        for recording, result in zip(open_ones, ended, strict=True):
            if isinstance(result, BaseException):
                log.error("could not end %s: %s", recording.recording_id, result)
        if scope is not None and all(not isinstance(m, BaseException) for m in ended):
            # The scope is being closed: its link goes with it (made again
            # should a scope of that name be opened and recorded later).
            link = self.links.pop(scope, None)
            if link is not None:
                await link.close()
        self._trim()
        return [m for m in ended if not isinstance(m, BaseException)]


def within_budget(ask: Start, settings: Settings) -> Start:
    """``ask`` with this computer's budgets where it names none; refused when
    it asks for more than the computer allows (the card shows the budgets)."""
    limits = {
        "max_frames": settings.recording_max_frames,
        "max_duration_s": settings.recording_max_duration_s,
    }
    update: dict[str, Any] = {}
    for name, limit in limits.items():
        wanted = getattr(ask, name)
        if wanted is None:
            update[name] = limit
        elif wanted > limit:
            raise Refused(
                400,
                f"{name} {wanted:g} is over this computer's limit of {limit}: ask for "
                f"{limit} or less (GET /card shows the limits)",
            )
    fps_max = settings.recording_video_fps_max
    if ask.video is not None and ask.video.fps > fps_max:
        raise Refused(
            400,
            f"video.fps {ask.video.fps} is over this computer's limit of {fps_max}: ask for "
            f"{fps_max} or less (GET /card shows the limits)",
        )
    return ask.model_copy(update=update)


def _check_token(request: web.Request) -> None:
    settings = request.app[settings_key]
    token = bearer_token(request.headers.get("Authorization"))
    if settings.control_token and (
        token is None or not hmac.compare_digest(token.encode(), settings.control_token.encode())
    ):
        raise Refused(401, "the recorder takes the control token (call it through the app server)")


async def _body(request: web.Request, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate(await read_json(request, BODY_LIMIT))
    except ValidationError as exc:
        raise Refused(400, "; ".join(problems(exc))) from None


@web.middleware
async def _checks(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path != "/healthz":
        _check_token(request)
    try:
        return await handler(request)
    except BrowserError as exc:  # the relay, for the frames: not reached
        raise Refused(502, str(exc)) from None


def _answer(op: str, result: Any) -> web.Response:
    """``op``'s answer, written by its model in
    :data:`agentenv.protocol.answers.RECORDING_ANSWERS`."""
    return web.Response(
        body=RECORDING_ANSWERS[op].dump_json(result), content_type="application/json"
    )


async def start(request: web.Request) -> web.Response:
    recording = await request.app[recorder_key].start(await _body(request, Start))
    return _answer("start", RecordingStarted(recording_id=recording.recording_id))


async def end(request: web.Request) -> web.Response:
    manifest = await request.app[recorder_key].end(await _body(request, End))
    return _answer("end", manifest)


async def end_all(request: web.Request) -> web.Response:
    ask: EndAll = await _body(request, EndAll)
    manifests = await request.app[recorder_key].end_all(ask.reason, ask.scope)
    return _answer("end_all", manifests)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def metrics(request: web.Request) -> web.Response:
    """The recorder's counts, for the app server's /metrics."""
    return web.Response(
        body=render(request.app[recorder_key].counts), headers={"Content-Type": CONTENT_TYPE}
    )


async def _recorder_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[settings_key]
    http = aiohttp.ClientSession()
    link = BrowserLink(settings, http)
    folder, _ = log_dir(settings)
    recorder = Recorder(settings, link, LogReader(folder / settings.log_file.name), http)
    app[recorder_key] = recorder
    await recorder.prune()
    follower = asyncio.create_task(recorder.follow())
    yield
    try:
        await asyncio.wait_for(recorder.end_all("stopped"), 50)
    except Exception:
        log.exception("could not end every recording while stopping")
    follower.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await follower
    await recorder.close()
    await http.close()


def make_app(settings: Settings) -> web.Application:
    app = web.Application(
        middlewares=[
            error_middleware(lambda: "/start, /end, /end_all, /healthz, /metrics"),
            _checks,
        ]
    )
    app[settings_key] = settings
    app.cleanup_ctx.append(_recorder_ctx)
    app.router.add_post("/start", start)
    app.router.add_post("/end", end)
    app.router.add_post("/end_all", end_all)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app
