"""Run inside the computer, past the relay: what Chromium's own policies do.

``python raw_chromium.py extension`` tries to load an unpacked extension;
``python raw_chromium.py urls URL...`` opens each URL and reads the page.
Prints one JSON line. Needs only the image's venv (aiohttp).
"""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from typing import Any

import aiohttp


async def main(mode: str, urls: list[str]) -> dict[str, Any]:
    with urllib.request.urlopen("http://127.0.0.1:6666/json/version") as answer:
        endpoint = json.load(answer)["webSocketDebuggerUrl"]
    async with aiohttp.ClientSession() as http, http.ws_connect(endpoint) as ws:
        ids = iter(range(1, 1000))

        async def call(method: str, params: dict[str, Any], session: str = "") -> Any:
            n = next(ids)
            message: dict[str, Any] = {"id": n, "method": method, "params": params}
            if session:
                message["sessionId"] = session
            await ws.send_json(message)
            while True:
                got = await ws.receive_json(timeout=20)
                if got.get("id") == n:
                    return got

        if mode == "extension":
            return dict(await call("Extensions.loadUnpacked", {"path": "/tmp"}))
        created = await call("Target.createTarget", {"url": "about:blank"})
        tab = created["result"]["targetId"]
        attached = await call("Target.attachToTarget", {"targetId": tab, "flatten": True})
        session = attached["result"]["sessionId"]
        seen: dict[str, Any] = {}
        for url in urls:
            await call("Page.navigate", {"url": url}, session)
            await asyncio.sleep(0.3)  # the error page paints
            text = "document.body ? document.body.innerText : ''"
            read = await call(
                "Runtime.evaluate", {"expression": text, "returnByValue": True}, session
            )
            seen[url] = read["result"]["result"].get("value", "")
        await call("Target.closeTarget", {"targetId": tab})
        return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2:]))))
