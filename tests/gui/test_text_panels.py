"""Language-model GUI: opening a model folder, training with a live loss curve (cancel keeps checkpoints, resume),
the bias-probe panel (table, distribution plot, comparison, completion, stored audits) and the template editor."""
from __future__ import annotations

import json
import os

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


def build_tiny_mlm(folder, seed: int = 0):
    """A random BERT masked LM over the probe's own words (hand-made WordPiece vocabulary), saved to ``folder``."""
    from transformers import BertConfig, BertForMaskedLM

    from fairdesk.core.models.mlm import vocabulary_tokenizer
    from fairdesk.core.text.templates import load_bias_templates, load_completion_templates

    tpl = load_bias_templates()
    words = set()
    for c in tpl.categories:
        for t in c.templates:
            words |= set(t.replace("[GEND]", " ").replace("[ATTR]", " ").split())
        for a in c.attributes:
            words |= set(a.split())
    for g in tpl.groups.values():
        words |= set(g)
    for t in load_completion_templates().terms:
        words |= set(t.split())
    tok = vocabulary_tokenizer(sorted(words))
    torch.manual_seed(seed)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                       initializer_range=0.5))
    model.save_pretrained(str(folder), safe_serialization=True)
    tok.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_mlms")
    return build_tiny_mlm(root / "base", 0), build_tiny_mlm(root / "other", 1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from fairdesk.core.models.mlm import synthetic_notes

    path = tmp_path_factory.mktemp("corpus") / "notes.csv"
    synthetic_notes(80, {"HIV": 0.9}, seed=0, n_fillers=(1, 2)).to_csv(path, index=False)
    return path


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
    shown = _errors(window, monkeypatch)
    job = run_and_wait(window, lambda: lm_panel.open_folder(tiny_models[0]))
    assert job.state == JobState.DONE, job.error
    [m] = Project(window.project.path).models()
    assert m.kind == "masked_lm" and m.info["path"] == str(tiny_models[0].resolve())
    assert lm_panel.model_ids() == [m.id]
    assert "language model #" in lm_panel.status.text()
    assert shown == []

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
