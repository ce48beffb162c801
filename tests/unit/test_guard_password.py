from __future__ import annotations

import pytest

from agentenv.relay.guard import check
from agentenv.relay.password import is_typing, verdict, withhold_typing

DOWNLOADS = "/home/agentenv/downloads"


@pytest.mark.parametrize("method", ["Browser.close", "Browser.crash", "Browser.crashGpuProcess"])
def test_browser_close_and_crash_blocked(method: str) -> None:
    found = check(method, {}, DOWNLOADS)
    assert found is not None and found.action == "blocked"
    assert found.rule == ("browser-close" if method == "Browser.close" else "browser-crash")


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "FILE:///etc/passwd",
        "chrome://settings",
        "Chrome://version",
        "chrome-extension://abc/page.html",
        "view-source:file:///etc/passwd",
        "VIEW-SOURCE:chrome://settings",
        " view-source: view-source:file:///x",
    ],
)
@pytest.mark.parametrize("method", ["Page.navigate", "Target.createTarget"])
def test_local_urls_blocked(method: str, url: str) -> None:
    found = check(method, {"url": url}, DOWNLOADS)
    assert found is not None and found.rule == "local-url" and found.action == "blocked"


@pytest.mark.parametrize(
    "url", ["https://example.com", "about:blank", "view-source:https://a.b", "data:text/html,x"]
)
def test_web_urls_pass(url: str) -> None:
    assert check("Page.navigate", {"url": url}, DOWNLOADS) is None


def test_downloads_only_into_the_folder() -> None:
    ok = {"behavior": "allow", "downloadPath": DOWNLOADS + "/sub"}
    assert check("Browser.setDownloadBehavior", ok, DOWNLOADS) is None
    assert check("Browser.setDownloadBehavior", {"behavior": "deny"}, DOWNLOADS) is None
    for path in ("/tmp/x", DOWNLOADS + "/../../etc", DOWNLOADS + "-evil"):
        found = check(
            "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": path}, DOWNLOADS
        )
        assert found is not None and found.rule == "download-folder" and found.action == "withheld"


def test_other_methods_pass() -> None:
    assert check("Runtime.evaluate", {"expression": "1"}, DOWNLOADS) is None
    assert check("Page.navigate", None, DOWNLOADS) is None


def test_typing() -> None:
    assert is_typing("Input.insertText", {"text": "x"})
    assert is_typing("Input.imeSetComposition", {"text": "x"})
    assert is_typing("Input.dispatchKeyEvent", {"type": "keyDown", "text": "a"})
    assert is_typing("Input.dispatchKeyEvent", {"type": "keyUp", "key": "a"})
    assert not is_typing("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter"})
    assert not is_typing("Input.dispatchMouseEvent", {"type": "mousePressed"})
    assert not is_typing("Runtime.evaluate", {"expression": "x"})


def test_withhold_typing_keeps_no_trace() -> None:
    key = {"type": "keyDown", "key": "h", "code": "KeyH", "text": "h", "windowsVirtualKeyCode": 72}
    assert withhold_typing("Input.dispatchKeyEvent", key) == {
        "type": "keyDown",
        "text": {"withheld": "password", "length": 1},
    }
    assert withhold_typing("Input.insertText", {"text": "hunter2"}) == {
        "text": {"withheld": "password", "length": 7}
    }


def test_verdict() -> None:
    def answer(value: object) -> dict[str, object]:
        return {"id": 1, "result": {"result": {"type": "string", "value": value}}}

    assert verdict(answer("no")) == "no"
    assert verdict(answer("password")) == "password"
    assert verdict(answer("undecided")) == "undecided"
    assert verdict({"id": 1, "error": {"message": "x"}}) == "undecided"
    assert verdict(None) == "undecided"


@pytest.mark.parametrize(
    "url",
    [
        "fi\tle:///etc/passwd",
        "\x01file:///etc/passwd",
        "view-source:fi\nle:///x",
        " chrome://version",
    ],
)
def test_local_urls_blocked_as_chromium_parses_them(url: str) -> None:
    found = check("Page.navigate", {"url": url}, DOWNLOADS)
    assert found is not None and found.rule == "local-url"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("Target.sendMessageToTarget", {"message": "{}", "sessionId": "S"}),
        ("Target.exposeDevToolsProtocol", {"targetId": "T"}),
        ("Target.attachToTarget", {"targetId": "T"}),
        ("Target.attachToTarget", {"targetId": "T", "flatten": False}),
    ],
)
def test_wrapped_commands_blocked(method: str, params: dict[str, object]) -> None:
    found = check(method, params, DOWNLOADS)
    assert found is not None and found.rule == "unwrapped-only" and "flatten" in found.message
    assert check("Target.attachToTarget", {"targetId": "T", "flatten": True}, DOWNLOADS) is None
