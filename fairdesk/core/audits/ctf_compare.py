"""The comparison of stored counterfactual-token-fairness audits (the layout of 002 Tables 1–5).

:func:`ctf_comparison` turns the stored documents of several ``ctf`` audits (one per audited model: baseline,
blindness, augmentation, CLP at some λ, …) into one table with a row per audit: the model's training method and λ,
its AUROC on the audited texts, the CTF gap per term split (train / held-out) and text subset (label 0, label 1,
all, and any further subset the documents hold, e.g. synthetic templates) and the mean TPR/TNR gaps over term pairs.
A pure function of the documents (no project, no Qt), so the GUI, the CLI and tests share it.
"""
from __future__ import annotations

import math

import pandas as pd

SPLIT_TITLE = {"train": "train", "held_out": "held-out"}
#: the subsets in the order of 002's tables; subsets not listed here follow in the order first met
SUBSET_ORDER = ("label_0", "label_1", "all")
SUBSET_TITLE = {"label_0": "label 0", "label_1": "label 1", "all": "all"}


def _num(value) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def gap_column(split: str, subset: str) -> str:
    """The column name of the CTF gap of ``split`` (train / held_out) over ``subset`` (label_0, label_1, all, …)."""
    return f"CTF {SPLIT_TITLE.get(split, split)} · {SUBSET_TITLE.get(subset, subset)}"


def ctf_comparison(docs: list[dict], names: list[str] | None = None) -> pd.DataFrame:
    """One row per stored CTF document (in the order given): ``Audit`` (``names[i]`` or the model's name),
    ``Model``, ``Method``, ``λ`` (CLP methods only), ``AUROC``, then ``CTF <split> · <subset>`` for every split and
    subset any document holds (the point estimate of the CTF gap; missing where a document has no such record),
    then ``TPR gap <split>`` and ``TNR gap <split>`` (the mean over term pairs, 002 Table 3).

    An empty list gives an empty frame with the fixed columns."""
    if names is not None and len(names) != len(docs):
        raise ValueError(f"{len(names)} names for {len(docs)} documents.")
    splits: list[str] = []
    subsets: list[str] = []
    for doc in docs:
        for rec in doc.get("ctf_gap") or []:
            if rec.get("terms") not in splits:
                splits.append(rec.get("terms"))
            if rec.get("subset") not in subsets:
                subsets.append(rec.get("subset"))
    splits.sort(key=lambda s: (s not in SPLIT_TITLE, list(SPLIT_TITLE).index(s) if s in SPLIT_TITLE else 0))
    subsets = [s for s in SUBSET_ORDER if s in subsets] + [s for s in subsets if s not in SUBSET_ORDER]
    gap_cols = [gap_column(sp, su) for sp in splits for su in subsets]
    rate_cols = [f"{rate} gap {SPLIT_TITLE.get(sp, sp)}" for sp in splits for rate in ("TPR", "TNR")]
    rows = []
    for i, doc in enumerate(docs):
        model = doc.get("model") or {}
        method = model.get("method")
        lam = _num(model.get("lambda")) if method and str(method).startswith("clp") else math.nan
        perf = doc.get("performance") or {}
        row = {"Audit": names[i] if names is not None else (model.get("name") or f"audit {i + 1}"),
               "Model": model.get("name") or "–", "Method": method or model.get("kind") or "–", "λ": lam,
               "AUROC": _num(perf.get("auroc"))}
        row.update({c: math.nan for c in gap_cols + rate_cols})
        for rec in doc.get("ctf_gap") or []:
            row[gap_column(rec.get("terms"), rec.get("subset"))] = _num(rec.get("value"))
        for g in (doc.get("group_rates") or {}).get("gaps") or []:
            sp = SPLIT_TITLE.get(g.get("terms"), g.get("terms"))
            row[f"TPR gap {sp}"] = _num(g.get("tpr_gap"))
            row[f"TNR gap {sp}"] = _num(g.get("tnr_gap"))
        rows.append(row)
    columns = ["Audit", "Model", "Method", "λ", "AUROC"] + gap_cols + rate_cols
    return pd.DataFrame(rows, columns=columns)
