"""Selenium with chromedriver against a running browser (``debuggerAddress``):
the eleven steps the red team counted, and what they read back.

    python selenium_session.py HOST:PORT SITE-URL [CHROMEDRIVER]

Prints one JSON line: each step's outcome (``ok`` or the error) and what the
steps read. Exits 0 when every step passed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def main() -> int:
    address, site = sys.argv[1], sys.argv[2].rstrip("/")
    driver_path = sys.argv[3] if len(sys.argv) > 3 else "/usr/bin/chromedriver"
    options = webdriver.ChromeOptions()
    options.debugger_address = address
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    steps: dict[str, str] = {}
    read: dict[str, Any] = {}

    def step(name: str, work: Callable[[], Any]) -> Any:
        try:
            found = work()
        except Exception as exc:  # the step's outcome is the report
            steps[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            return None
        steps[name] = "ok"
        return found

    try:
        step("get", lambda: driver.get(site + "/"))
        read["title"] = step("title", lambda: driver.title)
        step("type", lambda: driver.find_element(By.ID, "search").send_keys("selenium words"))
        step("click", lambda: driver.find_element(By.ID, "go").click())
        read["out"] = step("read", lambda: driver.find_element(By.ID, "out").text)
        read["script"] = step("execute_script", lambda: driver.execute_script("return 6 * 7"))
        shot = step("screenshot", driver.get_screenshot_as_png)
        read["screenshot_bytes"] = len(shot or b"")
        step("add_cookie", lambda: driver.add_cookie({"name": "sel", "value": "selenium-cookie"}))
        cookies = step("get_cookies", driver.get_cookies) or []
        read["cookies"] = sorted(c["name"] for c in cookies)
        first = driver.current_window_handle
        step("new_window", lambda: driver.switch_to.new_window("tab"))
        step("get_in_new_window", lambda: driver.get(site + "/next"))
        read["new_title"] = driver.title if steps["get_in_new_window"] == "ok" else None
        read["handles"] = len(step("window_handles", lambda: driver.window_handles) or [])
        step("switch_to_window", lambda: driver.switch_to.window(first))
        read["back_in_first"] = driver.title if steps["switch_to_window"] == "ok" else None
        step("follow_link", lambda: driver.find_element(By.ID, "next").click())
        step("back", driver.back)
        read["after_back"] = driver.title if steps["back"] == "ok" else None
    finally:
        driver.quit()
    print(json.dumps({"steps": steps, "read": read}))
    return 0 if all(v == "ok" for v in steps.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
