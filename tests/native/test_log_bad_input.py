"""Bad CDP input: answered or closed cleanly, logged as far as it can be,
and other connections keep being served."""

from __future__ import annotations

import aiohttp

from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.logfile import settle
from tests.support.stack import NativeStack


async def _other_still_served(url: str) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        assert "result" in await RawCdp(ws).call("Browser.getVersion")


async def test_malformed_json_and_bad_commands(stack: NativeStack) -> None:
    url = browser_ws_url(stack.relay_http, "user=mallory")
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        await ws.send_str("{not json")
        answer = await ws.receive_json(timeout=10)
        assert answer["error"]["code"] == -32700 and "JSON" in answer["error"]["message"]
        await ws.send_json({"id": "seven", "method": "Browser.getVersion"})
        answer = await ws.receive_json(timeout=10)
        assert answer["error"]["code"] == -32600
        cdp = RawCdp(ws)
        unknown = await cdp.call(
            "Runtime.evaluate", {"expression": "1"}, sessionId="NO-SUCH-SESSION"
        )
        assert "error" in unknown  # Chromium's answer (it drops the unknown sessionId)
        assert "result" in await cdp.call("Browser.getVersion")  # the same connection goes on
    await _other_still_served(url)
    lines = settle(stack.log_dir / "browser-browser.jsonl")
    mine = [x["action"] for x in lines if "action" in x and x["action"]["who"] == "mallory"]
    invalid = [a for a in mine if a["method"] == "(invalid)"]
    assert len(invalid) == 1 and invalid[0]["ok"] is False and "JSON" in invalid[0]["error"]
    # A command with a bad id keeps its method on the record.
    bad_id = [a for a in mine if a["method"] == "Browser.getVersion" and a["ok"] is False]
    assert len(bad_id) == 1 and "integer id" in bad_id[0]["error"]
    session = next(a for a in mine if a["method"] == "Runtime.evaluate")
    assert session["ok"] is False and "tab" not in session


async def test_a_100_mb_params_object(stack: NativeStack) -> None:
    url = browser_ws_url(stack.relay_http, "user=bigsender")
    big = "a" * (100 * 1024 * 1024)
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
        await ws.send_json(
            {"id": 1, "method": "Runtime.evaluate", "params": {"expression": "1", "pad": big}}
        )
        message = await ws.receive(timeout=120)
        if message.type == aiohttp.WSMsgType.TEXT:
            assert '"id":1' in message.data.replace(" ", "")  # answered
        else:
            assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    del big
    await _other_still_served(url)
    lines = settle(stack.log_dir / "browser-browser.jsonl")
    entry = next(x["action"] for x in lines if "action" in x and x["action"]["who"] == "bigsender")
    assert entry["method"] == "Runtime.evaluate"
    assert entry["params"]["pad"] == {"cut": "a" * 2000, "length": 100 * 1024 * 1024}
