"""Job functions of counterfactual token fairness (issue 12): train a text classifier into the project, audit it
(stored document, JSON-safe), export pairs and import scores, unknown terms surfaced, nothing stored on cancel."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from fairdesk.core.errors import ModelError  # noqa: E402
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402
from fairdesk.core.project import Project  # noqa: E402
from fairdesk.jobs import ctf as ctf_jobs  # noqa: E402


def _no_nan(text: str) -> dict:
    def refuse(name):
        raise AssertionError(f"{name} in the stored JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """120 demo notes, a held-out list with two words the model never saw, one baseline model trained by the job."""
    from fairdesk.core.text.madlibs import clinical_notes_demo

    root = tmp_path_factory.mktemp("ctf")
    df = clinical_notes_demo(120, seed=0)
    train = root / "train.csv"
    df.to_csv(train, index=False)
    df.loc[len(df)] = ["50 yo quiet zorblax pt with cough.", 0, "zorblax", "cough"]
    df.loc[len(df)] = ["61 yo tall quuxian pt with fatigue.", 1, "quuxian", "fatigue"]
    data = root / "notes.csv"  # the audited notes: two mention words the model never saw
    df.to_csv(data, index=False)
    held = root / "held.txt"
    held.write_text("african\nchristian\ndeaf\nzorblax\nquuxian\n", encoding="utf-8")
    project = root / "p.fairdesk"
    model_id = ctf_jobs.train_text_classifier_job(project, train, "text", "label", root / "model", epochs=1, seed=0)
    return {"root": root, "data": data, "held": held, "project": project, "model_id": model_id,
            "model": root / "model"}


def test_training_stores_the_model_with_hashes_and_curve(tiny):
    project = Project(tiny["project"])
    [m] = [m for m in project.models() if m.id == tiny["model_id"]]
    assert m.kind == "text_classifier"
    info = m.info
    assert info["path"] == str(tiny["model"].resolve())
    assert info["fingerprint"] == ctf_jobs.model_files_sha256(tiny["model"])["fingerprint"]
    assert (info["method"], info["lambda"], info["seed"], info["epochs"]) == ("baseline", 0.0, 0, 1)
    assert len(info["history"]) == 1 and info["history"][0]["loss"] > 0
    assert info["terms"]["name"] == "dixon_train" and info["resume"] is False
    assert info["data"]["n"] == 120 and info["attribution"]  # the Dixon et al. lists: CC BY 4.0
    [ds] = [d for d in project.datasets() if d.id == m.dataset_id]
    assert ds.kind == "text" and ds.n_rows == 120
    # the folder records the term set (baseline too), so the audit audits the same terms by default
    cfg = json.loads((tiny["model"] / "config.json").read_text())
    assert cfg["terms"]["name"] == "dixon_train" and cfg["method"] == "baseline"


def test_clp_nontox_alias_records_lambda_and_pairing_curve(tiny):
    pp = tiny["root"] / "clp.fairdesk"
    model_id = ctf_jobs.train_text_classifier_job(pp, tiny["data"], "text", "label", tiny["root"] / "clp", epochs=1,
                                                  method="clp-nontox", lam=5.0)
    [m] = [m for m in Project(pp).models() if m.id == model_id]
    assert (m.info["method"], m.info["lambda"]) == ("clp_nontox", 5.0)
    assert m.info["history"][0]["pair_loss"] is not None
    with pytest.raises(ModelError, match="Unknown method"):
        ctf_jobs.train_text_classifier_job(pp, tiny["data"], "text", "label", tiny["root"] / "x", method="magic")


def test_audit_stores_a_json_safe_document_with_the_contract_fields(tiny):
    audit_id = ctf_jobs.audit_ctf(tiny["project"], tiny["model"], tiny["data"], "text", label_col="label",
                                  held_out_terms=tiny["held"], n_boot=200, synthetic=0)
    project = Project(tiny["project"])
    assert project.audit_kind(audit_id) == "ctf"
    doc = _no_nan(project.audit_json(audit_id))
    assert {(r["terms"], r["subset"]) for r in doc["ctf_gap"]} == {
        (t, s) for t in ("train", "held_out") for s in ("all", "label_0", "label_1")}
    for r in doc["ctf_gap"]:
        assert {"value", "ci_low", "ci_high", "n", "verdict", "control"} <= set(r)
        assert r["verdict"] in ("differs", "equivalent within margin", "inconclusive")
    p = doc["pairs"][0]
    assert {"term", "counterfactual_term", "n", "mean_abs_change", "flip_rate", "reverse_flip_rate", "flip_up_rate",
            "flip_down_rate"} <= set(p)
    assert doc["group_rates"]["terms"] and doc["group_rates"]["pair_gaps"]
    g = doc["group_rates"]["pair_gaps"][0]
    assert {"terms", "term", "other_term", "tpr_gap", "tnr_gap"} <= set(g)
    assert doc["control"]["words_used"] and "mean_abs_change" in doc["control"]
    assert doc["provenance"]["model_hashes"] == {
        "text_classifier": ctf_jobs.model_files_sha256(tiny["model"])["fingerprint"]}
    assert doc["settings"]["term_sets"]["train"]["name"] == "dixon_train"  # the model's recorded set
    assert doc["model"]["method"] == "baseline" and doc["data"]["name"] == "notes.csv"
    # the two invented held-out words are outside the vocabulary: surfaced in the document and in words
    assert doc["unknown_terms"] == {"train": [], "held_out": ["zorblax", "quuxian"]}
    assert any("zorblax" in n and "vocabulary" in n for n in doc["notes"])
    assert doc["attribution"] and "CC BY 4.0" in doc["attribution"]
    from sklearn.metrics import roc_auc_score

    from fairdesk.core.models.text_classifier import load_text_classifier

    import pandas as pd

    notes = pd.read_csv(tiny["data"])
    expected = roc_auc_score(notes["label"], load_text_classifier(tiny["model"]).predict_proba(notes["text"].tolist()))
    assert doc["performance"]["auroc"] == pytest.approx(expected) and doc["performance"]["n"] == 122


def test_audit_by_model_id_refuses_changed_files(tiny, tmp_path):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(tiny["model"], folder)
    pp = tmp_path / "p.fairdesk"
    model_id = ctf_jobs.train_text_classifier_job(pp, tiny["data"], "text", "label", folder, epochs=1, seed=3)
    [m] = Project(pp).models()
    audit_id = ctf_jobs.audit_ctf(pp, model_id, m.dataset_id, "text", n_boot=100)  # model and data from the project
    stored = json.loads(Project(pp).audit_json(audit_id))
    assert stored["model"]["model_id"] == model_id and stored["data"]["name"] == "notes.csv"
    assert len(Project(pp).datasets()) == 1  # the project's own table is not stored twice
    cfg = json.loads((folder / "config.json").read_text())
    cfg["dropout"] = 0.3
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match="changed since it was added"):
        ctf_jobs.audit_ctf(pp, model_id, tiny["data"], "text", n_boot=100)
    assert len(Project(pp).audits()) == 1


def test_exported_pairs_scored_elsewhere_give_the_same_gaps(tiny, tmp_path):
    import pandas as pd

    from fairdesk.core.models.text_classifier import load_text_classifier

    pp = tmp_path / "p.fairdesk"
    out = tmp_path / "pairs.csv"
    res = ctf_jobs.export_ctf_pairs(pp, tiny["data"], "text", out, label_col="label", seed=0)
    pairs = pd.read_csv(out)
    assert list(pairs.columns) == ["id", "text", "counterfactual", "term", "counterfactual_term", "split", "kind",
                                   "label", "score", "counterfactual_score"]
    assert res["identity"] == int((pairs["kind"] == "identity").sum()) > 0 and res["control"] > 0
    assert Project(pp).dataset(res["dataset_id"]).kind == "ctf_pairs"
    clf = load_text_classifier(tiny["model"])  # "elsewhere"
    pairs["score"] = clf.predict_proba(pairs["text"].tolist())
    pairs["counterfactual_score"] = clf.predict_proba(pairs["counterfactual"].tolist())
    scored = tmp_path / "scored.csv"
    pairs.to_csv(scored, index=False)
    imported = ctf_jobs.audit_ctf_scores(pp, scored, n_boot=200, model_name="the same CNN")
    direct = ctf_jobs.audit_ctf(pp, tiny["model"], tiny["data"], "text", label_col="label", terms="dixon_train",
                                n_boot=200, synthetic=0)  # the exported pairs hold no synthetic templates
    a = _no_nan(Project(pp).audit_json(imported))
    b = _no_nan(Project(pp).audit_json(direct))
    key = lambda d: {(r["terms"], r["subset"]): (r["n"], r["value"], r.get("control")) for r in d["ctf_gap"]}  # noqa
    for k, (n, value, control) in key(b).items():
        n2, value2, control2 = key(a)[k]
        assert n2 == n and value2 == pytest.approx(value, abs=1e-6) and control2 == pytest.approx(control, abs=1e-6)
    assert a["model"]["kind"] == "imported scores" and a["model"]["name"] == "the same CNN"
    # AUROC from the imported f(x) of the texts with pairs, the direct one over all texts: both estimate the same
    assert a["performance"]["n"] == b["ctf_gap"][0]["n"] and 0 <= a["performance"]["auroc"] <= 1
    bad = pairs.copy()
    bad.loc[0, "score"] = 1.5
    bad.to_csv(scored, index=False)
    with pytest.raises(Exception, match=r"probability in \[0, 1\]"):
        ctf_jobs.audit_ctf_scores(pp, scored, n_boot=200)


def test_cancelled_audit_stores_nothing(tiny, tmp_path):
    pp = tmp_path / "p.fairdesk"
    token = CancelToken()
    seen = []

    def progress(f, m):
        seen.append(f)
        if f > 0.3:
            token.cancel()
    with pytest.raises(Cancelled):
        ctf_jobs.audit_ctf(pp, tiny["model"], tiny["data"], "text", n_boot=100, progress=progress, cancel=token)
    assert Project(pp).audits() == [] and Project(pp).datasets() == []


def test_cancelled_training_stores_nothing_and_publishes_no_model(tiny, tmp_path):
    pp = tmp_path / "p.fairdesk"
    token = CancelToken()

    def progress(f, m):
        if f > 0.2:
            token.cancel()
    with pytest.raises(Cancelled):
        ctf_jobs.train_text_classifier_job(pp, tiny["data"], "text", "label", tmp_path / "m", epochs=2,
                                           progress=progress, cancel=token)
    assert Project(pp).models() == []
    # the finished epochs stay as a checkpoint to resume from; no model is published (no config, no weights)
    left = {p.relative_to(tmp_path / "m").parts[0] for p in (tmp_path / "m").rglob("*")} if (tmp_path / "m").exists() \
        else set()
    assert left <= {"checkpoints", ".fairdesk-folder.json"}  # the marker says the folder is FairDesk's (issue 20)


def test_attribution_only_when_madlibs_or_dixon_lists_were_used(tiny, tmp_path):
    import pandas as pd

    from fairdesk.core.text.madlibs import MADLIBS_ATTRIBUTION

    terms = tmp_path / "t.txt"
    terms.write_text("gay\nstraight\nlesbian\n", encoding="utf-8")
    rows = [("i am gay", 0, "am_hate_adj", "gay"), ("i hate straight", 1, "am_hate_adj", "straight"),
            ("hug lesbian", 0, "verb_adj", "lesbian"), ("kill gay", 1, "verb_adj", "gay")]
    madlibs_like = pd.DataFrame(rows, columns=["text", "label", "template", "term"])
    madlibs_like.to_csv(tmp_path / "m.csv", index=False)
    madlibs_like.drop(columns="template").to_csv(tmp_path / "plain.csv", index=False)
    pp = tmp_path / "p.fairdesk"
    docs = {}
    for name in ("m.csv", "plain.csv"):
        audit_id = ctf_jobs.audit_ctf(pp, tiny["model"], tmp_path / name, "text", label_col="label", terms=terms,
                                      n_boot=100, synthetic=0)  # the synthetic subset is madlibs: attributed
        docs[name] = _no_nan(Project(pp).audit_json(audit_id))
    assert docs["m.csv"]["uses_madlibs"] and docs["m.csv"]["attribution"] == MADLIBS_ATTRIBUTION
    assert not docs["plain.csv"]["uses_madlibs"] and docs["plain.csv"]["attribution"] is None
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.ctf import report_tree

    assert "CC BY 4.0" in report_tree(docs["m.csv"], ReportSettings()).text()
    assert "CC BY" not in report_tree(docs["plain.csv"], ReportSettings()).text()


def test_a_local_hugging_face_sequence_classifier_is_audited(tiny, tmp_path):
    """A tiny random BERT sequence classifier saved locally (safetensors): scored in batches, recorded by kind and
    fingerprint; a three-class model needs its positive class named."""
    pytest.importorskip("transformers")
    import numpy as np
    import pandas as pd
    from transformers import BertConfig, BertForSequenceClassification

    from fairdesk.core.models.hf_sequence_classifier import load_sequence_classifier
    from fairdesk.core.models.mlm import corpus_words, model_fingerprint, vocabulary_tokenizer

    notes = pd.read_csv(tiny["data"])
    tokenizer = vocabulary_tokenizer(corpus_words(notes["text"].tolist()) + ["lesbian", "bisexual"])
    folders = {}
    for n_labels in (2, 3):
        torch.manual_seed(0)
        model = BertForSequenceClassification(BertConfig(
            vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64, num_labels=n_labels, initializer_range=0.5)).eval()
        folder = tmp_path / f"hf{n_labels}"
        model.save_pretrained(str(folder), safe_serialization=True)
        tokenizer.save_pretrained(str(folder))
        folders[n_labels] = folder
    pp = tmp_path / "p.fairdesk"
    audit_id = ctf_jobs.audit_ctf(pp, folders[2], tiny["data"], "text", label_col="label", n_boot=100)
    doc = _no_nan(Project(pp).audit_json(audit_id))
    assert doc["model"]["kind"] == "hf_sequence_classifier" and doc["model"]["positive_class"] == 1
    assert doc["provenance"]["model_hashes"] == {"hf_sequence_classifier": model_fingerprint(folders[2])}
    # the stored examples carry the model's own probabilities (softmax column 1), computed one text at a time here
    hf = load_sequence_classifier(folders[2])
    ex = doc["examples"][0]
    with torch.inference_mode():
        logits = hf.model(**tokenizer([ex["counterfactual"]], return_tensors="pt")).logits
    assert ex["counterfactual_score"] == pytest.approx(float(torch.softmax(logits, 1)[0, 1]), abs=1e-6)
    assert np.isfinite([r["value"] for r in doc["ctf_gap"]]).all() and doc["ctf_gap"][0]["value"] > 0
    with pytest.raises(ModelError, match="3 classes"):
        ctf_jobs.audit_ctf(pp, folders[3], tiny["data"], "text", n_boot=100)
    audit_id = ctf_jobs.audit_ctf(pp, folders[3], tiny["data"], "text", n_boot=100, positive_label="LABEL_2")
    assert _no_nan(Project(pp).audit_json(audit_id))["model"]["positive_class"] == 2
    (folders[3] / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="never pickles"):
        ctf_jobs.audit_ctf(pp, folders[3], tiny["data"], "text", n_boot=100, positive_label=2)


def test_terms_the_model_cannot_see_are_never_equivalent(tiny, tmp_path):
    """Held-out terms all outside the vocabulary: swapping them cannot move the score, so the gap is ~0 — and the
    verdict must say inconclusive, not "equivalent" (a model blind to a word is not shown to be fair to it)."""
    held = tmp_path / "unseen.txt"
    held.write_text("zorblax\nquuxian\n", encoding="utf-8")
    audit_id = ctf_jobs.audit_ctf(tiny["project"], tiny["model"], tiny["data"], "text", label_col="label",
                                  held_out_terms=held, n_boot=100, synthetic=0)
    doc = _no_nan(Project(tiny["project"]).audit_json(audit_id))
    assert set(doc["unknown_terms"]["held_out"]) >= {"zorblax", "quuxian"}
    held_out = [r for r in doc["ctf_gap"] if r["terms"] == "held_out" and r["n"]]
    assert held_out, "the two unseen words make held-out pairs"
    assert all(abs(r["value"]) < 1e-6 for r in held_out)  # the model cannot tell them apart
    assert all(r["verdict"] == "inconclusive" for r in held_out)
    [whole] = [r for r in held_out if r["subset"] == "all"]
    assert "vocabulary" in whole["reason"]
