"""Calibration with repeated patients and the "too few cases" rule (issue 21, the design-space map's failing
regions): the CR2 whole-patient covariance of the calibration fits, the t / F references with df from the patients
of the smaller class, and one rule that makes calibration and discrimination "inconclusive: too few cases".

Each simulation here failed on the code before the fix (numbers in the comments; full studies in
``benchmarks/bench_cluster_calibration.py``)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import TOO_FEW_CASES, GroupAuditPlan, run_group_audit, too_few_cases
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.stats import calibration as C
from fairdesk.core.synthetic import design_space as DS

ROLES = ColumnRoles(label="y", score="p", attributes=("group",), patient_id="pid")


def _audits(prev, auroc, n, max_rows, reps, seed, groups=2):
    """``reps`` audits of a calibrated clustered design (every calibration test a true null, slope 1, intercept 0):
    (slope covered, intercept covered, LR test rejected) over the groups that have intervals and tests."""
    d = DS.Design("calibrated", [n] * groups, [prev] * groups, auroc, 0.0, 1.0, 0.2, max_rows, 0.6,
                  mu=[0.0] * groups, threshold=0.1)
    rng = np.random.default_rng(seed)
    slope, intercept, rejected = [], [], []
    for i in range(reps):
        res = run_group_audit(DS.simulate(d, rng), GroupAuditPlan(ROLES, threshold=0.1, n_boot=100, seed=i))
        c = res.calibration.dropna(subset=["calibration_slope_ci_low"])
        slope += list((c["calibration_slope_ci_low"] <= 1) & (1 <= c["calibration_slope_ci_high"]))
        intercept += list((c["calibration_intercept_ci_low"] <= 0) & (0 <= c["calibration_intercept_ci_high"]))
        rejected += list(c["p_value"].dropna() <= 0.05)
    return np.array(slope), np.array(intercept), np.array(rejected)


def test_clustered_calibration_intervals_cover_and_lr_test_holds_its_size():
    """~15–20 patients among the positives, 1–10 or 1–12 rows each: before the fix the slope interval covered 0.90
    and 0.875, the intercept 0.91 (first design), and the χ² LR test rejected 9.2% of calibrated groups; now 0.94 /
    0.97, 0.97 and 3%."""
    s1, i1, r1 = _audits(0.05, 0.9, 2000, 10, 30, seed=5)
    s2, i2, _ = _audits(0.06, 0.8, 1500, 12, 25, seed=5)
    slope, intercept = np.r_[s1, s2], np.r_[i1, i2]
    assert len(slope) >= 90
    assert slope.mean() >= 0.93, slope.mean()
    assert intercept.mean() >= 0.93, intercept.mean()
    assert len(r1) >= 50 and r1.mean() <= 0.07, r1.mean()


def _brute_cr2(x, resid, weight, pid, bread):
    """CR2 from the patients' m × m matrices: ``u_g = X_gᵀ W_g^½ (I − H_gg)^−½ W_g^−½ e_g``."""
    meat = np.zeros((x.shape[1], x.shape[1]))
    for g in np.unique(pid):
        rows = pid == g
        z = np.sqrt(weight[rows])[:, None] * x[rows]
        h = z @ bread @ z.T
        ev, vec = np.linalg.eigh(np.eye(len(h)) - h)
        root = vec @ np.diag(ev ** -0.5) @ vec.T
        u = z.T @ root @ (resid[rows] / np.sqrt(weight[rows]))
        meat += np.outer(u, u)
    return bread @ meat @ bread


@pytest.mark.parametrize("q", [1, 2])
def test_cr2_covariance_equals_the_patients_matrices(q):
    """The closed form (rank-q leverage, per-patient sums) equals the textbook CR2 built from each patient's
    (I − H_gg)^−½, and exceeds the plain sandwich (CR0) — by more where patients hold many rows."""
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 25, 40)
    pid = np.repeat(np.arange(sizes.size), sizes)
    l = rng.normal(size=pid.size) + rng.normal(size=sizes.size)[pid]
    x = np.column_stack([np.ones(pid.size), l])[:, :q]
    p = 1 / (1 + np.exp(-(x @ np.r_[-0.5, 0.8][:q])))
    resid = (rng.random(pid.size) < p) - p
    w = p * (1 - p)
    bread = np.linalg.inv(x.T @ (w[:, None] * x))
    fast = C.cr2_covariance(x, resid, w, pid, sizes.size, bread)
    np.testing.assert_allclose(fast, _brute_cr2(x, resid, w, pid, bread), rtol=1e-9, atol=1e-14)
    score = np.stack([np.bincount(pid, resid * x[:, i]) for i in range(q)], -1)
    cr0 = bread @ score.T @ score @ bread
    assert np.all(np.diag(fast) > np.diag(cr0))


def _clustered_frame(pos_patients, rows_each, neg_rows, seed=0, extra_group=True):
    """A group whose positives come from ``pos_patients`` patients of ``rows_each`` rows (many positive rows, few
    patients) next to a well-filled group."""
    rng = np.random.default_rng(seed)
    parts = []
    for g, k in (("A", pos_patients), ("B", 40)) if extra_group else (("A", pos_patients),):
        pid = [f"{g}p{i}" for i in range(k) for _ in range(rows_each)] + [f"{g}n{i}" for i in range(neg_rows)]
        y = np.r_[np.ones(k * rows_each), np.zeros(neg_rows)]
        p = np.clip(1 / (1 + np.exp(-(rng.normal(size=y.size) + 2 * y - 1.5))), 1e-3, 1 - 1e-3)
        parts.append(pd.DataFrame({"y": y.astype(int), "p": p, "group": g, "pid": pid}))
    return pd.concat(parts, ignore_index=True)


def test_too_few_patients_among_the_cases_is_inconclusive_without_interval():
    """8 patients hold group A's 40 positive rows: its calibration and AUROC/AUPRC rest on 8 patients, so they are
    "inconclusive: too few cases" with the reason in words, no interval and no test (before: intervals covering
    0.76–0.90 in the map and AUROC pair tests rejecting 13% of nulls); group B (40 patients) keeps its own."""
    df = _clustered_frame(8, 5, 300)
    res = run_group_audit(df, GroupAuditPlan(ROLES, threshold=0.3, n_boot=100, seed=0))
    cal = res.calibration.set_index("group")
    want = f"{TOO_FEW_CASES} (only 8 patients among the positive cases, fewer than 10)"
    assert cal.loc["A", "reason"] == want
    for m in ("calibration_intercept", "calibration_slope", "oe_ratio", "brier", "ece"):
        assert cal.loc["A", m] is not None and not pd.isna(cal.loc["A", m])  # the value stays, its interval goes
        assert pd.isna(cal.loc["A", f"{m}_ci_low"]) and pd.isna(cal.loc["A", f"{m}_ci_high"])
        assert not pd.isna(cal.loc["B", f"{m}_ci_low"])
    assert pd.isna(cal.loc["A", "p_value"]) and pd.isna(cal.loc["A", "test_id"])
    assert not res.tests[(res.tests["metric"] == "calibration")]["group"].eq("A").any()
    disc = res.discrimination
    a = disc[disc["group"] == "A"]
    assert (a["reason"] == want).all() and a["value_ci_low"].isna().all() and a["test_id"].isna().all()
    assert res.tests[res.tests["metric"].isin(["auroc", "auprc"])].empty  # A cannot be compared; B has no partner
    # the one rule: rows when rows are independent, the patients among the cases when patients repeat
    assert too_few_cases(40, 300, 10) is None
    assert too_few_cases(9, 300, 10) == f"{TOO_FEW_CASES} (only 9 positive cases, fewer than 10)"
    assert too_few_cases(40, 300, 10, (8, 250)) == want
    assert too_few_cases(40, 300, 10, (12, 7)).endswith("(only 7 patients among the negative cases, fewer than 10)")


def test_enough_patients_among_the_cases_keeps_intervals():
    df = _clustered_frame(12, 5, 300)
    res = run_group_audit(df, GroupAuditPlan(ROLES, threshold=0.3, n_boot=100, seed=0))
    cal = res.calibration.set_index("group")
    assert pd.isna(cal.loc["A", "reason"]) or not str(cal.loc["A", "reason"]).startswith(TOO_FEW_CASES)
    assert not pd.isna(cal.loc["A", "calibration_slope_ci_low"]) and not pd.isna(cal.loc["A", "p_value"])
    assert not res.tests[res.tests["metric"] == "auroc"].empty


def test_design_space_map_counts_too_few_cases_as_not_tested():
    """A comparison the audit declares "inconclusive: too few cases" is neither a failure nor dropped: the map
    counts it per region (``n_not_tested``) and prints the count."""
    d = DS.Design("calibrated", [60, 400], [0.08, 0.3], 0.8, 0.0, 1.0, 0.3, 1, 0.0, mu=[0.0, 0.0], threshold=0.2)
    rows = pd.DataFrame.from_records(DS.evaluate(d, 0, seed=3, n_boot=100, truth_rows=5000))
    untested = rows[rows["kind"] == "not tested"]
    assert set(untested["measure"]) >= {"calibration test", "calibration_slope", "auroc", "auroc gap", "auprc gap"}
    assert untested["covered"].isna().all() and untested["rejected"].isna().all()
    assert (untested["cases"] < 10).all()
    reg = DS.region_table(rows)
    small = reg[reg["region"].str.startswith("independent, <10")]
    assert (small["n_not_tested"] > 0).all() and (small["n_intervals"] == 0).all()
    assert reg["n_not_tested"].sum() == len(untested)
    result = DS.DesignSpaceResult(rows, [], {"designs": 1, "seed": 3}, 0.0)
    assert "untested" in DS.format_regions(result).splitlines()[0]


def test_independent_lr_test_keeps_its_size_at_few_cases():
    """With independent rows the χ² LR test of calibration holds its size at 15–20 cases of the smaller class
    (the map's 0.12 at 10–29 cases was 3 of 25 tests; 600 groups here: within α ± 0.02). A guard, not a defect:
    it passed before too — the F reference is used only with repeated patients (where χ² rejected 9%)."""
    rng = np.random.default_rng(7)
    p_values = []
    for prev, auroc, n in ((0.05, 0.8, 400), (0.1, 0.95, 200), (0.04, 0.99, 400)):
        d = DS.Design("calibrated", [n], [prev], auroc, 0.0, 1.0, 0.2, 1, 0.0, mu=[0.0])
        for _ in range(200):
            y, latent, _ = DS.simulate(d, rng)[["y", "p", "pid"]].T.to_numpy()
            pt = C.point_stats(y.astype(float), latent.astype(float))
            if min(pt["n_positive"], pt["n"] - pt["n_positive"]) >= 10 and math.isfinite(pt["p_value"]):
                p_values.append(pt["p_value"])
    size = np.mean(np.array(p_values) <= 0.05)
    assert len(p_values) > 450 and 0.03 <= size <= 0.07, (size, len(p_values))


def test_clustered_calibration_over_random_designs():
    """40 designs drawn at random (2–4 groups of 300–2,000 rows, prevalence 0.05–0.5, AUROC 0.6–0.97, every design
    clustered: 1 to 2–30 rows per patient, intra-patient correlation 0.3–0.9, half miscalibrated): the slope
    interval covered 0.876 of 113 and the LR test rejected 9.4% of 64 calibrated groups before the fix; now each
    interval covers at least 0.93 and the test holds α + 0.02. AUROC ≥ 0.99 is left out: there the clustered slope
    still under-covers (docs/methods.md, "Validity over a design space")."""
    space = {"rows_per_group": (300, 2000), "prevalence": (0.05, 0.5), "auroc": (0.6, 0.97), "share_clustered": 1.0,
             "modes": ("calibrated",), "groups": (2, 4)}
    rows = DS.run_design_space(40, seed=11, n_boot=100, space=space, truth_rows=20000).rows
    intervals = rows[rows["kind"] == "interval"]
    for m in ("calibration_slope", "calibration_intercept", "oe_ratio"):
        covered = intervals[intervals["measure"] == m]["covered"].astype(bool)
        assert len(covered) >= 60 and covered.mean() >= 0.93, (m, covered.mean(), len(covered))
    null = rows[(rows["measure"] == "calibration test") & (rows["kind"] == "test") & (rows["null"] == True)]  # noqa: E712
    assert len(null) >= 30 and null["rejected"].astype(bool).mean() <= 0.07
    assert (rows["kind"] == "not tested").any()  # the groups with fewer than 10 patients among their cases


def test_clustered_slope_interval_covers_near_separation():
    """AUROC 0.998, ~30 patients among the positives with 1–15 rows each: near separation the linearised (CR2)
    slope variance falls far short of the slope's sampling variance, and the interval covered 0.88 (44 of 50) with
    the LR test rejecting 10%; with the whole-patient bootstrap variance as a floor 0.98 and 2%."""
    slope, _, rejected = _audits(0.3, 0.998, 1000, 15, 25, seed=3)
    assert len(slope) >= 45
    assert slope.mean() >= 0.93, slope.mean()
    assert len(rejected) >= 40 and rejected.mean() <= 0.07, rejected.mean()


def test_slope_bootstrap_variance_refits_whole_patients():
    """The bootstrap resamples patients, not rows: with every patient's rows duplicated (the same information, twice
    the rows) the whole-patient bootstrap variance is unchanged, and it is reproducible from the generator."""
    from fairdesk.core.stats.discrimination import ranked

    rng = np.random.default_rng(4)
    d = DS.Design("calibrated", [600], [0.3], 0.9, 0.0, 1.0, 0.2, 8, 0.6, mu=[0.0])
    y, latent, pid = DS._latent(d, 0, 600, rng, True)
    s = DS._score(d, 0, latent)
    values, pos, neg, cell = ranked(y, s, return_cell=True)
    pt = C.point_from_ranked(values, pos, neg)
    v1 = C.slope_bootstrap_variance(pt, cell, pid, np.random.default_rng(0))
    assert v1 == C.slope_bootstrap_variance(pt, cell, pid, np.random.default_rng(0))
    values2, pos2, neg2, cell2 = ranked(np.r_[y, y], np.r_[s, s], return_cell=True)
    pt2 = C.point_from_ranked(values2, pos2, neg2)
    v2 = C.slope_bootstrap_variance(pt2, cell2, np.r_[pid, pid], np.random.default_rng(0))
    np.testing.assert_allclose(v2, v1, rtol=1e-6)
    # resampling rows instead would halve it
    rows = C.slope_bootstrap_variance(pt2, cell2, np.arange(2 * pid.size), np.random.default_rng(0))
    assert rows < 0.8 * v1


def test_calibration_validity_family_draws_clustered_groups_through_the_audits_path():
    """``bench validity --family calibration``: one freshly drawn clustered group per run (rows, prevalence, AUROC,
    rows per patient, intra-patient correlation and — for coverage — the slope factor β from
    ``validity.CALIBRATION_SPACE``), run through ``groups.group_calibration``. Small and fixed-seed here (the full
    run: 2 × 600 groups, size 0.022 and coverage 0.965, docs/methods.md §8); each run's record is re-derived by
    hand from the drawn design."""
    from fairdesk.core import validity as V

    res = V.run_validity("calibration", runs=12, seed=4)
    assert [r.kind for r in res.rows] == ["null"] * 4 + ["coverage"] * 4
    assert res.rows[0].target == "≤ 0.07" and res.rows[4].target == "≥ 0.93"
    assert res.rows[0].runs == sum(r.runs for r in res.rows[1:4])  # the bands split the drawn groups
    assert res.rows[0].rejections <= 2 and res.rows[4].rate >= 0.8
    assert V.calibration_run(4, "coverage", 3) == V.calibration_run(4, "coverage", 3)
    rec = V.calibration_run(4, "coverage", 3)
    d = V.draw_calibration_design(np.random.default_rng(V._run_seed(4, "calibration", "coverage", 3)), False)
    assert (rec["rows"], rec["beta"], rec["icc"]) == (d.sizes[0], d.beta, d.rho)
    sp = V.CALIBRATION_SPACE
    assert sp["rows"][0] <= rec["rows"] <= sp["rows"][1] and sp["beta"][0] <= rec["beta"] <= sp["beta"][1]
    assert all(V.calibration_run(4, "null", i)["beta"] == 1.0 for i in range(2))
