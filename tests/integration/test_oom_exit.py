"""When the kernel kills Chromium's browser process for memory, the exit
line says so, on this engine's cgroup version (issue 40: it read only cgroup
v2's ``memory.events`` and said "killed or crashed" on a v1 engine).

The browser process is made the kernel's choice on purpose here (its
``oom_score_adj`` raised to a renderer's 1000, as its own user may), then a
page fills the browser with Blobs and its tab with ArrayBuffers until the
container is at its limit: the largest process at 1000 is the browser."""

from __future__ import annotations

import contextlib
from typing import Any

import aiohttp

from tests.integration.test_chaos import BUFFERS, _blobs_made, _until_it_dies
from tests.security.attacks import agent, attempt
from tests.support.container import SITE, SUPERVISORCTL, computer
from tests.support.timing import wait_for


def _exited(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    for line in lines:
        action = line.get("action") or {}
        if action.get("op") == "browser/exited":
            return dict(action)
    return None


async def test_the_exit_line_names_the_kernels_kill_for_memory(image: str) -> None:
    with computer(image) as pc:
        pc.serve_site()
        browser = pc.exec(*SUPERVISORCTL, "pid", "chromium").strip()
        pc.exec("sh", "-c", f"echo 1000 > /proc/{browser}/oom_score_adj", user="browser")
        v2 = "yes" in pc.exec(
            "sh", "-c", "test -e /sys/fs/cgroup/memory.events && echo yes || true"
        )
        before = attempt(pc)
        async with agent(pc, "alice") as alice:
            _, tab = await alice.page(SITE + "/")
            # The connection ends with the browser (1011), while the Blobs
            # or the buffers are made: that is the point.
            with contextlib.suppress(
                AssertionError, aiohttp.ClientError, aiohttp.WSMessageTypeError, TimeoutError
            ):
                await _blobs_made(alice, tab)
                await _until_it_dies(alice, tab, BUFFERS)
        line = wait_for(lambda: _exited(pc.log(before)[0]), "the browser's exit line", 60)
        source = "memory.events" if v2 else "memory.oom_control"
        assert "out of memory" in line["error"] and source in line["error"], line
        assert pc.exec(*SUPERVISORCTL, "pid", "chromium").strip() != browser  # it came back
