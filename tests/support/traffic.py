"""Record what a real CDP client sends: a pass-through proxy in front of a relay
or Chromium that writes every client message to a JSONL file.

The recordings under ``tests/unit/traffic/`` were made with it; the relay's
core is unit-tested against them (every command a real client sends is let
through, none refused by the protocol table).

    python -m tests.support.traffic --upstream http://127.0.0.1:9222 \
        --port 9555 --out tests/unit/traffic/puppeteer.jsonl

Each line is ``{"path": <ws path>, "message": <the client's message>}``.
Messages over 64 KiB are stored with their ``params`` replaced by ``{"cut": N}``
(files handed in, big scripts): the method and the shape are what matter.
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

    def __init__(self, upstream: str, out: Path, headers: dict[str, str] | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.out = out
        self.headers = headers or {}
        self.http: aiohttp.ClientSession | None = None
        self._file = out.open("a")

    def _record(self, path: str, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            message = {"unparsed": data[:200]}
        if len(data) > _BIG and isinstance(message, dict) and "params" in message:
            message["params"] = {"cut": len(data)}
        self._file.write(json.dumps({"path": path, "message": message}) + "\n")
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
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    web.run_app(
        TrafficProxy(args.upstream, args.out, headers).app(), host="127.0.0.1", port=args.port
    )


if __name__ == "__main__":
    main()
