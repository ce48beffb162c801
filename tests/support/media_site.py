"""A site for recordings with video, a network log and downloads: a login
that sets a session cookie, a report that wants a bearer header and a
credential in its query, colour pages to click through, and files that
download.

- ``/login``: a form (``#user``, ``#password``, ``#in``) posting to
  ``/login``, which answers 303 to ``/home`` with ``Set-Cookie: session=…``
  when the password is right (to ``/login`` else).
- ``/home``: "Signed in" when the session cookie is the one set.
- ``/report?access_token=…``: "Authorized" when the bearer header and the
  query credential are the ones given; a link (``#dl``) downloads
  ``report.csv``.
- ``/c/<colour>/<next>/…``: a page painted ``colour`` whose every pixel is a
  link to ``/c/<next>/…``; a last segment ending ``.csv`` makes it a download
  of ``/files/<name>``.
- ``/files/<name>``: an attachment holding :func:`file_text`.

Each page paints a colour of its own (:data:`COLOURS`), so a picture says
which page it shows. Standard library only: the tests run this file inside a
computer (``python3 media_site.py PORT SECRETS``, the secrets as JSON in
base64), as :func:`serve_inside` does.
"""

from __future__ import annotations

import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["COLOURS", "file_text", "serve_inside"]

COLOURS: dict[str, tuple[int, int, int]] = {
    "orange": (240, 140, 30),
    "teal": (20, 150, 150),
    "purple": (130, 40, 170),
    "grey": (128, 128, 128),
    "red": (220, 20, 20),
    "green": (20, 170, 20),
    "blue": (20, 20, 220),
    "yellow": (230, 230, 20),
    "cyan": (20, 200, 200),
    "magenta": (210, 30, 160),
}
#: The secrets the pages check (given at start): password, cookie, bearer, query.
SECRETS: dict[str, str] = {}


def file_text(name: str) -> str:
    """What ``/files/<name>`` holds."""
    return f"file,{name}\nrow,1\nrow,2\n"


def _painted(colour: str, title: str, inner: str = "") -> str:
    red, green, blue = COLOURS[colour]
    return (
        f"<!doctype html><title>{title}</title>"
        f"<body style='margin:0;font:16px sans-serif;background:rgb({red},{green},{blue})'>"
        f"{inner}"
    )


LOGIN = _painted(
    "orange",
    "Login",
    "<form method=post action=/login style='padding:40px'>"
    "<input id=user name=user placeholder=user><br><br>"
    "<input id=password name=password type=password placeholder=password><br><br>"
    "<button id=in type=submit>Sign in</button></form>",
)


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        if path == "/login":
            self._send(LOGIN)
        elif path == "/home":
            signed = self._cookie("session") == SECRETS["cookie"]
            state = "Signed in" if signed else "Signed out"
            self._send(_painted("teal" if signed else "grey", "Home", f"<h1 id=state>{state}</h1>"))
        elif path == "/report":
            query = parse_qs(parts.query).get("access_token", [""])[0]
            bearer = self.headers.get("Authorization", "") == "Bearer " + SECRETS["bearer"]
            allowed = bearer and query == SECRETS["query"]
            state = "Authorized" if allowed else "Refused"
            link = "<a id=dl href=/files/report.csv download>report.csv</a>"
            page = _painted("purple" if allowed else "grey", "Report", f"<h1 id=state>{state}</h1>")
            self._send(page + link)
        elif path.startswith("/c/"):
            self._colour(path[len("/c/") :].split("/"))
        elif path.startswith("/files/") and path.endswith(".csv"):
            name = path.rsplit("/", 1)[-1]
            self._send(
                file_text(name),
                "text/csv",
                {"Content-Disposition": f'attachment; filename="{name}"'},
            )
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        form = parse_qs(self.rfile.read(size).decode())
        right = form.get("password", [""])[0] == SECRETS["password"]
        self.send_response(303)
        self.send_header("Location", "/home" if right else "/login")
        if right:
            self.send_header("Set-Cookie", f"session={SECRETS['cookie']}; Path=/; HttpOnly")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _colour(self, chain: list[str]) -> None:
        colour, rest = chain[0], chain[1:]
        if colour not in COLOURS:
            self.send_error(404)
            return
        if rest == [] or rest == [""]:
            link = ""
        elif len(rest) == 1 and rest[0].endswith(".csv"):
            link = f"<a id=go href='/files/{rest[0]}' download "
        else:
            link = f"<a id=go href='/c/{'/'.join(rest)}' "
        if link:
            link += "style='position:fixed;inset:0;display:block'>&nbsp;</a>"
        self._send(_painted(colour, colour, link))

    def _cookie(self, name: str) -> str | None:
        for part in self.headers.get("Cookie", "").split(";"):
            key, _, value = part.strip().partition("=")
            if key == name:
                return value
        return None

    def _send(self, body: str, kind: str = "text/html", more: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (more or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return


def serve_inside(computer: Any, port: int, secrets: dict[str, str]) -> None:
    """The site inside a computer container (tests.support.container.Computer)
    on its 127.0.0.1:``port``, checking ``secrets`` (password, cookie, bearer,
    query): this file, run by the image's python3, answering before this returns."""
    code = base64.b64encode(Path(__file__).read_bytes()).decode()
    given = base64.b64encode(json.dumps(secrets).encode()).decode()
    computer.exec(
        "sh",
        "-c",
        f"echo {code} | base64 -d > /tmp/media_site.py && "
        f"setsid python3 /tmp/media_site.py {int(port)} {given} >/dev/null 2>&1 </dev/null &",
    )
    probe = f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{int(port)}/login || true"
    for _ in range(100):
        if "200" in computer.exec("sh", "-c", probe):
            return
        computer.exec("sleep", "0.1")
    raise AssertionError(f"the media site did not answer on port {port} inside the computer")


if __name__ == "__main__":
    SECRETS.update(json.loads(base64.b64decode(sys.argv[2])))
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), _Pages).serve_forever()
