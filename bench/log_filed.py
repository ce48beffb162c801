"""The relay's log path now, against the same path as issue 22 found it.

Issue 22 asks that its log budgets leave the log path "no worse than
today's" ratio to raw appends. A ratio to raw appends moves with the
machine (raw appends are the kernel's speed, the path is the interpreter's):
the code of the day the issue was filed gives 0.31x on that day's machine and
0.24x on this one. So this bench runs that code itself: a ``git worktree`` of
:data:`FILED` (the commit before the issue's first change), and the
logbook's per-command path of this tree with the hash chain off (issue 25's
chain, which that code had not, costs its own figure: ``python -m bench
log``). Each turn is a fresh process, the two trees in pairs of turns (each
pair's order the other way to the last), each with raw appends beside it;
the best turn of each is compared (the least disturbed by the shared
machine), with the medians, the median ratio to raw appends, and the median
of each pair's ratio (a pair runs within seconds, so a machine that slows
for a minute slows both of its turns).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.stats import table

#: The commit before issue 22's first change (177c0dd, "The log keeps only
#: the size of parameters a command does not take").
FILED = "177c0dd~1"
TURNS = 12
ROOT = Path(__file__).resolve().parent.parent

#: One turn in a fresh process: the logbook's path of the tree at argv[1]
#: (chain off where the tree has one), its best of three, and raw appends of
#: the same lines.
_TURN = """
import inspect, json, sys, tempfile
from pathlib import Path
root = sys.argv[1]
sys.path[:0] = [root + "/services", root]
import bench.log as bl
from agentenv.log.lines import encode, line
with tempfile.TemporaryDirectory() as tmp:
    folder = Path(tmp)
    chained = "chain" in inspect.signature(bl._writer).parameters
    path = 0.0
    for _ in range(3):
        path = max(path, bl._writer(folder, False) if chained else bl._writer(folder))
        (folder / "w.jsonl").unlink()
    payload = [
        encode(line(n + 1, "2026-11-30T00:00:00.000Z", "action", bl._fields(n) | {"ok": True}))
        for n in range(bl.N)
    ]
    print(json.dumps({"path": path, "raw": bl._raw(folder, payload)}))
"""


def _turn(root: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _TURN, str(root)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=tempfile.gettempdir(),
    )
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def run() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        filed = Path(tmp) / "filed"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(filed), FILED],
            capture_output=True,
            check=True,
            timeout=120,
        )
        try:
            turns: dict[str, list[dict[str, float]]] = {"filed": [], "now": []}
            for turn in range(TURNS):  # in pairs, each pair's order the other way
                for name in ("filed", "now") if turn % 2 else ("now", "filed"):
                    turns[name].append(_turn(filed if name == "filed" else ROOT))
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(filed)],
                capture_output=True,
                check=False,
                timeout=120,
            )
    rows = []
    best = {}
    for name, label in (("filed", f"as filed ({FILED})"), ("now", "now, chain off")):
        found = turns[name]
        best[name] = max(t["path"] for t in found)
        rows.append(
            [
                label,
                f"{best[name]:,.0f} lines/s",
                f"{statistics.median(t['path'] for t in found):,.0f} lines/s",
                f"{statistics.median(t['path'] / t['raw'] for t in found):.3f}",
            ]
        )
    rows.append(["now against as filed, best turns", f"{best['now'] / best['filed']:.3f}", "", ""])
    paired = statistics.median(
        now["path"] / filed["path"] for now, filed in zip(turns["now"], turns["filed"], strict=True)
    )
    rows.append(["now against as filed, each pair (median)", f"{paired:.3f}", "", ""])
    header = ["the logbook's path", "best turn", "median", "vs raw appends (median)"]
    return table(f"the log path against the code issue 22 found ({TURNS} turns each)", header, rows)


def main() -> None:
    print(run())


if __name__ == "__main__":
    main()
