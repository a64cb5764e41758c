"""Model › Representation learners (issue 13): the page of the age_independence kind sits on the Model tab, runs the
job on a features dataset of the project, lists and shows what it stored (summary, Tables 1–2, leakage, the frontier
plot, the predictions dataset), refuses a bad form in place, and exports the PDF with the user's small-cell k."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fairdesk.core.export import write_table  # noqa: E402
from fairdesk.core.kinds import AUDIT_KINDS, resolve  # noqa: E402
from fairdesk.core.models.age_independent import LearnerSettings  # noqa: E402
from fairdesk.core.synthetic.age_cohort import make_age_cohort  # noqa: E402

torch.set_num_threads(1)
TINY = LearnerSettings(z_dim=3, hidden=(8,), head_hidden=4, epochs=2, batch_size=16, device="cpu")
METHODS = ("dnn", "svm", "simple")


@pytest.fixture
def cohort_window(window, project_path, tmp_path):
    """The window with a project holding the tiny demo cohort as a features dataset."""
    from fairdesk.core.data.tables import import_table

    csv = tmp_path / "cohort.csv"
    write_table(make_age_cohort(n_participants=24, n_features=8, seed=3), csv)
    dataset_id = import_table(project_path, csv, kind="features", name="tiny cohort")
    window.open_project(project_path)
    return window, dataset_id


def tiny_form(page, frontier: str = "") -> None:
    page.set_methods(METHODS)
    page.reference_check.setChecked(False)
    page.folds_spin.setValue(2)
    page.k_spin.setValue(2)
    page.seed_spin.setValue(4)
    page.frontier_edit.setText(frontier)
    page.learner_base = TINY


def test_the_page_sits_on_the_model_tab(window):
    page = window.age_panel
    assert isinstance(page, resolve(AUDIT_KINDS["age_independence"].page))
    tab = window.pages["model"]
    assert tab.tabText(tab.indexOf(page)) == "Representation learners"
    assert tab.indexOf(page) == tab.indexOf(window.model_tab) + 1  # beside the tabular models
    assert page.kind().name == "age_independence" and not page.run_button.isEnabled()


def test_form_guesses_columns_and_keeps_the_dnn(cohort_window):
    window, dataset_id = cohort_window
    page = window.age_panel
    assert page.dataset_combo.currentData() == dataset_id and page.run_button.isEnabled()
    assert (page.label_combo.currentData(), page.attribute_combo.currentData(),
            page.group_combo.currentData()) == ("label", "age", "participant_id")
    attributes = [page.attribute_combo.itemData(i) for i in range(page.attribute_combo.count())]
    assert "participant_id" not in attributes  # numeric columns only
    assert "8 other numeric columns" in page.features_note.text()
    page.set_methods(["svm"])
    assert page.methods() == ("dnn", "svm")  # the baseline every t-test needs stays on
    page.group_combo.setCurrentIndex(page.group_combo.findData("f001"))
    window.notify_project_changed()  # something else was stored: the user's choices stay
    assert page.group_combo.currentData() == "f001" and "7 other numeric columns" in page.features_note.text()


def test_a_run_stores_lists_and_shows_the_comparison(cohort_window, run_and_wait, monkeypatch, tmp_path):
    window, dataset_id = cohort_window
    page = window.age_panel
    tiny_form(page, frontier="0, 1")
    messages = []
    window.runner.progress.connect(lambda job_id, fraction, message: messages.append(message))
    n_datasets = len(window.project.datasets())

    job = run_and_wait(window, page.run_audit, timeout=300000)
    assert job.state.value == "done", job.error
    audit_id = job.result
    assert page.audit_ids() == [audit_id] and page.audit_id == audit_id
    assert page.status.text() == f"Audit #{audit_id} stored."
    assert any("fold" in m.lower() for m in messages)  # progress per fold and method reached the page

    # the PDF's own words and tables, with the user's k
    summary = page.summary_view.toPlainText()
    assert "participant-disjoint" in summary and "against the DNN" in summary
    table1 = page.table1_view.frame()
    assert list(table1.columns) == ["method", "accuracy", "Δ_eo^(2)", "Δ_eo^(5)"] and len(table1) == 3
    assert all("±" in v for v in table1["accuracy"])
    table2 = page.table2_view.frame()
    assert "verdict" in table2.columns and len(table2) == 2 * 3  # svm and simple × three metrics
    assert set(table2["verdict"]) <= {"differs", "inconclusive"} | {v for v in table2["verdict"]
                                                                     if v.startswith("equivalent")}
    leak = page.leakage_view.frame()
    assert "age R²" in leak.columns and len(leak) == 3
    assert len(page.folds_view.frame()) == 2

    # the frontier: both panels, points per method (simple at λ 0 and 1), labelled axes, λ labels, hover text
    plot = page.frontier
    assert plot.panels() == ["delta", "leakage"]
    assert plot.point_count("delta") == 4  # dnn, svm, simple at two λ
    assert plot.point_count("leakage") == 3  # the svm has no representation
    assert plot.axis_labels("delta")[0] == "accuracy" and "eo" in plot.axis_labels("delta")[1]
    assert plot.axis_labels("leakage") == ("accuracy", "age R² (fresh probe)")
    labelled = [v for t in plot.lambda_labels("delta") for v in t.removeprefix("λ=").split(", ")]
    assert sorted(labelled) == ["0", "1"]  # each λ once (points at one place share a label)
    row = plot.data[plot.data["method"] == "dnn"].iloc[0]
    tip = plot.tooltip_at("delta", row["accuracy"], row["delta_eo_5"])
    assert tip.startswith("DNN") and "accuracy" in tip and "Δ_eo^(5)" in tip

    # the predictions dataset is in the Dataset tab's list, named on the page, and opens on Group gaps
    assert len(window.project.datasets()) == n_datasets + 1
    listed = window.dataset_tab.datasets_view.frame()
    assert page.predictions_id in set(listed["id"]) and f"dataset #{page.predictions_id}" in \
        page.predictions_label.text() and "group audit" in page.predictions_label.text()
    page.open_group_audit()
    assert window.audit_tab.dataset_combo.currentData() == page.predictions_id

    # export: the PDF, through the one route, with the user's small-cell k
    from fairdesk.core.reports import age_independence as report

    seen = {}
    original = report.build_report

    def spy(doc, path, settings):
        seen["k"] = settings.suppress_k
        return original(doc, path, settings)

    monkeypatch.setattr(report, "build_report", spy)
    window.settings.suppress_k = 7
    export = run_and_wait(window, lambda: page.export_pdf(tmp_path / "age"), timeout=120000)
    assert export.state.value == "done", export.error
    assert seen == {"k": 7}
    assert (tmp_path / "age.pdf").read_bytes()[:5] == b"%PDF-"


def test_a_bad_form_says_why_in_place_and_starts_nothing(cohort_window):
    window, _ = cohort_window
    page = window.age_panel
    tiny_form(page)
    page.label_combo.setCurrentIndex(page.label_combo.findData(None))
    assert page.run_audit() is None and page.job is None and window.runner.jobs() == []
    assert "Choose the label column" in page.status.text() and "B00020" in page.status.styleSheet()
    assert page.audit_ids() == []

    page.label_combo.setCurrentIndex(page.label_combo.findData("label"))
    page.frontier_edit.setText("0, lots")
    assert page.run_audit() is None and "separated by commas" in page.status.text()
    page.frontier_edit.setText("")
    page.label_combo.setCurrentIndex(page.label_combo.findData("f000"))
    assert page.run_audit() is None and "must hold 0/1 values" in page.status.text()


def test_cancel_stores_nothing(cohort_window, run_and_wait):
    window, _ = cohort_window
    page = window.age_panel
    tiny_form(page)
    n_datasets = len(window.project.datasets())

    def start_and_cancel():
        job = page.run_audit()
        page.cancel()
        return job

    job = run_and_wait(window, start_and_cancel, timeout=300000)
    assert job.state.value == "cancelled"
    assert page.status.text() == "Cancelled; nothing was stored." and page.audit_ids() == []
    assert len(window.project.datasets()) == n_datasets and window.project.audits() == []
    assert page.run_button.isEnabled() and not page.cancel_button.isEnabled()


def test_the_screen_says_in_words_when_no_lambda_reached_the_target(window):
    """Issue 27: λ chosen per fold and no λ of the grid reaching the leakage target — the page's summary (the
    report's own words) says the learner still carries age, that no λ reached the target, and what to do."""
    from fairdesk.core.audits import age_independence as ap

    doc = ap.run_age_independence(
        make_age_cohort(n_participants=24, n_features=8, seed=3), "label", "age", "participant_id",
        settings=ap.AgeProtocolSettings(methods=("dnn", "simple"), folds=2, seed=4, learner=TINY, reference=False,
                                        lambda_grid=(0.3,), leakage_target=-0.9)).document
    page = window.age_panel
    page.show_results(doc)
    text = " ".join(page.summary_view.toPlainText().split())
    assert "age-indep-simple still carries age: R²" in text
    missed = doc["methods"]["simple"]["lambda_selection"]
    assert missed["reached_in_folds"] < 2  # (the validation of 12 participants can fall below any target)
    assert f"so its representation is not age-independent; no λ up to 0.3 reached the target in the validation " \
           f"of {2 - missed['reached_in_folds']} of 2 folds; raise λ" in text
