"""Dataset tab: open a file (as a job), preview, roles, validation messages, add to the project."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from fairdesk.core.errors import FairDeskError
from fairdesk.core.project import Project


def test_load_preview_roles_and_add(window, project_path, predictions_csv, run_and_wait):
    window.open_project(project_path, create=True)
    tab = window.dataset_tab
    job = run_and_wait(window, lambda: tab.load_file(predictions_csv))
    assert job.state.value == "done"
    # preview: lazy model over the table, first chunk of rows shown
    model = tab.preview.model
    assert model.columnCount() == 9
    assert 0 < model.rowCount() <= len(tab.df)
    assert model.headerData(0, Qt.Orientation.Horizontal) == "sample_id"
    assert model.data(model.index(0, 4)) not in ("", None)
    # guessed roles
    assert tab.label_combo.currentData() == "label"
    assert tab.score_combo.currentData() == "score"
    assert tab.task_combo.currentData() == "task"
    assert tab.role_combos["patient_id"].currentData() == "patient_id"
    assert tab.role_combos["split"].currentData() == "split"
    assert set(tab.attributes_list.checked()) == {"sex", "ethnicity"}
    assert tab.continuous_list.checked() == ["age"]
    assert "Ready" in tab.validation_text()
    assert tab.add_button.isEnabled()
    # the user unticks ethnicity, then adds the dataset
    tab.attributes_list.set_checked(["sex"])
    tab.validate_now()
    job = run_and_wait(window, lambda: tab.add_to_project())
    assert job.state.value == "done", job.error
    infos = Project(project_path).datasets()
    assert [d.name for d in infos] == ["predictions.csv"]
    assert infos[0].roles["attributes"] == ["sex"] and infos[0].kind == "predictions"
    assert tab.datasets_view.row_count() == 1
    # the Audit tab offers it at once
    assert window.audit_tab.dataset_combo.count() == 1


def test_bad_scores_are_named_and_project_untouched(window, project_path, tmp_path, predictions_frame,
                                                    run_and_wait):
    window.open_project(project_path, create=True)
    df = predictions_frame()
    df.loc[[3, 7], "score"] = [1.7, -0.2]
    df.loc[5, "label"] = 2
    bad = tmp_path / "bad.csv"
    df.to_csv(bad, index=False)
    tab = window.dataset_tab
    run_and_wait(window, lambda: tab.load_file(bad))
    text = tab.validation_text()
    assert "must be a probability in [0, 1]" in text and "2 rows lie outside" in text
    assert "must hold 0/1" in text
    assert "Problem" in text
    assert not tab.add_button.isEnabled()
    assert tab.add_to_project() is None
    assert Project(project_path).datasets() == []
    # choosing a wrong column is explained too
    tab.score_combo.setCurrentIndex(tab.score_combo.findData("sex"))
    tab.validate_now()
    # (sex is also an attribute: the two roles are named first, issue 20)
    assert "'sex' is given 2 roles" in tab.validation_text()


def test_unreadable_file_shows_the_data_error(window, project_path, tmp_path, run_and_wait):
    window.open_project(project_path, create=True)
    sheet = tmp_path / "results.xlsx"
    sheet.write_bytes(b"PK\x03\x04 not really a spreadsheet")
    tab = window.dataset_tab
    job = run_and_wait(window, lambda: tab.load_file(sheet))
    assert job.state.value == "failed"
    assert "Export the table as CSV or Parquet" in tab.validation_text()
    assert "Export the table as CSV or Parquet" in window.jobs_panel.message_text(job.id)
    assert "Failed" in window.statusBar().currentMessage()
    assert window.jobs_panel.state_text(job.id) == "failed"
    assert Project(project_path).datasets() == []


def test_features_table_is_recognised(window, project_path, tmp_path, run_and_wait):
    import pandas as pd

    window.open_project(project_path, create=True)
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"patient_id": np.arange(60), "sex": rng.choice(["F", "M"], 60),
                       "f_hr": rng.normal(size=60), "f_lactate": rng.normal(size=60),
                       "y_mortality": rng.integers(0, 2, 60)})
    path = tmp_path / "features.parquet"
    df.to_parquet(path)
    tab = window.dataset_tab
    run_and_wait(window, lambda: tab.load_file(path))
    assert tab.kind == "features"
    assert "2 feature columns" in tab.validation_text()
    job = run_and_wait(window, lambda: tab.add_to_project())
    assert job.state.value == "done"
    assert [d.kind for d in Project(project_path).datasets()] == ["features"]
    assert window.model_tab.dataset_combo.count() == 1
    assert window.model_tab.features_list.checked() == ["f_hr", "f_lactate"]
    assert window.model_tab.labels_list.checked() == ["y_mortality"]


def test_no_project_explains_the_disabled_button_and_creates_one(window, project_path, predictions_csv,
                                                                  run_and_wait, monkeypatch, qtbot):
    from fairdesk.gui.tabs.dataset import NO_PROJECT_HINT

    tab = window.dataset_tab
    window.show_page(tab)
    assert window.project is None
    assert not tab.no_project_label.isVisible()  # no table yet: nothing to explain
    run_and_wait(window, lambda: tab.load_file(predictions_csv))
    assert "Ready" in tab.validation_text()
    assert not tab.add_button.isEnabled()
    assert tab.add_button.toolTip() == NO_PROJECT_HINT
    assert tab.no_project_label.isVisible() and "Open or create a project to add this table" in \
        tab.no_project_label.text()
    assert tab.create_project_button.isVisible()
    # in view without scrolling, even on a 1366×768 screen
    window.resize(1366, 768)
    qtbot.wait(50)
    assert not tab.no_project_label.visibleRegion().isEmpty() and not tab.add_button.visibleRegion().isEmpty()
    # one click creates the project (the save dialog answered here) and the table can be added at once
    monkeypatch.setattr(window, "new_project", lambda path=None: window.open_project(project_path, create=True))
    tab.create_project_button.click()
    assert window.project is not None
    assert tab.add_button.isEnabled() and not tab.no_project_label.isVisible()
    job = run_and_wait(window, lambda: tab.add_to_project())
    assert job.state.value == "done", job.error
    assert [d.name for d in Project(project_path).datasets()] == ["predictions.csv"]


def test_bad_file_resets_the_form_and_says_what_it_is(window, project_path, predictions_csv, tmp_path,
                                                      run_and_wait):
    window.open_project(project_path, create=True)
    tab = window.dataset_tab
    run_and_wait(window, lambda: tab.load_file(predictions_csv))
    assert tab.label_combo.currentData() == "label" and tab.attributes_list.count() > 0
    png = tmp_path / "scan.csv"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    job = run_and_wait(window, lambda: tab.load_file(png))
    assert job.state.value == "failed"
    text = tab.validation_text()
    assert "this is a PNG image, not a CSV table" in text
    assert "codec" not in text and "spreadsheet" not in text
    # no roles of the previous file are left, nothing can be added
    assert tab.df is None and tab.label_combo.count() == 0 and tab.attributes_list.count() == 0
    assert tab.preview.model.rowCount() == 0 and not tab.add_button.isEnabled()
    # the job's bar does not stay where the load stopped
    bar = window.jobs_panel.bars[job.id]
    assert bar.value() == 0 and bar.format() == "failed"


def test_first_use_open_csv_without_project_run_audit_export(window, project_path, predictions_csv, tmp_path,
                                                             run_and_wait, monkeypatch):
    """Open a CSV with no project → Create project… → Add → Run audit → findings on screen → Export PDF."""
    tab = window.dataset_tab
    run_and_wait(window, lambda: tab.load_file(predictions_csv))
    monkeypatch.setattr(window, "new_project", lambda path=None: window.open_project(project_path, create=True))
    tab.create_project_button.click()
    job = run_and_wait(window, lambda: tab.add_to_project())
    assert job.state.value == "done", job.error
    audit = window.audit_tab
    window.show_page(audit)
    assert audit.run_button.isEnabled() and audit.dataset_combo.count() == 1
    audit.n_boot_spin.setValue(200)
    # no threshold is chosen until the user chooses one (issue 21): the plan is refused in one sentence
    assert not (audit.fixed_radio.isChecked() or audit.best_f1_radio.isChecked())
    assert not audit.threshold_spin.isEnabled()
    with pytest.raises(FairDeskError, match="Choose the threshold"):
        audit.plan()
    audit.fixed_radio.setChecked(True)
    job = run_and_wait(window, audit.run_audit)
    assert job.state.value == "done", job.error
    audit.wait_view()
    assert "comparisons" in audit.findings.counts_label.text() and "What differs" in \
        audit.findings.text.toPlainText()
    pdf = tmp_path / "report.pdf"
    job = run_and_wait(window, lambda: audit.export_pdf(pdf))
    assert job.state.value == "done", job.error
    assert pdf.read_bytes()[:4] == b"%PDF"
