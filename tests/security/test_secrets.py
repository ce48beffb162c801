"""Secrets an agent hands Chromium in shapes the log's redaction must know as
Chromium does: URL credentials in every form its URL parser reads as user
info, header names with whitespace around them, cookies without the fields
that mark a cookie elsewhere. And a browser context an agent may not route
through a proxy of its own (the computer's loopback, past the policies)."""

from __future__ import annotations

import pytest

from tests.security.attacks import agent, attempt, by, clean, entries, guarded
from tests.support.container import SITE, Computer

#: URL forms Chromium reads as http://bob:<password>@host/ (it drops tabs and
#: newlines, takes a backslash for a slash, and needs no slashes at all).
CREDENTIAL_URLS = {
    "Backslash4417": "http:\\\\bob:Backslash4417@example.invalid/",
    "OneSlash4418": "http:/bob:OneSlash4418@example.invalid/",
    "NoSlash4419": "http:bob:NoSlash4419@example.invalid/",
    "Tabbed4420": "http://bob:Tab\tbed4420@example.invalid/",
    "Newline4421": "HTTP://bob:New\nline4421@example.invalid/",
}


@pytest.mark.parametrize("method", ["Page.navigate", "Target.createTarget"])
async def test_url_credentials_are_redacted_in_every_form_chromium_reads(
    target: Computer, method: str
) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/pixels")
        for url in CREDENTIAL_URLS.values():
            if method == "Page.navigate":
                await alice.call(method, {"url": url}, session)
            else:
                opened = await alice.call(method, {"url": url})
                await alice.call("Target.closeTarget", {"targetId": opened["result"]["targetId"]})
        await alice.call("Target.closeTarget", {"targetId": tab})
    redacted = entries(
        target,
        before,
        f"five {method} entries with credentials",
        lambda a: a.get("method") == method and "@example.invalid" in str(a.get("params")),
        len(CREDENTIAL_URLS),
    )
    assert all("bob:REDACTED@" in a["params"]["url"] for a in redacted), redacted
    # The split passwords are checked whole, as Chromium reads them.
    clean(target, *CREDENTIAL_URLS, "Tab\tbed4420", "New\nline4421")


def test_url_credentials_through_the_navigate_op(target: Computer) -> None:
    before = attempt(target)
    tab = target.op("tabs/open", {"url": SITE + "/pixels"})["id"]
    url = "http://alice:Op\tTab4422@example.invalid/"  # no such host: the op answers 502
    target.op("navigate", {"url": url}, user="alice", status=502)
    target.op("tabs/close", {"id": tab})
    [entry] = entries(target, before, "the navigate op", by(op="navigate"))
    assert entry["args"] == {"url": "http://alice:REDACTED@example.invalid/"}, entry
    clean(target, "OpTab4422", "Op\tTab4422")


async def test_headers_and_cookies_in_odd_shapes_are_withheld(target: Computer) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/pixels")
        for name in ("Authorization ", " authorization", "X-Api-Token\t", "api-key", "X-Token"):
            headers = {"headers": {name: "Bearer Header4423"}}
            await alice.call("Network.setExtraHTTPHeaders", headers, session)
        cookie = {"name": "sid", "value": "Cookie4424"}
        await alice.call("Network.setCookies", {"cookies": [cookie]}, session)
        await alice.call("Network.setCookie", cookie, session)
        await alice.call("Storage.setCookies", {"cookies": [cookie]})
        await alice.call("Target.closeTarget", {"targetId": tab})
    set_headers = entries(
        target,
        before,
        "five header settings",
        lambda a: a.get("method") == "Network.setExtraHTTPHeaders",
        5,
    )
    for entry in set_headers:
        [value] = entry["params"]["headers"].values()
        assert value == {"withheld": "header", "length": len("Bearer Header4423")}, entry
    cookies = entries(
        target, before, "three cookie settings", lambda a: "Cookie" in a.get("method", ""), 3
    )
    withheld = {"withheld": "cookie", "length": len("Cookie4424")}
    for entry in cookies:
        sent = entry["params"]
        assert sent.get("value", (sent.get("cookies") or [{}])[0].get("value")) == withheld
    clean(target, "Header4423", "Cookie4424")


@pytest.mark.parametrize(
    "params",
    [
        {"proxyServer": "http://127.0.0.1:6667"},
        {"proxyServer": "socks5://localhost:8080", "proxyBypassList": "<-loopback>"},
        {"originsWithUniversalAccess": ["https://example.org"]},
        # Chromium 156's name: it lifted the same-origin policy for the origin.
        {"originsWithUniversalNetworkAccess": ["https://example.org"]},
    ],
)
async def test_a_browser_context_takes_no_proxy_or_universal_access_from_an_agent(
    target: Computer, params: dict[str, object]
) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        refused = await alice.call("Target.createBrowserContext", params)
        assert "error" in refused and "context-network" in refused["error"]["message"], refused
        plain = await alice.call("Target.createBrowserContext", {"disposeOnDetach": True})
        assert "result" in plain, plain
    entry = guarded(target, before, "Target.createBrowserContext", "context-network")
    assert entry["acts"] == "acting" and entry["params"] == params, entry


async def test_a_paused_request_goes_on_to_no_other_url(target: Computer) -> None:
    """A new URL for a paused request reached Chromium's own port (its
    /json/new, /json/close) past the policies, which read only the first."""
    before = attempt(target)
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/pixels")
        await alice.call(
            "Fetch.enable", {"patterns": [{"urlPattern": "*nothing-matches*"}]}, session
        )
        moved = {"requestId": "interception-job-1.0", "url": "http://127.0.0.1:6666/json/list"}
        refused = await alice.call("Fetch.continueRequest", moved, session)
        assert "continue-url" in refused["error"]["message"], refused
        await alice.call("Fetch.disable", {}, session)
        await alice.call("Target.closeTarget", {"targetId": tab})
    entry = guarded(target, before, "Fetch.continueRequest", "continue-url")
    assert entry["params"]["url"] == moved["url"]


async def test_no_permission_opens_the_local_network_to_pages(target: Computer) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        for name in ("loopbackNetwork", "localNetworkAccess", "localNetwork"):
            grant = {"permissions": [name], "origin": "https://a.example"}
            refused = await alice.call("Browser.grantPermissions", grant)
            assert "permission" in refused["error"]["message"], refused
            one = {"permission": {"name": name}, "setting": "granted", "origin": SITE}
            refused = await alice.call("Browser.setPermission", one)
            assert "permission" in refused["error"]["message"], refused
        usual = {"permissions": ["geolocation"], "origin": SITE}
        assert "result" in await alice.call("Browser.grantPermissions", usual)
        await alice.call("Browser.resetPermissions", {})
    entry = guarded(target, before, "Browser.grantPermissions", "permission")
    assert entry["acts"] == "acting" and entry["params"]["permissions"] == ["loopbackNetwork"]
    guarded(target, before, "Browser.setPermission", "permission")


@pytest.mark.parametrize("flag", ["hidden"])
async def test_a_new_target_is_a_tab_on_the_record(target: Computer, flag: str) -> None:
    """A hidden target browsed with no tab events, and no agent could attach
    to it or close it. (A tab-type target, ``forTab``, is a tab: its page is
    tied to the command; tests/integration/test_clients.py drives it with
    Selenium.)"""
    before = attempt(target)
    async with agent(target) as alice:
        listed = await alice.call("Target.getTargets")
        count = len(listed["result"]["targetInfos"])
        refused = await alice.call("Target.createTarget", {"url": SITE + "/", flag: True})
        assert "hidden-target" in refused["error"]["message"], refused
        after = await alice.call("Target.getTargets")
        assert len(after["result"]["targetInfos"]) == count
    guarded(target, before, "Target.createTarget", "hidden-target")
    clean(target)
