"""The scripted MiniWoB++ agent as ``agentenv run --browsergym`` runs an
agent: a JSON observation a line on stdin, an action a line on stdout.

    agentenv run --browsergym miniwob --agent \
        "build/clients/browsergym/bin/python tests/clients/miniwob_agent.py"

The same oracle as tests/clients/browsergym_session.py (its ``plan``, from
the DOM snapshot's ``bid`` attributes), planned at the first observation and
played an action a turn. A task it has no plan for, or a goal it does not
understand, it ends at once (an empty line): BrowserGym scores that 0. The
task is the env's name, from ``AGENTENV_BROWSERGYM_ENV``.

An action BrowserGym reports failing (``last_action_error``: its actions
give Playwright 500 ms, which a loaded machine running four episodes at once
can miss) is played again, at most :data:`RETRIES` times, as an agent
reading its observation would.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from browsergym_session import elements, plan

#: How many times a failed action is played again.
RETRIES = 2


def main() -> int:
    task = os.environ["AGENTENV_BROWSERGYM_ENV"].removeprefix("browsergym/miniwob.")
    actions: list[str] | None = None
    last, retried = "", 0
    for line in sys.stdin:
        obs = json.loads(line)
        if actions is None:
            try:
                actions = plan(task, obs["goal"], elements(obs["dom_object"]), wrong=False)
            except ValueError as exc:
                print(f"miniwob_agent: {task}: {exc}", file=sys.stderr)
                actions = []
        if last and obs.get("last_action_error") and retried < RETRIES:
            retried += 1
            print(f"miniwob_agent: {task}: playing the failed action again", file=sys.stderr)
        else:
            last, retried = (actions.pop(0) if actions else ""), 0
        print(last, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
