"""One request's HAR 1.2 entry as the network log keeps it (:mod:`.har`):
what a page controls capped, secrets withheld by the log's rules
(:mod:`agentenv.log.secret_names`, :mod:`agentenv.log.bodies`), timings as
HAR has them, and the document the entries make. Pure, no I/O.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from agentenv.log.bodies import answered_body, sent_body
from agentenv.log.redact import REDACTED, redact_text
from agentenv.log.secret_names import credential_key, secret_header, secret_header_value

__all__ = [
    "BODY_CAP",
    "HEADERS_CAP",
    "HEADER_CAP",
    "QUERY_CAP",
    "URL_CAP",
    "HarRequest",
    "body_bytes",
    "document",
    "entry",
    "texty",
]

#: A body longer than this is cut (bodies only when asked for).
BODY_CAP = 64 * 1024
#: What one entry keeps of what a page controls: a URL's characters, its
#: query's pairs, a message's headers (and each header's characters).
URL_CAP = 4096
QUERY_CAP = 100
HEADERS_CAP = 100
HEADER_CAP = 4096
_TEXT = ("text/", "application/json", "application/javascript", "application/xml", "+json", "+xml")


@dataclass
class HarRequest:
    """One request as Chromium reported it, until it finished or failed."""

    tab: str
    request: dict[str, Any]
    started: float  # wall time, seconds
    monotonic: float  # Chromium's timestamp, seconds
    kind: str = ""
    #: Chromium's ids: the request's, and its document's (``loaderId``: a
    #: navigation's own request has its new document's; a worker's has none).
    request_id: str = ""
    loader: str = ""
    response: dict[str, Any] | None = None
    size: int = -1
    failed: str | None = None
    finished: float | None = None
    body: str | None = None
    #: The headers as sent and received (``…ExtraInfo``: with ``Cookie`` and
    #: ``Set-Cookie``, which the plain events leave out).
    sent_headers: dict[str, Any] | None = None
    got_headers: dict[str, Any] | None = None
    #: The hops before this one when it is a redirect's, written with it.
    before: list[HarRequest] = field(default_factory=list)


def _posted(request: dict[str, Any]) -> str | None:
    """A request's body as text: ``postData``, else its ``postDataEntries``
    (base64), None when there is none or it is not text."""
    posted = request.get("postData")
    if isinstance(posted, str):
        return posted
    parts = request.get("postDataEntries")
    if not isinstance(parts, list) or not parts:
        return None
    try:
        data = b"".join(
            base64.b64decode(str(p.get("bytes") or ""), validate=True)
            for p in parts
            if isinstance(p, dict)
        )
        return data.decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def body_bytes(hop: HarRequest) -> int:
    posted = hop.request.get("postData")
    return (len(posted) if isinstance(posted, str) else 0) + len(hop.body or "")


def entry(known: HarRequest, bodies: bool, typed: bool = False) -> dict[str, Any]:
    """One HAR 1.2 entry, secrets out (see the module's docstring); ``typed``:
    sent while a password field of its tab held withheld text."""
    request, response = known.request, known.response or {}
    timing = response.get("timing") if isinstance(response.get("timing"), dict) else None
    started = datetime.fromtimestamp(known.started or 0.0, UTC)
    total = max(0.0, ((known.finished or known.monotonic) - known.monotonic) * 1000)
    posted = _posted(request) if bodies else None
    sent = known.sent_headers or request.get("headers")
    got = known.got_headers or response.get("headers")
    url = _url(request.get("url"))
    out: dict[str, Any] = {
        "pageref": known.tab,
        "startedDateTime": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "time": round(total, 3),
        "request": {
            "method": str(request.get("method") or "GET"),
            "url": url,
            "httpVersion": str(response.get("protocol") or ""),
            "cookies": _cookies(_header(sent, "cookie"), ";"),
            "headers": _headers(sent),
            "queryString": _query(url),
            "headersSize": -1,
            "bodySize": len(str(request.get("postData") or posted or "").encode()),
        },
        "response": {
            "status": int(response.get("status") or 0),
            "statusText": str(response.get("statusText") or known.failed or ""),
            "httpVersion": str(response.get("protocol") or ""),
            "cookies": _cookies(_header(got, "set-cookie"), "\n"),
            "headers": _headers(got),
            "content": {
                "size": max(known.size, 0),
                "mimeType": str(response.get("mimeType") or ""),
            },
            "redirectURL": _url(_header(got, "location")),
            "headersSize": -1,
            "bodySize": known.size,
        },
        "cache": {},
        "timings": _timings(timing, total),
        "_resourceType": known.kind,
    }
    if known.failed is not None:
        out["_error"] = known.failed
    if isinstance(posted, str):
        kind = str(_header(sent, "content-type") or "")
        text = sent_body(posted[:BODY_CAP], kind, typed=typed, length=len(posted))
        out["request"]["postData"] = {"mimeType": kind[:200], "text": text}
    if known.body is not None:
        kind = str(response.get("mimeType") or "")
        echoed = typed and isinstance(posted, str)  # an answer may echo what was sent
        text = answered_body(known.body[:BODY_CAP], kind, typed=echoed)
        out["response"]["content"]["text"] = text
    return out


def _url(value: Any) -> str:
    """A URL as the log keeps one: credentials out, cut at :data:`URL_CAP`."""
    text = str(value or "")[: URL_CAP + 256]
    return redact_text(text)[:URL_CAP]


def _headers(found: Any) -> list[dict[str, str]]:
    """Headers by name; a value withheld when its name or its shape says it is
    a credential (``Bearer …`` under any name), else credentials out of it."""
    if not isinstance(found, dict):
        return []
    out = []
    for name, value in list(found.items())[:HEADERS_CAP]:
        text = str(value)[:HEADER_CAP]
        secret = secret_header(str(name)) or any(
            secret_header_value(line.strip()) for line in text.split("\n")
        )
        out.append({"name": str(name)[:200], "value": REDACTED if secret else redact_text(text)})
    return out


def _cookies(header: Any, between: str) -> list[dict[str, str]]:
    """The cookies a ``Cookie`` (``;``) or ``Set-Cookie`` (one a line) header
    names: by name, each value withheld."""
    if not isinstance(header, str):
        return []
    parts = header.split(between)
    if between == "\n":  # each line is one cookie: its name is before the first "="
        parts = [line.split(";", 1)[0] for line in parts]
    return [
        {"name": part.split("=", 1)[0].strip(), "value": REDACTED} for part in parts if "=" in part
    ]


def _header(found: Any, wanted: str) -> Any:
    if isinstance(found, dict):
        for name, value in found.items():
            if str(name).lower() == wanted:
                return value
    return None


def _query(url: str) -> list[dict[str, str]]:
    """The (already cut and redacted) URL's query, pair by pair."""
    pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)[:QUERY_CAP]
    return [
        {"name": name, "value": REDACTED if credential_key(name) else redact_text(value)}
        for name, value in pairs
    ]


def texty(response: dict[str, Any] | None) -> bool:
    kind = str((response or {}).get("mimeType") or "")
    return any(kind.startswith(t) or kind.endswith(t) for t in _TEXT)


def _timings(timing: dict[str, Any] | None, total: float) -> dict[str, float]:
    """HAR's phases from Chromium's ``ResourceTiming`` (ms from its
    ``requestTime``); -1 where a phase did not happen."""
    if timing is None:
        return {"blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": total, "receive": 0}

    def span(start: str, end: str) -> float:
        a, b = timing.get(start, -1), timing.get(end, -1)
        return round(b - a, 3) if isinstance(a, int | float) and a >= 0 and b >= a else -1

    send = span("sendStart", "sendEnd")
    wait = span("sendEnd", "receiveHeadersEnd")
    out = {
        "blocked": -1,
        "dns": span("dnsStart", "dnsEnd"),
        "connect": span("connectStart", "connectEnd"),
        "ssl": span("sslStart", "sslEnd"),
        "send": max(send, 0),
        "wait": max(wait, 0),
    }
    headers_end = timing.get("receiveHeadersEnd", 0)
    out["receive"] = round(max(0.0, total - float(headers_end or 0)), 3)
    return out


def document(entries: list[dict[str, Any]]) -> bytes:
    pages = sorted({e["pageref"] for e in entries})
    first = {p: min(e["startedDateTime"] for e in entries if e["pageref"] == p) for p in pages}
    return orjson.dumps(
        {
            "log": {
                "version": "1.2",
                "creator": {"name": "agentenv", "version": "1"},
                "pages": [
                    {"startedDateTime": first[p], "id": p, "title": p, "pageTimings": {}}
                    for p in pages
                ],
                "entries": entries,
            }
        }
    )
