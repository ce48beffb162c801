"""The task file: env definitions with versions, and steps as one tagged union.

A task is JSON or YAML::

    envs:                       # inline, or envs_file: envs.yaml
      shop:
        versions:
          1: {browsers: [main]}
    steps:
      - {type: deploy_env, env_id: shop, version: 1}
      - {type: browser_open_tab, env_id: shop, url: "https://shop.example/"}

Steps are checked loosely here (so preflight can report every problem at
once, values never quoted); :mod:`.preflight` is the strict check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from agentenv.harness.harness_errors import HarnessError
from agentenv.protocol.recording import HarAsk, VideoAsk

__all__ = [
    "BROWSER_STEPS",
    "CredentialFromEnv",
    "EnvDefinition",
    "EnvVersion",
    "Step",
    "Task",
    "TaskError",
    "load_task",
]


class TaskError(HarnessError, ValueError):
    """A task file that cannot be run: one message naming the step and field."""


class EnvVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    browsers: list[str] = Field(default_factory=list)
    image: str | None = None


class EnvDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    versions: dict[int, EnvVersion]

    def at(self, version: int | None) -> tuple[int, EnvVersion] | None:
        if not self.versions:
            return None
        chosen = max(self.versions) if version is None else version
        found = self.versions.get(chosen)
        return (chosen, found) if found is not None else None


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None


class _BrowserStep(_Step):
    env_id: str
    browser: str | None = None
    #: The agent whose browser (scope) the step acts in: needed on a computer
    #: the task connects two agents or more to (preflight says so).
    agent: str | None = None


class DeployEnv(_Step):
    type: Literal["deploy_env"]
    env_id: str
    image: str | None = None
    url: str | None = None
    version: int | None = None
    token: str | None = Field(None, repr=False)  # the control token of an attached computer
    cdp_url: str | None = None  # an attached computer's relay, when not at port 9222


class BrowserSetCookies(_BrowserStep):
    type: Literal["browser_set_cookies"]
    cookies: list[Any]  # each checked against CookieToSet by preflight


class BrowserDeleteCookies(_BrowserStep):
    type: Literal["browser_delete_cookies"]
    name: str | None = None
    domain: str | None = None
    path: str | None = None


class BrowserSetLocalStorage(_BrowserStep):
    type: Literal["browser_set_local_storage"]
    origin: str
    items: dict[str, str]


class BrowserClearLocalStorage(_BrowserStep):
    type: Literal["browser_clear_local_storage"]
    origin: str | None = None


class CredentialFromEnv(BaseModel):
    """One credential of ``browser_set_credentials``: its values are read from
    the harness's environment variables named here, or from ``file`` (a JSON
    object: ``username``, ``password``, ``totp_secret`` optional; a path as
    the harness's working directory resolves it), never written in the task.
    One of the two: the variables, or the file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    origin: str
    username_env: str | None = None
    password_env: str | None = None
    totp_secret_env: str | None = None
    file: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> CredentialFromEnv:
        named = (self.username_env, self.password_env, self.totp_secret_env)
        if self.file is not None and any(named):
            raise ValueError("give either file or the *_env variables, not both")
        if self.file is None and not (self.username_env and self.password_env):
            raise ValueError("give username_env and password_env (or file)")
        return self


class BrowserSetCredentials(_BrowserStep):
    type: Literal["browser_set_credentials"]
    credentials: list[CredentialFromEnv]


class WaitForHuman(_BrowserStep):
    """``request_human`` in the agent's scope, on the harness's behalf: a
    person of that scope is asked (the live view shows ``reason``) and the
    step waits at most ``timeout_s`` for their word (harness/human_steps.py)."""

    type: Literal["wait_for_human"]
    reason: str = Field(min_length=1, max_length=500)
    timeout_s: float = Field(300.0, ge=1, le=3600, allow_inf_nan=False)


class BrowserSaveProfile(_BrowserStep):
    """``profiles/save``: the scope's sign-in state, sealed with the key in the
    harness's ``AGENTENV_PROFILE_KEY`` and kept in the run's store as ``name``."""

    type: Literal["browser_save_profile"]
    name: str


class BrowserLoadProfile(_BrowserStep):
    """``profiles/load``: profile ``name`` from the run's store into a fresh scope."""

    type: Literal["browser_load_profile"]
    name: str


class BrowserOpenTab(_BrowserStep):
    type: Literal["browser_open_tab"]
    url: str
    background: Any = None  # a boolean: preflight says so when it is not


class BrowserCloseTab(_BrowserStep):
    type: Literal["browser_close_tab"]
    url: str


class BrowserActivateTab(_BrowserStep):
    type: Literal["browser_activate_tab"]
    url: str


class BrowserConnectCdp(_BrowserStep):
    type: Literal["browser_connect_cdp"]
    agent: str
    #: Open a token-free door on 127.0.0.1 for the agent's run (chromedriver's
    #: debuggerAddress, in AGENTENV_DEBUGGER_ADDRESS): :mod:`.loopback`.
    debugger_address: bool = False


#: A recording's name is its place in the store: letters, digits, ``_`` and ``-``.
RECORDING_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class StartBrowserRecording(_BrowserStep):
    type: Literal["start_browser_recording"]
    name: str = Field(pattern=RECORDING_NAME)
    frames: bool = True
    max_frames: int | None = Field(None, ge=1)
    max_duration_s: float | None = Field(None, gt=0)
    #: A video of the agent's tab (``{fps}``), its network log (``{bodies}``),
    #: and its downloads uploaded (docs/spec.md section 4, "More in a recording").
    video: VideoAsk | None = None
    har: HarAsk | None = None
    downloads: bool = False
    fail_task_on_error: bool = True


class EndBrowserRecording(_BrowserStep):
    type: Literal["end_browser_recording"]
    name: str
    fail_task_on_error: bool = True


#: A variable name an agent's step may ask to be passed on.
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)]


class RunAgent(_Step):
    type: Literal["run_agent"]
    command: list[str] | str
    env: dict[str, str] = Field(default_factory=dict)
    #: The harness's AWS variables this agent is given (withheld by default:
    #: :mod:`agentenv.harness.agent_process`).
    pass_env: list[EnvName] = Field(default_factory=list)
    timeout_s: float = Field(600, gt=0)
    env_id: str | None = None
    browser: str | None = None


class RunBrowsergym(_Step):
    """One BrowserGym episode, its agent ``command``, scored by BrowserGym
    (:mod:`agentenv.browsergym_episode`, run by ``python``)."""

    type: Literal["run_browsergym"]
    #: The env's registered id (``browsergym/miniwob.click-button``).
    gym_env: str = Field(pattern=r"^browsergym/[A-Za-z0-9_]+\.[A-Za-z0-9_.-]+$")
    command: list[str] | str
    seed: int | None = Field(None, ge=0)
    max_steps: int = Field(10, gt=0, le=1000)
    #: How long the agent may take over one action (seconds).
    turn_s: float = Field(60, gt=0)
    task_kwargs: dict[str, Any] = Field(default_factory=dict)
    #: A Python with ``agentenv[browsergym]``; default
    #: ``AGENTENV_BROWSERGYM_PYTHON``, else the harness's own.
    python: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    pass_env: list[EnvName] = Field(default_factory=list)
    timeout_s: float = Field(600, gt=0)
    env_id: str | None = None
    browser: str | None = None


class SnapshotEnv(_BrowserStep):
    type: Literal["snapshot_env"]


class ExportMind2web(_Step):
    type: Literal["export_mind2web"]
    recording: str
    task: str
    task_id: str
    agent_final_answer: str | None = None
    reference_length: int | None = None
    #: The recording's video beside the export (its ``start`` asked for one).
    video: bool = False


class ExportWebarenaVerified(_Step):
    """WebArena-Verified's task folder from a recording made with ``har``
    (:mod:`agentenv.harness.webarena_verified`)."""

    type: Literal["export_webarena_verified"]
    recording: str
    #: The WebArena-Verified task's id: the folder's name.
    task_id: int = Field(ge=0)
    #: The agent's response in WebArena-Verified's schema; else the agent's
    #: answer, read as that JSON.
    response: dict[str, Any] | None = None
    #: Each WebArena site's URL as the run reached it (``shopping`` and so
    #: on), written to ``run_config.json`` for the evaluator.
    sites: dict[str, str] = Field(default_factory=dict)


Step = Annotated[
    DeployEnv
    | BrowserSetCookies
    | BrowserDeleteCookies
    | BrowserSetLocalStorage
    | BrowserClearLocalStorage
    | BrowserSetCredentials
    | WaitForHuman
    | BrowserSaveProfile
    | BrowserLoadProfile
    | BrowserOpenTab
    | BrowserCloseTab
    | BrowserActivateTab
    | BrowserConnectCdp
    | StartBrowserRecording
    | EndBrowserRecording
    | RunAgent
    | RunBrowsergym
    | SnapshotEnv
    | ExportMind2web
    | ExportWebarenaVerified,
    Field(discriminator="type"),
]

#: Steps that act on a browser (and so need the env to have one).
BROWSER_STEPS = (
    BrowserSetCookies,
    BrowserDeleteCookies,
    BrowserSetLocalStorage,
    BrowserClearLocalStorage,
    BrowserSetCredentials,
    WaitForHuman,
    BrowserSaveProfile,
    BrowserLoadProfile,
    BrowserOpenTab,
    BrowserCloseTab,
    BrowserActivateTab,
    BrowserConnectCdp,
    StartBrowserRecording,
    EndBrowserRecording,
    SnapshotEnv,
)


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    envs: dict[str, EnvDefinition] = Field(default_factory=dict)
    envs_file: str | None = None
    steps: list[Step]

    def agents(self, env_id: str | None = None) -> list[str]:
        """The agents the task connects (to ``env_id``, or to any env)."""
        names = [
            step.agent
            for step in self.steps
            if isinstance(step, BrowserConnectCdp) and env_id in (None, step.env_id)
        ]
        return sorted(set(names))


_STEP: TypeAdapter[Any] = TypeAdapter(Step)


def _parse_file(path: Path) -> Any:
    import json

    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        raise TaskError(f"{path}: cannot read it: {exc.strerror}") from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise TaskError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}{line}"
        ) from None


def load_task(path: Path) -> Task:
    """The task in ``path``; :class:`TaskError` names the step and field of the first problem."""
    raw = _parse_file(path)
    if isinstance(raw, list):
        raw = {"steps": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        raise TaskError(
            f"{path}: a task is a list of steps, or a mapping with 'steps' (and 'envs')"
        )
    for index, step in enumerate(raw["steps"]):
        label = f"step {index + 1}"
        if isinstance(step, dict) and step.get("id"):
            label += f" ({step['id']})"
        if not isinstance(step, dict) or "type" not in step:
            raise TaskError(f"{label}: a step is a mapping with a 'type'")
        try:
            _STEP.validate_python(step)
        except Exception as exc:
            raise TaskError(f"{label}: {_first_error(exc)}") from None
    try:
        task = Task.model_validate(raw)
    except Exception as exc:
        raise TaskError(f"{path}: {_first_error(exc)}") from None
    if task.envs_file:
        envs_raw = _parse_file(path.parent / task.envs_file)
        try:
            extra = {k: EnvDefinition.model_validate(v) for k, v in (envs_raw or {}).items()}
        except Exception as exc:
            raise TaskError(f"{task.envs_file}: {_first_error(exc)}") from None
        task.envs = {**extra, **task.envs}
    return task


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if errors is None:
        return str(exc)
    first = errors(include_input=False, include_url=False)[0]
    loc = [str(p) for p in first["loc"]]
    if first["type"] == "union_tag_invalid":
        ctx = first.get("ctx", {})
        return f"unknown step type {ctx.get('tag')!r}; known: {ctx.get('expected_tags')}"
    # Drop the tagged-union tag from the location: it repeats the type.
    if len(loc) > 1 and loc[0].startswith(
        ("deploy_env", "browser_", "start_", "end_", "run_", "snapshot_", "export_")
    ):
        loc = loc[1:]
    field = ".".join(loc) or "step"
    return f"{field}: {first['msg'].lower()}"
