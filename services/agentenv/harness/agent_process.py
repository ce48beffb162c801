"""An agent's process, as ``run_agent`` runs it: in a session of its own (so
stopping it stops what it started too), its output to a file, bounded by its
step's timeout and by the run being cancelled; what it left running is
stopped when it exits.

Its environment names the computer (``AGENTENV_CDP_URL``, ``AGENTENV_API_URL``,
``AGENTENV_MCP_URL``) and its token (``AGENTENV_TOKEN``, for the app's ops and
``/mcp``), and, for a client that takes only a host and port (chromedriver's
``debuggerAddress``), a loopback door to the relay that adds the token
(``AGENTENV_DEBUGGER_ADDRESS``, :mod:`.loopback`), open while it runs.

The rest is the harness's own environment less what no agent may see
(:func:`withheld`): the profiles' key (``AGENTENV_PROFILE_KEY``) and every
variable a ``browser_set_credentials`` step names, of its own task and of
every other task this process runs (a batch's tasks are registered before
the first starts). The names come from the tasks, not from a pattern: a
variable the agent needs (its model's API key) is passed on.

The harness's own cloud credentials (:data:`AMBIENT`: the AWS variables
the run's store on S3 is reached with) are withheld too, and the AWS SDK's
credential files pointed at nothing (:data:`NO_FILES`): an agent given them
could read, change or delete every task's recordings in the store, another
agent's among them. An agent that needs AWS itself (a model on Bedrock) is
given what it names: a step's ``pass_env`` (or ``AGENTENV_PASS_ENV``, for
every agent of the run, comma-separated), or a value in the step's ``env``.
The profiles' key and the credential steps' variables are never passed.
What stays possible (an agent running as the harness's own OS user can
read the harness's process and files): docs/limits.md."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from agentenv.harness.computer import Computer
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.loopback import Loopback, LoopbackError
from agentenv.harness.preflight import KEY_ENV
from agentenv.harness.steps import BrowserSetCredentials, Task

__all__ = [
    "AMBIENT",
    "NO_FILES",
    "PASS_ENV",
    "agent_addresses",
    "default_agent",
    "run_process",
    "withheld",
    "withhold",
]

#: How often the run looks at the agent and at a cancel.
POLL_S = 0.2

#: The variables no agent's process is given (:func:`withhold` adds a task's).
_WITHHELD: set[str] = {KEY_ENV}
_WITHHELD_LOCK = threading.Lock()

#: The harness's own AWS credentials and where the SDK finds them: not an
#: agent's unless its step passes them on.
AMBIENT = frozenset(
    {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_ROLE_SESSION_NAME",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    }
)
#: The SDK's credential files, for an agent not given AWS: none (else it
#: would read the harness's user's ``~/.aws``).
NO_FILES = {"AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_CONFIG_FILE": os.devnull}
#: Names passed on to every agent of the run (comma-separated).
PASS_ENV = "AGENTENV_PASS_ENV"


def withhold(tasks: Iterable[Task]) -> None:
    """Every variable ``tasks``' ``browser_set_credentials`` steps name, kept
    from every agent this process starts from now on."""
    names = {
        name
        for task in tasks
        for step in task.steps
        if isinstance(step, BrowserSetCredentials)
        for credential in step.credentials
        for name in (credential.username_env, credential.password_env, credential.totp_secret_env)
        if name
    }
    with _WITHHELD_LOCK:
        _WITHHELD.update(names)


def withheld(
    env: dict[str, str], task: Task, given: Iterable[str] = (), harness_env: str = ""
) -> dict[str, str]:
    """``env`` (an agent of ``task``'s, changed in place) without the
    withheld variables, ``task``'s own among them, and without the harness's
    AWS credentials (:data:`AMBIENT`) but those in ``given`` (the step's
    ``pass_env`` and ``env`` names) or in ``harness_env`` (the run's
    :data:`PASS_ENV`)."""
    withhold([task])
    with _WITHHELD_LOCK:
        names = set(_WITHHELD)
    for name in names:
        env.pop(name, None)
    passed = set(given) | {n.strip() for n in harness_env.split(",") if n.strip()}
    for name in AMBIENT - passed:
        env.pop(name, None)
    for name, nowhere in NO_FILES.items():
        if name not in passed:
            env[name] = nowhere
    return env


def run_process(
    command: list[str], env: dict[str, str], log: Path, timeout_s: float, cancelled: threading.Event
) -> int:
    """Run ``command`` to its end; its exit status. Past ``timeout_s``, or on a
    cancel, its whole session is killed and the step fails saying which."""
    with open(log, "wb") as output:
        try:
            agent = subprocess.Popen(
                command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            raise StepFailed(f"the agent could not start: {exc.strerror}") from None
        ends = time.monotonic() + timeout_s
        while agent.poll() is None:
            if cancelled.is_set() or time.monotonic() > ends:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()
                if cancelled.is_set():
                    raise StepFailed("cancelled: the agent was stopped", infrastructure=True)
                raise StepFailed(f"the agent ran past {timeout_s:.0f} s (its output: {log})")
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.wait(timeout=POLL_S)
    with contextlib.suppress(ProcessLookupError):  # what it left running
        os.killpg(agent.pid, signal.SIGKILL)
    return agent.returncode


def default_agent(computer: Computer) -> str | None:
    """The token of an agent run with no ``browser_connect_cdp`` before it: the
    computer's one agent (``agent`` when the task names none); None on a
    computer attached without agents' tokens."""
    if not computer.agents:
        return None
    if len(computer.agents) > 1:
        raise StepFailed(
            "this computer has several agents ("
            + ", ".join(sorted(computer.agents))
            + "): say which one runs with a browser_connect_cdp step before run_agent"
        )
    return next(iter(computer.agents.values()))


@contextlib.contextmanager
def agent_addresses(
    env: dict[str, str],
    computer: Computer,
    cdp: str | None,
    token: str | None,
    relay: str | None,
) -> Iterator[None]:
    """``env`` given ``computer``'s addresses: ``cdp`` (a ``browser_connect_cdp``'s
    URL; None: the computer's one agent's), ``token`` (its agent's), and
    ``relay`` (None: no loopback door is asked for)."""
    env.update(
        AGENTENV_CDP_URL=cdp or computer.cdp,
        AGENTENV_API_URL=computer.api,
        AGENTENV_MCP_URL=computer.api + "/mcp",
    )
    if token is None and cdp is None:
        token = default_agent(computer)
        if token is not None:
            env["AGENTENV_CDP_URL"] = f"{computer.cdp}?token={token}"
    if token is not None:  # for the app server's ops and /mcp: Bearer <token>
        env["AGENTENV_TOKEN"] = token
    door: Loopback | None = None
    if relay is not None and token is None:  # a computer that takes no token
        env["AGENTENV_DEBUGGER_ADDRESS"] = urlsplit(relay).netloc
    elif relay is not None and token is not None:
        door = Loopback(relay, token)
        try:
            env["AGENTENV_DEBUGGER_ADDRESS"] = door.open()
        except LoopbackError as exc:
            raise StepFailed(str(exc), infrastructure=True) from None
    try:
        yield
    finally:
        if door is not None:
            door.close()
