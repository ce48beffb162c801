"""A scripted agent on BrowserGym's MiniWoB++ tasks, on agentenv or on
BrowserGym's own local launch (tests/integration/test_browsergym.py).

    build/clients/browsergym/bin/python tests/clients/browsergym_session.py \
        agentenv|agentenv-user|local TASK[,TASK...] [--wrong]

Runs in build/clients/browsergym (scripts/test-clients.sh browsergym):
BrowserGym pins Playwright 1.44. Read from the environment, never the
command line: ``MINIWOB_URL`` (the pages' base, ``.../miniwob/``);
for ``agentenv``, ``AGENTENV_API``, ``AGENTENV_CDP``,
``AGENTENV_CONTROL_TOKEN`` and ``BROWSERGYM_UPLOAD`` (a ``file:///`` grant
folder: a recording per episode), each env in a scope it opens; for
``agentenv-user``, the same and ``AGENTENV_AGENT_TOKEN``, user alice's (the
env acts as alice, no scope opened); for ``local``, ``CHROMIUM`` (the
executable every launch gets, the chat window's too: Playwright's own
Chromium cannot be downloaded here).

The agent is an oracle reading the DOM snapshot BrowserGym observes (its
``bid`` attributes): it parses the goal, finds the elements and acts with
BrowserGym's high-level actions (``click``, ``fill``), one env a task,
one episode (seed 7). ``--wrong``: two episodes on each env, the first
acting on an element the goal does not name (a reward of 0 expected), the
second right (seed 8). Prints one JSON line an env: ``{backend, task,
episodes: [{seed, wrong, goal, actions, reward, terminated, observed,
scope}], recordings, seconds, error}``; no token.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import browsergym.core
import browsergym.miniwob  # registers browsergym/miniwob.*
import gymnasium as gym

#: The seed of every episode: the same problem on both backends.
SEED = 7


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str
    parent: Element | None = field(default=None, repr=False)

    @property
    def bid(self) -> str:
        return self.attrs["bid"]


def _text(nodes: dict[str, Any], children: dict[int, list[int]], strings: list[str], i: int) -> str:
    """A node's text content (its text nodes' values, in order)."""
    if nodes["nodeType"][i] == 3:
        value = nodes["nodeValue"][i]
        return strings[value] if value >= 0 else ""
    return "".join(_text(nodes, children, strings, c) for c in children[i])


def elements(dom: dict[str, Any]) -> list[Element]:
    """The DOM snapshot's elements that BrowserGym marked with a ``bid``,
    with their text (whitespace folded) and parent."""
    strings = dom["strings"]

    def s(i: int) -> str:
        return str(strings[i]) if i >= 0 else ""

    found: list[Element] = []
    for document in dom["documents"]:
        nodes = document["nodes"]
        children: dict[int, list[int]] = defaultdict(list)
        for i, parent in enumerate(nodes["parentIndex"]):
            if parent != -1:
                children[parent].append(i)
        made: dict[int, Element] = {}
        for i, kind in enumerate(nodes["nodeType"]):
            if kind != 1:
                continue
            pairs = nodes["attributes"][i]
            attrs = {s(pairs[k]): s(pairs[k + 1]) for k in range(0, len(pairs), 2)}
            text = " ".join(_text(nodes, children, strings, i).split())
            element = Element(s(nodes["nodeName"][i]).lower(), attrs, text)
            element.parent = made.get(nodes["parentIndex"][i])
            made[i] = element
            if "bid" in attrs:
                found.append(element)
    return found


def quoted(goal: str) -> str:
    match = re.search(r'"(.*?)"', goal)
    if match is None:
        raise ValueError(f"no quoted text in the goal {goal!r}")
    return match.group(1)


def one(found: list[Element], what: str) -> Element:
    if not found:
        raise ValueError(f"no element is {what}")
    return found[0]


def plan(task: str, goal: str, dom: list[Element], wrong: bool) -> list[str]:
    """The actions that solve ``task`` for ``goal`` (or, ``wrong``, fail it)."""
    buttons = [e for e in dom if e.tag == "button"]

    def submit() -> str:
        return f'click("{one([b for b in buttons if b.text.lower() == "submit"], "Submit").bid}")'

    if task == "click-button":
        name = quoted(goal)
        pick = [b for b in buttons if (b.text != name) == wrong]
        return [f'click("{one(pick, f"a button {name!r}").bid}")']
    if task == "click-link":
        name = quoted(goal)
        links = [e for e in dom if e.tag == "span" and "alink" in e.attrs.get("class", "")]
        pick = [e for e in links if (e.text != name) == wrong]
        return [f'click("{one(pick, f"a link {name!r}").bid}")']
    if task == "enter-text":
        field_ = one([e for e in dom if e.tag == "input"], "a text field")
        text = quoted(goal) if not wrong else quoted(goal)[::-1] + "x"
        return [f"fill({json.dumps(field_.bid)}, {json.dumps(text)})", submit()]
    if task == "enter-password":
        fields = [e for e in dom if e.tag == "input" and e.attrs.get("type") == "password"]
        text = quoted(goal)
        if len(fields) != 2:
            raise ValueError(f"{len(fields)} password fields, not 2")
        last = text + "x" if wrong else text
        return [
            f"fill({json.dumps(fields[0].bid)}, {json.dumps(text)})",
            f"fill({json.dumps(fields[1].bid)}, {json.dumps(last)})",
            submit(),
        ]
    if task == "focus-text":
        if wrong:
            return [f'click("{one([e for e in dom if e.tag == "body"], "the body").bid}")']
        return [f'click("{one([e for e in dom if e.tag == "input"], "a text field").bid}")']
    if task == "click-checkboxes":
        match = re.match(r"Select (.*) and click Submit\.", goal)
        if match is None:
            raise ValueError(f"a goal not understood: {goal!r}")
        names = set() if match.group(1) == "nothing" else set(match.group(1).split(", "))
        boxes = [e for e in dom if e.tag == "input" and e.attrs.get("type") == "checkbox"]
        picked = [b for b in boxes if b.parent is not None and b.parent.text in names]
        if len(picked) != len(names):
            raise ValueError(f"found {len(picked)} of the checkboxes {sorted(names)}")
        if wrong:
            picked = [b for b in boxes if b not in picked]
        return [f'click("{b.bid}")' for b in picked] + [submit()]
    if task == "click-option":
        match = re.match(r"Select (.*) and click Submit\.", goal)
        if match is None:
            raise ValueError(f"a goal not understood: {goal!r}")
        radios = [e for e in dom if e.tag == "input" and e.attrs.get("type") == "radio"]
        pick = [r for r in radios if (r.parent is not None and r.parent.text == match.group(1))]
        return [f'click("{one(pick, f"an option {match.group(1)!r}").bid}")', submit()]
    if task == "click-test":
        return [f'click("{one(buttons, "a button").bid}")']
    if task == "click-test-2":
        name = goal.removeprefix("Click button ").removesuffix(".")
        return [f'click("{one([b for b in buttons if b.text == name], name).bid}")']
    if task == "click-button-sequence":
        names = re.findall(r"button (\w+)", goal)
        return [f'click("{one([b for b in buttons if b.text == n], n).bid}")' for n in names]
    if task == "click-dialog":
        close = [b for b in buttons if b.attrs.get("title") == "Close"]
        return [f'click("{one(close, "a close button").bid}")']
    if task == "click-tab":
        name = goal.removeprefix("Click on ").removesuffix(".")
        tabs = [e for e in dom if e.attrs.get("role") == "tab" and e.text == name]
        return [f'click("{one(tabs, f"a tab {name!r}").bid}")']
    if task == "click-widget":
        kind = quoted(goal)
        widgets = [e for e in dom if e.attrs.get("data-type") == kind]
        return [f'click("{one(widgets, f"a {kind} widget").bid}")']
    if task == "click-collapsible":
        headers = [e for e in dom if e.tag == "h3" and e.attrs.get("role") == "tab"]
        return [f'click("{one(headers, "a section").bid}")', submit()]
    if task == "enter-text-2":
        case = re.search(r"in all (upper|lower) case", goal)
        if case is None:
            raise ValueError(f"a goal not understood: {goal!r}")
        text = quoted(goal).upper() if case.group(1) == "upper" else quoted(goal).lower()
        field_ = one([e for e in dom if e.tag == "input"], "a text field")
        return [f"fill({json.dumps(field_.bid)}, {json.dumps(text)})", submit()]
    raise ValueError(f"no plan for {task}")


def make_env(backend: str, task: str) -> Any:
    env_id = f"browsergym/miniwob.{task}"
    kwargs: dict[str, Any] = {"task_kwargs": {"base_url": os.environ["MINIWOB_URL"]}}
    if backend == "local":
        chromium = {"executable_path": os.environ["CHROMIUM"]}
        return gym.make(env_id, pw_chromium_kwargs=chromium, **kwargs)
    from agentenv.browsergym import make
    from agentenv.harness.computer import Computer

    computer = Computer(
        os.environ["AGENTENV_API"], os.environ["AGENTENV_CDP"], os.environ["AGENTENV_CONTROL_TOKEN"]
    )
    upload = {"url": os.environ["BROWSERGYM_UPLOAD"]}
    if backend == "agentenv-user":  # the computer's user alice, no scope opened
        computer.agents["alice"] = os.environ["AGENTENV_AGENT_TOKEN"]
        return make(env_id, computer, scope=False, agent="alice", upload=upload, **kwargs)
    return make(env_id, computer, upload=upload, **kwargs)


class _LocalChromium:
    """Playwright's ``chromium``, every launch with ``executable_path``."""

    def __init__(self, chromium: Any, executable: str) -> None:
        self._chromium, self._executable = chromium, executable

    def launch(self, **kwargs: Any) -> Any:
        return self._chromium.launch(**{"executable_path": self._executable, **kwargs})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chromium, name)


class _LocalPlaywright:
    def __init__(self, playwright: Any, executable: str) -> None:
        self._playwright = playwright
        self.chromium = _LocalChromium(playwright.chromium, executable)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._playwright, name)


def local_launches_use(chromium: str) -> None:
    """Every ``chromium.launch`` of BrowserGym's with ``executable_path``:
    the env's gets it from ``pw_chromium_kwargs`` too, its chat window's
    takes no such setting (a test's need, not agentenv's)."""
    playwright = browsergym.core._get_global_playwright()
    browsergym.core._set_global_playwright(_LocalPlaywright(playwright, chromium))


def play(env: Any, task: str, seed: int, wrong: bool) -> dict[str, Any]:
    """One episode: reset, the plan's actions, the last step's reward."""
    out: dict[str, Any] = {"seed": seed, "wrong": wrong, "actions": []}
    obs, info = env.reset(seed=seed)
    out["scope"] = info.get("agentenv", {}).get("scope")
    out["goal"] = obs["goal"]
    reward, terminated = 0.0, False
    for action in plan(task, obs["goal"], elements(obs["dom_object"]), wrong):
        out["actions"].append(action)
        obs, reward, terminated, _, info = env.step(action)
        if obs["last_action_error"]:
            raise RuntimeError(f"{action}: {obs['last_action_error'][:300]}")
        if terminated:
            break
    out["reward"], out["terminated"] = float(reward), bool(terminated)
    out["observed"] = {
        "axtree_nodes": len(obs["axtree_object"]["nodes"]),
        "screenshot": list(obs["screenshot"].shape),
    }
    return out


def run_env(backend: str, task: str, plays: list[tuple[int, bool]]) -> dict[str, Any]:
    """One env of ``task`` playing ``plays`` (seed, wrong) in turn, closed after."""
    out: dict[str, Any] = {"backend": backend, "task": task, "episodes": []}
    began = time.monotonic()
    env = make_env(backend, task)
    try:
        for seed, wrong in plays:
            out["episodes"].append(play(env, task, seed, wrong))
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        traceback.print_exc(file=sys.stderr)
    finally:
        env.close()
        recordings = getattr(env, "recordings", [])
        out["recordings"] = [
            {"recording_id": m.recording_id, "frames": len(m.frames), "scope": m.scope}
            for m in recordings
        ]
        out["seconds"] = round(time.monotonic() - began, 2)  # made, played, closed
    return out


def main() -> int:
    backend, tasks = sys.argv[1], sys.argv[2].split(",")
    # --wrong: a wrong episode, then a right one on the same env (another seed).
    plays = [(SEED, True), (SEED + 1, False)] if "--wrong" in sys.argv[3:] else [(SEED, False)]
    if backend == "local":
        local_launches_use(os.environ["CHROMIUM"])
    for task in tasks:
        print(json.dumps(run_env(backend, task, plays)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
