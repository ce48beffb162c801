"""What a scope costs in memory, by program: the floor under "memory a
running task" (issue 41's goal of 6x less at K = 8).

One computer (no users, ``AGENTENV_WARM_SCOPES=0``, so nothing is made
ahead), its processes' PSS read from the host's ``/proc`` by program
(``bench.batch_scopes``' table), at four moments, ``ROUNDS`` times:

- idle;
- ``K`` scopes opened (``scopes/open``: a context and its blank tab each);
- each scope used and held: the fleet bench's Playwright agent's work on
  its tab (content set, a click, typing, a click) and a screenshot, every
  connection still open;
- every scope closed again.

A scope's cost is (used - idle) / K. From it, the best any batch can do: a
running task at K scopes a computer costs at least (idle + K x scope) / K,
with no recording, no warm scope and nothing of ours growing. Against it,
a computer per task as the batch runs them: ``K`` computers up at once, each
with one scope opened and used the same way, their PSS summed over ``K``
(PSS splits a page among its users: ``K`` computers share the image's
code pages, which one computer alone is charged whole; comparing one
computer alone with one of ``K`` would flatter the scopes). The ratio is the
ceiling the batch bench's "memory a running task" can reach at that K.

Needs a Docker engine, the image (make image; ``AGENTENV_TEST_IMAGE`` names
another) and a root harness on a Linux engine (``/proc``).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from agentenv.harness.computer import Computer, deploy
from agentenv.protocol.browser import ScopeOpened, ScopeRef, ScopesOpen
from bench.batch_scopes import IMAGE, PROGRAMS, _anatomy
from bench.stats import table

#: Scopes a computer, as the batch bench's K = 8.
K = 8
ROUNDS = 3
#: The moments measured, in order.
MOMENTS = ("idle", f"{K} opened", f"{K} used", "closed")
#: Each agent's work on its scope's tab (the fleet bench's, and a screenshot).
WORK = "<input id=q><button onclick='this.textContent=1'>go</button>"


def _settled(computer: Computer) -> dict[str, float]:
    """Each program's PSS (MiB), after a pause for the work to settle."""
    time.sleep(2)
    found = _anatomy(computer.container)
    if found is None:
        raise SystemExit("scope-memory: the host's /proc cannot be read (a root harness on Linux)")
    return found


def _use(computer: Computer, opened: list[ScopeOpened], pw: Any) -> list[Any]:
    """Each scope's tab worked on by an agent of its own; the connections, held."""
    held = []
    for scope in opened:
        browser = pw.chromium.connect_over_cdp(
            computer.cdp, headers={"Authorization": f"Bearer {scope.token}"}
        )
        page = browser.contexts[0].pages[0]
        page.set_content(WORK)
        page.click("#q")
        page.keyboard.type("red shoes")
        page.click("button")
        page.screenshot()
        held.append(browser)
    return held


def _computers(pw: Any) -> float:
    """``K`` computers at once, a scope each, used: their PSS over ``K`` (MiB)."""
    computers = []
    try:
        for _ in range(K):
            settings = {"AGENTENV_WARM_SCOPES": "0", "AGENTENV_MAX_SCOPES": "1"}
            computers.append(deploy(IMAGE, None, None, settings=settings))
        held = [
            browser
            for computer in computers
            for browser in _use(computer, [computer.op("scopes/open", ScopesOpen)], pw)
        ]
        total = sum(sum(_settled(computer).values()) for computer in computers)
        for browser in held:
            browser.close()
        return total / K
    finally:
        for computer in computers:
            computer.stop()


def _round(pw: Any) -> dict[str, dict[str, float]]:
    computer = deploy(
        IMAGE, None, None, settings={"AGENTENV_WARM_SCOPES": "0", "AGENTENV_MAX_SCOPES": str(K)}
    )
    try:
        found = {MOMENTS[0]: _settled(computer)}
        opened = [computer.op("scopes/open", ScopesOpen) for _ in range(K)]
        found[MOMENTS[1]] = _settled(computer)
        held = _use(computer, opened, pw)
        found[MOMENTS[2]] = _settled(computer)
        for browser in held:
            browser.close()
        for scope in opened:
            computer.op("scopes/close", ScopeRef, scope=scope.scope)
        found[MOMENTS[3]] = _settled(computer)
        return found
    finally:
        computer.stop()


def run() -> str:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        rounds = [_round(pw) for _ in range(ROUNDS)]
        one_each = statistics.median(_computers(pw) for _ in range(ROUNDS))
    names = [name for name, _ in PROGRAMS]

    def median(moment: str, name: str | None) -> float:
        return statistics.median(
            sum(r[moment].values()) if name is None else r[moment].get(name, 0.0) for r in rounds
        )

    rows = []
    for name in [*names, None]:
        at = [median(moment, name) for moment in MOMENTS]
        scope = (at[2] - at[0]) / K
        rows.append([name or "all (PSS)", *(f"{x:.1f}" for x in at), f"{scope:.1f}"])
    idle, used = median(MOMENTS[0], None), median(MOMENTS[2], None)
    scope = (used - idle) / K
    ceiling = [[f"a computer per task ({K} up at once)", f"{one_each:.0f} MiB", "1.00x"]]
    for k in (4, 8, 16):
        best = (idle + k * scope) / k
        ceiling.append([f"K = {k}", f"{best:.0f} MiB", f"{one_each / best:.2f}x"])
    return table(
        f"a scope's memory: one computer, PSS by program (MiB, median of {ROUNDS})",
        ["program", *MOMENTS, "a scope (used - idle) / K"],
        rows,
    ) + table(
        "the ceiling it sets on a running task's memory (PSS)",
        ["scopes a computer", "a running task at best", "less than a computer per task"],
        ceiling,
    )
