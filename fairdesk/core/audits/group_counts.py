"""The group audit's counts: each row's group, the confusion-cell counts of the groups and their bootstrap
replicates, and the rates, gaps and error spread computed from them. Cell layout per group: ``[TN, FP, FN, TP]`` =
index ``2*y + yhat``."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.stats.bootstrap import cluster_cell_counts, stratified_cell_counts

MISSING_GROUP = "(missing)"  # the group of a row whose attribute value is missing


# --------------------------------------------------------------------------------------------------------------
# Rates and gaps on count arrays. ``counts`` has shape (..., 4) = [TN, FP, FN, TP].

def rate(counts: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rate, numerator, denominator); rate is NaN where the denominator is 0 (not estimable)."""
    tn, fp, fn, tp = (counts[..., i].astype(float) for i in range(4))
    if metric == "parity":
        num, den = tp + fp, tn + fp + fn + tp
    elif metric == "recall":
        num, den = tp, tp + fn
    elif metric == "specificity":
        num, den = tn, tn + fp
    else:
        raise ValueError(metric)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return r, num, den


def max_gap(rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max-gap rule for rates of shape (B, G): gap_j = m_j − m_i*, i* = argmax_i |m_j − m_i| over estimable i ≠ j.

    Returns (gaps (B, G), i* (B, G)); NaN / -1 where group j or every other group is not estimable.
    """
    diff = rates[:, :, None] - rates[:, None, :]
    g = rates.shape[1]
    invalid = np.isnan(diff) | np.eye(g, dtype=bool)[None]
    absdiff = np.where(invalid, -np.inf, np.abs(np.where(invalid, 0.0, diff)))
    idx = absdiff.argmax(axis=2)
    gaps = np.take_along_axis(diff, idx[:, :, None], axis=2)[:, :, 0]
    none_valid = np.all(invalid, axis=2)
    gaps = np.where(none_valid, np.nan, gaps)
    return gaps, np.where(none_valid, -1, idx)


def delta_eo(counts: np.ndarray) -> np.ndarray:
    """Δ_eo^(N) for counts of shape (..., N, 4): Σ_a |FPR_a − mean| + Σ_a |FNR_a − mean| (unweighted means)."""
    tn, fp, fn, tp = (counts[..., i].astype(float) for i in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = fp / (fp + tn)
        fnr = fn / (fn + tp)
    spread = (np.abs(fpr - fpr.mean(axis=-1, keepdims=True)).sum(axis=-1)
              + np.abs(fnr - fnr.mean(axis=-1, keepdims=True)).sum(axis=-1))
    return spread


def equal_frequency_bins(x: np.ndarray, y: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin edges (length N_used + 1) of equal-frequency bins of ``x`` where every bin holds both classes.

    Quantile bins (ties kept together); a bin lacking a class is merged with its smaller neighbour until every bin
    has both classes. The number of bins actually used is ``len(edges) - 1``.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, int)
    qs = np.unique(np.quantile(x, np.linspace(0, 1, n_bins + 1)))
    if qs.size < 2:
        return np.array([x.min(), x.max()])
    edges = list(qs)
    while len(edges) > 2:
        idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
        k = len(edges) - 1
        pos = np.bincount(idx, weights=y, minlength=k)
        tot = np.bincount(idx, minlength=k)
        lacking = np.flatnonzero((pos == 0) | (pos == tot))
        if lacking.size == 0:
            break
        b = int(lacking[0])
        if b == 0:
            merge_with = 1
        elif b == k - 1:
            merge_with = k - 2
        else:
            merge_with = b - 1 if tot[b - 1] <= tot[b + 1] else b + 1
        # merging bins b and merge_with removes the edge between them
        del edges[max(b, merge_with)]
    return np.asarray(edges)


def assign_bins(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)


# --------------------------------------------------------------------------------------------------------------

@dataclass
class _TaskData:
    y: np.ndarray
    yhat: np.ndarray
    s: np.ndarray
    patients: np.ndarray | None


def group_labels(df: pd.DataFrame, col: str, intersections: dict[str, tuple[str, ...]]) -> pd.Series:
    """Each row's group of attribute ``col``: its value, or for an intersection the values of its columns joined by
    " & "; missing as :data:`MISSING_GROUP`."""
    if col in intersections:
        parts = [df[c].astype("string") for c in intersections[col]]
        joined = parts[0]
        for p in parts[1:]:
            joined = joined + " & " + p
        return joined.fillna(MISSING_GROUP)
    return df[col].astype("string").fillna(MISSING_GROUP)


BOUNDARY_PSEUDO = 0.5  # Jeffreys half-row per cell pair in the resampling shares (see stats.bootstrap)


def _resample_counts(cells, strata, patients, n_cells, plan_n_boot, rng, cluster: bool):
    """Cell counts of ``plan_n_boot`` replicates: whole patients when ``cluster``, else rows resampled within each
    stratum. The gap audit's strata are the groups: each group keeps its size and its labels are
    resampled with its predictions, so a group's prevalence varies as it does between samples. Strata of the label
    (before) fixed every replicate's number of positives and, where prevalence and predictions differ by group,
    took the prevalence's share out of the parity gap's variance (design effect 0.85–0.90 instead of 1 with
    independent rows, an interval too narrow); recall and specificity keep theirs either way (their denominators
    are the positives / negatives, whose variation adds nothing to first order)."""
    if cluster:
        return cluster_cell_counts(cells, patients, n_cells, plan_n_boot, rng, pseudo=BOUNDARY_PSEUDO)
    return stratified_cell_counts(cells, strata, n_cells, plan_n_boot, rng, pseudo=BOUNDARY_PSEUDO)


def task_column(df: pd.DataFrame, roles: ColumnRoles) -> str:
    """The task column of a prepared table (its values as text); without one, a column ``__task__`` holding
    "(all)" is added to ``df``. Returns its name."""
    if roles.task is None:
        df["__task__"] = "(all)"
        return "__task__"
    df[roles.task] = df[roles.task].astype(str)
    return roles.task

