"""BrowserGym's MiniWoB++ on an agentenv computer (issue 43, item 2), against
the built image with users, a control token and scopes on demand.

A scripted agent (tests/clients/browsergym_session.py, an oracle reading the
DOM snapshot BrowserGym observes) plays :data:`TASKS` through
``agentenv.browsergym`` and on BrowserGym's own local launch (Debian's
Chromium, the image's version), in build/clients/browsergym (browsergym-core
0.14.3, Playwright 1.44). MiniWoB++'s pages (the ``miniwob`` package's) are
served at the same address on both sides: inside the computer and on the
host.

- Through agentenv every task scores 1.0 by BrowserGym's own reward code,
  the same score and the same actions as on the local launch;
- each env ran in a scope of its own (``scopes/open``), closed at
  ``env.close()``, with a recording of its episode framing that scope;
- the action log holds the episode's commands under the scope's name: the
  observations (DOMSnapshot, the AXTree through a session on the browser
  target, screenshots) and the actions (input events);
- acting on what the goal does not name scores 0, and the same env's next
  episode (a second reset: new connections, the same scope) scores 1.0;
- with ``scope=False`` the env acts as the computer's user, in its scope;
- ``agentenv run --browsergym miniwob`` (issue 43, item 3) plays the
  documented sample (:data:`SAMPLE`: the 15 the agent solves and 15 it
  gives up on) four at a time on scopes of the batch's computers, the pages
  served by a container on the tests' network: each env's reward is
  BrowserGym's, in results.jsonl beside its computer, scope and verified
  recording;
- no token in anything the runs printed, nor in the log.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentenv.harness.hardening import writable_by_the_computer
from agentenv.opened import MINTED
from tests.support.container import CONTROL, Computer, computer
from tests.support.installs import require
from tests.support.miniwob import SAMPLE, SOLVED, html_of, pages_here, pages_on, run_sample
from tests.support.stack import ROOT
from tests.support.timing import deadline

#: The documented subset the scripted agent solves (docs/harness.md).
TASKS = SOLVED
#: Where each is acted on what its goal does not name.
WRONG = ["click-button", "click-link", "enter-text"]
SESSION = ROOT / "tests/clients/browsergym_session.py"
PYTHON = ROOT / "build/clients/browsergym/bin/python"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def python() -> str:
    """build/clients/browsergym's python (scripts/test-clients.sh browsergym)."""
    require("browsergym", timeout_s=1200)
    return str(PYTHON)


@pytest.fixture(scope="module")
def shared(python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder mounted in the computer at its own path: MiniWoB++'s pages
    (``html/``, copied from the miniwob package) and the recordings."""
    folder = tmp_path_factory.mktemp("browsergym")
    folder.chmod(0o755)
    shutil.copytree(html_of(python), folder / "html")
    writable_by_the_computer(folder / "recordings")
    return folder


@pytest.fixture(scope="module")
def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def c(image: str, shared: Path, port: int) -> Iterator[Computer]:
    env = {"AGENTENV_MAX_SCOPES": "2", "AGENTENV_UPLOAD_ROOTS": str(shared)}
    with computer(image, env=env, shared=shared) as running:
        running.serve_folder(port, str(shared / "html"))
        yield running


@pytest.fixture(scope="module")
def local_pages(shared: Path, port: int) -> Iterator[str]:
    """The same pages on the host, at the same address as in the computer."""
    with pages_here(shared / "html", port) as pages:
        yield pages


def _session(
    python: str, backend: str, tasks: list[str], env: dict[str, str], *extra: str
) -> tuple[list[dict[str, Any]], str]:
    """The session's episodes, and everything it printed."""
    done = subprocess.run(
        [python, str(SESSION), backend, ",".join(tasks), *extra],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=deadline(90 * len(tasks)),
    )
    printed = done.stdout + done.stderr
    assert done.returncode == 0, (backend, done.returncode, printed[-3000:])
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["task"] for r in rows] == tasks, printed[-3000:]
    return rows, printed


def _on_agentenv(c: Computer, shared: Path, pages: str) -> dict[str, str]:
    return {
        "AGENTENV_API": c.app,
        "AGENTENV_CDP": c.relay,
        "AGENTENV_CONTROL_TOKEN": CONTROL,
        "BROWSERGYM_UPLOAD": f"file://{shared / 'recordings'}",
        "MINIWOB_URL": pages,
    }


def _no_token(printed: str) -> None:
    assert CONTROL not in printed
    assert MINTED.search(printed) is None, "a scope's token was printed"


def test_a_scripted_agent_scores_on_agentenv_as_on_browsergyms_own_launch(
    c: Computer, python: str, shared: Path, local_pages: str
) -> None:
    before = c.log()[1]
    remote, printed = _session(python, "agentenv", TASKS, _on_agentenv(c, shared, local_pages))
    _no_token(printed)
    for row in remote:
        assert row.get("error") is None, row
        (played,) = row["episodes"]
        assert played["reward"] == 1.0 and played["terminated"], row
        # Its last observation had its AXTree and screenshot, through the relay.
        observed = played["observed"]
        assert observed["axtree_nodes"] > 5 and observed["screenshot"][2] == 3, row
    scopes = [r["episodes"][0]["scope"] for r in remote]
    assert all(scopes) and len(set(scopes)) == len(TASKS), scopes  # a scope per env
    # Each env's scope closed at env.close().
    assert c.op("scopes/list")["scopes"] == []
    # A recording per episode, of its scope, framed.
    for row, scope in zip(remote, scopes, strict=True):
        (recording,) = row["recordings"]
        assert recording["scope"] == scope and recording["frames"] >= 2, row
        manifest = shared / "recordings" / recording["recording_id"] / "manifest.json"
        assert json.loads(manifest.read_text())["scope"] == scope

    local, printed = _session(
        python, "local", TASKS, {"CHROMIUM": CHROMIUM, "MINIWOB_URL": local_pages}
    )
    _no_token(printed)
    for mine, theirs in zip(remote, local, strict=True):
        assert theirs.get("error") is None, theirs
        (played,), (also,) = mine["episodes"], theirs["episodes"]
        assert also["reward"] == 1.0, theirs
        assert (played["goal"], played["actions"]) == (also["goal"], also["actions"])
        print(f"{mine['task']}: {mine['seconds']} s on agentenv, {theirs['seconds']} s local")

    # The episodes' commands, under each scope's name.
    lines = c.settled_log(before)
    actions = [line["action"] for line in lines if "action" in line]
    for row, scope in zip(remote, scopes, strict=True):
        methods = {a.get("method") for a in actions if a.get("scope") == scope}
        for method in (
            "DOMSnapshot.captureSnapshot",
            "Accessibility.getFullAXTree",
            "Page.captureScreenshot",
            "Input.dispatchMouseEvent",
        ):
            assert method in methods, (row["task"], method, sorted(m for m in methods if m))
    typed = [a for a in actions if a.get("method") == "Input.insertText"]
    assert typed and {a.get("scope") for a in typed} <= set(scopes)
    assert CONTROL.encode() not in c.all_log_bytes()


def test_acting_on_what_the_goal_does_not_name_scores_0(
    c: Computer, python: str, shared: Path, local_pages: str
) -> None:
    """Each env plays a wrong episode, then a right one after a second reset
    (the same scope, a recording each)."""
    rows, printed = _session(
        python, "agentenv", WRONG, _on_agentenv(c, shared, local_pages), "--wrong"
    )
    _no_token(printed)
    for row in rows:
        assert row.get("error") is None, row
        assert [e["reward"] for e in row["episodes"]] == [0.0, 1.0], row
        (scope,) = {e["scope"] for e in row["episodes"]}
        assert [r["scope"] for r in row["recordings"]] == [scope, scope], row
    assert c.op("scopes/list")["scopes"] == []


def test_an_env_acts_as_the_computers_user_without_a_scope_of_its_own(
    c: Computer, python: str, shared: Path, local_pages: str
) -> None:
    """``scope=False``: the env connects with user alice's token, in alice's
    scope, recorded there; no scope is opened."""
    before = c.log()[1]
    env = {**_on_agentenv(c, shared, local_pages), "AGENTENV_AGENT_TOKEN": c.token("alice")}
    (row,), printed = _session(python, "agentenv-user", ["click-button"], env)
    _no_token(printed)
    assert c.token("alice") not in printed
    assert row.get("error") is None and row["episodes"][0]["reward"] == 1.0, row
    assert row["episodes"][0]["scope"] == "alice" and row["recordings"][0]["scope"] == "alice"
    actions = [line["action"] for line in c.settled_log(before) if "action" in line]
    clicks = [a for a in actions if a.get("method") == "Input.dispatchMouseEvent"]
    assert clicks and {(a.get("who"), a.get("scope")) for a in clicks} == {("alice", "alice")}
    assert c.op("scopes/list")["scopes"] == []


#: An env reset and never closed: the script ends, its scope listed before it ends.
LEFT_OPEN = """
import json, sys
sys.path.insert(0, "tests/clients")
from browsergym_session import make_env
from agentenv.protocol.browser import Empty
env = make_env("agentenv", "click-button")
env.reset(seed=7)
listed = [s.scope for s in env.computer.op("scopes/list", Empty).scopes]
print(json.dumps({"scope": env.scope, "listed": listed}))
"""


def test_an_env_never_closed_closes_its_scope_when_its_script_ends(
    c: Computer, python: str, shared: Path, local_pages: str
) -> None:
    """A scope left open would hold one of AGENTENV_MAX_SCOPES until the
    computer stops: the env's finalizer closes it at the interpreter's exit."""
    before = c.log()[1]
    done = subprocess.run(
        [python, "-c", LEFT_OPEN],
        cwd=ROOT,
        env={**os.environ, **_on_agentenv(c, shared, local_pages)},
        capture_output=True,
        text=True,
        timeout=deadline(120),
    )
    printed = done.stdout + done.stderr
    _no_token(printed)
    assert done.returncode == 0, printed[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["scope"] and seen["listed"] == [seen["scope"]], seen  # open while it ran
    assert c.op("scopes/list")["scopes"] == []  # closed at its exit
    closes = [
        line["action"]
        for line in c.settled_log(before)
        if line.get("action", {}).get("op") == "scopes/close"
    ]
    assert [a.get("args", {}).get("scope") for a in closes] == [seen["scope"]], closes
    # Its episode's recording was ended by the close, a manifest written.
    manifests = [json.loads(m.read_text()) for m in (shared / "recordings").glob("*/manifest.json")]
    assert [m for m in manifests if m["scope"] == seen["scope"]], "no manifest for its recording"


@pytest.fixture(scope="module")
def miniwob_site(image: str, shared: Path, lab: Any) -> Iterator[str]:
    """MiniWoB++'s pages served by a container on the tests' network: what
    the batch's computers, joining that network with ``--network``, load."""
    with pages_on(image, shared / "html", lab) as pages:
        yield pages


def test_agentenv_run_plays_the_miniwob_sample_on_scopes_with_browsergyms_rewards(
    image: str, python: str, miniwob_site: str, lab: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    done = run_sample(python, image, lab.name, miniwob_site, out)
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-4000:]
    assert f"{len(SAMPLE)} done, 0 failed, 0 infrastructure" in done.stdout, printed[-4000:]
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    by_env = {r["source"].removeprefix("browsergym/miniwob."): r for r in results}
    assert sorted(by_env) == sorted(SAMPLE)
    for name, result in by_env.items():
        # BrowserGym's reward: 1.0 where the oracle plays, 0.0 where it gave up
        # (the same as on BrowserGym's own launch: the first test here).
        assert result["reward"] == (1.0 if name in TASKS else 0.0), (name, result["out"])
        assert result["status"] == "done" and result["verified"] is True, result
        assert result["scope"] and result["computer"], result
        steps = json.loads((Path(result["out"]) / "metadata.json").read_text())["steps"]
        episode = steps["episode"]
        assert episode["env"] == f"browsergym/miniwob.{name}" and episode["seed"] == 7
        assert episode["stopped"] in ("terminated", "the agent ended it"), episode
        assert "actions" not in episode  # what an agent typed stays in the log alone
        assert isinstance(episode["action_errors"], int), episode  # counted, not quoted
        (manifest_file,) = Path(result["out"]).glob("recordings/*/manifest.json")
        manifest = json.loads(manifest_file.read_text())
        assert manifest["scope"] == result["scope"] and manifest["log"]["lines"] > 0, manifest
    # Each env in a scope of its own, on fewer computers than tasks.
    assert len({r["scope"] for r in results}) == len(SAMPLE)
    assert len({r["computer"] for r in results}) < len(SAMPLE)
    _no_token(printed)
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert (
        CONTROL.encode() not in written and MINTED.search(written.decode(errors="replace")) is None
    )
