"""Messages tell the cause (issue 20, item 5): a project locked by another program says so and who can unlock it,
a read-only disk or folder is not "free some disk space", a file merely locked is not "damaged, copy it again"."""
from __future__ import annotations

import errno
import sqlite3

import numpy as np
import pandas as pd
import pytest

from fairdesk.cli import main
from fairdesk.core import project as project_module
from fairdesk.core.errors import ProjectError
from fairdesk.core.export import os_error_sentence
from fairdesk.core.project import Project

_connect = sqlite3.connect


@pytest.fixture
def short_timeout(monkeypatch):
    """SQLite's busy timeout of 30 s cut to 0.1 s, so a lock held by another connection fails at once."""
    monkeypatch.setattr(project_module.sqlite3, "connect",
                        lambda *a, **k: _connect(*a, **{**k, "timeout": min(k.get("timeout", 5), 0.1)}))


def _project(tmp_path) -> Project:
    p = Project(tmp_path / "p.fairdesk")
    p.add_dataset("d", pd.DataFrame({"a": [1, 2]}), "0" * 64)
    return p


def test_a_store_into_a_project_another_program_is_writing_says_locked(tmp_path, short_timeout):
    p = _project(tmp_path)
    other = _connect(p.path, isolation_level=None)  # another program in the middle of a write
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(ProjectError) as info:
            p.add_dataset("e", pd.DataFrame({"a": [3]}), "1" * 64)
    finally:
        other.execute("ROLLBACK")
        other.close()
    text = str(info.value)
    assert "locked by another program" in text and "close that program" in text, text
    assert "nothing was stored" in text and "disk space" not in text and "restore" not in text
    assert [d.name for d in Project(p.path, create=False).datasets()] == ["d"]


def test_opening_a_project_another_program_has_locked_is_not_called_damaged(tmp_path, short_timeout):
    p = _project(tmp_path)
    other = _connect(p.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # no reader may enter
    try:
        with pytest.raises(ProjectError) as info:
            Project(p.path, create=False)
    finally:
        other.execute("ROLLBACK")
        other.close()
    text = str(info.value)
    assert "locked by another program" in text and "not damaged" in text, text
    assert "copy it again" not in text
    # a file that really is damaged still says so
    (tmp_path / "bad.fairdesk").write_bytes(b"SQLite format 3\x00" + bytes(200))
    with pytest.raises(ProjectError, match="copy it again"):
        Project(tmp_path / "bad.fairdesk", create=False)


def test_the_cli_says_the_project_is_locked(tmp_path, short_timeout, capsys):
    rng = np.random.default_rng(0)
    n = 300
    pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "sex": rng.choice(["F", "M"], n)}).to_csv(
        tmp_path / "d.csv", index=False)
    p = _project(tmp_path)
    before = p.path.read_bytes()
    other = _connect(p.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        code = main(["audit", "groups", str(tmp_path / "d.csv"), "--label", "y", "--score", "p", "--attribute",
                     "sex", "--threshold", "0.5", "--n-boot", "100", "--no-calibration", "--json", str(tmp_path / "o.json"),
                     "--project", str(p.path), "--quiet"])
    finally:
        other.execute("ROLLBACK")
        other.close()
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "locked by another program" in err and "disk space" not in err
    assert p.path.read_bytes() == before


def test_a_read_only_project_is_not_a_full_disk(tmp_path, monkeypatch):
    p = _project(tmp_path)

    def read_only(path, *a, **k):  # what a read-only disk or file gives SQLite
        return _connect(f"file:{path}?mode=ro", *a, **{**k, "uri": True})

    monkeypatch.setattr(project_module.sqlite3, "connect", read_only)
    with pytest.raises(ProjectError) as info:
        p.add_dataset("e", pd.DataFrame({"a": [3]}), "1" * 64)
    text = str(info.value)
    assert "read-only" in text and "folder you can write to" in text, text
    assert "disk space" not in text


@pytest.mark.parametrize("code, fix, not_fix", [
    (errno.EROFS, "choose a folder on a disk that can be written", "free some disk space"),
    (errno.EACCES, "ask for permission", "free some disk space"),
    (errno.ENOSPC, "free some disk space", "permission"),
    (errno.EFBIG, "raise the file size limit", "free some disk space"),
])
def test_os_error_fix_matches_its_cause(code, fix, not_fix, tmp_path):
    text = os_error_sentence(OSError(code, "x", str(tmp_path / "o.json")))
    assert fix in text and not_fix not in text, text


def test_a_file_open_in_another_program_says_so():
    err = PermissionError(errno.EACCES, "The process cannot access the file", "o.csv")
    err.winerror = 32  # what Windows gives for a file open in Excel
    text = os_error_sentence(err)
    assert "another program has the file open" in text and "close it" in text and "permission" not in text


def test_creating_a_project_on_a_read_only_disk(tmp_path, monkeypatch):
    def refuse(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path))

    monkeypatch.setattr(project_module.tempfile, "mkstemp", refuse)
    with pytest.raises(ProjectError) as info:
        Project(tmp_path / "new.fairdesk")
    text = str(info.value)
    assert "read-only" in text and "disk space" not in text.lower(), text
