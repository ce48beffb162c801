"""The credential vault in the built image (issue 45, item 1), with users and
a control token: the control token sets a credential in Alice's scope, and
Alice's own Playwright (``connect_over_cdp`` with her token) fills a local
sign-in page's username, password and TOTP fields with
``AgentEnv.fillCredential`` on a CDP session of the page, never holding a
value. The page's own check sees the right ones (the TOTP code as the test
makes it from the secret). A fill on a page of another origin, and into a
frame of another origin inside a page of the right one, is refused, naming
both origins. Bob's token cannot fill Alice's credential. Every byte the
computer wrote under /var/log/agentenv, its process output, and what this
test printed hold neither the password nor the TOTP secret, while the fill
entries are there, the value withheld.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from agentenv.harness.local_store import LocalStore
from agentenv.relay.vault import WITHHELD_TEXT
from agentenv.totp import code, secret_bytes
from tests.security.attacks import browser_url
from tests.support.container import Computer, computer
from tests.support.timing import deadline

USERNAME = "alice.vault@bank.test"
PASSWORD = "pw-Vault-7c41e9-never-seen"
TOTP_SECRET = "KRUGS4ZAJFZSAQJAKRXXAUCTMVRXEZLU"  # base32, as a site's QR shows it

BANK_PORT, EVIL_PORT = 8101, 8102


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sign_in(evil: str) -> str:
    """The bank's page: its own check compares what was typed with hashes of
    the right username and password (the page never holds them), and keeps
    the code typed for the test to compare."""
    return f"""<!doctype html><title>bank</title>
<form onsubmit="return false">
<input id=username autocomplete=username>
<input id=password type=password autocomplete=current-password>
<input id=otp autocomplete=one-time-code inputmode=numeric>
<button id=go>sign in</button>
</form>
<iframe id=other src="{evil}/field.html"></iframe>
<script>
const sha = async (t) => Array.from(new Uint8Array(await crypto.subtle.digest(
  "SHA-256", new TextEncoder().encode(t)))).map(b => b.toString(16).padStart(2, "0")).join("");
window.check = async () => ({{
  username: await sha(document.getElementById("username").value) === "{_sha(USERNAME)}",
  password: await sha(document.getElementById("password").value) === "{_sha(PASSWORD)}",
  otp: document.getElementById("otp").value,
}});
window.send = () => fetch("/echo", {{method: "POST",
  headers: {{"Content-Type": "application/json"}},
  body: JSON.stringify({{note: document.getElementById("password").value,
                         code: document.getElementById("otp").value}})}}).then(r => r.status);
</script>"""


EVIL_FIELD = "<!doctype html><title>field</title><input id=steal type=password>"
EVIL_PAGE = "<!doctype html><title>evil</title><input id=steal type=password autofocus>"


@pytest.fixture(scope="module")
def pc(image: str, run_network: Any) -> Iterator[Computer]:
    env = {"AGENTENV_MAX_SCOPES": "2"}
    with computer(image, env=env, network=run_network) as running:
        evil = running.serve_folder(
            EVIL_PORT, "/tmp/evil", {"field.html": EVIL_FIELD, "index.html": EVIL_PAGE}
        )
        running.serve_folder(BANK_PORT, "/tmp/bank", {"signin.html": _sign_in(evil)})
        yield running


def _fill(page: Page, name: str, field: str) -> Any:
    session = page.context.new_cdp_session(page)
    try:
        return session.send("AgentEnv.fillCredential", {"name": name, "field": field})
    finally:
        session.detach()


def _refused(page: Page, name: str, field: str) -> str:
    with pytest.raises(PlaywrightError) as refused:
        _fill(page, name, field)
    return str(refused.value)


def _codes_now() -> set[str]:
    """The codes a fill made about now may be (it may cross a 30 s step)."""
    key = secret_bytes(TOTP_SECRET)
    now = time.time()
    return {code(key, now - 30), code(key, now), code(key, now + 1)}


def test_an_agent_fills_without_seeing_and_only_on_its_origin(
    pc: Computer, capfd: pytest.CaptureFixture[str]
) -> None:
    bank = f"http://127.0.0.1:{BANK_PORT}"
    evil = f"http://127.0.0.1:{EVIL_PORT}"
    before = pc.log()[1]
    made = pc.op(
        "credentials/set",
        {
            "scope": "alice",
            "name": "bank",
            "origin": bank + "/",
            "username": USERNAME,
            "password": PASSWORD,
            "totp_secret": TOTP_SECRET,
        },
    )
    assert made == {"name": "bank", "origin": bank, "fields": ["username", "password", "totp"]}
    listed = pc.op("credentials/list", {"scope": "alice"})
    assert listed == {"credentials": [made]}
    assert pc.op("credentials/list", {"scope": "bob"}) == {"credentials": []}
    # An agent's token may not set, list or clear: the control token's ops.
    pc.op("credentials/list", {}, user="alice", status=403)
    with sync_playwright() as pw:
        alice = pw.chromium.connect_over_cdp(browser_url(pc, "alice"), timeout=deadline(30) * 1000)
        page = alice.contexts[0].pages[0]
        page.goto(bank + "/signin.html")
        page.focus("#username")
        filled = _fill(page, "bank", "username")
        assert filled["name"] == "bank" and filled["field"] == "username"
        page.focus("#password")
        _fill(page, "bank", "password")
        page.focus("#otp")
        _fill(page, "bank", "totp")
        checked = page.evaluate("window.check()")
        assert checked["username"] is True and checked["password"] is True, checked
        assert checked["otp"] in _codes_now(), "the TOTP code typed is not RFC 6238's"
        # The page has the password; the agent reading the field back does not
        # (its text is withheld from what its connection is sent), but a
        # script that transforms it first gets it out (docs/limits.md).
        assert page.input_value("#password") == WITHHELD_TEXT
        said = page.evaluate("[document.getElementById('password').value, document.title]")
        assert said == [WITHHELD_TEXT, "bank"], said
        reversed_ = page.evaluate("[...document.getElementById('password').value].reverse()")
        assert "".join(reversed(reversed_)) == PASSWORD

        # Nothing focused, a button, an unknown name, a field with no secret.
        page.focus("#go")
        assert "does not take text" in _refused(page, "bank", "password")
        page.evaluate("document.activeElement.blur()")
        assert "no field is focused" in _refused(page, "bank", "password")
        assert "no credential named 'nope'" in _refused(page, "nope", "password")

        # A frame of another origin, focused inside the bank's own page.
        page.frame_locator("#other").locator("#steal").focus()
        said = _refused(page, "bank", "password")
        assert "frame of another origin" in said and evil in said and bank in said, said
        stolen = page.frame_locator("#other").locator("#steal").input_value()
        assert stolen == ""

        # Another origin's page, its field focused.
        page.goto(evil + "/index.html")
        page.focus("#steal")
        said = _refused(page, "bank", "password")
        assert f"origin is {evil}" in said and bank in said, said
        assert page.input_value("#steal") == ""

        # Bob's browser holds none of Alice's credentials.
        bob = pw.chromium.connect_over_cdp(browser_url(pc, "bob"), timeout=deadline(30) * 1000)
        bobs = bob.contexts[0].pages[0]
        bobs.goto(bank + "/signin.html")
        bobs.focus("#password")
        assert "no credential named 'bank'" in _refused(bobs, "bank", "password")
        assert bobs.input_value("#password") == ""
        bob.close()

        # The op does the same for an agent's token, in the active tab.
        page.goto(bank + "/signin.html")
        page.bring_to_front()
        page.focus("#password")
        done = pc.op("credentials/fill", {"name": "bank", "field": "password"}, user="alice")
        assert done["name"] == "bank" and done["tab"]
        assert page.evaluate("window.check()")["password"] is True
        # Called as a tool call of the agent's own (AgentEnv-Tool-Call): the
        # entry keeps the op's arguments, the marker too, not the header's.
        page.focus("#username")
        tool = "tool=my_fill; call=c1; args=e30"  # args: {}
        pc.op(
            "credentials/fill",
            {"name": "bank", "field": "username"},
            user="alice",
            headers={"AgentEnv-Tool-Call": tool},
        )
        pc.op("credentials/fill", {"name": "nope", "field": "password"}, user="alice", status=404)
        pc.op(
            "credentials/fill",
            {"scope": "bob", "name": "bank", "field": "password"},
            user="alice",
            status=403,
        )
        alice.close()

    # Closed to everyone once cleared.
    assert pc.op("credentials/clear", {"scope": "alice"}) == {"cleared": 1}
    assert pc.op("credentials/list", {"scope": "alice"}) == {"credentials": []}

    actions = [line["action"] for line in pc.settled_log(before) if "action" in line]
    fills = [
        a
        for a in actions
        if a.get("method") == "AgentEnv.fillCredential" or a.get("op") == "credentials/fill"
    ]
    ok = [f for f in fills if f.get("ok")]
    assert len(ok) == 5, json.dumps(fills, indent=1)[:4000]
    for entry in ok:
        kept = entry.get("params") or entry.get("args")
        assert kept["name"] == "bank" and kept["value"] == {"withheld": "password"}, entry
        assert entry["who"] == "alice" and entry["tab"] and entry["url"].startswith(bank), entry
    assert {(f.get("params") or f.get("args"))["field"] for f in ok} == {
        "username",
        "password",
        "totp",
    }
    refused = [f for f in fills if not f.get("ok")]
    assert any(evil in str(f.get("error")) for f in refused), refused

    # Every byte: the log folder, the computer's process output, this test's own.
    written = pc.all_log_bytes()
    output = pc.container.get_wrapped_container().logs()
    printed = capfd.readouterr()
    for haystack in (written, output, (printed.out + printed.err).encode()):
        assert PASSWORD.encode() not in haystack
        assert TOTP_SECRET.encode() not in haystack
        assert USERNAME.encode() not in haystack
    assert b"AgentEnv.fillCredential" in written and b"credentials/fill" in written


def test_a_bare_mcp_client_fills_with_the_tool(
    pc: Computer, capfd: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.support.mcp import ref, ref_argument, text

    bank = f"http://127.0.0.1:{BANK_PORT}"
    evil = f"http://127.0.0.1:{EVIL_PORT}"
    before = pc.log()[1]
    body = {"name": "bank", "origin": bank, "username": USERNAME, "password": PASSWORD}
    pc.op("credentials/set", {"scope": "alice", **body, "totp_secret": TOTP_SECRET})

    async def run() -> list[str]:
        said: list[str] = []
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {pc.token('alice')}"}, timeout=deadline(120)
        )
        transport = streamable_http_client(pc.app + "/mcp", http_client=http)
        async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "fill_credential" in tools
            argument = ref_argument(tools["browser_click"])
            await client.call_tool("browser_navigate", {"url": evil + "/index.html"})
            snapshot = text(await client.call_tool("browser_snapshot", {}))
            clicked = await client.call_tool(
                "browser_click", {"element": "field", argument: ref(snapshot, "textbox")}
            )
            assert not clicked.is_error, text(clicked)
            refused = await client.call_tool(
                "fill_credential", {"name": "bank", "field": "password"}
            )
            assert refused.is_error and evil in text(refused) and bank in text(refused)
            said.append(text(refused))
            bad = await client.call_tool("fill_credential", {"name": "bank", "field": "cvv"})
            assert bad.is_error and "field" in text(bad)
            went = await client.call_tool("browser_navigate", {"url": bank + "/signin.html"})
            assert not went.is_error, text(went)
            for index, field in enumerate(("username", "password")):
                snapshot = text(await client.call_tool("browser_snapshot", {}))
                target = [line for line in snapshot.splitlines() if "textbox" in line][index]
                clicked = await client.call_tool(
                    "browser_click", {"element": field, argument: ref(target, "textbox")}
                )
                assert not clicked.is_error, text(clicked)
                filled = await client.call_tool("fill_credential", {"name": "bank", "field": field})
                assert not filled.is_error, text(filled)
                said.append(text(filled))
        return said

    said = asyncio.run(asyncio.wait_for(run(), deadline(240)))
    with sync_playwright() as pw:
        alice = pw.chromium.connect_over_cdp(browser_url(pc, "alice"), timeout=deadline(30) * 1000)
        pages = [p for p in alice.contexts[0].pages if p.url.startswith(bank)]
        assert pages, [p.url for p in alice.contexts[0].pages]
        checked = pages[0].evaluate("window.check()")
        assert checked["username"] is True and checked["password"] is True, checked
        alice.close()
    pc.op("credentials/clear", {"scope": "alice", "name": "bank"})

    actions = [line["action"] for line in pc.settled_log(before) if "action" in line]
    tools = [a for a in actions if a.get("tool") == "fill_credential"]
    assert [a.get("ok") for a in tools] == [False, True, True], tools
    for entry in tools:
        assert entry["who"] == "alice" and entry["via"] == "mcp" and entry["tab"], entry
        assert entry["args"]["value"] == {"withheld": "password"}, entry
    written = pc.all_log_bytes() + pc.container.get_wrapped_container().logs()
    printed = capfd.readouterr()
    for haystack in (written, (printed.out + printed.err + "\n".join(said)).encode()):
        assert PASSWORD.encode() not in haystack and TOTP_SECRET.encode() not in haystack
    # The username is in no line either (a tool's result is never logged, and
    # Playwright MCP's snapshot shows a filled text field: docs/limits.md).
    assert USERNAME.encode() not in written


def test_a_recording_holds_no_value_and_a_closed_scope_no_credential(
    pc: Computer, run_store: LocalStore, tmp_path: Path
) -> None:
    """In a scope opened on demand: a recording with the network log's bodies
    on, over fills and the page posting what they typed under a key that
    names no credential (``note``): the fill's entry opens the typed-text
    window, so no byte of the recording holds the password or the secret.
    Closing the scope drops its credentials: a scope opened again under
    its name holds none."""
    import requests

    bank = f"http://127.0.0.1:{BANK_PORT}"
    opened = pc.op("scopes/open", {})
    scope, token = opened["scope"], opened["token"]
    body = {"name": "bank", "origin": bank, "username": USERNAME, "password": PASSWORD}
    pc.op("credentials/set", {"scope": scope, **body, "totp_secret": TOTP_SECRET})
    key = f"vault-{uuid.uuid4().hex[:8]}/{scope}"
    started = pc.recording(
        "start",
        {
            "request_id": uuid.uuid4().hex,
            "upload": run_store.grant(key, started_here=False),
            "scope": scope,
            "har": {"bodies": True},
        },
    )["recording_id"]
    version = requests.get(pc.relay + "/json/version", timeout=10).json()
    with sync_playwright() as pw:
        agent = pw.chromium.connect_over_cdp(
            f"{version['webSocketDebuggerUrl']}?token={token}", timeout=deadline(30) * 1000
        )
        page = agent.contexts[0].pages[0]
        page.goto(bank + "/signin.html")
        page.focus("#password")
        _fill(page, "bank", "password")
        page.focus("#otp")
        _fill(page, "bank", "totp")
        assert page.evaluate("window.check()")["password"] is True
        assert page.evaluate("window.send()") == 501  # http.server takes no POST; it was sent
        agent.close()
    pc.recording(
        "end", {"recording_id": started, "upload": run_store.grant(key, started_here=False)}
    )
    folder = tmp_path / "recording"
    names, skipped = run_store.fetch(key, started, folder)
    assert skipped == [] and "network.har" in names, names
    har = json.loads((folder / "network.har").read_text())
    posted = [e for e in har["log"]["entries"] if e["request"]["url"].endswith("/echo")]
    assert posted and "note" in posted[0]["request"]["postData"]["text"], posted
    every = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())
    assert PASSWORD.encode() not in every and TOTP_SECRET.encode() not in every
    assert b"AgentEnv.fillCredential" in every

    pc.op("scopes/close", {"scope": scope})
    again = pc.op("scopes/open", {"name": scope})
    assert again["scope"] == scope
    assert pc.op("credentials/list", {"scope": scope}) == {"credentials": []}
    pc.op("scopes/close", {"scope": scope})
