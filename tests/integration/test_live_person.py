"""A person steps in through the live view (issue 44, first slice), on the image.

carol is a person (``role=human``) in alice's scope. A real Chromium
(Playwright) opens ``/live`` with carol's token and does what a person
does: clicks a sign-in form's fields in the picture, types a name, presses
Tab, types a password, clicks the button, and switches tabs with the view's
tab bar. The page signs in, and the log holds each input as ``via: human``,
``who: carol``, with the name typed in plain words and the password nowhere
in the log folder's bytes. alice's token (an agent's) gets a read-only view
whose input is refused; carol's token opens no other door and no other scope.

An agent asks for a person (``request_human``): the wait is bounded, a second
request is refused, ``/metrics`` counts the waiting one, and carol hands back
with ``done`` in the view, which answers the agent's call; both are entries.
A hostile page's title and URL show in the view as text, never as markup.
While one person drives, a second person of the scope only watches.
A scope opened on demand with a person (``scopes/open {person}``) gives
them a token of their own, for that scope's live view alone, revoked with
the scope.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests

from agentenv.harness.hardening import writable_by_the_computer
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.container import CONTROL, Computer, computer
from tests.support.timing import deadline, wait_for

PORT = 8120
USERS = {
    "alice": "alice-token-5f1c",
    "bob": "bob-token-9a2e",
    "carol": "carol-token-3e8d",
    "dora": "dora-token-61aa",
}
NAME = "carol-at-the-desk"
PASSWORD = "Pz-7q!human-typed-4411"
SECRET_B64 = base64.b64encode(PASSWORD.encode()).decode()
# Fixed places, so the person's clicks land by the picture's pixels alone.
FORM = f"""<!doctype html><title>sign in</title>
<style>body {{ margin: 0 }} input, button {{ position: absolute; left: 40px; width: 400px;
 height: 40px; font-size: 20px }}</style>
<input id=user style="top: 40px" autocomplete=off>
<input id=password type=password style="top: 120px" autocomplete=off>
<button id=go style="top: 200px">sign in</button>
<script>
document.getElementById("go").onclick = () => {{
  const ok = btoa(document.getElementById("password").value) === "{SECRET_B64}";
  document.title = ok ? "welcome " + document.getElementById("user").value : "wrong password";
}};
</script>"""
OTHER = "<!doctype html><title>second tab</title><p>another page"
#: What the challenge's canvas draws: a person reads it; an agent's DOM
#: reading finds no text, nor does the page's source (written as char codes).
#: The person's driver is told it "out of band".
CODE = "7305"
CODE_CHARS = ", ".join(str(ord(c)) for c in CODE)
CHALLENGE = f"""<!doctype html><title>challenge</title>
<style>body {{ margin: 0 }} canvas, input, button {{ position: absolute; left: 40px }}
input, button {{ width: 400px; height: 40px; font-size: 20px }}</style>
<canvas id=card width=400 height=60 style="top: 20px"></canvas>
<input id=code style="top: 120px" autocomplete=off>
<input id=password type=password style="top: 200px" autocomplete=off>
<button id=go style="top: 280px">go on</button>
<script>
const secret = String.fromCharCode({CODE_CHARS});
const pen = document.getElementById("card").getContext("2d");
pen.font = "40px sans-serif"; pen.fillText(secret, 10, 45);
document.getElementById("go").onclick = () => {{
  const code = document.getElementById("code").value === secret;
  const word = btoa(document.getElementById("password").value) === "{SECRET_B64}";
  document.title = code && word ? "passed" : "still stuck";
}};
</script>"""
#: A page that is one link to OTHER: a person's click there sends a request.
LINK = """<!doctype html><title>a link</title><style>body { margin: 0 }</style>
<a href="other.html" style="display: block; width: 100vw; height: 100vh">on</a>"""


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the computer's recordings upload (a ``file://`` grant): a host
    folder mounted at its own path."""
    folder = tmp_path_factory.mktemp("live-person")
    folder.chmod(0o755)
    writable_by_the_computer(folder / "recordings")
    return folder / "recordings"


@pytest.fixture(scope="module")
def pc(image: str, recordings: Path) -> Iterator[Computer]:
    with computer(
        image,
        users=USERS,
        scopes={"alice": "shop", "carol": "shop", "dora": "shop"},
        humans=frozenset({"carol", "dora"}),
        env={"AGENTENV_UPLOAD_ROOTS": str(recordings), "AGENTENV_MAX_SCOPES": "2"},
        shared=recordings,
    ) as running:
        pages = {
            "signin.html": FORM,
            "other.html": OTHER,
            "link.html": LINK,
            "challenge.html": CHALLENGE,
        }
        running.serve_folder(PORT, "/tmp/form", pages)
        yield running


def _tabs(pc: Computer) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = pc.op("tabs/list", {"scope": "shop"})
    return found


def _live_input(pc: Computer, user: str, body: dict[str, Any], scope: str | None = None) -> int:
    query = f"?scope={scope}" if scope else ""
    answer = requests.post(
        f"{pc.app}/live/input{query}", json=body, headers=pc.headers(user), timeout=deadline(30)
    )
    assert pc.token(user) not in answer.text
    return answer.status_code


def test_a_persons_token_opens_the_live_view_only(pc: Computer) -> None:
    for path in ("/v1/browser/input/click", "/v1/browser/tabs/list"):
        answer = requests.post(
            pc.app + path, json={"x": 1, "y": 1}, headers=pc.headers("carol"), timeout=30
        )
        assert answer.status_code == 403, (path, answer.status_code)
        assert "live view only" in answer.json()["error"]["message"]
    relay = requests.get(pc.relay + "/json/list", headers=pc.headers("carol"), timeout=30)
    assert relay.status_code == 403
    assert (
        requests.post(pc.app + "/mcp", json={}, headers=pc.headers("carol"), timeout=30).status_code
        == 403
    )
    # Another scope's view: refused, whether it exists or not.
    assert _live_input(pc, "carol", {"kind": "move", "x": 1, "y": 1}, scope="bob") == 403
    # An agent's token and the control token only watch.
    assert _live_input(pc, "alice", {"kind": "move", "x": 1, "y": 1}) == 403
    answer = requests.post(
        f"{pc.app}/live/input?scope=shop",
        json={"kind": "move", "x": 1, "y": 1},
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=30,
    )
    assert answer.status_code == 403


def test_a_person_signs_in_through_the_view_on_the_record(pc: Computer) -> None:
    from playwright.sync_api import sync_playwright

    site = f"http://127.0.0.1:{PORT}"
    pc.op("navigate", {"url": site + "/signin.html"}, user="alice")
    wait_for(lambda: _tabs(pc)[0]["title"] == "sign in", "the form to load", timeout_s=30)
    pc.op("tabs/open", {"scope": "shop", "url": site + "/other.html", "background": True})
    _, before = pc.log()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"))
        # A view smaller than the frame: the clicks are scaled back to its pixels.
        context = browser.new_context(viewport={"width": 900, "height": 700})
        page = context.new_page()
        page.goto(f"{pc.app}/live?token={pc.token('carol')}")
        screen = page.locator("#screen")
        wait_for(lambda: int(screen.get_attribute("data-frames") or 0) >= 2, "frames", 30)

        hands = _Hands(page)
        click_at, settled = hands.click_at, hands.settled

        # A frame that fails to decode does not replace the last picture: a
        # click still lands on its pixels.
        page.route(
            "**/live/frame*",
            lambda route: route.fulfill(status=200, content_type="image/jpeg", body=b"no picture"),
        )
        wait_for(lambda: screen.get_attribute("data-undecoded") is not None, "a bad frame", 30)
        assert page.evaluate("[screen.naturalWidth, screen.naturalHeight]") == hands.size
        click_at(240, 60)  # the name field
        page.unroute("**/live/frame*")
        page.keyboard.type(NAME)
        page.keyboard.press("Tab")  # to the password field, as a person would
        page.keyboard.type(PASSWORD)
        wait_for(settled, "the person's typing to be sent", timeout_s=30)
        click_at(240, 220)  # sign in
        wait_for(settled, "the click to be sent", timeout_s=30)
        wait_for(
            lambda: _tabs(pc)[0]["title"] == f"welcome {NAME}", "the page to sign in", timeout_s=30
        )
        assert page.evaluate("Number(screen.dataset.refused || 0)") == 0

        # A paste is typed as text (the paste event a browser fires on Ctrl+V,
        # with its clipboard's text: the view's address is no secure context,
        # where a test could fill the clipboard itself), into the name field.
        click_at(240, 60)
        page.evaluate(
            """() => { const data = new DataTransfer(); data.setData("text/plain", "pasted words");
            keys.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true,
            cancelable: true})); }"""
        )
        # Text an input method composes (as Chromium's IME sends it) once composed.
        ime = context.new_cdp_session(page)
        composing = {"text": "にほ", "selectionStart": 2, "selectionEnd": 2}
        ime.send("Input.imeSetComposition", composing)
        ime.send("Input.insertText", {"text": "日本"})
        wait_for(settled, "the paste and the composed text to be sent", timeout_s=30)

        # The tab bar: the second tab, by its button.
        wait_for(lambda: page.locator("#tabs button").count() == 2, "the tab bar", timeout_s=30)
        page.locator("#tabs button", has_text="second tab").click()
        wait_for(settled, "the tab switch to be sent", timeout_s=30)
        wait_for(
            lambda: _tabs(pc)[0]["title"] == "second tab", "the view to switch tabs", timeout_s=30
        )

        # alice's view is read-only: a click there sends nothing.
        page.goto(f"{pc.app}/live?token={pc.token('alice')}")
        wait_for(lambda: int(screen.get_attribute("data-frames") or 0) >= 1, "alice's frames", 30)
        screen.click()
        page.keyboard.type("nothing")
        assert page.evaluate("queue.length") == 0 and screen.get_attribute("data-sent") is None
        assert page.locator("#tabs button").first.is_disabled()
        browser.close()

    lines, _ = pc.log(before)
    acted = [x["action"] for x in lines if "action" in x and x["action"].get("within") is None]
    people = [a for a in acted if a.get("via") == "human"]
    assert people and all(a["who"] == "carol" and a.get("scope") == "shop" for a in people), people
    ops = [a["op"] for a in people]
    for op in ("input/down", "input/up", "input/type", "input/key", "tabs/activate"):
        assert op in ops, (op, ops)
    assert not [a for a in acted if a.get("who") == "alice" and a.get("op", "").startswith("input")]
    typed = [a["args"]["text"] for a in people if a["op"] == "input/type"]
    assert NAME in typed and "pasted words" in typed, typed  # a name is no secret
    assert "日本" in typed and not [t for t in typed if "にほ" in str(t)], typed
    assert any(isinstance(t, dict) and t.get("withheld") for t in typed), typed
    press = next(a for a in people if a["op"] == "input/down")
    # The picture's pixel, scaled back from the smaller view (within a pixel's rounding).
    assert abs(press["args"]["x"] - 240) <= 2 and abs(press["args"]["y"] - 60) <= 2, press
    # The password the person typed is nowhere in the log folder.
    written = pc.all_log_bytes()
    assert b'"via":"human"' in written
    assert PASSWORD.encode() not in written


class _Hands:
    """A person's hands on the live view's picture (a Playwright page that
    shows frames already): clicks at the frame's pixels, and whether all
    they did has been sent."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.screen = page.locator("#screen")
        # The frame's pixels, read while it shows (the tab's size does not change).
        self.size: list[int] = page.evaluate("[screen.naturalWidth, screen.naturalHeight]")

    def click_at(self, x: float, y: float) -> None:
        box = self.screen.bounding_box()
        assert box is not None
        width, height = self.size
        self.page.mouse.click(
            box["x"] + x * box["width"] / width, box["y"] + y * box["height"] / height
        )

    def settled(self) -> bool:
        return bool(self.page.evaluate("queue.length === 0 && !sending && text === ''"))


def _metric(pc: Computer, name: str) -> float:
    text = requests.get(pc.app + "/metrics", headers=pc.headers(), timeout=deadline(30)).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_an_agent_asks_for_a_person_who_hands_back(pc: Computer, recordings: Path) -> None:
    """On the record: the recording's manifest lists the handoff (who asked,
    why, the person's entries, the word, a frame of their own), its
    network.har marks the request the person's click sent as theirs, and
    agentenv verify reads it again."""
    from playwright.sync_api import sync_playwright

    pc.op("navigate", {"url": f"http://127.0.0.1:{PORT}/link.html"}, user="alice")
    linked = next(t["id"] for t in _tabs(pc) if t["url"].endswith("/link.html"))
    _, before = pc.log()
    started = pc.recording(
        "start",
        {
            "request_id": "handoff-1",
            "scope": "shop",
            "upload": {"url": f"file://{recordings}"},
            "har": {},
        },
    )
    # Bounded: no person answers in time, and the agent is told so.
    timed_out = requests.post(
        f"{pc.app}/v1/browser/request_human",
        json={"reason": "nobody is there", "timeout_s": 1},
        headers=pc.headers("alice"),
        timeout=deadline(30),
    )
    assert timed_out.status_code == 504
    assert "no person answered within 1 s" in timed_out.json()["error"]["message"]
    # A word with no agent waiting: refused.
    assert _live_input(pc, "carol", {"kind": "answer", "word": "done"}) == 409

    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(
            requests.post,
            f"{pc.app}/v1/browser/request_human",
            json={"reason": "type the code on the card", "timeout_s": 120},
            headers=pc.headers("alice"),
            timeout=deadline(150),
        )
        wait_for(
            lambda: _metric(pc, "agentenv_human_requests_waiting") == 1,
            "/metrics to show the request",
            timeout_s=30,
        )
        second = requests.post(
            f"{pc.app}/v1/browser/request_human",
            json={"reason": "me too"},
            headers=pc.headers("alice"),
            timeout=deadline(30),
        )
        assert second.status_code == 409
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page()
            page.goto(f"{pc.app}/live?token={pc.token('carol')}")
            banner = page.locator("#reason")
            wait_for(lambda: "type the code on the card" in banner.inner_text(), "the banner", 30)
            assert "alice asks for a person" in banner.inner_text()
            # The person acts before handing back: an entry of the handoff's.
            assert _live_input(pc, "carol", {"kind": "key", "keys": "Escape"}) == 200
            for kind in ("down", "up"):  # a click on the link
                assert _live_input(pc, "carol", {"kind": kind, "x": 100, "y": 100}) == 200
            wait_for(
                lambda: any(t["id"] == linked and t["title"] == "second tab" for t in _tabs(pc)),
                "the link to be followed",
                30,
            )
            page.locator("#done").click()
            answer = asked.result(timeout=deadline(60))
            browser.close()
    assert answer.status_code == 200, answer.text
    said = answer.json()
    assert {k: said[k] for k in ("word", "who", "note")} == {
        "word": "done",
        "who": "carol",
        "note": None,
    }
    assert _metric(pc, "agentenv_human_requests_waiting") == 0

    lines, _ = pc.log(before)
    acted = [x["action"] for x in lines if "action" in x]
    requests_ = [a for a in acted if a.get("op") == "request_human"]
    assert [(a["via"], a["who"], a["args"]["reason"]) for a in requests_] == [
        ("api", "alice", "nobody is there"),
        ("api", "alice", "type the code on the card"),
    ]
    words = [a for a in acted if a.get("op") == "human/answer"]
    assert [(a["via"], a["who"], a["args"]) for a in words] == [
        ("human", "carol", {"word": "done"})
    ], words

    # The recording lists each handoff, as verify reads them again from its log.
    pc.recording("end", {"recording_id": started["recording_id"], "reason": "completed"})
    folder = recordings / started["recording_id"]
    manifest = json.loads((folder / "manifest.json").read_text())
    seq_of = {
        (x["action"].get("op"), x["action"].get("args", {}).get("reason")): x["seq"]
        for x in lines
        if "action" in x
    }
    timed_out, answered = manifest["handoffs"]
    assert (timed_out["reason"], timed_out["answer"], timed_out["entries"]) == (
        "nobody is there",
        None,
        [],
    )
    assert timed_out["request"] == seq_of[("request_human", "nobody is there")]
    people = ("input/key", "input/down", "input/up")
    pressed = [x["seq"] for x in lines if x.get("action", {}).get("op") in people]
    assert answered["request"] == seq_of[("request_human", "type the code on the card")]
    assert (answered["agent"], answered["word"], answered["people"]) == ("alice", "done", ["carol"])
    assert answered["entries"] == pressed and answered["answer"] == seq_of[("human/answer", None)]
    assert said["entries"] == pressed  # the agent is told which entries the person made
    # The person's burst has a frame of its own, and no agent's frame claims it.
    kinds = {seq: f["kind"] for f in manifest["frames"] for seq in f["after"]}
    assert {kinds.get(seq) for seq in pressed} == {"person"}, manifest["frames"]
    assert kinds.get(answered["request"]) == "action"
    # The request the person's click sent is theirs in network.har.
    har = json.loads((folder / "network.har").read_text())["log"]["entries"]
    followed = [e for e in har if e["request"]["url"].endswith("/other.html")]
    assert followed and all(e.get("_by") == "human" for e in followed), followed
    assert {e["_who"] for e in followed} == {"carol"}
    key = requests.get(pc.app + "/card", timeout=deadline(30)).json()["attestation"]["key"]
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "verify", str(folder), "--key", key],
        capture_output=True,
        text=True,
        timeout=deadline(120),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_mcp_tool_waits_for_the_persons_word(pc: Computer) -> None:
    import asyncio

    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.support.mcp import text

    _, before = pc.log()

    def person() -> int:
        """carol, once the view shows the request: cannot, with a note."""

        def shown() -> bool:
            answer = requests.get(
                pc.app + "/live/tabs", headers=pc.headers("carol"), timeout=deadline(30)
            )
            asked = answer.json()["request"]
            return asked is not None and asked["reason"] == "solve the puzzle"

        wait_for(shown, "the request in the view", timeout_s=60)
        return _live_input(pc, "carol", {"kind": "answer", "word": "cannot", "note": "no puzzle"})

    async def run() -> str:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {pc.token('alice')}"}, timeout=deadline(120)
        )
        transport = streamable_http_client(pc.app + "/mcp", http_client=http)
        async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "request_human" in tools
            handing = asyncio.create_task(asyncio.to_thread(person))
            said = await client.call_tool(
                "request_human", {"reason": "solve the puzzle", "timeout_s": 90}
            )
            assert await handing == 200
            assert not said.is_error, text(said)
            return text(said)

    said = asyncio.run(asyncio.wait_for(run(), deadline(180)))
    assert said == "carol (a person) answered cannot: no puzzle"
    actions = [line["action"] for line in pc.settled_log(before) if "action" in line]
    asked = [a for a in actions if a.get("tool") == "request_human"]
    assert [(a["via"], a["who"], a["args"]["reason"]) for a in asked] == [
        ("mcp", "alice", "solve the puzzle")
    ]
    word = [a for a in actions if a.get("op") == "human/answer"]
    assert [(a["via"], a["who"], a["args"]) for a in word] == [
        ("human", "carol", {"word": "cannot", "note": "no puzzle"})
    ]


HOSTILE = (
    '<!doctype html><title>&lt;img src=x onerror="window.pwned=1"&gt;</title>'
    "<script>history.replaceState(null, '', '/hostile.html?<script>window.pwned=2<' + '/script>')"
    "</script><p>hostile"
)


def test_a_hostile_pages_title_and_url_are_text_in_the_view(pc: Computer) -> None:
    from playwright.sync_api import sync_playwright

    site = f"http://127.0.0.1:{PORT}"
    pc.exec(
        "sh",
        "-c",
        f"echo {base64.b64encode(HOSTILE.encode()).decode()} | base64 -d > /tmp/form/hostile.html",
    )
    pc.op("navigate", {"url": site + "/hostile.html"}, user="alice")
    wait_for(lambda: "onerror" in _tabs(pc)[0]["title"], "the hostile page", timeout_s=30)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page()
        page.goto(f"{pc.app}/live?token={pc.token('carol')}")
        shown = page.locator("#tabs button.active")
        wait_for(lambda: shown.count() == 1 and "onerror" in shown.inner_text(), "the title", 30)
        assert shown.inner_text() == '<img src=x onerror="window.pwned=1">'
        assert "window.pwned=2" in (shown.get_attribute("title") or "")  # its URL, as text
        assert page.evaluate("window.pwned") is None
        assert page.locator("#tabs img, #tabs script").count() == 0
        browser.close()


def test_one_person_drives_at_a_time(pc: Computer) -> None:
    assert _live_input(pc, "carol", {"kind": "move", "x": 5, "y": 5}) == 200
    answer = requests.post(
        f"{pc.app}/live/input",
        json={"kind": "move", "x": 6, "y": 6},
        headers=pc.headers("dora"),
        timeout=deadline(30),
    )
    assert answer.status_code == 409
    assert "carol has control of this view" in answer.json()["error"]["message"]
    assert _live_input(pc, "carol", {"kind": "move", "x": 7, "y": 7}) == 200


def test_an_agents_acting_commands_wait_while_a_person_drives(pc: Computer) -> None:
    """alice's acting CDP command and op wait while carol holds the scope,
    her reads go on, and both run once carol hands back."""
    _, before = pc.log()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        alice = pc.headers("alice")
        url = browser_ws_url(pc.relay, f"token={pc.token('alice')}")
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(url) as acting_ws,
            http.ws_connect(url) as reading_ws,
        ):
            actor, reader = RawCdp(acting_ws), RawCdp(reading_ws)
            targets = (await reader.call("Target.getTargets"))["result"]["targetInfos"]
            tab = next(t["targetId"] for t in targets if t["type"] == "page")
            attach = {"targetId": tab, "flatten": True}
            session = (await actor.call("Target.attachToTarget", attach))["result"]["sessionId"]
            asked = loop.run_in_executor(
                None,
                lambda: requests.post(
                    f"{pc.app}/v1/browser/request_human",
                    json={"reason": "hold on", "timeout_s": 90},
                    headers=alice,
                    timeout=deadline(120),
                ),
            )
            await asyncio.to_thread(
                wait_for, lambda: _metric(pc, "agentenv_human_requests_waiting") == 1, "asked", 30
            )
            # carol's input: she holds the scope.
            assert (
                await asyncio.to_thread(_live_input, pc, "carol", {"kind": "key", "keys": "Escape"})
                == 200
            )
            evaluate = {"expression": "1 + 1", "returnByValue": True}
            held = asyncio.create_task(actor.call("Runtime.evaluate", evaluate, sessionId=session))
            op = loop.run_in_executor(
                None,
                lambda: requests.post(
                    f"{pc.app}/v1/browser/input/key",
                    json={"keys": "Escape"},
                    headers=alice,
                    timeout=deadline(120),
                ),
            )
            # The relay's HTTP commands that act wait too.
            opened = loop.run_in_executor(
                None,
                lambda: requests.put(
                    f"{pc.relay}/json/new?about:blank", headers=alice, timeout=deadline(120)
                ),
            )
            # Her reads go on meanwhile, on another connection.
            assert "result" in await reader.call("Target.getTargets")
            await asyncio.sleep(1.5)
            assert not held.done() and not op.done(), "an agent acted while a person drove"
            assert not opened.done(), "/json/new opened a tab while a person drove"
            answered = {"kind": "answer", "word": "done"}
            assert await asyncio.to_thread(_live_input, pc, "carol", answered) == 200
            done = await asyncio.wait_for(held, deadline(30))
            assert done["result"]["result"]["value"] == 2, done
            assert (await asyncio.wait_for(op, deadline(30))).status_code == 200
            assert (await asyncio.wait_for(opened, deadline(30))).status_code == 200
            assert (await asyncio.wait_for(asked, deadline(30))).status_code == 200

    asyncio.run(asyncio.wait_for(run(), deadline(180)))
    # On the record in order: carol's input and word come before alice's held acts.
    lines = pc.settled_log(before)
    acted = [(x["seq"], x["action"]) for x in lines if "action" in x]
    word = next(s for s, a in acted if a.get("op") == "human/answer")
    evaluated = next(s for s, a in acted if a.get("method") == "Runtime.evaluate")
    pressed = [s for s, a in acted if a.get("op") == "input/key" and a.get("who") == "alice"]
    assert evaluated > word and pressed and pressed[0] > word, (word, evaluated, pressed)
    created = [s for s, a in acted if a.get("method") == "Target.createTarget"]
    assert created and created[0] > word, (word, created)


def test_a_scope_opened_with_a_person_is_theirs_to_step_into(pc: Computer) -> None:
    _, before = pc.log()
    opened = pc.op("scopes/open", {"person": "erin"})
    scope, person = opened["scope"], opened["person_token"]
    assert person and person != opened["token"]
    assert opened["live_url"] == f"{pc.app}/live", opened["live_url"]
    erin = {"Authorization": f"Bearer {person}"}
    page = requests.get(f"{opened['live_url']}?token={person}", timeout=deadline(30))
    assert page.status_code == 200 and "const DRIVES = true;" in page.text
    frame = requests.get(f"{pc.app}/live/frame", headers=erin, timeout=deadline(30))
    assert frame.status_code == 200 and frame.content[:2] == b"\xff\xd8"
    key = {"kind": "key", "keys": "Escape"}
    drove = requests.post(f"{pc.app}/live/input", json=key, headers=erin, timeout=deadline(30))
    assert drove.status_code == 200, drove.text
    # Her scope's view only, and no other door.
    other = requests.post(
        f"{pc.app}/live/input?scope=shop", json=key, headers=erin, timeout=deadline(30)
    )
    assert other.status_code == 403
    for refused in (
        requests.get(f"{pc.relay}/json/list", headers=erin, timeout=deadline(30)),
        requests.post(f"{pc.app}/v1/browser/tabs/list", json={}, headers=erin, timeout=30),
        requests.post(f"{pc.app}/mcp", json={}, headers=erin, timeout=deadline(30)),
    ):
        assert refused.status_code == 403, refused.url
        assert person not in refused.text
    listed = pc.op("scopes/list")["scopes"]
    assert [s["person"] for s in listed if s["scope"] == scope] == [f"erin@{scope}"]
    lines, _ = pc.log(before)
    hers = [x["action"] for x in lines if x.get("action", {}).get("via") == "human"]
    assert [(a["who"], a.get("scope"), a["op"]) for a in hers] == [
        (f"erin@{scope}", scope, "input/key")
    ], hers
    # Closing the scope revokes her token with the agent's.
    pc.op("scopes/close", {"scope": scope})
    gone = requests.post(f"{pc.app}/live/input", json=key, headers=erin, timeout=deadline(30))
    assert gone.status_code == 401 and person not in gone.text
    # Nothing the computer wrote holds either token (its entries are there).
    written = pc.all_log_bytes()
    assert f"erin@{scope}".encode() in written
    assert person.encode() not in written and opened["token"].encode() not in written


def test_an_agent_asks_for_a_person_with_a_cdp_command(pc: Computer) -> None:
    """``AgentEnv.requestHuman`` on alice's own browser connection: the live
    view shows it, carol hands back, and the command answers her word; the
    connection's other commands go on meanwhile; the entry is alice's,
    ``via: cdp``."""
    _, before = pc.log()

    async def run() -> dict[str, Any]:
        url = browser_ws_url(pc.relay, f"token={pc.token('alice')}")
        async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
            ask = {"reason": "read the code on the card", "timeout_s": 90}
            await ws.send_json({"id": 1, "method": "AgentEnv.requestHuman", "params": ask})
            await asyncio.to_thread(
                wait_for, lambda: _metric(pc, "agentenv_human_requests_waiting") == 1, "asked", 30
            )
            # The same connection's other commands are answered meanwhile.
            await ws.send_json({"id": 2, "method": "Target.getTargets"})
            first = await ws.receive_json(timeout=deadline(30))
            while "id" not in first:
                first = await ws.receive_json(timeout=deadline(30))
            assert first["id"] == 2 and "result" in first, first
            answered = {"kind": "answer", "word": "done", "note": "it said 4411"}
            assert await asyncio.to_thread(_live_input, pc, "carol", answered) == 200
            while True:
                message = await ws.receive_json(timeout=deadline(30))
                if message.get("id") == 1:
                    return dict(message)

    said = asyncio.run(asyncio.wait_for(run(), deadline(120)))
    assert said.get("result") == {
        "word": "done",
        "who": "carol",
        "note": "it said 4411",
        "entries": [],  # the person made none: only their word
    }, said
    assert _metric(pc, "agentenv_human_requests_waiting") == 0
    lines = pc.settled_log(before)
    asked = [x["action"] for x in lines if x.get("action", {}).get("op") == "request_human"]
    assert [(a["via"], a["who"], a["args"]["reason"], a["ok"]) for a in asked] == [
        ("cdp", "alice", "read the code on the card", True)
    ], asked

    # A bad ask is refused with the params' words, on the record.
    async def bad() -> dict[str, Any]:
        url = browser_ws_url(pc.relay, f"token={pc.token('alice')}")
        async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
            return await RawCdp(ws).call("AgentEnv.requestHuman", {"reason": ""})

    refused = asyncio.run(asyncio.wait_for(bad(), deadline(60)))
    assert refused["error"]["code"] == -32602 and "reason" in refused["error"]["message"]


def test_a_playwright_agent_stuck_on_a_challenge_gets_a_person(
    pc: Computer, recordings: Path
) -> None:
    """The whole handoff, as issue 44 tells it: a Playwright agent meets a
    code drawn on a canvas, which its DOM reading cannot get, and asks for a
    person with ``AgentEnv.requestHuman`` on a CDP session of its own. A
    person (a second Playwright, driving the live view as a user would)
    reads the code, types it and a password, and hands back; the agent goes
    on. On the record: the request (``via: cdp``), the person's entries
    (``via: human``, the password withheld), the answer, a frame of the
    person's, and agentenv verify passes."""
    from playwright.sync_api import sync_playwright

    site = f"http://127.0.0.1:{PORT}/challenge.html"
    started = pc.recording(
        "start",
        {"request_id": "challenge-1", "scope": "shop", "upload": {"url": f"file://{recordings}"}},
    )
    _, before = pc.log()

    def agent() -> tuple[dict[str, Any], str, str]:
        with sync_playwright() as pw:
            browser = pw.chromium.connect_over_cdp(
                pc.relay, headers=pc.headers("alice"), timeout=deadline(60) * 1000
            )
            page = browser.contexts[0].new_page()
            page.goto(site, timeout=deadline(60) * 1000)
            seen = page.locator("body").inner_text()  # what a DOM reader gets: no code
            assert CODE not in seen and CODE not in page.content()
            session = browser.new_browser_cdp_session()
            said = session.send(
                "AgentEnv.requestHuman", {"reason": "a code is drawn on a card", "timeout_s": 120}
            )
            title = page.title()  # the agent goes on
            page.locator("#go").click()
            after = page.title()
            browser.close()
            return said, title, after

    with ThreadPoolExecutor(1) as pool:
        agents = pool.submit(agent)
        wait_for(
            lambda: agents.done() or _metric(pc, "agentenv_human_requests_waiting") == 1,
            "the agent to ask",
            60,
        )
        if agents.done():
            agents.result()  # it failed before asking: say why
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.goto(f"{pc.app}/live?token={pc.token('carol')}")
            screen = page.locator("#screen")
            wait_for(lambda: "a code is drawn" in page.locator("#reason").inner_text(), "ask", 30)
            wait_for(
                lambda: any(t["title"] == "challenge" and t["active"] for t in _tabs(pc)),
                "the challenge in front",
                30,
            )
            wait_for(lambda: int(screen.get_attribute("data-frames") or 0) >= 2, "frames", 30)
            hands = _Hands(page)
            click_at, settled = hands.click_at, hands.settled

            click_at(240, 140)  # the code field
            page.keyboard.type(CODE)  # read off the card, as the person's driver was told
            click_at(240, 220)  # the password field
            page.keyboard.type(PASSWORD)
            wait_for(settled, "the person's typing to be sent", timeout_s=30)
            page.locator("#done").click()
            wait_for(settled, "the word to be sent", timeout_s=30)
            browser.close()
        said, title, after = agents.result(timeout=deadline(120))
    assert {k: said[k] for k in ("word", "who", "note")} == {
        "word": "done",
        "who": "carol",
        "note": None,
    }, said
    assert (title, after) == ("challenge", "passed")

    pc.recording("end", {"recording_id": started["recording_id"], "reason": "completed"})
    lines = pc.settled_log(before)
    acted = [(x["seq"], x["action"]) for x in lines if "action" in x]
    asked = [s for s, a in acted if a.get("op") == "request_human"]
    people = [(s, a) for s, a in acted if a.get("via") == "human" and a.get("within") is None]
    typed = [a["args"]["text"] for _, a in people if a["op"] == "input/type"]
    assert CODE in typed and any(isinstance(t, dict) and t.get("withheld") for t in typed), typed
    word = next(s for s, a in people if a["op"] == "human/answer")
    assert said["entries"] == [s for s, a in people if s < word], said
    went_on = [s for s, a in acted if a.get("who") == "alice" and a.get("acts") == "acting"]
    assert asked and asked[0] < people[0][0] and word < max(went_on), (asked, word)
    folder = recordings / started["recording_id"]
    manifest = json.loads((folder / "manifest.json").read_text())
    (handoff,) = manifest["handoffs"]
    assert (handoff["agent"], handoff["word"], handoff["people"]) == ("alice", "done", ["carol"])
    assert handoff["request"] == asked[0] and handoff["answer"] == word
    assert any(f["kind"] == "person" for f in manifest["frames"]), manifest["frames"]
    key = requests.get(pc.app + "/card", timeout=deadline(30)).json()["attestation"]["key"]
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "verify", str(folder), "--key", key],
        capture_output=True,
        text=True,
        timeout=deadline(120),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = pc.all_log_bytes() + b"".join(
        p.read_bytes() for p in folder.rglob("*") if p.is_file()
    )
    assert b'"who":"carol"' in written  # the person's entries are there
    assert PASSWORD.encode() not in written and SECRET_B64.encode() not in written
