"""The README's code blocks, as the tests that hold the README true read them."""

from __future__ import annotations

import re

from tests.support.stack import ROOT

__all__ = ["blocks", "tasks"]


def blocks(language: str) -> list[str]:
    """Every fenced block of ``language`` in README.md, in order."""
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def tasks() -> list[str]:
    """The README's task files: its YAML blocks with steps."""
    return [b for b in blocks("yaml") if re.search(r"^steps:", b, flags=re.M)]
