"""One WebSocket of a bridged connection carried on picows: whole messages
in, messages out, no rules (docs/decisions.md, "The relay's sockets move to
picows"; issue 42 item 2). The relay's move is under way: the bridge
(:mod:`agentenv.relay.proxy`) does not use this module yet.

picows hands its listener frames, not messages, and calls it from its read
of the socket, with no task. :class:`Carried` turns them into what the
bridge reads, through a :class:`Receiver`:

- a message's fragments are put together; a message over ``longest`` bytes
  (the agent's message bound, :data:`~agentenv.settings.Settings.agent_message_bytes`)
  closes the connection with 1009 (``too_big``) and nothing of it, or after
  it, is handed on. picows 2.3.1 closes an oversized frame with 1009 itself,
  but still hands that frame to its listener once its payload has come
  (tried on 2026-12-07): the length is checked here, frame by frame;
- a text message that is not UTF-8 closes the connection with 1007;
- a fragment with no message begun, or a message begun inside another,
  closes it with 1002; pings are answered by picows;
- a close frame is answered with its own code, then the socket is let go;
- picows's flow control (its transport's write buffer past the high mark)
  reaches the receiver as ``writable(False)`` and ``writable(True)``: the
  bridge pauses reading the other side meanwhile (:meth:`Carried.pause_reading`).

:class:`Metered` sits between the socket and picows's protocol and counts
the bytes each read brings into the connection's
:class:`~agentenv.relay.memory.Meter`, as :class:`~agentenv.relay.metered.MeteredReader`
does under aiohttp: bytes of a message not yet handed on count against the
user's share of the relay's memory, and past it nothing more is read and
the receiver is told (``refused``, 1009).

:func:`hand_over` gives a client's socket that aiohttp has served, checked
and not answered to a picows server protocol, which reads the request head
again (rebuilt from ``raw_path`` and ``raw_headers``) and sends the 101
itself (tests/unit/test_socket_handover.py holds the hand-over on the
pinned versions).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from aiohttp import web
from picows import WSAutoPingStrategy, WSCloseCode, WSFrame, WSListener, WSMsgType, WSTransport

# picows's own protocol class: public in its module, not in its stubs
# (ws_create_server makes one per connection the same way).
from picows.picows import WSProtocol  # type: ignore[attr-defined]

from agentenv.relay.memory import AT_LIMIT, Meter

__all__ = ["Carried", "Metered", "Receiver", "hand_over", "request_head"]

log = logging.getLogger("agentenv.relay")

#: How long a handed-over client has to finish its upgrade (picows's own bound).
HANDSHAKE_S = 10.0
#: picows's read buffer to start with (it doubles as messages need).
READ_BUFFER = 16 * 1024


class Receiver(Protocol):
    """What a carried WebSocket hands on (:class:`Carried`)."""

    def text(self, data: str) -> None: ...

    def binary(self, data: bytes) -> None: ...

    def refused(self, code: int, why: str) -> None:
        """The carrier closed the connection (``code``: 1009, 1007, 1002)."""

    def writable(self, ok: bool) -> None:
        """Whether the socket takes more (False: its write buffer is full)."""

    def gone(self) -> None:
        """The socket is closed: nothing more comes or goes."""


class Carried(WSListener):
    """One WebSocket's frames as whole messages for its :class:`Receiver`.
    ``longest``: the most bytes one message may have (0: no bound).
    ``meter``: counts what is read until it is handed on (:class:`Metered`
    feeds it; a message handed on lets go of its bytes)."""

    def __init__(self, receiver: Receiver, longest: int = 0, meter: Meter | None = None) -> None:
        self.receiver = receiver
        self.longest = longest
        self.meter = meter
        self.transport: WSTransport | None = None
        #: A message's fragments so far (None: no message begun).
        self._parts: list[bytes] | None = None
        self._kind = WSMsgType.TEXT
        self._size = 0
        #: The carrier closed the connection: nothing more is handed on.
        self.stopped = False

    # -- picows's callbacks --------------------------------------------------

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if self.stopped:
            return
        kind = frame.msg_type
        if kind is WSMsgType.TEXT or kind is WSMsgType.BINARY:
            if self._parts is not None:
                self._refuse(
                    WSCloseCode.PROTOCOL_ERROR, "a new message began inside a fragmented one"
                )
                return
            size = frame.payload_size
            if self.longest and size > self.longest:
                self._too_big(size)
            elif frame.fin:
                self._whole(kind, frame.get_payload_as_bytes())
            else:
                self._kind, self._size = kind, size
                self._parts = [frame.get_payload_as_bytes()]
        elif kind is WSMsgType.CONTINUATION:
            parts = self._parts
            if parts is None:
                self._refuse(
                    WSCloseCode.PROTOCOL_ERROR, "a continuation frame with no message begun"
                )
                return
            self._size += frame.payload_size
            if self.longest and self._size > self.longest:
                self._too_big(self._size)
                return
            parts.append(frame.get_payload_as_bytes())
            if frame.fin:
                self._parts = None
                self._whole(self._kind, b"".join(parts))
        elif kind is WSMsgType.CLOSE:
            if not transport.is_close_frame_sent:
                transport.send_close(frame.get_close_code())
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self._parts = None
        self.receiver.gone()

    def pause_writing(self) -> None:
        self.receiver.writable(False)

    def resume_writing(self) -> None:
        self.receiver.writable(True)

    # -- what the bridge calls ------------------------------------------------

    @property
    def closed(self) -> bool:
        """A close frame was sent, or the socket is gone."""
        transport = self.transport
        return transport is None or transport.is_close_frame_sent or transport.is_disconnected

    def send_text(self, data: str | bytes) -> None:
        """Send a text message (UTF-8 bytes, or a ``str``); nothing once closed."""
        transport = self.transport
        if transport is not None and not transport.is_close_frame_sent:
            transport.send(WSMsgType.TEXT, data)

    def send_binary(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_close_frame_sent:
            transport.send(WSMsgType.BINARY, data)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send a close frame (once) and let the socket go once it is written."""
        transport = self.transport
        if transport is None or transport.is_disconnected:
            return
        if not transport.is_close_frame_sent:
            transport.send_close(WSCloseCode(code), reason.encode()[:123])
        transport.disconnect()

    def pause_reading(self, paused: bool) -> None:
        """Stop (or start again) reading this socket: the other side cannot
        take more yet (:meth:`Receiver.writable`)."""
        transport = self.transport
        if transport is None or transport.is_disconnected:
            return
        socket = transport.underlying_transport
        if paused:
            socket.pause_reading()
        else:
            socket.resume_reading()

    # -- messages --------------------------------------------------------------

    def _whole(self, kind: WSMsgType, payload: bytes) -> None:
        if self.meter is not None:
            self.meter.handed_on(payload)
        if kind is WSMsgType.BINARY:
            self.receiver.binary(payload)
            return
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            self._refuse(WSCloseCode.INVALID_TEXT, "a text message that is not UTF-8")
            return
        self.receiver.text(text)

    def _too_big(self, size: int) -> None:
        self._refuse(
            WSCloseCode.MESSAGE_TOO_BIG,
            f"a message of {size} bytes or more, over this connection's {self.longest}",
        )

    def _refuse(self, code: WSCloseCode, why: str) -> None:
        self.stopped = True
        self._parts = None
        self.close(code.value, why)
        self.receiver.refused(code.value, why)


class Metered(asyncio.BufferedProtocol):
    """A socket's protocol in front of picows's: each read is counted in
    ``meter`` before picows parses it. Past the bound nothing more is read
    and ``over`` is told why (the connection is closed for memory)."""

    def __init__(self, inner: asyncio.BufferedProtocol, meter: Meter, over: Callable[[str], None]):
        self.inner = inner
        self.meter = meter
        self.over = over
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self.inner.connection_made(transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.inner.get_buffer(sizehint)  # type: ignore[return-value]

    def buffer_updated(self, nbytes: int) -> None:
        meter = self.meter
        if meter.over is not None:
            return  # what came after the bound is never parsed
        why = meter.read(nbytes)
        if why is not None:
            transport = self._transport
            if isinstance(transport, asyncio.ReadTransport):
                transport.pause_reading()
            self.over(why)
            return
        try:
            self.inner.buffer_updated(nbytes)
        except MemoryError:  # the relay's own limit: this connection goes
            meter.over = AT_LIMIT
            self.over(AT_LIMIT)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def request_head(request: web.BaseRequest) -> bytes:
    """The request's head as the client sent it (its raw path and headers),
    for picows to read again."""
    head = f"{request.method} {request.raw_path} HTTP/1.1\r\n".encode()
    head += b"".join(name + b": " + value + b"\r\n" for name, value in request.raw_headers)
    return head + b"\r\n"


def hand_over(
    request: web.BaseRequest,
    carried: Carried,
    longest_frame: int,
    metered: tuple[Meter, Callable[[str], None]] | None = None,
) -> None:
    """Give ``request``'s socket to picows, ``carried`` its listener. aiohttp
    served and checked the request and wrote nothing: its handler raises
    :class:`asyncio.CancelledError` once the connection ends, so that aiohttp
    writes nothing more on a socket no longer its own. ``longest_frame``
    bounds what picows reads of one frame (``Carried.longest`` bounds a
    message). ``metered``: the meter and what to tell past its bound."""
    transport = request.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError("the client left before its upgrade")
    protocol = WSProtocol(
        None, None, False, lambda _request: carried, log, True, HANDSHAKE_S,
        False, 20, 20, WSAutoPingStrategy.PING_WHEN_IDLE, True, longest_frame, None, READ_BUFFER,
    )  # fmt: skip
    front: asyncio.BufferedProtocol = protocol
    if metered is not None:
        front = Metered(protocol, *metered)
    transport.set_protocol(front)
    front.connection_made(transport)
    head = request_head(request)
    buffer = protocol.get_buffer(len(head))
    buffer[: len(head)] = head
    protocol.buffer_updated(len(head))
