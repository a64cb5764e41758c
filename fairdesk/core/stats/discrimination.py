"""Discrimination of a score in one group: AUROC with its DeLong variance, average precision (AUPRC), and both
from grouped counts for the bootstrap (METHODS §8).

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


def ranked(y, s, return_cell: bool = False):
    """One sort of a group: its distinct scores in increasing order and the positive and negative rows at each.
    Everything else here (and the numbers and curves of :mod:`.calibration`) is a sum over these counts.

    With ``return_cell``, also each row's (label, score) cell: ``i`` for a positive at ``values[i]``, ``T + i`` for
    a negative (T distinct scores), the order of :func:`.calibration.influence`."""
    y = np.asarray(y).astype(bool)
    s = np.asarray(s, float)
    values, inv = np.unique(s, return_inverse=True)
    inv = inv.ravel()
    pos = np.bincount(inv[y], minlength=values.size).astype(float)
    neg = np.bincount(inv[~y], minlength=values.size).astype(float)
    if return_cell:
        return values, pos, neg, np.where(y, inv, inv + values.size)
    return values, pos, neg


def auroc_delong_counts(pos, neg) -> tuple[float, float]:
    """(AUROC, DeLong variance) from positive and negative counts per distinct score (increasing): every row of a
    distinct score has the same placement value, so the variances are weighted over the distinct scores."""
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    n1, n0 = pos.sum(), neg.sum()
    if n1 == 0 or n0 == 0:
        return math.nan, math.nan
    v10 = (np.cumsum(neg) - 0.5 * neg) / n0  # per positive at this score: negatives below, ties ½
    v01 = (n1 - np.cumsum(pos) + 0.5 * pos) / n1  # per negative at this score: positives above, ties ½
    auc = float(pos @ v10 / n1)
    var = 0.0
    if n1 > 1:
        var += float(pos @ (v10 - auc) ** 2) / (n1 - 1) / n1
    if n0 > 1:
        var += float(neg @ (v01 - auc) ** 2) / (n0 - 1) / n0
    return auc, var


def hanley_mcneil_variance(auc, n1, n0) -> float:
    """Hanley & McNeil's (1982) variance of an AUROC ``auc`` estimated from ``n1`` positives and ``n0`` negatives:
    ``[A(1 − A) + (n₁ − 1)(Q₁ − A²) + (n₀ − 1)(Q₂ − A²)] / (n₁n₀)``, ``Q₁ = A/(2 − A)``, ``Q₂ = 2A²/(1 + A)``. A
    function of A and the counts alone, so at a common AUROC it does not collapse with one sample's placement values
    (the AUROC pair test uses it as a floor under DeLong's)."""
    a = float(auc)
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    return (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0)


def auroc_pair_z(a, b, delong_a, delong_b, counts_a, counts_b, deff_a=1.0, deff_b=1.0) -> float:
    """z of "the two AUROCs are equal", the group audit's pair test: a score-type test on the cube-root
    scale of the AUROC's distance from 1 (from 0 when the pooled AUROC is below ½),
    ``z = (u_b^⅓ − u_a^⅓) / (⅓ ū^(−⅔) √(V_a + V_b))``, ``u = 1 − A``, ``ū = 1 − Ā`` at the pooled AUROC Ā (weights
    n₁n₀, at most 1 − ½/max n₁n₀), each group's variance ``V = max(DeLong, Hanley–McNeil at Ā) × its whole-patient
    design effect``. ``counts_*``: each group's (positives, negatives).

    Why (measured over score shapes, ``benchmarks/bench_conservative_tests.py --part auroc-scale``, docs/methods.md):
    *the cube root* — near AUROC 1 the deficit 1 − Â counts discordant pairs, a skewed, gamma-like sum decided by
    the few rows that overlap the other class, whose cube root is close to normal (Wilson & Hilferty, 1931). The
    logit (the log of the deficit, used before) over-corrects: a group whose sample misses the rare deep discordant
    rows gets a tiny deficit and a huge logit, so with exponential score tails the logit test rejected 0.06–0.14 of
    null pairs; the AUROC scale keeps the skew. *The floor* — under "equal AUROC" both groups share Ā, and a group's
    own DeLong variance collapses when its sample AUROC comes out near 1 (without a floor: 0.12–0.20) and is short
    with 10–29 cases at any AUROC; Hanley–McNeil's variance is exact for exponential tails (the heaviest measured)
    and conservative for binormal ones near 1. Smaller floors (half of it, with the placement variances pooled over
    both groups) gave back the power near 1 but rejected 0.08–0.13 of null pairs with 10–29 cases at AUROC 0.5–0.95
    in the design-space map."""
    (n1a, n0a), (n1b, n0b) = counts_a, counts_b
    w_a, w_b = n1a * n0a, n1b * n0b
    pooled = min((a * w_a + b * w_b) / (w_a + w_b), 1 - 0.5 / max(w_a, w_b))
    var = (max(delong_a, hanley_mcneil_variance(pooled, *counts_a)) * deff_a
           + max(delong_b, hanley_mcneil_variance(pooled, *counts_b)) * deff_b)
    sign = 1.0
    if pooled < 0.5:  # the same test by symmetry (AUROC ↔ 1 − AUROC: the score's sign reversed)
        a, b, pooled, sign = 1 - a, 1 - b, 1 - pooled, -1.0
    return sign * float(((1 - b) ** (1 / 3) - (1 - a) ** (1 / 3)) / ((1 - pooled) ** (-2 / 3) / 3 * math.sqrt(var)))


def summary(pos, neg) -> dict:
    """auroc, auroc_var (DeLong) and auprc (average precision) of one group from its counts per distinct score
    (:func:`ranked`); NaN where a class is missing."""
    auc, var = auroc_delong_counts(pos, neg)
    return {"auroc": auc, "auroc_var": var, "auprc": float(grouped(pos[None], neg[None])[1][0])}


def auroc_delong(y, s) -> tuple[float, float]:
    """(AUROC, DeLong variance); NaN for both when the group lacks a class."""
    _, pos, neg = ranked(y, s)
    return auroc_delong_counts(pos, neg)


def average_precision(y, s) -> float:
    """Average precision (sklearn's definition); NaN without a positive."""
    _, pos, neg = ranked(y, s)
    return float(grouped(pos[None], neg[None])[1][0])


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
