"""browser/v1 ops on the native stack (docs/spec.md section 3)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import requests

from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.logfile import actions, all_bytes, read_log, read_until
from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import wait_for

PASSWORD = "pixel-pa55word"


def op(stack: NativeStack, name: str, body: dict[str, Any] | None = None, **headers: str) -> Any:
    return stack.op(name, body, **headers)


def refused(stack: NativeStack, name: str, body: Any, status: int) -> str:
    answer = requests.post(f"{stack.app_http}/v1/browser/{name}", json=body, timeout=60)
    assert answer.status_code == status, (name, answer.status_code, answer.text)
    return str(answer.json()["error"]["message"])


def test_cookies_and_a_background_tab_signed_in(stack: NativeStack, site: Site) -> None:
    op(stack, "data/reset")  # no other test's cookies: the counts below are this test's
    start = op(stack, "tabs/open", {"url": site.url + "/next"})["id"]
    assert op(stack, "tabs/list")[0]["id"] == start
    op(
        stack,
        "cookies/set",
        {"cookies": [{"name": "session", "value": "alice-77", "url": site.url}]},
    )
    background = op(stack, "tabs/open", {"url": site.url + "/account", "background": True})["id"]
    tabs = op(stack, "tabs/list")
    assert tabs[0]["id"] == start and tabs[0]["active"] is True
    assert [t["active"] for t in tabs].count(True) == 1

    def signed_in() -> bool:
        titles = {t["id"]: t["title"] for t in op(stack, "tabs/list")}
        return titles.get(background) == "Account"

    wait_for(signed_in, "the background tab to load")
    shot = op(stack, "screenshot", {"format": "png"})
    assert shot[:4] == b"\x89PNG"
    # The active tab's screenshot is the old page's, not the new tab's.
    assert shot == op(stack, "screenshot", {"tab": start, "format": "png"})
    assert shot != op(stack, "screenshot", {"tab": background, "format": "png"})
    # The background page loaded signed in (its own screenshot shows it, and
    # taking it did not bring it forward).
    assert op(stack, "screenshot", {"tab": background, "format": "jpeg"})[:2] == b"\xff\xd8"
    assert op(stack, "tabs/list")[0]["id"] == start
    op(stack, "tabs/activate", {"id": background})
    assert op(stack, "tabs/list")[0]["id"] == background
    cookies = op(stack, "cookies/get", {"urls": [site.url + "/account"]})["cookies"]
    assert [c["name"] for c in cookies] == ["session"]
    assert op(stack, "cookies/delete", {"domain": "127.0.0.1"}) == {"deleted": 1}
    assert op(stack, "cookies/get")["cookies"] == []
    op(stack, "tabs/close", {"id": background})
    op(stack, "tabs/close", {"id": start})


def test_local_storage_round_trips(stack: NativeStack, site: Site) -> None:
    origin = site.url
    op(stack, "local_storage/set", {"origin": origin, "items": {"theme": "dark", "n": "1"}})
    assert op(stack, "local_storage/get", {"origin": origin})["items"] == {
        "theme": "dark",
        "n": "1",
    }
    op(stack, "local_storage/clear", {"origin": origin})
    assert op(stack, "local_storage/get", {"origin": origin})["items"] == {}


def test_bad_input_is_refused_and_changes_nothing(stack: NativeStack) -> None:
    before = op(stack, "tabs/list")
    message = refused(stack, "tabs/teleport", {}, 404)
    assert "tabs/open" in message and "input/click" in message
    message = refused(
        stack, "cookies/set", {"cookies": [{"name": "s", "value": "sekrit-value-1"}]}, 400
    )
    assert "cookies.0" in message and "sekrit" not in message
    message = refused(
        stack, "cookies/set", {"cookies": [{"name": "s", "value": 5, "url": "http://a/"}]}, 400
    )
    assert "cookies.0.value" in message
    assert "absolute" in refused(stack, "tabs/open", {"url": "/relative/path"}, 400)
    assert "absolute" in refused(stack, "navigate", {"url": "example.com"}, 400)
    assert "no tab" in refused(stack, "tabs/close", {"id": "NOPE"}, 404)
    assert "boolean" in refused(stack, "tabs/open", {"url": "http://a/", "background": "yes"}, 400)
    assert "extra" in refused(stack, "tabs/list", {"unknown": 1}, 400).lower()
    assert "guard" in refused(stack, "tabs/open", {"url": "file:///etc/passwd"}, 403)
    assert "origin" in refused(stack, "local_storage/get", {"origin": "not an origin"}, 400)
    assert (
        "JSON" in requests.post(f"{stack.app_http}/v1/browser/tabs/list", data="{", timeout=10).text
    )
    after = op(stack, "tabs/list")
    assert [t["id"] for t in after] == [t["id"] for t in before]


def test_computer_use_loop_with_tool_call_headers(stack: NativeStack, site: Site) -> None:
    from agentenv.app.toolcall import ToolCall, encode

    tab = op(stack, "tabs/open", {"url": site.url + "/pixels"})["id"]
    wait_for(lambda: op(stack, "tabs/list")[0]["title"] == "Pixels", "the pixels page")
    _, start = read_log(stack.app_http)

    def call(name: str, body: dict[str, Any], n: int, args: dict[str, Any] | None = None) -> Any:
        header = encode(ToolCall("computer", f"call-{n}", args or {"action": name, **body}))
        return op(stack, name, body, **{"AgentEnv-Tool-Call": header, "AgentEnv-Role": "cua"})

    assert call("screenshot", {"format": "jpeg"}, 1)[:2] == b"\xff\xd8"
    call("input/click", {"x": 200, "y": 130}, 2)
    call("input/type", {"text": "hello there"}, 3)
    call("input/key", {"keys": "Enter"}, 4)
    wait_for(lambda: _out(stack, tab) == "sent:hello there", "the form to be sent")
    call("input/click", {"x": 200, "y": 275}, 5)  # the password field
    # The tool names its arguments its own way: the typed text is found by value.
    call("input/type", {"text": PASSWORD}, 6, {"action": "type", "input": {"value": PASSWORD}})
    call("input/key", {"keys": "x"}, 7)
    lines = read_until(
        stack.app_http,
        start,
        lambda got: sum("action" in x and x["action"]["via"] == "mcp" for x in got) >= 7,
        "the seven tool calls in the log",
    )
    mcp = [x["action"] for x in lines if "action" in x and x["action"]["via"] == "mcp"]
    assert [(a["tool"], a["call"], a["op"], a["who"]) for a in mcp] == [
        ("computer", "call-1", "screenshot", "cua"),
        ("computer", "call-2", "input/click", "cua"),
        ("computer", "call-3", "input/type", "cua"),
        ("computer", "call-4", "input/key", "cua"),
        ("computer", "call-5", "input/click", "cua"),
        ("computer", "call-6", "input/type", "cua"),
        ("computer", "call-7", "input/key", "cua"),
    ]
    assert mcp[0]["acts"] == "reading" and all(a["acts"] == "acting" for a in mcp[1:])
    assert mcp[2]["args"]["text"] == "hello there"  # the focus check cleared it
    assert mcp[5]["args"]["input"]["value"] == {"withheld": "password", "length": len(PASSWORD)}
    assert mcp[6]["args"]["keys"] == {"withheld": "password", "length": 1}
    assert PASSWORD.encode() not in all_bytes(stack.log_dir)
    op(stack, "tabs/close", {"id": tab})


def _out(stack: NativeStack, tab: str) -> str:
    """The page's #out text, read by a CDP client of the test's own."""

    async def read() -> str:
        url = browser_ws_url(stack.relay_http, "user=observer")
        async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
            cdp = RawCdp(ws)
            session = (await cdp.call("Target.attachToTarget", {"targetId": tab, "flatten": True}))[
                "result"
            ]["sessionId"]
            answer = await cdp.call(
                "Runtime.evaluate",
                {"expression": "document.getElementById('out').textContent", "returnByValue": True},
                sessionId=session,
            )
            return str(answer["result"]["result"]["value"])

    return asyncio.run(read())


def test_data_get_reset_add(stack: NativeStack, site: Site) -> None:
    import io
    import json
    import tarfile

    op(stack, "data/reset")  # no other test's cookies or storage: the archive is this test's
    op(stack, "cookies/set", {"cookies": [{"name": "session", "value": "bob-1", "url": site.url}]})
    op(stack, "local_storage/set", {"origin": site.url, "items": {"cart": "3 items"}})
    first = op(stack, "tabs/open", {"url": site.url + "/account"})["id"]
    op(stack, "tabs/open", {"url": site.url + "/next", "background": True})
    wait_for(lambda: {t["title"] for t in op(stack, "tabs/list")} >= {"Account", "Next"}, "tabs")
    before = op(stack, "tabs/list")
    assert before[0]["id"] == first

    archive = requests.post(f"{stack.app_http}/v1/browser/data/get", timeout=60)
    assert archive.status_code == 200 and archive.headers["Content-Type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        names = tar.getnames()
        state = json.loads(tar.extractfile("browser-state.json").read())  # type: ignore[union-attr]
        log = tar.extractfile("browser-log.jsonl").read()  # type: ignore[union-attr]
    assert names == ["browser-state.json", "browser-log.jsonl"]
    assert [c["name"] for c in state["cookies"]] == ["session"]
    assert state["local_storage"][site.url] == {"cart": "3 items"}
    assert log.count(b"\n") >= 3

    reset = op(stack, "data/reset")
    tabs = op(stack, "tabs/list")
    assert [t["url"] for t in tabs] == ["about:blank"] and tabs[0]["id"] == reset["tab"]
    assert op(stack, "cookies/get")["cookies"] == []
    assert op(stack, "local_storage/get", {"origin": site.url})["items"] == {}
    lines, _ = read_log(stack.app_http, reset["reset"] - 1)
    assert lines[0] == lines[0] | {"seq": reset["reset"], "reset": {"reason": "data/reset"}}

    added = requests.post(f"{stack.app_http}/v1/browser/data/add", data=archive.content, timeout=60)
    assert added.status_code == 200, added.text
    assert op(stack, "cookies/get")["cookies"][0]["value"] == "bob-1"
    assert op(stack, "local_storage/get", {"origin": site.url})["items"] == {"cart": "3 items"}
    wait_for(
        lambda: (
            {t["url"] for t in op(stack, "tabs/list")}
            >= {site.url + "/account", site.url + "/next"}
        ),
        "the saved tabs back",
    )
    assert op(stack, "tabs/list")[0]["url"] == site.url + "/account"  # the active one in front
    bad = requests.post(f"{stack.app_http}/v1/browser/data/add", data=b"not a tarball", timeout=30)
    assert bad.status_code == 400 and "tar.gz" in bad.json()["error"]["message"]
    op(stack, "data/reset")


def test_tokens_for_ops(authed_stack: NativeStack) -> None:
    url = f"{authed_stack.app_http}/v1/browser"
    assert requests.post(f"{url}/tabs/list", json={}, timeout=30).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert requests.post(f"{url}/tabs/list", json={}, headers=wrong, timeout=30).status_code == 401
    alice = {"Authorization": "Bearer alice-token-123"}
    assert requests.post(f"{url}/tabs/list", json={}, headers=alice, timeout=30).status_code == 200
    refused = requests.post(f"{url}/cookies/get", json={}, headers=alice, timeout=30)
    assert refused.status_code == 403 and "control token" in refused.json()["error"]["message"]
    control = {"Authorization": "Bearer control-token-789"}
    assert (
        requests.post(f"{url}/cookies/get", json={}, headers=control, timeout=30).status_code == 200
    )
    assert requests.post(f"{url}/log", json={}, headers=alice, timeout=30).status_code == 403
    mcp = requests.post(authed_stack.app_http + "/mcp", json={}, timeout=30)
    assert mcp.status_code == 401


def test_concurrent_ops_keep_their_own_commands(stack: NativeStack) -> None:
    """Two agents' ops at once: each op's CDP commands are credited to it (the
    app gives each acting op a relay connection of its own)."""
    import threading

    slow = (
        "data:text/html,<title>Slow</title><input id=q autofocus "
        'onkeydown="const t = Date.now(); while (Date.now() - t < 1500);">'
    )
    tab = op(stack, "tabs/open", {"url": slow})["id"]
    wait_for(lambda: op(stack, "tabs/list")[0]["title"] == "Slow", "the slow page")
    _, start = read_log(stack.app_http)
    done: list[str] = []

    def key() -> None:
        op(stack, "input/key", {"keys": "a"}, **{"AgentEnv-Role": "alice"})
        done.append("alice")

    typing = threading.Thread(target=key)
    typing.start()
    wait_for(
        lambda: (
            any(
                "action" in x and x["action"].get("who") == "alice"
                for x in read_log(stack.app_http, start)[0]
            )
            or typing.is_alive()
        ),
        "alice's key press to begin",
    )
    op(stack, "input/scroll", {"x": 5, "y": 5, "dy": 100}, **{"AgentEnv-Role": "bob"})
    typing.join(timeout=30)
    assert done == ["alice"]
    lines = read_until(
        stack.app_http,
        start,
        lambda got: {a.get("op") for a in actions(got).values()} >= {"input/key", "input/scroll"},
        "both ops in the log",
    )
    entries = actions(lines)
    ops = {a["op"]: s for s, a in entries.items() if a.get("op") in ("input/key", "input/scroll")}
    within = {s: a for s, a in entries.items() if a.get("within") in ops.values()}
    assert within, "no commands within the ops"
    for seq, a in within.items():
        owner = entries[a["within"]]
        assert a["who"] == owner["who"], (seq, a, owner)
        kind = "input/key" if a["method"] == "Input.dispatchKeyEvent" else None
        if kind:
            assert a["within"] == ops["input/key"], (seq, a)
        if a["method"] == "Input.dispatchMouseEvent":
            assert a["within"] == ops["input/scroll"], (seq, a)
    op(stack, "tabs/close", {"id": tab})


def test_the_live_view_on_a_developers_machine(stack: NativeStack, site: Site) -> None:
    """``/live`` and ``/live/frame`` with no users configured; off the record."""
    tab = stack.op("tabs/open", {"url": site.url + "/next"})["id"]
    before = read_log(stack.app_http)[1]
    page = requests.get(stack.app_http + "/live", timeout=30)
    assert page.status_code == 200 and "/live/frame" in page.text
    assert page.headers["Content-Type"].startswith("text/html")
    shots = [requests.get(stack.app_http + "/live/frame", timeout=30) for _ in range(3)]
    assert all(s.status_code == 200 and s.content[:2] == b"\xff\xd8" for s in shots)
    # Watching writes nothing (other tests' held lines may still arrive: none is a capture).
    lines, _ = read_log(stack.app_http, before)
    assert not [x for x in lines if x.get("action", {}).get("method") == "Page.captureScreenshot"]
    stack.op("tabs/close", {"id": tab})
