"""A project of an earlier FairDesk (WAL journal, no ``audit_checks`` table) on media FairDesk cannot write opens
read-only: it is reported from without a single byte written beside or into it, and a store into it fails with one
sentence. (Read-only media are simulated: tests run as root, for whom ``chmod`` does not stop a write.)"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_an_older_project_on_read_only_media_opens_without_writing(tmp_path, monkeypatch):
    from fairdesk.cli import main

    rng = np.random.default_rng(0)
    n = 300
    pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "sex": rng.choice(["F", "M"], n)}).to_csv(
        tmp_path / "t.csv", index=False)
    media = tmp_path / "media"
    media.mkdir()
    project = media / "old.fairdesk"
    assert main(["audit", "groups", str(tmp_path / "t.csv"), "--label", "y", "--score", "p", "--attribute", "sex",
                 "--threshold", "0.5", "--n-boot", "100", "--quiet", "--project", str(project), "--json",
                 str(tmp_path / "a.json")]) == 0
    con = sqlite3.connect(project)  # what an earlier FairDesk left: a WAL journal, no audit_checks
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("DROP TABLE audit_checks")
    con.commit()
    con.close()
    before = _snapshot(media)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path).resolve().parent == media
                        or Path(path).resolve() == media else real_access(path, mode, **kw))
    assert main(["report", "--project", str(project), "--audit", "1", "--pdf", str(tmp_path / "r.pdf")]) == 0
    assert (tmp_path / "r.pdf").is_file()
    assert _snapshot(media) == before  # nothing written into or beside the project
    from fairdesk.core.errors import ProjectError
    from fairdesk.core.project import Project

    p = Project(project, create=False)
    assert p.read_only and [a.id for a in p.audits()] == [1]
    try:
        p.add_dataset("x", pd.DataFrame({"a": [1]}), "0" * 64)
    except ProjectError as err:
        assert len(str(err).splitlines()) == 1 and "read" in str(err)
    else:
        raise AssertionError("a store into a read-only project was not refused")
    assert _snapshot(media) == before
