"""``/playwright``: Playwright's own remote protocol on the computer
(issue 43 item 5; docs/spec.md section 3, "Playwright's own protocol").

Against the built image, hardened as compose runs it, with users and a
control token: Playwright for Python and for Node (the versions in
tests/clients/) ``connect`` with a token and get back what ``connect_over_cdp``
cannot give a remote client: ``download.save_as``, a recorded video,
tracing with screenshots, ``set_input_files`` of the client's own files. Their
CDP is on the record as the caller, in the caller's scope. A raw client of
the protocol meets the rules of app/playwright_rules.py: what would reach
the computer's files, programs or network is refused, and the connection
goes on. The server's folder and processes go when the client does, and no
token reaches a command line or the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import av
import pytest
import requests
from playwright.sync_api import Page, sync_playwright

from tests.security.attacks import agent
from tests.support import installs
from tests.support.container import SITE, Computer, computer
from tests.support.stack import ROOT
from tests.support.timing import deadline, wait_for

pytestmark = pytest.mark.container

NODE22 = installs.NODE22
NODE_SESSION = ROOT / "tests/clients/playwright_server_session.mjs"
FOLDER = "/var/lib/agentenv/downloads"


@pytest.fixture(scope="module")
def c(image: str) -> Iterator[Computer]:
    with computer(image) as running:
        running.serve_site()
        yield running


@pytest.fixture(scope="module")
def node22() -> str:
    """Node 22 from npm (build/clients/node22), with Puppeteer 25 and Playwright."""
    return installs.node22()


def _endpoint(c: Computer) -> str:
    return c.app.replace("http://", "ws://", 1) + "/playwright"


def _actions(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["action"] for line in lines if "action" in line]


def _cdp(lines: list[dict[str, Any]], who: str, method: str) -> list[dict[str, Any]]:
    return [
        a
        for a in _actions(lines)
        if a.get("via") == "cdp" and a.get("who") == who and a.get("method") == method
    ]


def _gone(c: Computer, user: str) -> None:
    """The connection's folder and its server's processes are gone (bounded)."""

    def probe() -> bool | None:
        listed = c.exec("ls", "-A", f"{FOLDER}/{user}", user="agentenv")
        running = c.exec("ps", "-eo", "args")
        left = [n for n in listed.split() if n.startswith(".playwright-")]
        servers = [
            line
            for line in running.splitlines()
            if "playwright_server.cjs" in line or "agentenv-playwright-" in line
        ]
        return True if not left and not servers else None

    wait_for(probe, f"{user}'s /playwright server and folder to go", timeout_s=30)


def _check_files(out: Path, content: str, uploaded: str, upload: str) -> None:
    assert (out / "download.txt").read_text() == content
    assert uploaded == upload
    with zipfile.ZipFile(out / "trace.zip") as z:
        frames = [n for n in z.namelist() if n.startswith("resources/") and n.endswith(".jpeg")]
        names = z.namelist()
    assert frames or any(n.endswith(".jpeg") for n in names), names[:20]
    with av.open(str(out / "video.webm")) as video:
        stream = video.streams.video[0]
        shown = sum(1 for _ in video.decode(video=0))
        assert stream.codec_context.name == "vp9" and shown > 0, (stream, shown)


def _download_and_upload(page: Page, content: str, folder: Path) -> str:
    """On the test site: a Blob of ``content`` downloaded and saved as
    ``folder``/download.txt, then ``folder``/upload.txt set on a file input;
    what the page reads of the file it got."""
    page.goto(SITE + "/")
    with page.expect_download() as fetched:
        page.evaluate(
            "text => { const a = document.createElement('a');"
            " a.href = URL.createObjectURL(new Blob([text])); a.download = 'report.txt';"
            " document.body.append(a); a.click(); }",
            content,
        )
    fetched.value.save_as(folder / "download.txt")
    page.evaluate(
        "() => { const i = document.createElement('input'); i.type = 'file';"
        " i.id = 'upload'; document.body.append(i); }"
    )
    page.set_input_files("#upload", folder / "upload.txt")
    return str(page.evaluate("() => document.getElementById('upload').files[0].text()"))


def test_python_playwright_connects_and_gets_its_files_back(c: Computer, tmp_path: Path) -> None:
    """Python Playwright's connect: save_as, a video, a trace with
    screenshots, set_input_files; its CDP on the record as alice."""
    before = c.log()[1]
    content = f"alice's report {uuid.uuid4().hex}"
    upload = f"alice's upload {uuid.uuid4().hex}"
    (tmp_path / "upload.txt").write_text(upload)
    with sync_playwright() as pw:
        browser = pw.chromium.connect(
            _endpoint(c), headers=c.headers("alice"), timeout=deadline(60) * 1000
        )
        context = browser.new_context(record_video_dir=str(tmp_path))
        context.set_default_timeout(deadline(15) * 1000)
        context.tracing.start(screenshots=True, snapshots=True)
        page = context.new_page()
        uploaded = _download_and_upload(page, content, tmp_path)
        context.tracing.stop(path=tmp_path / "trace.zip")
        video = page.video
        assert video is not None
        page.close()
        video.save_as(tmp_path / "video.webm")
        context.close()
        browser.close()
    _check_files(tmp_path, content, uploaded, upload)

    def recorded(lines: list[dict[str, Any]]) -> bool:
        return bool(_cdp(lines, "alice", "DOM.setFileInputFiles")) and any(
            (a.get("params") or {}).get("url") == SITE + "/"
            for a in _cdp(lines, "alice", "Page.navigate")
        )

    lines = wait_for(
        lambda: (lambda got: got if recorded(got) else None)(c.log(before)[0]),
        "alice's /playwright commands in the log",
    )
    files = _cdp(lines, "alice", "DOM.setFileInputFiles")[0]["params"]["files"]
    assert all(f.startswith(f"{FOLDER}/alice/.playwright-") for f in files), files
    strangers = [a for a in _actions(lines) if a.get("who") not in ("alice", "agentenv")]
    assert not strangers, strangers[:3]
    assert {a.get("scope") for a in _actions(lines) if a.get("who") == "alice"} == {"alice"}
    _gone(c, "alice")


def test_the_control_token_connects_and_gets_its_download_back(c: Computer, tmp_path: Path) -> None:
    """The control token's server works in the downloads folder's root (it is
    in no scope): save_as of a download and set_input_files work, and its
    folder goes with it. (Its CDP is the computer's own, off the record
    outside an action, as on the relay's own door.)"""
    content = f"the harness's report {uuid.uuid4().hex}"
    upload = f"the harness's upload {uuid.uuid4().hex}"
    (tmp_path / "upload.txt").write_text(upload)
    with sync_playwright() as pw:
        browser = pw.chromium.connect(
            _endpoint(c), headers=c.headers(), timeout=deadline(60) * 1000
        )
        context = browser.new_context()
        context.set_default_timeout(deadline(15) * 1000)
        page = context.new_page()
        uploaded = _download_and_upload(page, content, tmp_path)
        context.close()
        browser.close()
    assert (tmp_path / "download.txt").read_text() == content
    assert uploaded == upload

    def gone() -> bool | None:
        listed = c.exec("ls", "-A", FOLDER, user="agentenv").split()
        return True if not [n for n in listed if n.startswith(".playwright-")] else None

    wait_for(gone, "the control token's /playwright folder to go", timeout_s=30)


def test_node_playwright_connects_and_gets_its_files_back(
    c: Computer, node22: str, tmp_path: Path
) -> None:
    """Playwright for Node's connect (tests/clients/playwright_server_session.mjs)."""
    before = c.log()[1]
    content = f"bob's report {uuid.uuid4().hex}"
    upload = f"bob's upload {uuid.uuid4().hex}"
    (tmp_path / "expected-download.txt").write_text(content)
    (tmp_path / "upload.txt").write_text(upload)
    done = subprocess.run(
        [node22, str(NODE_SESSION), _endpoint(c), c.token("bob"), SITE, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=deadline(180),
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["version"] == "1.65.1" and result["suggested"] == "node-report.txt", result
    _check_files(tmp_path, content, result["uploaded"], upload)
    lines = wait_for(
        lambda: (lambda got: got if _cdp(got, "bob", "DOM.setFileInputFiles") else None)(
            c.log(before)[0]
        ),
        "bob's /playwright commands in the log",
    )
    assert {a.get("scope") for a in _actions(lines) if a.get("who") == "bob"} == {"bob"}
    _gone(c, "bob")


class _Raw:
    """A client of Playwright's protocol with no library: what a hostile
    client could send."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.made: dict[str, tuple[str, dict[str, Any]]] = {}
        self.next = 0

    async def call(self, guid: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next += 1
        ident = self.next
        await self.ws.send_str(
            json.dumps(
                {"id": ident, "guid": guid, "method": method, "params": params, "metadata": {}}
            )
        )
        while True:
            message = await asyncio.wait_for(self.ws.receive(), deadline(30))
            assert message.type == aiohttp.WSMsgType.TEXT, message
            data = json.loads(message.data)
            if data.get("method") == "__create__":
                p = data["params"]
                self.made[p["guid"]] = (p["type"], p.get("initializer") or {})
            if data.get("id") == ident:
                return dict(data)

    def of(self, kind: str, **initializer: Any) -> str:
        found = [
            guid
            for guid, (k, init) in self.made.items()
            if k == kind and all(init.get(key) == value for key, value in initializer.items())
        ]
        assert found, (kind, initializer, {k for k, _ in self.made.values()})
        return found[-1]


def _refused(answer: dict[str, Any], method: str) -> str:
    error = answer.get("error", {}).get("error", {})
    assert f"refused {method}" in error.get("message", ""), answer
    return str(error["message"])


async def test_a_raw_client_is_refused_what_reaches_the_computer(c: Computer) -> None:
    """Launching a program, server-side files and requests, a trace's name
    with a folder: refused with an answer of the call's id; the connection
    goes on and a context still opens."""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(_endpoint(c), headers=c.headers("alice")) as ws,
    ):
        raw = _Raw(ws)
        answer = await raw.call("", "initialize", {"sdkLanguage": "javascript"})
        assert "result" in answer, answer
        chromium = raw.of("BrowserType", name="chromium")
        said = _refused(
            await raw.call(chromium, "launch", {"executablePath": "/bin/sh", "args": []}),
            "BrowserType.launch",
        )
        assert "another browser" in said
        browser = raw.of("Browser")
        opened = await raw.call(browser, "newContext", {})
        context = opened["result"]["context"]["guid"]
        _, init = raw.made[context]
        request, tracing = init["requestContext"]["guid"], init["tracing"]["guid"]
        _refused(
            await raw.call(request, "fetch", {"url": "http://127.0.0.1:6666/json/version"}),
            "APIRequestContext.fetch",
        )
        _refused(
            await raw.call(tracing, "tracingStart", {"name": "../../../home/agentenv/x"}),
            "Tracing.tracingStart",
        )
        page = (await raw.call(context, "newPage", {}))["result"]["page"]["guid"]
        frame = raw.made[page][1]["mainFrame"]["guid"]
        _refused(
            await raw.call(
                frame,
                "setInputFiles",
                {"selector": "input", "localPaths": ["/var/log/agentenv/browser-browser.jsonl"]},
            ),
            "Frame.setInputFiles",
        )
        gone = await raw.call("page@0123456789abcdef", "close", {})
        assert gone["error"]["error"]["name"] == "TargetClosedError", gone
        # Still served: the page navigates, on the record as alice.
        went = await raw.call(frame, "goto", {"url": SITE + "/next", "timeout": 15000})
        assert "result" in went, went
        await raw.call(context, "close", {})


def test_who_may_connect_and_how_many(c: Computer) -> None:
    """No token or an unknown one: 401, on the record at the door
    ``playwright``; not a WebSocket: 400; a caller's share of servers: 429."""
    before = c.log()[1]
    plain = requests.get(c.app + "/playwright", headers=c.headers("alice"), timeout=10)
    assert plain.status_code == 400 and "pw.chromium.connect" in plain.text, plain.text
    for headers in ({}, {"Authorization": "Bearer not-a-token-3a9f"}):
        answer = requests.get(c.app + "/playwright", headers=headers, timeout=10)
        assert answer.status_code == 401, answer.text

    def refused(lines: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        seen = [line["auth"] for line in lines if "auth" in line]
        return seen if any(a.get("door") == "playwright" for a in seen) else None

    wait_for(lambda: refused(c.log(before)[0]), "the refusals at /playwright on the record")

    card = requests.get(c.app + "/card", timeout=10).json()
    share = card["extensions"]["browser/v1"]["limits"]["playwright_servers_per_caller"]
    assert share >= 1

    async def crowd() -> int:
        # Alice holds her share of the servers; one more is refused.
        async with aiohttp.ClientSession() as session:
            held = [
                await session.ws_connect(_endpoint(c), headers=c.headers("alice"))
                for _ in range(share)
            ]
            try:
                await session.ws_connect(_endpoint(c), headers=c.headers("alice"))
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status
            finally:
                for ws in held:
                    await ws.close()
            return 101

    assert asyncio.run(crowd()) == 429
    _gone(c, "alice")


async def test_scope_walls_and_tokens(c: Computer) -> None:
    """Alice's /playwright sees no page of bob's through its CDP sessions,
    and no token is on any process's command line or in the log."""
    async with agent(c, "bob") as bob:
        theirs, _ = await bob.page(SITE + "/next")

        def alice_session() -> tuple[list[str], str]:
            with sync_playwright() as pw:
                browser = pw.chromium.connect(
                    _endpoint(c), headers=c.headers("alice"), timeout=deadline(60) * 1000
                )
                page = browser.new_context().new_page()
                page.goto(SITE + "/")
                cdp = browser.new_browser_cdp_session()
                targets = cdp.send("Target.getTargets")["targetInfos"]
                command_lines = c.exec("sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
                browser.close()
            return [t["targetId"] for t in targets], command_lines

        listed, command_lines = await asyncio.to_thread(alice_session)
    assert listed and theirs not in listed, listed
    for user in ("alice", "bob"):
        assert c.token(user) not in command_lines
    logged = c.all_log_bytes()
    assert b'"who":"alice"' in logged
    assert not any(c.token(u).encode() in logged for u in ("alice", "bob"))
    assert c.control is not None and c.control.encode() not in logged
    assert c.control not in command_lines


@pytest.fixture(scope="module")
def small(image: str) -> Iterator[Computer]:
    """A computer whose scopes may each hold 20 MB of downloads (and a
    caller two /playwright servers)."""
    env = {
        "AGENTENV_SCOPE_DOWNLOAD_BYTES": str(20 * 1024 * 1024),
        "AGENTENV_PLAYWRIGHT_SERVERS": "4",
    }
    with computer(image, env=env) as running:
        yield running


def test_uploads_count_against_the_scopes_downloads_share(small: Computer, tmp_path: Path) -> None:
    """A connection's uploads past the share are refused; two connections'
    uploads that pass it together end a connection; nothing is left behind."""
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(24 * 1024 * 1024))
    half = tmp_path / "half.bin"
    half.write_bytes(os.urandom(14 * 1024 * 1024))
    page_of_input = "<input type=file id=f>"
    with sync_playwright() as pw:
        first = pw.chromium.connect(
            _endpoint(small), headers=small.headers("alice"), timeout=deadline(60) * 1000
        )
        page = first.new_context().new_page()
        page.set_content(page_of_input)
        page.set_input_files("#f", half)  # under the share: taken
        with pytest.raises(Exception, match="uploaded") as refused:
            page.set_input_files("#f", big)
        assert "set_input_files by path may take 20971520" in str(refused.value)
        second = pw.chromium.connect(
            _endpoint(small), headers=small.headers("alice"), timeout=deadline(60) * 1000
        )
        other = second.new_context().new_page()
        other.set_content(page_of_input)
        other.set_input_files("#f", half)  # 28 MB held together: one connection ends

        def ended() -> bool | None:
            # The sync API reads the server's messages (the close among them)
            # only inside a call: each page is asked something, which fails
            # at once on a connection that ended.
            for tab in (page, other):
                with contextlib.suppress(Exception):
                    tab.evaluate("1")
            return True if not (first.is_connected() and second.is_connected()) else None

        wait_for(ended, "a connection to end past the scope's share", timeout_s=30)
        for browser in (first, second):
            if browser.is_connected():
                browser.close()
    _gone(small, "alice")
