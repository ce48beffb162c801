"""A whole task through ``agentenv run`` against a real computer container."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.support.container import PLAIN_S3, site_computer
from tests.support.timing import deadline, wait_for

CONTROL = "harness-control-token-31"
SITE = "http://127.0.0.1:8000"
PAGES = {
    "index.html": "<!doctype html><title>Start</title><h1>Start</h1><input id=q>",
    "account.html": (
        "<!doctype html><title>Account</title><script>document.title ="
        " document.cookie.includes('session=') ? 'Signed in' : 'Signed out'</script>"
    ),
    "other.html": "<!doctype html><title>Other</title>",
}

AGENT = textwrap.dedent(
    """
    import os, sys
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        pages = {p.url: p for p in browser.contexts[0].pages}
        start = pages["http://127.0.0.1:8000/index.html"]
        account = pages["http://127.0.0.1:8000/account.html"]
        account.wait_for_function("document.title !== 'Account'")
        if account.title() != "Signed in":
            sys.exit(f"the background tab is {account.title()!r}")
        # What the browser_set_local_storage step set, as the site's pages read it.
        cart = start.evaluate("localStorage.getItem('cart')")
        if cart != "2":
            sys.exit(f"the site's local storage holds cart={cart!r}")
        # The computer's view (Playwright emulates focus in every page it drives).
        import json, urllib.request
        listed = urllib.request.urlopen(urllib.request.Request(
            os.environ["AGENTENV_API_URL"] + "/v1/browser/tabs/list", data=b"{}", method="POST"))
        tabs = json.loads(listed.read())
        if tabs[0]["url"] != start.url or not tabs[0]["active"]:
            sys.exit(f"the start tab is not the active one: {tabs}")
        start.fill("#q", "blue suede shoes")
        start.keyboard.press("Enter")
        browser.close()
    with open(os.environ["AGENTENV_ANSWER_FILE"], "w") as f:
        f.write("signed in")
    """
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run folders, on the host only: recordings reach them through the run's store."""
    return tmp_path_factory.mktemp("runs").resolve()


@pytest.fixture(scope="module")
def shop(image: str, lab: Any) -> Iterator[dict[str, str]]:
    """A computer the harness did not start, on the tests' network."""
    with site_computer(image, lab, CONTROL, PAGES) as served:
        yield served


def _run(
    task: dict[str, Any], folder: Path, out: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump(task))
    return subprocess.run(
        [sys.executable, "-m", "agentenv", "run", str(path), "--out", str(out), *options],
        capture_output=True,
        text=True,
        timeout=deadline(600),
        cwd=folder,
    )


def test_a_whole_task(shop: dict[str, str], lab: Any, runs: Path, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    deploy = {"type": "deploy_env", "env_id": "shop", "version": 1, "token": CONTROL, **shop}
    task = {
        "envs": {"shop": {"versions": {1: {"browsers": ["main"]}}}},
        "steps": [
            deploy,
            {
                "id": "cookie",
                "type": "browser_set_cookies",
                "env_id": "shop",
                "cookies": [{"name": "session", "value": "s3cr3t-cookie-42", "url": SITE}],
            },
            {
                "type": "browser_set_local_storage",
                "env_id": "shop",
                "origin": SITE,
                "items": {"cart": "2"},
            },
            {
                "id": "start-tab",
                "type": "browser_open_tab",
                "env_id": "shop",
                "url": f"{SITE}/index.html",
            },
            {
                "id": "bg-tab",
                "type": "browser_open_tab",
                "env_id": "shop",
                "url": f"{SITE}/account.html",
                "background": True,
            },
            {"type": "browser_connect_cdp", "env_id": "shop", "agent": "shopper"},
            {
                # Asked for by the card's params: the harness checks the real
                # card of the image lists each before it sends it.
                "type": "start_browser_recording",
                "env_id": "shop",
                "name": "run1",
                "video": {"fps": 2},
                "har": {},
                "downloads": True,
            },
            {
                "id": "agent",
                "type": "run_agent",
                "command": [sys.executable, "agent.py"],
                "timeout_s": 120,
            },
            {"type": "end_browser_recording", "env_id": "shop", "name": "run1"},
            {
                "type": "browser_activate_tab",
                "env_id": "shop",
                "url": "HTTP://127.0.0.1:8000/account.html",
            },
            {"type": "browser_close_tab", "env_id": "shop", "url": f"{SITE}/account.html"},
            {
                "id": "forget",
                "type": "browser_delete_cookies",
                "env_id": "shop",
                "domain": "127.0.0.1",
            },
            {
                "type": "export_mind2web",
                "recording": "run1",
                "task": "Check the account",
                "task_id": "t-1",
            },
            {"id": "snap", "type": "snapshot_env", "env_id": "shop"},
        ],
    }
    run = runs / "whole"
    done = _run(task, tmp_path, run, "--network", lab.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "summary: done" in done.stdout and "browser_open_tab (bg-tab) ok in" in done.stdout
    meta = json.loads((run / "metadata.json").read_text())["steps"]
    assert meta["bg-tab"]["tab"] and meta["bg-tab"]["tab"] != meta["start-tab"]["tab"]
    assert meta["forget"]["deleted"] == 1
    assert meta["agent"]["answer"] == "signed in"
    recording = next(v for v in meta.values() if v["type"] == "end_browser_recording")
    assert recording["problems"] == []
    manifest = json.loads(Path(recording["artifacts"]["manifest"]).read_text())
    # The video and network log the start asked for arrived.
    folder = Path(recording["artifacts"]["manifest"]).parent
    assert manifest["video"] is not None and manifest["video"]["chunks"], manifest["video"]
    assert (folder / manifest["video"]["chunks"][0]["file"]).stat().st_size > 0
    # (the agent's typing asks for nothing: the log is there, with no request)
    assert manifest["har"]["file"] == "network.har", manifest["har"]
    assert json.loads((folder / "network.har").read_text())["log"]["version"] == "1.2"
    kinds = [f["kind"] for f in manifest["frames"]]
    assert kinds[0] == "first" and kinds[-1] == "last" and "action" in kinds
    assert all(Path(p).read_bytes()[:2] == b"\xff\xd8" for p in recording["artifacts"]["frames"])
    result = json.loads((run / "mind2web" / "t-1" / "result.json").read_text())
    assert result["schema_version"] == "online-mind2web-v2"
    assert {"task", "task_id", "agent_final_answer", "action_history"} <= result.keys()
    assert result["agent_final_answer"] == "signed in"
    for step in result["action_history"]:
        assert set(step) == {"step", "screenshot", "url", "action", "action_status", "thought"}
        # Joined as Online-Mind2Web's src/run.py joins it.
        image = run / "mind2web" / "t-1" / "trajectory" / step["screenshot"]
        assert image.read_bytes()[:2] == b"\xff\xd8", image
        assert step["thought"] is None
    assert result["action_history"][-1]["action"] == "TASK_COMPLETE -> ANSWER: signed in"
    history = "; ".join(s["action"] for s in result["action_history"][:-1])
    assert 'type "blue suede shoes"' in history and "press Enter" in history, history
    for noise in ("Runtime", "Emulation", "Page.", "Target.", "DOM.", "Network."):
        assert noise not in history, history
    assert (run / "snapshot-shop.tar.gz").stat().st_size > 0
    # The evidence (issue 25): the computer's key pinned at deploy_env, the
    # recording verified against it once downloaded, attestation.json beside
    # result.json, and `agentenv verify` finding the pinned key by itself.
    metadata = json.loads((run / "metadata.json").read_text())
    key = metadata["keys"]["shop"]
    assert key.startswith("ed25519:") and meta["step-1"]["key"] == key
    (rec_id, entry), *_ = metadata["recordings"].items()
    assert entry["key"] == key and entry["problems"] == []
    folder = run / "recordings" / rec_id
    assert (
        entry["evidence"]["manifest_sha256"]
        == hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()
    )
    attestation = json.loads((run / "mind2web" / "t-1" / "attestation.json").read_text())
    assert attestation["verified"] is True and attestation["key"] == key
    assert attestation["image_digest"].startswith("sha256:")
    assert attestation["chromium"] and "--headless=new" in attestation["chromium_flags"]
    checked = subprocess.run(
        [sys.executable, "-m", "agentenv", "verify", str(folder)],
        capture_output=True,
        text=True,
        timeout=deadline(60),
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for path in run.rglob("*"):
        if path.is_file() and not path.name.endswith(".tar.gz"):
            assert b"s3cr3t-cookie-42" not in path.read_bytes(), path


def test_a_tab_at_an_idn_host_is_closed_by_its_url_as_written(
    shop: dict[str, str], lab: Any, runs: Path, tmp_path: Path
) -> None:
    """Chromium shows ``faß.localhost`` as ``xn--fa-hia.localhost``; the step
    names it as written and closes that tab (and only that one)."""
    written = "http://faß.localhost:8000/other.html"
    task = {
        "envs": {"shop": {"versions": {1: {"browsers": ["main"]}}}},
        "steps": [
            {"type": "deploy_env", "env_id": "shop", "token": CONTROL, **shop},
            {"id": "idn", "type": "browser_open_tab", "env_id": "shop", "url": written},
            {"id": "other", "type": "browser_open_tab", "env_id": "shop", "url": f"{SITE}/"},
            {"id": "close", "type": "browser_close_tab", "env_id": "shop", "url": written},
        ],
    }
    done = _run(task, tmp_path, runs / "idn", "--network", lab.name)
    assert done.returncode == 0, done.stdout + done.stderr
    meta = json.loads((runs / "idn" / "metadata.json").read_text())["steps"]
    assert meta["close"]["tab"] == meta["idn"]["tab"], meta
    answer = requests.post(
        shop["url"] + "/v1/browser/tabs/list",
        json={},
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=deadline(30),
    )
    open_tabs = {t["id"]: t["url"] for t in answer.json()}
    assert meta["idn"]["tab"] not in open_tabs and meta["other"]["tab"] in open_tabs, open_tabs
    requests.post(
        shop["url"] + "/v1/browser/tabs/close",
        json={"id": meta["other"]["tab"]},
        headers={"Authorization": f"Bearer {CONTROL}"},
        timeout=deadline(30),
    ).raise_for_status()


def test_a_close_naming_no_open_tab_fails_listing_them(
    shop: dict[str, str], lab: Any, runs: Path, tmp_path: Path
) -> None:
    task = {
        "envs": {"shop": {"versions": {1: {"browsers": ["main"]}}}},
        "steps": [
            {"type": "deploy_env", "env_id": "shop", "token": CONTROL, **shop},
            {"type": "browser_open_tab", "env_id": "shop", "url": f"{SITE}/other.html"},
            {
                "id": "gone",
                "type": "browser_close_tab",
                "env_id": "shop",
                "url": f"{SITE}/nowhere.html",
            },
        ],
    }
    done = _run(task, tmp_path, runs / "closing", "--network", lab.name)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no tab shows http://127.0.0.1:8000/nowhere.html" in done.stdout
    assert f"{SITE}/other.html" in done.stdout


#: A computer the harness starts takes nothing without a token; the agent's own works.
PROBE = """
import os, sys, urllib.error, urllib.request
def tabs(token):
    request = urllib.request.Request(os.environ["AGENTENV_API_URL"] + "/v1/browser/tabs/list",
                                     data=b"{}", method="POST")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        return urllib.request.urlopen(request).status
    except urllib.error.HTTPError as exc:
        return exc.code
assert "token=" in os.environ["AGENTENV_CDP_URL"], "the agent's address carries its token"
sys.exit(0 if (tabs(None), tabs(os.environ["AGENTENV_TOKEN"])) == (401, 200) else 1)
"""


@pytest.mark.parametrize("store", ["local", "file"])
def test_deploy_env_starts_and_stops_a_computer(image: str, tmp_path: Path, store: str) -> None:
    """deploy_env with an image: the docker SDK starts it, teardown ends its
    recording (through the local store, or the mounted run folder) and removes it."""
    import docker

    task = {
        "envs": {"blank": {"versions": {1: {"browsers": ["main"], "image": image}}}},
        "steps": [
            {"type": "deploy_env", "env_id": "blank"},
            {"id": "tab", "type": "browser_open_tab", "env_id": "blank", "url": "about:blank"},
            {"type": "start_browser_recording", "env_id": "blank", "name": "r"},
            {"type": "browser_connect_cdp", "env_id": "blank", "agent": "probe"},
            {"id": "probe", "type": "run_agent", "command": [sys.executable, "-c", PROBE]},
            {"type": "snapshot_env", "env_id": "blank"},
        ],
    }
    run = tmp_path / "run"
    done = _run(task, tmp_path, run, "--store", store)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "teardown: ended recording r" in done.stdout
    meta = json.loads((run / "metadata.json").read_text())["steps"]
    assert meta["step-1"]["api"].startswith("http://127.0.0.1:")
    recording = meta["step-3"]["recording_id"]
    assert meta["probe"]["exit_status"] == 0
    assert "token" not in json.dumps(meta["step-4"])  # never in the run folder
    manifest = json.loads((run / "recordings" / recording / "manifest.json").read_text())
    assert manifest["log"]["lines"] > 0
    assert [f["kind"] for f in manifest["frames"]] == ["first", "last"]
    for frame in manifest["frames"]:
        assert (run / "recordings" / recording / frame["file"]).read_bytes()[:2] == b"\xff\xd8"
    assert json.loads((run / "metadata.json").read_text())["store"].startswith(
        "s3://agentenv-" if store == "local" else "file://"
    )
    client = docker.from_env()
    left = client.containers.list(
        all=True, filters={"label": "io.agentenv.harness=1"}, ignore_removed=True
    )
    assert left == [], "teardown must remove the computer it started"


def test_a_run_with_an_s3_store_from_the_aws_environment(
    image: str, store_image: str, tmp_path: Path
) -> None:
    """``--store s3://bucket/prefix`` with the standard AWS environment: each
    recording's credentials come from STS (GetFederationToken, a session
    policy for its prefix), never the harness's own. The store is a
    container on a network of the user's (``--network``), which the computer
    joins and reaches it on by name (``--store-endpoint``); the harness
    reaches it on its published loopback port."""
    import boto3
    import docker

    secret = f"harness-secret-{uuid.uuid4().hex}"
    client = docker.from_env()
    net = client.networks.create(f"agentenv-test-{uuid.uuid4().hex[:12]}", driver="bridge")
    name = f"agentenv-test-s3-{uuid.uuid4().hex[:12]}"
    s3 = client.containers.run(
        store_image,
        detach=True,
        init=True,
        name=name,
        network=net.name,
        ports={"5000/tcp": ("127.0.0.1", None)},
        **PLAIN_S3,
    )
    try:
        s3.reload()
        endpoint = f"http://127.0.0.1:{s3.ports['5000/tcp'][0]['HostPort']}"
        aws = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "AKIAHARNESSOWN",
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        bucket = boto3.session.Session(
            aws_access_key_id=aws["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=secret,
            region_name="us-east-1",
        ).client("s3", endpoint_url=endpoint)
        wait_for(lambda: _answers(bucket), "the S3 server to answer", timeout_s=60)
        bucket.create_bucket(Bucket="team-recordings")
        task = {
            "envs": {"blank": {"versions": {1: {"browsers": ["main"], "image": image}}}},
            "steps": [
                {"type": "deploy_env", "env_id": "blank"},
                {"type": "browser_open_tab", "env_id": "blank", "url": "about:blank"},
                {"id": "start", "type": "start_browser_recording", "env_id": "blank", "name": "r"},
                # The agent is not given the harness's store credentials.
                {"id": "agent", "type": "run_agent", "env_id": "blank", "command": ["env"]},
                {"id": "end", "type": "end_browser_recording", "env_id": "blank", "name": "r"},
            ],
        }
        path = tmp_path / "task.yaml"
        path.write_text(yaml.safe_dump(task))
        run = tmp_path / "run"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentenv",
                "run",
                str(path),
                "--out",
                str(run),
                "--store",
                "s3://team-recordings/bench/2026",
                "--network",
                net.name,
                "--store-endpoint",
                f"http://{name}:5000",
            ],
            capture_output=True,
            text=True,
            timeout=deadline(600),
            env={**os.environ, **aws},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "warning" not in done.stdout, done.stdout
        meta = json.loads((run / "metadata.json").read_text())
        recording = meta["steps"]["start"]["recording_id"]
        assert meta["store"] == "s3://team-recordings/bench/2026"
        agents_env = Path(meta["steps"]["agent"]["output"]).read_text()
        assert "AWS_DEFAULT_REGION=us-east-1" in agents_env  # it ran, with what it may see
        assert "AWS_ACCESS_KEY_ID" not in agents_env  # (the secret: every file, below)
        keys = [
            o["Key"] for o in bucket.list_objects_v2(Bucket="team-recordings").get("Contents", [])
        ]
        under = f"bench/2026/{meta['run_id']}/r/{recording}/"
        assert sorted(k[len(under) :] for k in keys) == sorted(
            [
                "start.json",
                "log.jsonl",
                "log.chain.jsonl",
                "manifest.json",
                "frames/0000-first.jpg",
                "frames/0001-last.jpg",
            ]
        ), keys
        folder = run / "recordings" / recording
        assert (folder / "manifest.json").exists() and (folder / "log.jsonl").exists()
        for path_ in run.rglob("*"):
            if path_.is_file():
                assert secret.encode() not in path_.read_bytes(), path_
        assert secret not in done.stdout + done.stderr
    finally:
        s3.remove(force=True, v=True)
        net.remove()


def _answers(s3: Any) -> bool:
    try:
        s3.list_buckets()
    except Exception:
        return False
    return True


def test_the_readme_task_runs_as_written(image: str, tmp_path: Path) -> None:
    """The README's task and agent, as written, through ``agentenv run`` with the
    default store: its agent is handed a token though the task connects none
    (the computer takes no connection without one), the recording arrives
    whole, the export is written, and nothing the run made is left."""
    from tests.support.container import engine_objects
    from tests.support.readme import blocks, tasks

    (tmp_path / "task.yaml").write_text(tasks()[0])
    (tmp_path / "agent.py").write_text(next(b for b in blocks("python") if "agent.py" in b))
    before = engine_objects()
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "run", "task.yaml", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=deadline(600),
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    meta = json.loads((out / "metadata.json").read_text())
    steps = {v["type"]: v for v in meta["steps"].values()}
    assert steps["run_agent"]["answer"].startswith("looked at "), steps["run_agent"]
    assert steps["end_browser_recording"]["problems"] == []
    result = json.loads((out / "mind2web" / "t1" / "result.json").read_text())
    assert result["task"] == "Buy shoes"
    assert any("press End" in s["action"] for s in result["action_history"]), result
    assert engine_objects() - before == set()


def test_a_computer_that_cannot_reach_the_store_is_told_so_by_address(image: str) -> None:
    """Asked from inside the computer: one on the store's network reaches it;
    one off it is named with the store's address and the fix, by the
    harness's check and by the recorder's start alike."""
    from agentenv.harness.computer import ComputerError, deploy
    from agentenv.harness.local_store import start_container
    from agentenv.protocol.recording import Start

    store = start_container(say=lambda _: None)
    try:
        on = deploy(image, None, None, networks=[str(store.network)])
        off = deploy(image, None, None)
        try:
            # The container keeps the guards: unsigned requests and moto's API refused.
            import requests

            assert requests.get(f"{store.endpoint_url}/", timeout=10).status_code == 403
            moto_api = requests.post(f"{store.endpoint_url}/moto-api/reset-auth", timeout=10)
            assert moto_api.status_code == 404, moto_api.status_code
            assert store.unreachable_from(on.container) is None
            problem = store.unreachable_from(off.container)
            assert problem is not None and f"{store.computer_endpoint_url}/" in problem, problem
            assert "share a Docker network" in problem, problem
            grant = store.grant("reach/r", started_here=False)
            with pytest.raises(ComputerError) as refused:
                off.recording("start", Start, request_id=uuid.uuid4().hex, upload=grant)
            said = str(refused.value)
            host = str(store.computer_endpoint_url).split("//")[1].split(":")[0]
            assert host in said and "a network the computer joins" in said, said
            assert grant["secret_access_key"] not in said
        finally:
            on.stop()
            off.stop()
    finally:
        store.close()


TWO_AGENTS = textwrap.dedent(
    """
    import os, sys
    from playwright.sync_api import sync_playwright

    me, other = sys.argv[1], sys.argv[2]
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        context = browser.contexts[0]
        titles = sorted(p.title() for p in context.pages)
        cookies = sorted(c["name"] for c in context.cookies())
        context.pages[-1].bring_to_front()
        context.pages[-1].evaluate("document.title = document.title + ' seen'")
        browser.close()
    if f"{me}-tab" not in titles or any(other in t for t in titles):
        sys.exit(f"{me} sees the tabs {titles}")
    if cookies != [f"{me}-cookie"]:
        sys.exit(f"{me} sees the cookies {cookies}")
    door = os.environ.get("AGENTENV_DEBUGGER_ADDRESS")
    if me == "bob":  # its connect step asked for a loopback door (chromedriver's way in)
        import json, urllib.request
        listed = json.loads(urllib.request.urlopen(f"http://{door}/json/list", timeout=10).read())
        if not any(t["title"].startswith("bob-tab") for t in listed):
            sys.exit(f"bob's door lists {[t['title'] for t in listed]}")
    elif door is not None:
        sys.exit("alice got a door she did not ask for")
    with open(os.environ["AGENTENV_ANSWER_FILE"], "w") as f:
        f.write(f"{me}: mine only")
    """
)


def test_two_agents_each_get_the_state_set_for_them(image: str, tmp_path: Path) -> None:
    """Two agents on one computer, each a scope of its own: the steps naming
    an agent act in that agent's browser, and a recording naming one holds
    that agent's entries only (issue 21, points 6 and 7)."""
    (tmp_path / "agent.py").write_text(TWO_AGENTS)

    def state(agent: str) -> list[dict[str, Any]]:
        return [
            {
                "type": "browser_set_cookies",
                "env_id": "pc",
                "agent": agent,
                "cookies": [{"name": f"{agent}-cookie", "value": "v", "url": SITE}],
            },
            {
                "type": "browser_open_tab",
                "env_id": "pc",
                "agent": agent,
                "url": f"data:text/html,<title>{agent}-tab</title>",
            },
        ]

    def turn(agent: str, other: str) -> list[dict[str, Any]]:
        return [
            {
                "type": "browser_connect_cdp",
                "env_id": "pc",
                "agent": agent,
                "debugger_address": agent == "bob",
            },
            {
                "id": f"rec-{agent}",
                "type": "start_browser_recording",
                "env_id": "pc",
                "agent": agent,
                "name": agent,
            },
            {
                "id": agent,
                "type": "run_agent",
                "command": [sys.executable, "agent.py", agent, other],
            },
            {"type": "end_browser_recording", "env_id": "pc", "name": agent},
        ]

    steps: list[dict[str, Any]] = [
        {"type": "deploy_env", "env_id": "pc"},
        *state("alice"),
        *state("bob"),
        *turn("alice", "bob"),
        *turn("bob", "alice"),
    ]
    task = {
        "envs": {"pc": {"versions": {1: {"browsers": ["main"], "image": image}}}},
        "steps": steps,
    }
    run = tmp_path / "run"
    done = _run(task, tmp_path, run)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    meta = json.loads((run / "metadata.json").read_text())["steps"]
    assert meta["alice"]["answer"] == "alice: mine only", meta["alice"]
    assert meta["bob"]["answer"] == "bob: mine only", meta["bob"]
    for agent, other in (("alice", "bob"), ("bob", "alice")):
        folder = run / "recordings" / meta[f"rec-{agent}"]["recording_id"]
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["scope"] == agent, manifest
        lines = [json.loads(x) for x in (folder / "log.jsonl").read_text().splitlines()]
        assert any(x.get("action", {}).get("who") == agent for x in lines), agent
        assert not any(x.get("action", {}).get("who") == other for x in lines), agent

    # Preflight refuses a step that does not say whose browser it means.
    steps.insert(1, {"type": "browser_open_tab", "env_id": "pc", "url": "about:blank"})
    refused = _run(task, tmp_path, tmp_path / "refused")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "agent: env 'pc' has agents alice, bob" in refused.stdout + refused.stderr


CREDENTIAL_AGENT = textwrap.dedent(
    """
    import os
    from playwright.sync_api import sync_playwright

    # Everything the agent was given, printed where the run keeps its output.
    for name in sorted(os.environ):
        print(f"{name}={os.environ[name]}")
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        page = next(p for p in browser.contexts[0].pages if p.url.endswith("/index.html"))
        page.focus("#q")
        session = page.context.new_cdp_session(page)
        asked = {"name": "shop", "field": "password"}
        print("filled", session.send("AgentEnv.fillCredential", asked))
        print("read back", page.input_value("#q"))
        browser.close()
    """
)


def test_an_agent_run_by_the_harness_fills_a_credential_it_was_never_given(
    shop: dict[str, str], lab: Any, runs: Path, tmp_path: Path
) -> None:
    """``browser_set_credentials`` reads the harness's environment; the agent
    it then runs gets none of those variables (issue 45), fills the field
    with the credential, and no file of the run holds the value."""
    password = f"pw-{uuid.uuid4().hex}"
    (tmp_path / "agent.py").write_text(CREDENTIAL_AGENT)
    deploy = {"type": "deploy_env", "env_id": "shop", "version": 1, "token": CONTROL, **shop}
    credential = {
        "name": "shop",
        "origin": SITE,
        "username_env": "SHOP_USER",
        "password_env": "SHOP_PASSWORD",
    }
    task = {
        "envs": {"shop": {"versions": {1: {"browsers": ["main"]}}}},
        "steps": [
            deploy,
            {"type": "browser_set_credentials", "env_id": "shop", "credentials": [credential]},
            {"type": "browser_open_tab", "env_id": "shop", "url": f"{SITE}/index.html"},
            {
                "id": "agent",
                "type": "run_agent",
                "command": [sys.executable, "agent.py"],
                "timeout_s": 120,
            },
        ],
    }
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task))
    run = runs / "credential"
    env = dict(os.environ, SHOP_USER="shopper", SHOP_PASSWORD=password)
    command = [sys.executable, "-m", "agentenv", "run", str(path), "--out", str(run)]
    done = subprocess.run(
        [*command, "--network", lab.name],
        capture_output=True,
        text=True,
        timeout=deadline(600),
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = Path(json.loads((run / "metadata.json").read_text())["steps"]["agent"]["output"])
    # (what a failure prints never holds the value)
    output = said.read_text().replace(password, "<the password>")
    # The agent ran with its environment printed, and filled the field.
    assert "AGENTENV_CDP_URL=" in output and "filled {" in output, output
    assert "(withheld by agentenv: a credential's password)" in output, output
    given = [name for name in ("SHOP_PASSWORD", "SHOP_USER") if f"{name}=" in output]
    assert given == [], "the agent was given the credential's variables"
    found = [p for p in run.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert found == [], "the password is in the run's files (not printed here)"
    assert password not in done.stdout + done.stderr
