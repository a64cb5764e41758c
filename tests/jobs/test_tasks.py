"""The job functions shared by the CLI and the GUI: bad input and cancel leave the project intact."""
import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import GroupAuditPlan
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.data.tables import import_table
from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, Cancelled
from fairdesk.core.project import Project
from fairdesk.jobs import groups as tasks
from fairdesk.jobs.engine import Job, JobState

ROLES = ColumnRoles(label="y", score="p", task="task", attributes=("sex",), patient_id="pid")


def _table(n=400, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.binomial(1, 0.4, n)
    return pd.DataFrame({"pid": np.arange(n), "task": rng.choice(["a", "b"], n), "y": y,
                         "p": np.clip(0.3 + 0.4 * y + rng.normal(0, 0.2, n), 0, 1), "sex": rng.choice(["F", "M"], n)})


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "p.fairdesk"
    csv = tmp_path / "good.csv"
    _table().to_csv(csv, index=False)
    ds = import_table(path, csv, roles=ROLES)
    audit = tasks.audit_groups(path, ds, GroupAuditPlan(ROLES, threshold=0.5, n_boot=100))
    return path, ds, audit


@pytest.mark.parametrize("content, expected", [
    ("y,p,task,sex,pid\n0,1.7,a,F,1\n1,0.2,b,M,2\n", "outside"),        # score out of range
    ("y,p,task,sex,pid\n3,0.7,a,F,1\n1,0.2,b,M,2\n", "0/1"),            # non-binary label
    ("label,p,task,sex,pid\n0,0.7,a,F,1\n1,0.2,b,M,2\n", "'y'"),        # wrong column
    ("y,p,task,sex,pid\n,0.7,a,F,1\n1,0.2,b,M,2\n", "empty"),           # missing label
])
def test_bad_file_is_refused_and_project_unchanged(project, tmp_path, content, expected):
    path, ds, audit = project
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    before = (Project(path).datasets(), Project(path).audits())
    with pytest.raises(DataError, match=expected):
        import_table(path, bad, roles=ROLES)
    assert (Project(path).datasets(), Project(path).audits()) == before


def test_corrupt_parquet_is_refused(project, tmp_path):
    path, _, _ = project
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"PAR1 this is not really parquet")
    before = Project(path).datasets()
    with pytest.raises(DataError, match="could not be read as Parquet"):
        import_table(path, bad, roles=ROLES)
    assert Project(path).datasets() == before


def test_cancelled_audit_stores_nothing(project):
    path, ds, audit = project
    token = CancelToken()

    def progress(fraction, message):
        if fraction > 0.2:
            token.cancel()

    with pytest.raises(Cancelled):
        tasks.audit_groups(path, ds, GroupAuditPlan(ROLES, threshold=0.5, n_boot=100), progress=progress, cancel=token)
    assert [a.id for a in Project(path).audits()] == [audit]
    assert Project(path).load_audit(audit).records.shape[0] > 0


def test_job_states_and_messages(project):
    path, ds, _ = project
    ok = Job("audit", lambda progress, cancel: tasks.audit_groups(path, ds, GroupAuditPlan(ROLES, threshold=0.5, n_boot=100),
                                                                  progress=progress, cancel=cancel)).run()
    assert ok.state is JobState.DONE and isinstance(ok.result, int)
    bad = Job("audit", lambda progress, cancel: tasks.audit_groups(
        path, ds, GroupAuditPlan(ColumnRoles("y", "p", "task", ("nosuch",)), threshold=0.5, n_boot=100), progress=progress,
        cancel=cancel)).run()
    assert bad.state is JobState.FAILED and "'nosuch'" in bad.error and bad.details is None
    crash = Job("x", lambda progress, cancel: 1 / 0).run()
    assert crash.state is JobState.FAILED and "ZeroDivisionError" in crash.error and "Traceback" in crash.details
    cancelled = Job("x", lambda progress, cancel: None)
    cancelled.cancel()
    assert cancelled.run().state is JobState.CANCELLED


def test_imaging_demo_flags_the_shortcut_reader_and_clears_the_central_reader(tmp_path):
    """The demo's imaging part: exact counterfactuals; the whole-image classifier is 'dependent', the central-disc
    one 'equivalent within margin' although demographic parity flags it; the scans are an image dataset."""
    import json

    from fairdesk.jobs.demo import imaging_demo

    out = imaging_demo(tmp_path, tmp_path / "demo.fairdesk", seed=0)
    project = Project(tmp_path / "demo.fairdesk")
    doc = json.loads(project.audit_json(out["audit_id"]))
    rows = {r["output"]: r for r in doc["table"]}
    assert rows["reads_whole_image"]["verdict"] == "dependent"
    assert rows["central_disc_only"]["verdict"] == "equivalent within margin"
    assert rows["central_disc_only"]["dp_p"] < 0.01
    assert out["pdf"].read_bytes().startswith(b"%PDF")
    images = project.dataset(out["images_id"])
    assert images.kind == "images" and images.n_rows == 400 and images.roles["attributes"] == ["sex"]


def test_the_group_audit_job_stores_its_document_without_parsing_it_again(tmp_path, monkeypatch):
    """The job hands ``add_audit`` the values it wrote the document from: nothing decodes the text just written,
    and the stored audit is recorded as checked (read back without a schema check) and equals its result."""
    import json

    from fairdesk.core import kinds
    from fairdesk.core import project as project_module

    path = tmp_path / "p.fairdesk"
    csv = tmp_path / "good.csv"
    _table().to_csv(csv, index=False)
    ds = import_table(path, csv, roles=ROLES)
    decoded: list[int] = []
    real = project_module.loads_in_pieces
    monkeypatch.setattr(project_module, "loads_in_pieces", lambda text, *a: decoded.append(1) or real(text, *a))
    audit = tasks.audit_groups(path, ds, GroupAuditPlan(ROLES, threshold=0.5, n_boot=100))
    assert not decoded
    checked: list[str] = []
    monkeypatch.setattr(kinds, "check_document", lambda name, doc: checked.append(name) or [])
    project = Project(path)
    assert project.audit_document(audit) == json.loads(project.audit_json(audit)) and not checked
