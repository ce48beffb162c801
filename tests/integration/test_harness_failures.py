"""Every way a recording can let a run down, through ``agentenv run``, against
real computers attached by URL (sharing no folder with the harness: every
recording arrives through the run's local store).

- a missing frame gives exit status 3, unless the step is best-effort;
- a recording whose recorder was killed is ended by the restarted recorder
  from its journal (signed, whole up to the kill), and fails the run for the
  frames after it; one ended on the recorder's way down, for ending early;
- a computer that cannot be reached at teardown: registered from the store;
- a computer whose card lacks the recording extension fails the start by name;
- an end that still lacks a log entry (``log_missing``) fails its step.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests
import yaml

from agentenv.harness.attest import verify
from agentenv.harness.runner import EXIT_INFRA, EXIT_OK
from tests.support.cdp import RawCdp, browser_ws_url
from tests.support.container import SUPERVISORCTL, start_computer
from tests.support.timing import deadline

CONTROL = "failures-control-token-58"
ENVS = {"pc": {"versions": {1: {"browsers": ["main"]}}}}


def _attached(container: Any) -> dict[str, str]:
    host = container.get_container_host_ip()
    return {
        "url": f"http://{host}:{container.get_exposed_port(8080)}",
        "cdp_url": f"http://{host}:{container.get_exposed_port(9222)}",
    }


@pytest.fixture(scope="module")
def shared(image: str, lab: Any) -> Iterator[tuple[Any, dict[str, str]]]:
    container = start_computer(image, {"AGENTENV_CONTROL_TOKEN": CONTROL}, network=lab)
    try:
        yield container, _attached(container)
    finally:
        container.stop()


def _run(
    task: list[dict[str, Any]], folder: Path, network: Any
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``agentenv run`` of ``task``, its store on ``network`` (the attached computer's)."""
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump({"envs": ENVS, "steps": task}))
    out = folder / "run"
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "agentenv", "run", str(path), "--out", str(out)),
            *("--network", network.name),
        ],
        capture_output=True,
        text=True,
        timeout=deadline(600),
        cwd=folder,
    )
    return done, out


def _deploy(where: dict[str, str]) -> dict[str, Any]:
    return {"type": "deploy_env", "env_id": "pc", "token": CONTROL, **where}


def _agent(script: str) -> dict[str, Any]:
    return {"id": "agent", "type": "run_agent", "command": [sys.executable, "-c", script]}


#: Closes every tab with the control token: the recording's last frame has no tab.
CLOSE_ALL = f"""
import json, os, urllib.request
def op(name, body):
    request = urllib.request.Request(
        os.environ["AGENTENV_API_URL"] + "/v1/browser/" + name, data=json.dumps(body).encode(),
        headers={{"Authorization": "Bearer {CONTROL}", "Content-Type": "application/json"}})
    return json.loads(urllib.request.urlopen(request).read())
for tab in op("tabs/list", {{}}):
    op("tabs/close", {{"id": tab["id"]}})
"""


def _reopen(where: dict[str, str]) -> None:
    requests.post(
        where["url"] + "/v1/browser/tabs/open",
        json={},
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=30,
    ).raise_for_status()


@pytest.mark.parametrize("best_effort", [False, True])
def test_a_missing_frame_fails_the_run_unless_best_effort(
    shared: tuple[Any, dict[str, str]], lab: Any, tmp_path: Path, best_effort: bool
) -> None:
    _, where = shared
    task = [
        _deploy(where),
        {"type": "start_browser_recording", "env_id": "pc", "name": "r"},
        _agent(CLOSE_ALL),
        {
            "id": "end",
            "type": "end_browser_recording",
            "env_id": "pc",
            "name": "r",
            "fail_task_on_error": not best_effort,
        },
    ]
    try:
        done, out = _run(task, tmp_path, lab)
    finally:
        _reopen(where)
    meta = json.loads((out / "metadata.json").read_text())["steps"]
    if best_effort:
        assert done.returncode == EXIT_OK, done.stdout + done.stderr
        assert "summary: done" in done.stdout
        assert meta["end"]["ok"] is True
        assert meta["end"]["problems"] == ["1 frame(s) missing"], meta["end"]
    else:
        assert done.returncode == EXIT_INFRA, done.stdout + done.stderr
        assert "summary: infrastructure failure" in done.stdout
        assert "end_browser_recording (end) infrastructure failure" in done.stdout
        assert meta["end"]["infrastructure"] is True
        assert "1 frame(s) missing" in meta["end"]["error"]


#: Stops the recorder (supervisorctl's ``restart``: it ends its recordings on
#: the way down; ``signal KILL``: it cannot) and waits for it to be back.
#: Killed, an attacker with the engine then plants a frame in the run's store
#: (its administrator's keys read from the store's container, as the harness
#: reads them), beside the recording's files.
RECORDER_DOWN = """
import json, subprocess, sys, time
ctl = ["docker", "exec", sys.argv[1], *__CTL__]
how = sys.argv[2]
subprocess.run([*ctl, *(["restart"] if how == "restart" else ["signal", "KILL"]), "recorder"],
               check=True)
for _ in range(120):
    status = subprocess.run([*ctl, "status", "recorder"], capture_output=True, text=True).stdout
    if "RUNNING" in status and "uptime 0:00:00" not in status:
        break
    time.sleep(0.5)
else:
    sys.exit("the recorder did not come back: " + status)
if how == "kill":
    import boto3, docker
    network = docker.from_env().networks.get(sys.argv[3])
    store = next(c for c in network.containers if c.name.startswith("agentenv-store-"))
    keys = json.loads(store.exec_run(["cat", "/run/store/admin.json"], user="moto").output)
    port = store.ports["5000/tcp"][0]["HostPort"]
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                      aws_access_key_id=keys["AccessKeyId"],
                      aws_secret_access_key=keys["SecretAccessKey"])
    for bucket in s3.list_buckets()["Buckets"]:
        for found in s3.list_objects_v2(Bucket=bucket["Name"]).get("Contents", []):
            if found["Key"].endswith("/start.json"):
                s3.put_object(Bucket=bucket["Name"], Body=b"planted by an agent",
                              Key=found["Key"][: -len("start.json")] + "frames/0099-action.jpg")
""".replace("__CTL__", repr(SUPERVISORCTL))


@pytest.mark.parametrize("how", ["kill", "restart"])
def test_a_recording_outlives_its_recorder_killed_or_restarted(
    shared: tuple[Any, dict[str, str]], lab: Any, tmp_path: Path, how: str
) -> None:
    """Killed, the recorder left the recording's journal: the restarted one
    ends it from there, signed, whole up to the kill (the run fails for the
    frames after it), and a frame planted in the store after the kill is named
    as not the computer's. Restarted, it ended the recording on the way down:
    whole, but ended early."""
    container, where = shared
    cid = container.get_wrapped_container().id
    agent = {
        "id": "agent",
        "type": "run_agent",
        "command": [sys.executable, "-c", RECORDER_DOWN, cid, how, lab.name],
    }
    task = [
        _deploy(where),
        {"id": "start", "type": "start_browser_recording", "env_id": "pc", "name": "r"},
        agent,
        {"id": "end", "type": "end_browser_recording", "env_id": "pc", "name": "r"},
    ]
    done, out = _run(task, tmp_path, lab)
    assert done.returncode == EXIT_INFRA, done.stdout + done.stderr
    meta = json.loads((out / "metadata.json").read_text())["steps"]
    error = meta["end"]["error"]
    recording = out / "recordings" / meta["start"]["recording_id"]
    # What the store held arrived: the start's marker and the first frame.
    assert (recording / "start.json").exists()
    assert (recording / "frames" / "0000-first.jpg").read_bytes()[:2] == b"\xff\xd8"
    if how == "kill":
        # The computer's own manifest, rebuilt from its journal and signed:
        # the only problems are the frames after the kill, and the plant.
        restarted, verified = error.split("; it does not verify: ")
        assert re.fullmatch(
            r"its recorder restarted mid-recording: the frames, video and network log after "
            r"its last upload before the restart \(\S+Z\) are not in it \(its log and its "
            r"last frame are\)",
            restarted,
        ), error
        assert (
            verified
            == "frames/0099-action.jpg: present, not listed in the manifest (not the computer's)"
        )
        manifest = json.loads((recording / "manifest.json").read_text())
        assert manifest["rebuilt"] is True and manifest["reason"] == "completed"
        assert manifest["signature"] and manifest["log"]["lines"] > 0
        assert {"start.json", "frames/0000-first.jpg", "log.jsonl"} <= set(manifest["files"])
        assert [f["kind"] for f in manifest["frames"]] == ["first", "last"]
        (recording / "frames" / "0099-action.jpg").unlink()
        assert verify(str(recording)) == []  # against the key the run pinned
        done = subprocess.run(
            [sys.executable, "-m", "agentenv", "verify", str(recording)],
            capture_output=True,
            text=True,
            timeout=deadline(60),
        )
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        assert error == "it ended before its end step (stopped)"
        manifest = json.loads((recording / "manifest.json").read_text())
        assert manifest["reason"] == "stopped" and manifest["log"]["lines"] > 0
        assert (recording / "log.jsonl").exists()


def test_a_computer_gone_at_teardown_has_its_recording_registered_from_the_store(
    image: str, lab: Any, tmp_path: Path
) -> None:
    container = start_computer(image, {"AGENTENV_CONTROL_TOKEN": CONTROL}, network=lab)
    try:
        where = _attached(container)
        cid = container.get_wrapped_container().id
        # The first frame is taken after the start answers: the agent waits
        # (bounded) until the recorder has counted it, then kills the computer.
        kill = f"""
import subprocess, time, urllib.request
auth = {{"Authorization": "Bearer {CONTROL}"}}
ask = urllib.request.Request({where["url"] + "/metrics"!r}, headers=auth)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    text = urllib.request.urlopen(ask, timeout=5).read().decode()
    if 'agentenv_frames_total{{kind="first"}} 1.0' in text:
        break
    time.sleep(0.1)
subprocess.run(['docker', 'kill', {cid!r}], check=True)
"""
        task = [
            _deploy(where),
            {"id": "start", "type": "start_browser_recording", "env_id": "pc", "name": "r"},
            _agent(kill),
        ]
        done, out = _run(task, tmp_path, lab)
    finally:
        container.stop()
    assert done.returncode == EXIT_INFRA, done.stdout + done.stderr
    assert "teardown: registered from the store recording r" in done.stdout
    metadata = json.loads((out / "metadata.json").read_text())
    problems = metadata["teardown"]["r"]["problems"]
    assert "its log is not in the store" in problems, problems
    recording = out / "recordings" / metadata["steps"]["start"]["recording_id"]
    assert (recording / "frames" / "0000-first.jpg").read_bytes()[:2] == b"\xff\xd8"


class _NoRecordings(BaseHTTPRequestHandler):
    """A computer's API as an older image serves it: the card without recordings."""

    upstream = ""

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization",)}
        answer = requests.request(
            self.command, self.upstream + self.path, data=body or None, headers=headers, timeout=60
        )
        data = answer.content
        if self.path == "/card":
            card = answer.json()
            card["extensions"].pop("browser-recording/v1")
            data = json.dumps(card).encode()
        self.send_response(answer.status_code)
        self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _forward

    def log_message(self, *args: Any) -> None:
        return


def test_a_computer_without_the_recording_extension_fails_the_start_by_name(
    shared: tuple[Any, dict[str, str]], lab: Any, tmp_path: Path
) -> None:
    _, where = shared
    handler = type("Handler", (_NoRecordings,), {"upstream": where["url"]})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        older = {**where, "url": f"http://127.0.0.1:{server.server_port}"}
        task = [
            _deploy(older),
            {"id": "tab", "type": "browser_open_tab", "env_id": "pc", "url": "about:blank"},
            {"id": "start", "type": "start_browser_recording", "env_id": "pc", "name": "r"},
        ]
        done, out = _run(task, tmp_path, lab)
    finally:
        server.shutdown()
    assert done.returncode == EXIT_INFRA, done.stdout + done.stderr
    meta = json.loads((out / "metadata.json").read_text())["steps"]
    assert meta["tab"]["ok"] is True
    assert meta["start"]["error"] == (
        "the recording did not start: serves no browser-recording/v1 start: "
        "rebuild the image on a newer agentenv"
    )


#: Says it is under way (``go``), then waits (bounded) until the test holds a
#: command open (``held``): the command's entry is in the recording's range.
HOLDER = """
import pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
(folder / "go").touch()
end = time.monotonic() + 60
while not (folder / "held").exists():
    if time.monotonic() > end:
        sys.exit("the test never held its command open")
    time.sleep(0.05)
"""


def test_an_end_still_lacking_a_log_entry_fails_its_step(
    image: str, lab: Any, tmp_path: Path
) -> None:
    """An agent's command Chromium never answers (a promise that never
    settles) keeps its entry unwritten through the end's wait: the manifest
    lists it in ``log_missing`` and the end step fails for it. (The control
    token's own commands are not on the record: the agent is a user.)"""
    env = {"AGENTENV_CONTROL_TOKEN": CONTROL, "AGENTENV_USERS": f"holder:{HOLDER_TOKEN}"}
    container = start_computer(image, env, network=lab)
    try:
        _lacking(_attached(container), lab, tmp_path)
    finally:
        container.stop()


HOLDER_TOKEN = "holder-token-6c2e"


def _lacking(where: dict[str, str], lab: Any, tmp_path: Path) -> None:
    release = threading.Event()
    failed: list[BaseException] = []

    async def hold() -> None:
        end = time.monotonic() + deadline(120)
        while not (tmp_path / "go").exists():
            assert time.monotonic() < end, "the agent never began"
            await asyncio.sleep(0.05)
        url = browser_ws_url(where["cdp_url"], f"token={HOLDER_TOKEN}")
        async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
            cdp = RawCdp(ws)
            targets = (await cdp.call("Target.getTargets"))["result"]["targetInfos"]
            page = next(t["targetId"] for t in targets if t["type"] == "page")
            attached = await cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})
            forever = {"expression": "new Promise(() => {})", "awaitPromise": True}
            await ws.send_json(
                {
                    "id": 999,
                    "method": "Runtime.evaluate",
                    "params": forever,
                    "sessionId": attached["result"]["sessionId"],
                }
            )
            (tmp_path / "held").touch()
            assert await asyncio.to_thread(release.wait, deadline(300)), "never released"

    def holder() -> None:
        try:
            asyncio.run(hold())
        except BaseException as exc:  # reported below
            failed.append(exc)

    thread = threading.Thread(target=holder, daemon=True)
    thread.start()
    task = [
        _deploy(where),
        {"id": "start", "type": "start_browser_recording", "env_id": "pc", "name": "r"},
        {
            "id": "agent",
            "type": "run_agent",
            "command": [sys.executable, "-c", HOLDER, str(tmp_path)],
        },
        {"id": "end", "type": "end_browser_recording", "env_id": "pc", "name": "r"},
    ]
    try:
        done, out = _run(task, tmp_path, lab)
    finally:
        release.set()
        thread.join(deadline(60))
    assert not failed, failed
    assert done.returncode == EXIT_INFRA, done.stdout + done.stderr
    meta = json.loads((out / "metadata.json").read_text())["steps"]
    assert meta["end"]["infrastructure"] is True
    assert meta["end"]["error"] == "1 log entries missing", meta["end"]
