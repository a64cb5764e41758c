"""Issue 9, group audit: unfloored p-values, one correction family per audit, three verdicts, one verdict per
comparison, the Δ_eo null band and the synthetic audit tables. Each finding of the issue is reproduced here.

Statistics are checked against hand computations and scipy; error rates by small fixed-seed simulations through
the public API (the full-size runs are in benchmarks/bench_group_intervals.py).
"""
import inspect
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, chi2_contingency, norm

from fairdesk.core.audits.groups import (GroupAuditPlan, correct, findings, run_group_audit, tail_p,
                                         verdict_counts)
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.reports.document import Paragraph
from fairdesk.core.reports.groups import build_group_report
from fairdesk.core.stats import gaps as G
from fairdesk.core.stats.multiple import holm
from fairdesk.core.synthetic.group_sim import simulate_audit_table

ALPHA = 0.05


# --------------------------------------------------------------------------------------------------------------
# The statistics, by hand and against scipy

def test_score_test_equals_pearson_chi_square_on_large_counts():
    # with deff = 1 the score test is Pearson's chi-square test of a 2×2 table (the ½ pseudo-count is negligible)
    x_a, n_a, x_b, n_b = 4210, 10000, 4080, 9000
    z, p = G.score_test(x_a, n_a, x_b, n_b)
    chi2, p_chi, _, _ = chi2_contingency([[x_a, n_a - x_a], [x_b, n_b - x_b]], correction=False)
    assert float(z) ** 2 == pytest.approx(chi2, rel=2e-3) and float(p) == pytest.approx(p_chi, rel=2e-2)
    # a design effect of 4 halves z
    z4, _ = G.score_test(x_a, n_a, x_b, n_b, 4.0)
    assert float(z4) == pytest.approx(float(z) / 2)


def test_agresti_caffo_and_tost_by_hand():
    c, se = G.agresti_caffo(8, 10, 3, 10)
    assert float(c) == pytest.approx(9 / 12 - 4 / 12)
    assert float(se) == pytest.approx(math.sqrt(0.75 * 0.25 / 12 + (1 / 3) * (2 / 3) / 12))
    lo, hi = G.interval(c, se, 0.95)
    assert (float(lo), float(hi)) == (pytest.approx(float(c) - 1.959964 * float(se), abs=1e-5),
                                      pytest.approx(float(c) + 1.959964 * float(se), abs=1e-5))
    # TOST: centre 0, se .02, margin .05 -> p = Φ(−2.5); p ≤ α exactly when the 90% interval is inside ±margin
    assert float(G.tost_p(0.0, 0.02, 0.05)) == pytest.approx(norm.cdf(-2.5))
    for centre in np.linspace(-0.06, 0.06, 25):
        lo90, hi90 = G.interval(centre, 0.01, 0.90)
        assert (float(G.tost_p(centre, 0.01, 0.05)) <= 0.05) == (-0.05 < float(lo90) and float(hi90) < 0.05)


def test_newcombe_comparator_matches_the_published_example():
    # Newcombe (1998) Stat Med 17:873, Table II example (a): 56/70 − 48/80, hybrid score CI 0.0524 to 0.3339
    lo, hi = G.newcombe(56, 70, 48, 80)
    assert (round(float(lo), 4), round(float(hi), 4)) == (0.0524, 0.3339)


def test_holm_by_hand():
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.005])
    # sorted .005 .01 .03 .04 (m = 4): 4·.005=.02, 3·.01=.03, 2·.03=.06, 1·.04=.04 -> running max .02 .03 .06 .06
    np.testing.assert_allclose(holm(p), [0.03, 0.06, 0.06, np.nan, 0.02], equal_nan=True)


def test_tail_p_is_not_floored_and_agrees_with_the_count_where_it_can():
    rng = np.random.default_rng(0)
    null = rng.gamma(3.0, 0.01, 1000)
    assert tail_p(null, float(np.quantile(null, 0.5))) == pytest.approx(0.5, abs=0.01)
    far = tail_p(null, 0.3)  # far beyond every draw: gamma tail, far below 1/(B+1)
    assert 0 < far < 1e-6


# --------------------------------------------------------------------------------------------------------------
# Finding 1: a gap overwhelming on its data survives the correction of a 57-task, 4-attribute audit

def test_finding1_overwhelming_gap_differs_in_a_57_task_4_attribute_audit():
    rng = np.random.default_rng(1)
    attrs = {"gender": (["M", "F"], [0.55, 0.45]), "language": (["English", "Other"], [0.83, 0.17]),
             "ethnicity": (["White", "Black", "Hispanic", "Asian", "Other"], [0.71, 0.10, 0.04, 0.03, 0.12]),
             "insurance": (["Medicare", "Private", "Medicaid", "Government"], [0.58, 0.30, 0.09, 0.03])}
    frames = []
    for t in range(57):
        n = 2400 if t == 0 else 600
        a = {k: rng.choice(g, n, p=p) for k, (g, p) in attrs.items()}
        y = (rng.random(n) < (0.5 if t == 0 else 0.2)).astype(int)
        recall = np.where((t == 0) & (a["gender"] == "F"), 0.45, 0.85)  # planted recall gap 0.40
        yhat = np.where(y == 1, rng.random(n) < recall, rng.random(n) < 0.15)
        frames.append(pd.DataFrame({"task": f"t{t:02d}", "y": y, "s": np.where(yhat, 0.8, 0.2), **a}))
    df = pd.concat(frames, ignore_index=True)
    roles = ColumnRoles(label="y", score="s", task="task", attributes=tuple(attrs))
    res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles))  # default settings: B = 1,000, BH over the audit
    r = res.records.set_index(["task", "attribute", "group", "metric"]).loc[("t00", "gender", "F", "recall")]
    assert -0.46 < r["gap"] < -0.34 and r["ci_high_unadjusted"] - r["ci_low_unadjusted"] < 0.12
    # the interval printed beside "differs" is at the level its unit's test rejected at (1 − α·R_j/m_j, here with
    # one pair in its unit 95%: as wide as the unadjusted one up to the score inversion against Agresti–Caffo), and
    # it excludes 0
    tol = 0.002
    assert r["ci_low"] <= r["ci_low_unadjusted"] + tol and r["ci_high"] >= r["ci_high_unadjusted"] - tol
    assert r["ci_high"] < 0
    n_tests = verdict_counts(res)["tests"]
    assert n_tests > 1000
    # the old two-sided bootstrap p could not go below 2/1001, so BH over this family could not pass it
    assert n_tests * 2 / 1001 > ALPHA
    assert r["p_value"] < 1e-20 and r["q_value"] <= ALPHA and r["verdict"] == "differs" and r["significant_bh"]


# --------------------------------------------------------------------------------------------------------------
# Finding 7: one pair, one verdict

def _ethnicity_table(seed=7, n=2000):
    rng = np.random.default_rng(seed)
    eth = rng.choice(["White", "Black", "Hispanic", "Asian"], n, p=[0.55, 0.2, 0.15, 0.1])
    y = (rng.random(n) < 0.3).astype(int)
    spec = pd.Series(eth).map({"White": 0.85, "Black": 0.80, "Hispanic": 0.74, "Asian": 0.80}).to_numpy()
    yhat = np.where(y == 1, rng.random(n) < 0.75, rng.random(n) > spec)
    return pd.DataFrame({"y": y, "s": np.where(yhat, 0.7, 0.3), "ethnicity": eth})


def test_finding7_a_pair_shown_twice_has_mirrored_interval_and_one_verdict():
    df = _ethnicity_table()
    res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s", attributes=("ethnicity",)),
                                             calibration=False))
    rec = res.records.set_index(["group", "metric"])
    w, h = rec.loc[("White", "specificity")], rec.loc[("Hispanic", "specificity")]
    assert w["comparison"] == "Hispanic" and h["comparison"] == "White"  # the reproduction of the layout
    assert w["gap"] == pytest.approx(-h["gap"]) and w["gap"] > 0
    assert (w["ci_low"], w["ci_high"]) == (pytest.approx(-h["ci_high"]), pytest.approx(-h["ci_low"]))
    assert w["test_id"] == h["test_id"]
    for col in ("p_value", "q_value", "p_equivalence", "q_equivalence", "verdict", "significant_bh"):
        assert w[col] == h[col], col
    # every mirrored pair in the records, not just this one
    mirrored = 0
    for (group, metric), row in rec.iterrows():
        other = row["comparison"]
        if isinstance(other, str) and (other, metric) in rec.index and rec.loc[(other, metric)]["comparison"] == group:
            o = rec.loc[(other, metric)]
            assert row["gap"] == pytest.approx(-o["gap"]) and row["verdict"] == o["verdict"]
            assert row["ci_low"] == pytest.approx(-o["ci_high"]) and row["p_value"] == o["p_value"]
            mirrored += 1
    assert mirrored >= 2
    # every pair is a test of the family (6 pairs × 3 measures), each once; the display adds no selection
    assert len(res.tests) == 18 and res.tests["test_id"].is_unique
    # one count everywhere (issue 24): findings() rows = the tests, each once, pairs shown in no row included;
    # the report quotes the same numbers
    f = findings(res)
    c = verdict_counts(res)
    assert len(f) == f["test_id"].nunique() == c["total"] == c["tests"] == 18
    assert set(f["test_id"]) == set(res.tests["test_id"])
    text = build_group_report(res).text()
    assert f"Of {c['total']} comparisons made (each pair of groups counted once), {c['differs']} differ" in text
    # the sentence about the lower group quotes that group's own interval
    if w["verdict"] == "differs":
        lines = [b.text for b in build_group_report(res).section("summary").blocks
                 if isinstance(b, Paragraph) and b.style == "finding" and "= Hispanic" in b.text]
        # Hispanic: gap −0.12, CI [−0.19, −0.06] -> "0.12 lower … 95% CI 0.06 to 0.19" (White's row, mirrored,
        # says the same; before issue 9 the sentence quoted White's own, different interval)
        assert lines and f"adjusted CI {-h['ci_high']:.2f} to {-h['ci_low']:.2f}" in lines[0]
        assert f"{-w['ci_high']:.2f} to {-w['ci_low']:.2f}" == f"{h['ci_low']:.2f} to {h['ci_high']:.2f}"


def test_between_rule_shows_the_extreme_pair_of_the_pairwise_tests():
    df = _ethnicity_table()
    roles = ColumnRoles(label="y", score="s", attributes=("ethnicity",))
    between = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, gap_rule="between"))
    pairs = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, gap_rule="max"))
    assert len(between.records) == 3
    pd.testing.assert_frame_equal(between.tests, pairs.tests)  # same tests, same family, same verdicts
    spec = between.records[between.records["metric"] == "specificity"].iloc[0]
    assert (spec["group"], spec["comparison"]) == ("White", "Hispanic")
    assert spec["verdict"] == between.tests.set_index("test_id").loc[spec["test_id"], "verdict"]


# --------------------------------------------------------------------------------------------------------------
# Three verdicts

def test_equivalent_needs_precision_and_inconclusive_is_not_fair():
    rng = np.random.default_rng(3)

    def table(n):
        g = rng.choice(["A", "B"], n)
        y = (rng.random(n) < 0.5).astype(int)
        yhat = np.where(y == 1, rng.random(n) < 0.8, rng.random(n) < 0.2)  # no gap
        return pd.DataFrame({"y": y, "s": np.where(yhat, 0.9, 0.1), "g": g})

    roles = ColumnRoles(label="y", score="s", attributes=("g",))
    big = run_group_audit(table(40000), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=300, calibration=False))
    small = run_group_audit(table(120), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=300, calibration=False))
    assert set(big.records["verdict"]) == {"equivalent"}
    assert set(small.records["verdict"]) == {"inconclusive"}
    assert (big.summary["n_equivalent"] == 1).all() and (small.summary["n_inconclusive"] == 1).all()
    # a wider margin turns the small audit's verdicts no further than the data allow
    text = build_group_report(small).text()
    assert "0 differ, 0 are equivalent within ±0.05 and 3 are inconclusive" in text
    assert "not proof that the model is fair" in text and "inconclusive comparison is not evidence of fairness" in text
    # JSON carries the verdict and the tests table
    doc = json.loads(big.to_json())
    assert {r["verdict"] for r in doc["records"]} == {"equivalent"} and len(doc["tests"]) == 3


def test_family_and_correction_options():
    df, roles = simulate_audit_table(n_tasks=3, group_sizes=(300, 200, 100), seed=5)
    base = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=200, seed=1, calibration=False))
    t = base.tests
    np.testing.assert_allclose(correct(t, GroupAuditPlan(threshold=0.5, roles=roles, correction="holm"))["q_value"],
                               holm(t["p_value"].to_numpy(float)))
    per_task = correct(t, GroupAuditPlan(threshold=0.5, roles=roles, family="task"))
    assert per_task["family_key"].nunique() == 3
    narrow = correct(t, GroupAuditPlan(threshold=0.5, roles=roles, family="attribute-group-measure"))
    assert narrow["family_key"].nunique() == 9  # 3 pairs × 3 measures, across the tasks
    with pytest.raises(Exception, match="correction family"):
        GroupAuditPlan(threshold=0.5, roles=roles, family="everything")
    with pytest.raises(Exception, match="margin"):
        GroupAuditPlan(threshold=0.5, roles=roles, margin=0)


# --------------------------------------------------------------------------------------------------------------
# Finding 5: the Δ_eo interval cannot contradict its test

def test_finding5_delta_eo_null_band_agrees_with_the_test_under_the_null():
    rng = np.random.default_rng(5)
    frames = []
    for t in range(30):
        n = 800
        y = (rng.random(n) < 0.3).astype(int)
        yhat = np.where(y == 1, rng.random(n) < 0.7, rng.random(n) < 0.2)  # errors independent of age
        frames.append(pd.DataFrame({"task": f"t{t}", "y": y, "s": np.where(yhat, 0.8, 0.2),
                                    "age": rng.uniform(18, 90, n)}))
    roles = ColumnRoles(label="y", score="s", task="task", continuous_attributes=("age",))
    d = run_group_audit(pd.concat(frames), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, n_permutations=400,
                                                          bins=(2, 5))).records
    assert len(d) == 60
    # the old percentile CI of the unsigned Δ excluded 0 in every null run; the band never does
    assert (d["ci_low"] == 0).all() and (d["ci_high"] > 0).all()
    above = d["gap"] > d["ci_high"]
    assert above.mean() <= 0.15  # about α of the null runs lie above their band
    assert ((d["p_value"] <= 0.05) == above).mean() >= 0.95  # band and test agree (up to Monte-Carlo ties)
    assert not ((d["verdict"] == "differs") & ~above).any()
    assert set(d["verdict"]) <= {"differs", "inconclusive"}


# --------------------------------------------------------------------------------------------------------------
# Findings 1, 2 and 6 by simulation: sizes of the test and of the audit (small fixed-seed versions)

def _binomial_ci(k, n):
    ci = binomtest(int(k), int(n)).proportion_ci(0.95, method="wilson")
    return ci.low, ci.high


@pytest.mark.slow
@pytest.mark.parametrize("design, kw, tol", [
    ("two unequal groups, low prevalence", dict(group_sizes=(400, 100), prevalence=0.05), 0.035),
    ("max rule, five unequal groups", dict(), 0.02),
    ("whole patients", dict(group_sizes=(600, 300), prevalence=0.1, repeats_per_patient=3), 0.03),
])
def test_size_of_the_pair_test_under_complete_nulls(design, kw, tol):
    """Share of tests with p ≤ .05 over 8 complete-null audits of 10 tasks (benchmarks: 400 audits, α ± .01)."""
    k = n = 0
    for rep in range(8):
        df, roles = simulate_audit_table(n_tasks=10, seed=1000 + rep, **kw)
        t = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=200, seed=rep, calibration=False)).tests
        p = t["p_value"].dropna().to_numpy(float)
        k, n = k + int((p <= ALPHA).sum()), n + p.size
    lo, hi = _binomial_ci(k, n)
    print(f"size {design}: {k / n:.4f} of {n} tests (95% CI {lo:.4f}–{hi:.4f})")
    assert abs(k / n - ALPHA) <= tol


@pytest.mark.slow
def test_finding2_complete_null_audits_rarely_report_a_difference():
    """10 tasks × 5 unequal groups, no disparity: the default family flags about α of audits; 001's families
    (the old default) flag far more (issue: 32–37%)."""
    flagged = flagged_narrow = 0
    n_audits = 25
    for rep in range(n_audits):
        df, roles = simulate_audit_table(n_tasks=10, seed=2000 + rep)
        res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=150, seed=rep, calibration=False))
        flagged += bool((res.records["verdict"] == "differs").any())
        narrow = correct(res.tests, GroupAuditPlan(threshold=0.5, roles=roles, family="attribute-group-measure"))
        flagged_narrow += bool((narrow["verdict"] == "differs").any())
    print(f"null audits with a 'differs': {flagged}/{n_audits} (default family), {flagged_narrow}/{n_audits} (001)")
    assert flagged <= 5  # binomial(25, .05): P(≥ 6) ≈ .007
    assert flagged_narrow > flagged


def test_planted_gap_is_found_and_the_rest_stays_quiet():
    df, roles = simulate_audit_table(n_tasks=5, group_sizes=(3000, 3000), prevalence=0.3, planted_gap=-0.25,
                                     seed=9)
    res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=300))
    r = res.records
    hit = r[(r["task"] == "task00") & (r["group"] == "G1") & (r["metric"] == "recall")].iloc[0]
    assert hit["verdict"] == "differs" and hit["gap"] < -0.15 and hit["favours"] == "G2"
    others = r[(r["task"] != "task00") & (r["metric"] == "recall")]
    assert (others["verdict"] != "differs").all()


def test_simulate_audit_table_contract():
    params = inspect.signature(simulate_audit_table).parameters
    assert list(params) == ["n_tasks", "group_sizes", "prevalence", "planted_gap", "planted_metric",
                            "repeats_per_patient", "seed"]
    assert params["group_sizes"].default == (400, 200, 100, 60, 40) and params["prevalence"].default == 0.1
    df, roles = simulate_audit_table(seed=1)
    assert df["task"].nunique() == 10 and df.groupby("task").size().eq(800).all()
    assert roles.patient_id is None and roles.attributes == ("group",)
    again, _ = simulate_audit_table(seed=1)
    pd.testing.assert_frame_equal(df, again)
    rep, rroles = simulate_audit_table(n_tasks=2, group_sizes=(90, 60), repeats_per_patient=3, seed=2)
    assert rroles.patient_id == "patient" and rep.groupby(["task", "patient"]).size().eq(3).all()
    assert (rep.groupby(["task", "patient"])[["y", "s"]].nunique() == 1).all().all()


def test_finding6_small_denominator_interval_stays_around_its_estimate():
    """Issue 9 finding 6: 10/10 against 700/1000 recall. The Jeffreys-smoothed bootstrap gave gap 0.300 with
    CI [0.085, 0.324] (the estimate pressed against the upper end). The interval chosen by the coverage study
    (Agresti–Caffo) holds the estimate well inside and is wide, as 10 positives warrant."""
    a = pd.DataFrame({"g": "A", "y": [1] * 10 + [0] * 40, "s": [0.9] * 10 + [0.1] * 40})
    b = pd.DataFrame({"g": "B", "y": [1] * 1000 + [0] * 1000, "s": [0.9] * 700 + [0.1] * 300 + [0.1] * 1000})
    res = run_group_audit(pd.concat([a, b], ignore_index=True),
                          GroupAuditPlan(ColumnRoles(label="y", score="s", attributes=("g",)), threshold=0.5, n_boot=400, seed=0))
    rec = res.records[(res.records["metric"] == "recall") & (res.records["group"] == "A")].iloc[0]
    assert rec["gap"] == pytest.approx(0.3)
    lo, hi = rec["ci_low_unadjusted"], rec["ci_high_unadjusted"]  # the coverage study's interval
    position = (rec["gap"] - lo) / (hi - lo)
    assert 0.2 < position < 0.85, (lo, hi)
    assert hi - lo > 0.25
    # the interval printed beside the verdict (the score test's inversion at its level) agrees with it
    assert (rec["verdict"] == "differs") == (rec["ci_low"] > 0 or rec["ci_high"] < 0)
