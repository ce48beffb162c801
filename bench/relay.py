"""Round trips through the relay vs straight to Chromium, in one run.

Runtime.evaluate("1") and a ~1.5 MB PNG screenshot, each timed direct and
through the relay (which logs every command), alternating in blocks so both
see the same machine. Prints p50, p99 and the ratios.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.stats import percentile, row, table
from tests.support.site import Site
from tests.support.stack import NativeStack


class Client:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session: str) -> None:
        self.ws, self.session, self.ids = ws, session, itertools.count(1)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        call = next(self.ids)
        await self.ws.send_json(
            {"id": call, "method": method, "params": params, "sessionId": self.session}
        )
        while True:
            msg = await self.ws.receive_json(timeout=60)
            if msg.get("id") == call:
                return dict(msg)


async def _open(
    http: aiohttp.ClientSession, base: str, target: str, token: str | None = None
) -> Client:
    async with http.get(base + "/json/version") as answer:
        url = (await answer.json())["webSocketDebuggerUrl"]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    ws = await http.ws_connect(url, max_msg_size=0, headers=headers)
    call = {
        "id": 1,
        "method": "Target.attachToTarget",
        "params": {"targetId": target, "flatten": True},
    }
    await ws.send_json(call)
    while True:
        msg = await ws.receive_json(timeout=30)
        if msg.get("id") == 1:
            return Client(ws, msg["result"]["sessionId"])


async def _time(client: Client, method: str, params: dict[str, Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        answer = await client.call(method, params)
        out.append((time.perf_counter() - t) * 1000)
        assert "result" in answer, answer
    return out


async def run(small: int = 3000, shots: int = 60) -> str:
    control = "bench-control-token"
    with (
        Site() as site,
        tempfile.TemporaryDirectory() as folder,
        NativeStack(Path(folder), extra_env={"AGENTENV_CONTROL_TOKEN": control}) as stack,
    ):
        async with aiohttp.ClientSession() as http:
            async with http.put(stack.chromium_http + "/json/new?" + site.url + "/noise") as answer:
                target = (await answer.json())["id"]
            direct = await _open(http, stack.chromium_http, target)
            relay = await _open(http, stack.relay_http, target)
            # The computer's own connection, outside any action: the same relay
            # and hops, nothing logged. The anchor for what logging adds.
            quiet = await _open(http, stack.relay_http, target, control)
            for _ in range(200):  # the page has painted its canvas (bounded)
                state = await direct.call("Runtime.evaluate", {"expression": "document.readyState"})
                if state["result"]["result"]["value"] == "complete":
                    break
                await asyncio.sleep(0.05)
            shot = (await direct.call("Page.captureScreenshot", {"format": "png"}))["result"][
                "data"
            ]
            size_mb = len(shot) * 3 / 4 / 1e6
            results: dict[str, list[float]] = {k: [] for k in ("ed", "eq", "er", "sd", "sr")}
            for _ in range(10):  # warm up both
                await direct.call("Runtime.evaluate", {"expression": "1"})
                await relay.call("Runtime.evaluate", {"expression": "1"})
                await quiet.call("Runtime.evaluate", {"expression": "1"})
            blocks = 10
            for _ in range(blocks):
                results["ed"] += await _time(
                    direct, "Runtime.evaluate", {"expression": "1"}, small // blocks
                )
                results["eq"] += await _time(
                    quiet, "Runtime.evaluate", {"expression": "1"}, small // blocks
                )
                results["er"] += await _time(
                    relay, "Runtime.evaluate", {"expression": "1"}, small // blocks
                )
                results["sd"] += await _time(
                    direct, "Page.captureScreenshot", {"format": "png"}, shots // blocks
                )
                results["sr"] += await _time(
                    relay, "Page.captureScreenshot", {"format": "png"}, shots // blocks
                )
            await direct.ws.close()
            await quiet.ws.close()
            await relay.ws.close()
    ed, eq, er, sd, sr = (results[k] for k in ("ed", "eq", "er", "sd", "sr"))
    rows = [
        row("evaluate('1') direct", ed),
        row("evaluate('1') via relay, not logged", eq),
        row("evaluate('1') via relay (logged)", er),
        row(f"screenshot {size_mb:.1f} MB direct", sd),
        row(f"screenshot {size_mb:.1f} MB via relay (logged)", sr),
    ]
    summary = [
        ["logging adds, p50", f"{percentile(er, 50) - percentile(eq, 50):.3f} ms", "", "", ""],
        [
            "evaluate overhead p50",
            f"{percentile(er, 50) - percentile(ed, 50):.3f} ms",
            f"ratio p50 {percentile(er, 50) / percentile(ed, 50):.2f}x",
            f"ratio p99 {percentile(er, 99) / percentile(ed, 99):.2f}x",
            "",
        ],
        [
            "screenshot overhead p50",
            f"{percentile(sr, 50) - percentile(sd, 50):.3f} ms",
            f"ratio p50 {percentile(sr, 50) / percentile(sd, 50):.3f}x",
            f"ratio p99 {percentile(sr, 99) / percentile(sd, 99):.3f}x",
            "",
        ],
    ]
    return table(
        "relay round trip (direct is the anchor)",
        ["case", "p50", "p99", "mean", "n"],
        rows + summary,
    )


def main() -> None:
    print(asyncio.run(run()))


if __name__ == "__main__":
    main()
