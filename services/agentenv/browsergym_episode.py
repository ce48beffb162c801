"""One BrowserGym episode on an agentenv computer, its agent a command: what
``agentenv run --browsergym SUITE --agent COMMAND`` runs for each env.

    python -m agentenv.browsergym_episode -- AGENT COMMAND...
    python -m agentenv.browsergym_episode --list miniwob

It runs in a Python that has ``agentenv[browsergym]`` (browsergym-core
0.14.3, Playwright 1.44): the harness's step ``run_browsergym`` starts it
with ``--browsergym-python`` (default: the harness's own Python). It reads
from its environment, never its command line:

- ``AGENTENV_CDP_URL`` and ``AGENTENV_TOKEN``: the relay and the agent's
  token (the scope's, on scopes), as ``run_agent`` hands them;
- ``AGENTENV_BROWSERGYM_ENV`` (``browsergym/miniwob.click-button``),
  ``AGENTENV_BROWSERGYM_SEED``, ``AGENTENV_BROWSERGYM_MAX_STEPS``,
  ``AGENTENV_BROWSERGYM_TURN_S``, ``AGENTENV_BROWSERGYM_TASK_KWARGS``
  (JSON) and ``AGENTENV_BROWSERGYM_RESULT``, where its result goes.

The env is :func:`agentenv.browsergym`'s: its browser is the relay, so every
observation and action is on the record in the agent's scope, and
BrowserGym's own task and reward code score it.

**The agent's side.** The agent command is started once per episode with
the same environment but the result's path and the answer file (the score
is BrowserGym's, never the agent's word). On its stdin it gets one JSON
line per turn, :func:`observation_line`: ``step``, ``goal``, ``url``,
``open_pages_urls``, ``last_action``, ``last_action_error``,
``focused_element_bid``, ``dom_object`` (CDP's ``DOMSnapshot``, with
BrowserGym's ``bid`` attributes), ``axtree_object`` and
``extra_element_properties``. The screenshot is not sent (an agent that
wants pixels has the relay). It answers one line: an action in BrowserGym's
action syntax (``click("12")``, ``fill("7", "text")``, ...). An empty line,
or its output's end, ends the episode; so do termination, truncation and
``max_steps``.

**The result** (JSON, at ``AGENTENV_BROWSERGYM_RESULT``): ``env``, ``seed``,
``reward`` (the episode's return: the sum of the steps' rewards, which for
MiniWoB++ is the last step's), ``steps``, ``terminated``, ``truncated``,
``stopped`` (why it ended) and ``error``. No action is in it: actions can
carry what an agent typed, and the log keeps them with secrets withheld.

Exit status: 0, the episode was played (whatever its reward); 2, the agent
failed (it exited with a failure, or did not answer within the turn's
time); 3, the env could not be made or reset (infrastructure: the computer,
the pages, the browsergym install).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import IO, Any

__all__ = [
    "EXIT_AGENT",
    "EXIT_ENV",
    "OBSERVED",
    "Episode",
    "agent_env",
    "driver_python",
    "main",
    "observation_line",
    "read_action",
]

#: The agent failed: it exited with a failure, or went silent.
EXIT_AGENT = 2
#: The env could not be made or reset: not the agent's doing.
EXIT_ENV = 3
#: What of BrowserGym's observation reaches the agent (no screenshot).
OBSERVED = (
    "goal",
    "url",
    "open_pages_urls",
    "last_action",
    "last_action_error",
    "focused_element_bid",
    "dom_object",
    "axtree_object",
    "extra_element_properties",
)
#: What the agent never gets from the driver's environment.
WITHHELD = ("AGENTENV_BROWSERGYM_RESULT", "AGENTENV_ANSWER_FILE")
#: The longest action line read (characters): an action, not a document.
MAX_ACTION = 100_000


@dataclass
class Episode:
    """What :data:`AGENTENV_BROWSERGYM_RESULT` holds."""

    env: str
    seed: int | None
    reward: float = 0.0
    steps: int = 0
    terminated: bool = False
    truncated: bool = False
    stopped: str = "not started"
    error: str | None = None
    #: Steps whose action BrowserGym reported failing (``last_action_error``):
    #: counted, never quoted (an error can echo what the agent typed).
    action_errors: int = 0


def _plain(value: Any) -> Any:
    """numpy's arrays and numbers as JSON has them (duck-typed: no numpy import)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON: {type(value).__name__}")


def observation_line(obs: Mapping[str, Any], step: int) -> str:
    """One turn's observation, the JSON line the agent reads."""
    seen = {key: obs.get(key) for key in OBSERVED}
    return json.dumps({"step": step, **seen}, default=_plain) + "\n"


def read_action(line: str) -> str | None:
    """The action an agent's line holds; ``None``: it ends the episode."""
    action = line.strip()
    if not action:
        return None
    if len(action) > MAX_ACTION:
        raise ValueError(f"an action of {len(action)} characters: at most {MAX_ACTION}")
    return action


def agent_env(env: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment: the driver's, less the result's path and the answer file."""
    return {k: v for k, v in env.items() if k not in WITHHELD}


def driver_python(given: str | None) -> str:
    """The Python that runs episodes: ``given`` (``--browsergym-python``, a
    step's ``python``), else ``AGENTENV_BROWSERGYM_PYTHON``, else this one."""
    return given or os.environ.get("AGENTENV_BROWSERGYM_PYTHON") or sys.executable


def _endpoint(cdp_url: str) -> str:
    """The relay's address without a query (the token goes as a header)."""
    return cdp_url.split("?", 1)[0]


def _readline(stream: IO[str], deadline_s: float) -> str | None:
    """A line from the agent within ``deadline_s`` (``None``: it went silent)."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout=deadline_s):
            return None
    return stream.readline(MAX_ACTION + 2)


def _list(suite: str) -> int:
    import importlib

    import gymnasium as gym

    importlib.import_module(f"browsergym.{suite}")  # registers browsergym/<suite>.*
    prefix = f"browsergym/{suite}."
    for name in sorted(n for n in gym.envs.registry if n.startswith(prefix)):
        print(name)
    return 0


def _play(episode: Episode, agent: list[str], env: Mapping[str, str]) -> int:
    import importlib

    import gymnasium as gym

    from agentenv.browsergym import _on_relay

    suite = episode.env.removeprefix("browsergym/").split(".", 1)[0]
    max_steps = int(env.get("AGENTENV_BROWSERGYM_MAX_STEPS", "10"))
    turn_s = float(env.get("AGENTENV_BROWSERGYM_TURN_S", "60"))
    task_kwargs = json.loads(env.get("AGENTENV_BROWSERGYM_TASK_KWARGS") or "{}")
    try:
        importlib.import_module(f"browsergym.{suite}")
        made = gym.make(episode.env, **({"task_kwargs": task_kwargs} if task_kwargs else {}))
    except Exception as exc:  # an unknown env, a missing package: said, not raised
        episode.stopped, episode.error = "the env was not made", f"{type(exc).__name__}: {exc}"
        return EXIT_ENV
    try:
        with _on_relay(_endpoint(env["AGENTENV_CDP_URL"]), env.get("AGENTENV_TOKEN")):
            obs, _ = made.reset(seed=episode.seed)
    except Exception as exc:
        made.close()
        episode.stopped, episode.error = "the env did not reset", f"{type(exc).__name__}: {exc}"
        return EXIT_ENV
    process = subprocess.Popen(
        agent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=agent_env(env),
        text=True,
        bufsize=1,
    )
    assert process.stdin is not None and process.stdout is not None
    status = 0
    try:
        while True:
            if episode.steps >= max_steps:
                episode.stopped = f"max_steps ({max_steps})"
                break
            try:
                process.stdin.write(observation_line(obs, episode.steps))
                process.stdin.flush()
            except BrokenPipeError:
                episode.stopped = "the agent closed its input"
                break
            line = _readline(process.stdout, turn_s)
            if line is None:
                episode.stopped = f"the agent did not answer within {turn_s:g} s"
                status = EXIT_AGENT
                break
            try:
                action = read_action(line)
            except ValueError as exc:
                episode.stopped, episode.error = "the agent's action was refused", str(exc)
                status = EXIT_AGENT
                break
            if action is None:
                episode.stopped = "the agent ended it"
                break
            try:
                obs, reward, terminated, truncated, _ = made.step(action)
            except Exception as exc:  # the browser went, say: not the agent's doing
                episode.stopped = "the env failed"
                episode.error = f"{type(exc).__name__}: {exc}"
                status = EXIT_ENV
                break
            episode.steps += 1
            episode.action_errors += bool(obs.get("last_action_error"))
            episode.reward += float(reward)
            episode.terminated, episode.truncated = bool(terminated), bool(truncated)
            if terminated or truncated:
                episode.stopped = "terminated" if terminated else "truncated"
                break
    finally:
        made.close()
        process.stdin.close()
        try:
            code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait(timeout=10)
    if code not in (0, -9) and status == 0 and not (episode.terminated or episode.truncated):
        episode.error = f"the agent exited with status {code}"
        status = EXIT_AGENT
    return status


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--list":
        return _list(args[1])
    if not args or args[0] != "--" or len(args) < 2:
        print(
            "usage: python -m agentenv.browsergym_episode -- AGENT COMMAND... "
            "(or --list SUITE); the rest comes from AGENTENV_BROWSERGYM_*",
            file=sys.stderr,
        )
        return 64
    env = dict(os.environ)
    missing = [
        name
        for name in ("AGENTENV_BROWSERGYM_ENV", "AGENTENV_BROWSERGYM_RESULT", "AGENTENV_CDP_URL")
        if not env.get(name)
    ]
    if missing:
        print(f"browsergym_episode: set {', '.join(missing)}", file=sys.stderr)
        return 64
    seed = env.get("AGENTENV_BROWSERGYM_SEED")
    episode = Episode(env["AGENTENV_BROWSERGYM_ENV"], int(seed) if seed else None)
    began = time.monotonic()
    status = _play(episode, args[1:], env)
    result = {**asdict(episode), "seconds": round(time.monotonic() - began, 2)}
    with open(env["AGENTENV_BROWSERGYM_RESULT"], "w") as out:
        json.dump(result, out)
    print(json.dumps(result), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
