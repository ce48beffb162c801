"""An aiohttp WebSocket reader that counts the bytes it is fed (issue 22).

The proxy wraps each agent connection's two readers (the client's, and
Chromium's answers to it) at the protocol's ``_payload_parser``: the bytes of
a message read and not yet handed on count against the user's share and the
relay's (:class:`~agentenv.relay.memory.Meter`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentenv.relay.memory import AT_LIMIT, Meter

__all__ = ["MeteredReader"]


class MeteredReader:
    """An aiohttp WebSocket reader that counts the bytes it is fed first
    (:class:`~agentenv.relay.memory.Meter`); past the bound it is fed nothing
    more, and ``over`` closes the connection."""

    __slots__ = ("meter", "over", "parser")

    def __init__(self, parser: Any, meter: Meter, over: Callable[[str], None]) -> None:
        self.parser = parser
        self.meter = meter
        self.over = over

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        why = self.meter.read(len(data))
        if why is not None:
            self.over(why)
        if self.meter.over is not None:
            return False, b""
        try:
            result: tuple[bool, bytes] = self.parser.feed_data(data)
        except MemoryError:  # the relay's own limit: this connection goes
            self.meter.over = AT_LIMIT
            self.over(AT_LIMIT)
            return False, b""
        return result

    def feed_eof(self) -> None:
        self.parser.feed_eof()
