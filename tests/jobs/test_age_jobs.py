"""The age-independence job (issue 13): what it stores, in one transaction; the group audit on its predictions;
progress per fold and method; cancel stores nothing; the report honours the small-cell k."""
import json

import pytest

torch = pytest.importorskip("torch")

from fairdesk.core.audits.age_independence import PREDICTION_COLUMNS  # noqa: E402
from fairdesk.core.audits.groups import GroupAuditPlan  # noqa: E402
from fairdesk.core.data.schema import ColumnRoles  # noqa: E402
from fairdesk.core.errors import DataError  # noqa: E402
from fairdesk.core.export import write_table  # noqa: E402
from fairdesk.core.models.age_independent import LearnerSettings, fairlearn_available  # noqa: E402
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402
from fairdesk.core.project import Project  # noqa: E402
from fairdesk.core.reports import age_independence as report  # noqa: E402
from fairdesk.core.synthetic.age_cohort import make_age_cohort  # noqa: E402
from fairdesk.jobs import age as jobs  # noqa: E402
from fairdesk.jobs.groups import audit_groups  # noqa: E402
from fairdesk.jobs.reports import export_report  # noqa: E402

torch.set_num_threads(1)
TINY = LearnerSettings(z_dim=3, hidden=(8,), head_hidden=4, epochs=2, batch_size=16, device="cpu")
METHODS = ("dnn", "svm", "simple")


def _no_nan(text: str) -> dict:
    def refuse(name):
        raise AssertionError(f"{name} in the stored JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def cohort_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("age") / "cohort.csv"
    write_table(make_age_cohort(n_participants=24, n_features=8, seed=3), path)
    return path


@pytest.fixture(scope="module")
def stored(cohort_csv, tmp_path_factory):
    project = tmp_path_factory.mktemp("proj") / "p.fairdesk"
    messages = []
    audit_id = jobs.train_age_independent(project, cohort_csv, "label", "age", "participant_id", methods=METHODS,
                                          folds=2, seed=4, learner=TINY, reference=fairlearn_available(),
                                          frontier_lambdas=(0.0, 1.0),
                                          progress=lambda f, m: messages.append((f, m)))
    return project, audit_id, messages


def test_job_stores_document_predictions_and_model_together(stored, cohort_csv):
    project_path, audit_id, _ = stored
    project = Project(project_path, create=False)
    assert project.audit_kind(audit_id) == "age_independence"
    doc = _no_nan(project.audit_json(audit_id))
    assert set(doc) == {"methods", "settings", "provenance"}
    expected = METHODS + (("fairlearn-adversarial",) if fairlearn_available() else ())
    assert tuple(doc["methods"]) == expected
    for name, m in doc["methods"].items():
        for metric in ("accuracy", "delta_eo_2", "delta_eo_5"):
            assert set(m[metric]) >= {"mean", "std", "folds"} and len(m[metric]["folds"]) == 2
        if name != "dnn":
            assert {k: set(v) for k, v in m["t_test"].items()} == {
                k: {"statistic", "p", "alternative"} for k in ("accuracy", "delta_eo_2", "delta_eo_5")}
        assert (m["leakage"] is None) == (name in ("svm", "fairlearn-adversarial"))
        if m["leakage"] is not None:
            assert set(m["leakage"]) >= {"r2", "mae", "auroc"}
    datasets = {d.kind: d for d in project.datasets()}
    assert set(datasets) == {"features", "predictions"}
    n_rows = doc["settings"]["n_rows"]
    assert datasets["predictions"].n_rows == n_rows * len(expected)
    assert datasets["predictions"].roles["continuous_attributes"] == ["age"]  # named after the input's column
    assert datasets["predictions"].roles["patient_id"] == "group_id"
    (model,) = project.models()
    assert model.kind == "age_independent" and model.predictions_id == datasets["predictions"].id
    assert model.info["audit_id"] == audit_id and len(model.info["model_hashes"]) == 2 * len(expected)
    assert jobs.predictions_dataset_of(project_path, audit_id) == datasets["predictions"].id
    table = jobs.predictions_csv_table(project_path, audit_id)
    assert list(table.columns) == list(PREDICTION_COLUMNS)
    assert sorted(table["row"].unique()) == list(range(n_rows))
    sizes = doc["settings"]["fold_sizes"]
    assert sum(s["rows"] for s in sizes) == n_rows and [s["fold"] for s in sizes] == [0, 1]
    assert doc["provenance"]["dataset"] == cohort_csv.name
    if fairlearn_available():
        assert doc["methods"]["fairlearn-adversarial"]["external_reference"] is True
        assert "fairlearn" in doc["provenance"]["versions"]


def test_frontier_is_stored_per_learner(stored):
    project_path, audit_id, _ = stored
    doc = json.loads(Project(project_path, create=False).audit_json(audit_id))
    points = doc["methods"]["simple"]["frontier"]
    assert [p["lambda"] for p in points] == [0.0, 1.0]
    at_run = points[1]  # the run's own λ = 1 is the main run's numbers
    assert at_run["accuracy"] == doc["methods"]["simple"]["accuracy"]["mean"]
    assert "frontier" not in doc["methods"]["dnn"] and doc["settings"]["frontier_lambdas"] == [0.0, 1.0]
    data = report.frontier_data(doc)
    assert len(data[data["method"] == "simple"]) == 2 and set(data["role"]) >= {"dnn", "learner", "baseline"}


def test_progress_names_every_fold_and_method(stored):
    _, _, messages = stored
    text = [m for _, m in messages]
    for fold in (1, 2):
        for method in METHODS:
            assert f"repeat 1, fold {fold}/2: {method}" in text
    fractions = [f for f, _ in messages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_group_audit_runs_on_the_stored_predictions(stored):
    project_path, audit_id, _ = stored
    pred_id = jobs.predictions_dataset_of(project_path, audit_id)
    roles = ColumnRoles.from_dict(Project(project_path, create=False).dataset(pred_id).roles)
    group_audit = audit_groups(project_path, pred_id, GroupAuditPlan(roles, threshold=0.5, bins=(2, 5), n_boot=100,
                                                                     min_group_size=2))
    result = Project(project_path, create=False).load_audit(group_audit)
    deltas = result.records[result.records["metric"] == "delta_eo"]
    assert set(deltas["task"]) >= set(METHODS) and set(deltas["attribute"]) == {"age"}
    assert any(k.startswith("age_independent:dnn/") for k in result.provenance["model_hashes"])


def test_cancel_stores_nothing(cohort_csv, tmp_path):
    project = tmp_path / "c.fairdesk"
    token = CancelToken()

    def progress(fraction, message):
        if ": simple" in message:
            token.cancel()

    with pytest.raises(Cancelled):
        jobs.train_age_independent(project, cohort_csv, "label", "age", "participant_id", methods=METHODS, folds=2,
                                   learner=TINY, reference=False, progress=progress, cancel=token)
    p = Project(project, create=False)
    assert p.audits() == [] and p.datasets() == [] and p.models() == []


def test_bad_settings_store_nothing(cohort_csv, tmp_path):
    project = tmp_path / "b.fairdesk"
    with pytest.raises(DataError, match="dnn"):
        jobs.train_age_independent(project, cohort_csv, "label", "age", "participant_id", methods=("svm",),
                                   folds=2, learner=TINY, reference=False)
    with pytest.raises(DataError, match="λ"):
        jobs.train_age_independent(project, cohort_csv, "label", "age", "participant_id", methods=METHODS,
                                   folds=2, learner=TINY, reference=False, frontier_lambdas=(-1.0,))
    assert Project(project, create=False).audits() == []


def test_stored_dataset_input_gives_the_same_numbers(stored, cohort_csv, tmp_path):
    """A features dataset already in the project is used as is (no second copy stored)."""
    project_path, audit_id, _ = stored
    project = tmp_path / "d.fairdesk"
    from fairdesk.core.data.loaders import load_table, table_sha256

    df = load_table(cohort_csv)
    ds = Project(project).add_dataset("cohort", df, table_sha256(df), kind="features")
    aid = jobs.train_age_independent(project, ds, "label", "age", "participant_id", methods=("dnn", "svm"), folds=2,
                                     seed=4, learner=TINY, reference=False)
    doc = json.loads(Project(project, create=False).audit_json(aid))
    first = json.loads(Project(project_path, create=False).audit_json(audit_id))
    assert doc["methods"]["svm"]["accuracy"] == first["methods"]["svm"]["accuracy"]  # same folds, same seeds
    assert [d.kind for d in Project(project, create=False).datasets()] == ["features", "predictions"]


def test_report_suppresses_small_counts_and_renders(stored, tmp_path):
    project_path, audit_id, _ = stored
    doc = json.loads(Project(project_path, create=False).audit_json(audit_id))
    n_rows, n_part = doc["settings"]["n_rows"], doc["settings"]["n_participants"]
    shown = report.build_age_report(doc, suppress_k=1)
    assert f"{n_rows} rows of {n_part} participants" in shown.text()
    fold_table = [t for t in shown.tables() if t.title == "Held-out folds"][0]
    assert [r[2] for r in fold_table.rows] == [str(s["rows"]) for s in doc["settings"]["fold_sizes"]]
    k = max(n_rows, n_part) + 1
    hidden = report.build_age_report(doc, suppress_k=k)
    text = hidden.text()
    assert f"<{k} rows of <{k} participants" in text
    fold_table = [t for t in hidden.tables() if t.title == "Held-out folds"][0]
    assert all(cell == f"<{k}" for row in fold_table.rows for cell in row[2:])
    for name, verdict in (("differs", "differs"), ("equivalent within margin", "equivalent within ±0.1")):
        assert report.verdict_words(name, 0.1).startswith(verdict)
    assert "Inconclusive means the folds cannot tell" in text
    pdf = export_report(project_path, audit_id, tmp_path / "a.pdf", suppress_k=k)
    again = export_report(project_path, audit_id, tmp_path / "b.pdf", suppress_k=k)
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.read_bytes() == again.read_bytes()
    assert len(hidden.figures()) == 1 and hidden.figures()[0].kind == "age_frontier"
