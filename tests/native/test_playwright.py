"""Playwright's connect_over_cdp through the relay, on the native stack."""

from __future__ import annotations

import threading

from playwright.sync_api import sync_playwright

from tests.support.site import Site
from tests.support.stack import NativeStack


def test_navigate_evaluate_type_screenshot(stack: NativeStack, site: Site) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(stack.relay_http)
        page = browser.contexts[0].new_page()
        page.goto(site.url + "/")
        assert page.evaluate("document.title") == "Start"
        page.fill("#search", "blue shoes")
        page.click("#go")
        assert page.text_content("#out") == "clicked:blue shoes"
        shot = page.screenshot()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 1000
        page.click("#next")
        page.wait_for_url(site.url + "/next")
        assert page.title() == "Next"
        page.close()
        browser.close()


def test_two_clients_each_see_their_own_pages(stack: NativeStack, site: Site) -> None:
    seen: dict[str, str] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2, timeout=60)

    def agent(name: str, path: str) -> None:
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.connect_over_cdp(f"{stack.relay_http}?user={name}")
                page = browser.contexts[0].new_page()
                page.goto(site.url + path)
                barrier.wait()  # both pages open at once
                seen[name] = page.title()
                page.close()
                browser.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=agent, args=("ann", "/next")),
        threading.Thread(target=agent, args=("ben", "/popup")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert seen == {"ann": "Next", "ben": "Popup"}


def test_large_messages_pass_through(stack: NativeStack, site: Site) -> None:
    """A 30 MB Runtime.evaluate result and a full-page screenshot, each way."""
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(stack.relay_http)
        page = browser.contexts[0].new_page()
        page.goto(site.url + "/tall")
        big = page.evaluate("'x'.repeat(30 * 1024 * 1024)")
        assert len(big) == 30 * 1024 * 1024
        # ... and 30 MB the other way, as a command's params.
        assert page.evaluate("s => s.length", "y" * (30 * 1024 * 1024)) == 30 * 1024 * 1024
        shot = page.screenshot(full_page=True)
        assert shot[:4] == b"\x89PNG"
        width, height = int.from_bytes(shot[16:20], "big"), int.from_bytes(shot[20:24], "big")
        assert height >= 40 * 200 and width > 0
        page.close()
        browser.close()
