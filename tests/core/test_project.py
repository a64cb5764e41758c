"""The project store keeps everything across reopen, and a failed write changes nothing."""
import sqlite3

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

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
    with pytest.raises(ProjectError, match="nothing was stored; the project is as it was before"):
        project.add_audit("second", "groups", "{}")
    monkeypatch.undo()
    assert [a.id for a in project.audits()] == [first]


def _side_files(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path)


def test_project_is_one_file_after_every_call(tmp_path):
    """Rollback-journal mode: no -wal, -shm or -journal beside the project once a call returns, and a copy of the
    file alone holds everything."""
    path = tmp_path / "p.fairdesk"
    project = Project(path)
    ds = project.add_dataset("t.csv", pd.DataFrame({"y": [0, 1]}), "abc")
    project.add_audit("a", "groups", "{}", dataset_id=ds)
    project.audits()
    assert _side_files(path) == []
    copy = tmp_path / "copy" / "p.fairdesk"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    with sqlite3.connect(copy) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [a.name for a in Project(copy, create=False).audits()] == ["a"]


def test_wal_project_of_an_earlier_version_becomes_one_file(tmp_path):
    path = tmp_path / "old.fairdesk"
    Project(path)
    con = sqlite3.connect(path)  # an earlier FairDesk wrote in WAL mode and was killed: its last write is in -wal
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("INSERT INTO audits (name, kind, result, created) VALUES ('old', 'groups', '{}', 'then')")
    con.commit()
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("old.fairdesk", "old.fairdesk-wal"):
        (crashed / name).write_bytes((tmp_path / name).read_bytes())
    con.close()
    assert (crashed / "old.fairdesk-wal").stat().st_size > 0
    project = Project(crashed / "old.fairdesk", create=False)
    assert [a.name for a in project.audits()] == ["old"]
    assert _side_files(project.path) == []
    with sqlite3.connect(project.path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_dataset_and_audit_are_one_transaction(tmp_path):
    project = Project(tmp_path / "p.fairdesk")
    first = project.add_audit("first", "groups", "{}")
    with pytest.raises(RuntimeError, match="killed"):
        with project.transaction():
            ds = project.add_dataset("t.csv", pd.DataFrame({"y": [0, 1]}), "abc")
            assert [d.id for d in project.datasets()] == [ds]  # visible inside the transaction
            raise RuntimeError("killed between the dataset and the audit")
    assert project.datasets() == [] and [a.id for a in project.audits()] == [first]
    with project.transaction():
        ds = project.add_dataset("t.csv", pd.DataFrame({"y": [0, 1]}), "abc")
        audit = project.add_audit("second", "groups", "{}", dataset_id=ds)
    assert [(a.id, a.dataset_id) for a in project.audits()] == [(first, None), (audit, ds)]


def test_copy_audit_brings_its_dataset_in_one_transaction(tmp_path, monkeypatch):
    """What ``fairdesk-cli audit groups --project`` does: the audit of a scratch project and its dataset are copied
    together (document byte for byte) or not at all."""
    df = pd.DataFrame({"y": [0, 1, 1], "sex": ["F", "M", "F"]})
    scratch = Project(tmp_path / "scratch.fairdesk")
    ds = scratch.add_dataset("t.csv", df, "abc", source="/data/t.csv", roles={"label": "y"}, origin={"k": 1})
    audit = scratch.add_audit("Group gaps: sex", "groups", '{"records": [], "x": 1.5}', dataset_id=ds)
    target = Project(tmp_path / "p.fairdesk")
    first = target.add_audit("earlier", "mlm_bias", "{}")
    copied = target.copy_audit(scratch, audit)
    info = next(a for a in target.audits() if a.id == copied)
    assert (info.name, info.kind) == ("Group gaps: sex", "groups") and copied != first
    assert target.audit_json(copied) == scratch.audit_json(audit)
    [d] = target.datasets()
    assert (d.id, d.name, d.sha256, d.source, d.roles, d.origin) == (info.dataset_id, "t.csv", "abc", "/data/t.csv",
                                                                      {"label": "y"}, {"k": 1})
    pd.testing.assert_frame_equal(target.load_dataset(d.id), df)
    # a failure while storing the audit leaves no dataset behind
    monkeypatch.setattr(Project, "_store_audit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("disk full")))
    with pytest.raises(RuntimeError, match="disk full"):
        target.copy_audit(scratch, audit)
    assert [x.id for x in target.datasets()] == [d.id]
    with pytest.raises(ProjectError, match="Audit 9 is not in project scratch"):
        target.copy_audit(scratch, 9)


def test_foreign_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "theirs.fairdesk"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE patients (id INTEGER PRIMARY KEY, name TEXT)")
        con.execute("INSERT INTO patients VALUES (1, 'x')")
    con.close()
    before = path.read_bytes()
    for create in (True, False):
        with pytest.raises(ProjectError, match="not a FairDesk project; it was left untouched"):
            Project(path, create=create)
    assert path.read_bytes() == before
    assert _side_files(path) == []


def test_reading_a_missing_project_creates_nothing(tmp_path):
    with pytest.raises(ProjectError, match="No project"):
        Project(tmp_path / "sub" / "none.fairdesk", create=False)
    assert list(tmp_path.iterdir()) == []


def test_new_project_appears_complete(tmp_path):
    path = tmp_path / "new.fairdesk"
    Project(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.fairdesk"]  # no temporary file left behind
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"


def test_concurrent_writers_each_store_whole(tmp_path):
    """Six threads (one shared handle, so the per-thread transaction is exercised too) store dataset + audit pairs
    at once: every pair lands whole, the busy timeout serialises them, the file stays one file."""
    import threading

    path = tmp_path / "p.fairdesk"
    shared = Project(path)
    errors = []

    def writer(k):
        try:
            for i in range(5):
                with shared.transaction():
                    ds = shared.add_dataset(f"t{k}-{i}", pd.DataFrame({"y": [k, i]}), "abc")
                    shared.add_audit(f"a{k}-{i}", "groups", "{}", dataset_id=ds)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    audits = shared.audits()
    names = {d.id: d.name for d in shared.datasets()}
    assert len(audits) == 30 and all(names[a.dataset_id] == "t" + a.name[1:] for a in audits)
    assert _side_files(path) == []


# ---- recorded paths follow a moved project (the class of issue 23 item 5: image folders, model folders, files) ----
_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 _-é", min_size=1, max_size=12).map(str.strip).filter(
    lambda s: s not in ("", ".", ".."))


@given(project_dirs=st.lists(_NAME, max_size=3), model_dirs=st.lists(_NAME, min_size=1, max_size=3),
       is_file=st.booleans(), rename=_NAME)
def test_a_model_recorded_in_a_project_is_found_after_the_project_moves_with_it(tmp_path_factory, project_dirs,
                                                                               model_dirs, is_file, rename):
    """Every model record with a ``path`` (classifier folders, TorchScript files, generators, language models,
    opened text models) is found at its new place when the study folder holding the project and the model is
    renamed or copied elsewhere, wherever the two sit inside it; a model moved somewhere else keeps its recorded
    path (so the "not there any more" message names where it was)."""
    base = tmp_path_factory.mktemp("moves")
    study = base / "study"
    project_path = study.joinpath(*project_dirs, "p.fairdesk")
    project_path.parent.mkdir(parents=True, exist_ok=True)
    model = study.joinpath(*model_dirs, "model.pt" if is_file else "model")
    assume(model not in project_path.parents)
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(b"weights") if is_file else model.mkdir(exist_ok=True)
    recorded = str(model.resolve())
    Project(project_path).add_model("m", "text_classifier", {"path": recorded, "other": 1})
    moved = study.rename(base / f"{rename}-moved")
    new_project = moved.joinpath(*project_dirs, "p.fairdesk")
    (info,) = [m.info for m in Project(new_project, create=False).models()]
    assert Path(info["path"]) == moved.joinpath(*model_dirs, model.name).resolve()
    assert info["other"] == 1
    # the model itself moved elsewhere (not with the project): the recorded path stays, nothing is guessed
    moved.joinpath(*model_dirs, model.name).rename(base / "elsewhere")
    (info,) = [m.info for m in Project(new_project, create=False).models()]
    assert info["path"] == recorded


def test_a_dataset_read_again_is_decoded_once_and_each_reader_gets_its_own_frame(tmp_path, monkeypatch):
    """The GUI's pages read the same stored dataset while a project opens (the group form, the calibration views):
    its Parquet bytes are decoded once (kept by their content's digest), each reader still gets a frame whose changes
    stay its own, a changed dataset is decoded anew, and every frame equals the stored one."""
    import numpy as np

    decoded: list = []
    real = pd.read_parquet
    monkeypatch.setattr(pd, "read_parquet", lambda *a, **k: decoded.append(1) or real(*a, **k))
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"y": rng.integers(0, 2, 50), "s": rng.random(50), "g": rng.choice(["a", "b"], 50)})
    p = Project(tmp_path / "p.fairdesk")
    first = p.add_dataset("d", df, "0" * 64)
    other = p.add_dataset("e", df.assign(s=df["s"] + 1), "1" * 64)
    a = p.load_dataset(first)
    b = Project(p.path, create=False).load_dataset(first)
    assert len(decoded) == 1
    pd.testing.assert_frame_equal(a, df)
    pd.testing.assert_frame_equal(b, df)
    a.loc[0, "s"] = -5.0
    a["new"] = 1
    a.pop("g")
    c = p.load_dataset(first)
    pd.testing.assert_frame_equal(b, df)
    pd.testing.assert_frame_equal(c, df)
    pd.testing.assert_frame_equal(p.load_dataset(other), df.assign(s=df["s"] + 1))
    assert len(decoded) == 2
