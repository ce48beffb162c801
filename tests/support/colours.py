"""Pages that each paint one colour, some answering late: a frame's pixels say
which page it shows.

``/c/<name>?next=a,b`` paints ``name``'s colour, with a link (``#go``, and a
target over the whole page) to ``/c/a?next=b``. Names starting ``slow-``
answer :data:`SLOW_S` late. ``/count`` answers how many times it was asked,
cacheable for an hour (a second fetch that says 1 came from the HTTP cache).
Standard library only: the frames test runs this
file inside a computer (``python3 colours.py PORT``); the bench runs it in a
thread on the host (:func:`serve`).
"""

from __future__ import annotations

import io
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["COLOURS", "SLOW_S", "page_shown", "serve", "serve_inside"]

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "green": (20, 170, 20),
    "blue": (20, 20, 220),
    "yellow": (230, 230, 20),
    "slow-purple": (140, 20, 160),
    "slow-cyan": (20, 200, 200),
    "slow-orange": (250, 130, 10),
}
SLOW_S = 1.5


class Pages(BaseHTTPRequestHandler):
    asked = 0

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/count":
            Pages.asked += 1
            self._send(str(Pages.asked).encode(), "text/plain", "max-age=3600")
            return
        name = parts.path.rsplit("/", 1)[-1]
        if name not in COLOURS:
            self.send_error(404)
            return
        if name.startswith("slow-"):
            time.sleep(SLOW_S)
        chain = parse_qs(parts.query).get("next", [""])[0].split(",")
        after = chain[0] + ("?next=" + ",".join(chain[1:]) if chain[1:] else "")
        red, green, blue = COLOURS[name]
        body = (
            f"<!doctype html><title>{name}</title>"
            f"<body style='margin:0;background:rgb({red},{green},{blue})'>"
            f"<a id=go href='/c/{after}' style='position:fixed;left:0;top:0;"
            "font:12px sans-serif'>go on</a><div style='position:fixed;inset:40px 0 0 0' "
            "onclick=\"document.getElementById('go').click()\"></div>"
        )
        self._send(body.encode(), "text/html")

    def _send(self, data: bytes, kind: str, cache: str | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        if cache:
            self.send_header("Cache-Control", cache)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return


def serve(port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The pages on ``host``:``port`` in a thread (``server.server_port``)."""
    server = ThreadingHTTPServer((host, port), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def serve_inside(computer: Any, port: int) -> None:
    """The pages inside a computer container (tests.support.container.Computer)
    on its 127.0.0.1:``port``: this file, run by the image's python3."""
    import base64

    code = base64.b64encode(Path(__file__).read_bytes()).decode()
    computer.exec(
        "sh",
        "-c",
        f"echo {code} | base64 -d > /tmp/colours.py && "
        f"setsid python3 /tmp/colours.py {int(port)} >/dev/null 2>&1 </dev/null &",
    )
    # Answering before the caller goes on (a navigation right after would be refused).
    probe = f"import socket; socket.create_connection(('127.0.0.1', {int(port)}), 1).close()"
    computer.exec(
        "sh",
        "-c",
        f'for i in $(seq 100); do python3 -c "{probe}" 2>/dev/null && exit 0; sleep 0.1; done; '
        "exit 1",
    )


def page_shown(jpeg: bytes) -> str | None:
    """Which page's colour a picture shows at its centre (Pillow decodes it)."""
    from PIL import Image

    picture = Image.open(io.BytesIO(jpeg)).convert("RGB")
    width, height = picture.size
    pixel = picture.getpixel((width // 2, height // 2))
    assert isinstance(pixel, tuple)
    for name, want in COLOURS.items():
        if all(abs(int(a) - b) <= 30 for a, b in zip(pixel[:3], want, strict=True)):
            return name
    return None


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Pages).serve_forever()
