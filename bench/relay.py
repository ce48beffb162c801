"""Round trips through the relay vs straight to Chromium, in one run.

Runtime.evaluate("1") and a ~1.5 MB PNG screenshot, each timed direct, through
a bare forwarding relay (``bench/bare_relay.py``: aiohttp on uvloop in its own
process, no parsing, no logging: the floor) and through the relay (which
checks and logs every command), alternating in small blocks so all see the
same machine. Prints p50, p99 and the differences. Then the guard's own cost per
command, on the recorded traffic of real clients, beside parsing alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from bench.stats import percentile, row, table
from tests.support.site import Site
from tests.support.stack import NativeStack, free_port


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
    return await _attach(await http.ws_connect(url, max_msg_size=0, headers=headers), target)


async def _attach(ws: aiohttp.ClientWebSocketResponse, target: str) -> Client:
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


@contextlib.contextmanager
def bare_relay(upstream_ws: str) -> Iterator[str]:
    """The bare relay in a process of its own; its ws URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.bare_relay", upstream_ws, str(port)],
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the bare relay did not start") from None
                time.sleep(0.05)
        yield f"ws://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(10)


async def _time(client: Client, method: str, params: dict[str, Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        answer = await client.call(method, params)
        out.append((time.perf_counter() - t) * 1000)
        assert "result" in answer, answer
    return out


FLOOD = 20_000


async def _flood(client: Client, n: int = FLOOD) -> float:
    """Messages a second a page's flood of console events reaches the client at:
    ``n`` ``console.log`` calls in one script, the client counting the
    ``Runtime.consoleAPICalled`` events until the last."""
    await client.call("Runtime.enable", {})
    call = next(client.ids)
    expression = f"for (let i = 0; i < {n}; i++) console.log(i); 'done'"
    began = time.perf_counter()
    await client.ws.send_json(
        {
            "id": call,
            "method": "Runtime.evaluate",
            "params": {"expression": expression},
            "sessionId": client.session,
        }
    )
    seen = 0
    answered = False
    while seen < n or not answered:
        msg = await client.ws.receive_json(timeout=60)
        if msg.get("method") == "Runtime.consoleAPICalled":
            seen += 1
        elif msg.get("id") == call:
            answered = True
    rate = n / (time.perf_counter() - began)
    await client.call("Runtime.disable", {})
    return rate


async def run(small: int = 6000, shots: int = 60) -> str:
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
            async with http.get(stack.chromium_http + "/json/version") as answer:
                browser_ws = (await answer.json())["webSocketDebuggerUrl"]
            bare_ctx = bare_relay(browser_ws)
            bare_url = bare_ctx.__enter__()
            bare = await _attach(await http.ws_connect(bare_url, max_msg_size=0), target)
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
            results: dict[str, list[float]] = {
                k: [] for k in ("ed", "eb", "eq", "er", "sd", "sb", "sr")
            }
            for _ in range(10):  # warm up both
                await direct.call("Runtime.evaluate", {"expression": "1"})
                await bare.call("Runtime.evaluate", {"expression": "1"})
                await relay.call("Runtime.evaluate", {"expression": "1"})
                await quiet.call("Runtime.evaluate", {"expression": "1"})
            # Small blocks for the evaluations (ten calls each, the four
            # clients in turn), so a slow spell of the machine falls on all
            # of them alike; the screenshots one each in turn (Chromium's own
            # time for one drifts by several per cent within a run).
            for _ in range(small // 10):
                for key, client in (("ed", direct), ("eb", bare), ("eq", quiet), ("er", relay)):
                    results[key] += await _time(client, "Runtime.evaluate", {"expression": "1"}, 10)
            for _ in range(shots):
                for key, client in (("sd", direct), ("sb", bare), ("sr", relay)):
                    results[key] += await _time(
                        client, "Page.captureScreenshot", {"format": "png"}, 1
                    )
            floods: dict[str, list[float]] = {"fd": [], "fb": [], "fr": []}
            for _ in range(5):  # in turn, so a slow spell falls on all alike
                for key, client in (("fd", direct), ("fb", bare), ("fr", relay)):
                    floods[key].append(await _flood(client))
            await bare.ws.close()
            bare_ctx.__exit__(None, None, None)
            await direct.ws.close()
            await quiet.ws.close()
            await relay.ws.close()
    ed, eb, eq, er, sd, sb, sr = (results[k] for k in ("ed", "eb", "eq", "er", "sd", "sb", "sr"))
    rows = [
        row("evaluate('1') direct", ed),
        row("evaluate('1') via a bare forwarding relay", eb),
        row("evaluate('1') via relay, not logged", eq),
        row("evaluate('1') via relay (logged)", er),
        row(f"screenshot {size_mb:.1f} MB direct", sd),
        row(f"screenshot {size_mb:.1f} MB via the bare relay", sb),
        row(f"screenshot {size_mb:.1f} MB via relay (logged)", sr),
    ]
    summary = [
        [
            "relay vs bare relay, p50",
            f"+{percentile(er, 50) - percentile(eb, 50):.3f} ms",
            f"bare +{percentile(eb, 50) - percentile(ed, 50):.3f} ms over direct",
            f"relay +{percentile(er, 50) - percentile(ed, 50):.3f} ms over direct",
            "",
        ],
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
    fd, fb, fr = (statistics.median(floods[k]) for k in ("fd", "fb", "fr"))
    flood = table(
        f"a page's flood of {FLOOD:,} console events (median of 5 each, in turn)",
        ["case", "messages a second", "vs the bare relay"],
        [
            ["direct", f"{fd:,.0f}", ""],
            ["via a bare forwarding relay", f"{fb:,.0f}", "1.00x"],
            ["via relay", f"{fr:,.0f}", f"{fr / fb:.2f}x"],
        ],
    )
    return (
        table(
            "relay round trip (direct and a bare forwarding relay are the anchors)",
            ["case", "p50", "p99", "mean", "n"],
            rows + summary,
        )
        + flood
        + guard_cost()
    )


def guard_cost(rounds: int = 20) -> str:
    """The core's per-command cost (parse, protocol table, parameter checks) on the
    recorded traffic of real clients, beside parsing alone (``orjson.loads``)."""
    import orjson

    from agentenv.access import Identity
    from agentenv.relay import core

    folder = Path(__file__).resolve().parents[1] / "tests" / "unit" / "traffic"
    messages = [
        json.dumps(json.loads(line)["message"])
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    state = core.ClientState(1, Identity("alice"))
    parse: list[float] = []
    check: list[float] = []
    for _ in range(rounds):
        for data in messages:
            t = time.perf_counter()
            orjson.loads(data)
            parse.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            core.receive(state, data, "/var/lib/agentenv/downloads")
            check.append((time.perf_counter() - t) * 1e3)
    p50 = percentile(check, 50) - percentile(parse, 50)
    return table(
        f"the guard per command ({len(messages)} recorded client messages x {rounds})",
        ["case", "p50", "p99", "mean", "n"],
        [
            row("orjson.loads alone (anchor)", parse),
            row("core.receive: parse, protocol table, parameter checks", check),
            ["checks add, p50", f"{p50:.4f} ms", "", "", ""],
        ],
    )


def main() -> None:
    print(asyncio.run(run()))


if __name__ == "__main__":
    main()
