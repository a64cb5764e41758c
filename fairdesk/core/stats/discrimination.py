"""Discrimination of a score in one group: AUROC with its DeLong variance, average precision (AUPRC), and both
from grouped counts for the bootstrap (METHODS §8, issue 14).

Why by hand: no installed library gives DeLong's variance (sklearn and scipy give the AUROC only), and the points
themselves are a few lines from one sort. sklearn's ``roc_auc_score`` / ``average_precision_score`` validate their
input on every call (about 3 ms each), which at 57 tasks × 13 groups was a third of a group audit's time; the tests
check both numbers against sklearn to 1e-12.

* **AUROC** = P(score of a positive > score of a negative) + ½ P(tie) (Mann–Whitney). DeLong, DeLong &
  Clarke-Pearson (1988): with placement values ``V10_i`` (share of negatives below positive i, ties ½) and ``V01_j``
  (share of positives above negative j, ties ½), AUROC = mean(V10) and ``Var = s²(V10)/n₁ + s²(V01)/n₀``.
* **AUPRC** = average precision as sklearn defines it: ``Σ_k (R_k − R_{k−1}) P_k`` over the distinct thresholds in
  decreasing order (no interpolation); tied scores form one threshold.
"""
from __future__ import annotations

import math

import numpy as np


def auroc_delong(y, s) -> tuple[float, float]:
    """(AUROC, DeLong variance); NaN for both when the group lacks a class."""
    y = np.asarray(y).astype(bool)
    s = np.asarray(s, float)
    pos, neg = s[y], s[~y]
    n1, n0 = pos.size, neg.size
    if n1 == 0 or n0 == 0:
        return math.nan, math.nan
    neg_sorted, pos_sorted = np.sort(neg), np.sort(pos)
    v10 = (np.searchsorted(neg_sorted, pos, "left") + np.searchsorted(neg_sorted, pos, "right")) / (2.0 * n0)
    v01 = 1.0 - (np.searchsorted(pos_sorted, neg, "left") + np.searchsorted(pos_sorted, neg, "right")) / (2.0 * n1)
    auc = float(v10.mean())
    var = (v10.var(ddof=1) / n1 if n1 > 1 else 0.0) + (v01.var(ddof=1) / n0 if n0 > 1 else 0.0)
    return auc, float(var)


def average_precision(y, s) -> float:
    """Average precision (sklearn's definition); NaN without a positive."""
    y = np.asarray(y).astype(bool)
    s = np.asarray(s, float)
    if not y.any():
        return math.nan
    order = np.argsort(-s, kind="mergesort")
    s_desc, y_desc = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s_desc) != 0), s_desc.size - 1]  # last row of each distinct threshold
    tps = np.cumsum(y_desc)[last]
    fps = (last + 1) - tps
    recall_step = np.diff(np.r_[0, tps]) / tps[-1]
    return float(np.sum(recall_step * tps / (tps + fps)))


def grouped(pos, neg) -> tuple[np.ndarray, np.ndarray]:
    """AUROC and average precision of rows grouped into score intervals, one per row of ``pos``/``neg``.

    ``pos``, ``neg``: ``(R, T)`` counts of positive / negative rows in T intervals in increasing score order (rows
    of an interval count as tied). Used on bootstrap replicates of cell counts; NaN where a replicate lacks a class.
    """
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    n1, n0 = pos.sum(axis=1), neg.sum(axis=1)
    below = np.cumsum(neg, axis=1) - neg  # negatives in lower intervals
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (pos * (below + 0.5 * neg)).sum(axis=1) / (n1 * n0)
        tps = np.cumsum(pos[:, ::-1], axis=1)
        fps = np.cumsum(neg[:, ::-1], axis=1)
        prec = np.where(tps + fps > 0, tps / np.maximum(tps + fps, 1e-300), 0.0)
        ap = (pos[:, ::-1] * prec).sum(axis=1) / n1
    ok = (n1 > 0) & (n0 > 0)
    return np.where(ok, auc, np.nan), np.where(n1 > 0, ap, np.nan)
