"""A scripted browser-use session (no LLM): the CDP traffic of an agent's steps.

    build/clients/browser-use/bin/python tests/clients/browser_use_session.py CDP-URL SITE-URL

CDP-URL is what ``BrowserSession(cdp_url=...)`` takes: ``http://host:port``
(browser-use fetches ``/json/version`` there, keeping the query string) or a
``ws://`` URL (used as it is, e.g. with ``?token=``). Run it with the python of
the venv that ``scripts/test-clients.sh browser-use`` makes (browser-use's pins
clash with ours).

It connects, navigates to SITE/ with the ``navigate`` tool, reads the browser
state the way an agent step does (DOM tree, selector map, screenshot), types
"alice" into #user with the ``input`` tool, clicks #go with the ``click`` tool
(both by element index, as an LLM would pick them), reads #out with the
``evaluate`` tool, navigates to SITE/next, goes back with ``go_back``, and
stops the session (the remote browser stays up). Prints one JSON line and
exits 0; on failure prints the error to stderr and exits 1. Telemetry, cloud
sync and version checks are off; the whole run is bounded by DEADLINE_S.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

DEADLINE_S = 90.0
ACTION_TIMEOUT_S = 20.0

# Set before browser_use is imported (in _run): it reads them at import time.
os.environ.update(
    {
        "ANONYMIZED_TELEMETRY": "false",
        "BROWSER_USE_CLOUD_SYNC": "false",
        "BROWSER_USE_VERSION_CHECK": "false",
        "BROWSER_USE_CLOUD_HINTS": "false",
        "BROWSER_USE_SETUP_LOGGING": "false",  # we log its warnings only, to stderr
    }
)
# Bounds on one tool action and on one CDP request (its defaults: 180 s, 60 s).
os.environ.setdefault("BROWSER_USE_ACTION_TIMEOUT_S", str(ACTION_TIMEOUT_S))
os.environ.setdefault("BROWSER_USE_CDP_TIMEOUT_S", str(ACTION_TIMEOUT_S))


class SessionError(Exception):
    """A step of the session did not do what it should."""


async def _run(cdp_url: str, site: str, scratch: Path) -> dict[str, Any]:
    from browser_use import BrowserProfile, BrowserSession, Tools
    from browser_use.agent.views import ActionResult

    def check(result: ActionResult, what: str) -> ActionResult:
        if result.error:
            raise SessionError(f"{what}: {result.error}")
        return result

    async def index_of(session: BrowserSession, element_id: str) -> int:
        index = await session.get_index_by_id(element_id)
        if index is None:
            raise SessionError(f"#{element_id} is not among the clickable elements")
        return index

    async def navigate(url: str) -> None:
        check(await tools.navigate(url=url, new_tab=False, browser_session=session), "navigate")

    async def evaluate(expression: str) -> str | None:
        code = f"(function(){{return {expression}}})()"
        result = check(await tools.evaluate(code=code, browser_session=session), "evaluate")
        return result.extracted_content

    profile = BrowserProfile(
        cdp_url=cdp_url, is_local=False, keep_alive=False, downloads_path=scratch / "downloads"
    )
    session = BrowserSession(browser_profile=profile)
    tools: Tools[Any] = Tools()
    try:
        await session.start()
        await navigate(f"{site}/")

        # What an agent step reads before it asks the model what to do.
        state = await session.get_browser_state_summary(include_screenshot=True)
        dom_text = state.dom_state.llm_representation()
        elements = len(state.dom_state.selector_map)
        user_index = await index_of(session, "user")
        go_index = await index_of(session, "go")

        check(await tools.input(index=user_index, text="alice", browser_session=session), "input")
        check(await tools.click(index=go_index, browser_session=session), "click")
        out = await evaluate("document.getElementById('out').textContent")
        user = await evaluate("document.getElementById('user').value")
        title = await evaluate("document.title")

        after = await session.get_browser_state_summary(include_screenshot=True)
        # The selector map is the session's, emptied by the next navigation: count now.
        after_elements = len(after.dom_state.selector_map)
        screenshot = await session.take_screenshot()

        await navigate(f"{site}/next")
        next_state = await session.get_browser_state_summary(include_screenshot=True)
        next_title = await evaluate("document.title")
        check(await tools.go_back(browser_session=session), "go_back")
        back = await session.get_browser_state_summary(include_screenshot=True)
        back_title = await evaluate("document.title")
        return {
            "client": "browser-use",
            "browser_use": version("browser-use"),
            "title": title,
            "elements": elements,
            "dom_chars": len(dom_text),
            "state_screenshot_chars": len(state.screenshot or ""),
            "user": user,
            "out": out,
            "after_click_elements": after_elements,
            "screenshot_bytes": len(screenshot),
            "next_url": next_state.url,
            "next_title": next_title,
            "back_url": back.url,
            "back_title": back_title,
            "tabs": len(back.tabs),
        }
    finally:
        await session.stop()


async def _bounded(cdp_url: str, site: str, scratch: Path) -> dict[str, Any]:
    try:
        return await asyncio.wait_for(_run(cdp_url, site, scratch), timeout=DEADLINE_S)
    except TimeoutError as e:
        raise SessionError(f"gave up after {DEADLINE_S:.0f} s") from e


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cdp_url", help="http://host:port[?query] or ws://... of the browser")
    parser.add_argument("site", help="base URL of the test site")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    with tempfile.TemporaryDirectory(prefix="browser-use-session-") as tmp:
        scratch = Path(tmp)
        # browser_use makes folders at import (a default profile's downloads and
        # user data folders in the temp folder, its config in ~/.config) and
        # never removes them: make them all in our scratch folder.
        os.environ["BROWSER_USE_CONFIG_DIR"] = str(scratch / "config")
        (scratch / "tmp").mkdir()
        tempfile.tempdir = str(scratch / "tmp")
        try:
            result = asyncio.run(_bounded(args.cdp_url, args.site.rstrip("/"), scratch))
        except Exception as e:
            print(f"browser_use_session: error: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
