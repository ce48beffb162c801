"""WebArena-Verified's own evaluator scores a run made through ``agentenv run``.

No WebArena site can run here, so the computer serves a stand-in for the
shopping site's search (``/catalogsearch/result/?q=…``), and the task is
WebArena-Verified's own task 275 ("Open the search results for "xbox"", a
NAVIGATE task its NetworkEventEvaluator checks against the run's trace). A
run that searches "xbox" scores 1.0; one that searches something else fails.
The evaluator is the real ``webarena-verified`` package (pinned in
tests/clients/webarena-verified.txt, installed by scripts/test-clients.sh),
run as its own command line on the exported folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.container import site_computer
from tests.support.installs import require
from tests.support.timing import deadline

ROOT = Path(__file__).resolve().parents[2]
EVALUATOR = ROOT / "build/clients/webarena-verified/bin/webarena-verified"
CONTROL = "webarena-control-token-58"
SITE = "http://127.0.0.1:8000"
#: WebArena-Verified's task 275: NAVIGATE to __SHOPPING__/catalogsearch/result/?q=xbox.
TASK_ID = 275
#: Secrets the run carries: the site's cookie, a token in a URL, a bearer
#: header. None may be in any byte the run writes.
COOKIE = "wav-cookie-s3cr3t-91"
URL_TOKEN = "wav-url-token-s3cr3t-27"
BEARER = "wav-bearer-s3cr3t-64"
PAGES = {
    "index.html": (
        "<!doctype html><title>One Stop Market</title>"
        "<form action=/catalogsearch/result/><input id=search name=q></form>"
    ),
    "catalogsearch/result/index.html": "<!doctype html><title>Search results</title>",
    "api.json": '{"ok": true}',
}

AGENT = textwrap.dedent(
    f"""
    import json, os
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        context = browser.contexts[0]
        page = context.pages[0] if context.pages else context.new_page()
        page.goto("{SITE}/index.html?token={URL_TOKEN}")
        page.evaluate(
            "fetch('/api.json', {{headers: {{Authorization: 'Bearer {BEARER}'}}}})"
            ".then(r => r.text())"
        )
        page.fill("#search", os.environ["QUERY"])
        with page.expect_navigation():
            page.keyboard.press("Enter")
        page.wait_for_load_state()
        browser.close()
    with open(os.environ["AGENTENV_ANSWER_FILE"], "w") as f:
        json.dump({{"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}}, f)
    """
)


@pytest.fixture(scope="module")
def evaluator() -> Path:
    """``webarena-verified`` in build/clients (scripts/test-clients.sh installs it)."""
    require("webarena-verified")
    return EVALUATOR


@pytest.fixture(scope="module")
def shop(image: str, lab: Any) -> Iterator[dict[str, str]]:
    """A computer serving the stand-in site on its own loopback, on the tests' network."""
    with site_computer(image, lab, CONTROL, PAGES) as served:
        yield served


def _run(shop: dict[str, str], lab: Any, folder: Path, name: str, query: str) -> Path:
    """One run of task 275 through ``agentenv run``, exported; its folder."""
    (folder / "agent.py").write_text(AGENT)
    task = {
        "envs": {"shop": {"versions": {1: {"browsers": ["main"]}}}},
        "steps": [
            {"type": "deploy_env", "env_id": "shop", "token": CONTROL, **shop},
            {
                "type": "browser_set_cookies",
                "env_id": "shop",
                "cookies": [{"name": "session", "value": COOKIE, "url": SITE}],
            },
            {"type": "browser_connect_cdp", "env_id": "shop", "agent": "shopper"},
            {"type": "start_browser_recording", "env_id": "shop", "name": name, "har": {}},
            {
                "type": "run_agent",
                "command": [sys.executable, "agent.py"],
                "env": {"QUERY": query},
                "timeout_s": 120,
            },
            {"type": "end_browser_recording", "env_id": "shop", "name": name},
            {
                "type": "export_webarena_verified",
                "recording": name,
                "task_id": TASK_ID,
                "sites": {"shopping": SITE},
            },
        ],
    }
    (folder / "task.yaml").write_text(yaml.safe_dump(task))
    out = folder / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentenv",
            "run",
            "task.yaml",
            "--out",
            str(out),
            "--network",
            lab.name,
        ],
        capture_output=True,
        text=True,
        timeout=deadline(600),
        cwd=folder,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _score(evaluator: Path, out: Path) -> dict[str, Any]:
    """The evaluator's command line on the export; its ``eval_result.json``."""
    done = subprocess.run(
        [
            str(evaluator),
            "eval-tasks",
            "--output-dir",
            str(out / "webarena-verified"),
            "--task-ids",
            str(TASK_ID),
        ],
        capture_output=True,
        text=True,
        timeout=deadline(300),
        cwd=out,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = out / "webarena-verified" / str(TASK_ID) / "eval_result.json"
    assert found.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(found.read_text())
    return result


def _no_secret_in(out: Path) -> None:
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in (COOKIE, URL_TOKEN, BEARER):
                assert secret.encode() not in data, (secret, path)


def test_the_evaluator_scores_a_right_run_1(
    shop: dict[str, str], lab: Any, evaluator: Path, tmp_path: Path
) -> None:
    out = _run(shop, lab, tmp_path, "right", "xbox")
    folder = out / "webarena-verified" / str(TASK_ID)
    assert sorted(p.name for p in folder.iterdir()) == [
        "agent_response.json",
        "attestation.json",
        "network.har",
        "run_config.json",
    ]
    assert json.loads((folder / "agent_response.json").read_text()) == {
        "task_type": "NAVIGATE",
        "status": "SUCCESS",
        "retrieved_data": None,
        "error_details": None,
    }
    entries = json.loads((folder / "network.har").read_text())["log"]["entries"]
    urls = [e["request"]["url"] for e in entries]
    # What the secrets travelled with is there, the secrets withheld.
    assert f"{SITE}/catalogsearch/result/?q=xbox" in urls, urls
    assert any(u.startswith(f"{SITE}/index.html?token=") for u in urls), urls
    api = next(e for e in entries if e["request"]["url"] == f"{SITE}/api.json")
    names = {h["name"].lower() for h in api["request"]["headers"]}
    assert {"authorization", "cookie"} <= names, names
    assert json.loads((folder / "attestation.json").read_text())["verified"] is True
    result = _score(evaluator, out)
    assert result["status"] == "success" and result["score"] == 1.0, result
    _no_secret_in(out)


def test_the_evaluator_fails_a_wrong_run(
    shop: dict[str, str], lab: Any, evaluator: Path, tmp_path: Path
) -> None:
    out = _run(shop, lab, tmp_path, "wrong", "playstation")
    result = _score(evaluator, out)
    assert result["status"] == "failure" and result["score"] == 0.0, result
    _no_secret_in(out)
