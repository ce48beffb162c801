"""The harness's pure parts: task files, preflight, tabs by URL, the CLI's refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentenv.harness.preflight import preflight
from agentenv.harness.steps import Task, TaskError, load_task
from agentenv.harness.url_compare import normalize

ENVS = {
    "shop": {"versions": {1: {"browsers": ["main"]}, 2: {"browsers": []}}},
    "twin": {"versions": {1: {"browsers": ["left", "right"]}}},
}


def task(steps: list[Any], envs: dict[str, Any] | None = None) -> Task:
    return Task.model_validate({"envs": ENVS if envs is None else envs, "steps": steps})


def problems(steps: list[Any]) -> list[str]:
    return [str(p) for p in preflight(task(steps))]


def test_pinned_version_with_a_browser_passes_and_latest_without_reports_every_step() -> None:
    browser_steps = [
        {"type": "browser_open_tab", "env_id": "shop", "url": "https://shop.example/"},
        {"type": "browser_set_cookies", "env_id": "shop", "cookies": []},
        {"type": "start_browser_recording", "env_id": "shop", "name": "r"},
    ]
    pinned = [{"type": "deploy_env", "env_id": "shop", "version": 1}, *browser_steps]
    assert problems(pinned) == []
    unpinned = [{"type": "deploy_env", "env_id": "shop"}, *browser_steps]
    found = problems(unpinned)
    assert len(found) == 3 and all("has no browser" in p and "version 2" in p for p in found)


def test_browser_naming() -> None:
    deploy = {"type": "deploy_env", "env_id": "twin"}
    found = problems([deploy, {"type": "snapshot_env", "env_id": "twin"}])
    assert found == [
        "step 2: browser: env 'twin' (version 1) has several browsers (left, right): name one"
    ]
    found = problems([deploy, {"type": "snapshot_env", "env_id": "twin", "browser": "middle"}])
    assert "has no browser 'middle'" in found[0]
    assert problems([deploy, {"type": "snapshot_env", "env_id": "twin", "browser": "left"}]) == []
    assert "no env 'nowhere'" in problems([{"type": "snapshot_env", "env_id": "nowhere"}])[0]


def test_steps_say_whose_browser_on_a_computer_of_two_agents() -> None:
    deploy = {"type": "deploy_env", "env_id": "shop", "version": 1}
    connect = [
        {"type": "browser_connect_cdp", "env_id": "shop", "agent": name} for name in ("a", "b")
    ]
    tab = {"type": "browser_open_tab", "env_id": "shop", "url": "https://shop.example/"}
    record = {"type": "start_browser_recording", "env_id": "shop", "name": "r"}
    end = {"type": "end_browser_recording", "env_id": "shop", "name": "r"}
    found = problems([deploy, *connect, tab, record, end])
    assert found == [
        f"step {n}: agent: env 'shop' has agents a, b, each in a browser of its own: "
        "name the one this step acts for"
        for n in (4, 5)
    ]
    named = [deploy, *connect, {**tab, "agent": "b"}, {**record, "agent": "a"}, end]
    assert problems(named) == []
    # An agent no step connects; agent: on an end; one agent needs no name.
    assert problems([deploy, *connect, {**tab, "agent": "c"}]) == [
        "step 4: agent: no browser_connect_cdp step connects agent 'c' to env 'shop' "
        "(its agents are a, b)"
    ]
    assert "a recording ends by its name" in problems([deploy, *connect, {**end, "agent": "a"}])[0]
    assert problems([deploy, connect[0], tab, record]) == []
    assert problems([deploy, connect[0], {**tab, "agent": "a"}]) == []


def test_every_refusal_at_once_and_no_cookie_value() -> None:
    found = problems(
        [
            {"type": "deploy_env", "env_id": "shop", "version": 1},
            {
                "id": "c",
                "type": "browser_set_cookies",
                "env_id": "shop",
                "cookies": [
                    {"name": "sid", "value": "TOP-SECRET-VALUE"},
                    {"name": "ok", "value": "v", "url": "https://a/"},
                    {"name": "n", "value": 5, "domain": "a.example"},
                ],
            },
            {
                "type": "browser_set_local_storage",
                "env_id": "shop",
                "origin": "https://a.example/path",
                "items": {},
            },
            {"type": "browser_clear_local_storage", "env_id": "shop", "origin": "not-an-origin"},
            {"type": "browser_open_tab", "env_id": "shop", "url": "/relative", "background": "yes"},
            {"type": "browser_close_tab", "env_id": "shop", "url": "example.com"},
            {"type": "browser_activate_tab", "env_id": "shop", "url": "https://fine.example/"},
        ]
    )
    text = "\n".join(found)
    assert "TOP-SECRET-VALUE" not in text
    assert "step 2 (c): cookies.0: value error, needs url, or domain (and path)" in text
    assert "step 2 (c): cookies.2.value:" in text
    assert "step 3: origin:" in text and "step 4: origin:" in text
    assert (
        "step 5: url: must be an absolute URL" in text
        and "step 5: background: must be true or false" in text
    )
    assert "step 6: url:" in text
    assert len(found) == 7


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("http://faß.localhost:8783/other", "http://xn--fa-hia.localhost:8783/other"),
        ("https://bücher.test/", "https://xn--bcher-kva.test/"),
        ("HTTP://Example.COM:80", "http://example.com/"),
        ("https://example.com:443/a?b=1#c", "https://example.com/a?b=1#c"),
        ("https://example.com:8443", "https://example.com:8443/"),
        ("about:blank", "about:blank"),
    ],
)
def test_urls_normalized_as_the_browser_shows_them(given: str, shown: str) -> None:
    assert normalize(given) == normalize(shown) == shown


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_task_file_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not valid YAML"):
        load_task(_write(tmp_path, "a.yaml", "steps: [\n  - {type: deploy_env"))
    with pytest.raises(TaskError, match="not valid JSON"):
        load_task(_write(tmp_path, "a.json", "{steps: ]"))
    with pytest.raises(TaskError, match=r"step 1 \(x\): unknown step type 'teleport'"):
        load_task(_write(tmp_path, "b.yaml", "steps:\n  - {id: x, type: teleport}\n"))
    with pytest.raises(TaskError, match="step 2: url: field required"):
        load_task(
            _write(
                tmp_path,
                "c.yaml",
                yaml.safe_dump(
                    {
                        "steps": [
                            {"type": "deploy_env", "env_id": "shop"},
                            {"type": "browser_open_tab", "env_id": "shop"},
                        ]
                    }
                ),
            )
        )
    envs = _write(
        tmp_path, "envs.yaml", yaml.safe_dump({"shop": {"versions": {1: {"browsers": ["b"]}}}})
    )
    loaded = load_task(
        _write(
            tmp_path,
            "d.yaml",
            yaml.safe_dump(
                {"envs_file": envs.name, "steps": [{"type": "deploy_env", "env_id": "shop"}]}
            ),
        )
    )
    assert loaded.envs["shop"].at(None) is not None


def test_cli_refuses_bad_tasks_with_status_2_and_deploys_nothing(tmp_path: Path) -> None:
    bad = _write(
        tmp_path,
        "bad.yaml",
        "steps:\n  - {type: deploy_env, env_id: shop, image: nope/never:1}\n"
        "  - {type: browser_open_tab, env_id: shop}\n",
    )
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "run", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "step 2: url: field required" in done.stderr and "nope/never" not in done.stderr
    flawed = _write(
        tmp_path,
        "flawed.yaml",
        yaml.safe_dump(
            {
                "envs": ENVS,
                "steps": [
                    {"type": "deploy_env", "env_id": "shop", "image": "nope/never:1"},
                    {"type": "browser_open_tab", "env_id": "shop", "url": "https://a.example/"},
                ],
            }
        ),
    )
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "run", str(flawed)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "nothing was deployed" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_compose_runs_the_image_as_the_harness_does() -> None:
    """compose.yaml and harness/hardening.py say the same: one hardening."""
    from pathlib import Path

    import yaml

    from agentenv.harness.hardening import docker_kwargs

    root = Path(__file__).resolve().parents[2]
    service = yaml.safe_load((root / "compose.yaml").read_text())["services"]["browser"]
    kwargs = docker_kwargs()
    assert service["cap_drop"] == kwargs["cap_drop"] == ["ALL"]
    assert service["cap_add"] == kwargs["cap_add"]
    assert service["security_opt"] == kwargs["security_opt"]
    assert service["read_only"] is kwargs["read_only"] is True
    assert dict(t.split(":", 1) for t in service["tmpfs"]) == kwargs["tmpfs"]
    assert service["mem_limit"] == kwargs["mem_limit"]
    assert service["pids_limit"] == kwargs["pids_limit"]
    assert service["shm_size"] == kwargs["shm_size"]


def test_every_task_in_the_readme_passes_agentenv_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentenv.harness.cli import main
    from tests.support.readme import tasks

    found = tasks()
    assert found, "the README shows no task"
    for n, text in enumerate(found):
        path = tmp_path / f"readme-{n}.yaml"
        path.write_text(text)
        assert main(["check", str(path)]) == 0, capsys.readouterr().err
        assert "no problems" in capsys.readouterr().out


def test_the_loopback_door_takes_its_token_from_the_environment_only() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTENV_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "loopback", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 2 and "set AGENTENV_TOKEN" in done.stderr, done.stderr
    from agentenv.harness.loopback import Loopback, LoopbackError

    with pytest.raises(LoopbackError, match="http://host:port"):
        Loopback("file:///etc", "t")


def test_the_memory_budget_adds_up() -> None:
    """The tmpfs sizes, /dev/shm and the relay's own limit leave Chromium
    and the programs at least LEFT_FOR_PROGRAMS_MB of the container's memory
    (tmpfs pages count against it), and the image's relay limit is the
    budget's (issue 22)."""
    import re

    from agentenv.harness.hardening import (
        LEFT_FOR_PROGRAMS_MB,
        MEMORY,
        RELAY_MEMORY_MB,
        SHM,
        TMPFS,
    )

    def mib(size: str) -> int:
        number, unit = re.fullmatch(r"(\d+)([mg])", size).groups()  # type: ignore[union-attr]
        return int(number) * (1024 if unit == "g" else 1)

    sizes = [mib(re.search(r"size=(\w+)", o).group(1)) for o in TMPFS.values()]  # type: ignore[union-attr]
    taken = sum(sizes) + mib(SHM) + RELAY_MEMORY_MB
    assert mib(MEMORY) - taken >= LEFT_FOR_PROGRAMS_MB, (MEMORY, taken)
    root = Path(__file__).resolve().parents[2]
    launch = (root / "images/browser/launch/service.sh").read_text()
    assert f"AGENTENV_RELAY_MEMORY_MB:-{RELAY_MEMORY_MB}" in launch


def test_the_renderers_bounds_and_the_kill_order_are_the_budgets() -> None:
    """chromium.sh's renderer limits and each program's oom_score_adj are
    hardening.py's, and the order holds: tabs (1000) above every program,
    every program above the browser process (0) (issue 40)."""
    from agentenv.harness.hardening import OOM_SCORE_ADJ, RENDERER_HEAP_MB, RENDERER_MEMORY_MB

    image = Path(__file__).resolve().parents[2] / "images/browser"
    chromium = (image / "launch/chromium.sh").read_text()
    assert f"AGENTENV_RENDERER_HEAP_MB:-{RENDERER_HEAP_MB}" in chromium
    assert f"AGENTENV_RENDERER_MEMORY_MB:-{RENDERER_MEMORY_MB}" in chromium
    assert (
        f"AGENTENV_RENDERER_MEMORY_MB:-{RENDERER_MEMORY_MB}"
        in (image / "launch/renderers.sh").read_text()
    )
    assert "echo 1000 " in (image / "launch/renderers.sh").read_text()
    for program, adj in OOM_SCORE_ADJ.items():
        conf = (image / f"conf.d/{program}.conf").read_text()
        assert f'AGENTENV_OOM_SCORE_ADJ="{adj}"' in conf, program
        assert 0 < adj < 1000
    assert "OOM_SCORE_ADJ" not in (image / "conf.d/chromium.conf").read_text()


def test_the_playwright_mcps_fit_the_memory_budget_whatever_the_users() -> None:
    """One user's 8 Playwright MCPs took 58 % of what the budget leaves
    Chromium and the programs, two users' passed it (4th red team): the
    computer's total fits its share of the budget, and a caller's share
    shrinks with the number of users."""
    from agentenv.harness.hardening import LEFT_FOR_PROGRAMS_MB, MCP_SHARE_MB, PLAYWRIGHT_MCP_MB
    from agentenv.settings import Settings

    defaults = Settings()
    assert defaults.mcp_sessions * PLAYWRIGHT_MCP_MB <= MCP_SHARE_MB <= LEFT_FOR_PROGRAMS_MB // 2
    assert defaults.mcp_share == defaults.mcp_sessions  # one caller, no users: all of it
    two = Settings(users={"alice": "a", "bob": "b"})
    assert two.mcp_share == defaults.mcp_sessions // 2
    many = Settings(users={f"u{n}": str(n) for n in range(9)})
    assert many.mcp_share == 1
    assert Settings(mcp_sessions_per_caller=1).mcp_share == 1


def test_the_playwright_servers_fit_the_memory_budget() -> None:
    """``/playwright``'s servers (116 MiB each, measured) have their share of
    the budget, and an idle computer with every MCP, every warm scope and
    every server fits what the budget leaves Chromium and the programs."""
    from agentenv.app.playwright_door import playwright_share
    from agentenv.harness.hardening import (
        LEFT_FOR_PROGRAMS_MB,
        MCP_SHARE_MB,
        PLAYWRIGHT_SERVER_MB,
        PLAYWRIGHT_SERVERS_SHARE_MB,
        WARM_SHARE_MB,
    )
    from agentenv.settings import Settings

    defaults = Settings()
    assert defaults.playwright_servers * PLAYWRIGHT_SERVER_MB <= PLAYWRIGHT_SERVERS_SHARE_MB
    shares = MCP_SHARE_MB + WARM_SHARE_MB + PLAYWRIGHT_SERVERS_SHARE_MB
    assert 254 + shares <= LEFT_FOR_PROGRAMS_MB
    assert playwright_share(Settings(users={"alice": "a", "bob": "b"})) == 1
    assert playwright_share(defaults) == defaults.playwright_servers


def test_the_warm_scopes_fit_the_memory_budget() -> None:
    """Warm scopes are counted in the memory budget as the Playwright MCPs
    are: the most a computer may keep, at a scope's measured cost, fit their
    share, and an idle computer (254 MiB, bench/README.md) with every MCP
    and every warm scope fits what the budget leaves Chromium and the
    programs at least."""
    from agentenv.harness.hardening import LEFT_FOR_PROGRAMS_MB, MCP_SHARE_MB, WARM_SHARE_MB
    from agentenv.settings import WARM_SCOPE_MB, WARM_SCOPES_MAX, Settings

    assert Settings().warm_scopes <= WARM_SCOPES_MAX
    assert WARM_SCOPES_MAX * WARM_SCOPE_MB <= WARM_SHARE_MB
    assert 254 + MCP_SHARE_MB + WARM_SHARE_MB <= LEFT_FOR_PROGRAMS_MB


def test_a_swarm_service_takes_the_budgets_sizes() -> None:
    """The swarm backend's /dev/shm and memory limit are the budget's, not
    sizes of its own (it had a 1 GiB /dev/shm left from before the budget)."""
    import inspect

    from agentenv.harness import swarm
    from agentenv.harness.hardening import MEMORY, SHM, size_bytes

    assert (size_bytes("64m"), size_bytes("3g"), size_bytes("512")) == (64 << 20, 3 << 30, 512)
    # The one spec every swarm computer takes (one-replica services and the pool's).
    assert "service_spec(" in inspect.getsource(swarm.deploy_service)
    spec = swarm.service_spec("x", {}, None)
    (shm,) = spec["mounts"]
    assert shm["Target"] == "/dev/shm" and shm["TmpfsOptions"]["SizeBytes"] == size_bytes(SHM)
    assert spec["resources"]["Limits"]["MemoryBytes"] == size_bytes(MEMORY)
    assert size_bytes(SHM) < size_bytes(MEMORY)


def test_every_step_type_has_its_handler(tmp_path: Path) -> None:
    """The runner dispatches through one table of step type to handler: a
    step type added to the task file's union without a handler fails here,
    not in the middle of a run."""
    import typing

    from agentenv.harness import steps
    from agentenv.harness.runner import Run

    union = typing.get_args(steps.Step)[0]
    types = set(typing.get_args(union))
    run = Run(task=load_task_text(tmp_path), out=tmp_path)
    assert set(run._handlers()) == types, set(run._handlers()) ^ types


def load_task_text(folder: Path) -> Task:
    (folder / "t.yaml").write_text('steps:\n  - {type: run_agent, command: ["true"]}\n')
    return load_task(folder / "t.yaml")
