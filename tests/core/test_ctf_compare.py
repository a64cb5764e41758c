"""The comparison table across stored CTF audits (002 Tables 1–5 layout): one row per audited model."""
from __future__ import annotations

import math

from fairdesk.core.audits.ctf_compare import ctf_comparison, gap_column


def _doc(name, method, lam, auroc, gaps, tpr_tnr):
    return {"model": {"name": name, "kind": "text_classifier", "method": method, "lambda": lam},
            "performance": {"auroc": auroc},
            "ctf_gap": [{"terms": sp, "subset": su, "value": v} for (sp, su), v in gaps.items()],
            "group_rates": {"gaps": [{"terms": sp, "tpr_gap": t, "tnr_gap": n} for sp, (t, n) in tpr_tnr.items()]}}


def test_one_row_per_audit_with_method_lambda_auroc_gaps_and_rates():
    baseline = _doc("cnn-base", "baseline", 1.0, 0.91,
                    {("train", "all"): 0.12, ("train", "label_0"): 0.10, ("train", "label_1"): 0.15,
                     ("held_out", "all"): 0.08, ("held_out", "label_0"): 0.07, ("held_out", "label_1"): 0.09},
                    {"train": (0.30, 0.20), "held_out": (0.25, None)})
    clp = _doc("cnn-clp", "clp", 5.0, 0.88, {("train", "all"): 0.01, ("train", "label_1"): 0.02},
               {"train": (0.05, 0.04)})
    df = ctf_comparison([baseline, clp], names=["#1 base", "#2 clp"])
    assert list(df["Audit"]) == ["#1 base", "#2 clp"] and list(df["Method"]) == ["baseline", "clp"]
    assert math.isnan(df.loc[0, "λ"]) and df.loc[1, "λ"] == 5.0  # λ only means something for CLP
    assert list(df["AUROC"]) == [0.91, 0.88]
    # 002's order: train before held-out, label 0, label 1, all
    gaps = [c for c in df.columns if c.startswith("CTF ")]
    assert gaps == [gap_column(s, u) for s in ("train", "held_out") for u in ("label_0", "label_1", "all")]
    assert df.loc[0, gap_column("held_out", "label_1")] == 0.09 and df.loc[1, gap_column("train", "all")] == 0.01
    assert math.isnan(df.loc[1, gap_column("held_out", "all")])  # no held-out terms in that audit
    assert math.isnan(df.loc[1, gap_column("train", "label_0")])
    assert df.loc[0, "TPR gap train"] == 0.30 and math.isnan(df.loc[0, "TNR gap held-out"])
    assert df.loc[1, "TNR gap train"] == 0.04 and math.isnan(df.loc[1, "TPR gap held-out"])


def test_extra_subsets_follow_and_empty_input_gives_empty_table():
    doc = _doc("m", "blindness", None, None, {("train", "synthetic"): 0.3, ("train", "all"): 0.2}, {})
    df = ctf_comparison([doc])
    assert [c for c in df.columns if c.startswith("CTF ")] == [gap_column("train", "all"),
                                                                gap_column("train", "synthetic")]
    assert df.loc[0, "Audit"] == "m" and math.isnan(df.loc[0, "AUROC"])
    empty = ctf_comparison([])
    assert len(empty) == 0 and list(empty.columns)[:5] == ["Audit", "Model", "Method", "λ", "AUROC"]
