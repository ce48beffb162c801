"""Preflight: every problem of a task, listed before anything deploys (no I/O
but reading a credentials file).

A browser step whose env has no browser, names one the env does not have, or
names none when it has several; a cookie that does not fit ``CookieToSet``
(reported without its value); an origin that is not one; a URL that is not
absolute; ``background`` that is not a boolean; a step that does not say
which agent's browser it acts in on a computer of several agents (``agent:``),
or names an agent no ``browser_connect_cdp`` connects; a credential of
``browser_set_credentials`` whose environment variables are not set (or
whose file cannot be read, is not a JSON object of its fields, or lacks one), or
whose values the computer would refuse (named by field, never quoted); a
profile step whose name is not one, or with no ``AGENTENV_PROFILE_KEY``. Each env is read at the
version the first ``deploy_env`` before the step pins, else the latest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentenv.harness.steps import (
    BROWSER_STEPS,
    BrowserActivateTab,
    BrowserClearLocalStorage,
    BrowserCloseTab,
    BrowserConnectCdp,
    BrowserLoadProfile,
    BrowserOpenTab,
    BrowserSaveProfile,
    BrowserSetCookies,
    BrowserSetCredentials,
    BrowserSetLocalStorage,
    CredentialFromEnv,
    DeployEnv,
    EndBrowserRecording,
    Task,
)
from agentenv.protocol import problems as model_problems
from agentenv.protocol.browser import CookieToSet, absolute_url, origin_of
from agentenv.protocol.credentials import CredentialsSet
from agentenv.protocol.profiles import ProfileName

#: The profile sealing key's variable (agentenv.harness.profile_steps).
KEY_ENV = "AGENTENV_PROFILE_KEY"
#: The most a credentials file (``browser_set_credentials``'s ``file``) may hold.
CREDENTIALS_FILE_LIMIT = 64 * 1024
_PROFILE_NAME: TypeAdapter[str] = TypeAdapter(ProfileName)

__all__ = ["Problem", "credential_values", "preflight"]


@dataclass(frozen=True)
class Problem:
    step: int  # 1-based
    step_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        label = f"step {self.step}" + (f" ({self.step_id})" if self.step_id else "")
        return f"{label}: {self.field}: {self.message}"


def _check_agent(task: Task, step: Any, say: Callable[[str, str], None]) -> None:
    """A browser step says whose browser it acts in when the computer has two
    agents or more (each is a scope of its own: docs/spec.md section 7)."""
    if isinstance(step, BrowserConnectCdp):
        return
    agents = task.agents(step.env_id)
    if isinstance(step, EndBrowserRecording):
        if step.agent is not None:
            say("agent", "a recording ends by its name: give agent: on start_browser_recording")
        return
    if step.agent is None:
        if len(agents) > 1:
            say(
                "agent",
                f"env {step.env_id!r} has agents {', '.join(agents)}, each in a browser of "
                "its own: name the one this step acts for",
            )
    elif step.agent not in agents:
        known = f"its agents are {', '.join(agents)}" if agents else "no agent connects to it"
        say(
            "agent",
            f"no browser_connect_cdp step connects agent {step.agent!r} to env "
            f"{step.env_id!r} ({known})",
        )


def credential_values(
    credential: CredentialFromEnv, environ: Mapping[str, str]
) -> tuple[dict[str, str | None], list[str]]:
    """A credential's values, from ``environ`` (by the variables it names) or
    from its file, and what is wrong in reading them (names, never a value)."""
    if credential.file is not None:
        return _from_file(Path(credential.file))
    named = {
        "username": credential.username_env,
        "password": credential.password_env,
        "totp_secret": credential.totp_secret_env,
    }
    values: dict[str, str | None] = {}
    problems: list[str] = []
    for field, variable in named.items():
        if variable is None:
            values[field] = None
            continue
        value = environ.get(variable)
        if not value:
            problems.append(f"environment variable {variable} is not set (or empty)")
        values[field] = value or None
    return values, problems


def _from_file(path: Path) -> tuple[dict[str, str | None], list[str]]:
    """A credentials file's values: a JSON object of ``username``,
    ``password`` and (optional) ``totp_secret`` strings, at most
    :data:`CREDENTIALS_FILE_LIMIT` bytes; what is wrong says where, never
    what the file holds (a parse error's words quote none of it)."""
    empty: dict[str, str | None] = {"username": None, "password": None, "totp_secret": None}
    try:
        with path.open("rb") as f:
            raw = f.read(CREDENTIALS_FILE_LIMIT + 1)
    except OSError as exc:
        return empty, [f"credentials file {path}: {exc.strerror or type(exc).__name__}"]
    if len(raw) > CREDENTIALS_FILE_LIMIT:
        return empty, [f"credentials file {path}: larger than {CREDENTIALS_FILE_LIMIT} bytes"]
    shape = "a JSON object of strings: username, password and totp_secret (optional)"
    try:
        found = json.loads(raw)
    except ValueError:
        return empty, [f"credentials file {path}: not JSON; it must be {shape}"]
    fields = set(empty)
    if (
        not isinstance(found, dict)
        or not set(found) <= fields
        or not all(isinstance(v, str) for v in found.values())
    ):
        return empty, [f"credentials file {path}: it must be {shape}"]
    values: dict[str, str | None] = {f: found.get(f) or None for f in fields}
    problems = [
        f"credentials file {path}: {field} is missing (or empty)"
        for field in ("username", "password")
        if values[field] is None
    ]
    return values, problems


def _check_credentials(
    step: BrowserSetCredentials, environ: Mapping[str, str], say: Callable[[str, str], None]
) -> None:
    seen: set[str] = set()
    for index, credential in enumerate(step.credentials):
        where = f"credentials.{index}"
        if credential.name in seen:
            say(f"{where}.name", f"credential {credential.name!r} is named twice")
        seen.add(credential.name)
        values, problems = credential_values(credential, environ)
        for problem in problems:
            say(where, problem)
        body = {"name": credential.name, "origin": credential.origin, **values}
        try:
            CredentialsSet.model_validate({k: v for k, v in body.items() if v is not None})
        except ValidationError as exc:
            for problem in model_problems(exc, "", lower=True):  # never the value
                field, _, what = problem.partition(": ")
                if field in ("username", "password") and values.get(field) is None:
                    continue  # said above: its variable (or the file's field) is not set
                say(f"{where}.{field}" if field else where, what)


def _check_profile(name: str, environ: Mapping[str, str], say: Callable[[str, str], None]) -> None:
    """A profile step's name, and its key's variable (never its value)."""
    try:
        _PROFILE_NAME.validate_python(name)
    except ValidationError:
        say("name", "must be 1 to 100 letters, digits, '.', '_' or '-'")
    if not environ.get(KEY_ENV, "").strip():
        say("name", f"{KEY_ENV} is not set: profiles are sealed with a key the harness holds")


def preflight(task: Task, environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Every problem of ``task``; credentials' variables are looked up in
    ``environ`` (the harness's own environment when None)."""
    environ = os.environ if environ is None else environ
    problems: list[Problem] = []
    pinned: dict[str, int | None] = {}
    for number, step in enumerate(task.steps, start=1):

        def say(field: str, message: str, step_id: str | None = step.id, at: int = number) -> None:
            problems.append(Problem(at, step_id, field, message))

        if isinstance(step, DeployEnv):
            if step.env_id not in task.envs:
                say("env_id", f"no env {step.env_id!r} is defined")
            elif step.version is not None and task.envs[step.env_id].at(step.version) is None:
                say("version", f"env {step.env_id!r} has no version {step.version}")
            if step.image is not None and step.url is not None:
                say("url", "give image or url, not both")
            pinned.setdefault(step.env_id, step.version)
            continue
        if not isinstance(step, BROWSER_STEPS):
            continue
        env = task.envs.get(step.env_id)
        if env is None:
            say("env_id", f"no env {step.env_id!r} is defined")
        else:
            found = env.at(pinned.get(step.env_id))
            if found is None:
                say("env_id", f"env {step.env_id!r} has no version {pinned.get(step.env_id)}")
            else:
                version, spec = found
                if not spec.browsers:
                    say("env_id", f"env {step.env_id!r} (version {version}) has no browser")
                elif step.browser is not None and step.browser not in spec.browsers:
                    say(
                        "browser",
                        f"env {step.env_id!r} (version {version}) has no browser "
                        f"{step.browser!r}; it has {', '.join(spec.browsers)}",
                    )
                elif step.browser is None and len(spec.browsers) > 1:
                    say(
                        "browser",
                        f"env {step.env_id!r} (version {version}) has several browsers "
                        f"({', '.join(spec.browsers)}): name one",
                    )
        _check_agent(task, step, say)
        if isinstance(step, BrowserSetCookies):
            for index, cookie in enumerate(step.cookies):
                try:
                    CookieToSet.model_validate(cookie)
                except ValidationError as exc:
                    for problem in model_problems(exc, "", lower=True):  # never the value
                        where, _, what = problem.partition(": ")
                        say(f"cookies.{index}" + (f".{where}" if where else ""), what)
        if (
            isinstance(step, BrowserSetLocalStorage | BrowserClearLocalStorage)
            and step.origin is not None
        ):
            try:
                origin_of(step.origin)
            except ValueError as exc:
                say("origin", str(exc))
        if isinstance(step, BrowserSetCredentials):
            _check_credentials(step, environ, say)
        if isinstance(step, BrowserSaveProfile | BrowserLoadProfile):
            _check_profile(step.name, environ, say)
        if isinstance(step, BrowserOpenTab | BrowserCloseTab | BrowserActivateTab):
            try:
                absolute_url(step.url)
            except ValueError as exc:
                say("url", str(exc))
        if (
            isinstance(step, BrowserOpenTab)
            and step.background is not None
            and not isinstance(step.background, bool)
        ):
            say("background", "must be true or false")
    return problems
