"""A page's own script against the computer's inner ports.

Chromium's local network checks stop a public page's requests to loopback,
but not those of a fresh tab's first ``about:blank`` page nor of a page
served from the computer's own address. From there a script reached
Chromium's raw DevTools port (when it was 9223) and closed, activated and
opened tabs, another agent's too, unattributed. The inner ports are now ones
Chromium refuses to send any page's request to (its unsafe ports): each test
tries every way a page sends a request, on every name of the machine, and
checks both that nothing got through and that nothing happened. A request to
an ordinary loopback port from the same page is the control: it gets through,
so what stops the others is the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from typing import Any

import pytest

from agentenv.settings import PAGE_REFUSED_PORTS, Settings
from tests.security.attacks import Agent, agent, clean
from tests.support.container import Computer
from tests.support.timing import deadline

CHROMIUM = Settings.chromium_port
RECORDER = Settings.recorder_port
#: A server inside the computer on an ordinary port (the test site).
ORDINARY = "http://127.0.0.1:8000/"

#: Tries each URL with fetch (no-cors: an opaque answer means it got there),
#: then as an image, a frame and a form's target, which only act.
PROBE = """
async (urls, acting) => {
  const out = {};
  for (const url of urls) {
    try { await fetch(url, {mode: 'no-cors', cache: 'no-store'}); out[url] = 'reached'; }
    catch (e) { out[url] = 'refused'; }
  }
  for (const url of acting) {
    new Image().src = url;
    const frame = document.createElement('iframe'); frame.src = url;
    document.body.appendChild(frame);
    const form = document.createElement('form'); form.action = url; form.target = '_blank';
    document.body.appendChild(form); form.submit();
  }
  await new Promise(done => setTimeout(done, 1500));
  return JSON.stringify(out);
}
"""


def _hosts(target: Computer) -> list[str]:
    own = target.exec("hostname", "-i").split()[0]
    return ["127.0.0.1", "localhost", "[::1]", "0.0.0.0", "[::ffff:127.0.0.1]", own]


def _urls(target: Computer, victim: str) -> tuple[list[str], list[str]]:
    fetched, acting = [], []
    for host in _hosts(target):
        for path in ("version", "list", f"activate/{victim}", f"close/{victim}"):
            fetched.append(f"http://{host}:{CHROMIUM}/json/{path}")
        fetched.append(f"http://{host}:{RECORDER}/healthz")
        acting.append(f"http://{host}:{CHROMIUM}/json/close/{victim}")
        acting.append(f"http://{host}:{CHROMIUM}/json/new?http://example.com/")
    return fetched, acting


async def _pages(alice: Agent) -> set[str]:
    got = await alice.call("Target.getTargets")
    return {t["targetId"] for t in got["result"]["targetInfos"] if t["type"] == "page"}


def test_the_inner_ports_are_ones_chromium_refuses() -> None:
    assert {CHROMIUM, RECORDER} <= PAGE_REFUSED_PORTS


@pytest.mark.parametrize("url", ["", "about:blank"])
async def test_a_fresh_tabs_blank_page_reaches_no_inner_port(target: Computer, url: str) -> None:
    async with agent(target) as alice:
        victim = (await alice.call("Target.createTarget", {"url": "about:blank"}))["result"][
            "targetId"
        ]
        tab = (await alice.call("Target.createTarget", {"url": url}))["result"]["targetId"]
        attached = await alice.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        session = attached["result"]["sessionId"]
        before = await _pages(alice)
        fetched, acting = _urls(target, victim)
        call = f"({PROBE})({json.dumps([ORDINARY, *fetched])}, {json.dumps(acting)})"
        said: dict[str, str] = json.loads(await alice.evaluate(session, call))
        assert said.pop(ORDINARY) == "reached", "the control: an ordinary port is reachable"
        assert set(said.values()) == {"refused"}, [u for u, s in said.items() if s != "refused"]
        # Every request was refused at connect, so nothing is on its way: the
        # tabs now are what any request could have changed.
        after = await _pages(alice)
        assert victim in after, "a page's script closed a tab through Chromium's port"
        assert after <= before, "a page's script opened a tab through Chromium's port"
        await alice.call("Target.closeTarget", {"targetId": tab})
        await alice.call("Target.closeTarget", {"targetId": victim})
    clean(target)


SERVE_PROBE = """
import http.server, sys
page = sys.argv[1].encode()
class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.end_headers()
        self.wfile.write(page)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(('0.0.0.0', 8001), Page).serve_forever()
"""


async def test_a_page_at_the_computers_own_address_reaches_no_inner_port(
    target: Computer,
) -> None:
    """A page served at the computer's own address, by a real server inside
    it, whose script reports in its title (the relay does not attach to it)."""
    own = _hosts(target)[-1]
    async with agent(target) as alice:
        victim = (await alice.call("Target.createTarget", {"url": "about:blank"}))["result"][
            "targetId"
        ]
        fetched, acting = _urls(target, victim)
        script = f"({PROBE})({json.dumps(fetched)}, {json.dumps(acting)})"
        page = f"<body><script>{script}.then(s => document.title = s)</script></body>"
        target.exec(
            "sh",
            "-c",
            f"printf '%s' {_quote(SERVE_PROBE)} > /tmp/probe.py && "
            f"setsid python3 /tmp/probe.py {_quote(page)} >/dev/null 2>&1 </dev/null &",
        )
        _serving(target, 8001)
        before = await _pages(alice)
        tab = (await alice.call("Target.createTarget", {"url": f"http://{own}:8001/"}))["result"][
            "targetId"
        ]
        said = await _title_when_done(alice, tab)
        assert said and set(said.values()) == {"refused"}, said
        after = await _pages(alice)
        assert victim in after, "a page's script closed a tab through Chromium's port"
        assert after <= before | {tab}, "a page's script opened a tab through Chromium's port"
        await alice.call("Target.closeTarget", {"targetId": tab})
        await alice.call("Target.closeTarget", {"targetId": victim})
    clean(target)


def _serving(target: Computer, port: int) -> None:
    """Wait (bounded) until something inside the computer listens on ``port``."""
    target.exec(
        "python3",
        "-c",
        "import socket, time\n"
        f"end = time.monotonic() + {deadline(10)}\n"
        "while True:\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {port}), 1).close()\n"
        "        break\n"
        "    except OSError:\n"
        "        if time.monotonic() > end:\n"
        "            raise\n"
        "        time.sleep(0.05)\n",
    )


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


async def _title_when_done(alice: Agent, tab: str) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(30)
    while loop.time() < end:
        got = await alice.call("Target.getTargets")
        for info in got["result"]["targetInfos"]:
            if info["targetId"] == tab and info["title"].startswith("{"):
                return dict(json.loads(info["title"]))
        await asyncio.sleep(0.2)
    raise AssertionError("the page's script did not report within the deadline")


# -- every spelling of the loopback ------------------------------------------------

#: Each way a URL may name the computer's own loopback (Chromium reads each
#: as one address: 2130706434, 0x7f000002, 0177.0.0.2 and 127.0.0.2. are
#: 127.0.0.2; IPv6 has no loopback inside the image, yet is refused too).
LOOPBACK_HOSTS = [
    "127.0.0.2",
    "127.255.255.254",
    "127.1",
    "2130706434",
    "0x7f000002",
    "0177.0.0.2",
    "127.0.0.2.",
    "0",
    "0.0.0.0",
    "localhost",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::]",
    "[::ffff:127.0.0.2]",
    "[::ffff:7f00:1]",
    "[::ffff:0:0]",
]
#: The computer's doors a page reaches without a token, and what their answer holds.
DOORS = {
    Settings.relay_port: ("/json/version", '"Browser"'),
    Settings.app_port: ("/card", '"versions"'),
}


def _door_urls() -> list[str]:
    return [
        f"http://{host}:{port}{path}"
        for port, (path, _) in DOORS.items()
        for host in LOOPBACK_HOSTS
    ]


def _answered(text: object) -> bool:
    """Whether a page's text is one of the doors' own answers."""
    return isinstance(text, str) and any(mark in text for _, mark in DOORS.values())


async def _reached_by_navigating(alice: Agent, url: str) -> bool:
    """A tab's own script navigates it to ``url`` (not an agent's command:
    the relay does not see it); whether it shows the door's answer."""
    tab = (await alice.call("Target.createTarget", {"url": "about:blank"}))["result"]["targetId"]
    attached = await alice.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
    session = attached["result"]["sessionId"]
    await alice.evaluate(session, f"location.href = {json.dumps(url)}; 1")
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(20)
    read = "[location.href, document.readyState, document.body ? document.body.innerText : '']"
    try:
        while True:
            with contextlib.suppress(KeyError, TypeError):  # between documents
                href, state, text = await alice.evaluate(session, read)
                if href != "about:blank" and state == "complete":
                    return _answered(text)
            if loop.time() > end:
                raise AssertionError(f"the tab's navigation to {url} did not end")
            await asyncio.sleep(0.1)
    finally:
        await alice.call("Target.closeTarget", {"targetId": tab})


async def _frames_reached(alice: Agent, session: str) -> list[str]:
    """The frames of a page, its out-of-process ones too, that show a
    document from a server (not an error page), other than the page's own."""
    await alice.call(
        "Target.setAutoAttach",
        {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
        session,
    )
    sessions = [session] + [
        e["params"]["sessionId"]
        for e in alice.events
        if e.get("method") == "Target.attachedToTarget"
        and e["params"]["targetInfo"]["type"] == "iframe"
    ]
    reached = []
    for each in sessions:
        tree = (await alice.call("Page.getFrameTree", {}, each))["result"]["frameTree"]
        stack = [(tree, each == session)]
        while stack:
            node, own = stack.pop()
            frame = node["frame"]
            if not own and frame["url"].startswith("http") and "unreachableUrl" not in frame:
                reached.append(frame["url"])
            stack += [(child, False) for child in node.get("childFrames", [])]
    return reached


async def test_no_page_reaches_the_computers_doors_on_any_loopback(target: Computer) -> None:
    """A page of the test site (on the loopback itself, where Chromium's
    local network checks let it fetch loopback) tries each spelling of the
    loopback at the relay's and the app server's ports: by fetch, in a
    frame, and by navigating a tab itself. Chromium refuses each at connect."""
    urls = _door_urls()
    async with agent(target) as alice:
        _, session = await alice.page(f"{ORDINARY}next")
        control = f"{ORDINARY}next?control"
        fetch = f"({PROBE})({json.dumps([control, *urls])}, [])"
        said: dict[str, str] = json.loads(await alice.evaluate(session, fetch))
        assert said.pop(control) == "reached", "the control: an ordinary port is reachable"
        fetched = sorted(u for u, s in said.items() if s != "refused")
        frames = (
            "Promise.all(" + json.dumps(urls) + ".map(u => new Promise(done => {"
            " const f = document.createElement('iframe'); f.onload = done; f.src = u;"
            " document.body.appendChild(f); setTimeout(done, 5000); })))"
            ".then(() => new Promise(done => setTimeout(done, 500))).then(() => 1)"
        )
        await alice.evaluate(session, frames)
        framed = await _frames_reached(alice, session)
        navigated = [url for url in urls if await _reached_by_navigating(alice, url)]
    clean(target)
    assert not fetched, f"a page's fetch reached the computer's doors: {fetched}"
    assert not framed, f"a page's frames showed the computer's doors: {framed}"
    assert not navigated, f"a page navigated to the computer's doors: {navigated}"


@pytest.mark.parametrize("method", ["Page.navigate", "Target.createTarget"])
async def test_no_agent_opens_the_computers_doors_on_any_loopback(
    target: Computer, method: str
) -> None:
    """An agent's own command to open each spelling is refused by the relay
    (rule local-url), and would be by Chromium past it."""
    opened = []
    async with agent(target) as alice:
        tab, session = await alice.page(f"{ORDINARY}next")
        for url in _door_urls():
            if method == "Page.navigate":
                answer = await alice.call("Page.navigate", {"url": url}, session)
                refused = "error" in answer or bool(answer["result"].get("errorText"))
                if not refused:
                    await asyncio.sleep(0.3)  # it paints
                    text = await alice.evaluate(session, "document.body.innerText")
                    refused = not _answered(text)
            else:
                answer = await alice.call("Target.createTarget", {"url": url})
                refused = "error" in answer
                if not refused:
                    new = answer["result"]["targetId"]
                    refused = not await _shows_a_door(alice, new)
                    await alice.call("Target.closeTarget", {"targetId": new})
            if not refused:
                opened.append(url)
            elif "error" in answer:
                assert "local-url" in answer["error"]["message"], answer
        await alice.call("Target.closeTarget", {"targetId": tab})
    clean(target)
    assert not opened, f"{method} opened the computer's doors: {opened}"


async def _shows_a_door(alice: Agent, tab: str) -> bool:
    attached = await alice.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
    session = attached["result"]["sessionId"]
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(20)
    while loop.time() < end:
        with contextlib.suppress(KeyError, TypeError):
            state, text = await alice.evaluate(
                session, "[document.readyState, document.body ? document.body.innerText : '']"
            )
            if state == "complete" and text:
                return _answered(text)
        await asyncio.sleep(0.1)
    return False


async def test_no_page_or_agent_reaches_the_doors_at_the_computers_own_address(
    target: Computer,
) -> None:
    """A review of issue 40's change: ``Page.navigate`` to
    ``http://<the container's address>:9222/json/version`` and ``:8080/card``
    loaded them: the doors listen on every address, and only the loopback's
    spellings were closed. The relay refuses an agent's (rule local-url) and
    Chromium a page's, at the address and at its number's spelling."""
    address = target.exec(
        "sh",
        "-c",
        "getent ahosts $(cat /proc/sys/kernel/hostname) | "
        "awk '$1 !~ /^127\\./ && $1 !~ /:/ {print $1; exit}'",
    ).strip()
    assert address, "the computer has an address of its own"
    number = int(ipaddress.IPv4Address(address))
    urls = [
        f"http://{host}:{port}/{path}"
        for host in (address, number)
        for port, path in ((9222, "json/version"), (8080, "card"))
    ]
    refused: list[str] = []
    async with agent(target) as alice:
        tab, session = await alice.page(f"{ORDINARY}next")
        for url in urls:
            answer = await alice.call("Page.navigate", {"url": url}, session)
            if "error" in answer and "local-url" in answer["error"]["message"]:
                refused.append(url)
        fetch = f"({PROBE})({json.dumps(urls)}, [])"
        said: dict[str, str] = json.loads(await alice.evaluate(session, fetch))
        await alice.call("Target.closeTarget", {"targetId": tab})
    assert refused == urls, refused
    reached = sorted(u for u, s in said.items() if s != "refused")
    assert not reached, f"a page's fetch reached the computer's doors: {reached}"
    clean(target)
