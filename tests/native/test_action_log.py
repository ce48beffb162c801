"""The action log, end to end on the native stack (docs/spec.md section 1)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import sync_playwright

from tests.support.logfile import HELD_S, actions, all_bytes, read_log, tab_events
from tests.support.site import Site
from tests.support.stack import NativeStack
from tests.support.timing import wait_for

PASSWORD = "hunter2-Pa55word!"
COOKIE_VALUE = "cookie-secret-7731"
URL_TOKEN = "url-token-5519"
SEARCH = "blue suede shoes"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _by_method(entries: dict[int, dict[str, Any]], method: str) -> list[int]:
    return sorted(seq for seq, a in entries.items() if a.get("method") == method)


def test_a_playwright_agent_is_on_the_record(stack: NativeStack, site: Site) -> None:
    _, start = read_log(stack.app_http)
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(f"{stack.relay_http}?user=agent-7")
        context = browser.contexts[0]
        page = context.new_page()
        page.goto(f"{site.url}/?token={URL_TOKEN}")
        page.fill("#password", PASSWORD)
        page.fill("#search", SEARCH)
        context.add_cookies([{"name": "session", "value": COOKIE_VALUE, "url": site.url}])
        assert page.text_content("h1") == "Start page"
        page.click("#next")
        page.wait_for_url(f"{site.url}/next")
        page.go_back()
        page.reload()
        with page.expect_popup() as popup_info:
            page.click("#popup")
        popup = popup_info.value
        popup.wait_for_load_state()
        popup.close()
        page.close()
        browser.close()

    page_id: dict[str, str] = {}

    def closed_both() -> bool:
        lines, _ = read_log(stack.app_http, start)
        closed = [e for e in tab_events(lines) if e["event"] == "closed"]
        return len(closed) >= 2

    wait_for(closed_both, "both tabs' closed events", timeout_s=HELD_S)
    lines, _ = read_log(stack.app_http, start)
    entries = actions(lines)
    mine = {s: a for s, a in entries.items() if a.get("who") == "agent-7"}
    assert mine, "no entries for agent-7"
    for a in mine.values():
        assert ISO.match(a["at"]) and a["via"] == "cdp" and a["method"] and a["conn"] >= 1, a
        assert a["acts"] in ("acting", "reading") and isinstance(a["ok"], bool), a
    # Every command on a tab names it and its URL.
    navigate = _by_method(mine, "Page.navigate")[0]
    page_id["start"] = mine[navigate]["tab"]
    on_tab = [a for a in mine.values() if a.get("tab") == page_id["start"]]
    assert all("url" in a for a in on_tab)
    assert any(a["method"] == "Runtime.callFunctionOn" for a in on_tab)
    assert mine[navigate]["params"]["url"] == f"{site.url}/?token=REDACTED"

    typed = [mine[s]["params"]["text"] for s in _by_method(mine, "Input.insertText")]
    assert typed == [{"withheld": "password", "length": len(PASSWORD)}, SEARCH]
    cookie = next(
        a for a in mine.values() if a["method"] in ("Storage.setCookies", "Network.setCookies")
    )
    assert cookie["params"]["cookies"][0]["value"] == {
        "withheld": "cookie",
        "length": len(COOKIE_VALUE),
    }

    events = tab_events(lines)
    seqs = set(entries)
    for e in events:
        assert e["by"]["kind"] in ("command", "page", "agentenv"), e
        if e["by"]["kind"] == "command":
            assert e["by"]["entry"] in seqs and e["by"]["who"] == "agent-7"
        if e["by"]["kind"] == "page":
            assert e["by"]["after"] in seqs, e
    opened = [e for e in events if e["event"] == "opened"]
    assert entries[opened[0]["by"]["entry"]]["method"] == "Target.createTarget"
    first_nav = next(e for e in events if e["event"] == "navigated" and e["id"] == page_id["start"])
    assert first_nav["by"]["entry"] == navigate
    link = next(e for e in events if e["event"] == "navigated" and e["url"].endswith("/next"))
    assert link["by"]["kind"] == "page"
    assert entries[link["by"]["after"]]["method"] == "Input.dispatchMouseEvent"
    back = next(e for e in events if e["event"] == "navigated" and e["seq"] > link["seq"])
    assert entries[back["by"]["entry"]]["method"] == "Page.navigateToHistoryEntry"
    reload = next(e for e in events if e["event"] == "navigated" and e["seq"] > back["seq"])
    assert entries[reload["by"]["entry"]]["method"] == "Page.reload"  # same URL: its answer tells
    assert reload["url"] == back["url"]
    popup_opened = opened[1]
    assert popup_opened["by"]["kind"] == "page"
    assert entries[popup_opened["by"]["after"]]["method"] == "Input.dispatchMouseEvent"
    assert entries[popup_opened["by"]["after"]]["tab"] == page_id["start"]
    closes = [e for e in events if e["event"] == "closed"]
    assert {entries[e["by"]["entry"]]["method"] for e in closes} == {"Target.closeTarget"}
    assert {e["id"] for e in closes} == {page_id["start"], popup_opened["id"]}

    everything = all_bytes(stack.log_dir)
    for secret in (PASSWORD, COOKIE_VALUE, URL_TOKEN):
        assert secret.encode() not in everything, "a secret reached a file under the log folder"
    assert SEARCH.encode() in everything


def test_a_page_cannot_talk_the_password_check_out_of_it(stack: NativeStack, site: Site) -> None:
    """The page redefines the DOM's getters in its own world to say its
    password field is plain text; the relay's check runs in a world of its
    own, so the typing is still withheld."""
    _, start = read_log(stack.app_http)
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(f"{stack.relay_http}?user=agent-9")
        page = browser.contexts[0].new_page()
        page.goto(f"{site.url}/liar")
        assert page.evaluate("document.querySelector('#pw').type") == "text"  # the lie
        page.click("#pw")
        page.keyboard.type(PASSWORD)
        page.close()
        browser.close()

    def typed() -> list[Any] | None:
        lines, _ = read_log(stack.app_http, start)
        mine = {s: a for s, a in actions(lines).items() if a.get("who") == "agent-9"}
        keys = [mine[s] for s in _by_method(mine, "Input.dispatchKeyEvent")]
        return keys if len(keys) >= 2 * len(PASSWORD) else None

    keys = wait_for(typed, "the typed keys' entries", timeout_s=HELD_S)
    for entry in keys:
        for field in ("text", "unmodifiedText", "key", "code"):
            value = entry["params"].get(field)
            assert not isinstance(value, str) or len(value) != 1 or value in "\r", entry
    assert PASSWORD.encode() not in all_bytes(stack.log_dir)
