"""``browser_set_credentials`` (harness/steps.py, preflight.py, runner.py):
values read from the environment variables a task names, sent once as
``credentials/set``'s body, and never in the task, a problem, an error, the
step's record or the run's metadata."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentenv.harness.agent_process import withhold
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.preflight import preflight
from agentenv.harness.runner import Run
from agentenv.harness.steps import Task
from agentenv.protocol.card import BROWSER_V1, Extension
from tests.unit.test_harness_wire import CARD, Stores, Wire, _run

PASSWORD = "pw-env-only-42c9"
SECRET = "JBSWY3DPEHPK3PXP"
ENV = {"BANK_USER": "alice", "BANK_PASSWORD": PASSWORD, "BANK_TOTP": SECRET}
STEP = {
    "type": "browser_set_credentials",
    "env_id": "shop",
    "credentials": [
        {
            "name": "bank",
            "origin": "https://Bank.example:443/",
            "username_env": "BANK_USER",
            "password_env": "BANK_PASSWORD",
            "totp_secret_env": "BANK_TOTP",
        }
    ],
}


def _task(step: dict[str, Any]) -> Task:
    envs = {"shop": {"versions": {1: {"browsers": ["main"]}}}}
    return Task.model_validate({"envs": envs, "steps": [step]})


def test_preflight_passes_when_every_variable_is_set() -> None:
    assert preflight(_task(STEP), ENV) == []


def test_preflight_names_what_is_wrong_never_a_value() -> None:
    bad = json.loads(json.dumps(STEP))
    bad["credentials"][0]["origin"] = "bank.example"
    bad["credentials"].append({**bad["credentials"][0], "password_env": "NOT_SET"})
    env = {**ENV, "BANK_TOTP": PASSWORD + "!"}  # not base32
    said = [str(p) for p in preflight(_task(bad), env)]
    text = "\n".join(said)
    assert "credentials.0.origin" in text and "must be an origin" in text
    assert "credentials.1.name: credential 'bank' is named twice" in text
    assert "environment variable NOT_SET is not set" in text
    assert "credentials.0.totp_secret" in text and "base32" in text
    assert PASSWORD not in text and "alice" not in text


def test_the_step_sends_the_values_once_and_records_names_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    ops = [*CARD.extensions[BROWSER_V1].ops, "credentials/set"]
    computer = Wire(
        {
            "/v1/browser/credentials/set": {
                "name": "bank",
                "origin": "https://bank.example",
                "fields": ["username", "password", "totp"],
            }
        }
    )
    computer._card = CARD.model_copy(
        update={"extensions": {**CARD.extensions, BROWSER_V1: Extension(ops=ops, params=["scope"])}}
    )
    run, steps = _run(tmp_path, [STEP], computer)
    done = run._do(steps[0])
    assert done == {
        "credentials": [
            {
                "name": "bank",
                "origin": "https://bank.example",
                "fields": ["username", "password", "totp"],
            }
        ]
    }
    [(path, body)] = computer.bodies()
    assert path == "/v1/browser/credentials/set"
    assert body == {
        "name": "bank",
        "origin": "https://bank.example",
        "username": "alice",
        "password": PASSWORD,
        "totp_secret": SECRET,
    }
    # Nothing else the run holds or printed has a value.
    held = repr(steps) + json.dumps(run.metadata, default=str) + str(done)
    printed = capsys.readouterr()
    for secret in (PASSWORD, SECRET):
        assert secret not in held and secret not in printed.out + printed.err
    monkeypatch.delenv("BANK_PASSWORD")
    with pytest.raises(StepFailed) as refused:
        run._do(steps[0])
    assert "BANK_PASSWORD is not set" in str(refused.value)


def test_no_agent_is_given_a_credentials_variable_or_the_profile_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent runs with the harness's environment: the variables holding
    credentials (its own task's, and another task's of the same batch) and
    the profiles' key are not in it, while a variable of its own is."""

    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OTHER_PASSWORD", "pw-another-task-7f1e")
    monkeypatch.setenv("AGENTENV_PROFILE_KEY", "profile-key-3b8d")
    monkeypatch.setenv("MODEL_API_KEY", "sk-the-agents-own")
    other = json.loads(json.dumps(STEP))
    other["credentials"][0]["password_env"] = "OTHER_PASSWORD"
    withhold([_task(other)])  # as a batch registers its tasks before the first starts
    envs = {"shop": {"versions": {1: {"browsers": ["main"]}}}}
    agent = {"type": "run_agent", "command": ["env"], "env": {"OWN": "passed-on"}}
    task = Task.model_validate({"envs": envs, "steps": [agent, STEP]})
    run = Run(task, tmp_path, run_id="r1", stores=Stores(tmp_path))
    done = run._do(task.steps[0])
    assert done is not None
    seen = Path(done["output"]).read_text()
    assert "MODEL_API_KEY=sk-the-agents-own" in seen and "OWN=passed-on" in seen, seen
    for name in (
        "BANK_USER",
        "BANK_PASSWORD",
        "BANK_TOTP",
        "OTHER_PASSWORD",
        "AGENTENV_PROFILE_KEY",
    ):
        assert f"{name}=" not in seen, name
    for value in (PASSWORD, SECRET, "pw-another-task-7f1e", "profile-key-3b8d"):
        assert value not in seen


def test_no_agent_is_given_the_harness_aws_credentials_unless_its_step_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's store on S3 is reached with the harness's AWS variables: an
    agent given them could read or delete every task's recordings. They are
    withheld and the SDK's files pointed at nothing, unless the step's
    ``pass_env`` (or the run's ``AGENTENV_PASS_ENV``) names them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-harness-store-4c2e")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "store-secret-9d1a")
    monkeypatch.setenv("AWS_PROFILE", "harness")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # not a credential: passed on
    monkeypatch.setenv("AGENTENV_PROFILE_KEY", "profile-key-3b8d")
    monkeypatch.delenv("AGENTENV_PASS_ENV", raising=False)
    envs = {"shop": {"versions": {1: {"browsers": ["main"]}}}}

    def seen(agent: dict[str, Any]) -> dict[str, str]:
        task = Task.model_validate({"envs": envs, "steps": [agent]})
        run = Run(task, tmp_path, run_id="r1", stores=Stores(tmp_path))
        done = run._do(task.steps[0])
        assert done is not None
        lines = Path(done["output"]).read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    plain = seen({"type": "run_agent", "command": ["env"]})
    assert "AWS_ACCESS_KEY_ID" not in plain and "AWS_SECRET_ACCESS_KEY" not in plain
    assert "AWS_PROFILE" not in plain and plain["AWS_REGION"] == "eu-west-1"
    assert plain["AWS_SHARED_CREDENTIALS_FILE"] == plain["AWS_CONFIG_FILE"] == os.devnull
    asked = seen(
        {
            "type": "run_agent",
            "command": ["env"],
            "pass_env": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AGENTENV_PROFILE_KEY"],
        }
    )
    assert asked["AWS_SECRET_ACCESS_KEY"] == "store-secret-9d1a"
    assert "AGENTENV_PROFILE_KEY" not in asked  # never passed, even when asked
    assert "AWS_PROFILE" not in asked  # only what it named
    monkeypatch.setenv("AGENTENV_PASS_ENV", "AWS_PROFILE, AWS_CONFIG_FILE")
    run_wide = seen({"type": "run_agent", "command": ["env"]})
    assert run_wide["AWS_PROFILE"] == "harness" and "AWS_CONFIG_FILE" not in run_wide
    assert "AWS_SECRET_ACCESS_KEY" not in run_wide
    own = seen({"type": "run_agent", "command": ["env"], "env": {"AWS_PROFILE": "agents"}})
    assert own["AWS_PROFILE"] == "agents"  # a value the step gives is its own


def test_a_credential_is_read_from_a_file_the_task_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``file`` instead of the variables: a JSON object of the fields, read as
    the step runs; a file missing, not JSON, of another shape or lacking the
    password is named with what is wrong, never with what it holds."""
    good = tmp_path / "bank.json"
    good.write_text(json.dumps({"username": "alice", "password": PASSWORD, "totp_secret": SECRET}))
    step = json.loads(json.dumps(STEP))
    step["credentials"][0] = {"name": "bank", "origin": "https://bank.example", "file": str(good)}
    assert preflight(_task(step), {}) == []
    ops = [*CARD.extensions[BROWSER_V1].ops, "credentials/set"]
    answer = {"name": "bank", "origin": "https://bank.example", "fields": ["username", "password"]}
    computer = Wire({"/v1/browser/credentials/set": answer})
    computer._card = CARD.model_copy(
        update={"extensions": {**CARD.extensions, BROWSER_V1: Extension(ops=ops, params=["scope"])}}
    )
    run, steps = _run(tmp_path, [step], computer)
    run._do(steps[0])
    [(_, body)] = computer.bodies()
    assert body["password"] == PASSWORD and body["totp_secret"] == SECRET
    bad = {
        "missing.json": None,
        "not-json.json": PASSWORD + "{",
        "a-list.json": json.dumps([PASSWORD]),
        "no-password.json": json.dumps({"username": "alice"}),
        "huge.json": json.dumps({"username": "a", "password": "x" * 70_000}),
    }
    said = []
    for name, text in bad.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        step["credentials"][0]["file"] = str(tmp_path / name)
        said.append("\n".join(str(p) for p in preflight(_task(step), {})))
    assert "No such file" in said[0], said[0]
    assert "not JSON" in said[1] and "must be a JSON object" in said[2], said
    assert "password is missing" in said[3] and "larger than 65536 bytes" in said[4], said
    with pytest.raises(ValueError, match="either file or the"):
        both = dict(step["credentials"][0], password_env="X")
        Task.model_validate({**_task(step).model_dump(), "steps": [dict(step, credentials=[both])]})
    printed = capsys.readouterr()
    for text in [*said, printed.out, printed.err, json.dumps(run.metadata, default=str)]:
        assert PASSWORD not in text and SECRET not in text
