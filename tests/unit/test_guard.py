"""The guard: the protocol table, and parameters that reach the machine."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentenv.relay import guard
from agentenv.relay.commands import (
    BROWSER_LEVEL,
    CONFINED,
    DOMAINS,
    EXCEPTIONS,
    REFUSED,
    classify,
)
from agentenv.relay.guard import check, check_url, inside, web_target, web_url
from agentenv.relay.pinned import COMMANDS
from tests.support.traffic import CLIENTS

ROOT = Path(__file__).resolve().parents[2]
TRAFFIC = Path(__file__).parent / "traffic"


def recorded(client: str) -> set[str]:
    lines = (TRAFFIC / f"{client}.jsonl").read_text().splitlines()
    return {json.loads(line)["message"]["method"] for line in lines if line.strip()}


# -- the protocol table classifies every command ---------------------------------------


def test_every_command_of_the_pinned_protocol_is_classified() -> None:
    for method in COMMANDS:
        assert classify(method).rule != "unclassified", method
    assert set(EXCEPTIONS) <= COMMANDS, set(EXCEPTIONS) - COMMANDS
    assert set(DOMAINS) == {m.partition(".")[0] for m in COMMANDS}


def test_every_refusal_names_a_danger_and_every_confined_command_a_check() -> None:
    for method in COMMANDS:
        command = classify(method)
        assert command.why, method
        if command.kind == CONFINED:
            assert (
                method in guard.PARAMS
                or method in BROWSER_LEVEL
                # Checked by the core: its filter; where it may be sent.
                or method in ("Target.setAutoAttach", "Target.attachToBrowserTarget")
            ), method
        if command.kind == REFUSED:
            assert command.rule in ("not-allowed", "browser-wide"), method
    for method in guard.PARAMS:
        assert classify(method).kind == CONFINED, method


@pytest.mark.parametrize("client", CLIENTS)
def test_every_method_a_client_sent_passes(client: str) -> None:
    refused = {m for m in recorded(client) if classify(m).kind == REFUSED}
    assert refused == set()


#: What the first version's allowlist refused that real clients need
#: (issue 21's table): each must pass now.
NEEDED = [
    "DOM.enable",
    "DOM.getBoxModel",
    "DOM.requestNode",
    "Accessibility.queryAXTree",
    "Page.startScreencast",
    "Page.stopScreencast",
    "Page.screencastFrameAck",
    "Page.startScreenRecording",
    "Browser.setContentsSize",
    "Network.overrideNetworkState",
    "Network.setCookie",
    "HeapProfiler.enable",
    "HeapProfiler.takeHeapSnapshot",
    "Target.getDevToolsTarget",
    "Debugger.enable",
    "CSS.enable",
    "Profiler.enable",
    "Tracing.end",
    "Tracing.getCategories",
]


@pytest.mark.parametrize("method", NEEDED)
def test_what_real_clients_need_passes(method: str) -> None:
    assert check(method, {}, "/dl") is None


def test_tracing_on_a_page_passes_and_at_browser_level_is_browser_wide() -> None:
    assert check("Tracing.start", {"traceConfig": {}}, "/dl") is None
    verdict = check("Tracing.start", {}, "/dl", browser_level=True)
    assert verdict is not None and verdict.rule == "browser-wide", verdict
    raw = check("Tracing.start", {"perfettoConfig": "AAAA"}, "/dl")
    assert raw is not None and raw.rule == "browser-wide", raw
    system = check("Tracing.start", {"tracingBackend": "system"}, "/dl")
    assert system is not None and system.rule == "browser-wide", system


@pytest.mark.parametrize(
    "method", ["Fetch.enable", "Security.setIgnoreCertificateErrors", "Tracing.start"]
)
def test_settings_that_would_reach_every_agent_need_a_session(method: str) -> None:
    assert check(method, {}, "/dl") is None
    verdict = check(method, {}, "/dl", browser_level=True)
    assert verdict is not None and verdict.rule == "browser-wide", verdict
    assert "session" in verdict.message


@pytest.mark.parametrize(
    ("params", "ok"),
    [
        ({"lineNumber": 1, "url": "https://x/a.js", "condition": "x()"}, True),
        ({"lineNumber": 1, "urlRegex": ".*"}, True),
        ({"lineNumber": 1, "urlRegex": ".*", "condition": "poison()"}, False),
        ({"lineNumber": 1, "url": "", "condition": "poison()"}, False),
        ({"lineNumber": 1, "scriptHash": "ab", "condition": "poison()"}, False),
        ({"lineNumber": 1, "url": "https://x/a.js", "urlRegex": ".*", "condition": "p()"}, False),
    ],
)
def test_a_breakpoint_condition_needs_an_exact_url(params: dict[str, Any], ok: bool) -> None:
    verdict = check("Debugger.setBreakpointByUrl", params, "/dl")
    assert (verdict is None) is ok, verdict
    if not ok:
        assert verdict is not None and verdict.rule == "relay-world"


def _computer_methods() -> set[str]:
    """CDP method names the computer's own programs send (string literals)."""
    found: set[str] = set()
    folder = ROOT / "services" / "agentenv"
    for path in [folder / "relay_link.py", *folder.glob("app/*.py"), *folder.glob("recorder/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args:
                first = node.args[0]
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name == "call" and isinstance(first, ast.Constant):
                    value = first.value
                    if isinstance(value, str) and not value.startswith("AgentEnv."):
                        found.add(value)
    return found


def test_the_computers_own_commands_pass() -> None:
    sent = _computer_methods()
    assert sent, "found no CDP calls in the app and recorder"
    assert {m for m in sent if classify(m).kind == REFUSED} == set()


@pytest.mark.parametrize(
    ("method", "rule"),
    [
        ("Extensions.loadUnpacked", "not-allowed"),
        ("Extensions.uninstall", "not-allowed"),
        ("Extensions.getStorageItems", "not-allowed"),
        ("Target.exposeDevToolsProtocol", "not-allowed"),
        ("Target.sendMessageToTarget", "not-allowed"),
        ("Target.setRemoteLocations", "not-allowed"),
        ("Target.openDevTools", "not-allowed"),
        ("Browser.close", "not-allowed"),
        ("Browser.crash", "not-allowed"),
        ("Browser.crashGpuProcess", "not-allowed"),
        ("Browser.getBrowserCommandLine", "not-allowed"),
        ("Browser.executeBrowserCommand", "not-allowed"),
        ("Browser.getHistograms", "browser-wide"),
        ("Page.crash", "not-allowed"),
        ("Network.setCookieControls", "browser-wide"),
        ("Tethering.bind", "not-allowed"),
        ("Cast.startDesktopMirroring", "not-allowed"),
        ("SystemInfo.getProcessInfo", "not-allowed"),
        ("Storage.overrideQuotaForOrigin", "not-allowed"),
        ("Storage.getSharedStorageEntries", "unclassified"),
        ("PWA.install", "not-allowed"),
        ("BluetoothEmulation.enable", "browser-wide"),
        ("Emulation.addScreen", "browser-wide"),
        ("AgentEnv.beginAction", "unclassified"),
        ("Unknown.method", "unclassified"),
        ("", "unclassified"),
    ],
)
def test_methods_the_table_refuses_are_blocked_with_their_reason(method: str, rule: str) -> None:
    verdict = check(method, {}, "/dl")
    assert verdict is not None and verdict.rule == rule and verdict.action == "blocked"
    assert f"agentenv guard {rule}" in verdict.message and "docs/security.md" in verdict.message
    assert classify(method).why in verdict.message


# -- URLs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "FILE:///etc/passwd",
        "FiLe://localhost/etc/passwd",
        "fi\tle:///etc/passwd",
        "f\nile:///etc/passwd",
        "\x01file:///etc/passwd",
        " \x00 file:///etc/passwd",
        "%66ile:///etc/passwd",
        "%2566ile:///etc/passwd",
        "%46ILE:///etc/passwd",
        "\uff46\uff49\uff4c\uff45:///etc/passwd",  # fullwidth letters
        "chrome://settings",
        "Chrome://version",
        " chrome://version",
        "%63hrome://version",
        "chrome-extension://abc/page.html",
        "chrome-untrusted://terminal/",
        "chrome-search://local-ntp/",
        "devtools://devtools/bundled/inspector.html",
        "view-source:file:///etc/passwd",
        "VIEW-SOURCE:chrome://settings",
        " view-source: view-source:file:///x",
        "view-source:%66ile:///etc/passwd",
        "view-source:",
        "about:version",
        "about:settings",
        "ABOUT:Version",
        "filesystem:http://x/temporary/a",
        "blob:file:///uuid",
        "blob:null/uuid",
        "javascript:alert(1)",
        "/etc/passwd",
        "etc/passwd",
        "example.com",
        "intent://x#Intent;end",
        "isolated-app://abc/",
    ],
)
@pytest.mark.parametrize("method", ["Page.navigate", "Target.createTarget"])
def test_urls_that_are_not_web_pages_are_blocked(method: str, url: str) -> None:
    verdict = check(method, {"url": url}, "/dl")
    assert verdict is not None and verdict.rule == "local-url" and verdict.action == "blocked"
    assert url.strip() not in verdict.message or not url.strip()


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com",
        "HTTP://EXAMPLE.COM/a?b=c",
        "  https://example.com  ",
        "about:blank",
        "about:blank#x",
        "ABOUT:BLANK",
        "about:srcdoc",
        "view-source:https://a.b",
        "data:text/html,x",
        "blob:https://example.com/uuid",
        "https://example.com/file:///etc/passwd",
    ],
)
def test_web_urls_pass(url: str) -> None:
    assert check("Page.navigate", {"url": url}, "/dl") is None
    assert check("Target.createTarget", {"url": url}, "/dl") is None


def test_empty_url_opens_a_blank_tab_only() -> None:
    assert check_url("") is None
    assert check("Target.createTarget", {}, "/dl") is None
    assert not web_url("view-source:")
    assert check_url(3) is not None


def test_fetch_sends_a_request_on_to_no_other_url() -> None:
    """A new URL for a paused request passes neither the policies' URL
    blocklist nor Chromium's local network checks (it reached port 9223)."""
    assert check("Fetch.continueRequest", {"requestId": "r"}, "/dl") is None
    changed = {"requestId": "r", "method": "PUT", "headers": [], "url": ""}
    assert check("Fetch.continueRequest", changed, "/dl") is None
    for url in ("https://b.example/", "http://127.0.0.1:9223/json/list", "file:///etc/passwd"):
        found = check("Fetch.continueRequest", {"requestId": "r", "url": url}, "/dl")
        assert found is not None and found.rule == "continue-url", url


def test_permissions_that_reach_the_local_network_are_not_granted() -> None:
    usual = {"permissions": ["clipboardReadWrite", "notifications", "geolocation"]}
    assert check("Browser.grantPermissions", usual, "/dl") is None
    for name in ("loopbackNetwork", "localNetworkAccess", "localNetwork", "directSockets", 7):
        grant = {"permissions": ["geolocation", name], "origin": "https://a.example"}
        found = check("Browser.grantPermissions", grant, "/dl")
        assert found is not None and found.rule == "permission", name
        one = {"permission": {"name": name}, "setting": "granted"}
        found = check("Browser.setPermission", one, "/dl")
        assert found is not None and found.rule == "permission", name
        denied = {"permission": {"name": name}, "setting": "denied"}
        assert check("Browser.setPermission", denied, "/dl") is None
    prompt = {"permission": {"name": "geolocation"}, "setting": "prompt"}
    assert check("Browser.setPermission", prompt, "/dl") is None


# -- files -----------------------------------------------------------------------------


@pytest.fixture
def downloads(tmp_path: Path) -> str:
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "ok.txt").write_text("x")
    (folder / "sub").mkdir()
    (folder / "escape").symlink_to("/etc/passwd")
    (folder / "dir-escape").symlink_to("/etc")
    return str(folder)


def test_inside_resolves_dots_and_links(downloads: str) -> None:
    assert inside(os.path.join(downloads, "ok.txt"), downloads)
    assert inside(os.path.join(downloads, "sub", "..", "ok.txt"), downloads)
    for path in (
        "/etc/passwd",
        os.path.join(downloads, "..", "x"),
        downloads + "-evil/x",
        os.path.join(downloads, "escape"),
        os.path.join(downloads, "dir-escape", "passwd"),
        "ok.txt",
        "",
        os.path.join(downloads, "ok.txt\x00"),
        None,
        42,
    ):
        assert not inside(path, downloads), path


def test_file_inputs_only_from_the_downloads_folder(downloads: str) -> None:
    good = {"files": [os.path.join(downloads, "ok.txt")], "backendNodeId": 1}
    assert check("DOM.setFileInputFiles", good, downloads) is None
    for files in (["/etc/passwd"], [os.path.join(downloads, "escape")], "x", None, [1]):
        found = check("DOM.setFileInputFiles", {"files": files, "nodeId": 1}, downloads)
        assert found is not None and found.rule == "outside-downloads"
        assert "/etc" not in found.message


def test_dropped_files_only_from_the_downloads_folder(downloads: str) -> None:
    base = {"type": "drop", "x": 1, "y": 1}
    text = {
        **base,
        "data": {"items": [{"mimeType": "text/plain", "data": "x"}], "dragOperationsMask": 1},
    }
    assert check("Input.dispatchDragEvent", text, downloads) is None
    good = {**base, "data": {"items": [], "files": [os.path.join(downloads, "ok.txt")]}}
    assert check("Input.dispatchDragEvent", good, downloads) is None
    bad = {**base, "data": {"items": [], "files": ["/home/browser/profile/Default/Cookies"]}}
    found = check("Input.dispatchDragEvent", bad, downloads)
    assert found is not None and found.rule == "outside-downloads"


def test_downloads_go_to_the_downloads_folder_whatever_was_asked(downloads: str) -> None:
    inside_folder = {"behavior": "allow", "downloadPath": os.path.join(downloads, "sub")}
    assert check("Browser.setDownloadBehavior", inside_folder, downloads) is None
    assert check("Browser.setDownloadBehavior", {"behavior": "deny"}, downloads) is None
    for path in (
        "/tmp/x",
        os.path.join(downloads, "..", ".."),
        downloads + "-evil",
        os.path.join(downloads, "dir-escape"),
    ):
        asked = {"behavior": "allowAndName", "downloadPath": path, "eventsEnabled": True}
        found = check("Browser.setDownloadBehavior", asked, downloads)
        assert found is not None and found.rule == "download-folder"
        assert found.action == "rewritten" and found.params is not None
        assert found.params == {**asked, "downloadPath": downloads}
    found = check("Browser.setDownloadBehavior", {"behavior": "allow"}, downloads)
    assert found is not None and found.params == {"behavior": "allow", "downloadPath": downloads}


# -- targets ---------------------------------------------------------------------------

TARGETS = {
    "PAGE": ("page", "https://example.com/"),
    "BLANK": ("page", "about:blank"),
    "UI": ("browser_ui", "chrome://omnibox-popup.top-chrome/"),
    "SETTINGS": ("page", "chrome://settings/"),
    "EXT": ("background_page", "chrome-extension://abc/bg.html"),
    "WORKER": ("service_worker", "https://example.com/sw.js"),
}


def test_attach_only_to_web_targets() -> None:
    def lookup(target: str) -> tuple[str, str] | None:
        return TARGETS.get(target)

    for target in ("PAGE", "BLANK", "WORKER", "NEW"):
        params = {"targetId": target, "flatten": True}
        assert check("Target.attachToTarget", params, "/dl", lookup) is None, target
    for target in ("UI", "SETTINGS", "EXT"):
        for method in ("Target.attachToTarget", "Target.activateTarget", "Target.closeTarget"):
            found = check(method, {"targetId": target, "flatten": True}, "/dl", lookup)
            assert found is not None and found.rule == "not-a-web-target", (method, target)
    wrapped = check("Target.attachToTarget", {"targetId": "PAGE"}, "/dl", lookup)
    assert wrapped is not None and wrapped.rule == "unwrapped-only"


def test_web_target_types() -> None:
    assert web_target(("iframe", "https://a.b/"))
    assert web_target(("tab", "about:blank"))
    assert web_target(("page", "chrome-error://chromewebdata/"))
    assert not web_target(("browser", ""))
    assert not web_target(("other", "https://a.b/"))
    assert not web_target(None)


def test_verdicts_are_entries() -> None:
    verdict = guard.not_allowed("Extensions.loadUnpacked")
    assert verdict.as_entry() == {"rule": "not-allowed", "action": "blocked"}


@pytest.mark.parametrize(
    "params",
    [
        {"proxyServer": "http://127.0.0.1:8081"},
        {"proxyBypassList": "<-loopback>"},
        {"originsWithUniversalAccess": ["https://a.example"]},
        # Chromium 156's name, which a blocklist of names missed (4th red team).
        {"originsWithUniversalNetworkAccess": ["https://a.example"]},
        {"someFutureRouting": "x"},
    ],
)
def test_a_browser_context_takes_no_proxy_or_universal_access(params: dict[str, Any]) -> None:
    verdict = check("Target.createBrowserContext", params, "/dl")
    assert verdict is not None and verdict.rule == "context-network"
    assert verdict.action == "blocked" and next(iter(params)) in verdict.message
    for plain in ({}, {"disposeOnDetach": True}, {"proxyServer": ""}):
        assert check("Target.createBrowserContext", plain, "/dl") is None


def test_a_new_target_is_a_plain_tab() -> None:
    """A hidden target browsed with no tab events and could not be attached to
    or closed; a tab-type target's id closed a tab tied to no page (4th red team)."""
    verdict = check("Target.createTarget", {"url": "https://a.example/", "hidden": True}, "/dl")
    assert verdict is not None and verdict.rule == "hidden-target"
    # A tab-type target is a tab (chromedriver's new window): its page is tied
    # to the command once the watcher finds it.
    assert (
        check("Target.createTarget", {"url": "https://a.example/", "forTab": True}, "/dl") is None
    )
    plain = {"url": "https://a.example/", "hidden": False, "background": True}
    assert check("Target.createTarget", plain, "/dl") is None
    found = check("Target.createTarget", {"url": "file:///etc/passwd"}, "/dl")
    assert found is not None and found.rule == "local-url"


def test_a_tab_type_targets_id_closes_and_activates_nothing_without_its_page() -> None:
    """Chromium lists a "tab" target for each tab under an id that is not its
    page's: a close by it was tied to no page in the log (4th red team). With
    its page found, the rules send it for the page (tests/unit/test_core.py)."""
    known = {"T1": ("tab", "https://a.example/"), "P1": ("page", "https://a.example/")}
    for method in ("Target.closeTarget", "Target.activateTarget"):
        found = check(method, {"targetId": "T1"}, "/dl", known.get)
        assert found is not None and found.rule == "not-a-web-target" and "page" in found.message
        assert check(method, {"targetId": "P1"}, "/dl", known.get) is None
        assert check(method, {"targetId": "NEW"}, "/dl", known.get) is None


def test_input_numbers_past_any_screen_are_refused() -> None:
    """x = 3.5e38 is infinity as Chromium reads it: it rejected the input
    message and the tab took no input from anyone again (6th red team)."""
    for params in (
        {"type": "mouseMoved", "x": 3.5e38, "y": 1},
        {"type": "mouseWheel", "x": 1, "y": 1, "deltaX": 0, "deltaY": -1e39},
        {"type": "mouseMoved", "x": float("nan"), "y": 1},
    ):
        found = check("Input.dispatchMouseEvent", params, "/dl")
        assert found is not None and found.rule == "input-range", params
    touch = {"type": "touchStart", "touchPoints": [{"x": 1, "y": 1e9}]}
    assert check("Input.dispatchTouchEvent", touch, "/dl") is not None
    fine = {"type": "mousePressed", "x": 1280.5, "y": 99999, "button": "left", "clickCount": 1}
    assert check("Input.dispatchMouseEvent", fine, "/dl") is None


def test_a_path_whose_links_cannot_be_read_is_outside(
    downloads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """realpath raising (a link the relay may not read, /proc/1/cwd) dropped
    the connection with no entry; it is a path outside, refused."""
    link = os.path.join(downloads, "link")
    os.symlink("/etc", link)

    def refused(path: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "readlink", refused)
    found = check("DOM.setFileInputFiles", {"files": [link + "/passwd"], "nodeId": 1}, downloads)
    assert found is not None and found.rule == "outside-downloads"
