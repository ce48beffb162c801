"""A small web site served by the tests on 127.0.0.1, in a thread."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["PAGES", "Site"]

PAGES: Mapping[str, str] = {
    "/": """<!doctype html><title>Start</title>
<h1>Start page</h1>
<form id=login onsubmit="return false">
  <input id=user name=user placeholder=user>
  <input id=password name=password type=password placeholder=password>
  <input id=search name=q placeholder=search>
  <button id=go type=button onclick="document.getElementById('out').textContent='clicked:'+document.getElementById('search').value">Go</button>
</form>
<p id=out></p>
<a id=next href="/next">Next page</a>
<a id=popup href="/popup" target="_blank">Open popup</a>
""",
    "/next": "<!doctype html><title>Next</title><h1>Next page</h1>",
    "/pixels": """<!doctype html><title>Pixels</title>
<body style="margin:0">
<button id=b style="position:absolute;left:100px;top:100px;width:200px;height:60px"
  onclick="document.getElementById('out').textContent='pressed';document.getElementById('q').focus()">Press</button>
<form onsubmit="document.getElementById('out').textContent='sent:'+document.getElementById('q').value;return false">
  <input id=q style="position:absolute;left:100px;top:200px;width:300px;height:30px">
  <input id=pw type=password style="position:absolute;left:100px;top:260px;width:300px;height:30px">
  <input type=submit value=Send style="position:absolute;left:-999px">
</form>
<p id=out style="position:absolute;left:100px;top:320px">waiting</p>
""",
    "/popup": "<!doctype html><title>Popup</title><h1>Popup page</h1>",
    # A page with a payment to confirm, and a script ticking under a URL of
    # its own (a breakpoint by URL lands there).
    "/pay": """<!doctype html><title>Pay</title>
<button id=confirm onclick="document.getElementById('out').textContent='paid'">Confirm payment</button>
<button id=cancel onclick="document.getElementById('out').textContent='cancelled'">Cancel order</button>
<p id=out>unpaid</p>
<script>
function tick() {
  return Date.now();
}
setInterval(tick, 20);
//# sourceURL=http://127.0.0.1:8000/tick.js
</script>""",
    # A page that loads, then keeps its renderer busy for good: nothing it
    # is asked (an evaluate, a screenshot) is answered while it is open.
    "/busy": """<!doctype html><title>Busy</title><h1>Busy page</h1>
<script>onload = () => { for (;;) {} };</script>""",
    # A page whose requests carry secrets a network log must not keep: a
    # credential in a query, a bearer header, a cookie the server sets.
    "/har": """<!doctype html><title>Har</title>
<img src="/next?access_token=HARQUERY7731&page=2">
<script>
fetch("/set-cookie").then(() =>
  fetch("/next", {headers: {Authorization: "Bearer HARBEARER5521"}}))
  .then(() => document.title = "Har done");
</script>""",
    # A sign-up page whose script sends what was typed into its password,
    # PIN, one-time code, card and CVC fields in every shape the fourth red
    # team saw leak into a recording's network.har (tests/security/
    # test_har_bodies.py): each to /api/<shape>, then the form itself, a
    # post that navigates to /signup/done.
    "/signup": """<!doctype html><title>Sign up</title>
<input id=user name=username>
<input id=pw type=password>
<input id=pin type=password inputmode=numeric>
<input id=otp autocomplete=one-time-code>
<input id=cc autocomplete=cc-number>
<input id=cvc autocomplete=cc-csc>
<button id=send onclick="send()">Sign up</button>
<form id=django method=post action=/signup/done>
  <input type=hidden name=csrfmiddlewaretoken value=c5rf>
  <input type=hidden name=username value=bob>
  <input type=hidden name=password1><input type=hidden name=password2>
</form>
<script>
const v = (id) => document.getElementById(id).value;
const J = "application/json", F = "application/x-www-form-urlencoded";
const enc = encodeURIComponent;
const post = (shape, body, type) =>
  fetch("/api/" + shape, {method: "POST", body, headers: type ? {"Content-Type": type} : {}});
async function send() {
  const pw = v("pw"), pin = v("pin"), otp = v("otp"), card = v("cc"), cvc = v("cvc");
  const form = (pairs) => pairs.map(([k, x]) => enc(k) + "=" + enc(x)).join("&");
  await Promise.all([
    post("password1", JSON.stringify({username: "bob", password1: pw, password2: pw}), J),
    post("password_confirmation", JSON.stringify({password_confirmation: pw}), J),
    post("passwordConfirmation", JSON.stringify({passwordConfirmation: pw}), J),
    post("pass", JSON.stringify({pass: pw}), J),
    post("passwordHash", JSON.stringify({passwordHash: pw}), J),
    post("jsonrpc", JSON.stringify({jsonrpc: "2.0", method: "signup", params: ["bob", pw], id: 1}), J),
    post("graphql", JSON.stringify(
      {query: "mutation { signUp(user: \\"bob\\", password: " + JSON.stringify(pw) + ") { id } }"}), J),
    post("text-plain-json", JSON.stringify({data: pw})),  // a string body: text/plain
    post("django-form", form([["csrfmiddlewaretoken", "c5rf"], ["username", "bob"],
      ["password1", pw], ["password2", pw]]), F),
    post("django-json", JSON.stringify({username: "bob", password1: pw, password2: pw}), J),
    post("rails-form", form([["authenticity_token", "t0k"], ["user[email]", "bob@example.com"],
      ["user[password]", pw], ["user[password_confirmation]", pw]]), F),
    post("rails-json", JSON.stringify(
      {user: {email: "bob@example.com", password: pw, password_confirmation: pw}}), J),
    post("laravel-form", form([["_token", "t0k"], ["name", "bob"], ["password", pw],
      ["password_confirmation", pw]]), F),
    post("laravel-json", JSON.stringify(
      {name: "bob", password: pw, password_confirmation: pw}), J),
    post("card-json", JSON.stringify({pin, otp, card, cvc, number: Number(card)}), J),
    post("card-form", form([["pin", pin], ["otp", otp], ["card", card], ["cvc", cvc]]), F),
  ]);
  const django = document.getElementById("django");
  django.password1.value = django.password2.value = pw;
  // A second later: a network log counts a navigation as after the typing
  // only once it began a quarter of a second past it (recorder/har.py).
  setTimeout(() => django.submit(), 1000);
}
</script>""",
    # Where the sign-up form lands: a new document, whose own request keeps
    # its harmless values in a network log.
    "/signup/done": """<!doctype html><title>Done</title><h1>Welcome</h1>
<script>
fetch("/api/after", {method: "POST", body: JSON.stringify({note: "after"}),
  headers: {"Content-Type": "application/json"}}).then(() => document.title = "Done, after");
</script>""",
    # A page whose PNG screenshot is about 1.5 MB: noise in a canvas.
    "/noise": (
        "<!doctype html><title>Noise</title><body style='margin:0'>"
        "<canvas id=c width=1280 height=800></canvas><script>"
        "const c = document.getElementById('c').getContext('2d');"
        "const d = c.createImageData(1280, 800); let s = 1;"
        "for (let i = 0; i < d.data.length; i++) { s = (s * 16807) % 2147483647;"
        " d.data[i] = (i % 4 == 3) ? 255 : ((s % 5 == 0) ? (s & 255) : (i >> 11) & 255); }"
        "c.putImageData(d, 0, 0);</script>"
    ),
    "/tall": "<!doctype html><title>Tall</title>"
    + "".join(
        f"<p style='height:200px;background:hsl({i * 37 % 360},60%,70%)'>{i}</p>" for i in range(40)
    ),
    # A page whose script tells every caller in its world that no field is a
    # password field (the relay's check runs in a world of its own).
    "/liar": """<!doctype html><title>Liar</title>
<input id=pw type=password autocomplete=current-password>
<script>
Object.defineProperty(HTMLInputElement.prototype, "type", {get() { return "text"; }});
Element.prototype.getAttribute = function () { return null; };
Object.defineProperty(Document.prototype, "activeElement", {get() { return document.body; }});
</script>""",
}


def _account(cookie_header: str) -> str:
    """A page that shows who the session cookie signs in."""
    cookies = dict(part.strip().split("=", 1) for part in cookie_header.split(";") if "=" in part)
    who = cookies.get("session")
    state = f"Signed in as {who}" if who else "Signed out"
    return f"<!doctype html><title>Account</title><h1 id=state>{state}</h1>"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        page = _account(self.headers.get("Cookie", "")) if path == "/account" else PAGES.get(path)
        if path == "/set-cookie":
            page = "set"
        body = (page or "<!doctype html><title>Not found</title>not found").encode()
        self.send_response(200 if page else 404)
        if path == "/set-cookie":
            self.send_header("Set-Cookie", "session=HARCOOKIE9902; Path=/")
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        """What /signup posts: read and answered, never echoed."""
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length, 1 << 20))
        path = self.path.split("?", 1)[0]
        if path == "/signup/done":
            body, kind = PAGES[path].encode(), "text/html; charset=utf-8"
        else:
            body, kind = b'{"ok": true}', "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Site:
    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Site:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
