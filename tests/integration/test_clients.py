"""Each client's way in, against the built image with users and a control token.

One computer for the module, started hardened with users alice and bob and a
control token, with the test site served inside it. Each test drives one real
client with a token and asserts three things: the client did its work (it read
back what it typed and clicked), the action log holds its actions under the
token's user (`who`), and no token, password or cookie value is anywhere under
/var/log/agentenv.

- Playwright `connect_over_cdp`: token in `Authorization`, or `?token=`.
- Puppeteer (tests/clients/puppeteer_session.js): `browserWSEndpoint` at the
  relay's root and at `/devtools/browser`, with `?token=`; `browserURL` with a
  header fails cleanly (Puppeteer sends no header on the WebSocket it finds).
- browser-use (tests/clients/browser_use_session.py): `http://host:port?token=`.
- Selenium with chromedriver (tests/clients/selenium_session.py), which
  sends no token: through the loopback door (harness/loopback.py), in Bob's
  scope, every step as on its own Chromium.
- Raw CDP over aiohttp: `Authorization: Bearer` on the WebSocket upgrade.
- The `mcp` SDK client through `/mcp` with a bearer token.
- Pixel and navigation ops with an agent's token, and `AgentEnv-Role`; a
  tool-call header too long for its arguments; a background tabs/open.
- Same-document moves credited to the commands that caused them.
- What an agent's token cannot do: control ops, `AgentEnv.*` over CDP.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import requests
from playwright.async_api import async_playwright

from tests.security.attacks import Agent, agent, clean, guarded
from tests.support import installs
from tests.support.container import SITE, TLS_SITE, Computer, computer
from tests.support.mcp import ref, ref_argument, text
from tests.support.stack import ROOT
from tests.support.timing import deadline, wait_for

T = TypeVar("T")

PUPPETEER = ROOT / "tests/clients/puppeteer_session.js"
STAGEHAND = ROOT / "tests/clients/stagehand_session.mjs"
BROWSER_USE = ROOT / "tests/clients/browser_use_session.py"
BROWSER_USE_PYTHON = ROOT / "build/clients/browser-use/bin/python"
SELENIUM = ROOT / "tests/clients/selenium_session.py"
SELENIUM_PYTHON = ROOT / "build/clients/selenium/bin/python"
CHROME_DEVTOOLS_MCP = (
    ROOT / "build/clients/node/node_modules/chrome-devtools-mcp/build/src/bin"
) / "chrome-devtools-mcp.js"
#: Typed into the password field through /mcp: never to be found in the log.
PASSWORD = "mcp-clients-hunter2-5e7a"
#: The cookie Puppeteer's session sets: its value is never logged.
PUPPETEER_COOKIE = "alice-cookie"


@pytest.fixture(scope="module")
def c(image: str) -> Iterator[Computer]:
    """The secured computer every client here connects to, the site served inside."""
    with computer(image) as running:
        running.serve_site()
        running.serve_tls_site()
        yield running


# -- helpers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def node() -> str:
    """`node` with puppeteer-core installed in build/clients/node."""
    done = installs.installed("node")
    found = shutil.which("node")
    if done.returncode != 0:
        if found is None:
            pytest.skip(
                "node is missing and scripts/test-clients.sh node could not install it: "
                + done.stderr[-500:]
            )
        pytest.fail(f"scripts/test-clients.sh node failed:\n{done.stderr[-3000:]}")
    assert found is not None, "scripts/test-clients.sh node succeeded without a node"
    return found


@pytest.fixture(scope="module")
def browser_use_python() -> str:
    """The python of build/clients/browser-use, with browser-use installed."""
    installs.require("browser-use")
    return str(BROWSER_USE_PYTHON)


def _mark(c: Computer) -> int:
    """The log's last entry now: what a test's client writes comes after it."""
    return c.log()[1]


def _actions(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["action"] | {"seq": line["seq"]} for line in lines if "action" in line]


def _tabs(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["tab"] | {"seq": line["seq"]} for line in lines if "tab" in line]


def _logged(
    c: Computer, after: int, what: str, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The log's lines after ``after``, once ``done`` holds for them (bounded)."""

    def probe() -> list[dict[str, Any]] | None:
        lines, _ = c.log(after)
        return lines if done(lines) else None

    return wait_for(probe, what, timeout_s=30)


def _cdp_of(
    lines: list[dict[str, Any]], who: str, method: str, **params: Any
) -> list[dict[str, Any]]:
    """``who``'s CDP command entries for ``method`` whose params hold ``params``."""
    return [
        a
        for a in _actions(lines)
        if a.get("via") == "cdp"
        and a.get("who") == who
        and a.get("method") == method
        and all((a.get("params") or {}).get(k) == v for k, v in params.items())
    ]


def _has_cdp(who: str, navigated: str, *methods: str) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether the lines hold ``who``'s ``Page.navigate`` to ``navigated`` and each method."""

    def done(lines: list[dict[str, Any]]) -> bool:
        return bool(_cdp_of(lines, who, "Page.navigate", url=navigated)) and all(
            _cdp_of(lines, who, m) for m in methods
        )

    return done


def _only(lines: list[dict[str, Any]], who: str) -> None:
    """Every action entry in ``lines`` is ``who``'s (or the computer's own
    setting up the scope of a user's first connection: conn 0)."""
    strangers = [
        a
        for a in _actions(lines)
        if a.get("who") != who and not (a.get("who") == "agentenv" and a.get("conn") == 0)
    ]
    assert not strangers, strangers[:5]


async def _eventually(probe: Callable[[], Awaitable[T | None]], what: str, timeout_s: float) -> T:
    """Await ``probe`` until it gives something truthy; fail after the deadline."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline(timeout_s)
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > end:
            raise TimeoutError(f"waited {deadline(timeout_s):.0f} s for {what}")
        await asyncio.sleep(0.1)


def _browser_ws(c: Computer) -> str:
    """The browser's WebSocket URL from ``/json/version`` (which needs no token)."""
    answer = requests.get(c.relay + "/json/version", timeout=deadline(10))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["webSocketDebuggerUrl"])


async def _read_page(c: Computer, tab: str, expression: str) -> Any:
    """``expression`` in ``tab``, read on a control-token connection (off the record)."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(_browser_ws(c), headers=c.headers(), max_msg_size=0) as ws,
    ):
        cdp = Agent(ws)
        attached = await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        session = attached["result"]["sessionId"]
        try:
            return await cdp.evaluate(session, expression)
        finally:
            await cdp.call("Target.detachFromTarget", {"sessionId": session})


def _page_value(c: Computer, tab: str, expression: str) -> Any:
    return asyncio.run(_read_page(c, tab, expression))


def _run(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=deadline(timeout_s)
    )


# -- 1. Playwright ---------------------------------------------------------------------


@pytest.mark.parametrize("way", ["header", "query"])
async def test_playwright_connect_over_cdp(c: Computer, way: str, tmp_path: Path) -> None:
    # The header way as alice, the query way as bob: `who` comes from the token.
    user = "alice" if way == "header" else "bob"
    token = c.token(user)
    before = _mark(c)
    async with async_playwright() as pw:
        if way == "header":
            browser = await pw.chromium.connect_over_cdp(
                c.relay, headers={"Authorization": f"Bearer {token}"}
            )
        else:
            browser = await pw.chromium.connect_over_cdp(f"{c.relay}?token={token}")
        context = browser.contexts[0]
        # Tracing with screenshots (Page.startScreencast, refused by the first
        # allowlist: the trace held no screenshot and no error said why).
        await context.tracing.start(screenshots=True, snapshots=True)
        page = await context.new_page()
        await page.goto(SITE + "/")
        await page.fill("#user", f"{user}-by-{way}")
        await page.fill("#search", f"{way} words")
        await page.click("#go")
        assert await page.text_content("#out") == f"clicked:{way} words"
        assert await page.input_value("#user") == f"{user}-by-{way}"
        trace = tmp_path / "trace.zip"
        await context.tracing.stop(path=trace)
        with zipfile.ZipFile(trace) as packed:
            shots = [n for n in packed.namelist() if n.endswith((".jpeg", ".jpg", ".png"))]
        assert shots, "the trace holds no screenshot"
        await page.close()
        await browser.close()

    lines = _logged(
        c,
        before,
        f"{user}'s Playwright commands",
        _has_cdp(user, SITE + "/", "Input.insertText", "Input.dispatchMouseEvent"),
    )
    typed = [a["params"].get("text") for a in _cdp_of(lines, user, "Input.insertText")]
    assert f"{user}-by-{way}" in typed and f"{way} words" in typed, typed
    opened = [e for e in _tabs(lines) if e["event"] == "opened"]
    assert any(e["by"].get("who") == user and e["by"]["kind"] == "command" for e in opened), opened
    _only(lines, user)
    clean(c)


#: A page that moves within its document: a fragment link and a pushState.
MOVES = (
    "<!doctype html><title>Moves</title><a id=part href='#part'>part</a>"
    "<button id=push onclick=\"history.pushState({}, '', '/pushed')\">push</button>"
)


async def test_same_document_moves_are_credited_to_their_commands(c: Computer) -> None:
    """A same-document navigation (a fragment, history.pushState, back to
    either) is a navigated event like any other (docs/spec.md section 1, "Tab
    events"): credited to the Page.navigate or Page.navigateToHistoryEntry
    that asked for it, and to the click a pushState followed."""
    origin = c.serve_folder(8023, "/tmp/moves", {"moves.html": MOVES})
    start, part, pushed = origin + "/moves.html", origin + "/moves.html#part", origin + "/pushed"
    before = _mark(c)
    headers = {"Authorization": f"Bearer {c.token('alice')}"}
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(c.relay, headers=headers)
        page = await browser.contexts[0].new_page()
        await page.goto(start)
        await page.goto(part)  # same document: Chromium answers with no loader
        await page.click("#push")
        await page.wait_for_url(pushed)
        await page.go_back()
        await page.wait_for_url(part)
        await page.close()
        await browser.close()

    def moves(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in _tabs(lines) if e["event"] == "navigated" and e["url"] != "about:blank"]

    lines = _logged(c, before, "alice's four moves", lambda lines: len(moves(lines)) >= 4)
    entries = {a["seq"]: a for a in _actions(lines)}
    first, fragment, push, back = moves(lines)[:4]
    assert [e["url"] for e in (first, fragment, push, back)] == [start, part, pushed, part]

    def command(event: dict[str, Any]) -> dict[str, Any]:
        assert event["by"]["kind"] == "command" and event["by"]["who"] == "alice", event
        return entries[event["by"]["entry"]]

    assert command(first)["method"] == "Page.navigate" and command(first)["params"]["url"] == start
    assert command(fragment)["method"] == "Page.navigate", fragment
    assert command(fragment)["params"]["url"] == part
    assert push["by"]["kind"] == "page", push
    clicked = entries[push["by"]["after"]]
    assert clicked["method"] == "Input.dispatchMouseEvent" and clicked["who"] == "alice", clicked
    assert command(back)["method"] == "Page.navigateToHistoryEntry", back
    _only(lines, "alice")
    clean(c)


async def test_playwright_cdp_sessions_are_kept_to_the_scope(c: Computer) -> None:
    """Playwright's `new_cdp_session(page)` and `new_browser_cdp_session()`
    (both opened through Target.attachToBrowserTarget): the page's session
    answers, the browser's lists and reaches only alice's scope (bob's page
    open beside it is neither listed nor reachable), a command the table
    refuses stays refused there, and every command is on alice's record."""
    before = _mark(c)
    async with agent(c, "bob") as bob, async_playwright() as pw:
        theirs, _ = await bob.page(SITE + "/next")
        browser = await pw.chromium.connect_over_cdp(
            c.relay, headers={"Authorization": f"Bearer {c.token('alice')}"}
        )
        context = browser.contexts[0]
        page = await context.new_page()
        await page.goto(SITE + "/")
        session = await context.new_cdp_session(page)
        title = await session.send(
            "Runtime.evaluate", {"expression": "document.title", "returnByValue": True}
        )
        assert title["result"]["value"] == "Start", title
        document = await session.send("DOM.getDocument", {"depth": 2})
        assert document["root"]["nodeName"] == "#document", document
        tree = await session.send("Accessibility.getFullAXTree")
        assert any(n.get("name", {}).get("value") == "Next page" for n in tree["nodes"]), tree
        mine = (await session.send("Target.getTargetInfo"))["targetInfo"]
        await session.detach()

        whole = await browser.new_browser_cdp_session()
        seen: list[str] = []
        whole.on("Target.targetCreated", lambda e: seen.append(e["targetInfo"]["targetId"]))
        listed = (await whole.send("Target.getTargets"))["targetInfos"]
        ids = {t["targetId"] for t in listed}
        assert mine["targetId"] in ids and theirs not in ids, listed
        assert {t["browserContextId"] for t in listed} == {mine["browserContextId"]}, listed
        await whole.send("Target.setDiscoverTargets", {"discover": True})
        await _eventually(
            lambda: asyncio.sleep(0, mine["targetId"] in seen), "alice's page's event", 10
        )
        assert theirs not in seen, seen
        with pytest.raises(Exception, match="No target with given id found"):
            await whole.send("Target.attachToTarget", {"targetId": theirs, "flatten": True})
        with pytest.raises(Exception, match="guard not-allowed"):
            await whole.send("Browser.getBrowserCommandLine")
        # A tab it opens is alice's; bob's connection never hears of it.
        made = await whole.send("Target.createTarget", {"url": SITE + "/next"})
        info = await whole.send("Target.getTargetInfo", {"targetId": made["targetId"]})
        assert info["targetInfo"]["browserContextId"] == mine["browserContextId"], info
        bobs = (await bob.call("Target.getTargets"))["result"]["targetInfos"]
        assert made["targetId"] not in {t["targetId"] for t in bobs}, bobs
        await whole.send("Target.closeTarget", {"targetId": made["targetId"]})
        await whole.detach()
        await page.close()
        await browser.close()

    def recorded(lines: list[dict[str, Any]]) -> bool:
        return all(
            _cdp_of(lines, "alice", m)
            for m in (
                "Target.attachToBrowserTarget",
                "Runtime.evaluate",
                "DOM.getDocument",
                "Accessibility.getFullAXTree",
                "Target.getTargets",
                "Target.setDiscoverTargets",
                "Browser.getBrowserCommandLine",
                "Target.closeTarget",
            )
        )

    lines = _logged(c, before, "alice's CDP sessions' commands", recorded)
    # The attach to bob's page (a reading command: its params are not kept).
    tried = [a for a in _cdp_of(lines, "alice", "Target.attachToTarget") if a.get("guard")]
    assert [a["guard"] for a in tried] == [{"rule": "scope", "action": "blocked"}], tried
    refused = _cdp_of(lines, "alice", "Browser.getBrowserCommandLine")
    assert refused[0]["guard"]["rule"] == "not-allowed", refused
    assert all(a["ok"] for a in _cdp_of(lines, "alice", "Accessibility.getFullAXTree"))
    opened = _cdp_of(lines, "alice", "Target.createTarget", url=SITE + "/next")
    assert opened and opened[0]["scope"] == "alice" and opened[0]["ok"], opened
    assert not [a for a in _actions(lines) if a.get("who") == "bob" and a.get("guard")]
    clean(c)


# -- 2. Puppeteer ----------------------------------------------------------------------


def _puppeteer(node: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([node, str(PUPPETEER), *args], timeout_s=90)


@pytest.mark.parametrize("path", ["", "/devtools/browser"])
def test_puppeteer_browser_ws_endpoint(c: Computer, node: str, path: str) -> None:
    endpoint = f"ws://{c.relay_address}{path}?token={c.token('alice')}"
    before = _mark(c)
    done = _puppeteer(node, endpoint, SITE)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["user"] == "alice" and result["out"] == "clicked:", result
    assert result["title"] == "Start" and result["next_title"] == "Next", result
    assert result["back_title"] == "Start" and result["screenshot_bytes"] > 1000, result
    assert result["cookie_names"] == ["session"], result
    # ARIA selectors: Accessibility.queryAXTree passes the table.
    assert result["aria_text"] == "Next page" and result["p_aria_id"] == "go", result

    lines = _logged(
        c,
        before,
        "alice's Puppeteer commands",
        _has_cdp("alice", SITE + "/next", "Input.dispatchKeyEvent", "Input.dispatchMouseEvent"),
    )
    keys = _cdp_of(lines, "alice", "Input.dispatchKeyEvent")
    assert "".join(a["params"].get("text", "") for a in keys) == "alice", keys
    assert _cdp_of(lines, "alice", "Page.navigate", url=SITE + "/")
    assert _cdp_of(lines, "alice", "Page.navigateToHistoryEntry")
    _only(lines, "alice")
    clean(c, PUPPETEER_COOKIE)


async def _tls_page(agent: Agent) -> str:
    """What a new tab of ``agent``'s at the HTTPS site shows (a certificate
    error page, unless its certificate errors are ignored)."""
    tab = (await agent.call("Target.createTarget", {"url": "about:blank"}))["result"]["targetId"]
    attached = await agent.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
    session = attached["result"]["sessionId"]
    went = await agent.call("Page.navigate", {"url": TLS_SITE + "/next"}, session)
    error = str(went["result"].get("errorText", ""))

    async def loaded() -> str | None:
        title = await agent.evaluate(session, "document.readyState == 'complete' && document.title")
        return str(title) if title else None

    title = await _eventually(loaded, "the HTTPS page's title", timeout_s=20)
    await agent.call("Target.closeTarget", {"targetId": tab})
    return f"{error}|{title}"


async def test_puppeteer_accept_insecure_certs_is_kept_to_its_scope(c: Computer, node: str) -> None:
    """Puppeteer's acceptInsecureCerts sends Security.setIgnoreCertificateErrors
    on the browser's own session, for the whole browser on Chromium. With two
    scopes the relay keeps it to the sender's pages: Alice's Puppeteer opens
    a page with a self-signed certificate while Bob's pages, at the same
    time, still refuse it."""
    endpoint = f"ws://{c.relay_address}?token={c.token('alice')}"
    before = _mark(c)
    done = _puppeteer(node, "--insecure", TLS_SITE + "/", endpoint, SITE)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["insecure_title"] == "Start" and result["user"] == "alice", result
    lines = _logged(
        c,
        before,
        "alice's certificate setting and her HTTPS page",
        lambda lines: bool(_cdp_of(lines, "alice", "Page.navigate", url=TLS_SITE + "/")),
    )
    ignored = _cdp_of(lines, "alice", "Security.setIgnoreCertificateErrors", ignore=True)
    assert ignored and all(a["ok"] for a in ignored), ignored
    _only(lines, "alice")

    # While Alice's raw connection ignores certificate errors, Bob's pages do not.
    async with agent(c, "alice") as alice, agent(c, "bob") as bob:
        assert "result" in await alice.call("Security.setIgnoreCertificateErrors", {"ignore": True})
        assert await _tls_page(alice) == "|Next"
        refused = await _tls_page(bob)
        assert refused.startswith("net::ERR_CERT_AUTHORITY_INVALID|"), refused
        off = await alice.call("Security.setIgnoreCertificateErrors", {"ignore": False})
        assert "result" in off, off
        again = await _tls_page(alice)
        assert again.startswith("net::ERR_CERT_AUTHORITY_INVALID|"), again


NODE22 = installs.NODE22
PLAYWRIGHT_NODE = ROOT / "tests/clients/playwright_session.mjs"
PLAYWRIGHT_NODE_SESSIONS = ROOT / "tests/clients/playwright_cdp_sessions.mjs"


@pytest.fixture(scope="module")
def node22() -> str:
    """Node 22 from npm (build/clients/node22), with Puppeteer 25 and Playwright."""
    return installs.node22()


def test_puppeteer_25_on_node_22(c: Computer, node22: str) -> None:
    """Puppeteer 25 needs Node 22: the same session as Puppeteer 24's."""
    endpoint = f"ws://{c.relay_address}?token={c.token('bob')}"
    before = _mark(c)
    done = subprocess.run(
        [node22, str(PUPPETEER), endpoint, SITE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=deadline(90),
        env={**os.environ, "PUPPETEER_CORE_DIR": str(NODE22)},
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["puppeteer"].startswith("25."), result
    assert result["user"] == "alice" and result["out"] == "clicked:", result
    assert result["next_title"] == "Next" and result["back_title"] == "Start", result
    assert result["aria_text"] == "Next page" and result["p_aria_id"] == "go", result
    lines = _logged(
        c,
        before,
        "bob's Puppeteer 25 commands",
        _has_cdp("bob", SITE + "/next", "Input.dispatchKeyEvent"),
    )
    actions = _actions(lines)
    assert not [a for a in actions if a.get("guard")], [a for a in actions if a.get("guard")]
    _only(lines, "bob")
    clean(c, PUPPETEER_COOKIE)


def test_playwright_for_node_with_tracing(c: Computer, node22: str, tmp_path: Path) -> None:
    """Playwright for Node over CDP with a header, tracing with screenshots."""
    trace = tmp_path / "trace.zip"
    before = _mark(c)
    done = _run(
        [node22, str(PLAYWRIGHT_NODE), c.relay, c.token("alice"), SITE, str(trace)], timeout_s=120
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["version"] == "1.65.1" and result["out"] == "clicked:node words", result
    assert result["link"] == 1 and "pw_node" in result["cookies"], result
    assert result["nextTitle"] == "Next" and result["backTitle"] == "Start", result
    with zipfile.ZipFile(trace) as z:
        frames = [n for n in z.namelist() if n.startswith("screencast/") and n.endswith(".jpeg")]
    assert frames, "the trace holds no screenshots"
    lines = _logged(
        c, before, "alice's Playwright-for-Node commands", _has_cdp("alice", SITE + "/next")
    )
    # Nothing refused; its download folder is sent as alice's (rewritten).
    guarded = [a["guard"] for a in _actions(lines) if a.get("guard")]
    assert all(g == {"action": "rewritten", "rule": "download-folder"} for g in guarded), guarded
    _only(lines, "alice")
    clean(c, "playwright-node-cookie")


async def test_playwright_for_node_cdp_sessions_are_kept_to_the_scope(
    c: Computer, node22: str
) -> None:
    """Playwright for Node's `newCDPSession(page)` and `newBrowserCDPSession()`
    as alice, with bob's page open beside them (tests/clients/playwright_cdp_sessions.mjs)."""
    before = _mark(c)
    async with agent(c, "bob") as bob:
        theirs, _ = await bob.page(SITE + "/next")
        script = [node22, str(PLAYWRIGHT_NODE_SESSIONS), c.relay, c.token("alice"), SITE, theirs]
        done = await asyncio.to_thread(_run, script, 120)
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        bobs = (await bob.call("Target.getTargets"))["result"]["targetInfos"]
    assert result["version"] == "1.65.1", result
    assert result["title"] == "Start" and result["document"] == "#document", result
    assert "Next page" in result["axNames"], result
    mine = result["mine"]
    listed = {t["targetId"] for t in result["listed"]}
    assert mine["targetId"] in listed and theirs not in listed, result
    assert {t["browserContextId"] for t in result["listed"]} == {mine["browserContextId"]}
    assert mine["targetId"] in result["heard"] and theirs not in result["heard"], result
    assert "No target with given id found" in (result["attachOther"] or ""), result
    assert "guard not-allowed" in (result["commandLine"] or ""), result
    assert result["made"]["browserContextId"] == mine["browserContextId"], result
    assert result["made"]["targetId"] not in {t["targetId"] for t in bobs}, bobs

    def recorded(lines: list[dict[str, Any]]) -> bool:
        return all(
            _cdp_of(lines, "alice", m)
            for m in (
                "Target.attachToBrowserTarget",
                "Runtime.evaluate",
                "DOM.getDocument",
                "Accessibility.getFullAXTree",
                "Target.setDiscoverTargets",
                "Browser.getBrowserCommandLine",
                "Target.closeTarget",
            )
        )

    lines = _logged(c, before, "alice's Node CDP sessions' commands", recorded)
    tried = [a for a in _cdp_of(lines, "alice", "Target.attachToTarget") if a.get("guard")]
    assert [a["guard"] for a in tried] == [{"rule": "scope", "action": "blocked"}], tried
    refused = _cdp_of(lines, "alice", "Browser.getBrowserCommandLine")
    assert refused[0]["guard"]["rule"] == "not-allowed", refused
    assert _cdp_of(lines, "alice", "Target.createTarget", url=SITE + "/next")
    clean(c)


def test_stagehand_locators_fill_type_and_click(c: Computer, node: str) -> None:
    """Stagehand 3 (deterministic page API, no model): its locators need
    DOM.enable, DOM.getBoxModel and DOM.requestNode, which the first
    allowlist refused (5 of its 12 steps passed)."""
    version = requests.get(c.relay + "/json/version", timeout=10).json()
    before = _mark(c)
    done = _run(
        [node, str(STAGEHAND), version["webSocketDebuggerUrl"], SITE, c.token("bob")],
        timeout_s=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["out"] == "clicked:stagehand words", result
    assert result["user"] == "stagehand-user" and result["screenshot_bytes"] > 1000, result
    lines = _logged(
        c,
        before,
        "bob's Stagehand commands",
        _has_cdp("bob", SITE + "/", "Input.dispatchMouseEvent"),
    )
    actions = _actions(lines)
    assert not [a for a in actions if a.get("guard")], [a for a in actions if a.get("guard")]
    assert {a.get("method") for a in actions} >= {"DOM.enable", "Input.dispatchMouseEvent"}
    _only(lines, "bob")
    clean(c)


def test_puppeteer_browser_url_with_a_header_fails_cleanly(c: Computer, node: str) -> None:
    # Puppeteer fetches /json/version itself (it answers without a token) and
    # opens the WebSocket it names without the header: the relay answers 401.
    before = _mark(c)
    done = _puppeteer(
        node, "--browser-url", c.relay, "--header", f"Authorization=Bearer {c.token('alice')}", SITE
    )
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "401" in done.stderr or "Unauthorized" in done.stderr, done.stderr[-2000:]
    assert c.token("alice") not in done.stderr
    lines, _ = c.log(before)
    assert not _actions(lines), lines
    clean(c)


# -- 3. browser-use --------------------------------------------------------------------


def test_browser_use_cdp_url_with_a_token(c: Computer, browser_use_python: str) -> None:
    before = _mark(c)
    done = _run(
        [browser_use_python, str(BROWSER_USE), f"{c.relay}?token={c.token('alice')}", SITE],
        timeout_s=150,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["user"] == "alice" and result["out"] == "clicked:", result
    assert result["title"] == "Start" and result["next_title"] == "Next", result
    assert result["back_title"] == "Start" and result["elements"] >= 4, result

    lines = _logged(
        c,
        before,
        "alice's browser-use commands",
        _has_cdp("alice", SITE + "/next", "Input.dispatchMouseEvent"),
    )
    assert _cdp_of(lines, "alice", "Page.navigate", url=SITE + "/")
    assert _cdp_of(lines, "alice", "Input.dispatchKeyEvent") or _cdp_of(
        lines, "alice", "Input.insertText"
    )
    _only(lines, "alice")
    clean(c)


@pytest.fixture(scope="module")
def selenium_python() -> str:
    """The python of build/clients/selenium, and Debian's chromedriver."""
    installs.require("selenium")
    return str(SELENIUM_PYTHON)


def test_selenium_through_the_loopback_door(c: Computer, selenium_python: str) -> None:
    """chromedriver sends no token: the door on 127.0.0.1 adds Bob's. Every
    step passes in Bob's scope (new windows and switching between them are
    tab-type targets, sent for their pages), and the log holds them as Bob's."""
    from agentenv.harness.loopback import Loopback

    before = _mark(c)
    with Loopback(c.relay, c.token("bob")) as door:
        done = _run([selenium_python, str(SELENIUM), door.address, SITE], timeout_s=180)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    read = result["read"]
    assert read["title"] == "Start" and read["out"] == "clicked:selenium words", result
    assert read["script"] == 42 and read["screenshot_bytes"] > 1000, result
    assert "sel" in read["cookies"] and read["new_title"] == "Next", result
    assert read["handles"] >= 2 and read["back_in_first"] == "Start", result
    assert read["after_back"] == "Start", result
    lines = _logged(
        c,
        before,
        "bob's Selenium commands",
        _has_cdp("bob", SITE + "/next", "Target.activateTarget"),
    )
    _only(lines, "bob")
    assert {a.get("scope") for a in _actions(lines) if a.get("who") == "bob"} == {"bob"}
    activated = _cdp_of(lines, "bob", "Target.activateTarget")
    assert any((a.get("guard") or {}).get("rule") == "tab-target" for a in activated), activated
    # The new window's page was opened by its command, in Bob's scope.
    made = [a["seq"] for a in _cdp_of(lines, "bob", "Target.createTarget", forTab=True)]
    opened = [t for t in _tabs(lines) if t["event"] == "opened"]
    assert any((t.get("by") or {}).get("entry") in made for t in opened), (made, opened)
    assert all(t.get("scope") == "bob" for t in _tabs(lines)), _tabs(lines)
    # Without the door, chromedriver's token-less requests are refused.
    refused = requests.get(c.relay + "/json/list", timeout=10)
    assert refused.status_code == 401, refused.text
    clean(c, "selenium-cookie")


# -- 4. Raw CDP ------------------------------------------------------------------------


async def test_raw_cdp_with_a_bearer_header(c: Computer) -> None:
    before = _mark(c)
    headers = {"Authorization": f"Bearer {c.token('alice')}"}
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(_browser_ws(c), headers=headers, max_msg_size=0) as ws,
    ):
        alice = Agent(ws)
        tab, session = await alice.page(SITE + "/")

        async def loaded() -> bool:
            return bool(await alice.evaluate(session, "document.readyState") == "complete")

        await _eventually(loaded, "the site to load", timeout_s=20)
        await alice.evaluate(session, "document.getElementById('search').focus()")
        inserted = await alice.call("Input.insertText", {"text": "raw words"}, session)
        assert "error" not in inserted, inserted
        await alice.evaluate(session, "document.getElementById('go').click()")
        out = await alice.evaluate(session, "document.getElementById('out').textContent")
        assert out == "clicked:raw words"
        closed = await alice.call("Target.closeTarget", {"targetId": tab})
        assert closed["result"]["success"] is True, closed

    def closed_event(lines: list[dict[str, Any]]) -> bool:
        return any(e["event"] == "closed" and e["id"] == tab for e in _tabs(lines))

    lines = _logged(c, before, "the raw client's tab closed", closed_event)
    assert _cdp_of(lines, "alice", "Target.createTarget", url=SITE + "/")
    assert _cdp_of(lines, "alice", "Input.insertText", text="raw words")
    assert _cdp_of(lines, "alice", "Runtime.evaluate")
    events = {e["event"]: e for e in _tabs(lines) if e["id"] == tab}
    for event in ("opened", "closed"):
        assert events[event]["by"]["kind"] == "command", events
        assert events[event]["by"]["who"] == "alice" and events[event]["by"]["via"] == "cdp"
    _only(lines, "alice")
    clean(c)


# -- 5. MCP ----------------------------------------------------------------------------


async def test_mcp_sdk_client_with_a_bearer_token(c: Computer) -> None:
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    before = _mark(c)
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {c.token('alice')}"}, timeout=deadline(120)
    )
    transport = streamable_http_client(c.app + "/mcp", http_client=http)
    async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"browser_navigate", "browser_snapshot", "browser_type"} <= tools.keys()
        assert {"browser_click", "browser_tabs"} <= tools.keys()
        assert "slowly" in tools["browser_type"].input_schema["properties"]
        type_ref = ref_argument(tools["browser_type"])
        click_ref = ref_argument(tools["browser_click"])

        navigated = await client.call_tool("browser_navigate", {"url": SITE + "/"})
        assert not navigated.is_error, text(navigated)
        snapshot = await client.call_tool("browser_snapshot", {})
        assert not snapshot.is_error, text(snapshot)
        snap = text(snapshot)
        typed = await client.call_tool(
            "browser_type",
            {
                "element": "password field",
                type_ref: ref(snap, 'textbox "password"'),
                "text": PASSWORD,
                "slowly": True,
            },
        )
        assert not typed.is_error, text(typed)
        clicked = await client.call_tool(
            "browser_click", {"element": "Go button", click_ref: ref(snap, 'button "Go"')}
        )
        assert not clicked.is_error, text(clicked)
        # The click went through, and the password reached its field whole.
        read = (
            "() => document.getElementById('out').textContent + '|'"
            " + document.getElementById('password').value.length"
        )
        seen = await client.call_tool("browser_evaluate", {"function": read})
        assert f'"clicked:|{len(PASSWORD)}"' in text(seen), text(seen)
        listed = await client.call_tool("browser_tabs", {"action": "list"})
        assert not listed.is_error, text(listed)
        assert SITE in text(listed), text(listed)

    called = ["browser_navigate", "browser_snapshot", "browser_type", "browser_click"]
    called += ["browser_evaluate", "browser_tabs"]

    def all_calls(lines: list[dict[str, Any]]) -> bool:
        return [a.get("tool") for a in _actions(lines) if a.get("via") == "mcp"] == called

    lines = _logged(c, before, "one via-mcp entry per tool call", all_calls)
    calls = [a for a in _actions(lines) if a.get("via") == "mcp"]
    assert all(a["who"] == "alice" and a["call"] and a["ok"] is True for a in calls), calls
    assert all("role" not in a or a["role"] is None for a in calls), calls
    by_tool = {a["tool"]: a for a in calls}
    assert by_tool["browser_snapshot"]["acts"] == "reading"
    assert by_tool["browser_type"]["args"]["text"] == {
        "withheld": "password",
        "length": len(PASSWORD),
    }
    assert by_tool["browser_type"]["args"]["slowly"] is True
    # Playwright MCP's own CDP commands for the calls are alice's, credited to them.
    seqs = {a["seq"] for a in calls}
    within = [a for a in _actions(lines) if a.get("within") in seqs]
    assert within and all(a["who"] == "alice" for a in within), within[:5]
    keys = [a for a in within if a.get("method") == "Input.dispatchKeyEvent"]
    assert keys and all(a["within"] == by_tool["browser_type"]["seq"] for a in keys)
    _only(lines, "alice")
    clean(c, PASSWORD)


def _uid(snapshot: str, label: str) -> str:
    """chrome-devtools-mcp's element id (``uid=1_5``) on the line naming ``label``."""
    for line in snapshot.splitlines():
        if label in line and "uid=" in line:
            return line.split("uid=", 1)[1].split()[0]
    raise AssertionError(f"no uid for {label!r} in the snapshot:\n{snapshot}")


async def test_chrome_devtools_mcp_traces_emulates_and_snapshots_the_heap(
    c: Computer, node: str, tmp_path: Any
) -> None:
    """chrome-devtools-mcp (pinned in tests/clients) through the relay with
    alice's token: the tools the first allowlist broke (traces, emulation,
    resize, a heap snapshot) and its locators (DOM.enable)."""
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

    before = _mark(c)
    version = requests.get(c.relay + "/json/version", timeout=10).json()
    server = StdioServerParameters(
        command=node,
        args=[
            str(CHROME_DEVTOOLS_MCP),
            "--wsEndpoint",
            version["webSocketDebuggerUrl"],
            "--wsHeaders",
            json.dumps({"Authorization": f"Bearer {c.token('alice')}"}),
            "--no-usage-statistics",
            "--no-performance-crux",
            "--no-page-id-routing",
        ],
        env=get_default_environment(),
        cwd=tmp_path,
    )

    async with Client(stdio_client(server), read_timeout_seconds=deadline(120)) as client:

        async def call(tool: str, args: dict[str, Any]) -> str:
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, text(result))
            return text(result)

        await call("new_page", {"url": SITE + "/"})
        snap = await call("take_snapshot", {})
        await call("fill", {"uid": _uid(snap, '"search"'), "value": "devtools words"})
        await call("click", {"uid": _uid(snap, 'button "Go"')})
        out = await call(
            "evaluate_script", {"function": "() => document.getElementById('out').textContent"}
        )
        assert "clicked:devtools words" in out, out
        await call("resize_page", {"width": 800, "height": 600})
        size = await call("evaluate_script", {"function": "() => window.innerWidth"})
        assert "800" in size, size
        await call("emulate", {"networkConditions": "Fast 4G", "cpuThrottlingRate": 2})
        await call("emulate", {"cpuThrottlingRate": 1})
        await call("performance_start_trace", {"reload": False, "autoStop": False})
        await call("evaluate_script", {"function": "() => { for (let i = 0; i < 1e6; i++); }"})
        traced = await call("performance_stop_trace", {})
        # A usable trace of its own page, kept to its scope by the relay
        # (Puppeteer's page.tracing: a stream the relay serves).
        assert "trace" in traced.lower() and SITE in traced, traced[:2000]
        # A page load traced whole: its insights read the page's own events.
        loaded = await call("performance_start_trace", {"reload": True, "autoStop": True})
        assert "LCP" in loaded and SITE in loaded, loaded[:3000]
        heap = tmp_path / "page.heapsnapshot"
        await call("take_heapsnapshot", {"filePath": str(heap)})
        assert heap.exists() and heap.stat().st_size > 10_000, heap
        assert '"snapshot"' in heap.read_text()[:200]
        video = tmp_path / "page.mp4"
        await call("screencast_start", {"filePath": str(video)})
        await call("navigate_page", {"url": SITE + "/next"})
        await call("screencast_stop", {})
        assert video.exists() and video.stat().st_size > 1000, video
        audited = await call("lighthouse_audit", {"mode": "snapshot"})
        assert "accessibility" in audited.lower(), audited[:2000]

    lines = _logged(
        c,
        before,
        "chrome-devtools-mcp's commands",
        lambda got: any(a.get("method") == "Tracing.start" for a in _actions(got)),
    )
    actions = _actions(lines)
    assert not [a for a in actions if a.get("guard")], [a for a in actions if a.get("guard")]
    methods = {a.get("method") for a in actions}
    assert {"Tracing.start", "HeapProfiler.takeHeapSnapshot", "Emulation.setCPUThrottlingRate"} <= (
        methods
    ), methods
    _only(lines, "alice")
    clean(c)


# -- 6. Pixel ops ----------------------------------------------------------------------


def test_pixel_ops_with_an_agents_token(c: Computer) -> None:
    before = _mark(c)
    tab = c.op("navigate", {"url": SITE + "/pixels"}, user="alice")["tab"]
    wait_for(
        lambda: _page_value(c, tab, "document.readyState") == "complete",
        "the pixels page to load",
        timeout_s=20,
    )
    c.op("input/click", {"x": 200, "y": 130}, user="alice")  # the button: focuses #q
    c.op("input/type", {"text": "hello"}, user="alice")
    c.op("input/key", {"keys": "Enter"}, user="alice")
    wait_for(
        lambda: _page_value(c, tab, "document.getElementById('out').textContent") == "sent:hello",
        "the form sent by the pixel ops",
        timeout_s=10,
    )
    shot = c.op("screenshot", {"format": "png"}, user="alice")
    assert shot[:4] == b"\x89PNG"
    # A role an agent names is kept beside its name, never instead of it.
    c.op("input/click", {"x": 200, "y": 215}, user="alice", headers={"AgentEnv-Role": "bob"})
    # The control token acting for a role: the role is the name.
    c.op("input/click", {"x": 200, "y": 130}, headers={"AgentEnv-Role": "carol"})

    want = [
        ("navigate", "alice", None),
        ("input/click", "alice", None),
        ("input/type", "alice", None),
        ("input/key", "alice", None),
        ("screenshot", "alice", None),
        ("input/click", "alice", "bob"),
        ("input/click", "carol", None),
    ]

    def ops(lines: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
        return [
            (a.get("op"), a.get("who"), a.get("role"))
            for a in _actions(lines)
            if a.get("via") == "api"
        ]

    lines = _logged(c, before, "the pixel ops", lambda lines: ops(lines) == want)
    entries = [a for a in _actions(lines) if a.get("via") == "api"]
    assert entries[0]["args"]["url"] == SITE + "/pixels" and entries[0]["tab"] == tab
    assert entries[2]["args"]["text"] == "hello"  # the focus check cleared it
    assert entries[3]["args"]["keys"] == "Enter"
    assert entries[4]["acts"] == "reading"
    assert all(a["ok"] is True for a in entries), entries
    assert not [a for a in _actions(lines) if a.get("via") == "agentenv"]
    clean(c)


def test_a_background_open_with_no_tab_open_opens_one(c: Computer) -> None:
    """``tabs/open {background: true}`` keeps the active tab in front; with no
    tab open there is none to keep, and the tab opens (it answered 409 "no tab
    is open: open one with tabs/open")."""
    for tab in c.op("tabs/list"):
        c.op("tabs/close", {"id": tab["id"]})
    assert c.op("tabs/list") == []
    opened = c.op("tabs/open", {"url": SITE + "/next", "background": True})["id"]
    listed = wait_for(
        lambda: (lambda tabs: tabs if tabs and tabs[0]["url"] == SITE + "/next" else None)(
            c.op("tabs/list")
        ),
        "the tab at its URL",
        timeout_s=20,
    )
    assert [(t["id"], t["active"]) for t in listed] == [(opened, True)], listed
    # Behind it, the next background tab stays behind.
    behind = c.op("tabs/open", {"url": SITE + "/popup", "background": True})["id"]
    assert [(t["id"], t["active"]) for t in c.op("tabs/list")] == [(opened, True), (behind, False)]
    assert _page_value(c, behind, "document.visibilityState") == "hidden"
    c.op("tabs/close", {"id": behind})
    clean(c)


def test_a_tool_call_header_too_long_for_its_arguments_carries_tool_and_call(
    c: Computer,
) -> None:
    """``AgentEnv-Tool-Call`` (docs/spec.md section 4, "Ops"): arguments that
    encode to :data:`MAX_ARGS` characters ride in the header and are logged;
    past it the header carries tool and call alone, which the app takes (a
    header with them would pass its 8 KiB field limit) and logs without args."""
    from agentenv.app.toolcall import MAX_ARGS, ToolCall, encode

    def size(args: dict[str, Any]) -> int:
        return len(base64.urlsafe_b64encode(json.dumps(args, separators=(",", ":")).encode()))

    # The most arguments that fit, at MAX_ARGS characters or a few under (short
    # values: the log cuts one over 2,000 characters).
    fits: dict[str, Any] = {"action": "mouse_move", "notes": []}
    while size({**fits, "notes": [*fits["notes"], "note-0000"]}) - 2 <= MAX_ARGS:
        fits["notes"].append(f"note-{len(fits['notes']):04}")
    too_long = {"action": "mouse_move", "notes": ["note"] * 1200}
    carried = encode(ToolCall("computer", "call-fits", fits))
    dropped = encode(ToolCall("computer", "call-long", too_long))
    assert "; args=" in carried and len(carried.split("args=")[1]) > MAX_ARGS - 20, carried[:80]
    before = _mark(c)
    c.op("navigate", {"url": SITE + "/pixels"}, user="alice")
    for header in (carried, dropped):
        c.op(
            "input/move",
            {"x": 20, "y": 30},
            user="alice",
            headers={"AgentEnv-Tool-Call": header},
        )
    assert dropped == "tool=computer; call=call-long"

    def calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [a for a in _actions(lines) if a.get("via") == "mcp" and a.get("who") == "alice"]

    lines = _logged(c, before, "the two tool calls", lambda lines: len(calls(lines)) == 2)
    first, second = calls(lines)
    assert (first["tool"], first["call"], first["op"]) == ("computer", "call-fits", "input/move")
    assert first["args"] == fits and first["ok"] is True
    assert (second["tool"], second["call"], second["op"]) == ("computer", "call-long", "input/move")
    assert second.get("args") is None and second["ok"] is True, second
    clean(c)


# -- What an agent's token cannot do ---------------------------------------------------


@pytest.mark.parametrize(
    ("op", "body"),
    [
        ("tabs/open", {"url": SITE + "/next"}),
        ("cookies/get", {}),
        ("log", {"after": 0}),
        ("data/get", {}),
    ],
)
def test_an_agents_token_cannot_call_control_ops(
    c: Computer, op: str, body: dict[str, Any]
) -> None:
    tabs = [t["id"] for t in c.op("tabs/list")]
    for headers in ({"Authorization": f"Bearer {c.token('alice')}"}, {}):
        answer = requests.post(
            f"{c.app}/v1/browser/{op}", json=body, headers=headers, timeout=deadline(30)
        )
        assert answer.status_code in (401, 403), (op, headers, answer.status_code, answer.text)
        assert "error" in answer.json(), answer.text
        assert c.token("alice") not in answer.text
    assert [t["id"] for t in c.op("tabs/list")] == tabs  # tabs/open opened nothing
    clean(c)


async def test_an_agent_cannot_report_actions_over_cdp(c: Computer) -> None:
    before = _mark(c)
    headers = {"Authorization": f"Bearer {c.token('alice')}"}
    begin = {"via": "api", "who": "mallory", "op": "navigate"}
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(_browser_ws(c), headers=headers, max_msg_size=0) as ws,
    ):
        alice = Agent(ws)
        refused = await alice.call("AgentEnv.beginAction", begin)
        assert "result" not in refused, refused
        assert "control token" in refused["error"]["message"], refused
        whoami = await alice.call("AgentEnv.whoami")
        assert "result" not in whoami and "error" in whoami, whoami
        # The connection stays open and works.
        version = await alice.call("Browser.getVersion")
        assert "product" in version["result"], version
    guarded(c, before, "AgentEnv.beginAction", "not-allowed")
    lines, _ = c.log(before)
    assert not [a for a in _actions(lines) if a.get("who") == "mallory"], lines
    _only(lines, "alice")
    clean(c)
