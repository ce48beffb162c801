"""A batch on scopes: ``agentenv run --scopes-per-computer K``.

Eight scripted tasks run four at a time on a pool of two computers (K = 2),
each task in a scope of its own opened with ``scopes/open``, recorded through
the run's store and exported for the judge; ``results.jsonl`` names the
computer and scope each ran in, and no file the batch wrote holds a token.
Then Chromium, or the relay, is killed on one computer while both hold two
tasks: its two fail as infrastructure and are tried again on another
computer, where they succeed; the other two never notice. (A relay that
restarts closes every scope opened before it and counts Chromium's restarts
from 0 again: its /metrics' start time is what tells the batch.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

from tests.integration.test_batch import agentenv_run
from tests.support.container import SUPERVISORCTL
from tests.support.timing import deadline

#: Waits (bounded) for the file named in GO before acting, after saying it began.
AGENT = textwrap.dedent(
    """
    import os, sys, time
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        page = browser.contexts[0].pages[0]
        mark = os.environ["AGENTENV_TASK_ID"] + "." + str(os.getpid())
        open(os.path.join(os.environ["MARKS"], mark), "w").close()
        end = time.monotonic() + 120
        while os.environ.get("GO") and not os.path.exists(os.environ["GO"]):
            if time.monotonic() > end:
                sys.exit(5)
            time.sleep(0.1)
        page.mouse.click(200, 200)
        page.keyboard.type("hello")
        assert len(browser.contexts) == 1, "another task's browser is visible"
        browser.close()
    with open(os.environ["AGENTENV_ANSWER_FILE"], "w") as f:
        f.write("did " + os.environ["AGENTENV_TASK_ID"])
    """
)


def _task(image: str, name: str, marks: Path, go: Path | None) -> dict[str, object]:
    env = {"AGENTENV_TASK_ID": name, "MARKS": str(marks), "GO": str(go) if go else ""}
    return {
        "envs": {"pc": {"versions": {1: {"browsers": ["main"], "image": image}}}},
        "steps": [
            {"type": "deploy_env", "env_id": "pc"},
            {"type": "browser_open_tab", "env_id": "pc", "url": "about:blank"},
            {"type": "browser_connect_cdp", "env_id": "pc", "agent": "scripted"},
            {"type": "start_browser_recording", "env_id": "pc", "name": "r"},
            {
                "id": "agent",
                "type": "run_agent",
                "command": [sys.executable, "agent.py"],
                "env": env,
                "timeout_s": 180,
            },
            {"id": "end", "type": "end_browser_recording", "env_id": "pc", "name": "r"},
            {"type": "export_mind2web", "recording": "r", "task": "type hello", "task_id": name},
        ],
    }


def _tasks(image: str, tmp_path: Path, n: int, go: Path | None) -> Path:
    (tmp_path / "agent.py").write_text(AGENT)
    marks = tmp_path / "marks"
    marks.mkdir()
    folder = tmp_path / "tasks"
    folder.mkdir()
    for i in range(n):
        name = f"task-{i:02d}"
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(_task(image, name, marks, go)))
    return folder


def _results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def _tokens_in(out: Path) -> list[str]:
    """Files under ``out`` naming a token (``token=``, a ``"token"`` field, a
    ``Bearer`` header): there must be none."""
    found = []
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            if b"token=" in text or b'"token"' in text or b"Bearer " in text:
                found.append(str(path))
    return found


def test_eight_tasks_on_two_computers_two_scopes_each(image: str, tmp_path: Path) -> None:
    folder = _tasks(image, tmp_path, 8, None)
    out = tmp_path / "batch"
    done = agentenv_run(
        tmp_path,
        str(folder),
        "--parallel",
        "4",
        "--scopes-per-computer",
        "2",
        "--out",
        str(out),
        timeout_s=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "8 tasks, 4 at a time, up to 2 a computer" in done.stdout
    results = _results(out)
    assert [r["status"] for r in results] == ["done"] * 8, results
    computers = {r["computer"] for r in results}
    assert len(computers) == 2, computers  # ceil(4 / 2)
    scopes = [r["scope"] for r in results]
    assert len(set(scopes)) == 8 and all(scopes), scopes  # a scope of its own each
    for result in results:
        assert result["scopes"] == {"scripted": result["scope"]}
        assert [a["attempt"] for a in result["attempts"]] == [1]
        assert result["attempts"][0]["computer"] == result["computer"]
        assert result["answer"] == f"did {result['task']}"
        task_out = Path(result["out"])
        meta = json.loads((task_out / "metadata.json").read_text())["steps"]
        recording = Path(meta["end"]["artifacts"]["manifest"]).parent
        manifest = json.loads((recording / "manifest.json").read_text())
        assert manifest["missing_frames"] == 0 and manifest["log"]["lines"] > 0
        assert (task_out / "mind2web" / result["task"] / "result.json").exists()
        assert result["manifest_sha256"]
    assert _tokens_in(out) == []
    assert "token=" not in done.stdout + done.stderr
    assert _computers(image) == []


def _computers(image: str) -> list[Any]:
    """The computers of ``image`` the harness started, stopped or not (the
    engine is shared: other images' are not this test's)."""
    found = docker.from_env().containers.list(
        all=True, filters={"label": "io.agentenv.harness=1"}, ignore_removed=True
    )
    return [c for c in found if image in c.image.tags]


def _kill_mid_task(
    image: str, tmp_path: Path, program: str, before_go: Callable[[Any, str], None] | None = None
) -> tuple[int, str, Any, Path]:
    """Four tasks, K = 2, on two computers; once every agent is attached and
    waiting, ``program`` is killed with -9 on one computer (supervisord
    brings it back), ``before_go`` is called with it and the pid killed, and
    the agents go on.
    Returns the batch's exit status, its output, the computer and the out folder."""
    go = tmp_path / "go"
    folder = _tasks(image, tmp_path, 4, go)
    out = tmp_path / "batch"
    arguments = [str(folder), "--parallel", "4", "--scopes-per-computer", "2"]
    batch = subprocess.Popen(
        [sys.executable, "-m", "agentenv", "run", *arguments, "--out", str(out)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        marks = tmp_path / "marks"
        end = time.monotonic() + deadline(300)
        # Every task's agent is attached and waiting on one of two running
        # computers. (A mark is a task and a pid: under load a computer can
        # break before the kill and its tasks begin again elsewhere, so the
        # tasks are counted, not the marks, and the computers are waited for.)
        while True:
            assert batch.poll() is None, "the batch ended before its agents began"
            tasks = {m.name.split(".")[0] for m in marks.iterdir()}
            computers = [c for c in _computers(image) if c.status == "running"]
            if len(tasks) == 4 and len(computers) == 2:
                break
            assert time.monotonic() < end, f"agents of {sorted(tasks)} on {len(computers)}"
            time.sleep(0.2)
        killed = computers[0]
        pid = _pid(killed, program)
        assert pid.isdigit() and int(pid) > 0, pid
        assert killed.exec_run(["kill", "-9", pid]).exit_code == 0
        if before_go is not None:
            before_go(killed, pid)
        go.touch()
        output, _ = batch.communicate(timeout=deadline(600))
    except BaseException as failed:
        # A failed check: stop the batch as Ctrl-C does, so it stops the
        # computers it started (a kill would leave them for the next tests'
        # counts), kill it only if that hangs, and show what it printed.
        if batch.poll() is None:
            batch.send_signal(signal.SIGINT)
        try:
            printed, _ = batch.communicate(timeout=deadline(120))
        except subprocess.TimeoutExpired:
            batch.kill()
            printed, _ = batch.communicate()
        failed.add_note("the batch printed:\n" + printed[-6000:])
        raise
    return batch.returncode, output, killed, out


def _pid(computer: Any, program: str) -> str:
    return str(computer.exec_run([*SUPERVISORCTL, "pid", program]).output.decode().strip())


@pytest.mark.parametrize("program", ["chromium", "relay"])
def test_a_computer_whose_chromium_or_relay_dies_fails_only_its_tasks_and_they_run_again(
    image: str, tmp_path: Path, program: str
) -> None:
    returncode, output, killed, out = _kill_mid_task(image, tmp_path, program)
    assert returncode == 0, output[-6000:]
    why = {"chromium": "its Chromium restarted", "relay": "its relay restarted"}[program]
    assert f"computer {killed.name} broke ({why})" in output, output[-4000:]
    results = _results(out)
    assert [r["status"] for r in results] == ["done"] * 4, results
    on_killed = [r for r in results if r["attempts"][0]["computer"] == killed.name]
    others = [r for r in results if r["attempts"][0]["computer"] != killed.name]
    assert len(on_killed) == 2 and len(others) == 2, results
    for result in on_killed:
        first, second = result["attempts"]
        assert first["status"] == "infrastructure" and first["computer_broke"], first
        assert second["status"] == "done" and second["computer"] != killed.name, second
        assert result["computer"] == second["computer"]
        assert Path(first["out"]).name == f"{result['task']}.attempt-1"
    for result in others:
        assert [a["status"] for a in result["attempts"]] == ["done"], result
    assert _tokens_in(out) == []
    assert _computers(image) == []


def test_a_computer_whose_app_server_restarted_is_replaced_and_its_done_tasks_stay_done(
    image: str, tmp_path: Path
) -> None:
    """The app server killed and back (its scopes known again from the
    relay's file) before the agents go on: they never notice (their CDP goes
    to the relay), their tasks are done on their first attempt, and the
    computer is still counted broken (its MCP sessions died: seen by the app's
    start time alone, as nothing the tasks asked failed) and given back."""

    def back(computer: Any, killed: str) -> None:
        # Another app process runs, and its /readyz says ready.
        ready = ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/readyz"]
        end = time.monotonic() + deadline(60)
        while _pid(computer, "app") in (killed, "0") or computer.exec_run(ready).exit_code != 0:
            assert time.monotonic() < end, "the app server did not come back"
            time.sleep(0.2)

    returncode, output, killed, out = _kill_mid_task(image, tmp_path, "app", back)
    assert returncode == 0, output[-6000:]
    assert f"computer {killed.name} broke (its app server restarted)" in output, output[-4000:]
    results = _results(out)
    assert [r["status"] for r in results] == ["done"] * 4, results
    on_killed = [r for r in results if r["attempts"][0]["computer"] == killed.name]
    assert len(on_killed) == 2, results
    for result in on_killed:
        (only,) = result["attempts"]
        assert only["status"] == "done" and only["computer_broke"], only
    assert _tokens_in(out) == []
    assert _computers(image) == []
