"""A finished trace kept to the traced tab's own events (:mod:`.traces`):
every event of the renderer processes its frames are in, and of the browser
process only those that name its frames. Pure, no I/O; slow on big traces,
so the relay runs it off its event loop (:func:`agentenv.relay.traces.finish`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["BROWSER_KEPT", "Kept", "keep_own"]

#: Browser-process events kept, when they name the traced tab's frames
#: (what DevTools' and Lighthouse's trace readers take from it); every
#: other browser-process event is dropped. ``Screenshot`` is the traced
#: tab's own: Chromium's trace screenshots follow the traced page's frames
#: only (measured on Chromium 156, two contexts at once).
BROWSER_KEPT = frozenset(
    {
        "TracingStartedInBrowser",
        "FrameCommittedInBrowser",
        "FrameDeletedInBrowser",
        "ProcessReadyInBrowser",
        "ResourceWillSendRequest",
        "Screenshot",
        "clock_sync",
    }
)
#: Metadata of the browser process kept (its name, its threads' names).
_BROWSER_METADATA = frozenset(
    {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}
)
#: Browser-process events that tie a frame to its renderer process.
_FRAME_EVENTS = frozenset(
    {"FrameCommittedInBrowser", "ProcessReadyInBrowser", "FrameDeletedInBrowser"}
)
#: What a chunk must hold for the first pass to read it.
_CLUES = (
    b'"TracingStartedInBrowser"',
    b'"FrameCommittedInBrowser"',
    b'"ProcessReadyInBrowser"',
    b'"ResourceSendRequest"',
    b'"process_name"',
)


@dataclass
class Kept:
    """What :func:`keep_own` kept: each chunk's kept events as a JSON array
    (written at once, so no chunk's parsed events outlive it), and what it
    knew."""

    chunks: list[bytes]
    frames: set[str]
    renderers: set[int]
    browser: int | None
    dropped: int


def keep_own(chunks: Iterable[bytes], tab: str) -> Kept:
    """The events of ``chunks`` (Chromium's ``Tracing.dataCollected``
    messages) that are the traced tab's own: every event of the renderer
    processes its frames are in, and of the browser process only
    :data:`BROWSER_KEPT` that name those frames (its frame list cut to them).
    All else is dropped, whatever it holds.

    Two passes: the first learns which frames hang from ``tab`` and which
    processes they are in (``TracingStartedInBrowser`` and the commits come
    early but not first), the second keeps. The second lets each chunk of
    ``chunks`` go (a list the caller hands over) as soon as it is read: a
    trace is held about twice at most, never as parsed events whole."""
    chunks = chunks if isinstance(chunks, list) else list(chunks)
    frames: set[str] = {tab}
    renderers: set[int] = set()
    named: int | None = None  # the process Chromium's metadata names the browser
    started: int | None = None  # the process that wrote TracingStartedInBrowser
    requests: dict[str, int] = {}  # a request's id -> the process that sent it
    ties: list[tuple[int | None, str, str | None, int | None]] = []  # (writer, frame, parent, pid)
    for raw in chunks:
        if not any(clue in raw for clue in _CLUES):
            continue
        for event in _events(raw):
            name = event.get("name")
            if name == "process_name" and event.get("ph") == "M":
                if _args(event).get("name") in ("Browser", "HeadlessBrowser"):
                    named = _pid(event)
            elif name == "TracingStartedInBrowser":
                started = started or _pid(event)
                for frame in _data(event).get("frames") or []:
                    if isinstance(frame, dict):
                        ties.append((_pid(event), *_tie(frame)))
            elif name in _FRAME_EVENTS:
                ties.append((_pid(event), *_tie(_data(event))))
            elif name == "ResourceSendRequest":
                request, pid = _data(event).get("requestId"), _pid(event)
                if isinstance(request, str) and pid is not None:
                    requests.setdefault(request, pid)
    # Only the browser process's word counts (a page names its own marks,
    # and could name one "TracingStartedInBrowser"): the process Chromium's
    # metadata names, else the one that wrote TracingStartedInBrowser.
    browser = named if named is not None else started
    # A frame is the tab's when it is the tab or its parent is: in the order
    # Chromium wrote them, again until nothing changes (a child listed first).
    changed = True
    while changed:
        changed = False
        for writer, frame, parent, pid in ties:
            if writer != browser or writer is None:
                continue
            if frame in frames or parent in frames:
                if frame not in frames:
                    frames.add(frame)
                    changed = True
                if pid is not None and pid != browser and pid not in renderers:
                    renderers.add(pid)
                    changed = True
    own_requests = {r for r, pid in requests.items() if pid in renderers}

    kept: list[bytes] = []
    dropped = 0
    for index, raw in enumerate(chunks):
        chunks[index] = b""
        events = _events(raw)
        del raw
        out: list[Any] = []
        for event in events:
            pid = _pid(event)
            if pid is not None and pid in renderers:
                out.append(event)
            elif pid is not None and pid == browser:
                own = _browser_own(event, frames, own_requests)
                if own is not None:
                    out.append(own)
        dropped += len(events) - len(out)
        kept.append(_dumps(out))
    return Kept(kept, frames, renderers, browser, dropped)


def _browser_own(event: dict[str, Any], frames: set[str], requests: set[str]) -> Any:
    """A browser-process event if it is the traced tab's (as kept), else None."""
    name = event.get("name")
    if event.get("ph") == "M":
        return event if name in _BROWSER_METADATA else None
    if name not in BROWSER_KEPT:
        return None
    data = _data(event)
    if name == "TracingStartedInBrowser":
        listed = data.get("frames")
        listed = listed if isinstance(listed, list) else []
        mine = [f for f in listed if isinstance(f, dict) and f.get("frame") in frames]
        return {**event, "args": {"data": {**data, "frames": mine}}}
    if name in _FRAME_EVENTS:
        return event if data.get("frame") in frames else None
    if name == "ResourceWillSendRequest":
        return event if data.get("requestId") in requests else None
    return event  # Screenshot (the traced page's), clock_sync (the holder's marker)


def _events(raw: bytes) -> list[Any]:
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # Chromium writes a page's lone surrogates as ``\ud800`` escapes,
        # which orjson refuses and the standard parser takes.
        try:
            message = json.loads(raw)
        except ValueError:
            return []  # unreadable: nothing of it is shown
    params = message.get("params") if isinstance(message, dict) else None
    value = params.get("value") if isinstance(params, dict) else None
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _pid(event: dict[str, Any]) -> int | None:
    pid = event.get("pid")
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _data(event: dict[str, Any]) -> dict[str, Any]:
    data = _args(event).get("data")
    return data if isinstance(data, dict) else {}


def _tie(frame: dict[str, Any]) -> tuple[str, str | None, int | None]:
    name, parent, pid = frame.get("frame"), frame.get("parent"), frame.get("processId")
    return (
        name if isinstance(name, str) else "",
        parent if isinstance(parent, str) else None,
        pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
    )


def _dumps(value: Any) -> bytes:
    """``value`` as JSON; lone surrogates (which orjson refuses) escaped."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()
