"""The relay reads where a URL goes as Chromium does: for thousands of
spellings of hosts and ports (IPv4 in decimal, octal, hex and short forms,
IPv6 and IPv4-mapped, percent-escapes, full-width digits and dots,
invisible characters, user info, backslashes), :func:`host_of` and
Chromium's own parser (``new URL()`` in a page: the same canonicaliser the
network stack reads) give the same host and port, or both refuse the URL."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import aiohttp
import pytest

from agentenv.protocol.urls import host_of
from tests.support.stack import free_port
from tests.support.timing import deadline, wait_for

_DEFAULT = {"http:": 80, "https:": 443, "ws:": 80, "wss:": 443}
_NUMBERS = [0, 1, 2, 127, 255, 256, 4095, 65535, 16777215, 2130706433, 4294967295, 4294967296]
_ODD_PARTS = ["", "0", "00", "0x", "09", "0xg", "1e2", "-1", " 1", "a"]
_V6 = [
    "[::1]",
    "[::]",
    "[0:0:0:0:0:0:0:1]",
    "[0::1]",
    "[::ffff:7f00:1]",
    "[::ffff:127.1]",
    "[::1%251]",
]
_NAMES = ["localhost", "LOCALHOST", "localhost.", "a.localhost", "example.com", "ex%41mple.com"]


def _part(rng: random.Random) -> str:
    n = rng.choice([*_NUMBERS, rng.randrange(0, 2**33)])
    kind = rng.random()
    if kind < 0.3:
        return str(n)
    if kind < 0.5:
        return "0" + oct(n)[2:]
    if kind < 0.7:
        return rng.choice(["0x", "0X"]) + hex(n)[2:]
    if kind < 0.8:
        return rng.choice(_ODD_PARTS)
    return str(n)


def _host(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.6:
        host = ".".join(_part(rng) for _ in range(rng.randint(1, 5))) + rng.choice(["", "", "."])
        if rng.random() < 0.2:
            dot = rng.choice(["%2e", "%2E", "\u3002", "\uff0e", "\uff61"])
            host = host.replace(".", dot, 1)
        if rng.random() < 0.1:  # full-width digits
            host = host.translate({ord(c): ord(c) + 0xFEE0 for c in "0123456789"})
        if rng.random() < 0.1:  # a soft hyphen, which names drop
            host = host[:1] + "\u00ad" + host[1:]
        return host
    if kind < 0.8:
        v4 = ".".join(str(rng.choice([0, 1, 2, 127, 255])) for _ in range(4))
        return rng.choice([*_V6, f"[::ffff:{v4}]", f"[::{v4}]", f"[::ffff:0:{v4}]"])
    return rng.choice(_NAMES)


def _forms(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    forms = []
    for _ in range(count):
        scheme = rng.choice(["http", "https", "ws", "wss", "HTTP"])
        after = rng.choice(["://", ":/", ":\\\\", ":///", "://user:pw@", "://a@b@"])
        port = rng.choice(["", ":9222", ":09222", ":80", ":443", ":", ":65536", ":8080"])
        forms.append(f"{scheme}{after}{_host(rng)}{port}/x")
    return forms


@pytest.fixture(scope="module")
def page() -> Iterator[str]:
    """A bare Chromium of the host's, and its first page's WebSocket URL."""
    if shutil.which("chromium") is None:
        pytest.skip("needs chromium on the host: run `make test` (installs it)")
    port = free_port()
    profile = tempfile.mkdtemp(prefix="url-hosts-")
    process = subprocess.Popen(
        [
            *("chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"),
            *("--disable-background-networking", f"--remote-debugging-port={port}"),
            *(f"--user-data-dir={profile}", "about:blank"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def first_page() -> str | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as answer:
            pages = [t for t in json.load(answer) if t.get("type") == "page"]
        return str(pages[0]["webSocketDebuggerUrl"]) if pages else None

    try:
        yield wait_for(first_page, "Chromium's first page", timeout_s=30)
    finally:
        process.terminate()
        process.wait(deadline(20))
        shutil.rmtree(profile, ignore_errors=True)


async def _chromium_reads(endpoint: str, forms: list[str]) -> list[Any]:
    script = (
        f"({json.dumps(forms)}).map(u => {{ try {{ const x = new URL(u); "
        "return [x.hostname, x.port, x.protocol]; } catch (e) { return null; } })"
    )
    async with aiohttp.ClientSession() as http, http.ws_connect(endpoint, max_msg_size=0) as ws:
        await ws.send_json(
            {
                "id": 1,
                "method": "Runtime.evaluate",
                "params": {"expression": script, "returnByValue": True},
            }
        )
        while True:
            got = await ws.receive_json(timeout=deadline(30))
            if got.get("id") == 1:
                return list(got["result"]["result"]["value"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_relay_reads_a_urls_host_and_port_as_chromium_does(page: str, seed: int) -> None:
    forms = _forms(1500, seed)
    read = asyncio.run(_chromium_reads(page, forms))
    differences = []
    for url, theirs in zip(forms, read, strict=True):
        expected = None
        if theirs is not None:
            host, port, scheme = theirs
            # Chromium escapes what no name holds (a space as %20): the same host.
            expected = (unquote(host), int(port) if port else _DEFAULT[scheme])
        if host_of(url) != expected:
            differences.append((url, host_of(url), expected))
    assert not differences, differences[:20]
