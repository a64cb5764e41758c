"""Language-model GUI: opening a model folder, training with a live loss curve (cancel keeps checkpoints, resume),
the bias-probe panel (table, distribution plot, comparison, completion, stored audits) and the template editor."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from fairdesk.core.project import Project  # noqa: E402
from fairdesk.jobs.engine import JobState  # noqa: E402

SHOTS = os.environ.get("FAIRDESK_SHOTS")  # set to a folder to keep PNG grabs of the panels


def _shot(widget, name: str) -> None:
    if SHOTS:
        widget.grab().save(os.path.join(SHOTS, f"{name}.png"))


from tiny_text import corpus, tiny_models  # noqa: E402,F401  (shared fixtures)


@pytest.fixture
def lm_panel(window, project_path, qtbot):
    from fairdesk.gui.tabs.text_model import LanguageModelPanel

    window.open_project(project_path, create=True)
    panel = LanguageModelPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1300, 760)
    panel.show()
    return panel


def _errors(window, monkeypatch) -> list:
    shown = []
    monkeypatch.setattr(window, "show_error", lambda title, message: shown.append((title, message)))
    return shown


# ==============================================================================================================
# Language models: open, train, cancel, resume


def test_open_model_folder_registers_it_and_bad_folders_are_refused(window, lm_panel, tiny_models, tmp_path,
                                                                     run_and_wait, monkeypatch):
    from fairdesk.gui.tabs.text_audit import MLMAuditPanel

    shown = _errors(window, monkeypatch)
    audit_panel = MLMAuditPanel(window)  # listens to the same project_changed signal
    assert audit_panel.model_combo.count() == 0 and not audit_panel.run_button.isEnabled()
    job = run_and_wait(window, lambda: lm_panel.open_folder(tiny_models[0]))
    assert job.state == JobState.DONE, job.error
    [m] = Project(window.project.path).models()
    assert m.kind == "masked_lm" and m.info["path"] == str(tiny_models[0].resolve())
    assert lm_panel.model_ids() == [m.id]
    assert "language model #" in lm_panel.status.text()
    assert shown == []
    assert audit_panel.model_combo.currentData() == m.id and audit_panel.run_button.isEnabled()
    audit_panel.deleteLater()

    # a folder without config.json: refused at once, plainly, nothing stored
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    assert lm_panel.open_folder(empty) is None
    assert len(shown) == 1 and "no config.json" in shown[0][1]
    # a folder that looks complete but whose weights are no masked LM: the job fails, the error is shown
    from transformers import BertConfig, BertModel

    headless = tmp_path / "headless"
    BertModel(BertConfig(vocab_size=400, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32)).save_pretrained(str(headless))
    for f in tiny_models[0].iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            (headless / f.name).write_bytes(f.read_bytes())
    job = run_and_wait(window, lambda: lm_panel.open_folder(headless))
    assert job.state == JobState.FAILED
    assert len(shown) == 2 and ("masked-LM head" in shown[1][1] or "belong together" in shown[1][1])
    assert len(Project(window.project.path).models()) == 1


def _fill_training_form(panel, corpus, out, steps=20):
    panel.set_corpus(corpus)
    assert panel.text_column.currentText() == "text"
    assert panel.attribute_combo.findData("gender") >= 0
    panel.attribute_combo.setCurrentIndex(panel.attribute_combo.findData("gender"))
    panel.steps_spin.setValue(steps)
    panel.batch_spin.setValue(8)
    panel.vocab_spin.setValue(300)
    panel.log_every_spin.setValue(2)
    panel.save_every_spin.setValue(4)
    panel.seed_spin.setValue(1)
    panel.out_edit.setText(str(out))


def test_training_updates_the_loss_curve_and_stores_the_model(window, lm_panel, corpus, tmp_path, run_and_wait,
                                                              monkeypatch):
    shown = _errors(window, monkeypatch)
    out = tmp_path / "trained"
    _fill_training_form(lm_panel, corpus, out)
    lm_panel.size_combo.setCurrentIndex(lm_panel.size_combo.findData("tiny"))
    cfg = lm_panel.config()
    assert (cfg.attribute_column, cfg.max_steps, cfg.size) == ("gender", 20, "tiny")
    job = run_and_wait(window, lm_panel.train)
    assert job.state == JobState.DONE, job.error
    assert shown == []
    points = lm_panel.loss_curve.points("mlm")
    assert [s for s, _ in points] == [float(s) for s in range(2, 21, 2)]
    assert all(v > 0 for _, v in points)
    acc = lm_panel.loss_curve.points("adv_accuracy")
    assert len(acc) == 10 and all(0.0 <= v <= 1.0 for _, v in acc)
    assert lm_panel.loss_curve.acc_plot.isVisible()
    [m] = Project(window.project.path).models()
    assert m.kind == "masked_lm" and m.id == job.result and m.info["training"]["steps"] == 20
    assert lm_panel.model_ids() == [m.id] and lm_panel.progress.value() == 1000
    assert "language model #" in lm_panel.status.text()
    _shot(lm_panel, "language_models")


def test_cancel_keeps_checkpoints_stores_nothing_and_resume_finishes(window, lm_panel, corpus, tmp_path, qtbot,
                                                                     run_and_wait):
    out = tmp_path / "cancelled"
    _fill_training_form(lm_panel, corpus, out, steps=16)
    lm_panel.attribute_combo.setCurrentIndex(0)  # plain pretraining: no adversary curve
    seen = []

    def on_record(run, rec):
        seen.append(rec["step"])
        if rec["step"] == 6:
            lm_panel.cancel()

    lm_panel.bridge.record.connect(on_record)
    job = run_and_wait(window, lm_panel.train)
    lm_panel.bridge.record.disconnect(on_record)
    assert job.state == JobState.CANCELLED
    assert Project(window.project.path).models() == []
    kept = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert kept and kept[-1] >= "checkpoint-0000006" and not (out / "config.json").exists()
    assert lm_panel.resume_check.isChecked() and "Resume" in lm_panel.status.text()
    assert not lm_panel.loss_curve.acc_plot.isVisible()
    n_before = len(lm_panel.loss_curve.points("mlm"))
    assert n_before >= 3
    # resume: the curve starts from the checkpoint's history and runs to the end; the model is stored
    job = run_and_wait(window, lm_panel.train)
    assert job.state == JobState.DONE, job.error
    steps = [s for s, _ in lm_panel.loss_curve.points("mlm")]
    assert steps == [float(s) for s in range(2, 17, 2)]
    [m] = Project(window.project.path).models()
    assert m.info["training"]["resumed_from"] >= 6 and not lm_panel.resume_check.isChecked()


# ==============================================================================================================
# Bias probe panel


@pytest.fixture
def audit_panel(window, project_path, qtbot, tiny_models):
    from fairdesk.gui.tabs.text_audit import MLMAuditPanel
    from fairdesk.jobs.text import register_language_model

    register_language_model(project_path, tiny_models[0], name="base")
    register_language_model(project_path, tiny_models[1], name="other")
    window.open_project(project_path)
    panel = MLMAuditPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1350, 820)
    panel.show()
    return panel


def test_audit_panel_runs_the_probe_and_shows_table_and_plot(window, audit_panel, run_and_wait, monkeypatch):
    panel = audit_panel
    shown = _errors(window, monkeypatch)
    assert [panel.model_combo.itemText(i) for i in range(panel.model_combo.count())] == ["base  (#1)",
                                                                                        "other  (#2)"]
    assert panel.categories_list.count() == 8 and panel.categories() is None
    assert "445" in panel.templates_info.text()
    panel.model_combo.setCurrentIndex(0)
    panel.categories_list.set_checked([panel.categories_list.item(i).text() for i in (3, 5)])  # DNR, HIV
    assert panel.categories() == ("DNR", "HIV")
    panel.completion_check.setChecked(True)
    job = run_and_wait(window, panel.run_audit)
    assert job.state == JobState.DONE, job.error
    assert shown == []
    [a] = Project(window.project.path).audits()
    assert a.kind == "mlm_bias" and panel.result_id == a.id == job.result and panel.audit_ids() == [a.id]
    frame = panel.table_view.frame()
    assert list(frame["category"]) == ["DNR", "HIV"] and panel.table_view.row_count() == 2
    assert {"mean male", "mean female", "p_value", "q_value", "n", "effect_size", "flagged"} <= set(frame.columns)
    doc = json.loads(Project(window.project.path).audit_json(a.id))
    assert list(frame["p_value"]) == pytest.approx([r["p_value"] for r in doc["records"]])
    # the flagged rows are the ones shaded
    assert panel.table_view.model.flagged_rows() == [i for i, f in enumerate(frame["flagged"]) if f]
    # verdicts: the test over templates by default; DNR (4 templates) cannot be judged, and says so
    assert list(frame.columns[:3]) == ["category", "name", "verdict_text"]
    assert frame["verdict_text"].iloc[0] == "inconclusive: 4 templates" and doc["method"]["unit"] == "template"
    assert frame["verdict"].iloc[1] in ("equivalent", "inconclusive") and not frame["flagged"].any()
    assert panel.table_view.model.inconclusive_rows() == [i for i, v in enumerate(frame["verdict"])
                                                         if v == "inconclusive"]
    assert "(inconclusive: 4 templates)" in panel.plot_category_combo.itemText(0)
    assert "inconclusive" in panel.result_header.text() and "unit: template" in panel.result_header.text()
    # the distribution plot shows one point per scored sentence of the chosen category
    panel.plot_category_combo.setCurrentIndex(panel.plot_category_combo.findData("HIV"))
    n_hiv = len(doc["records"][1]["scores"])
    assert n_hiv == 15 * 2 * 8 and panel.distribution_plot.n_points() == n_hiv
    assert any("score" in t and "nats" in t for t in panel.distribution_plot.tooltips())
    terms = doc["completion"]["method"]["terms"]
    n_templates = len({r["template"] for r in doc["completion"]["rows"]})
    assert panel.completion_template_combo.count() == n_templates + 1  # each template, and all of them
    shown_rows = panel.completion_view.frame()
    assert list(shown_rows["term"]) == terms and "template" not in shown_rows.columns
    assert "mask 1" in shown_rows.columns
    panel.completion_template_combo.setCurrentIndex(n_templates)
    assert panel.completion_view.row_count() == len(doc["completion"]["rows"]) == n_templates * len(terms)
    panel.completion_template_combo.setCurrentIndex(0)
    assert panel.comparison_view.row_count() == 0  # one model only
    panel.results_tabs.setCurrentIndex(1)
    _shot(panel, "lm_audit_distribution")
    # a flagged category is shaded (the tiny random model flags none: mark one in a copy of the document)
    from PySide6.QtCore import Qt

    marked = json.loads(json.dumps(doc))
    marked["records"][1].update(flagged=True, verdict="differs", verdict_text="differs (male-leaning)")
    panel.show_document(marked, a.id)
    model = panel.table_view.model
    assert model.flagged_rows() == [1] and model.inconclusive_rows() == [0]
    assert model.data(model.index(1, 0), Qt.ItemDataRole.BackgroundRole) is not None
    assert model.data(model.index(0, 0), Qt.ItemDataRole.BackgroundRole) is None
    assert model.data(model.index(0, 0), Qt.ItemDataRole.FontRole).italic()     # inconclusive: grey italics
    assert model.data(model.index(1, 0), Qt.ItemDataRole.FontRole) is None
    assert panel.table_view.frame()["verdict_text"].tolist() == ["inconclusive: 4 templates",
                                                                "differs (male-leaning)"]
    assert "1</b> of 2 categories flagged (HIV)" in panel.result_header.text()
    assert "(flagged)" in panel.plot_category_combo.itemText(1)
    panel.results_tabs.setCurrentIndex(0)
    _shot(panel, "lm_audit_table")
    panel.results_tabs.setCurrentIndex(3)
    _shot(panel, "lm_audit_completion")
    panel.results_tabs.setCurrentIndex(4)
    assert "Provenance" in panel.details_view.toPlainText()
    _shot(panel, "lm_audit_method")


def test_audit_panel_compares_two_models_and_reopens_stored_audits(window, audit_panel, run_and_wait, tmp_path,
                                                                   monkeypatch):
    panel = audit_panel
    shown = _errors(window, monkeypatch)
    panel.model_combo.setCurrentIndex(0)
    panel.compare_combo.setCurrentIndex(panel.compare_combo.findData(2))
    panel.categories_list.set_checked([panel.categories_list.item(i).text() for i in (0, 3)])  # ADD, DNR
    panel.test_combo.setCurrentIndex(panel.test_combo.findData("ranksum"))
    job = run_and_wait(window, panel.run_audit)
    assert job.state == JobState.DONE, job.error
    comp = panel.comparison_view.frame()
    assert list(comp["category"]) == ["ADD", "DNR"]
    assert {"base: mean male", "other: mean male", "base: q", "other: flagged", "other: verdict"} <= set(comp.columns)
    assert comp.set_index("category").loc["DNR", "base: verdict"] == "inconclusive"
    assert 1 in panel.comparison_view.model.inconclusive_rows()      # DNR: inconclusive for both models
    assert panel.model_names() == ["base", "other"]
    panel.table_model_combo.setCurrentIndex(1)
    assert panel.table_view.frame()["test_code"].tolist() == ["ranksum", "ranksum"]
    panel.plot_model_combo.setCurrentIndex(1)
    assert panel.distribution_plot.n_points() > 0
    panel.results_tabs.setCurrentIndex(2)
    _shot(panel, "lm_audit_comparison")
    first = job.result

    # a second audit; then reopen the first from the list
    panel.compare_combo.setCurrentIndex(0)
    job = run_and_wait(window, panel.run_audit)
    assert panel.audit_ids() == [first, job.result] and panel.comparison_view.row_count() == 0
    panel.audits_list.setCurrentRow(0)
    panel.wait_view()
    assert panel.result_id == first and panel.comparison_view.row_count() == 2

    # a model whose files changed since it was added is refused, nothing stored
    other = Path(Project(window.project.path).models()[1].info["path"])
    (other / "tokenizer_config.json").write_text((other / "tokenizer_config.json").read_text() + " ")
    try:
        panel.compare_combo.setCurrentIndex(panel.compare_combo.findData(2))
        job = run_and_wait(window, panel.run_audit)
    finally:
        (other / "tokenizer_config.json").write_text((other / "tokenizer_config.json").read_text()[:-1])
    assert job.state == JobState.FAILED and "changed since" in job.error and shown
    assert len(Project(window.project.path).audits()) == 2

    # PDF export through tasks.export_report, as a job
    pytest.importorskip("reportlab")
    pdf = tmp_path / "lm.pdf"
    job = run_and_wait(window, lambda: panel.export_pdf(pdf, audit_id=first))
    assert job.state == JobState.DONE, job.error
    assert pdf.read_bytes()[:5] == b"%PDF-"


# ==============================================================================================================
# Template editor


def test_template_editor_adds_a_category_and_group_and_saves_a_new_file(window, qtbot, tmp_path):
    from fairdesk.core.text.templates import default_bias_templates_path, load_bias_templates
    from fairdesk.gui.widgets.template_editor import TemplateEditorDialog

    dialog = TemplateEditorDialog(None, window, last_dir=str(tmp_path))
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.category_list.count() == 8 and dialog.groups_table.rowCount() == 2
    saved = []
    dialog.saved.connect(saved.append)

    row = dialog.add_category("INS", "Insurance", templates=["[GEND] is insured by [INS]",
                                                             "{45|82} yo [GEND] with [ATTR]"])
    assert dialog.category_list.currentRow() == row == 8
    # no attribute phrases yet: the loader's error is shown plainly and nothing is written
    assert dialog.save_as(tmp_path / "bad.json") is None
    assert "INS.attributes" in dialog.message.text() and not (tmp_path / "bad.json").exists()
    dialog.attributes_edit.setPlainText("medicaid\nprivate insurance")
    # a template without the scored slot
    dialog.templates_edit.setPlainText("insured by [INS]")
    assert dialog.check() is None and "[GEND]" in dialog.message.text()
    dialog.templates_edit.setPlainText("[GEND] is insured by [INS]\n{45|82} yo [GEND] with [ATTR]")
    # renaming the code renames its slot in the templates
    dialog.code_edit.setText("INSUR")
    dialog._code_edited()
    assert "[GEND] is insured by [INSUR]" in dialog.templates_edit.toPlainText()
    # a third word group
    dialog.add_group("nonbinary", "they, person, patient, pt")
    # never over the shipped file
    assert dialog.save_as(default_bias_templates_path()) is None and "new file" in dialog.message.text()
    shipped_dir = default_bias_templates_path().parent
    assert dialog.save_as(shipped_dir / "edited-here.json") is None and "shipped" in dialog.message.text()
    assert not (shipped_dir / "edited-here.json").exists()
    out = dialog.save_as(tmp_path / "edited")
    assert out == tmp_path / "edited.json" and saved == [str(out)]
    tpl = load_bias_templates(out)
    assert tpl.codes[-1] == "INSUR" and tpl.category("INSUR").attributes == ("medicaid", "private insurance")
    assert tpl.counts()["INSUR"] == 3 * 2 and sum(tpl.counts().values()) == 445 + 6
    assert list(tpl.groups) == ["male", "female", "nonbinary"]
    assert tpl.groups["nonbinary"] == ("they", "person", "patient", "pt")
    # the edited file opens again in the editor, and in the audit panel
    again = TemplateEditorDialog(out, window)
    qtbot.addWidget(again)
    assert again.category_list.count() == 9 and again.groups_table.rowCount() == 3
    _shot(dialog, "template_editor")


def test_audit_panel_uses_an_edited_template_file(window, audit_panel, qtbot, tmp_path, monkeypatch):
    shown = _errors(window, monkeypatch)
    dialog = audit_panel.edit_templates()
    qtbot.addWidget(dialog)
    dialog.add_category("INS", "Insurance", ["medicaid"], ["[GEND] has [INS]"])
    dialog.add_group("race_a", "white, caucasian, white, caucasian")
    assert dialog.save_as(tmp_path / "mine.json") == tmp_path / "mine.json"
    assert audit_panel.templates_edit.text() == str(tmp_path / "mine.json")
    assert audit_panel.categories_list.count() == 9
    assert [audit_panel.group_a.itemText(i) for i in range(audit_panel.group_a.count())] == [
        "male", "female", "race_a"]
    (tmp_path / "broken.json").write_text("{not json")
    assert not audit_panel.load_templates(tmp_path / "broken.json")
    assert shown and "not valid JSON" in shown[-1][1]
    assert audit_panel.templates_edit.text() == str(tmp_path / "mine.json")  # unchanged
