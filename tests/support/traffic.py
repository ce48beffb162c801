"""Record what a real CDP client and Chromium say: a pass-through proxy in
front of a relay or Chromium that writes every message to a JSONL file.

The recordings under ``tests/unit/traffic/`` were made with it; the relay's
core is unit-tested against them (every command a real client sends is let
through, none refused by the protocol table). Those under
``tests/unit/traffic/both/`` hold both halves, in the order they passed
(``--both``): the core is replayed against the client's commands and
Chromium's answers and events together (tests/unit/test_traffic.py).

    python -m tests.support.traffic --upstream http://127.0.0.1:9222 \
        --port 9555 --out tests/unit/traffic/puppeteer.jsonl [--both]

Each line is ``{"path": <ws path>, "message": <the message>}``, with
``"from": "client"`` or ``"chromium"`` in the files of both halves.
Messages over 64 KiB are stored with their ``params`` (or ``result``)
replaced by ``{"cut": N}`` (files handed in, big scripts, screenshots): the
method and the shape are what matter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

__all__ = ["CLIENTS", "TrafficProxy", "load"]

#: The recorded clients (each has ``tests/unit/traffic/<name>.jsonl``).
CLIENTS = ("playwright", "playwright-mcp", "puppeteer", "browser-use")

_BIG = 64 * 1024


def load(path: Path) -> list[dict[str, Any]]:
    """The recorded messages of one file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class TrafficProxy:
    """Forwards HTTP discovery and WebSockets to ``upstream``, recording client messages."""

    def __init__(
        self,
        upstream: str,
        out: Path,
        headers: dict[str, str] | None = None,
        both: bool = False,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.out = out
        self.headers = headers or {}
        self.both = both
        self.http: aiohttp.ClientSession | None = None
        self._file = out.open("a")

    def _record(self, path: str, data: str, source: str = "client") -> None:
        try:
            message = json.loads(data)
        except ValueError:
            message = {"unparsed": data[:200]}
        if len(data) > _BIG and isinstance(message, dict):
            for key in ("params", "result"):
                if key in message:
                    message[key] = {"cut": len(data)}
        line: dict[str, Any] = {"path": path, "message": message}
        if self.both:
            line["from"] = source
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    async def _http(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._ws(request)
        assert self.http is not None
        url = self.upstream + request.path_qs
        async with self.http.request(request.method, url, headers=self.headers) as answer:
            body = await answer.read()
        host = request.headers["Host"]
        up_host = self.upstream.split("//", 1)[1]
        text = body.decode(errors="replace").replace(up_host, host)
        return web.Response(
            status=answer.status, text=text, content_type=answer.content_type or "text/plain"
        )

    async def _ws(self, request: web.Request) -> web.StreamResponse:
        assert self.http is not None
        client = web.WebSocketResponse(max_msg_size=0, compress=False)
        await client.prepare(request)
        ws_url = "ws" + self.upstream[4:] + request.path_qs
        async with self.http.ws_connect(
            ws_url, max_msg_size=0, headers=self.headers, compress=0
        ) as upstream:

            async def up() -> None:
                async for msg in client:
                    if msg.type is aiohttp.WSMsgType.TEXT:
                        self._record(request.path, msg.data)
                        await upstream.send_str(msg.data)

            async def down() -> None:
                async for msg in upstream:
                    if msg.type is aiohttp.WSMsgType.TEXT and not client.closed:
                        if self.both:
                            self._record(request.path, msg.data, "chromium")
                        await client.send_str(msg.data)

            tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()
        await client.close()
        return client

    def app(self) -> web.Application:
        app = web.Application()

        async def ctx(app: web.Application) -> Any:
            self.http = aiohttp.ClientSession()
            yield
            await self.http.close()
            self._file.close()

        app.cleanup_ctx.append(ctx)
        app.router.add_route("*", "/{tail:.*}", self._http)
        return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--token", help="a token sent upstream as a bearer header")
    parser.add_argument("--both", action="store_true", help="Chromium's messages too")
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    proxy = TrafficProxy(args.upstream, args.out, headers, both=args.both)
    web.run_app(proxy.app(), host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
