"""The project store keeps everything across reopen, and a failed write changes nothing."""
import sqlite3

import pandas as pd
import pytest

from fairdesk.core.errors import ProjectError
from fairdesk.core.project import Project


def test_roundtrip_and_reopen(tmp_path):
    path = tmp_path / "p.fairdesk"
    df = pd.DataFrame({"y": [0, 1, 1], "s": [0.1, 0.8, 0.4], "sex": ["F", "M", "F"]})
    project = Project(path)
    ds = project.add_dataset("t.csv", df, "abc", roles={"label": "y", "score": "s"})
    model = project.add_model("lr", "logistic_regression", {"seed": 3}, dataset_id=ds, predictions_id=ds)
    audit = project.add_audit("a", "groups", '{"x": 1}', dataset_id=ds)

    again = Project(path, create=False)
    [info] = again.datasets()
    assert (info.id, info.name, info.sha256, info.n_rows, info.roles) == (ds, "t.csv", "abc", 3, {"label": "y", "score": "s"})
    pd.testing.assert_frame_equal(again.load_dataset(ds), df)
    assert again.models()[0].info == {"seed": 3} and again.models()[0].id == model
    assert again.audit_json(audit) == '{"x": 1}'


def test_missing_project_is_a_clear_error(tmp_path):
    with pytest.raises(ProjectError, match="No project"):
        Project(tmp_path / "none.fairdesk", create=False)


def test_corrupt_project_file(tmp_path):
    bad = tmp_path / "bad.fairdesk"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ProjectError, match="not a readable FairDesk project"):
        Project(bad)


def test_failed_write_keeps_earlier_records(tmp_path, monkeypatch):
    project = Project(tmp_path / "p.fairdesk")
    first = project.add_audit("first", "groups", "{}")

    class Boom(sqlite3.Connection):
        def execute(self, sql, *args):  # fail inside the transaction, after it started
            if sql.startswith("INSERT INTO audits"):
                raise sqlite3.OperationalError("disk I/O error")
            return super().execute(sql, *args)

    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: real_connect(*a, factory=Boom, **k))
    with pytest.raises(ProjectError, match="Nothing was changed"):
        project.add_audit("second", "groups", "{}")
    monkeypatch.undo()
    assert [a.id for a in project.audits()] == [first]
