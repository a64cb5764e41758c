"""Model tab: train a baseline classifier as a job; its predictions appear in the project with AUROC per task."""
from __future__ import annotations

import threading

import pytest

from fairdesk.core.project import Project
from fairdesk.jobs.engine import JobState


@pytest.fixture
def features_project(window, project_path):
    from fairdesk.core.data.loaders import table_sha256
    from fairdesk.core.demo import generate_icu_cohort

    cohort = generate_icu_cohort(n_stays=400, seed=1)
    Project(project_path).add_dataset("small cohort", cohort, table_sha256(cohort), kind="features")
    window.open_project(project_path)
    return cohort


def test_train_logistic_regression(window, features_project, run_and_wait):
    tab = window.model_tab
    window.show_page(tab)
    assert tab.dataset_combo.count() == 1
    feats = [c for c in features_project.columns if c.startswith("f_")]
    labels = [c for c in features_project.columns if c.startswith("y_")]
    assert tab.features_list.checked() == feats
    assert tab.labels_list.checked() == labels
    assert tab.patient_combo.currentData() == "patient_id"
    assert "sex" in tab.carry_list.checked()
    tab.labels_list.set_checked(labels[:2])
    tab.kind_combo.setCurrentIndex(tab.kind_combo.findData("logistic_regression"))
    spec = tab.spec()
    assert spec.threads == window.settings.threads == 1
    assert "stay_id" in spec.id_columns
    job = run_and_wait(window, tab.train)
    assert job.state == JobState.DONE, job.error
    model_id, pred_id = job.result
    project = Project(window.project.path)
    preds = project.dataset(pred_id)
    assert preds.kind == "predictions"
    assert tab.models_view.row_count() == 2  # one row per task
    frame = tab.models_view.frame()
    assert frame["val AUROC"].notna().all() and frame["test AUROC"].notna().all()
    assert tab.progress.value() == 1000
    # the predictions are ready for the audit, with the carried-over attributes
    audit = window.audit_tab
    assert audit.dataset_combo.currentData() == pred_id
    assert "sex" in audit.attributes_list.checked()
    assert "age" in audit.continuous_list.checked()


def test_cancel_training(window, features_project, qtbot, monkeypatch):
    import fairdesk.core.models.tabular as tabular

    started = threading.Event()

    def slow_train(df, spec, progress=None, cancel=None):
        started.set()
        while True:
            cancel.check()
            progress(0.1, "training")
            threading.Event().wait(0.01)

    monkeypatch.setattr(tabular, "train_and_predict", slow_train)
    tab = window.model_tab
    before = [d.id for d in Project(window.project.path).datasets()]
    with qtbot.waitSignal(window.runner.finished, timeout=20000):
        job = tab.train()
        assert started.wait(10)
        qtbot.waitUntil(tab.cancel_button.isEnabled, timeout=5000)
        tab.cancel_button.click()
    assert job.state == JobState.CANCELLED
    assert [d.id for d in Project(window.project.path).datasets()] == before
    assert tab.train_button.isEnabled()
