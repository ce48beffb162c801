"""Many tasks through ``agentenv run --parallel``, each on its own computer.

A folder of 20 scripted tasks (two of whose agents fail) runs four at a time
on local Docker to a correct summary and results JSONL, each with its
recording; a JSONL of Online-Mind2Web tasks runs with ``--agent``, each
exported for the judge; every computer is gone afterwards.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import yaml

from tests.support.container import engine_objects
from tests.support.timing import deadline

AGENT = textwrap.dedent(
    """
    import os, sys
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        page = browser.contexts[0].pages[0]
        page.mouse.click(200, 200)
        page.keyboard.type(os.environ.get("AGENTENV_TASK", "hello"))
        browser.close()
    with open(os.environ["AGENTENV_ANSWER_FILE"], "w") as f:
        f.write("did " + os.environ.get("AGENTENV_TASK_ID", "it"))
    sys.exit(int(os.environ.get("FAIL", "0")))
    """
)


def _task(image: str, fail: bool) -> dict[str, object]:
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
                "env": {"FAIL": "1" if fail else "0"},
                "timeout_s": 120,
            },
            {"id": "end", "type": "end_browser_recording", "env_id": "pc", "name": "r"},
        ],
    }


def _left_over() -> list[object]:
    """The harness's containers on this engine, a swarm service's tasks aside
    (another backend's, which the swarm itself removes with its service)."""
    import docker

    found = docker.from_env().containers.list(
        all=True, filters={"label": "io.agentenv.harness=1"}, ignore_removed=True
    )
    return [c for c in found if "com.docker.swarm.service.name" not in c.labels]


def _counted() -> str:
    """What the engine holds, counted: volumes, and the harness's containers and networks."""
    found = engine_objects()
    kinds = ("volume", "container", "network")
    return ", ".join(f"{sum(x.startswith(k) for x in found)} {k}s" for k in kinds)


def agentenv_run(
    cwd: Path, *arguments: str, timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    """``agentenv run ARGUMENTS...`` in ``cwd``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "agentenv", "run", *arguments],
        capture_output=True,
        text=True,
        timeout=deadline(timeout_s),
        cwd=cwd,
    )


def twenty_tasks(
    image: str, tmp_path: Path, failing: set[int], *options: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """20 scripted tasks (those numbered in ``failing`` have agents that fail),
    run as one batch four at a time with ``options``; the run and its folder."""
    (tmp_path / "agent.py").write_text(AGENT)
    folder = tmp_path / "tasks"
    folder.mkdir()
    for n in range(20):
        (folder / f"task-{n:02d}.yaml").write_text(yaml.safe_dump(_task(image, n in failing)))
    out = tmp_path / "batch"
    done = agentenv_run(
        tmp_path, str(folder), "--parallel", "4", *options, "--out", str(out), timeout_s=1200
    )
    return done, out


def test_twenty_tasks_four_at_a_time(image: str, tmp_path: Path) -> None:
    """...and teardown removes everything the batch made: the computers, their
    volumes (each one's action log), the run's store and its network."""
    failing = {"task-07", "task-13"}
    before, counted = engine_objects(), _counted()
    done, out = twenty_tasks(image, tmp_path, {7, 13})
    assert done.returncode == 1, done.stdout + done.stderr  # two agents failed
    assert "20 tasks, 4 at a time" in done.stdout
    assert "running 4, finished 0 of 20:" in done.stdout, done.stdout
    summary = next(x for x in done.stdout.splitlines() if x.startswith("summary:"))
    assert "18 done, 2 failed, 0 infrastructure, 0 not run; 20 tasks in" in summary, summary
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["task"] for r in results] == [f"task-{n:02d}" for n in range(20)]
    for result in results:
        assert result["status"] == ("failed" if result["task"] in failing else "done"), result
        meta = json.loads((Path(result["out"]) / "metadata.json").read_text())["steps"]
        if result["status"] == "done":
            assert result["answer"] == "did it"
            recording = Path(meta["end"]["artifacts"]["manifest"]).parent
            manifest = json.loads((recording / "manifest.json").read_text())
            assert manifest["missing_frames"] == 0 and manifest["log"]["lines"] > 0
        else:
            assert "the agent exited with status 1" in result["failures"][0]
    # The fleet's sums: each computer's counts read once more before it stopped.
    fleet = [x for x in done.stdout.splitlines() if x.startswith("fleet:")]
    assert any(not x.startswith("fleet: 0 of") for x in fleet[:-1]), fleet[:3]
    manifests = [json.loads(p.read_text()) for p in out.glob("*/recordings/*/manifest.json")]
    assert len(manifests) == 20
    frames = sum(len(m["frames"]) for m in manifests)
    assert f"; {frames} frames, 0 missing;" in fleet[-1], (frames, fleet[-1])
    assert " 0 CDP commands" not in fleet[-1] and "(0 acting)" not in fleet[-1], fleet[-1]
    assert _left_over() == []
    assert engine_objects() - before == set(), (counted, _counted())
    # One store for the batch, on one network of its own.
    stores = {json.loads((Path(r["out"]) / "metadata.json").read_text())["store"] for r in results}
    assert len(stores) == 1 and next(iter(stores)).startswith("s3://agentenv-"), stores


def test_online_mind2web_tasks_from_a_jsonl(image: str, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    tasks = tmp_path / "tasks.jsonl"
    lines = [
        {
            "task_id": f"m2w-{n}",
            "confirmed_task": f"find item {n}",
            "website": "about:blank",
            "reference_length": 3 + n,
        }
        for n in range(3)
    ]
    tasks.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "batch"
    done = agentenv_run(
        tmp_path,
        str(tasks),
        "--parallel",
        "3",
        "--agent",
        f"{sys.executable} agent.py",
        "--image",
        image,
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 done, 0 failed, 0 infrastructure" in done.stdout
    for n in range(3):
        export = out / f"m2w-{n}" / "mind2web" / f"m2w-{n}" / "result.json"
        result = json.loads(export.read_text())
        assert result["task"] == f"find item {n}" and result["reference_length"] == 3 + n
        assert result["agent_final_answer"] == f"did m2w-{n}"
        history = [s["action"] for s in result["action_history"][:-1]]
        frames = [
            (f["kind"], f["after"], f.get("error"))
            for m in (out / f"m2w-{n}").rglob("manifest.json")
            for f in json.loads(m.read_text())["frames"]
        ]
        # Typing a word is one step; a pause under load may split it in two.
        typed = "".join(re.findall(r'type "([^"]*)"', " ".join(history)))
        assert f"find item {n}" in typed, (history, frames)
        # Beside it, the recording's evidence (issue 25), as results.jsonl has it.
        attestation = json.loads((export.parent / "attestation.json").read_text())
        assert attestation["verified"] is True, attestation
    results = {
        r["task"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    keys, computers = set(), set()
    for n in range(3):
        line = results[f"m2w-{n}"]
        attestation = json.loads(
            (out / f"m2w-{n}" / "mind2web" / f"m2w-{n}" / "attestation.json").read_text()
        )
        for field in ("image_digest", "chromium", "chromium_flags", "key", "manifest_sha256"):
            assert line[field] == attestation[field], (field, line)
        assert line["verified"] is True and isinstance(line["guard_refusals"], dict)
        assert line["image_digest"].startswith("sha256:") and line["key"].startswith("ed25519:")
        keys.add(line["key"])
        computers.add(line["computer"])
    # On scopes (three tasks, four a computer): one computer, whose key signs all three.
    assert len(computers) == 1 and len(keys) == 1, (computers, keys)
    assert _left_over() == []


def test_a_bad_task_in_a_batch_deploys_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "good.yaml").write_text(
        yaml.safe_dump({"steps": [{"type": "snapshot_env", "env_id": "x"}]})
    )
    (folder / "bad.yaml").write_text("steps: [{type: no_such_step}]")
    done = agentenv_run(tmp_path, str(folder), "--parallel", "2", timeout_s=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "unknown step type 'no_such_step'" in done.stderr and "nothing was deployed" in done.stderr
    )
    missing = tmp_path / "m.jsonl"
    missing.write_text('{"task_id": "a", "website": "https://x.test/"}\n')
    done = agentenv_run(tmp_path, str(missing), "--agent", "true", timeout_s=60)
    assert done.returncode == 2 and "needs task_id, confirmed_task and website" in done.stderr


#: The first task leaves everything a browser can keep behind.
LEAVE = textwrap.dedent(
    """
    import os
    import docker
    from playwright.sync_api import sync_playwright
    from tests.support.colours import serve_inside

    class Inside:  # the computer's container, as serve_inside drives it
        def __init__(self, container):
            self.container = container

        def exec(self, *cmd):
            assert self.container.exec_run(list(cmd)).exit_code == 0

    found = docker.from_env().containers.list(filters={"label": "io.agentenv.harness=1"})
    (container,) = [c for c in found if "com.docker.swarm.service.name" not in c.labels]
    serve_inside(Inside(container), 8100)  # localhost: a secure context, for permissions
    site = os.environ["SITE"]
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        context = browser.contexts[0]
        page = context.pages[0]
        page.goto(site + "/c/red")
        assert page.evaluate("fetch('/count').then(r => r.text())") == "1"
        # Another origin, visited and left: no tab shows it at the reset.
        page.goto(site.replace("127.0.0.1", "localhost") + "/c/red")
        page.evaluate("localStorage.setItem('elsewhere', 'behind')")
        page.goto(site + "/c/green")
        context.add_cookies([{"name": "left", "value": "behind", "url": site}])
        page.evaluate("localStorage.setItem('left', 'behind')")
        context.grant_permissions(["geolocation"], origin=site)
        with page.expect_download() as download:
            page.evaluate(
                "() => { const a = document.createElement('a');"
                " a.href = URL.createObjectURL(new Blob(['left behind']));"
                " a.download = 'left.txt'; document.body.appendChild(a); a.click(); }"
            )
        download.value.path()
        context.new_page().goto(site + "/c/blue")
        browser.close()
    """
)

#: The second finds none of it.
FIND = textwrap.dedent(
    """
    import json, os, subprocess, sys
    import docker
    from playwright.sync_api import sync_playwright

    site = os.environ["SITE"]
    found = docker.from_env().containers.list(filters={"label": "io.agentenv.harness=1"})
    (container,) = [c for c in found if "com.docker.swarm.service.name" not in c.labels]
    listed = container.exec_run(
        ["ls", "-A", "/var/lib/agentenv/downloads"], user="agentenv"
    ).output.decode()
    found = {"downloads": listed.split()}
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        context = browser.contexts[0]
        found["tabs"] = [p.url for p in context.pages]
        page = context.pages[0]
        found["history"] = page.evaluate("history.length")
        found["cookies"] = context.cookies()
        page.goto(site + "/c/yellow")
        found["storage"] = page.evaluate("localStorage.getItem('left')")
        found["cached"] = page.evaluate("fetch('/count').then(r => r.text())")
        found["permission"] = page.evaluate(
            "navigator.permissions.query({name: 'geolocation'}).then(p => p.state)"
        )
        page.goto(site.replace("127.0.0.1", "localhost") + "/c/yellow")
        found["elsewhere"] = page.evaluate("localStorage.getItem('elsewhere')")
        browser.close()
    with open(os.environ["AGENTENV_ANSWER_FILE"], "w") as f:
        f.write(json.dumps(found))
    """
)


def test_a_reused_computer_keeps_nothing_from_the_task_before(image: str, tmp_path: Path) -> None:
    from tests.support.stack import ROOT

    site = "http://127.0.0.1:8100"  # served inside the computer by the first task
    (tmp_path / "leave.py").write_text(LEAVE)
    (tmp_path / "find.py").write_text(FIND)
    folder = tmp_path / "tasks"
    folder.mkdir()
    for name, script in (("1-leave", "leave.py"), ("2-find", "find.py")):
        task = {
            "envs": {"pc": {"versions": {1: {"browsers": ["main"], "image": image}}}},
            "steps": [
                {"type": "deploy_env", "env_id": "pc"},
                {"type": "browser_connect_cdp", "env_id": "pc", "agent": "scripted"},
                {
                    "id": "agent",
                    "type": "run_agent",
                    "command": [sys.executable, script],
                    "env": {"SITE": site, "PYTHONPATH": str(ROOT)},
                    "timeout_s": 120,
                },
            ],
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(task))
    out = tmp_path / "batch"
    done = agentenv_run(tmp_path, str(folder), "--reuse", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    results = {
        r["task"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    first = json.loads((out / "1-leave" / "metadata.json").read_text())["steps"]["step-1"]
    second = json.loads((out / "2-find" / "metadata.json").read_text())["steps"]["step-1"]
    assert first["api"] == second["api"], "the second task ran on the same computer"
    found = json.loads(results["2-find"]["answer"])
    assert found == {
        "downloads": [],
        "tabs": ["about:blank"],
        "history": 1,
        "cookies": [],
        "storage": None,
        "cached": "2",  # asked again: the HTTP cache was emptied
        "elsewhere": None,  # the site visited and left was cleared too
        "permission": "prompt",
    }, found
    assert _left_over() == []


#: An agent that connects, then waits to be stopped.
WAITS = textwrap.dedent(
    """
    import os, time
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(os.environ["AGENTENV_CDP_URL"])
        browser.contexts[0].pages[0].mouse.click(100, 100)
        time.sleep(300)
    """
)


def test_ctrl_c_twice_stops_every_computer_and_ends_the_recordings(
    image: str, tmp_path: Path
) -> None:
    import queue
    import signal
    import threading

    (tmp_path / "agent.py").write_text(WAITS)
    folder = tmp_path / "tasks"
    folder.mkdir()
    for n in range(4):
        task = _task(image, False)
        (folder / f"task-{n}.yaml").write_text(yaml.safe_dump(task))
    out = tmp_path / "batch"
    command = [sys.executable, "-m", "agentenv", "run", str(folder), "--parallel", "2"]
    batch = subprocess.Popen(
        [*command, "--reuse", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in batch.stdout or []:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    said: list[str] = []
    ends = time.monotonic() + deadline(180)
    try:
        # Both agents are running once both runs show the agent's step.
        while sum("5/6 run_agent" in x for x in said[-3:]) < 2:
            assert time.monotonic() < ends, "".join(said)
            with contextlib.suppress(queue.Empty):
                said.append(lines.get(timeout=1))
        batch.send_signal(signal.SIGINT)
        time.sleep(1)
        batch.send_signal(signal.SIGINT)  # a second, impatient one
        assert batch.wait(deadline(180)) == 3
    finally:
        if batch.poll() is None:
            batch.kill()
    while not lines.empty():
        said.append(lines.get())
    text = "".join(said)
    assert "cancelling:" in text and "still stopping" in text, text
    assert "0 done" in text and "not run" in text, text
    for name in ("task-0", "task-1"):
        teardown = json.loads((out / name / "metadata.json").read_text()).get("teardown", {})
        assert teardown.get("r", {}).get("problems") == [], (name, teardown)
    assert _left_over() == []
