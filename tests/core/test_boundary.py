"""Rates at 0 or 1 and rates on a handful of cases must not fabricate significant gaps."""
import numpy as np
import pandas as pd

from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.stats.bootstrap import bootstrap_p_value, cluster_cell_counts, stratified_cell_counts

ROLES = ColumnRoles(label="y", score="s", attributes=("g",))


def test_smoothing_gives_a_boundary_cell_spread_and_keeps_sizes():
    rng = np.random.default_rng(0)
    # group 0: 60 rows, none predicted positive (cells 0/1); group 1: 940 rows, 4% predicted positive (cells 2/3)
    cells = np.r_[np.zeros(60, int), np.full(902, 2), np.full(38, 3)]
    strata = np.zeros(cells.size, int)
    plain = stratified_cell_counts(cells, strata, 4, 2000, rng)
    smooth = stratified_cell_counts(cells, strata, 4, 2000, rng, pseudo=0.5)
    assert (plain[:, 1] == 0).all()                     # the plain bootstrap never moves a 0/60 rate
    assert 0.2 < (smooth[:, 1] > 0).mean() < 0.6        # smoothed: about 1 - exp(-0.5) of replicates
    assert (smooth.sum(axis=1) == cells.size).all()
    # away from the boundary the smoothing changes little: group 1's rate keeps its mean and spread
    r_plain, r_smooth = plain[:, 3] / plain[:, 2:].sum(1), smooth[:, 3] / smooth[:, 2:].sum(1)
    assert abs(r_plain.mean() - r_smooth.mean()) < 0.002 and abs(r_plain.std() / r_smooth.std() - 1) < 0.1
    clusters = np.arange(cells.size)
    c_smooth = cluster_cell_counts(cells, clusters, 4, 2000, rng, pseudo=0.5)
    assert 0.2 < (c_smooth[:, 1] > 0).mean() < 0.6 and (c_smooth.sum(1) >= cells.size - 10).all()


def _table(n0, k0, n1, k1, label=0):
    """Group A: k0 of n0 rows predicted positive; group B: k1 of n1 (all rows of one label)."""
    rows = [("A", 1.0 if i < k0 else 0.0) for i in range(n0)] + [("B", 1.0 if i < k1 else 0.0) for i in range(n1)]
    df = pd.DataFrame(rows, columns=["g", "s"])
    df["y"] = label
    # add a few rows of the other label so that the table has both classes
    other = pd.DataFrame({"g": ["A", "B"] * 20, "s": [0.0, 1.0] * 20, "y": 1 - label})
    return pd.concat([df, other], ignore_index=True)


def _null_false_positive_rate(n_small, rate, pseudo, reps=300, n_boot=300, seed=0):
    """Two groups with the SAME true rate: share of runs whose two-sided bootstrap p is <= 0.05."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        k_a, k_b = rng.binomial(n_small, rate), rng.binomial(2000, rate)
        cells = np.r_[np.zeros(n_small - k_a, int), np.ones(k_a, int), np.full(2000 - k_b, 2), np.full(k_b, 3)]
        c = stratified_cell_counts(cells, np.zeros(cells.size, int), 4, n_boot, rng, pseudo=pseudo)
        with np.errstate(all="ignore"):
            gap = c[:, 1] / c[:, :2].sum(1) - c[:, 3] / c[:, 2:].sum(1)
        hits += bootstrap_p_value(gap) <= 0.05
    return hits / reps


def test_small_group_with_a_rare_event_keeps_the_false_positive_rate_near_alpha():
    # 30 rows at a 2% event rate: most runs see 0 events, a rate the plain bootstrap treats as exact
    assert _null_false_positive_rate(30, 0.02, pseudo=0.0) > 0.3     # the failure mode (measured 0.53)
    for n_small, rate in ((30, 0.02), (30, 0.05), (60, 0.05), (200, 0.2)):
        assert _null_false_positive_rate(n_small, rate, pseudo=0.5) <= 0.08, (n_small, rate)


def test_zero_rate_is_still_found_when_the_difference_is_real():
    df = _table(200, 0, 2000, 400)  # 0/200 vs 400/2000 false alarms: Fisher p ~ 1e-16
    res = run_group_audit(df, GroupAuditPlan(ROLES, threshold=0.5, metrics=("specificity",), n_boot=1000, seed=1))
    rec = res.records.set_index("group").loc["A"]
    assert rec.significant and rec.favours == "A"


def test_rate_on_few_cases_is_shown_but_not_tested():
    rng = np.random.default_rng(3)
    n = 400
    g = np.r_[np.full(n, "A"), np.full(n, "B")]
    y = np.r_[np.r_[np.ones(7), np.zeros(n - 7)], rng.binomial(1, 0.3, n)].astype(int)  # A has 7 positives
    s = np.where(y == 1, 0.9, 0.1)
    df = pd.DataFrame({"g": g, "y": y, "s": s})
    res = run_group_audit(df, GroupAuditPlan(ROLES, threshold=0.5, metrics=("recall", "specificity"), n_boot=200))
    recall_a = res.records.query("group == 'A' and metric == 'recall'").iloc[0]
    assert recall_a.rate == 1.0 and recall_a.gap is None or np.isnan(recall_a.gap)
    assert "only 7 positive cases" in recall_a.reason
    spec_a = res.records.query("group == 'A' and metric == 'specificity'").iloc[0]
    assert spec_a.gap == 0.0  # 393 negatives: tested as usual
    low = run_group_audit(df, GroupAuditPlan(ROLES, threshold=0.5, metrics=("recall",), n_boot=200, min_denominator=5))
    assert low.records.query("group == 'A'").iloc[0].gap == 0.0
