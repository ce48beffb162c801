"""The code's shape, as issue 42's "done when" asks it to be checked.

    .venv/bin/python scripts/structure.py [--strict]

Reads every module under ``services/agentenv`` (with :mod:`ast`; nothing is
imported) and prints:

- import circles: strongly connected groups of modules that import each
  other, counting every import (top level, inside functions, and under
  ``TYPE_CHECKING``), each with one path round it;
- imports under ``if TYPE_CHECKING:``;
- modules over :data:`MOST_LINES` lines;
- file names (``downloads.py``) and top-level class names used by more than
  one module.

Exit status: 0, or 1 with ``--strict`` when anything is listed (``make lint``
runs it strict: the code keeps this shape).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "services" / "agentenv"
MOST_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _under_type_checking(tree: ast.Module) -> set[int]:
    """Line numbers of imports inside ``if TYPE_CHECKING:``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for inner in node.body:
                    for sub in ast.walk(inner):
                        if isinstance(sub, (ast.Import, ast.ImportFrom)):
                            lines.add(sub.lineno)
    return lines


def read() -> tuple[dict[str, set[str]], dict[str, list[int]], dict[str, int], dict[str, Path]]:
    paths = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = defaultdict(set)
    guarded: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    for module, path in paths.items():
        text = path.read_text()
        sizes[module] = text.count("\n")
        tree = ast.parse(text)
        hidden = _under_type_checking(tree)
        if hidden:
            guarded[module] = sorted(hidden)
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", node)
                names = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for name in names:
                # The deepest module of ours the name is in.
                while name and name not in paths:
                    name = name.rpartition(".")[0]
                if name and name != module and not module.startswith(name + "."):
                    graph[module].add(name)
    return graph, guarded, sizes, paths


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def path_round(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """One way round a circle: from its first module back to it."""
    members = set(group)
    start = group[0]
    seen = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph.get(v, set()) & members):
            if w == start:
                return [*seen[v], start]
            if w not in seen:
                seen[w] = [*seen[v], w]
                todo.append(w)
    return group


def class_names(paths: dict[str, Path]) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for module, path in paths.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(module)
    return {name: mods for name, mods in where.items() if len(mods) > 1}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when anything is listed")
    args = parser.parse_args()
    graph, guarded, sizes, paths = read()
    listed = 0
    groups = circles(graph)
    print(f"import circles: {len(groups)}")
    for group in groups:
        print(f"  {len(group)} modules: {', '.join(group)}")
        print("    round: " + " -> ".join(path_round(graph, group)))
    listed += len(groups)
    print(f"modules importing under TYPE_CHECKING: {len(guarded)}")
    for module, lines in sorted(guarded.items()):
        print(f"  {module} (lines {', '.join(map(str, lines))})")
    listed += len(guarded)
    big = sorted(((n, m) for m, n in sizes.items() if n > MOST_LINES), reverse=True)
    print(f"modules over {MOST_LINES} lines: {len(big)}")
    for n, m in big:
        print(f"  {m}: {n}")
    listed += len(big)
    files: dict[str, list[str]] = defaultdict(list)
    for module, path in paths.items():
        if path.name not in ("__init__.py", "__main__.py"):
            files[path.name].append(module)
    same_files = {name: mods for name, mods in files.items() if len(mods) > 1}
    print(f"file names used twice: {len(same_files)}")
    for name, mods in sorted(same_files.items()):
        print(f"  {name}: {', '.join(mods)}")
    listed += len(same_files)
    same_classes = class_names(paths)
    print(f"class names used twice: {len(same_classes)}")
    for name, mods in sorted(same_classes.items()):
        print(f"  {name}: {', '.join(mods)}")
    listed += len(same_classes)
    return 1 if args.strict and listed else 0


if __name__ == "__main__":
    sys.exit(main())
