"""Note classifiers page (Model tab): the form's guesses from the notes file, training as a job (per-task table,
predictions dataset + model stored, hand-over to the Audit tab), the encoder comparison (audit stored, tables,
reopen, PDF = the report writer's bytes), clear errors for bad notes files before any job, cancel storing nothing."""
from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from fairdesk.core.project import Project  # noqa: E402
from fairdesk.jobs.engine import JobState  # noqa: E402

SHOTS = os.environ.get("FAIRDESK_SHOTS")  # set to a folder to keep PNG grabs of the panel


def _shot(widget, name: str) -> None:
    if SHOTS:
        widget.grab().save(os.path.join(SHOTS, f"{name}.png"))


def _encoder(path, tok, seed: int) -> str:
    from tiny_text import save_tiny_mlm

    return save_tiny_mlm(path, tok, seed, layers=2)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    from fairdesk.core.models import mlm

    root = tmp_path_factory.mktemp("notes_panel")
    from tiny_text import labelled_notes

    notes = labelled_notes(160, numeric=True)
    csv = root / "notes.csv"
    notes.to_csv(csv, index=False)
    tok = mlm.vocabulary_tokenizer(mlm.corpus_words(notes["text"]))
    return {"notes": notes, "csv": csv, "baseline": _encoder(root / "baseline", tok, 0),
            "debiased": _encoder(root / "debiased", tok, 1)}


@pytest.fixture
def panel_for(window, qtbot):
    from fairdesk.gui.tabs.notes import NoteClassifierPanel

    def make():
        panel = NoteClassifierPanel(window)
        qtbot.addWidget(panel)
        panel.resize(1400, 860)
        panel.show()
        return panel

    return make


def _fast(panel) -> None:
    panel.hidden_edit.setText("32")
    panel.alpha_edit.setText("1e-3")
    panel.max_iter_spin.setValue(150)


def test_form_guesses_then_training_fills_the_table_and_stores_predictions(window, project_path, assets, panel_for,
                                                                          run_and_wait, tmp_path):
    from fairdesk.jobs.text import register_language_model

    lm_id = register_language_model(project_path, assets["baseline"])
    window.open_project(project_path, create=True)
    panel = panel_for()
    # the project's language model is offered, and is the default encoder
    assert panel.encoder_combo.currentData() == assets["baseline"]
    assert f"language model #{lm_id}" in panel.encoder_combo.currentText()
    assert not panel.train_button.isEnabled()  # no notes yet

    assert panel.set_notes_file(assets["csv"])
    assert panel.text_combo.currentData() == "text"
    assert panel.tasks_list.checked() == ["sepsis", "shuffled"]
    assert panel.patient_combo.currentData() == "patient_id"
    assert panel.attributes_list.checked() == ["gender"] and panel.attribute_combo.currentData() == "gender"
    assert panel.continuous_list.checked() == ["age"] and panel.numeric_list.checked() == ["sapsii"]
    panel.numeric_list.set_checked([])
    _fast(panel)
    panel.stride_spin.setValue(0)
    assert panel.train_button.isEnabled() and panel.compare_button.isEnabled()

    job = run_and_wait(window, panel.train)
    assert job.state == JobState.DONE, job.error
    model_id, pred_id = job.result
    project = Project(project_path)
    model = next(m for m in project.models() if m.id == model_id)
    assert model.kind == "note_mlp" and model.predictions_id == pred_id
    info = project.dataset(pred_id)
    assert info.kind == "predictions" and info.roles["attributes"] == ["gender"]
    assert info.roles["continuous_attributes"] == ["age"] and info.n_rows == 2 * len(assets["notes"])

    table = panel.metrics_view.frame()
    assert table["task"].tolist() == ["sepsis", "shuffled"]
    metrics = {m["task"]: m for m in model.info["metrics"]}
    for _, row in table.iterrows():
        m = metrics[row["task"]]
        assert row["test AUROC"] == pytest.approx(m["test_auroc"]) and row["val AUPRC"] == pytest.approx(m["val_auprc"])
        assert row["c"] == m["c"] and row["threshold"] == pytest.approx(m["threshold"])
        assert row["MLP"] == "hidden 32, α 0.001"
    assert table.set_index("task").loc["sepsis", "test AUROC"] > 0.8  # the planted word is found
    assert abs(table.set_index("task").loc["shuffled", "test AUROC"] - 0.5) < 0.2
    assert "Encoder baseline" in panel.model_info.toPlainText() and "windows" in panel.model_info.toPlainText()
    assert f"dataset #{pred_id}" in panel.audit_hint.text() and f"#{pred_id}" in panel.status.text()
    assert panel.progress.value() == 1000 and panel.train_button.isEnabled()
    # the stored model is listed (reopen) and the Audit tab gets the predictions
    assert panel.model_combo.currentData() == model_id
    assert window.audit_tab.dataset_combo.findData(pred_id) >= 0  # notify_project_changed reached the Audit tab
    panel.resize(1400, 860)
    _shot(panel, "notes_panel_trained")
    panel.audit_button.click()
    assert window.current_page() is window.audit_tab
    assert window.audit_tab.dataset_combo.currentData() == pred_id


def test_compare_stores_an_audit_fills_the_tables_and_exports_the_pdf(window, project_path, assets, panel_for,
                                                                     run_and_wait, tmp_path):
    from fairdesk.core.reports.encoders import build_report

    window.open_project(project_path, create=True)
    panel = panel_for()
    assert panel.set_notes_file(assets["csv"])
    _fast(panel)
    panel.numeric_list.set_checked([])
    panel.tasks_list.set_checked(["sepsis"])
    panel.notes_edit.editingFinished.emit()  # leaving the unchanged path field keeps the choices made
    assert panel.tasks_list.checked() == ["sepsis"] and panel.numeric_list.checked() == []
    assert panel.choose_encoder_folder(assets["baseline"], target=panel.baseline_combo) == assets["baseline"]
    assert panel.choose_encoder_folder(assets["debiased"], target=panel.debiased_combo) == assets["debiased"]
    assert panel.baseline_combo.currentData() == assets["baseline"]
    assert panel.debiased_combo.currentData() == assets["debiased"]
    panel.nboot_spin.setValue(100)
    panel.min_group_spin.setValue(10)
    assert not panel.export_button.isEnabled()

    job = run_and_wait(window, panel.compare)
    assert job.state == JobState.DONE, job.error
    audit_id = job.result
    project = Project(project_path)
    assert [(a.id, a.kind) for a in project.audits()] == [(audit_id, "note_classifiers")]
    doc = json.loads(project.audit_json(audit_id))
    assert panel.audit_ids() == [audit_id] and panel.audit_id == audit_id
    assert panel.result_tabs.currentIndex() == 1

    summary = panel.summary_view.frame().set_index("encoder")
    assert summary.index.tolist() == ["baseline", "debiased"]
    for name in ("baseline", "debiased"):
        assert summary.loc[name, "probe accuracy"] == pytest.approx(doc["probe"][name]["accuracy"])
        assert summary.loc[name, "gaps differ"] == sum(int(g["n_significant_bh"]) for g in doc["gaps"]
                                                                 if g["encoder"] == name)
    perf = panel.performance_view.frame()
    assert perf[["task", "encoder"]].values.tolist() == [["sepsis", "baseline"], ["sepsis", "debiased"]]
    want = {r["encoder"]: r["test_auroc"] for r in doc["results"]}
    assert perf["test AUROC"].tolist() == pytest.approx([want["baseline"], want["debiased"]])
    gaps = panel.gaps_view.frame()
    assert len(gaps) == 4 and set(gaps["group"]) == {"male", "female"}
    for measure in ("Parity gap", "Recall gap", "Specificity gap"):
        assert all((" differ · " in cell and "unadjusted" in cell) or cell == "not tested in any task"
                   for cell in gaps[measure]), gaps.to_dict()
    assert any(" differ · " in cell for cell in gaps["Parity gap"])
    assert "Benjamini" in panel.gaps_note.text() and not panel.gaps_note.isHidden()
    probe = panel.probe_view.frame().set_index("measure")
    assert probe.loc["AUROC", "debiased"] == pytest.approx(doc["probe"]["debiased"]["auroc"])
    panel.result_tabs.setCurrentIndex(1)
    _shot(panel, "notes_panel_compare")

    # export as a job: the very bytes of the report writer for the stored document
    assert panel.export_button.isEnabled()
    out = tmp_path / "cmp.pdf"
    export = run_and_wait(window, lambda: panel.export_pdf(out))
    assert export.state == JobState.DONE, export.error
    from fairdesk.core.kinds import ReportSettings, releasable

    released = releasable("note_classifiers", doc, ReportSettings())  # what leaves the workstation
    assert out.read_bytes() == build_report(released, tmp_path / "direct.pdf", ReportSettings()).read_bytes()
    assert str(out) in panel.status.text()

    # a fresh page on the same project lists the stored comparison and shows it again
    again = panel_for()
    again.wait_view()
    assert again.audit_ids() == [audit_id]
    assert again.summary_view.frame().equals(panel.summary_view.frame())


def test_bad_notes_files_give_errors_before_any_job(window, project_path, assets, panel_for, run_and_wait,
                                                    tmp_path):
    window.open_project(project_path, create=True)
    panel = panel_for()
    panel.choose_encoder_folder(assets["baseline"])
    notes = assets["notes"]

    assert not panel.set_notes_file(tmp_path / "missing.csv")
    assert "does not exist" in panel.status.text() and panel.train() is None and panel.compare() is None

    no_text = tmp_path / "no_text.csv"
    notes[["patient_id", "gender", "sepsis", "age"]].to_csv(no_text, index=False)
    assert not panel.set_notes_file(no_text)
    assert "looks like note text" in panel.status.text()
    assert not panel.train_button.isEnabled() and panel.train() is None
    assert "text column" in panel.status.text()

    (tmp_path / "notes.txt").write_text("not a table")
    assert not panel.set_notes_file(tmp_path / "notes.txt")
    assert "not a CSV or Parquet" in panel.status.text()
    two = tmp_path / "two.csv"
    notes[["text", "sepsis"]].to_csv(two, index=False)
    assert not panel.set_notes_file(two) and "only 2 column(s)" in panel.status.text()
    assert panel.train() is None

    # Parquet and semicolon-separated CSV are read as the job reads them (first rows only)
    notes.to_parquet(tmp_path / "notes.parquet", index=False)
    assert panel.set_notes_file(tmp_path / "notes.parquet")
    assert panel.tasks_list.checked() == ["sepsis", "shuffled"] and panel.text_combo.currentData() == "text"
    notes.to_csv(tmp_path / "semicolon.csv", index=False, sep=";")
    assert panel.set_notes_file(tmp_path / "semicolon.csv")
    assert panel.patient_combo.currentData() == "patient_id" and panel.attributes_list.checked() == ["gender"]

    # the file changes on disk after the columns were chosen: the missing task column is named, no job starts
    changing = tmp_path / "changing.csv"
    notes.to_csv(changing, index=False)
    assert panel.set_notes_file(changing)
    notes.drop(columns=["sepsis"]).to_csv(changing, index=False)
    assert panel.train() is None
    assert "task 'sepsis'" in panel.status.text() and "not in changing.csv" in panel.status.text()
    assert panel.compare() is None and "task 'sepsis'" in panel.status.text()
    # settings that cannot work are refused before the job, too
    notes.to_csv(changing, index=False)
    panel.hidden_edit.setText("64-x")
    assert panel.train() is None and "hidden sizes" in panel.status.text()
    panel.hidden_edit.setText("32")
    panel.length_spin.setValue(16)
    panel.stride_spin.setValue(20)
    assert panel.train() is None and "stride" in panel.status.text()
    assert window.runner.jobs() == []

    # labels that are not 0/1 are found by the job (it reads the rows), reported, and nothing is stored
    yes_no = tmp_path / "yes_no.csv"
    notes.assign(sepsis=np.where(notes["sepsis"] == 1, "yes", "no")).to_csv(yes_no, index=False)
    assert panel.set_notes_file(yes_no)
    assert "sepsis" not in panel.tasks_list.checked()  # not guessed as a task
    panel.tasks_list.set_checked(["sepsis"])
    panel.length_spin.setValue(0)
    panel.stride_spin.setValue(0)
    job = run_and_wait(window, panel.train)
    assert job.state == JobState.FAILED and "0/1" in panel.status.text()
    project = Project(project_path)
    assert project.datasets() == [] and project.models() == [] and project.audits() == []


def test_cancel_stores_nothing(window, project_path, assets, panel_for, qtbot, monkeypatch):
    from fairdesk.jobs import notes as note_tasks

    reached, release = threading.Event(), threading.Event()
    original = note_tasks.train_note_classifiers

    def held(*args, progress=None, cancel=None, **kw):
        def prog(fraction, message):
            progress(fraction, message)
            if message.startswith("Encoding") and not reached.is_set():
                reached.set()
                release.wait(20)  # hold the worker here until the test has pressed Cancel
        return original(*args, progress=prog, cancel=cancel, **kw)

    monkeypatch.setattr(note_tasks, "train_note_classifiers", held)
    window.open_project(project_path, create=True)
    panel = panel_for()
    panel.choose_encoder_folder(assets["baseline"])
    assert panel.set_notes_file(assets["csv"])
    _fast(panel)
    with qtbot.waitSignal(window.runner.finished, timeout=60000):
        job = panel.train()
        assert job is not None
        qtbot.waitUntil(reached.is_set, timeout=30000)
        qtbot.waitUntil(panel.cancel_button.isEnabled, timeout=5000)
        assert not panel.train_button.isEnabled() and not panel.compare_button.isEnabled()
        panel.cancel_button.click()
        release.set()
    assert job.state == JobState.CANCELLED
    assert panel.status.text() == "Cancelled; nothing was stored."
    assert panel.train_button.isEnabled() and not panel.cancel_button.isEnabled()
    project = Project(project_path)
    assert project.datasets() == [] and project.models() == [] and project.audits() == []


def _gap_doc(with_verdicts: bool) -> dict:
    """A comparison document with hand-made group-audit records: 4 tasks × 2 groups × recall, one encoder. Task t1
    differs (favouring female), t2 is tested but not significant, t3 not tested; with verdicts, t2 is equivalent for
    male and inconclusive for female."""
    recs = []
    for task, gap, sig in (("t1", -0.3, True), ("t2", 0.01, False), ("t3", None, None), ("t4", 0.05, False)):
        for group, sign in (("male", 1), ("female", -1)):
            r = {"task": task, "attribute": "gender", "group": group, "metric": "recall",
                 "gap": None if gap is None else sign * gap, "significant_bh": sig, "significant": sig,
                 "favours": None if not sig else "female"}
            if with_verdicts:
                r["verdict"] = (None if gap is None else "differs" if sig else
                                "equivalent" if (task == "t2" and group == "male") else "inconclusive")
            recs.append(r)
    summary = [{"encoder": "base", "attribute": "gender", "group": g, "metric": "recall", "n_tasks": 3,
                "n_significant": 1, "share_favouring": 1.0 if g == "female" else 0.0, "n_significant_bh": 1,
                "share_favouring_bh": 1.0 if g == "female" else 0.0} for g in ("male", "female")]
    return {"encoders": {"base": {}}, "results": [], "gaps": summary, "method": {"attribute": "gender"},
            "audits": {"base": {"records": recs, "plan": {"equivalence_margin": 0.05} if with_verdicts else {}}}}


def test_gap_verdicts_are_counted_with_and_without_the_verdict_column():
    from fairdesk.core.reports.encoders import build_notes_report, gap_cell, gap_verdict_counts
    from fairdesk.gui.tabs.notes import comparison_gaps, comparison_summary

    new, old = _gap_doc(True), _gap_doc(False)
    assert gap_verdict_counts(new, "base", "male", "recall") == {
        "differs": 1, "equivalent": 1, "inconclusive": 1, "tested": 3, "share_favouring": 0.0}
    assert gap_verdict_counts(new, "base", "female", "recall")["share_favouring"] == 1.0
    # before the group audit had verdicts: significant_bh = differs, every other tested gap inconclusive
    assert gap_verdict_counts(old, "base", "male", "recall") == {
        "differs": 1, "equivalent": 0, "inconclusive": 2, "tested": 3, "share_favouring": 0.0}
    assert gap_cell(new, "base", "female", "recall", new["gaps"][1]) == (
        "1 of 3 differ (100% favour) · 0 equivalent · 2 inconclusive; unadjusted 1")
    # the page and the PDF count the same
    cells = comparison_gaps(new).set_index("group")["Recall gap"]
    assert cells["male"] == gap_cell(new, "base", "male", "recall", new["gaps"][0])
    summ = comparison_summary(new).iloc[0]
    assert (summ["gaps differ"], summ["gaps equivalent"], summ["gaps inconclusive"]) == (2, 1, 3)
    summ_old = comparison_summary(old).iloc[0]
    assert (summ_old["gaps differ"], summ_old["gaps equivalent"], summ_old["gaps inconclusive"]) == (2, 0, 4)
    for doc, margin in ((new, "within ±0.05"), (old, "stored before equivalence was tested")):
        text = build_notes_report({**doc, "kind": "note_classifiers", "tasks": ["t1"],
                                   "encoders": {"base": {"n_notes": 10}}}).text()
        assert "2 differ after that correction" in text and margin in text
        assert "Benjamini–Hochberg correction for making many tests" in text  # named and said in words first
        assert "not evidence that the classifier treats the groups alike" in text
