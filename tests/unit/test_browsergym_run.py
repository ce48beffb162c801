"""``agentenv run --browsergym``'s pure parts (issue 43, item 3): the agent's
wire (an observation a JSON line, an action a line), what the agent is
never handed, the suite's envs picked, the task each env becomes, and the
CLI's refusals. The episodes themselves run in
tests/integration/test_browsergym.py, against the image."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.browsergym_episode import (
    MAX_ACTION,
    OBSERVED,
    agent_env,
    observation_line,
    read_action,
)
from agentenv.harness import steps as s
from agentenv.harness.cli import main
from agentenv.harness.runner import EXIT_BAD_INPUT
from agentenv.harness.steps import TaskError
from agentenv.harness.task_sources import BrowserGymPlan, browsergym_task, pick_envs, plan

LISTED = [
    "browsergym/miniwob.click-button",
    "browsergym/miniwob.enter-text",
    "browsergym/miniwob.book-flight",
]


class _Array:
    """numpy's shape of a value: ``tolist`` (numpy is not in .venv)."""

    def __init__(self, value: object) -> None:
        self.value = value

    def tolist(self) -> object:
        return self.value


def test_an_observation_is_one_json_line_without_the_screenshot() -> None:
    obs = {
        "goal": 'Click "OK".',
        "url": "http://miniwob/click-button.html",
        "screenshot": _Array([[[0, 0, 0]]]),
        "active_page_index": _Array([0]),
        "dom_object": {"documents": [], "strings": []},
        "axtree_object": {"nodes": [{"nodeId": "1"}]},
        "last_action_error": "",
        "elapsed_time": _Array([1.5]),
    }
    line = observation_line(obs, 3)
    assert line.endswith("\n") and line.count("\n") == 1
    read = json.loads(line)
    assert set(read) == {"step", *OBSERVED}
    assert read["step"] == 3 and read["goal"] == 'Click "OK".'
    assert read["axtree_object"] == {"nodes": [{"nodeId": "1"}]}
    assert "screenshot" not in read and read["open_pages_urls"] is None


def test_an_action_line_an_empty_line_ends_and_a_document_is_refused() -> None:
    assert read_action('click("12")\n') == 'click("12")'
    assert read_action("\n") is None and read_action("   ") is None
    with pytest.raises(ValueError, match="at most"):
        read_action("x" * (MAX_ACTION + 1))


def test_the_agent_never_gets_the_result_file_nor_the_answer_file() -> None:
    env = {
        "AGENTENV_BROWSERGYM_RESULT": "/run/result.json",
        "AGENTENV_ANSWER_FILE": "/run/answer.txt",
        "AGENTENV_CDP_URL": "http://relay:9222",
        "AGENTENV_BROWSERGYM_ENV": "browsergym/miniwob.click-button",
    }
    assert agent_env(env) == {
        "AGENTENV_CDP_URL": "http://relay:9222",
        "AGENTENV_BROWSERGYM_ENV": "browsergym/miniwob.click-button",
    }


def test_the_suite_whole_or_picked_by_name() -> None:
    assert pick_envs("miniwob", [*LISTED, "browsergym/other.x"], None) == tuple(LISTED)
    assert pick_envs("miniwob", LISTED, ["enter-text", "browsergym/miniwob.click-button"]) == (
        "browsergym/miniwob.enter-text",
        "browsergym/miniwob.click-button",
    )
    with pytest.raises(TaskError, match="has no 'nope'"):
        pick_envs("miniwob", LISTED, ["nope"])
    with pytest.raises(TaskError, match="browsergym-webarena installed"):
        pick_envs("webarena", LISTED, None)


def test_each_env_is_a_recorded_episode_on_a_computer_or_a_scope() -> None:
    how = BrowserGymPlan(tuple(LISTED), seed=7, max_steps=5, python="/opt/bg/bin/python")
    task = browsergym_task(LISTED[0], "python agent.py", "agentenv/browser:latest", how)
    kinds = [step.type for step in task.steps]
    assert kinds == [
        "deploy_env",
        "browser_connect_cdp",
        "start_browser_recording",
        "run_browsergym",
        "end_browser_recording",
    ]
    episode = task.steps[3]
    assert isinstance(episode, s.RunBrowsergym)
    assert (episode.gym_env, episode.seed, episode.max_steps) == (LISTED[0], 7, 5)
    assert episode.command == "python agent.py" and episode.python == "/opt/bg/bin/python"
    bare = browsergym_task(LISTED[0], "a", None, BrowserGymPlan(tuple(LISTED), record=False))
    assert [step.type for step in bare.steps] == [
        "deploy_env",
        "browser_connect_cdp",
        "run_browsergym",
    ]
    planned = plan([], "python agent.py", None, how)
    assert [p.name for p in planned] == [
        "miniwob.click-button",
        "miniwob.enter-text",
        "miniwob.book-flight",
    ]
    assert [p.source for p in planned] == LISTED
    with pytest.raises(TaskError, match="--agent"):
        plan([], None, None, how)


def test_a_step_names_a_registered_env_id_only() -> None:
    base = {"type": "run_browsergym", "command": "a"}
    with pytest.raises(ValueError):
        s.RunBrowsergym.model_validate({**base, "gym_env": "../../etc/passwd"})
    with pytest.raises(ValueError):
        s.RunBrowsergym.model_validate({**base, "gym_env": "browsergym/miniwob.x", "seed": -1})
    found = s.RunBrowsergym.model_validate({**base, "gym_env": "browsergym/miniwob.click-button"})
    assert found.max_steps == 10 and found.turn_s == 60


def test_the_cli_refuses_before_deploying(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run"]) == EXIT_BAD_INPUT
    assert "--browsergym SUITE" in capsys.readouterr().err
    assert main(["run", "--browsergym", "../x", "--agent", "a"]) == EXIT_BAD_INPUT
    assert "a suite is a name" in capsys.readouterr().err
    # A Python without BrowserGym (this one) cannot list the suite: said, with the fix.
    code = main(["run", "--browsergym", "miniwob", "--agent", "a", "--out", str(tmp_path / "r")])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "could not list it" in err and "--browsergym-python" in err
    assert not (tmp_path / "r").exists()
