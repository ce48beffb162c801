"""One WebSocket carried on picows (relay/carrier.py), on real sockets: an
aiohttp server hands each upgrade over, and a client (aiohttp's, or
picows's where it must send fragments or stop reading) talks to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

from agentenv.relay.carrier import Carried, hand_over, request_head
from agentenv.relay.memory import COUNTED, InFlight, Meter
from tests.support.stack import free_port

LONGEST = 64 * 1024


@dataclass
class _Seen:
    """What the server's receiver was handed, in order."""

    items: list[tuple[str, object]] = field(default_factory=list)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    carried: Carried | None = None
    echo: bool = True

    def text(self, data: str) -> None:
        self.items.append(("text", data))
        if self.echo and self.carried is not None:
            self.carried.send_text(f"echo:{data}")

    def binary(self, data: bytes) -> None:
        self.items.append(("binary", data))

    def refused(self, code: int, why: str) -> None:
        self.items.append(("refused", code))

    def writable(self, ok: bool) -> None:
        self.items.append(("writable", ok))

    def gone(self) -> None:
        self.items.append(("gone", None))
        self.ended.set()


@dataclass
class _Server:
    url: str
    seen: list[_Seen]
    made: Callable[[], _Seen]


@pytest.fixture
async def server() -> AsyncIterator[_Server]:
    seen: list[_Seen] = []

    async def upgrade(request: web.Request) -> web.StreamResponse:
        if request.query.get("token") != "good":
            return web.json_response({"error": "unknown token"}, status=401)
        mine = _Seen(echo=request.query.get("echo", "1") == "1")
        seen.append(mine)
        carried = mine.carried = Carried(mine, LONGEST)
        metered = None
        if "meter" in request.query:  # a 2 MiB share, and messages up to 8 MiB
            carried.longest = 8 * COUNTED
            meter = carried.meter = Meter(InFlight(2 * COUNTED, 0), "alice")

            def over(why: str) -> None:
                mine.refused(1009, why)
                carried.close(1009, "past this user's share of the relay's memory")

            metered = (meter, over)
        hand_over(request, carried, carried.longest, metered)
        await asyncio.wait_for(mine.ended.wait(), 20)
        raise asyncio.CancelledError

    app = web.Application()
    app.router.add_get("/devtools/{tail:.*}", upgrade)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield _Server(f"ws://127.0.0.1:{port}/devtools/browser/x?token=good", seen, _Seen)
    finally:
        await runner.cleanup()


class _Client(WSListener):
    def __init__(self) -> None:
        self.frames: list[tuple[WSMsgType, bytes]] = []
        self.got = asyncio.Event()
        self.transport: WSTransport | None = None

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        payload = (
            frame.get_close_code().value.to_bytes(2, "big")
            if frame.msg_type == WSMsgType.CLOSE
            else frame.get_payload_as_bytes()
        )
        self.frames.append((frame.msg_type, payload))
        self.got.set()

    async def until(self, kind: WSMsgType) -> bytes:
        for _ in range(200):
            for got, payload in self.frames:
                if got == kind:
                    return payload
            self.got.clear()
            await asyncio.wait_for(self.got.wait(), 10)
        raise AssertionError(f"no {kind} frame: {self.frames}")


async def _first(server: _Server) -> _Seen:
    """The server's first connection, once it is carried."""
    for _ in range(500):
        if server.seen and server.seen[0].carried and server.seen[0].carried.transport:
            return server.seen[0]
        await asyncio.sleep(0.01)
    raise AssertionError("no connection was handed over")


async def _picows(url: str) -> tuple[WSTransport, _Client]:
    client = _Client()
    transport, _ = await ws_connect(lambda: client, url)
    return transport, client


async def test_messages_come_whole_and_answers_go_back(server: _Server) -> None:
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(server.url)
        for n in range(3):
            await ws.send_str(f"hi{n}")
            assert (await ws.receive(timeout=10)).data == f"echo:hi{n}"
        await ws.send_bytes(b"\x00\x01")
        await ws.send_str("é")  # not ASCII: read as UTF-8
        assert (await ws.receive(timeout=10)).data == "echo:é"
        await ws.close()
        assert ws.close_code == 1000
    seen = server.seen[0]
    await asyncio.wait_for(seen.ended.wait(), 10)
    assert seen.items == [
        ("text", "hi0"),
        ("text", "hi1"),
        ("text", "hi2"),
        ("binary", b"\x00\x01"),
        ("text", "é"),
        ("gone", None),
    ]


async def test_a_refused_upgrade_is_still_aiohttps_to_answer(server: _Server) -> None:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(server.url.replace("good", "bad"))
        assert refused.value.status == 401
    assert server.seen == []


async def test_fragments_are_put_together(server: _Server) -> None:
    transport, client = await _picows(server.url)
    transport.send(WSMsgType.TEXT, b"one ", fin=False)
    transport.send(WSMsgType.CONTINUATION, b"two ", fin=False)
    transport.send(WSMsgType.CONTINUATION, "thrée".encode(), fin=True)
    assert await client.until(WSMsgType.TEXT) == "echo:one two thrée".encode()
    transport.disconnect()
    await asyncio.wait_for(server.seen[0].ended.wait(), 10)
    assert server.seen[0].items == [("text", "one two thrée"), ("gone", None)]


@pytest.mark.parametrize("fragmented", [False, True])
async def test_a_message_over_the_bound_closes_with_1009_and_nothing_after_is_read(
    server: _Server, fragmented: bool
) -> None:
    transport, client = await _picows(server.url)
    big = b"x" * (LONGEST + 1)
    if fragmented:  # each fragment within the bound, the message past it
        half = len(big) // 2
        transport.send(WSMsgType.TEXT, big[:half], fin=False)
        transport.send(WSMsgType.CONTINUATION, big[half:], fin=True)
    else:
        transport.send(WSMsgType.TEXT, big)
    transport.send(WSMsgType.TEXT, b"after")
    assert await client.until(WSMsgType.CLOSE) == (1009).to_bytes(2, "big")
    await asyncio.wait_for(server.seen[0].ended.wait(), 10)
    assert server.seen[0].items == [("refused", 1009), ("gone", None)]
    assert (WSMsgType.TEXT, b"echo:after") not in client.frames


@pytest.mark.parametrize(
    ("frames", "code"),
    [
        ([(WSMsgType.TEXT, b"\xff\xfe", True)], 1007),  # not UTF-8
        ([(WSMsgType.CONTINUATION, b"x", True)], 1002),  # nothing begun
        ([(WSMsgType.TEXT, b"a", False), (WSMsgType.TEXT, b"b", True)], 1002),  # one in another
    ],
)
async def test_a_broken_message_closes_the_connection_naming_why(
    server: _Server, frames: list[tuple[WSMsgType, bytes, bool]], code: int
) -> None:
    transport, client = await _picows(server.url)
    for kind, payload, fin in frames:
        transport.send(kind, payload, fin=fin)
    assert await client.until(WSMsgType.CLOSE) == code.to_bytes(2, "big")
    await asyncio.wait_for(server.seen[0].ended.wait(), 10)
    assert server.seen[0].items == [("refused", code), ("gone", None)]


async def test_what_is_read_counts_until_handed_on_and_past_the_share_is_not_read(
    server: _Server,
) -> None:
    """The user's share is 2 MiB: a 1.5 MiB message is held while it is read
    and let go once handed on; a 3 MiB one goes past it before it is whole,
    and the connection is closed with nothing of it handed on."""
    transport, client = await _picows(server.url + "&meter=m&echo=0")
    transport.send(WSMsgType.TEXT, b"a" * (3 * COUNTED // 2))
    seen = await _first(server)
    for _ in range(500):
        if seen.items:
            break
        await asyncio.sleep(0.01)
    assert seen.items == [("text", "a" * (3 * COUNTED // 2))]
    carried = seen.carried
    assert carried is not None and carried.meter is not None
    assert carried.meter.held == 0 and carried.meter.reading.held == {}
    transport.send(WSMsgType.TEXT, b"b" * (3 * COUNTED))
    assert await client.until(WSMsgType.CLOSE) == (1009).to_bytes(2, "big")
    await asyncio.wait_for(seen.ended.wait(), 10)
    assert [kind for kind, _ in seen.items] == ["text", "refused", "gone"]


async def test_a_close_is_answered_with_its_code(server: _Server) -> None:
    transport, client = await _picows(server.url)
    transport.send_close(close_message=b"bye")
    await client.until(WSMsgType.CLOSE)
    await asyncio.wait_for(server.seen[0].ended.wait(), 10)
    assert server.seen[0].items == [("gone", None)]


async def test_a_reader_that_stops_pauses_its_writer_and_resuming_lets_it_go_on(
    server: _Server,
) -> None:
    transport, _ = await _picows(server.url + "&echo=0")
    carried = (await _first(server)).carried
    assert carried is not None
    transport.underlying_transport.pause_reading()
    chunk = b"z" * 65536
    for _ in range(400):  # 26 MB at most: socket buffers fill well before
        carried.send_text(chunk)
        if ("writable", False) in server.seen[0].items:
            break
    assert ("writable", False) in server.seen[0].items
    transport.underlying_transport.resume_reading()
    for _ in range(500):
        if ("writable", True) in server.seen[0].items:
            break
        await asyncio.sleep(0.01)
    assert server.seen[0].items[-1] == ("writable", True)
    transport.disconnect()


def test_the_head_is_given_again_as_sent() -> None:
    from aiohttp.test_utils import make_mocked_request

    request = make_mocked_request(
        "GET", "/devtools/browser/x?token=a%20b", headers={"Upgrade": "websocket", "X-A": "1"}
    )
    head = request_head(request)
    assert head.startswith(b"GET /devtools/browser/x?token=a%20b HTTP/1.1\r\n")
    assert b"Upgrade: websocket\r\n" in head and head.endswith(b"\r\n\r\n")
