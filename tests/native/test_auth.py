"""Users and tokens, Host and Origin checks (docs/spec.md section 2)."""

from __future__ import annotations

import aiohttp
import pytest
import requests
from playwright.sync_api import sync_playwright

from tests.support.site import Site
from tests.support.stack import NativeStack

ALICE = "alice-token-123"
UPGRADE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


def _browser_path(stack: NativeStack) -> str:
    url = requests.get(stack.relay_http + "/json/version", timeout=10).json()
    return str(url["webSocketDebuggerUrl"]).split(str(stack.relay_port), 1)[1]


def test_json_version_answers_without_a_token(authed_stack: NativeStack) -> None:
    answer = requests.get(authed_stack.relay_http + "/json/version/", timeout=10)
    assert answer.status_code == 200
    assert answer.json()["Browser"].startswith(("Chrome/", "HeadlessChrome/"))


@pytest.mark.parametrize("path", ["/json/list", "/json", "/json/protocol"])
def test_other_discovery_needs_a_token(authed_stack: NativeStack, path: str) -> None:
    assert requests.get(authed_stack.relay_http + path, timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer not-a-token"}
    answer = requests.get(authed_stack.relay_http + path, headers=wrong, timeout=10)
    assert answer.status_code == 401
    assert "not-a-token" not in answer.text
    good = {"Authorization": f"Bearer {ALICE}"}
    assert requests.get(authed_stack.relay_http + path, headers=good, timeout=10).ok


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_upgrade_without_a_known_token_gets_401_before_the_upgrade(
    authed_stack: NativeStack, token: str | None
) -> None:
    headers = dict(UPGRADE)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    answer = requests.get(
        authed_stack.relay_http + _browser_path(authed_stack), headers=headers, timeout=10
    )
    assert answer.status_code == 401  # not 101: refused before the upgrade
    assert "token" in answer.json()["error"]["message"]


async def test_token_in_header_or_query_connects(authed_stack: NativeStack) -> None:
    path = _browser_path(authed_stack)
    async with aiohttp.ClientSession() as http:
        for url, headers in (
            (authed_stack.relay_http + path, {"Authorization": f"Bearer {ALICE}"}),
            (f"{authed_stack.relay_http}{path}?token={ALICE}", {}),
        ):
            async with http.ws_connect(url, headers=headers) as ws:
                await ws.send_json({"id": 1, "method": "Browser.getVersion"})
                answer = await ws.receive_json(timeout=10)
                assert answer["id"] == 1 and "product" in answer["result"]


def test_playwright_with_a_token(authed_stack: NativeStack, site: Site) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(
            authed_stack.relay_http, headers={"Authorization": f"Bearer {ALICE}"}
        )
        page = browser.contexts[0].new_page()
        page.goto(site.url + "/next")
        assert page.title() == "Next"
        page.close()
        browser.close()


def test_query_token_is_carried_into_websocket_urls(authed_stack: NativeStack) -> None:
    answer = requests.get(f"{authed_stack.relay_http}/json/list?token={ALICE}", timeout=10)
    urls = [t["webSocketDebuggerUrl"] for t in answer.json()]
    assert urls and all(u.endswith(f"?token={ALICE}") for u in urls)


def test_foreign_host_is_refused_and_never_reflected(authed_stack: NativeStack) -> None:
    for path in ("/json/version", "/json/list", _browser_path(authed_stack)):
        answer = requests.get(
            authed_stack.relay_http + path,
            headers={"Host": "rebind.attacker.example", **UPGRADE},
            timeout=10,
        )
        assert answer.status_code == 403
        assert "attacker" not in answer.text and "attacker" not in str(answer.headers)


def test_allowed_host_name_is_used_in_urls(authed_stack: NativeStack) -> None:
    answer = requests.get(
        authed_stack.relay_http + "/json/version",
        headers={"Host": f"computer.internal:{authed_stack.relay_port}"},
        timeout=10,
    )
    assert answer.ok
    url = answer.json()["webSocketDebuggerUrl"]
    assert url.startswith(f"ws://computer.internal:{authed_stack.relay_port}/devtools/browser/")


def test_browser_origin_not_allowed_gets_403(authed_stack: NativeStack) -> None:
    headers = {**UPGRADE, "Authorization": f"Bearer {ALICE}"}
    path = authed_stack.relay_http + _browser_path(authed_stack)
    evil = requests.get(path, headers={**headers, "Origin": "http://evil.example"}, timeout=10)
    assert evil.status_code == 403
    assert (
        requests.get(
            authed_stack.relay_http + "/json/list",
            headers={"Origin": "http://evil.example", "Authorization": f"Bearer {ALICE}"},
            timeout=10,
        ).status_code
        == 403
    )


async def test_allowed_origin_and_no_origin_connect(authed_stack: NativeStack) -> None:
    url = authed_stack.relay_http + _browser_path(authed_stack)
    async with aiohttp.ClientSession() as http:
        for origin in ("http://allowed.example", None):
            headers = {"Authorization": f"Bearer {ALICE}"}
            if origin:
                headers["Origin"] = origin
            async with http.ws_connect(url, headers=headers) as ws:
                await ws.send_json({"id": 7, "method": "Browser.getVersion"})
                assert (await ws.receive_json(timeout=10))["id"] == 7
