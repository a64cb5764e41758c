"""Calibration and discrimination by group (METHODS §8, issue 14): the numbers against independent computations,
the joint test's size and power inside the audit's correction family, the verdicts, the curves, bad scores and the
JSON round trip."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import (CALIBRATION_MEASURES, GroupAuditPlan, GroupAuditResult, findings,
                                         run_group_audit, verdict_counts)
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.errors import DataError
from fairdesk.core.stats import calibration as C
from fairdesk.core.stats.discrimination import ranked
from fairdesk.core.stats.multiple import adjust

ALPHA = 0.05
# a tiny example worked by hand: O/E = 4/4.0; ECE = (0.1 + 0.35 + 0.4 + 0.55 + 0.4 + 0.2 + 0.1)/8 (bin 3 holds
# 0.30 and 0.35: |(0 − 0.30) + (1 − 0.35)| = 0.35; every other bin holds one row)
Y = np.array([0, 0, 1, 0, 1, 1, 0, 1])
S = np.array([0.1, 0.3, 0.35, 0.4, 0.6, 0.8, 0.55, 0.9])


def _logit(s):
    return np.log(s / (1 - s))


def _loglik(y, eta):
    return float(np.sum(y * eta - np.log1p(np.exp(eta))))


def test_tiny_example_by_hand_and_against_independent_fits():
    from scipy.optimize import brentq, root
    from scipy.stats import chi2
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import brier_score_loss

    pt = C.point_stats(Y, S)
    assert pt["reason"] is None and pt["n"] == 8 and pt["n_positive"] == 4
    assert pt["oe_ratio"] == pytest.approx(1.0, abs=1e-12)
    assert pt["ece"] == pytest.approx(2.1 / 8, abs=1e-12)
    assert pt["brier"] == pytest.approx(brier_score_loss(Y, S), abs=1e-12)
    l = _logit(S)
    # intercept with offset: the root of its score equation Σ (y − σ(a + l)) = 0, found by bracketing
    a = brentq(lambda a: np.sum(Y - 1 / (1 + np.exp(-(a + l)))), -10, 10, xtol=1e-14)
    assert pt["intercept"] == pytest.approx(a, abs=1e-9)

    # slope model: the root of both score equations (scipy), and sklearn's unpenalised logistic regression on l
    def score(th):
        r = Y - 1 / (1 + np.exp(-(th[0] + th[1] * l)))
        return [r.sum(), (r * l).sum()]

    sol = root(score, [0.0, 1.0], tol=1e-14)
    assert sol.success
    assert pt["slope_intercept"] == pytest.approx(sol.x[0], abs=1e-8)
    assert pt["slope"] == pytest.approx(sol.x[1], abs=1e-8)
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(l[:, None], Y)
    assert pt["slope"] == pytest.approx(lr.coef_[0, 0], abs=1e-5)
    assert pt["slope_intercept"] == pytest.approx(lr.intercept_[0], abs=1e-5)
    # the joint likelihood-ratio test of (0, 1), 2 df
    stat = 2 * (_loglik(Y, sol.x[0] + sol.x[1] * l) - _loglik(Y, l))
    assert pt["lr_stat"] == pytest.approx(stat, abs=1e-8)
    assert pt["p_value"] == pytest.approx(chi2.sf(stat, 2), abs=1e-10)
    # model-based SE of the intercept: 1/sqrt(Σ p(1 − p)) at the fit
    p = 1 / (1 + np.exp(-(a + l)))
    assert pt["intercept_se"] == pytest.approx(1 / np.sqrt(np.sum(p * (1 - p))), rel=1e-8)


def test_larger_example_matches_an_independent_newton_to_1e_6():
    rng = np.random.default_rng(5)
    s = 1 / (1 + np.exp(-rng.normal(-0.5, 1.2, 400)))
    y = (rng.random(400) < 1 / (1 + np.exp(-(0.3 + 0.7 * _logit(s))))).astype(int)
    l = _logit(s)
    th = np.zeros(2)
    x = np.column_stack([np.ones_like(l), l])
    for _ in range(50):  # textbook IRLS, written independently of the module
        p = 1 / (1 + np.exp(-x @ th))
        th = th + np.linalg.solve(x.T @ (x * (p * (1 - p))[:, None]), x.T @ (y - p))
    pt = C.point_stats(y, s)
    assert (pt["slope_intercept"], pt["slope"]) == (pytest.approx(th[0], abs=1e-6), pytest.approx(th[1], abs=1e-6))
    assert pt["slope"] < 1 and pt["p_value"] < 1e-3  # the planted (0.3, 0.7) miscalibration


def test_scores_at_0_and_1_are_clipped_for_the_logit_only():
    y = np.array([0, 1, 0, 1, 1, 0])
    s = np.array([0.0, 1.0, 0.2, 0.7, 0.4, 0.5])
    pt = C.point_stats(y, s)
    assert np.isfinite(pt["intercept"]) and pt["brier"] == pytest.approx(np.mean((s - y) ** 2))
    assert C.clipped_logit([0.0, 1.0]) == pytest.approx([np.log(C.EPS / (1 - C.EPS)), -np.log(C.EPS / (1 - C.EPS))])


@pytest.mark.parametrize("bad", [[0.2, 1.3, 0.5, 0.4], [-0.1, 0.2, 0.5, 0.4], [0.2, np.nan, 0.5, 0.4]])
def test_scores_that_are_not_probabilities_raise_a_clear_error(bad):
    with pytest.raises(DataError, match="not probabilities: calibration is not defined"):
        C.point_stats([0, 1, 0, 1], bad)


def test_group_audit_refuses_scores_outside_0_1():
    df = pd.DataFrame({"y": [0, 1] * 40, "s": np.linspace(-0.5, 2.0, 80), "g": ["A", "B"] * 40})
    with pytest.raises(DataError, match="probability in \\[0, 1\\]"):
        run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s", attributes=("g",)), n_boot=100))


def test_separation_and_one_class_are_not_estimable_not_numbers():
    sep = C.point_stats([0, 0, 0, 1, 1, 1], [0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    assert np.isnan(sep["slope"]) and np.isnan(sep["p_value"]) and "separate" in sep["reason"]
    one = C.point_stats([0, 0, 0, 0], [0.1, 0.2, 0.3, 0.7])
    assert np.isnan(one["intercept"]) and "both classes" in one["reason"]
    assert one["brier"] == pytest.approx(np.mean(np.array([0.1, 0.2, 0.3, 0.7]) ** 2))


def test_a_group_without_a_slope_is_tested_on_its_intercept_alone():
    from scipy.stats import chi2

    rng = np.random.default_rng(8)
    df = pd.DataFrame({"g": ["A"] * 120 + ["B"] * 60, "s": np.r_[rng.random(120), np.full(60, 0.3)]})
    df["y"] = (rng.random(180) < np.where(df["g"] == "B", 0.6, df["s"])).astype(int)  # B: 0.3 predicted, 0.6 seen
    res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s", attributes=("g",)), n_boot=100,
                                             min_group_size=10))
    b = res.calibration.set_index("group").loc["B"]
    assert np.isnan(b["calibration_slope"]) and "single value" in b["reason"] and "1 df" in b["test"]
    yb = df.loc[df["g"] == "B", "y"].to_numpy()
    a = np.log(yb.mean() / (1 - yb.mean())) - np.log(0.3 / 0.7)  # with one score value the MLE is closed-form
    assert b["calibration_intercept"] == pytest.approx(a, abs=1e-8)
    stat = 2 * (_loglik(yb, np.full(60, a + _logit(0.3))) - _loglik(yb, np.full(60, _logit(0.3))))
    assert b["p_value"] == pytest.approx(chi2.sf(stat, 1), rel=1e-6)
    assert b["verdict"] == "differs" and pd.isna(b["p_equivalence"])
    assert "2 df" in res.calibration.set_index("group").loc["A", "test"]


def test_reliability_bins_and_curves():
    from scipy.stats import binomtest

    rng = np.random.default_rng(2)
    s = rng.random(500)
    y = (rng.random(500) < s).astype(int)
    bins = C.reliability_bins(*ranked(y, s))
    assert sum(b["n"] for b in bins) == 500 and len(bins) == 10
    for b in bins:
        assert b["lower"] <= b["predicted"] < b["upper"] and b["ci_low"] <= b["observed"] <= b["ci_high"]
        k = round(b["observed"] * b["n"])
        ref = binomtest(k, b["n"]).proportion_ci(0.95, method="exact")  # Clopper–Pearson
        assert (b["ci_low"], b["ci_high"]) == (pytest.approx(ref.low, abs=1e-9), pytest.approx(ref.high, abs=1e-9))
    x, fit = C.smoothed_curve(*ranked(y, s))
    assert len(x) <= C.MAX_POINTS and np.all(np.diff(x) > 0) and np.all(np.diff(fit) >= 0)
    # the isotonic fit is sklearn's IsotonicRegression (ties pooled by weight), at every point kept
    from sklearn.isotonic import IsotonicRegression

    for yy, ss in ((y, s), (y, s.round(1))):
        x, fit = C.smoothed_curve(*ranked(yy, ss))
        ref = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(ss, yy).predict(x)
        np.testing.assert_allclose(fit, ref, atol=1e-12)
    d = C.roc_pr(*ranked(y, s), 0.5)
    assert all(len(v) <= C.MAX_POINTS for v in d["roc"] + d["pr"])
    yhat = s >= 0.5
    assert d["operating"]["tpr"] == pytest.approx(yhat[y == 1].mean())
    assert d["operating"]["fpr"] == pytest.approx(yhat[y == 0].mean())
    assert d["operating"]["precision"] == pytest.approx(y[yhat].mean())
    assert C.roc_pr(*ranked([1, 1, 1], [0.2, 0.5, 0.9]), 0.5) is None
    # the PR points derived from the ROC pass are sklearn's precision_recall_curve (ties and all)
    from sklearn.metrics import precision_recall_curve, roc_curve

    for yy, ss in ((y[:150], s[:150].round(1)), (np.array([0, 1, 1, 0, 1]), np.array([0.2, 0.2, 0.7, 0.7, 0.9]))):
        d = C.roc_pr(*ranked(yy, ss), 0.5)
        prec, rec, thr = precision_recall_curve(yy, ss)
        np.testing.assert_allclose(d["pr"][1], prec, atol=1e-12)
        np.testing.assert_allclose(d["pr"][0], rec, atol=1e-12)
        np.testing.assert_allclose(d["pr"][2][:-1], thr)
        fpr, tpr, thr_roc = roc_curve(yy, ss, drop_intermediate=False)
        np.testing.assert_allclose(d["roc"][0], fpr)
        np.testing.assert_allclose(d["roc"][1], tpr)
        np.testing.assert_allclose(d["roc"][2], thr_roc)


def row_bootstrap(y, s, n_boot, rng, clusters=None) -> dict:
    """The exact reference: resample rows (or whole patients) with replacement and recompute every number from the
    resampled rows. Returns {key: replicates}, with log O/E as ``log_oe``."""
    y, s = np.asarray(y), np.asarray(s)
    if clusters is not None:
        ids, inv = np.unique(clusters, return_inverse=True)
        members = [np.flatnonzero(inv == k) for k in range(ids.size)]
    out: dict[str, list] = {}
    for _ in range(n_boot):
        if clusters is None:
            idx = rng.integers(0, y.size, y.size)
        else:
            idx = np.concatenate([members[k] for k in rng.integers(0, len(members), len(members))])
        pt = C.point_stats(y[idx], s[idx])
        pt["log_oe"] = np.log(pt["oe_ratio"]) if pt["oe_ratio"] > 0 else np.nan
        for key in C.INFLUENCE_KEYS:
            out.setdefault(key, []).append(pt[key])
    return {k: np.asarray(v, float) for k, v in out.items()}


def influence_se(y, s, clusters=None) -> dict:
    values, pos, neg, cell = ranked(y, s, return_cell=True)
    pt = C.point_from_ranked(values, pos, neg)
    var = C.variances(C.influence(values, pos, neg, pt), pt, row_cell=cell, clusters=clusters)
    return {k: np.sqrt(v) for k, v in var.items()}


@pytest.mark.parametrize("n", [150, 1500])
def test_influence_standard_errors_agree_with_the_row_bootstrap(n):
    """The intervals' standard errors are influence-function (delta-method) variances: the normal limit of the row
    bootstrap. They must match the standard deviation of the exact row bootstrap (B = 1,000) — here within 12%
    (the Monte-Carlo error of a bootstrap SD at B = 1,000 is about 2%; the rest is the delta method's small-sample
    error)."""
    rng = np.random.default_rng(11)
    s = 1 / (1 + np.exp(-rng.normal(-0.8, 1.0, n)))
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.3 + 1.3 * _logit(s))))).astype(int)  # miscalibrated: a sandwich case
    se = influence_se(y, s)
    boot = row_bootstrap(y, s, 1000, np.random.default_rng(2))
    for key in C.INFLUENCE_KEYS:
        sd = np.nanstd(boot[key], ddof=1)
        assert se[key] == pytest.approx(sd, rel=0.12), (n, key, se[key], sd)


def test_whole_patient_standard_errors_agree_with_the_whole_patient_bootstrap():
    """With repeated patients the contributions are summed per patient first: the whole-patient (cluster) bootstrap's
    normal limit. Patients with 1–7 rows sharing a patient effect on the outcome: every SE matches the whole-patient
    bootstrap, and those of calibration-in-the-large are wider than the row SEs."""
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 8, 220)
    pid = np.repeat(np.arange(sizes.size), sizes)
    u = rng.normal(0, 1.2, sizes.size)[pid]  # a patient effect on the outcome the score does not see
    s = 1 / (1 + np.exp(-rng.normal(-0.5, 1.0, pid.size)))
    y = (rng.random(pid.size) < 1 / (1 + np.exp(-(_logit(s) + u)))).astype(int)
    se_rows, se_pat = influence_se(y, s), influence_se(y, s, clusters=pid)
    boot = row_bootstrap(y, s, 1000, np.random.default_rng(5), clusters=pid)
    for key in C.INFLUENCE_KEYS:
        assert se_pat[key] == pytest.approx(np.nanstd(boot[key], ddof=1), rel=0.1), key
    # the patient effect moves outcomes, not scores: calibration-in-the-large is what it makes less certain
    for key in ("intercept", "log_oe"):
        assert se_pat[key] > 1.15 * se_rows[key], key


@pytest.mark.slow
def test_intervals_cover_the_true_values_small():
    """Coverage of the 95% intervals in the audit's table over 150 simulated audits of four groups of 300 rows,
    calibrated in the population (true intercept 0, slope 1, O/E 1; true AUROC from a million rows): each interval
    covers its true value in 0.925–0.975 of the 600 groups (a binomial 95% range around 0.95 at 600 is
    0.933–0.967). The 1,000-run study at 50–5,000 rows is ``benchmarks/bench_calibration.py`` (``coverage``)."""
    rng = np.random.default_rng(7)

    def draw(n):
        s = 1 / (1 + np.exp(-rng.normal(-1.0, 1.0, n)))
        return (rng.random(n) < s).astype(int), s

    true_auroc = C.point_stats(*draw(1_000_000))["auroc"]
    truth = {"calibration_intercept": 0.0, "calibration_slope": 1.0, "oe_ratio": 1.0}
    hits = dict.fromkeys([*truth, "auroc"], 0)
    plan = GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s", attributes=("g",)), n_boot=100, seed=1)
    for _ in range(150):
        y, s = draw(1200)
        res = run_group_audit(pd.DataFrame({"y": y, "s": s, "g": np.repeat(["A", "B", "C", "D"], 300)}), plan)
        for _, row in res.calibration.iterrows():
            for m, v in truth.items():
                hits[m] += row[f"{m}_ci_low"] <= v <= row[f"{m}_ci_high"]
        for _, row in res.discrimination[res.discrimination["metric"] == "auroc"].iterrows():
            hits["auroc"] += row["value_ci_low"] <= true_auroc <= row["value_ci_high"]
    print({m: h / 600 for m, h in hits.items()})
    for m, h in hits.items():
        assert 0.925 <= h / 600 <= 0.975, (m, h / 600)


def test_equivalence_p_by_hand():
    from scipy.stats import norm

    p = C.equivalence_p(0.05, 0.05, 1.02, 0.06, 0.2, (0.8, 1.25))
    expected = max(norm.sf((0.05 + 0.2) / 0.05), norm.cdf((0.05 - 0.2) / 0.05), norm.sf((1.02 - 0.8) / 0.06),
                   norm.cdf((1.02 - 1.25) / 0.06))
    assert p == pytest.approx(expected) and p == pytest.approx(norm.cdf(-0.15 / 0.05))
    assert C.equivalence_p(0.3, 0.01, 1.0, 0.01, 0.2, (0.8, 1.25)) > 0.5  # intercept outside the margin


# ------------------------------------------------------------------------------------------------------------------
# In the group audit

ROLES = ColumnRoles(label="y", score="s", attributes=("g", "h"))


def _table(seed, n=300, shift=0.0, slope=1.0, patients=None):
    """Calibrated scores for every group except C, whose outcomes are shifted by ``shift`` on the logit scale."""
    rng = np.random.default_rng(seed)
    g = rng.choice(["A", "B", "C"], n, p=[0.5, 0.3, 0.2])
    h = rng.choice(["X", "Y"], n)
    l = rng.normal(-1.0, 1.0, n)
    eta = np.where(g == "C", shift + slope * l, l)
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    df = pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-l)), "g": g, "h": h})
    if patients:
        df["pid"] = rng.integers(0, patients, n)
    return df


def _null_runs(n_runs, n):
    hits = 0
    for r in range(n_runs):
        res = run_group_audit(_table(1000 + r, n), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, seed=r,
                                                                  metrics=("recall",)))
        hits += bool((res.calibration["verdict"] == "differs").any())
    return hits


def test_planted_miscalibration_is_found_and_the_table_is_complete():
    res = run_group_audit(_table(3, n=2000, shift=0.8), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=200))
    cal = res.calibration.set_index(["attribute", "group"])
    assert len(cal) == 5 and cal["test_id"].notna().all()
    c = cal.loc[("g", "C")]
    assert c["verdict"] == "differs" and c["q_value"] <= ALPHA and c["calibration_intercept"] > 0.5
    assert c["oe_ratio"] > 1.2 and c["calibration_intercept_ci_low"] > 0.3
    for grp in ("A", "B"):
        assert cal.loc[("g", grp), "verdict"] != "differs"
        row = cal.loc[("g", grp)]
        assert row["calibration_intercept_ci_low"] < 0 < row["calibration_intercept_ci_high"]
    for m in CALIBRATION_MEASURES:  # every estimate inside its interval (ECE: normal interval, see METHODS §8)
        assert ((cal[f"{m}_ci_low"] <= cal[m] + 1e-12) & (cal[m] <= cal[f"{m}_ci_high"] + 1e-12)).all(), m
    assert (cal["n"] == res.groups.set_index(["attribute", "group"]).loc[cal.index, "n"]).all()
    # the calibration tests are corrected in a family of their own (the default) and are in every count
    t = res.tests
    assert (t["metric"] == "calibration").sum() == 5
    assert t.loc[t["metric"] == "calibration", "family"].eq("calibration").all()  # secondary, a family of its own
    counts, cal_counts = verdict_counts(res), verdict_counts(res, "calibration")
    assert cal_counts["tests"] == 5 and cal_counts["differs"] >= 1
    assert counts["tests"] == verdict_counts(res, "gaps")["tests"] + 5
    f = findings(res)
    assert (f["metric"] == "calibration").sum() == 5 and f["test_id"].is_unique
    assert counts["total"] == len(f)
    # curves: ROC / PR / reliability / smoothed and the operating point at the audit's threshold, per group
    cv = res.curves
    assert len(cv) == 5 * 6 and not cv.duplicated(["attribute", "group", "curve"]).any()
    assert set(cv["curve"]) == {"roc", "pr", "reliability", "smoothed", "operating_roc", "operating_pr"}
    assert all(2 <= len(x) == len(y) <= C.MAX_POINTS for x, y in zip(cv["x"], cv["y"]) if len(x) > 1)
    assert all(t == [0.5] for t in cv.loc[cv["curve"].str.startswith("operating"), "threshold"])
    rel = cv[(cv["curve"] == "reliability") & (cv["group"] == "C")].iloc[0]
    assert sum(rel["n"]) == c["n"] and all(lo <= o <= hi for lo, o, hi in zip(rel["ci_low"], rel["y"], rel["ci_high"]))
    roc = cv[(cv["curve"] == "roc") & (cv["group"] == "C")].iloc[0]
    assert roc["x"][0] == 0 and roc["x"][-1] == 1 and roc["threshold"][0] is None  # sklearn's first threshold: inf


def test_large_calibrated_groups_are_equivalent_and_a_small_one_is_inconclusive():
    res = run_group_audit(_table(4, n=16000), GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s",
                                                                              attributes=("g",)), n_boot=100))
    v = res.calibration.set_index("group")["verdict"]
    assert v["A"] == "equivalent" and v["B"] == "equivalent"
    small = run_group_audit(_table(4, n=150), GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s",
                                                                              attributes=("g",)), n_boot=100))
    assert set(small.calibration["verdict"]) == {"inconclusive"}  # not shown miscalibrated is not "calibrated"


def test_calibration_off_and_whole_patient_resampling():
    off = run_group_audit(_table(5), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, calibration=False))
    assert off.calibration.empty and off.curves.empty and not (off.tests["metric"] == "calibration").any()
    on = run_group_audit(_table(5), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, calibration_own_family=False))
    # calibration draws nothing at random: switching it on leaves every gap unchanged
    cols = ["gap", "ci_low_unadjusted", "ci_high_unadjusted", "p_value", "p_equivalence"]  # q-values change
    pd.testing.assert_frame_equal(off.records[cols], on.records[cols])
    # 5 calibration tests, and the AUROC and AUPRC pairs (g: 3 pairs, h: 1 pair) with the gaps
    assert len(on.tests) == len(off.tests) + 5 + 2 * (3 + 1)
    roles = ColumnRoles(label="y", score="s", attributes=("g",), patient_id="pid")
    res = run_group_audit(_table(6, n=600, patients=150), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=200))
    assert (res.calibration["design_effect"] >= 1).all() and res.calibration["p_value"].notna().all()
    # the flat plan's default: the calibration tests in a family of their own
    own = run_group_audit(_table(5), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, procedure="flat"))
    fam = own.tests.groupby("metric")["family_key"].agg(set)
    assert fam["calibration"] == {"audit | calibration tests"} and fam["recall"] == {"audit"}
    assert fam["auroc"] == {"audit"} and fam["auprc"] == {"audit"}  # discrimination gaps are gaps
    # the gaps' q-values are those of the gaps (rates, AUROC, AUPRC) alone: the calibration tests do not move them
    gaps = own.tests[own.tests["metric"] != "calibration"]
    np.testing.assert_allclose(gaps["q_value"], adjust(gaps["p_value"].to_numpy(float), "bh"))
    with pytest.raises(DataError, match="slope"):
        GroupAuditPlan(threshold=0.5, roles=ROLES, calibration_slope_range=(1.1, 1.3))


def test_json_round_trip_and_older_audits_load():
    res = run_group_audit(_table(7), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100))
    text = res.to_json()
    back = GroupAuditResult.from_json(text)
    for name in ("calibration", "curves", "tests"):
        pd.testing.assert_frame_equal(back.__getattribute__(name).reset_index(drop=True),
                                      getattr(res, name).reset_index(drop=True), check_dtype=False)
    assert back.plan == res.plan and back.to_json() == text
    doc = json.loads(text)
    rec = doc["calibration"][0]
    for key in ("task", "attribute", "group", "n", "calibration_intercept", "calibration_slope", "oe_ratio",
                "brier", "ece", "p_value", "q_value", "verdict"):
        assert key in rec
    assert all(f"{m}_ci_low" in rec and f"{m}_ci_high" in rec for m in CALIBRATION_MEASURES)
    # an audit stored before issue 14: no calibration table, no curves, no calibration settings in the plan
    for key in ("calibration", "curves"):
        del doc[key]
    doc["tests"] = [t for t in doc["tests"] if t["metric"] != "calibration"]
    for key in ("calibration", "calibration_intercept_margin", "calibration_slope_range", "calibration_own_family"):
        del doc["plan"][key]
    old = GroupAuditResult.from_dict(doc)
    assert old.calibration.empty and list(old.calibration.columns) == list(res.calibration.columns)
    assert old.curves.empty and verdict_counts(old, "calibration")["tests"] == 0


def test_audits_stored_with_bootstrap_intervals_say_so():
    """An audit stored before 2026-11-25 (its §8 tables carry ``n_boot_valid``: bootstrap intervals) keeps its
    numbers, and its report and warnings say the intervals are bootstrap ones, not the closed form described now."""
    from fairdesk.core.audits.groups import BOOTSTRAP_INTERVALS_WARNING
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.groups import discrimination_method_text, report_tree

    res = run_group_audit(_table(7), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100))
    assert BOOTSTRAP_INTERVALS_WARNING not in res.warnings
    doc = json.loads(res.to_json())
    for table in ("calibration", "discrimination"):
        for row in doc[table]:
            row["n_boot_valid"] = 100
    old = GroupAuditResult.from_dict(doc)
    assert old.warnings.count(BOOTSTRAP_INTERVALS_WARNING) == 1
    pd.testing.assert_frame_equal(old.calibration, res.calibration, check_dtype=False)
    again = GroupAuditResult.from_json(old.to_json())  # saved again, loaded again: said once
    assert again.warnings.count(BOOTSTRAP_INTERVALS_WARNING) == 1
    assert "bootstrap percentile" in discrimination_method_text(old.plan, True)
    assert "bootstrap percentile" not in discrimination_method_text(old.plan)
    new_text = report_tree(json.loads(res.to_json()), ReportSettings()).text()
    old_text = report_tree(doc, ReportSettings()).text()
    assert "computed in closed form" in new_text and "by an earlier fairdesk" not in new_text.lower()
    # the calibration section, the discrimination note and the warnings of the provenance section
    assert "computed in closed form" not in old_text and old_text.lower().count("by an earlier fairdesk") == 3


def test_null_rate_of_the_calibration_tests_small():
    """Perfectly calibrated scores: over 30 small fixed-seed audits (5 calibration tests and 6 recall-gap tests in
    one BH family each) few report any calibration difference (expected ≤ α of the runs; the slow test runs 200)."""
    assert _null_runs(30, 200) <= 4


def test_lr_test_size_at_small_groups():
    rng = np.random.default_rng(0)
    rej = 0
    for _ in range(600):
        s = 1 / (1 + np.exp(-rng.normal(-1.0, 1.0, 80)))
        y = (rng.random(80) < s).astype(int)
        rej += C.point_stats(y, s)["p_value"] <= ALPHA
    assert 0.025 <= rej / 600 <= 0.08


# The 200-run version of the null-rate study is benchmarks/bench_calibration.py (--runs 200; measured 0.035):
# CI runs the small fixed-seed version above.
