"""The "browser" a ``/playwright`` server launches: CDP over Playwright's
pipes, carried to the relay as the caller (``agentenv-playwright-bridge``).

Playwright's server starts Chromium with ``--remote-debugging-pipe`` and
speaks CDP over file descriptors 3 (to the browser) and 4 (from it), one
JSON message each, ended by a NUL byte. This program stands where Chromium
would: it takes no notice of Chromium's arguments, opens one connection to
the relay's browser endpoint with the token of the ``/playwright`` caller,
and carries each message across unchanged. So everything the server does in
the browser is on the record, as the caller, in the caller's scope, under
every rule of the relay's.

Its environment (never its command line, which every user can read) holds
``AGENTENV_PLAYWRIGHT_RELAY`` (the relay's ws URL) and, with users
configured, ``AGENTENV_PLAYWRIGHT_TOKEN``. It ends when either side does:
the server closing the pipe, or the relay closing the connection (the
scope closed, the relay restarting).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

import aiohttp

__all__ = ["main"]

#: How long the relay may take to accept the connection.
CONNECT_S = 30.0


async def _to_relay(reader: asyncio.StreamReader, ws: aiohttp.ClientWebSocketResponse) -> None:
    while True:
        try:
            message = await reader.readuntil(b"\0")
        except asyncio.IncompleteReadError:
            return  # the server closed the pipe: the browser "exits"
        await ws.send_str(message[:-1].decode())


async def _from_relay(ws: aiohttp.ClientWebSocketResponse, out: int) -> None:
    loop = asyncio.get_running_loop()
    async for message in ws:
        if message.type != aiohttp.WSMsgType.TEXT:
            return
        data = message.data.encode() + b"\0"
        view = memoryview(data)
        while view:
            written = await loop.run_in_executor(None, os.write, out, view)
            view = view[written:]


async def bridge(relay: str, token: str | None, pipe_in: int = 3, pipe_out: int = 4) -> int:
    """Carry CDP between Playwright's pipes and the relay until either ends."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(pipe_in, "rb", buffering=0)
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientWSTimeout(ws_close=5.0)
    async with aiohttp.ClientSession() as session:
        try:
            ws = await asyncio.wait_for(
                session.ws_connect(relay, headers=headers, max_msg_size=0, timeout=timeout),
                CONNECT_S,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Said on stderr, which Playwright's server shows in its launch
            # error: the relay's refusal (a share used up, a closed scope).
            print(
                f"agentenv-playwright-bridge: the relay refused the connection: {exc}",
                file=sys.stderr,
            )
            return 1
        async with ws:
            tasks = [
                asyncio.create_task(_to_relay(reader, ws)),
                asyncio.create_task(_from_relay(ws, pipe_out)),
            ]
            _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
    return 0


def main() -> None:
    relay = os.environ.get("AGENTENV_PLAYWRIGHT_RELAY")
    if not relay:
        print(
            "agentenv-playwright-bridge: AGENTENV_PLAYWRIGHT_RELAY is not set; this program "
            "is started by the app server's /playwright",
            file=sys.stderr,
        )
        raise SystemExit(2)
    token = os.environ.get("AGENTENV_PLAYWRIGHT_TOKEN") or None
    raise SystemExit(asyncio.run(bridge(relay, token)))


if __name__ == "__main__":
    main()
