"""Bad input at the relay: a clear answer or a clean close, and others keep working."""

from __future__ import annotations

import base64
import os
import socket

import aiohttp
import requests

from tests.support.stack import NativeStack


def _browser_path(stack: NativeStack) -> str:
    url = requests.get(stack.relay_http + "/json/version", timeout=10).json()
    return str(url["webSocketDebuggerUrl"]).split(str(stack.relay_port), 1)[1]


async def _still_serves(stack: NativeStack) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(stack.relay_http + _browser_path(stack)) as ws,
    ):
        await ws.send_json({"id": 1, "method": "Target.getTargets"})
        answer = await ws.receive_json(timeout=10)
        assert answer["id"] == 1 and "targetInfos" in answer["result"]


async def test_unknown_path_names_the_known_ones(stack: NativeStack) -> None:
    answer = requests.get(stack.relay_http + "/devtools/nothing/here", timeout=10)
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert "/json/version" in message and "/devtools/page/<id>" in message
    await _still_serves(stack)


async def test_malformed_upgrade_gets_400(stack: NativeStack) -> None:
    headers = {"Upgrade": "websocket", "Connection": "Upgrade"}  # no key, no version
    answer = requests.get(stack.relay_http + _browser_path(stack), headers=headers, timeout=10)
    assert answer.status_code == 400
    assert "WebSocket" in answer.json()["error"]["message"]
    plain = requests.get(stack.relay_http + _browser_path(stack), timeout=10)
    assert plain.status_code == 400
    await _still_serves(stack)


async def test_unknown_page_gets_404(stack: NativeStack) -> None:
    headers = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
    }
    answer = requests.get(stack.relay_http + "/devtools/page/NOPE", headers=headers, timeout=10)
    assert answer.status_code == 404
    assert "/json/list" in answer.json()["error"]["message"]
    await _still_serves(stack)


async def test_client_vanishing_mid_message(stack: NativeStack) -> None:
    relay_pid = stack.pid("relay")
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", stack.relay_port), timeout=10) as raw:
        raw.sendall(
            (
                f"GET {_browser_path(stack)} HTTP/1.1\r\nHost: 127.0.0.1:{stack.relay_port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        assert b" 101 " in raw.recv(4096).split(b"\r\n", 1)[0]
        # A masked text frame announcing 1 MiB, of which only 100 bytes arrive.
        header = bytes([0x81, 0xFF]) + (1024 * 1024).to_bytes(8, "big") + os.urandom(4)
        raw.sendall(header + b"x" * 100)
    await _still_serves(stack)
    # Malformed CDP JSON: Chromium answers it; the connection and relay survive.
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(stack.relay_http + _browser_path(stack)) as ws,
    ):
        await ws.send_str("{this is not json")
        await ws.send_json({"id": 2, "method": "Browser.getVersion"})
        seen = [await ws.receive_json(timeout=10) for _ in range(2)]
        assert any(m.get("id") == 2 and "result" in m for m in seen)
    assert stack.pid("relay") == relay_pid


def _pages(stack: NativeStack) -> set[str]:
    listed = requests.get(stack.relay_http + "/json/list", timeout=10).json()
    return {t["id"] for t in listed if t["type"] == "page"}


async def test_a_get_of_json_new_opens_no_tab(stack: NativeStack) -> None:
    """With no users configured, any web page the user visits could send a
    GET /json/new (an <img>, no Origin). Only PUT opens a tab, as on Chromium."""
    before = _pages(stack)
    answer = requests.get(stack.relay_http + "/json/new?http://example.com/", timeout=10)
    assert answer.status_code == 405 and answer.headers["Allow"] == "PUT"
    assert "send PUT /json/new" in answer.json()["error"]["message"]
    assert _pages(stack) == before
    opened = requests.put(stack.relay_http + "/json/new?about:blank", timeout=10)
    assert opened.status_code == 200, opened.text
    tab = opened.json()["id"]
    assert _pages(stack) == before | {tab}
    closed = requests.get(f"{stack.relay_http}/json/close/{tab}", timeout=10)
    assert closed.status_code == 200, closed.text
    await _still_serves(stack)
