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
