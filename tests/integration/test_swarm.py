"""Tasks on computers that are Docker Swarm services (``--backend swarm``).

The test makes this machine's engine a one-node swarm (``docker swarm
init``), runs a folder of 20 scripted tasks four at a time on computers that
are swarm services, checks the summary and that every service is gone, and
leaves the swarm at the end (unless the engine was in one before).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.test_batch import twenty_tasks
from tests.support.container import engine_objects
from tests.support.timing import wait_for


def test_twenty_tasks_on_swarm_services(swarm: Any, image: str, tmp_path: Path) -> None:
    """...recorded through the run's store on an attachable overlay network the
    services join; after the batch no service, task container, volume,
    network or store is left (the swarm removes a service's task container
    after the service: waited for, bounded)."""
    before = engine_objects()
    done, out = twenty_tasks(image, tmp_path, {5}, "--backend", "swarm")
    assert done.returncode == 1, done.stdout + done.stderr  # one agent fails
    summary = next(x for x in done.stdout.splitlines() if x.startswith("summary:"))
    assert "19 done, 1 failed, 0 infrastructure, 0 not run; 20 tasks in" in summary, summary
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    for result in results:
        meta = json.loads((Path(result["out"]) / "metadata.json").read_text())["steps"]
        assert meta["step-1"]["api"].startswith("http://127.0.0.1:"), meta["step-1"]
        if result["status"] == "done":
            manifest = Path(meta["end"]["artifacts"]["manifest"])
            assert json.loads(manifest.read_text())["missing_frames"] == 0
    left = swarm.services.list(filters={"label": "io.agentenv.harness=1"})
    assert left == [], "teardown removes the services it started"
    wait_for(
        lambda: not (engine_objects() - before),
        "the swarm to remove the services' containers and volumes",
        timeout_s=60,
    )
