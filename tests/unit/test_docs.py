"""The README fits a newcomer, and no relative link in it or docs/ is broken
(issue 42, item 5): at most 200 lines and 15 KB, no table cell past 300
characters, every link to a file or a heading found."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```.*?^```", flags=re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#+ (.*)$", flags=re.M)


def _prose(path: Path) -> str:
    """The text outside code, where a link is a link."""
    return _CODE.sub("", _FENCE.sub("", path.read_text()))


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text())):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` whose file or heading is missing."""
    broken = []
    for target in _LINK.findall(_prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        name, _, fragment = target.partition("#")
        dest = (path.parent / name).resolve() if name else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no such heading in {dest.name}")
    return broken


def long_cells(text: str, most: int = 300) -> list[str]:
    return [
        cell.strip()[:60]
        for line in text.splitlines()
        if line.startswith("|")
        for cell in line.strip()[1:-1].split(" | ")
        if len(cell.strip()) > most
    ]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_readme_is_short_enough_to_read() -> None:
    text = (ROOT / "README.md").read_text()
    assert text.count("\n") <= 200
    assert len(text.encode()) <= 15 * 1024
    assert long_cells(text) == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading, here\n")
    page.write_text(
        "[a](there.md#a-heading-here) [b](gone.md) [c](there.md#nowhere) "
        "[d](https://example.com/x) `[e](in-code.md)`\n"
    )
    assert broken_links(page) == [
        "gone.md: no such file",
        "there.md#nowhere: no such heading in there.md",
    ]
    assert long_cells("| a | " + "x" * 301 + " |") == ["x" * 60]
