"""The synthetic template subset of the CTF audit (issue 12 point 2): a seeded madlibs sample scored by the same
model, reported as ctf_gap records with subset "synthetic"; the attribution when it is used; off with 0."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.ctf import SUBSETS, SYNTHETIC, ctf_audit, synthetic_texts
from fairdesk.core.kinds import ReportSettings


def _reacts_to_gay(texts):
    """A toy model: 0.9 for texts with the word 'gay', 0.2 otherwise (an identity-reactive model)."""
    return np.array([0.9 if " gay" in f" {t.lower()}" else 0.2 for t in texts])


def test_synthetic_sample_is_seeded_and_keeps_rows_with_terms():
    a, ya, info = synthetic_texts(200, seed=3)
    b, _, _ = synthetic_texts(200, seed=3)
    c, _, _ = synthetic_texts(200, seed=4)
    assert a == b and a != c and len(a) == 200 and set(ya.tolist()) <= {0, 1}
    assert info["n_available"] == 76_564 - 2 * 432  # the you_occupation rows have no identity term
    assert sum(info["per_template"].values()) == 200 and "you_occupation" not in info["per_template"]


def test_core_reports_synthetic_records_in_the_bonferroni_family():
    texts = ["the gay pt is here", "the old pt is here", "a straight man came", "nothing here", "a gay woman"]
    labels = [1, 0, 0, 0, 1]
    r = ctf_audit(texts, _reacts_to_gay, labels, terms="dixon_train", n_boot=200, seed=0, synthetic=300)
    recs = {(x["terms"], x["subset"]): x for x in r.ctf_gap}
    assert set(recs) == {("train", s) for s in SUBSETS} | {("train", SYNTHETIC)}
    syn = recs[("train", SYNTHETIC)]
    assert 150 < syn["n"] < 300 and 0 < syn["value"] < 0.7 and "control" in syn
    assert r.settings["synthetic"]["n_rows"] == 300 and r.settings["synthetic"]["n_identity_pairs"] > 0
    # issue 22: the synthetic subset's per-term tests join the one correction family (was: a Bonferroni level
    # over the 4 averaged records)
    from fairdesk.core.stats.multiple import adjust

    assert any(t["subset"] == SYNTHETIC for t in r.term_gaps) and r.settings["correction"] == "bh"
    q = adjust([t["p_differs"] for t in r.term_gaps], "bh")
    assert np.allclose([t["q_differs"] for t in r.term_gaps], q, equal_nan=True)
    doc = r.to_dict()
    assert any(c["subset"] == SYNTHETIC for c in doc["control"]["records"])
    json.dumps(doc, allow_nan=False)
    off = ctf_audit(texts, _reacts_to_gay, labels, terms="dixon_train", n_boot=200, seed=0)
    assert {x["subset"] for x in off.ctf_gap} == set(SUBSETS) and "synthetic" not in off.settings


def test_term_set_absent_from_templates_gives_a_note(tmp_path):
    terms = tmp_path / "t.txt"
    terms.write_text("zorblax\nquonk\n", encoding="utf-8")
    r = ctf_audit(["a zorblax pt", "a quonk pt", "plain"], lambda t: np.full(len(t), 0.5), terms=str(terms),
                  n_boot=200, synthetic=100)
    assert all(x["subset"] != SYNTHETIC for x in r.ctf_gap)
    assert "No synthetic template text" in r.settings["synthetic"]["note"]


def test_job_document_and_report_show_the_subset_and_attribution(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from fairdesk.core.models.text_classifier import TextCNNConfig, train_text_classifier
    from fairdesk.core.reports.ctf import report_tree
    from fairdesk.core.text.madlibs import MADLIBS_ATTRIBUTION, clinical_notes_demo
    from fairdesk.jobs.ctf import audit_ctf

    df = clinical_notes_demo(80, seed=2)
    df.to_csv(tmp_path / "d.csv", index=False)
    terms = tmp_path / "terms.txt"   # not the Dixon lists: the attribution comes from the synthetic sample alone
    terms.write_text("black\nwhite\ngay\nstraight\n", encoding="utf-8")
    clf = train_text_classifier(df["text"], df["label"], "baseline", terms=str(terms), epochs=1, batch_size=32,
                                config=TextCNNConfig(embed_dim=8, filters=4, kernel_sizes=(2, 3)))
    clf.save(tmp_path / "m")
    proj = tmp_path / "p.fairdesk"
    common = dict(label_col="label", terms=str(terms), n_boot=200, control_terms="control")
    a1 = audit_ctf(proj, str(tmp_path / "m"), str(tmp_path / "d.csv"), "text", synthetic=150, **common)
    a0 = audit_ctf(proj, str(tmp_path / "m"), str(tmp_path / "d.csv"), "text", synthetic=0, **common)
    from fairdesk.core.project import Project

    p = Project(proj, create=False)
    d1, d0 = json.loads(p.audit_json(a1)), json.loads(p.audit_json(a0))
    assert [r["subset"] for r in d1["ctf_gap"]].count("synthetic") == 1
    assert d1["settings"]["synthetic"]["n_rows"] == 150
    assert d1["attribution"] == MADLIBS_ATTRIBUTION and d1["uses_madlibs"]
    assert all(r["subset"] != "synthetic" for r in d0["ctf_gap"]) and d0["attribution"] is None
    text = report_tree(d1, ReportSettings(suppress_k=5)).text()
    assert "synthetic template texts" in text and "Synthetic template texts. Besides the audited texts" in text
    assert "Attribution" in text and "CC BY 4.0" in text and "Dixon" in text
    assert "synthetic template texts" not in report_tree(d0, ReportSettings(suppress_k=5)).text()
    # the audited data IS the madlibs set: no second sample, a note says so
    from fairdesk.core.text.madlibs import madlibs

    m = madlibs().sample(60, random_state=0)
    m.to_csv(tmp_path / "mad.csv", index=False)
    a2 = audit_ctf(proj, str(tmp_path / "m"), str(tmp_path / "mad.csv"), "text", synthetic=100, n_boot=200,
                   terms=str(terms))
    d2 = json.loads(p.audit_json(a2))
    assert all(r["subset"] != "synthetic" for r in d2["ctf_gap"])
    assert any("madlibs template set, so no separate synthetic" in n for n in d2["notes"])
    assert isinstance(pd.DataFrame(d1["ctf_gap"]), pd.DataFrame)


def test_a_note_classifier_model_id_gets_a_clear_refusal(tmp_path):
    """Note classifiers (frozen encoder + MLP) keep no weights in the project: audit_ctf says so and names the
    export / import route instead of failing obscurely."""
    from fairdesk.core.errors import ModelError
    from fairdesk.core.project import Project
    from fairdesk.jobs.ctf import audit_ctf

    proj = tmp_path / "p.fairdesk"
    model_id = Project(proj).add_model("Note MLP on enc", "note_mlp", {"metrics": []})
    pd.DataFrame({"text": ["a gay pt", "a straight pt"]}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ModelError, match="note classifier .* cannot score counterfactual texts; export the pairs"):
        audit_ctf(proj, model_id, str(tmp_path / "d.csv"), "text", n_boot=200, synthetic=0)
