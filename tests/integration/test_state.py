"""The browser's state as an archive (``data/get``, ``data/add``) between
secured computers, and what ``data/add`` and the body caps refuse: a gzip
bomb, a body far over an op's cap, a tab on a ``file:`` URL."""

from __future__ import annotations

import gzip
import io
import json
import select
import socket
import tarfile
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.container import CONTROL, SITE, Computer, computer
from tests.support.timing import deadline, wait_for

STATE = "browser-state.json"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def pc(image: str) -> Iterator[Computer]:
    """One secured computer with the test site served inside, for this module."""
    with computer(image) as running:
        running.serve_site()
        yield running


def cookies(pc: Computer, url: str) -> dict[str, str]:
    found = pc.op("cookies/get", {"urls": [url]})["cookies"]
    return {str(c["name"]): str(c["value"]) for c in found}


def all_cookies(pc: Computer) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = pc.op("cookies/get")["cookies"]
    return sorted(found, key=lambda c: (c["name"], c["domain"], c["path"]))


def tab_urls(pc: Computer) -> list[str]:
    return [str(t["url"]) for t in pc.op("tabs/list")]


def members(archive: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            extracted = tar.extractfile(member)
            out[member.name] = extracted.read() if extracted is not None else b""
    return out


def pack(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def add(pc: Computer, archive: bytes) -> requests.Response:
    return requests.post(
        f"{pc.app}/v1/browser/data/add",
        data=archive,
        headers={"Authorization": f"Bearer {CONTROL}", "Content-Type": "application/gzip"},
        timeout=deadline(120),
    )


def test_state_moves_to_a_fresh_computer(image: str, pc: Computer) -> None:
    site = SITE
    pc.op(
        "cookies/set",
        {
            "cookies": [
                {"name": "session", "value": "moved-7f3a", "url": site},
                {"name": "theme", "value": "dark", "url": site, "httpOnly": True},
            ]
        },
    )
    pc.op("local_storage/set", {"origin": site, "items": {"draft": "hello", "step": "3"}})
    pc.op("tabs/open", {"url": site + "/account", "background": True})
    pc.op("tabs/open", {"url": site + "/next"})
    wait_for(
        lambda: {site + "/next", site + "/account"} <= set(tab_urls(pc)),
        "both tabs at their URLs",
        timeout_s=20,
    )
    archive = pc.op("data/get")
    assert isinstance(archive, bytes) and archive[:2] == b"\x1f\x8b", archive[:20]
    inside = members(archive)
    assert next(iter(inside)) == STATE and "browser-log.jsonl" in inside, list(inside)
    saved = json.loads(inside[STATE])
    assert {c["name"] for c in saved["cookies"]} >= {"session", "theme"}
    assert saved["local_storage"][site] == {"draft": "hello", "step": "3"}

    with computer(image) as fresh:
        fresh.serve_site()
        assert "session" not in cookies(fresh, site)
        answer = add(fresh, archive)
        assert answer.status_code == 200, answer.text[:2000]
        assert cookies(fresh, site + "/")["session"] == "moved-7f3a"
        assert cookies(fresh, site + "/")["theme"] == "dark"
        storage = fresh.op("local_storage/get", {"origin": site})
        assert storage["items"] == {"draft": "hello", "step": "3"}
        urls = wait_for(
            lambda: (lambda u: u if {site + "/next", site + "/account"} <= set(u) else None)(
                tab_urls(fresh)
            ),
            "the restored tabs at their URLs",
            timeout_s=20,
        )
        assert urls[0] == site + "/next", urls  # the active tab was restored in front


def _bomb(first: str, size: int) -> bytes:
    """A tar.gz whose first member is ``size`` zero bytes named ``first``
    (then a small browser-state.json), compressed as it is made."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip framing
    info = tarfile.TarInfo(first)
    info.size = size
    parts = [squeeze.compress(info.tobuf(format=tarfile.GNU_FORMAT))]
    zeros = bytes(MIB)
    for _ in range(size // MIB):
        parts.append(squeeze.compress(zeros))
    parts.append(squeeze.compress(bytes(size % MIB)))
    parts.append(squeeze.compress(bytes(-size % 512)))
    tail = b'{"cookies": [], "local_storage": {}, "tabs": []}'
    tail_info = tarfile.TarInfo(STATE)
    tail_info.size = len(tail)
    parts.append(squeeze.compress(tail_info.tobuf(format=tarfile.GNU_FORMAT)))
    parts.append(squeeze.compress(tail + bytes(-len(tail) % 512) + bytes(1024)))
    parts.append(squeeze.flush())
    return b"".join(parts)


@pytest.mark.parametrize("first", [STATE, "padding.bin"])
def test_a_gzip_bomb_is_refused_and_the_app_keeps_answering(pc: Computer, first: str) -> None:
    bomb = _bomb(first, 300 * MIB)
    assert len(bomb) < 400 * 1024, len(bomb)  # ~300 KB that unpack to 300 MiB
    with gzip.GzipFile(fileobj=io.BytesIO(bomb)) as check:  # it is what it says it is
        assert tarfile.TarInfo.frombuf(check.read(512), "utf-8", "strict").size == 300 * MIB

    result: dict[str, Any] = {}

    def send() -> None:
        began = time.monotonic()
        try:
            result["answer"] = add(pc, bomb)
        except Exception as exc:  # reported below
            result["error"] = exc
        result["took"] = time.monotonic() - began

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    probes: list[float] = []
    end = time.monotonic() + deadline(60)
    while True:
        began = time.monotonic()
        health = requests.get(pc.app + "/healthz", timeout=deadline(1))
        probes.append(time.monotonic() - began)
        assert health.status_code == 200
        if not sender.is_alive():
            break
        sender.join(0.05)
        assert time.monotonic() < end, "data/add did not answer within its deadline"
    assert "error" not in result, result
    answer: requests.Response = result["answer"]
    assert answer.status_code == 400, answer.text[:500]
    assert result["took"] < deadline(10), result["took"]
    assert max(probes) < deadline(1), probes
    assert "browser-state.json" in answer.json()["error"]["message"]
    assert requests.get(pc.app + "/readyz", timeout=deadline(10)).status_code == 200


def _app_peak_kib(pc: Computer) -> int:
    """The app server's peak resident memory (VmHWM), in KiB."""
    pid = pc.exec(
        "supervisorctl", "-c", "/opt/agentenv/image/supervisord.conf", "pid", "app"
    ).strip()
    assert pid.isdigit(), pid
    status = pc.exec("cat", f"/proc/{pid}/status")
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1])


def _container_memory(pc: Computer) -> int:
    """The container's memory use as ``docker stats`` reports it, in bytes."""
    stats = pc.container.get_wrapped_container().stats(stream=False)
    return int(stats["memory_stats"]["usage"])


def _post_big(pc: Computer, path: str, total: int, *, chunked: bool) -> tuple[int, int]:
    """POST ``total`` bytes to ``path``, stopping once the server answers:
    the answer's status, and how much was sent by then."""
    parts = urlsplit(pc.app)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {CONTROL}\r\nContent-Type: application/json\r\n"
        + ("Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {total}\r\n")
        + "\r\n"
    )
    piece = b" " * MIB  # JSON whitespace
    if chunked:
        piece = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    sent = 0
    end = time.monotonic() + deadline(60)
    with socket.create_connection((host, port), timeout=deadline(30)) as sock:
        sock.sendall(head.encode())
        while sent < total and time.monotonic() < end:
            if select.select([sock], [], [], 0)[0]:
                break  # an answer before the whole body
            try:
                sock.sendall(piece)
            except OSError:  # the server closed its side: read its answer
                break
            sent += MIB
        if sent >= total and chunked:
            sock.sendall(b"0\r\n\r\n")
        answer = b""
        while b"\r\n" not in answer and time.monotonic() < end:
            got = sock.recv(4096)
            if not got:
                break
            answer += got
    status_line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    assert status_line.startswith("HTTP/1.1 "), answer[:200]
    return int(status_line.split()[1]), sent


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_huge_body_is_refused_without_filling_memory(pc: Computer, chunked: bool) -> None:
    peak_before = _app_peak_kib(pc)
    used_before = _container_memory(pc)
    status, sent = _post_big(pc, "/v1/browser/tabs/list", 200 * MIB, chunked=chunked)
    assert status == 413
    assert sent < 200 * MIB  # refused before the body was all sent, not after
    grew_kib = _app_peak_kib(pc) - peak_before
    assert grew_kib < 64 * 1024, f"the app's peak memory grew by {grew_kib} KiB"
    used_after = _container_memory(pc)
    assert used_after - used_before < 150 * MIB, (used_before, used_after)
    assert requests.get(pc.app + "/readyz", timeout=deadline(10)).status_code == 200


def test_a_file_tab_is_refused_and_nothing_changes(pc: Computer) -> None:
    site = SITE
    pc.op("cookies/set", {"cookies": [{"name": "kept", "value": "before-1", "url": site}]})
    archive = pc.op("data/get")
    inside = members(archive)
    saved = json.loads(inside[STATE])
    saved["cookies"] = [
        {**c, "value": "after-2"} if c["name"] == "kept" else c for c in saved["cookies"]
    ]
    saved["cookies"].append({"name": "planted", "value": "x", "domain": "127.0.0.1", "path": "/"})
    saved["local_storage"] = {site: {"planted": "yes"}}
    saved["tabs"] = [{"url": site + "/popup", "title": "", "active": False}]
    saved["tabs"].append({"url": "file:///etc/passwd", "title": "", "active": True})
    inside[STATE] = json.dumps(saved).encode()
    cookies_before = all_cookies(pc)
    tabs_before = pc.op("tabs/list")
    storage_before = pc.op("local_storage/get", {"origin": site})["items"]

    answer = add(pc, pack(inside))
    assert answer.status_code == 400, answer.text[:500]
    assert "tabs" in answer.json()["error"]["message"], answer.text[:500]
    assert "/etc/passwd" not in answer.text

    assert all_cookies(pc) == cookies_before
    assert cookies(pc, site)["kept"] == "before-1"
    assert pc.op("tabs/list") == tabs_before
    assert pc.op("local_storage/get", {"origin": site})["items"] == storage_before


def _in_page(pc: Computer, tab: str, expression: str) -> Any:
    """``expression``'s value in ``tab``, read on a control-token connection."""
    import asyncio

    import aiohttp

    from tests.security.attacks import Agent

    async def read() -> Any:
        version = requests.get(pc.relay + "/json/version", timeout=deadline(10)).json()
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(version["webSocketDebuggerUrl"], headers=pc.headers()) as ws,
        ):
            cdp = Agent(ws)
            attached = await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
            session = attached["result"]["sessionId"]
            return await cdp.evaluate(session, expression)

    return asyncio.run(read())


def _loaded(pc: Computer, tab: str, url: str) -> None:
    """Wait (bounded) until ``tab`` shows ``url``, loaded."""
    done = url + "complete"
    wait_for(
        lambda: _in_page(pc, tab, "location.href + document.readyState") == done, f"{url} to load"
    )


def test_deleting_cookies_and_clearing_local_storage_leaves_nothing(pc: Computer) -> None:
    """``browser_delete_cookies`` and ``browser_clear_local_storage`` with no
    filter (``cookies/delete {}``, ``local_storage/clear {}``: docs/spec.md
    sections 4 and 5) leave the page no cookie and no local storage item:
    neither those the ops set (one on a path of its own) nor those the page
    wrote itself."""
    pc.op("data/reset")
    pc.op(
        "cookies/set",
        {
            "cookies": [
                {"name": "op-cookie", "value": "1", "url": SITE},
                {"name": "deep", "value": "2", "domain": "127.0.0.1", "path": "/next"},
            ]
        },
    )
    pc.op("local_storage/set", {"origin": SITE, "items": {"op-item": "1"}})
    tab = pc.op("tabs/open", {"url": SITE + "/"})["id"]
    wait_for(lambda: _in_page(pc, tab, "document.readyState") == "complete", "the page to load")
    written = "document.cookie = 'page-cookie=3; path=/'; localStorage.setItem('page-item', '4');"
    _in_page(pc, tab, written + "document.cookie")
    assert _in_page(pc, tab, "localStorage.length") == 2
    assert len(all_cookies(pc)) == 3

    assert pc.op("cookies/delete", {})["deleted"] == 3
    pc.op("local_storage/clear", {})

    for url in (SITE + "/", SITE + "/next"):
        pc.op("navigate", {"url": url, "tab": tab})
        _loaded(pc, tab, url)
        assert _in_page(pc, tab, "document.cookie") == "", url
        assert _in_page(pc, tab, "localStorage.length") == 0, url
    assert all_cookies(pc) == []
    pc.op("tabs/close", {"id": tab})
