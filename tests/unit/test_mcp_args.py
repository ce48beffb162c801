"""Which MCP tool arguments name files, and which of those are refused."""

from __future__ import annotations

from pathlib import Path

from agentenv.app.mcp import _outside
from agentenv.log.argpaths import file_args


def test_file_arguments_are_found_at_any_depth() -> None:
    args = {
        "filename": "a.png",
        "element": "x",
        "items": [{"paths": ["/etc/passwd"]}, {"data": {"path": "b.txt"}}],
    }
    assert file_args(args) == [
        ("filename", "a.png"),
        ("paths", ["/etc/passwd"]),
        ("path", "b.txt"),
    ]
    deep: dict[str, object] = {}
    node = deep
    for _ in range(20):
        node["x"] = {}
        node = node["x"]  # type: ignore[assignment]
    assert file_args(deep) == [("arguments", "/")]


def test_only_the_sessions_folder_and_downloads(tmp_path: Path) -> None:
    own, downloads = tmp_path / "own", tmp_path / "downloads"
    own.mkdir()
    downloads.mkdir()
    roots = (str(own), str(downloads))
    assert not _outside("shot.png", *roots)  # relative: the session's own folder
    assert not _outside([str(downloads / "f.txt")], *roots)
    for bad in ("/etc/passwd", "../x", [str(downloads / "ok"), "/etc/shadow"], "/"):
        assert _outside(bad, *roots), bad


def test_what_playwright_mcp_writes_is_rooted_in_its_own_folder() -> None:
    """A name alone is made one of the session's folder (Playwright MCP
    would put it in its workspace, the downloads folder); what it reads
    (``paths``) and absolute names are left as given, to be checked."""
    from agentenv.log.argpaths import rooted

    args = {"filename": "shot.png", "paths": ["a.txt"], "inner": [{"path": "x/y.pdf"}]}
    assert rooted(args, "/tmp/own/") == {
        "filename": "/tmp/own/shot.png",
        "paths": ["a.txt"],
        "inner": [{"path": "/tmp/own/x/y.pdf"}],
    }
    assert rooted({"filename": "/elsewhere/x.png"}, "/tmp/own") == {"filename": "/elsewhere/x.png"}
