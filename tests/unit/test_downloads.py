"""``downloads/list`` and ``downloads/get``: what they read, and what no name
can reach (app/download_ops.py; the op in the image: tests/integration)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentenv.app.app_errors import OpError
from agentenv.app.download_ops import _open
from agentenv.downloads import listed
from agentenv.protocol.browser import DownloadsGet


def test_the_list_holds_the_folders_regular_files_and_says_which_are_partial(
    tmp_path: Path,
) -> None:
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.7 hello")
    (tmp_path / "big.zip.crdownload").write_bytes(b"x" * 10)
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "other-scope.txt").write_text("not this folder's")
    (tmp_path / "passwd").symlink_to("/etc/passwd")
    found = listed(str(tmp_path))
    assert [(d.name, d.bytes, d.partial) for d in found] == [
        ("big.zip.crdownload", 10, True),
        ("report.pdf", 14, False),
    ]
    assert found[1].modified.endswith("Z")
    assert listed(str(tmp_path / "not-yet")) == []


def test_a_file_is_read_by_its_name_and_nothing_else_is(tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.7 hello")
    (tmp_path / "passwd").symlink_to("/etc/passwd")
    (tmp_path / "inner").mkdir()
    got = _open(str(tmp_path), "report.pdf")
    try:
        assert (got.size, got.file.read()) == (14, b"%PDF-1.7 hello")
    finally:
        got.file.close()
    for name in ("passwd", "inner", "missing.pdf"):
        with pytest.raises(OpError) as refused:
            _open(str(tmp_path), name)
        assert refused.value.status == 404 and "downloads/list" in refused.value.message
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # opening it must not block the op
    with pytest.raises(OpError):
        _open(str(tmp_path), "pipe")


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "..", ".", "", "x\x00y", "a\\b"])
def test_a_name_that_is_not_a_files_name_is_refused(name: str) -> None:
    with pytest.raises(ValidationError):
        DownloadsGet.model_validate({"name": name})
    assert DownloadsGet.model_validate({"name": "ré sumé (1).pdf"}).name == "ré sumé (1).pdf"
