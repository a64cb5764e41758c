"""Calibration intervals in the design-space map's low regions (issue 21): the robust score interval of the
calibration intercept and O/E (with independent rows its t quantile takes the df of the informative rows), and the
map's exact calibration truths. Each simulation here failed on the code before the change (numbers in the
comments); the full studies are ``benchmarks/bench_calibration_regions.py``."""
from __future__ import annotations

import math

import numpy as np

from fairdesk.core.audits.groups import GroupAuditPlan, group_calibration
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.stats import calibration as C
from fairdesk.core.stats import gaps as G
from fairdesk.core.stats.discrimination import ranked, summary
from fairdesk.core.synthetic import design_space as DS

PLAN = GroupAuditPlan(ColumnRoles(label="y", score="s", attributes=("g",)), threshold=0.5)


def test_calibration_truths_are_exact_where_the_scores_are_clipped():
    """Group 4 of design 53 of the 2026-11-25 map (mode parity, AUROC 0.997): its latent scores are shifted so far
    down that 68% of the scores are clipped at 1e-6, and the clipped scores' calibration slope is 1.56, not the 1/β
    = 1 the map scored its interval against. The exact truths agree with a sample of 400,000 rows."""
    from fairdesk.core.stats.calibration import point_stats

    d = DS.Design("parity", [2212, 53, 133, 2795], [0.01264, 0.17286, 0.05035, 0.28527], 0.99731515, 0.0, 1.0,
                  0.184, 15, 0.54, mu=[0.0, -1.1161, -0.13625, -2.62558], threshold=0.0026)
    t = DS.calibration_truths(d, 3)
    assert abs(t["calibration_slope"] - 1.0 / d.beta) > 0.4
    y, latent, _ = DS._latent(d, 3, 200_000, np.random.default_rng(0), clustered=False)
    pt = point_stats(y, DS._score(d, 3, latent))
    assert abs(pt["slope"] - t["calibration_slope"]) < 4 * pt["slope_se"]
    assert abs(pt["intercept"] - t["calibration_intercept"]) < 0.02
    assert abs(pt["oe_ratio"] / t["oe_ratio"] - 1) < 0.01
    assert abs(pt["brier"] - t["brier"]) < 0.002 and abs(pt["ece"] - t["ece"]) < 0.005
    # a calibrated group without clipping: exactly 0, 1, 1, 0
    d = DS.Design("calibrated", [500], [0.2], 0.8, 0.0, 1.0, 0.2, 1, 0.0, mu=[0.0])
    t = DS.calibration_truths(d, 0)
    for m, v in (("calibration_intercept", 0.0), ("calibration_slope", 1.0), ("oe_ratio", 1.0), ("ece", 0.0)):
        assert abs(t[m] - v) < 1e-6, (m, t[m])


def _point(y, s):
    values, pos, neg, cell = ranked(np.asarray(y, float), np.asarray(s, float), return_cell=True)
    return C.point_from_ranked(values, pos, neg), cell


def test_score_intervals_by_hand():
    """O/E: ``U(r) = O − rE`` and ``V(r) = f·Σ(y − r s)²`` make the limits the roots of a quadratic; the intercept
    with a single score value s₀: ``p = expit(a + logit s₀)`` and ``(O − n p)² = q² f (O − 2Op + np²)`` is quadratic
    in p (Wilson's form with the robust variance). With patients, ``V(r) = G/(G − 1)·Σ_g (O_g − r E_g)²``."""
    rng = np.random.default_rng(3)
    s = rng.uniform(0.05, 0.6, 200)
    y = (rng.random(200) < s * 0.8).astype(float)
    pt, cell = _point(y, s)
    q, n, f = 1.96, 200, 200 / 199
    o, e, s1, s2 = y.sum(), s.sum(), (y * s).sum(), (s * s).sum()
    roots = np.sort(np.roots([e * e - q * q * f * s2, -2 * (o * e - q * q * f * s1), o * o - q * q * f * o]))
    np.testing.assert_allclose(C.score_interval(pt, "oe_ratio", q), roots, rtol=1e-6)
    # the intercept at one score value
    y0 = (rng.random(150) < 0.3).astype(float)
    pt0, _ = _point(y0, np.full(150, 0.25))
    o, n = y0.sum(), 150
    f = n / (n - 1)
    ps = np.sort(np.roots([n * n - q * q * f * n, -2 * o * n + 2 * q * q * f * o, o * o - q * q * f * o]))
    lo, hi = C.score_interval(pt0, "intercept", q)
    logit = np.log(ps / (1 - ps)) - math.log(0.25 / 0.75)
    np.testing.assert_allclose([lo, hi], logit, atol=1e-6)
    # whole patients: the per-patient sums
    pid = np.repeat(np.arange(40), 5)
    o_g, e_g = np.bincount(pid, weights=y), np.bincount(pid, weights=s)
    f = 40 / 39
    a, b, c = (o_g * o_g).sum(), (o_g * e_g).sum(), (e_g * e_g).sum()
    o, e = y.sum(), s.sum()
    roots = np.sort(np.roots([e * e - q * q * f * c, -2 * (o * e - q * q * f * b), o * o - q * q * f * a]))
    np.testing.assert_allclose(C.score_interval(pt, "oe_ratio", q, row_cell=cell, clusters=pid), roots, rtol=1e-6)
    # the estimate lies inside, and the score interval of a group without an estimate is NaN
    assert lo < pt0["intercept"] < hi
    assert all(math.isnan(v) for v in C.score_interval({"cells": None, "intercept": math.nan}, "intercept", q))


def test_informative_df_counts_the_rows_that_carry_information():
    """ν ≈ 2 × the expected cases when they are rare; near separation far below the rows."""
    rng = np.random.default_rng(0)
    s = np.full(5000, 0.004)
    pt, _ = _point((rng.random(5000) < 0.004).astype(float), s)
    assert 0.8 * 2 * pt["n_positive"] < C.informative_df(pt) < 1.2 * 2 * pt["n_positive"]
    d = DS.Design("calibrated", [400], [0.05], 0.998, 0.0, 1.0, 0.2, 1, 0.0, mu=[0.0])
    y, latent, _ = DS._latent(d, 0, 400, rng, False)
    pt, _ = _point(y, DS._score(d, 0, latent))
    assert C.informative_df(pt) < 40


def _coverage(prev, auroc, n, alpha, beta, reps, seed):
    """Coverage of the audit's intercept and O/E intervals (``group_calibration``) and of the former Wald
    intervals (intercept ± t·SE, O/E on the log scale; SEs from the influence variance × n/(n − 1), t with n − 1
    df) over ``reps`` groups of one design with independent rows, and the median width ratio now/before."""
    d = DS.Design("calibrated", [n], [prev], auroc, alpha, beta, 0.2, 1, 0.0, mu=[0.0])
    t = DS.calibration_truths(d, 0)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        y, latent, _ = DS._latent(d, 0, n, rng, False)
        values, pos, neg, cell = ranked(y.astype(float), DS._score(d, 0, latent), return_cell=True)
        g = group_calibration(values, pos, neg, cell, summary(pos, neg), None, PLAN, rng)
        if g["too_few"] or g["row"]["calibration_intercept_ci_low"] is None:
            continue
        pt, row, var = g["point"], g["row"], g["var"]
        q = float(G.quantile(0.95, n - 1))
        se_i, se_o = (math.sqrt(var[k] * n / (n - 1)) for k in ("intercept", "log_oe"))
        wald_i = (pt["intercept"] - q * se_i, pt["intercept"] + q * se_i)
        wald_o = (pt["oe_ratio"] * math.exp(-q * se_o), pt["oe_ratio"] * math.exp(q * se_o))
        now_i = (row["calibration_intercept_ci_low"], row["calibration_intercept_ci_high"])
        now_o = (row["oe_ratio_ci_low"], row["oe_ratio_ci_high"] or math.inf)
        ti, to = t["calibration_intercept"], t["oe_ratio"]
        out.append((wald_i[0] <= ti <= wald_i[1], now_i[0] <= ti <= now_i[1], wald_o[0] <= to <= wald_o[1],
                    now_o[0] <= to <= now_o[1], (now_i[1] - now_i[0]) / (wald_i[1] - wald_i[0])))
    return np.array(out)


def test_intercept_and_oe_intervals_cover_near_separation():
    """20 positives of 400 rows at AUROC 0.998, and 20 of 2,000 at AUROC 0.999 (miscalibrated: α −0.5, β 1.5),
    independent rows: the Wald intervals covered 0.87 (intercept) and 0.92–0.93 (O/E) — their SE is taken at the
    estimate, and near separation it is smallest when the estimate is farthest out; the score intervals with the
    informative rows' df cover at least 0.93."""
    res = np.vstack([_coverage(0.05, 0.998, 400, 0.0, 1.0, 150, 1), _coverage(0.01, 0.999, 2000, -0.5, 1.5, 150, 2)])
    assert len(res) >= 280
    wald_i, now_i, wald_o, now_o = res[:, :4].mean(axis=0)
    assert wald_i < 0.925, (wald_i, now_i, wald_o, now_o)  # the defect, reproduced
    assert now_i >= 0.93 and now_o >= 0.93, (now_i, now_o)
    assert np.median(res[:, 4]) < 1.6  # the price near separation: wider by the df of the few informative rows


def test_score_intervals_cost_nothing_away_from_separation():
    """100 positives of 1,000 rows at AUROC 0.8: coverage as before (both ≥ 0.93) and widths within 5%."""
    res = _coverage(0.1, 0.8, 1000, 0.0, 1.0, 120, 4)
    assert res[:, 1].mean() >= 0.93 and res[:, 3].mean() >= 0.93
    assert np.median(res[:, 4]) < 1.05


def test_the_map_counts_a_calibration_measure_without_interval_as_not_tested():
    """A group whose scores separate the classes has no calibration slope: the map counts its slope as not tested
    (before, it was silently left out of every region), and its other intervals as usual."""
    d = DS.Design("calibrated", [300, 300], [0.2, 0.2], 0.9999, 0.0, 1.0, 0.2, 1, 0.0, mu=[0.0, 0.0],
                  threshold=0.5)
    rows = DS.evaluate(d, 0, seed=3, n_boot=100, truth_rows=2000)
    slope = rows_of(rows, "calibration_slope")
    assert slope and all(r["kind"] == "not tested" for r in slope)
    assert all(r["kind"] == "interval" for r in rows_of(rows, "oe_ratio"))


def rows_of(rows, measure):
    return [r for r in rows if r["measure"] == measure]
