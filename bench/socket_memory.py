"""What a WebSocket server keeps of one big message, on picows and on
aiohttp (issue 42 item 2; why the relay stays on aiohttp, docs/decisions.md).

Each library in a process of its own: a server that answers each text
message with its length, and a client in the same process that sends one
message of :data:`BIG_MB` MiB, then five small ones. The process's resident
memory is read before, after the big message with the connection still
open (the garbage collected), and after the connection is closed. aiohttp
is the anchor: what the relay does today.

    python -m bench socket-memory
"""

from __future__ import annotations

import subprocess
import sys

from bench.stats import table

BIG_MB = 60
LIBRARIES = ("aiohttp", "picows")


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def _picows() -> tuple[float, float, float]:
    import asyncio
    import gc

    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect, ws_create_server

    class Server(WSListener):
        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type == WSMsgType.TEXT:
                transport.send(WSMsgType.TEXT, str(len(frame.get_payload_as_utf8_text())).encode())

    class Client(WSListener):
        def __init__(self) -> None:
            self.answers: asyncio.Queue[bytes] = asyncio.Queue()

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            self.answers.put_nowait(frame.get_payload_as_bytes())

    server = await ws_create_server(lambda _: Server(), "127.0.0.1", 0, max_frame_size=1 << 30)
    port = server.sockets[0].getsockname()[1]
    client = Client()
    transport, _ = await ws_connect(
        lambda: client, f"ws://127.0.0.1:{port}/", max_frame_size=1 << 30
    )
    gc.collect()
    before = _rss_mb()
    transport.send(WSMsgType.TEXT, b"x" * (BIG_MB << 20))
    await client.answers.get()
    for _ in range(5):
        transport.send(WSMsgType.TEXT, b"small")
        await client.answers.get()
    await asyncio.sleep(0.5)
    gc.collect()
    kept = _rss_mb()
    transport.disconnect()
    await transport.wait_disconnected()
    await asyncio.sleep(0.5)
    gc.collect()
    closed = _rss_mb()
    server.close()
    return before, kept, closed


async def _aiohttp() -> tuple[float, float, float]:
    import asyncio
    import gc

    import aiohttp
    from aiohttp import web

    async def serve(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        async for message in ws:
            if message.type is aiohttp.WSMsgType.TEXT:
                await ws.send_str(str(len(message.data)))
        return ws

    app = web.Application()
    app.router.add_get("/", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(f"ws://127.0.0.1:{port}/", max_msg_size=0)
        gc.collect()
        before = _rss_mb()
        await ws.send_str("x" * (BIG_MB << 20))
        await ws.receive()
        for _ in range(5):
            await ws.send_str("small")
            await ws.receive()
        await asyncio.sleep(0.5)
        gc.collect()
        kept = _rss_mb()
        await ws.close()
        await asyncio.sleep(0.5)
        gc.collect()
        closed = _rss_mb()
    await runner.cleanup()
    return before, kept, closed


def _one(library: str) -> None:
    import asyncio

    before, kept, closed = asyncio.run(_picows() if library == "picows" else _aiohttp())
    print(f"{before:.1f} {kept:.1f} {closed:.1f}")


def run() -> str:
    rows = []
    figures: dict[str, tuple[float, ...]] = {}
    for library in LIBRARIES:
        out = subprocess.run(
            [sys.executable, "-m", "bench.socket_memory", library],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()
        before, kept, closed = (float(x) for x in out)
        figures[library] = (kept - before, closed - before)
        rows.append(
            [
                library,
                f"{before:.0f} MiB",
                f"+{kept - before:.0f} MiB",
                f"+{closed - before:.0f} MiB",
            ]
        )
    anchor = max(figures["aiohttp"][0], 1.0)
    rows.append(
        ["picows / aiohttp, kept while open", "", f"{figures['picows'][0] / anchor:.1f}x", ""]
    )
    return table(
        f"What a WebSocket server keeps of one {BIG_MB} MiB message (resident memory)",
        ["library", "before", "after it, connection open", "after the close"],
        rows,
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _one(sys.argv[1])
    else:
        print(run())
