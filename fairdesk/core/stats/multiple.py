"""Multiple-testing correction: Benjamini–Hochberg (scipy), Holm, Simes and two-level hierarchical FDR."""
from __future__ import annotations

import numpy as np


def benjamini_hochberg(p_values) -> np.ndarray:
    """BH-adjusted p-values (q-values); NaN entries stay NaN and do not count as tests."""
    from scipy.stats import false_discovery_control

    p = np.asarray(p_values, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = false_discovery_control(p[ok], method="bh")
    return q


def holm(p_values) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error control); NaN entries stay NaN and do not count.

    Hand-written: scipy has no Holm adjustment (statsmodels, which has, is not a dependency). The i-th smallest of
    m p-values becomes ``max_{k ≤ i} min(1, (m − k + 1) p_(k))``.
    """
    p = np.asarray(p_values, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size:
        order = ok[np.argsort(p[ok], kind="stable")]
        m = order.size
        adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
        q[order] = np.maximum.accumulate(adj)
    return q


def adjust(p_values, method: str = "bh") -> np.ndarray:
    """Adjusted p-values by ``method`` ("bh" or "holm")."""
    if method == "bh":
        return benjamini_hochberg(p_values)
    if method == "holm":
        return holm(p_values)
    raise ValueError(f"unknown correction {method!r}")


def simes(p_values) -> float:
    """Simes' combination of p-values into one p-value of "every hypothesis is null": ``min_i m·p_(i)/i`` (NaN
    entries do not count; NaN when none is left). Valid when the p-values are independent or positively dependent
    (PRDS; Sarkar 1998), as are the pair tests of one set of groups."""
    p = np.sort(np.asarray(p_values, dtype=float))
    p = p[~np.isnan(p)]
    if not p.size:
        return float("nan")
    return float(min(1.0, np.min(p.size * p / np.arange(1, p.size + 1))))


def rejection_level(p_values, alpha: float, method: str = "bh") -> float:
    """The level ``a`` at which a test of the family is rejected, ``p ≤ a`` exactly for the rejected ones: the
    level of the intervals that agree with the family's decisions (false-coverage-rate intervals, Benjamini &
    Yekutieli 2005). BH: ``α·max(R, 1)/m``; Holm: ``α/(m − R + 1)`` (every rejected p is at most that and every
    other above ``α/(m − R)``). ``m`` counts the non-NaN p-values, ``R`` the rejections at ``α``."""
    p = np.asarray(p_values, dtype=float)
    m = int((~np.isnan(p)).sum())
    if m == 0:
        return float(alpha)
    r = int((adjust(p, method) <= alpha).sum())
    if method == "bh":
        return float(alpha * max(r, 1) / m)
    return float(alpha / (m - r + 1))


def two_level_fdr(p_values, nodes, alpha: float) -> dict:
    """Hierarchical false-discovery-rate testing on a two-level tree (Benjamini & Bogomolov 2014; Bogomolov,
    Peterson, Benjamini & Sabatti 2021, "Hypotheses on a tree", TreeBH with Simes at the parents).

    ``nodes[i]`` names the parent of test ``i`` (e.g. one task × attribute). Level 1: each parent's Simes p
    (:func:`simes`) of its tests, BH over the ``M`` parents at ``α`` — the false discovery rate among the parents
    selected is at most ``α``. Level 2: within each of the ``R`` selected parents, BH over its ``m_j`` tests at
    ``α·R/M`` — the false discovery rate within the selected parents, averaged over them, is at most ``α``
    (selective FDR). NaN p-values take no part.

    Returns arrays over the tests: ``q`` (the smallest ``α`` at which the test would be rejected, so that
    rejected ⇔ ``q ≤ α``), ``level`` (the level ``a`` of the test's adjusted interval at ``α``: ``α·(R/M)·max(R_j,
    1)/m_j`` in a selected parent, which every rejected p there is at most and every other above; ``α·max(R, 1)/
    (M·m_j)`` in a parent not selected, below which none of its p-values lies), ``parent_p`` and ``parent_q``
    (the Simes p of the test's parent and its BH q-value)."""
    p = np.asarray(p_values, dtype=float)
    n = p.size
    out = {k: np.full(n, np.nan) for k in ("q", "level", "parent_p", "parent_q")}
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    codes, _ = _codes(nodes)
    members = {}
    for i in np.flatnonzero(ok):
        members.setdefault(codes[i], []).append(i)
    keys = list(members)
    big_m = len(keys)
    node_p = np.array([simes(p[members[k]]) for k in keys])
    node_q = _bh(node_p)
    selected = node_q <= alpha
    r = int(selected.sum())
    levels = np.unique(node_q)  # α ∈ [levels[k], levels[k+1]) selects the parents with q ≤ levels[k]
    counts = np.searchsorted(np.sort(node_q), levels, side="right")
    nxt = np.append(levels[1:], np.inf)
    for k_no, key in enumerate(keys):
        idx = np.asarray(members[key])
        within = _bh(p[idx])
        m_j = idx.size
        # the smallest α at which parent k_no is selected and the test within it is rejected at α·R(α)/M
        cand = np.maximum(levels[None, :], within[:, None] * big_m / counts[None, :])
        valid = (levels[None, :] >= node_q[k_no]) & (cand < nxt[None, :])
        out["q"][idx] = np.minimum(1.0, np.where(valid, cand, np.inf).min(axis=1))
        if selected[k_no]:
            a_j = alpha * r / big_m
            r_j = int((within <= a_j).sum())
            out["level"][idx] = a_j * max(r_j, 1) / m_j
        else:
            out["level"][idx] = alpha * max(r, 1) / (big_m * m_j)
        out["parent_p"][idx] = node_p[k_no]
        out["parent_q"][idx] = node_q[k_no]
    return out


def _bh(p: np.ndarray) -> np.ndarray:
    """BH q-values of p-values without NaN, in numpy: ``min_{k ≥ i} m·p_(k)/k`` (the tree calls it once per parent,
    where scipy's per-call overhead was most of the time; :func:`benjamini_hochberg` checks it in the tests)."""
    order = np.argsort(p, kind="stable")
    m = p.size
    q = np.minimum.accumulate((m * p[order] / np.arange(1, m + 1))[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


def _codes(labels):
    """Integer codes of hashable labels, in order of first appearance."""
    seen: dict = {}
    codes = np.array([seen.setdefault(x, len(seen)) for x in labels], dtype=int)
    return codes, list(seen)
