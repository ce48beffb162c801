"""Extensions and the browser's own UI: an extension would act in the browser
without passing the relay; the UI's chrome:// pages have powers web pages
lack. Neither is reachable, by the relay's protocol table and Chromium's policies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests

from tests.security.attacks import agent, attempt, clean, guarded
from tests.support.container import SITE, Computer, computer
from tests.support.timing import wait_for


@pytest.mark.parametrize(
    ("method", "params", "rule"),
    [
        ("Extensions.loadUnpacked", {"path": "/var/lib/agentenv/downloads"}, "not-allowed"),
        ("Extensions.getStorageItems", {"id": "a" * 32, "storageArea": "local"}, "not-allowed"),
        ("Target.exposeDevToolsProtocol", {"targetId": "X"}, "not-allowed"),
        ("Target.sendMessageToTarget", {"message": "{}", "sessionId": "S"}, "not-allowed"),
        (
            "Target.setRemoteLocations",
            {"locations": [{"host": "10.0.0.1", "port": 9222}]},
            "not-allowed",
        ),
        ("Target.openDevTools", {"targetId": "X"}, "not-allowed"),
        ("Browser.close", {}, "not-allowed"),
        ("Browser.crash", {}, "not-allowed"),
        # Confined to web URLs (Lighthouse fetches source maps with it).
        (
            "Network.loadNetworkResource",
            {"frameId": "F", "url": "file:///etc/passwd", "options": {}},
            "local-url",
        ),
        ("Browser.getBrowserCommandLine", {}, "not-allowed"),
        # On the browser's own session these would reach every agent's pages.
        ("Tracing.start", {}, "browser-wide"),
        ("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, "browser-wide"),
        ("Security.setOverrideCertificateErrors", {"override": True}, "browser-wide"),
        ("Storage.getSharedStorageEntries", {"ownerOrigin": "https://x"}, "unclassified"),
    ],
)
async def test_commands_the_table_refuses_are_refused_with_their_reason(
    target: Computer, method: str, params: dict[str, object], rule: str
) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        answer = await alice.call(method, params)
        message = answer["error"]["message"]
        assert answer["error"]["code"] == -32000 and f"guard {rule}" in message, answer
        assert "result" in await alice.call("Browser.getVersion")  # the connection goes on
    guarded(target, before, method, rule)
    clean(target)


def _raw(target: Computer, *args: str) -> Any:
    source = (Path(__file__).parent / "raw_chromium.py").read_text()
    out = target.exec("/opt/agentenv/venv/bin/python", "-c", source, *args, user="agentenv")
    return json.loads(out.strip().splitlines()[-1])


def test_chromium_itself_refuses_extensions(target: Computer) -> None:
    """The second wall: even on Chromium's own port (inside the container, past
    the relay), an unpacked extension is refused by the managed policies."""
    answer = _raw(target, "extension")
    assert "disabled by the administrator" in answer["error"]["message"], answer


def test_chromium_itself_refuses_local_urls(target: Computer) -> None:
    """The second wall for URLs: Chromium's own port, past the relay."""
    urls = [
        "file:///etc/passwd",
        "chrome://version",
        f"view-source:{SITE}/",
        "http://127.0.0.1:6666/json/version",
        "http://0.0.0.0:6666/json/version",
        "http://[::ffff:127.0.0.1]:6666/json/version",
        "http://0.0.0.0:6667/healthz",
        "http://localhost:8080/card",
    ]
    for url, text in _raw(target, "urls", *urls).items():
        assert "root:x:0:0" not in text and "webSocketDebuggerUrl" not in text, url
        assert "blocked" in text.lower(), (url, text[:200])


def _ui_target(target: Computer) -> str | None:
    """A target of the browser's own UI, from inside the container (Chromium's port)."""
    listed = json.loads(target.exec("curl", "-s", "http://127.0.0.1:6666/json/list"))
    for item in listed:
        if item["url"].startswith("chrome://") or item["type"] == "browser_ui":
            return str(item["id"])
    return None


def test_the_browser_shows_no_ui_pages(target: Computer) -> None:
    """The image turns the omnibox popups (chrome:// WebUI pages) off."""
    assert _ui_target(target) is None


@pytest.fixture(scope="module")
def with_ui(image: str) -> Iterator[Computer]:
    """A computer whose Chromium keeps its omnibox popups (as other builds
    do): the relay must hold even when the browser's own UI has targets."""
    features = {"AGENTENV_CHROMIUM_DISABLE_FEATURES": "Translate,MediaRouter,BackForwardCache"}
    with computer(image, env=features) as running:
        running.serve_site()
        yield running


async def test_the_browsers_own_ui_cannot_be_attached(with_ui: Computer) -> None:
    target = with_ui
    ui = _ui_target(target)
    assert ui is not None, "no UI target to attack: the omnibox popups did not come back"
    before = attempt(target)
    async with agent(target) as alice:
        answer = await alice.call("Target.attachToTarget", {"targetId": ui, "flatten": True})
        assert "not-a-web-target" in answer["error"]["message"]
        for method in ("Target.activateTarget", "Target.closeTarget"):
            refused = await alice.call(method, {"targetId": ui})
            assert "not-a-web-target" in refused["error"]["message"]
        # Auto-attach never hands the client a session on the UI.
        await alice.call(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
        )
        await alice.call("Browser.getVersion")  # events before this answer have arrived
        attached = [
            e["params"]["targetInfo"]
            for e in alice.events
            if e.get("method") == "Target.attachedToTarget"
        ]
        assert attached, "auto-attach attached nothing"
        assert all(not t["url"].startswith("chrome://") for t in attached), attached
    guarded(target, before, "Target.attachToTarget", "not-a-web-target")
    # Discovery lists no UI, and its page endpoint is refused before any upgrade.
    token = target.token("alice")
    listed = requests.get(f"{target.relay}/json/list?token={token}", timeout=10).json()
    assert all(not t["url"].startswith("chrome://") for t in listed), listed
    url = f"ws://{target.relay_address}/devtools/page/{ui}?token={token}"
    before = attempt(target)
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as handshake:
            await http.ws_connect(url)
    assert handshake.value.status == 403
    # On the record as the attach it stands for, naming the page it asked for.
    refused = guarded(target, before, "Target.attachToTarget", "not-a-web-target")
    assert refused["tab"] == ui and refused["ok"] is False
    clean(target)


async def test_agentenv_commands_need_the_control_token(target: Computer) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        for method, params in (
            ("AgentEnv.beginAction", {"via": "api", "who": "bob", "op": "x"}),
            ("AgentEnv.grant", {"who": "bob", "tag": "t"}),
            ("AgentEnv.reset", {"reason": "x"}),
        ):
            answer = await alice.call(method, params)
            assert "control token" in answer["error"]["message"]
    guarded(target, before, "AgentEnv.beginAction", "not-allowed")
    assert not any(x.get("reset") for x in target.log(before)[0]), "an agent wrote a reset line"
    clean(target)


async def test_a_page_launches_no_program_of_the_machine(target: Computer) -> None:
    """A page navigating to mailto: made Chromium run xdg-email and xdg-open
    (xdg-utils comes with Chromium's package), off the record. In the image
    only root may run them: Chromium's launch fails."""
    runs = "test -x /usr/bin/xdg-open && echo runs || echo no"
    assert target.exec("sh", "-c", runs, user="browser").strip() == "no"
    log = "/var/log/agentenv/chromium.log"
    lines = int(target.exec("sh", "-c", f"wc -l < {log}").strip())
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/")
        await alice.evaluate(session, "location.href = 'mailto:someone@example.org'; 1")

        def launched() -> str | None:
            text = target.exec("sh", "-c", f"tail -n +{lines + 1} {log}")
            return text if "xdg-email" in text else None

        text = wait_for(launched, "Chromium to try xdg-email", timeout_s=20)
        await alice.call("Target.closeTarget", {"targetId": tab})
    assert "failed to execvp" in text and "/usr/bin/xdg-" not in text, text
