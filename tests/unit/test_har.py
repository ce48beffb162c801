"""A network log's entry as HAR 1.2 keeps it (recorder/har_entry.entry): secrets
out of URLs, headers, cookies and bodies; phases from Chromium's timing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from agentenv.recorder.har_entry import BODY_CAP, HarRequest, entry


def _request(**more: object) -> HarRequest:
    base = HarRequest(
        tab="T1",
        request={
            "method": "POST",
            "url": "https://shop.test/login?next=%2Fhome&access_token=QTOKEN1",
            "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            "postData": "user=alice&password=PWFORM2",
        },
        started=1_764_640_000.0,
        monotonic=100.0,
        finished=100.25,
        size=321,
        response={
            "status": 302,
            "statusText": "Found",
            "protocol": "http/1.1",
            "mimeType": "text/html",
            "headers": {"Location": "https://shop.test/home?code=QCODE3", "X-Api-Key": "KEY4"},
            "timing": {
                "requestTime": 100.0,
                "dnsStart": 1.0,
                "dnsEnd": 3.0,
                "connectStart": 3.0,
                "connectEnd": 10.0,
                "sslStart": 5.0,
                "sslEnd": 10.0,
                "sendStart": 11.0,
                "sendEnd": 12.0,
                "receiveHeadersEnd": 200.0,
            },
        },
    )
    for key, value in more.items():
        setattr(base, key, value)
    return base


def test_an_entry_keeps_its_shape_and_none_of_its_secrets() -> None:
    got = entry(_request(), bodies=True)
    text = json.dumps(got)
    for secret in ("QTOKEN1", "PWFORM2", "QCODE3", "KEY4"):
        assert secret not in text, secret
    request, response = got["request"], got["response"]
    assert request["method"] == "POST" and request["url"].startswith("https://shop.test/login?")
    assert {"name": "next", "value": "/home"} in request["queryString"]
    # A form's values: kept where a harmless key names them, else withheld.
    assert request["postData"]["text"] == "user=alice&password=REDACTED"
    assert (response["status"], response["statusText"], response["bodySize"]) == (302, "Found", 321)
    assert response["redirectURL"].startswith("https://shop.test/home?")
    assert got["time"] == 250.0 and got["startedDateTime"].endswith("Z")
    timings = got["timings"]
    assert (timings["dns"], timings["connect"], timings["ssl"]) == (2.0, 7.0, 5.0)
    assert (timings["send"], timings["wait"], timings["receive"]) == (1.0, 188.0, 50.0)


def test_bodies_are_left_out_unless_asked_and_cut_when_kept() -> None:
    assert "postData" not in entry(_request(), bodies=False)["request"]
    big = "x" * (BODY_CAP + 10)
    kept = entry(_request(body=big), bodies=True)["response"]["content"]["text"]
    assert len(kept) == BODY_CAP
    typed = _request(body='{"user": "alice", "password": "PWJSON5", "items": [1, 2]}')
    typed.response = dict(typed.response or {}, mimeType="application/json")
    text = entry(typed, bodies=True)["response"]["content"]["text"]
    assert "PWJSON5" not in text and json.loads(text)["items"] == [1, 2]


def test_a_failed_request_says_why() -> None:
    got = entry(_request(response=None, failed="net::ERR_CONNECTION_REFUSED"), bodies=False)
    assert got["response"]["status"] == 0 and got["_error"] == "net::ERR_CONNECTION_REFUSED"
    assert got["timings"]["wait"] == 250.0


def test_what_a_page_controls_is_bounded() -> None:
    """A URL near Chromium's 2 MB limit, or thousands of headers, cost an
    entry a bounded size (a page once made one entry hold 200 MB)."""
    from agentenv.recorder.har_entry import HEADERS_CAP, QUERY_CAP, URL_CAP

    big = _request()
    big.request = dict(
        big.request,
        url="https://shop.test/x?" + "a=1&" * 500_000,
        headers={f"X-{n}": "v" * 10_000 for n in range(5_000)},
    )
    got = entry(big, bodies=False)
    assert len(got["request"]["url"]) <= URL_CAP
    assert len(got["request"]["queryString"]) <= QUERY_CAP
    assert len(got["request"]["headers"]) <= HEADERS_CAP
    assert len(json.dumps(got)) < 600_000


def test_a_credential_is_withheld_under_any_header_name() -> None:
    leaky = _request()
    leaky.request = dict(
        leaky.request,
        headers={"X-Client": "Bearer sk_live_SECRET6", "X-Debug": "Basic dXNlcjpwYXNz"},
    )
    text = json.dumps(entry(leaky, bodies=False))
    assert "SECRET6" not in text and "dXNlcjpwYXNz" not in text
    assert text.count('"REDACTED"') >= 2


def test_a_body_is_read_by_what_it_holds_not_by_what_its_type_says() -> None:
    cases = {
        "text/plain;charset=UTF-8": '{"user": "alice", "password": "PWPLAIN7"}',
        "Application/JSON": '{"password": "PWCASE8"}',
        "APPLICATION/X-WWW-FORM-URLENCODED": "user=alice&pin=PWFORM9",
        "multipart/form-data; boundary=x": (
            '--x\r\nContent-Disposition: form-data; name="password"\r\n\r\nPWMULTI10\r\n--x--'
        ),
        "": "opaque PWRAW11",
        "application/octet-stream": "[" * 5000,  # too deep to walk: withheld, not a crash
    }
    for kind, body in cases.items():
        sent = _request()
        sent.request = dict(sent.request, headers={"Content-Type": kind}, postData=body)
        text = entry(sent, bodies=True)["request"]["postData"]["text"]
        for secret in ("PWPLAIN7", "PWCASE8", "PWFORM9", "PWMULTI10", "PWRAW11"):
            assert secret not in text, (kind, text)
    multipart = _request()
    multipart.request = dict(
        multipart.request,
        headers={"Content-Type": "multipart/form-data; boundary=x"},
        postData=cases["multipart/form-data; boundary=x"],
    )
    kept = json.loads(entry(multipart, bodies=True)["request"]["postData"]["text"])
    assert kept["fields"] == ["password"] and kept["withheld"] == "form"


def _collector() -> Any:
    from agentenv.recorder.har import Har

    har = Har(link=None, upload=None)  # type: ignore[arg-type]  # events only: no I/O
    har.sessions["S"] = "T1"
    return har


def _events(har: Any, *events: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    for method, params in events:
        har._event({"method": method, "params": {"requestId": "R1", **params}, "sessionId": "S"})
    return list(har.done)


_POST = {"method": "POST", "url": "http://a.test/login", "headers": {"Origin": "x"}}
_HOME = {"method": "GET", "url": "http://a.test/home", "headers": {"Accept": "*/*"}}
_SEE_OTHER = {"status": 303, "headers": {"Location": "/home"}}
_OK = {"status": 200, "headers": {"Content-Type": "text/html"}, "mimeType": "text/html"}


@pytest.mark.parametrize("late", [False, True], ids=["in-order", "after-the-next-hop-began"])
def test_a_redirects_headers_go_to_its_own_hop(late: bool) -> None:
    """A login's 303 sets a cookie: its ``…ExtraInfo`` (with Set-Cookie)
    comes before the next hop began, or after (as Chromium sends a form
    post's): the 303's entry holds the Set-Cookie, withheld, and the next
    hop's its own Cookie, withheld; neither holds the other's."""
    Event = tuple[str, dict[str, Any]]
    posted: Event = (
        "Network.requestWillBeSentExtraInfo",
        {"headers": {"Origin": "x", "Cookie": "a=1"}},
    )
    set_cookie: Event = (
        "Network.responseReceivedExtraInfo",
        {"statusCode": 303, "headers": {"Location": "/home", "Set-Cookie": "session=SECRET9"}},
    )
    redirect: Event = (
        "Network.requestWillBeSent",
        {"request": _HOME, "redirectResponse": _SEE_OTHER},
    )
    first: list[Event] = [
        ("Network.requestWillBeSent", {"request": _POST, "timestamp": 1.0, "wallTime": 1.0}),
    ]
    first += [redirect, posted, set_cookie] if late else [posted, set_cookie, redirect]
    done = _events(
        _collector(),
        *first,
        ("Network.requestWillBeSentExtraInfo", {"headers": {"Cookie": "session=SECRET9"}}),
        ("Network.responseReceived", {"response": _OK, "type": "Document"}),
        ("Network.responseReceivedExtraInfo", {"statusCode": 200, "headers": {"X-Home": "1"}}),
        ("Network.loadingFinished", {"encodedDataLength": 10, "timestamp": 2.0}),
    )
    assert [(e["request"]["method"], e["response"]["status"]) for e in done] == [
        ("POST", 303),
        ("GET", 200),
    ]
    post, home = done
    assert post["response"]["cookies"] == [{"name": "session", "value": "REDACTED"}]
    assert {"name": "Set-Cookie", "value": "REDACTED"} in post["response"]["headers"]
    assert post["request"]["cookies"] == [{"name": "a", "value": "REDACTED"}]
    assert home["request"]["cookies"] == [{"name": "session", "value": "REDACTED"}]
    assert (
        home["response"]["cookies"] == []
        and {"name": "X-Home", "value": "1"} in home["response"]["headers"]
    )
    assert "SECRET9" not in json.dumps(done)


def test_headers_heard_before_their_request_are_its_own() -> None:
    """Chromium may send a request's ``…ExtraInfo`` before the request."""
    done = _events(
        _collector(),
        ("Network.requestWillBeSentExtraInfo", {"headers": {"Cookie": "s=SECRET8"}}),
        ("Network.responseReceivedExtraInfo", {"statusCode": 200, "headers": {"X-Got": "1"}}),
        ("Network.requestWillBeSent", {"request": _HOME}),
        ("Network.responseReceived", {"response": _OK}),
        ("Network.loadingFinished", {"encodedDataLength": 10}),
    )
    assert len(done) == 1
    assert done[0]["request"]["cookies"] == [{"name": "s", "value": "REDACTED"}]
    assert {"name": "X-Got", "value": "1"} in done[0]["response"]["headers"]


# -- typed text: the window (see recorder/har.py's text) ------------------------------

T0 = 1_796_400_000.0  # a wall time, seconds


def _line(seq: int, at: float, **action: Any) -> bytes:
    """A log line as the relay writes one."""
    import orjson

    from agentenv.log.lines import iso

    return orjson.dumps({"seq": seq, "at": iso(at), "prev": "0" * 32, "action": action})


def _typing(seq: int, at: float, tab: str | None = "T1") -> bytes:
    withheld = {"text": {"withheld": "password", "length": 9}}
    more = {"tab": tab} if tab is not None else {}
    return _line(seq, at, via="cdp", method="Input.insertText", params=withheld, **more)


class _Link:
    """The network log's relay link, as far as the collector uses it at the
    end: each response's body is an echo of what its request sent."""

    on_event: Any = None

    def __init__(self) -> None:
        self.har: Any = None

    async def call(self, method: str, params: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert method == "Network.getResponseBody"
        known = next(r for k, r in self.har.pending.items() if k.endswith(params["requestId"]))
        return {"body": known.request.get("postData") or "{}", "base64Encoded": False}

    async def close(self) -> None:
        pass


class _Store:
    where = "memory"

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    async def put(self, name: str, data: bytes, content_type: str) -> None:
        self.files[name] = data


def _typed_collector(*lines: bytes, ready: bool = True) -> Any:
    from agentenv.recorder.har import Har
    from agentenv.recorder.typed import Typed

    typed = Typed(ready=ready)
    for raw in lines:
        typed.seen(raw)
    link = _Link()
    har = Har(link=link, upload=_Store(), bodies=True, typed=typed)  # type: ignore[arg-type]
    link.har = har
    har.sessions["S"] = "T1"
    return har


async def _sent(
    har: Any, rid: str, at: float, loader: str, body: str | None = '{"note": "kept?"}', **more: Any
) -> None:
    """One request of T1's, answered with an echo of its body, finished."""
    request: dict[str, Any] = {
        "method": "POST" if body else "GET",
        "url": "http://a.test/" + rid,
        "headers": {},
    }
    if body is not None:
        request |= {"postData": body, "headers": {"Content-Type": "application/json"}}
    params = {"requestId": rid, "loaderId": loader, "frameId": "T1", "wallTime": at}
    echo = {"status": 200, "mimeType": "application/json", "headers": {}}
    events = [
        ("Network.requestWillBeSent", {**params, "request": request, **more}),
        ("Network.responseReceived", {"requestId": rid, "response": echo}),
        ("Network.loadingFinished", {"requestId": rid, "encodedDataLength": 1}),
    ]
    for method, event in events:
        har._event({"method": method, "params": event, "sessionId": "S"})
    await asyncio.gather(*list(har._tasks))


def _bodies(har: Any) -> dict[str, Any]:
    """Each request's body as written, and its answer's (the echo) beside it."""
    out = {}
    for e in har.done:
        if "postData" in e["request"]:
            name = e["request"]["url"].rsplit("/", 1)[1]
            out[name] = json.loads(e["request"]["postData"]["text"])
            assert json.loads(e["response"]["content"]["text"]) == out[name], e
    return out


async def test_a_body_sent_after_withheld_typing_keeps_only_its_shape() -> None:
    """Typed into a password field on T1: the page's fetch (its loader L0),
    however its body names the text, keeps no string, nor does the answer
    that echoes it; a tab typed into nowhere keeps its harmless values."""
    har = _typed_collector(_typing(1, T0))
    await _sent(har, "fetch", T0 + 1, "L0")
    assert har.done == []  # the log is not yet read past the request: it waits
    har.typed.seen(_line(2, T0 + 2, via="cdp", method="DOM.describeNode"))
    har.logged()
    assert _bodies(har) == {"fetch": {"note": {"withheld": "password", "length": 5}}}

    other = _typed_collector(_typing(1, T0, tab="T9"), _line(2, T0 + 5))
    await _sent(other, "fetch", T0 + 1, "L0")
    assert _bodies(other) == {"fetch": {"note": "kept?"}}


async def test_the_window_ends_with_the_document_it_was_typed_into() -> None:
    """A form's post (a navigation: its own request is sent by the document
    it leaves) is in the window; the new document's requests are not; a
    request of the old document after that (a beacon as it unloads, a page
    back from the back-forward cache) still is."""
    har = _typed_collector(_typing(1, T0), _line(2, T0 + 60))
    await _sent(har, "L1", T0 + 1, "L1", type="Document")  # the form's post, navigating
    await _sent(har, "fetch", T0 + 2, "L1")  # the new document's own request
    await _sent(har, "beacon", T0 + 3, "L0")  # the document typed into
    assert _bodies(har) == {
        "L1": {"note": {"withheld": "password", "length": 5}},
        "fetch": {"note": "kept?"},
        "beacon": {"note": {"withheld": "password", "length": 5}},
    }


async def test_typing_in_the_new_document_opens_the_window_again() -> None:
    har = _typed_collector(_typing(1, T0))
    await _sent(har, "L1", T0 + 1, "L1", body=None, type="Document")
    har.typed.seen(_typing(2, T0 + 10))  # typed into a field of L1's document
    har.typed.seen(_line(3, T0 + 60))
    await _sent(har, "fetch", T0 + 11, "L1")
    assert _bodies(har) == {"fetch": {"note": {"withheld": "password", "length": 5}}}


async def test_typing_that_names_no_tab_counts_on_every_tab() -> None:
    har = _typed_collector(_typing(1, T0, tab=None), _line(2, T0 + 60))
    await _sent(har, "fetch", T0 + 1, "L0")
    assert _bodies(har)["fetch"]["note"]["withheld"] == "password"


async def test_the_end_judges_what_waits_with_the_recordings_lines() -> None:
    """At the end, a request the log's clock never passed is judged knowing
    the slice's every line; with the log not read from its start (the
    recorder just restarted), every body counts as sent with typed text."""
    for ready, typing, withheld in [(True, True, True), (True, False, False), (False, False, True)]:
        har = _typed_collector(ready=ready)
        await _sent(har, "fetch", T0 + 1, "L0")
        assert har.done == []
        await har.stop([_typing(1, T0)] if typing else [])
        [made] = json.loads(har.upload.files["network.har"])["log"]["entries"]
        note = json.loads(made["request"]["postData"]["text"])["note"]
        assert (note != "kept?") is withheld, (ready, typing, note)


def test_the_log_is_read_for_typing_from_its_bytes() -> None:
    from agentenv.recorder.typed import Typed

    typed = Typed()
    typed.seen(_typing(1, T0 + 0.5))
    kept = _line(2, T0 + 3, via="mcp", tool="browser_type", tab="T2")  # typing not withheld
    typed.seen(kept)
    assert typed.at("T1") == pytest.approx(T0 + 0.5) and typed.at("T2") is None
    assert typed.clock == pytest.approx(T0 + 3)
    typed.seen(b'{"seq":3,"at":"garbage","tab":{"event":"opened","id":"T3"}}')
    assert typed.clock == pytest.approx(T0 + 3)


async def test_the_recorders_follower_reads_typing_from_the_logs_first_line(
    tmp_path: Any,
) -> None:
    """A tab typed into before the recorder started still holds the text: the
    follower reads the whole log for typing (lines before its start go to no
    recording), and says when it has."""
    from agentenv.log.reader import LogReader
    from agentenv.recorder.recorder_server import Recorder
    from agentenv.settings import Settings
    from tests.support.timing import wait_for

    log = tmp_path / "browser.jsonl"
    log.write_bytes(b"".join(x + b"\n" for x in (_typing(1, T0), _line(2, T0 + 1))))
    recorder = Recorder(Settings(), link=None, reader=LogReader(log))  # type: ignore[arg-type]
    following = asyncio.ensure_future(recorder.follow())
    try:
        await asyncio.to_thread(wait_for, lambda: recorder.typed.ready, "the history read", 10)
        assert recorder.typed.at("T1") == pytest.approx(T0)
        assert recorder.typed.clock == pytest.approx(T0 + 1)
        with log.open("ab") as more:
            more.write(_typing(3, T0 + 5, tab="T2") + b"\n")
        await asyncio.to_thread(wait_for, lambda: recorder.typed.at("T2"), "a new line", 10)
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following


class _Calls:
    """A relay link that records the collector's calls; ``Network.enable``
    fails for the sessions named in ``failing``."""

    on_event: Any = None

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.failing = failing

    async def call(self, method: str, params: dict[str, Any], **more: Any) -> dict[str, Any]:
        from agentenv.relay_link import BrowserError

        session = more.get("session")
        self.calls.append((method, session))
        if method == "Network.enable" and session in self.failing:
            raise BrowserError("gone")
        return {}


async def test_a_held_tab_runs_once_network_is_on_and_even_when_it_failed() -> None:
    """A tab made during the recording is held for the collector (its first
    request would be missed otherwise): it lets the tab go after Network is
    on, and also when turning it on failed; a tab not held is not resumed."""
    from agentenv.recorder.har import Har

    link = _Calls(failing=frozenset({"BAD"}))
    har = Har(link=link, upload=_Store())  # type: ignore[arg-type]
    await har.start()
    assert link.calls == [("Target.setAutoAttach", None)]
    for session, waiting in (("NEW", True), ("BAD", True), ("OLD", False)):
        har._event(
            {
                "method": "Target.attachedToTarget",
                "params": {
                    "sessionId": session,
                    "targetInfo": {"targetId": "T-" + session, "type": "page"},
                    "waitingForDebugger": waiting,
                },
            }
        )
    await asyncio.gather(*list(har._tasks))
    new = [c for c in link.calls if c[1] == "NEW"]
    assert new == [
        ("Network.enable", "NEW"),
        ("Target.setAutoAttach", "NEW"),
        ("Runtime.runIfWaitingForDebugger", "NEW"),
    ], new
    bad = [c for c in link.calls if c[1] == "BAD"]
    assert bad[-1] == ("Runtime.runIfWaitingForDebugger", "BAD"), bad
    assert ("Runtime.runIfWaitingForDebugger", "OLD") not in link.calls
    assert har.sessions == {"NEW": "T-NEW", "BAD": "T-BAD", "OLD": "T-OLD"}
    # A frame of a watched page is watched for that page's tab.
    har._event(
        {
            "method": "Target.attachedToTarget",
            "sessionId": "NEW",
            "params": {"sessionId": "F", "targetInfo": {}, "waitingForDebugger": True},
        }
    )
    await asyncio.gather(*list(har._tasks))
    assert har.sessions["F"] == "T-NEW"
    assert ("Runtime.runIfWaitingForDebugger", "F") in link.calls
    assert ("Target.setAutoAttach", "F") not in link.calls


def test_a_persons_requests_are_marked_as_theirs() -> None:
    """At the end, each entry is judged by the latest act on its tab before
    it started: a person's marks it ``_by: human``; an agent's, or none,
    leaves it as it was."""
    import orjson

    from agentenv.recorder.har_people import mark_people

    def act(seq: int, second: int, tab: str, via: str, who: str) -> bytes:
        action = {"via": via, "who": who, "acts": "acting", "op": "input/down", "tab": tab}
        at = f"2026-12-07T00:00:{second:02d}.000Z"
        return orjson.dumps({"seq": seq, "at": at, "action": action})

    lines = [
        act(1, 10, "T1", "api", "alice"),
        act(2, 20, "T1", "human", "carol@s1"),
        act(3, 20, "T2", "human", "carol@s1"),
        act(4, 30, "T1", "cdp", "alice"),
        act(5, 35, "T1", "agentenv", "agentenv"),  # the computer's own: no one's segment
        orjson.dumps({"seq": 6, "at": "2026-12-07T00:00:40.000Z", "tab": {"event": "opened"}}),
    ]

    def entry(tab: str, second: int) -> dict[str, Any]:
        return {"pageref": tab, "startedDateTime": f"2026-12-07T00:00:{second:02d}.500Z"}

    entries = [entry("T1", 5), entry("T1", 15), entry("T1", 25), entry("T1", 36), entry("T2", 21)]
    entries.append(entry("T3", 25))
    assert mark_people(entries, lines) == 2
    assert [e.get("_by") for e in entries] == [None, None, "human", None, "human", None]
    assert entries[2]["_who"] == "carol@s1"
    assert mark_people([entry("T1", 25)], []) == 0  # no log: nothing said
