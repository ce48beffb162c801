"""Bad CDP input: answered or closed cleanly, logged as far as it can be,
and other connections keep being served."""

from __future__ import annotations

import contextlib

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
    """Past an agent's message bound (AGENTENV_AGENT_MESSAGE_BYTES, 32 MiB) the
    connection is closed before the message is held, on the record with rule
    memory; under it, a parameter the command does not take is logged by its
    size only. Either way the relay serves the others."""
    url = browser_ws_url(stack.relay_http, "user=bigsender")
    big = "a" * (100 * 1024 * 1024)
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
        with contextlib.suppress(ConnectionError):  # closed while it was sent
            await ws.send_json(
                {"id": 1, "method": "Runtime.evaluate", "params": {"expression": "1", "pad": big}}
            )
            message = await ws.receive(timeout=120)
            assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), message
    del big
    await _other_still_served(url)
    lines = settle(stack.log_dir / "browser-browser.jsonl")
    mine = [x["action"] for x in lines if "action" in x and x["action"]["who"] == "bigsender"]
    assert mine and mine[0]["guard"] == {"rule": "memory", "action": "disconnected"}, mine
    padded = "a" * (20 * 1024 * 1024)
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
        await ws.send_json(
            {"id": 2, "method": "Runtime.evaluate", "params": {"expression": "1", "pad": padded}}
        )
        message = await ws.receive(timeout=120)
        assert '"id":2' in message.data.replace(" ", "")  # answered
    lines = settle(stack.log_dir / "browser-browser.jsonl")
    entry = next(
        x["action"]
        for x in lines
        if "action" in x
        and x["action"]["who"] == "bigsender"
        and x["action"].get("method") == "Runtime.evaluate"
    )
    assert "pad" not in entry["params"], entry["params"]
    assert entry["params"]["unused"]["count"] == 1, entry["params"]
    assert entry["params"]["unused"]["bytes"] >= 20 * 1024 * 1024, entry["params"]
