"""Note-level classifiers on frozen masked-LM features (001 §4.1, METHODS §1 merge rule, §7): windows and the
10× cap, the (max + mean·n/c) merge and its c chosen on validation AUPRC, patient-disjoint splits, predictions the
group audit reads, a planted signal found and a shuffled label not, cancel storing nothing, CLI and PDF."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from fairdesk.core.audits import encoders as encoders_audit  # noqa: E402
from fairdesk.core.errors import DataError, ModelError  # noqa: E402
from fairdesk.core.jsonable import jsonable  # noqa: E402
from fairdesk.core.models import mlm  # noqa: E402
from fairdesk.core.models import note_classifier as nc  # noqa: E402
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402
from fairdesk.core.project import Project  # noqa: E402

GRID = ({"hidden_layer_sizes": (32,), "alpha": 1e-3},)
MAX_POS = 64


def _save_encoder(path, tok, seed: int, layers: int = 3):
    from tiny_text import save_tiny_mlm

    return save_tiny_mlm(path, tok, seed, layers=layers, max_positions=MAX_POS)


@pytest.fixture(scope="module")
def notes():
    from tiny_text import labelled_notes

    return labelled_notes()


@pytest.fixture(scope="module")
def encoders(tmp_path_factory, notes):
    """Two untrained tiny BERTs (features need not be good: [CLS] still mixes every token's embedding)."""
    root = tmp_path_factory.mktemp("encoders")
    tok = mlm.vocabulary_tokenizer(mlm.corpus_words(notes["text"]))
    return {"baseline": _save_encoder(root / "baseline", tok, 0), "debiased": _save_encoder(root / "debiased", tok, 1)}


def _spec(**kw):
    base = dict(tasks=["sepsis", "shuffled"], attributes=["gender"], mlp_grid=GRID, max_iter=150)
    base.update(kw)
    return nc.NoteClassifierSpec(**base)


@pytest.fixture(scope="module")
def trained(notes, encoders):
    return nc.train_note_classifiers(notes, encoders["baseline"], _spec())


# --------------------------------------------------------------------------------------------------------------
# Merge rule, windows, c


def test_merge_rule_by_hand():
    # n = 2, c = 2: n/c = 1 -> (0.8 + 0.5·1) / 2 = 0.65 (METHODS §1 check)
    assert nc.merge_probabilities([0.2, 0.8], 2) == pytest.approx(0.65)
    # n = 3, c = 1: n/c = 3, max 0.7, mean 0.4 -> (0.7 + 1.2) / 4 = 0.475
    assert nc.merge_probabilities([0.1, 0.4, 0.7], 1) == pytest.approx(0.475)
    # n = 4, c = 8: n/c = 0.5, max 0.9, mean 0.3 -> (0.9 + 0.15) / 1.5 = 0.7
    assert nc.merge_probabilities([0.9, 0.1, 0.1, 0.1], 8) == pytest.approx(0.7)
    assert nc.merge_probabilities([0.2, 0.8], 1e9) == pytest.approx(0.8, abs=1e-6)  # c -> inf: max
    assert nc.merge_probabilities([0.2, 0.8], 1e-9) == pytest.approx(0.5, abs=1e-6)  # c -> 0: mean
    assert nc.merge_probabilities([0.3], 0.01) == pytest.approx(0.3)  # one window: the window itself
    idx = np.array([0, 0, 1, 1, 1, 2, 3, 3, 3, 3])
    p = np.array([0.2, 0.8, 0.1, 0.4, 0.7, 0.3, 0.9, 0.1, 0.1, 0.1])
    assert nc.merge_by_note(p, idx, 4, 2).tolist() == pytest.approx(
        [nc.merge_probabilities(p[idx == k], 2) for k in range(4)])
    with pytest.raises(DataError):
        nc.merge_probabilities([0.5], 0)


def test_window_spans_and_the_ten_window_cap():
    assert nc.window_spans(25, 10, 10, 10) == ([(0, 10), (10, 20), (20, 25)], 0)
    assert nc.window_spans(25, 10, 5, 10) == ([(0, 10), (5, 15), (10, 20), (15, 25)], 0)
    assert nc.window_spans(10, 10, 10, 10) == ([(0, 10)], 0)
    assert nc.window_spans(0, 10, 10, 10) == ([(0, 0)], 0)  # an empty note still gets one ([CLS] only) window
    spans, lost = nc.window_spans(1000, 30, 30, 10)
    assert len(spans) == 10 and spans[-1] == (270, 300) and lost == 700  # at most 10 × the length, rest counted
    spans, lost = nc.window_spans(1000, 30, 15, 10)
    assert len(spans) == 10 and spans[-1] == (135, 165) and lost == 835


def test_long_notes_are_capped_and_truncation_is_recorded(encoders, notes):
    words = notes["text"].iloc[0].split()
    texts = [" ".join(words * 60), "pt stable ."]  # the first note is far longer than 10 windows
    tok = mlm.load_masked_lm(encoders["baseline"])[1]
    n_tokens = len(tok(mlm.replace_phi(texts[0]), add_special_tokens=False)["input_ids"])
    enc = nc.encode_notes(encoders["baseline"], texts, _spec(max_length=16))
    assert enc.n_windows.tolist() == [10, 1]
    assert enc.info["truncated_notes"] == 1 and enc.info["truncated_tokens"] == n_tokens - 10 * 14
    assert enc.features.shape == (11, 4 * 32)  # last four layers' [CLS] (3 layers + embeddings) concatenated
    assert enc.info["layers_concatenated"] == 4
    with pytest.raises(DataError, match="stride"):
        nc.encode_notes(encoders["baseline"], texts, _spec(max_length=16, stride=15))
    with pytest.raises(ModelError, match="longer than the model"):
        nc.encode_notes(encoders["baseline"], texts, _spec(max_length=MAX_POS + 1))


def test_windows_match_a_direct_forward_pass(encoders):
    model, tok = mlm.load_masked_lm(encoders["baseline"])
    text = "pt has sepsis . vital signs stable . " * 6
    enc = nc.encode_notes(encoders["baseline"], [text], _spec(max_length=16, stride=7))
    ids = tok(text, add_special_tokens=False)["input_ids"]
    second = [tok.cls_token_id] + ids[7:21] + [tok.sep_token_id]
    with torch.inference_mode():
        out = model.base_model(input_ids=torch.tensor([second]), output_hidden_states=True)
    want = torch.cat([out.hidden_states[-i][:, 0] for i in range(1, 5)], dim=1).numpy()[0]
    assert enc.features[1] == pytest.approx(want, abs=1e-5)


def test_c_is_chosen_to_maximise_validation_auprc():
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(0)
    # positives: one high window among many low ones (the max ranks them), negatives: uniformly moderate windows
    idx, p, y = [], [], []
    for k in range(40):
        pos = k % 2 == 0
        w = rng.uniform(0.05, 0.15, 8)
        if pos:
            w[rng.integers(8)] = 0.9
        else:
            w = rng.uniform(0.25, 0.45, 8)
        idx += [k] * 8
        p += list(w)
        y.append(int(pos))
    idx, p, y = np.array(idx), np.array(p), np.array(y)
    c, auprc, curve = nc.choose_c(p, idx, y)
    brute = {cc: average_precision_score(y, nc.merge_by_note(p, idx, 40, cc)) for cc in nc.MERGE_C_GRID}
    assert auprc == pytest.approx(max(brute.values())) and curve == pytest.approx(brute)
    assert c >= 5 and auprc == pytest.approx(1.0)  # perfect only for c > 4.4 (r = 8/c < 1.8); ties -> nearest 2
    assert brute[0.001] < 0.8  # the mean rule ranks them badly
    # the mirror case: negatives have one spike among moderate windows, positives are a little higher throughout;
    # (0.5 everywhere); a negative's score (0.99 + 0.38625·r)/(1 + r) is below 0.5 only for r > 4.31, i.e.
    # c = 8/r < 1.86: c = 1.5 is the perfect c closest to 2
    pos = np.isin(idx, np.flatnonzero(y == 1))
    p2 = np.where(pos, 0.5, 0.3)
    p2[np.flatnonzero(~pos)[::8]] = 0.99
    c2, auprc2, curve2 = nc.choose_c(p2, idx, y)
    assert c2 == 1.5 and auprc2 == pytest.approx(1.0) and curve2[1000.0] < 0.8
    # one window per note: every c gives the same scores -> the default c = 2
    c3, _, _ = nc.choose_c(np.linspace(0, 1, 10), np.arange(10), np.array([0, 1] * 5))
    assert c3 == 2.0


# --------------------------------------------------------------------------------------------------------------
# Training, predictions, audit


def test_predictions_are_patient_disjoint_and_audit_ready(trained, notes):
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import validate

    preds = trained.predictions
    assert set(preds["task"]) == {"sepsis", "shuffled"} and len(preds) == 2 * len(notes)
    assert preds.groupby("patient_id")["split"].nunique().max() == 1
    assert set(preds["split"]) == {"train", "val", "test"}
    roles = nc.prediction_roles(trained.spec)
    report = validate(preds, roles)
    assert report.ok, report.text()
    result = run_group_audit(preds, GroupAuditPlan(roles=roles, threshold="best_f1", n_boot=100))
    assert set(result.records["task"]) == {"sepsis", "shuffled"} and set(result.records["group"]) == {"male", "female"}
    # the threshold the audit chooses on validation rows is the one recorded by training
    for m in trained.metrics:
        assert result.thresholds[m["task"]] == pytest.approx(m["threshold"])
        assert m["c"] in nc.MERGE_C_GRID and m["mlp"] == {"hidden_layer_sizes": [32], "alpha": 1e-3}
    d = trained.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["encoder"]["fingerprint"] == mlm.model_fingerprint(trained.encoder["path"]) and d["seed"] == 0
    assert len(d["data_sha256"]) == 64 and set(d["model_hashes"]) == {"sepsis", "shuffled"}


def test_planted_word_is_found_and_shuffled_label_is_not(trained):
    m = {r["task"]: r for r in trained.metrics}
    assert m["sepsis"]["test_auroc"] > 0.85 and m["sepsis"]["test_auprc"] > 0.85
    assert abs(m["shuffled"]["test_auroc"] - 0.5) < 0.15


def test_numeric_columns_join_the_features_and_the_grid_is_searched(notes, encoders, trained):
    df = notes.copy()
    df["lab"] = df["shuffled"] * 2.0 + np.random.default_rng(1).normal(0, 0.3, len(df))  # the signal is numeric
    grid = ({"hidden_layer_sizes": (8,), "alpha": 1e-3}, {"hidden_layer_sizes": (16, 8), "alpha": 1e-2})
    res = nc.train_note_classifiers(df, encoders["baseline"], _spec(tasks=["shuffled"], numeric_columns=["lab"],
                                                                    mlp_grid=grid), encoded=trained.encoded)
    row = res.metrics[0]
    without = next(m for m in trained.metrics if m["task"] == "shuffled")
    assert row["n_features"] == without["n_features"] + 1 == 4 * 32 + 1
    # 128 standardised [CLS] features of an untrained encoder let a small MLP memorise 190 training notes, so the
    # numeric signal is only partly used here — but clearly
    assert row["test_auroc"] > without["test_auroc"] + 0.1
    assert [g["params"] for g in row["mlp_grid"]] == [jsonable(g) for g in grid]
    best = max(row["mlp_grid"], key=lambda g: g["val_auprc"])
    assert row["mlp"] == best["params"] and row["c"] == best["c"]


def test_bad_input_gives_clear_errors(notes, encoders):
    with pytest.raises(DataError, match="not in the notes table"):
        nc.train_note_classifiers(notes, encoders["baseline"], _spec(tasks=["nope"]))
    bad = notes.assign(sepsis=notes["sepsis"].astype(str).replace("1", "yes"))
    with pytest.raises(DataError, match="0/1"):
        nc.train_note_classifiers(bad, encoders["baseline"], _spec(tasks=["sepsis"]))
    with pytest.raises(ModelError, match="does not exist"):
        nc.train_note_classifiers(notes, "/nonexistent/encoder", _spec())


def test_compare_encoders_document(notes, encoders):
    doc = encoders_audit.compare_encoders(notes, encoders, ["sepsis", "shuffled"], "gender", _spec(), n_boot=100)
    json.dumps(doc, allow_nan=False)
    assert doc["kind"] == "note_classifiers" and list(doc["encoders"]) == ["baseline", "debiased"]
    assert {(r["encoder"], r["task"]) for r in doc["results"]} == {(e, t) for e in encoders
                                                                   for t in ("sepsis", "shuffled")}
    assert {(g["encoder"], g["metric"]) for g in doc["gaps"]} == {(e, m) for e in encoders
                                                                  for m in ("parity", "recall", "specificity")}
    for name in encoders:
        probe = doc["probe"][name]
        assert 0 <= probe["accuracy"] <= 1 and probe["n"] == notes["patient_id"].nunique()
        assert doc["encoders"][name]["fingerprint"] == doc["provenance"]["model_hashes"][f"{name}:encoder"]
    assert doc["provenance"]["seed"] == 0 and doc["method"]["n_boot"] == 100


# --------------------------------------------------------------------------------------------------------------
# Jobs, cancel, CLI, PDF


def _cancel_at(word):
    token = CancelToken()

    def progress(fraction, message):
        if word in message:
            token.cancel()
    return token, progress


def test_jobs_store_predictions_and_cancel_stores_nothing(tmp_path, notes, encoders):
    from fairdesk.jobs import notes as note_tasks

    csv = tmp_path / "notes.csv"
    notes.to_csv(csv, index=False)
    project = tmp_path / "p.fairdesk"
    token, progress = _cancel_at("predicting")
    with pytest.raises(Cancelled):
        note_tasks.train_note_classifiers(project, csv, encoders["baseline"], _spec(), progress=progress,
                                          cancel=token)
    token, progress = _cancel_at("auditing")
    with pytest.raises(Cancelled):
        note_tasks.compare_encoders_job(project, csv, encoders, ["sepsis"], "gender", _spec(tasks=["sepsis"]),
                                        n_boot=100, progress=progress, cancel=token)
    p = Project(project)
    assert p.datasets() == [] and p.models() == [] and p.audits() == []

    model_id, pred_id = note_tasks.train_note_classifiers(project, csv, encoders["baseline"], _spec())
    info = p.dataset(pred_id)
    assert info.kind == "predictions" and info.roles["sample_id"] == "sample_id"
    assert info.roles["attributes"] == ["gender"]
    model = next(m for m in p.models() if m.id == model_id)
    assert model.predictions_id == pred_id and model.kind == nc.MODEL_KIND
    from fairdesk.jobs.groups import model_hashes_for

    assert set(model_hashes_for(p, pred_id)) == {"note_mlp:sepsis", "note_mlp:shuffled"}


def test_cli_exit_codes_and_pdf(tmp_path, notes, encoders):
    from fairdesk.cli import main
    from fairdesk.jobs.reports import export_report

    csv = tmp_path / "notes.csv"
    notes.to_csv(csv, index=False)
    common = ["--notes", str(csv), "--tasks", "sepsis", "--hidden", "32", "--alpha", "1e-3", "--quiet"]
    assert main(["train", "notes", "--model", encoders["baseline"], "--attribute", "gender",
                 "--out", str(tmp_path / "p.csv"), "--json", str(tmp_path / "t.json"), *common]) == 0
    preds = pd.read_csv(tmp_path / "p.csv")
    assert len(preds) == len(notes) and {"sample_id", "patient_id", "gender", "score", "split"} <= set(preds.columns)
    assert json.loads((tmp_path / "t.json").read_text())["metrics"][0]["task"] == "sepsis"
    assert main(["train", "notes", "--model", encoders["baseline"], "--attribute", "nope",
                 "--out", str(tmp_path / "x.csv"), *common]) == 2
    assert main(["train", "notes", "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "x.csv"),
                 *common]) == 2
    assert not (tmp_path / "x.csv").exists()

    project = tmp_path / "proj.fairdesk"
    assert main(["audit", "encoders", "--baseline", encoders["baseline"], "--debiased", encoders["debiased"],
                 "--attribute", "gender", "--n-boot", "100", "--json", str(tmp_path / "c.json"),
                 "--pdf", str(tmp_path / "c.pdf"), "--project", str(project), *common]) == 0
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["kind"] == "note_classifiers" and set(doc["probe"]) == {"baseline", "debiased"}
    pdf = (tmp_path / "c.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and len(pdf) > 5000
    # the GUI's export of the stored audit gives the very same bytes
    audit_id = Project(project).audits()[-1].id
    assert export_report(project, audit_id, tmp_path / "g.pdf").read_bytes() == pdf
    assert main(["audit", "encoders", "--baseline", encoders["baseline"], "--attribute", "gender", "--n-boot", "10",
                 "--json", str(tmp_path / "bad.json"), *common]) == 2  # fewer than 100 replicates


def test_report_text(notes, encoders):
    from fairdesk.core.reports.encoders import build_notes_report

    doc = json.loads((json.dumps(encoders_audit.note_classifiers_document(
        {"baseline": nc.train_note_classifiers(notes, encoders["baseline"], _spec(tasks=["sepsis"]))}))))
    report = build_notes_report(doc)
    text = report.text()
    assert "max p + mean p · n/c" in text and "sepsis" in text and "Provenance" in text
    assert doc["results"][0]["model_hash"] in text and doc["encoders"]["baseline"]["fingerprint"] in text
    assert "1  Summary" == report.section("summary").title and report.sections[0].key == "board"
