"""Multiple-testing correction: Benjamini–Hochberg (scipy), Holm, Simes, Bonferroni over one-vs-rest gaps and
two-level hierarchical FDR."""
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


def one_vs_rest_bonferroni(counts: dict, deff=1.0, df=np.inf) -> float:
    """One p-value of "every group has the same rate" from the groups' counts ``{group: (x, n)}``: each group's
    rate against the pooled rest by the audit's rate-gap test (:func:`..stats.gaps.gap_p_value`, with the design
    effect ``deff`` and degrees of freedom ``df``, one number or one per group ``{group: value}``) and Bonferroni over
    the ``g`` groups, ``min(1, g·min p)``. Valid under any dependence among the ``g`` tests (they are negatively
    correlated, which Simes does not cover). A harm carried by one group shows in all its pairs: its one-vs-rest gap
    pays for ``g`` looks where Simes over the pairs pays for up to ``g(g − 1)/2``. NaN with fewer than three groups
    (two groups: the pair is its own omnibus)."""
    from fairdesk.core.stats.gaps import gap_p_value

    if len(counts) < 3:
        return float("nan")
    names = list(counts)
    x = np.array([float(counts[k][0]) for k in names])
    n = np.array([float(counts[k][1]) for k in names])
    per = lambda v: np.array([float(v[k]) for k in names]) if isinstance(v, dict) else float(v)  # noqa: E731
    x_rest, n_rest = x.sum() - x, n.sum() - n
    p = np.asarray(gap_p_value(x, n, x_rest, n_rest, per(deff), per(df)), float)
    p = p[~np.isnan(p)]
    if not p.size:
        return float("nan")
    return float(min(1.0, len(counts) * p.min()))


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


def two_level_fdr(p_values, nodes, alpha: float, node_p=None, within: str = "selective") -> dict:
    """Hierarchical false-discovery-rate testing on a two-level tree (Benjamini & Bogomolov 2014; Yekutieli 2008;
    Bogomolov, Peterson, Benjamini & Sabatti 2021, "Hypotheses on a tree").

    ``nodes[i]`` names the parent of test ``i`` (e.g. one task × attribute × measure). Level 1: each parent's p of
    "every test below it is null" — ``node_p[key]`` when given (an omnibus test of the parent), else the Simes p
    (:func:`simes`) of its tests — and BH over the ``M`` parents at ``α``: the false discovery rate among the
    parents selected is at most ``α``. Level 2, within each of the ``R`` selected parents, BH over its ``m_j`` tests:

    - ``within="selective"`` at ``α·R/M`` (Benjamini–Bogomolov): the false discovery rate within the selected
      parents, averaged over them, is at most ``α`` whatever the selection;
    - ``within="full"`` at ``α`` (Yekutieli 2008: every family of the tree tested by BH at the same level): the
      false discovery rate within each parent tested is at most ``α``; over the whole tree Yekutieli bounds it by
      about ``2 × 1.44 × α`` for independent tests (a selected parent with nothing to find brings at least one false
      discovery, and at most ``α`` of the parents selected are such), so the tests' error rate over the tree is
      what a simulation of the tree measures, not ``α`` by proof.

    NaN p-values take no part. Returns arrays over the tests: ``q`` (the smallest ``α`` at which the test would be
    rejected, so that rejected ⇔ ``q ≤ α``), ``level`` (the level ``a`` of the test's adjusted interval at ``α``,
    with rejected ⇔ ``p ≤ a``: in a selected parent ``a_j·max(R_j, 1)/m_j`` for its BH level ``a_j``; in a parent
    not selected ``α·max(R, 1)/(M·m_j)``, lowered below the parent's smallest p when an omnibus ``node_p`` let a
    test lie under it), ``parent_p`` and ``parent_q`` (the parent's p and its BH q-value)."""
    if within not in ("selective", "full"):
        raise ValueError(f"unknown within-parent level {within!r}")
    p = np.asarray(p_values, dtype=float)
    n = p.size
    out = {k: np.full(n, np.nan) for k in ("q", "level", "parent_p", "parent_q")}
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    codes, labels = _codes(nodes)
    members = {}
    for i in np.flatnonzero(ok):
        members.setdefault(codes[i], []).append(i)
    keys = list(members)
    big_m = len(keys)
    given = node_p or {}
    node_p = np.array([float(given[labels[k]]) if labels[k] in given and not np.isnan(given[labels[k]])
                       else simes(p[members[k]]) for k in keys])
    node_q = _bh(node_p)
    selected = node_q <= alpha
    r = int(selected.sum())
    levels = np.unique(node_q)  # α ∈ [levels[k], levels[k+1]) selects the parents with q ≤ levels[k]
    counts = np.searchsorted(np.sort(node_q), levels, side="right")
    nxt = np.append(levels[1:], np.inf)
    for k_no, key in enumerate(keys):
        idx = np.asarray(members[key])
        within_q = _bh(p[idx])
        m_j = idx.size
        if within == "full":  # rejected at α ⇔ the parent is selected at α and the test's BH q within it ≤ α
            out["q"][idx] = np.maximum(node_q[k_no], within_q)
        else:  # the smallest α at which the parent is selected and the test rejected within it at α·R(α)/M
            cand = np.maximum(levels[None, :], within_q[:, None] * big_m / counts[None, :])
            valid = (levels[None, :] >= node_q[k_no]) & (cand < nxt[None, :])
            out["q"][idx] = np.minimum(1.0, np.where(valid, cand, np.inf).min(axis=1))
        if selected[k_no]:
            a_j = alpha if within == "full" else alpha * r / big_m
            r_j = int((within_q <= a_j).sum())
            out["level"][idx] = a_j * max(r_j, 1) / m_j
        else:
            low = alpha * max(r, 1) / (big_m * m_j)
            out["level"][idx] = min(low, float(np.min(p[idx])) * (1 - 1e-9))
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
