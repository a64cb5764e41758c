"""Bootstrap of cell counts, percentile CI, bootstrap p, Benjamini–Hochberg, and simulations of the whole audit.

Simulations use fixed seeds (so they are deterministic); tolerances are chosen from the Monte-Carlo standard error
of the quantity checked, noted beside each assertion. Those marked ``slow`` still run by default.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import GAP_RULES, GroupAuditPlan, run_group_audit
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.stats.bootstrap import (bootstrap_p_value, cluster_cell_counts, percentile_ci,
                                           stratified_cell_counts)
from fairdesk.core.stats.multiple import benjamini_hochberg

ALPHA = 0.05


# --------------------------------------------------------------------------------------------------------------
# stratified_cell_counts

def _cells(rng, n=300):
    g = rng.choice(2, n, p=[0.3, 0.7])
    y = (rng.random(n) < np.where(g == 0, 0.2, 0.4)).astype(int)
    yhat = (rng.random(n) < np.where(y == 1, 0.7, 0.2)).astype(int)
    return 4 * g + 2 * y + yhat, y


def _recall_group0(c):
    return c[..., 3] / (c[..., 2] + c[..., 3])


def test_stratified_counts_keep_every_stratum_size_and_empty_cells():
    rng = np.random.default_rng(0)
    cells, y = _cells(rng)
    out = stratified_cell_counts(cells, y, 8, 500, rng)
    assert out.shape == (500, 8) and out.dtype == np.int64
    is_pos_cell = (np.arange(8) // 2) % 2 == 1
    assert (out[:, is_pos_cell].sum(axis=1) == y.sum()).all()
    assert (out[:, ~is_pos_cell].sum(axis=1) == (1 - y).sum()).all()
    # a cell that holds no row is never drawn
    cells2 = np.where(cells == 5, 4, cells)
    out2 = stratified_cell_counts(cells2, y, 8, 200, rng)
    assert (out2[:, 5] == 0).all()
    # no strata at all -> total kept
    out3 = stratified_cell_counts(cells, np.zeros_like(cells), 8, 200, rng)
    assert (out3.sum(axis=1) == len(cells)).all() and out3[:, is_pos_cell].sum(axis=1).std() > 0


def _explicit_index_resample(cells, strata, n_cells, n_boot, rng):
    """The textbook bootstrap: draw row indices with replacement inside each stratum, then count cells."""
    out = np.zeros((n_boot, n_cells), dtype=np.int64)
    for s in np.unique(strata):
        rows = np.flatnonzero(strata == s)
        idx = rng.integers(0, rows.size, size=(n_boot, rows.size))
        picked = cells[rows][idx]
        out += np.stack([np.bincount(r, minlength=n_cells) for r in picked])
    return out


def test_stratified_counts_match_explicit_row_index_resampling():
    rng = np.random.default_rng(1)
    cells, y = _cells(rng)
    B = 4000
    fast = stratified_cell_counts(cells, y, 8, B, np.random.default_rng(2))
    slow = _explicit_index_resample(cells, y, 8, B, np.random.default_rng(3))
    # exact moments: within stratum s of size n_s, cell c has mean n_s p_c and variance n_s p_c (1 − p_c)
    obs = np.bincount(cells, minlength=8).astype(float)
    n_s = np.where((np.arange(8) // 2) % 2 == 1, y.sum(), (1 - y).sum())
    p_c = obs / n_s
    mean, var = n_s * p_c, n_s * p_c * (1 - p_c)
    for draws in (fast, slow):
        # mean of B draws: sd = sqrt(var / B); 4 sd.  variance estimate: relative sd ≈ sqrt(2 / B) = .022; 5 sd
        assert np.all(np.abs(draws.mean(axis=0) - mean) <= 4 * np.sqrt(var / B) + 1e-9)
        np.testing.assert_allclose(draws.var(axis=0, ddof=1), var, rtol=0.12)
    # a rate (recall of group 0, whose denominator varies between replicates) has the same distribution both ways
    r_fast, r_slow = _recall_group0(fast[:, :4].astype(float)), _recall_group0(slow[:, :4].astype(float))
    se = np.sqrt(r_fast.var() / B + r_slow.var() / B)
    assert abs(r_fast.mean() - r_slow.mean()) < 4 * se
    assert 0.88 < r_fast.var() / r_slow.var() < 1.13  # F-ratio of two B = 4000 variances: sd ≈ .032, 4 sd
    for q in (2.5, 50, 97.5):
        assert abs(np.percentile(r_fast, q) - np.percentile(r_slow, q)) < 0.03  # sd of r ≈ .07; quantile sd ≈ .005
    # and the joint law: covariance of two cells of one stratum is −n_s p_a p_b (multinomial)
    a, b = 0, 1  # TN and FP of group 0, both in the negative stratum
    want = -n_s[a] * p_c[a] * p_c[b]
    for draws in (fast, slow):
        got = np.cov(draws[:, a], draws[:, b])[0, 1]
        assert abs(got - want) < 0.12 * abs(want)


# --------------------------------------------------------------------------------------------------------------
# cluster_cell_counts

def test_cluster_counts_keep_each_patients_rows_together():
    # patient "a": 3 identical rows in cell 0; patient "b": 5 identical rows in cell 1; 40 one-row patients in 2/3
    cells = np.array([0] * 3 + [1] * 5 + [2, 3] * 20)
    patients = np.array(["a"] * 3 + ["b"] * 5 + [f"p{i}" for i in range(40)], dtype=object)
    B = 4000
    out = cluster_cell_counts(cells, patients, 4, B, np.random.default_rng(4))
    assert out.shape == (B, 4)
    assert (out[:, 0] % 3 == 0).all() and (out[:, 1] % 5 == 0).all()
    total = out.sum(axis=1)
    assert total.std() > 0 and len(np.unique(total)) > 5  # total rows vary with the patients drawn
    # each patient is drawn Binomial(42, 1/42) times: mean 1, variance 41/42; sd of the mean over B ≈ .016
    assert abs((out[:, 0] / 3).mean() - 1) < 0.07 and abs((out[:, 1] / 5).mean() - 1) < 0.07
    assert abs((out[:, 1] / 5).var() - 41 / 42) < 0.1
    assert abs(total.mean() - 48) < 0.5
    # the same law as drawing patient indices explicitly
    uniq, inv = np.unique(patients, return_inverse=True)
    per = np.zeros((len(uniq), 4))
    np.add.at(per, (inv, cells), 1)
    rng = np.random.default_rng(5)
    explicit = np.stack([per[rng.integers(0, len(uniq), len(uniq))].sum(axis=0) for _ in range(B)])
    for c in range(4):  # means within 4 sd of the difference; variances within 15%
        se = np.sqrt(out[:, c].var() / B + explicit[:, c].var() / B)
        assert abs(out[:, c].mean() - explicit[:, c].mean()) < 4 * se
        assert 0.85 < out[:, c].var() / explicit[:, c].var() < 1.15


def test_cluster_counts_integer_patient_ids_and_one_row_per_patient_is_row_bootstrap():
    rng = np.random.default_rng(6)
    cells, y = _cells(rng, 200)
    out = cluster_cell_counts(cells, np.arange(200), 8, 3000, rng)
    assert (out >= 0).all()
    assert abs(out.sum(axis=1).mean() - 200) < 1e-9  # one row per patient: always 200 rows
    obs = np.bincount(cells, minlength=8)
    # plain (unstratified) multinomial: variance n p (1 − p)
    np.testing.assert_allclose(out.var(axis=0), obs * (1 - obs / 200), rtol=0.15)


# --------------------------------------------------------------------------------------------------------------
# percentile CI, bootstrap p

def test_percentile_ci_by_hand():
    s = np.arange(101.0)  # 0..100: the p-th percentile (linear interpolation) is p itself
    assert percentile_ci(s) == (pytest.approx(2.5), pytest.approx(97.5))
    assert percentile_ci(s, 0.90) == (pytest.approx(5.0), pytest.approx(95.0))
    with_nan = np.concatenate([s, [np.nan] * 30])  # NaN replicates (rate not estimable) are ignored
    assert percentile_ci(with_nan) == (pytest.approx(2.5), pytest.approx(97.5))
    two = np.stack([s, -s, np.full(101, np.nan)], axis=1)
    low, high = percentile_ci(two, axis=0)
    np.testing.assert_allclose(low[:2], [2.5, -97.5])
    np.testing.assert_allclose(high[:2], [97.5, -2.5])
    assert np.isnan(low[2]) and np.isnan(high[2])
    # 10 values: positions 0.225 and 8.775 -> 1 + .225, 1 + 8.775 for 1..10
    assert percentile_ci(np.arange(1.0, 11.0)) == (pytest.approx(1.225), pytest.approx(9.775))


def test_bootstrap_p_value_by_hand():
    s = np.array([-2, -1, 0, 1, 2, 3, 4, 5, 6, 7], float)
    # B = 10; #(≤ 0) = 3, #(≥ 0) = 8 -> p = min(1, 2 · min(3 + 1, 8 + 1) / 11) = 8/11
    assert bootstrap_p_value(s) == pytest.approx(8 / 11)
    # NaNs do not count: B = 10 still
    assert bootstrap_p_value(np.append(s, [np.nan, np.nan])) == pytest.approx(8 / 11)
    # all 999 above 0: 2 · (0 + 1) / 1000
    assert bootstrap_p_value(np.linspace(0.1, 1, 999)) == pytest.approx(0.002)
    # symmetric around 0: capped at 1
    assert bootstrap_p_value(np.array([-1.0, 0, 1])) == 1.0
    # column-wise, and all-NaN -> NaN
    cols = np.stack([s, -s, np.full(10, np.nan)], axis=1)
    p = bootstrap_p_value(cols, axis=0)
    assert p[0] == pytest.approx(8 / 11) and p[1] == pytest.approx(8 / 11) and np.isnan(p[2])


# --------------------------------------------------------------------------------------------------------------
# Benjamini–Hochberg

def bh_by_hand(p):
    """Step-up: q_(i) = min_{k ≥ i} p_(k) · m / k, capped at 1; written out independently of scipy."""
    p = np.asarray(p, float)
    q = np.full(p.shape, np.nan)
    idx = [i for i in range(len(p)) if not np.isnan(p[i])]
    m = len(idx)
    order = sorted(idx, key=lambda i: p[i])
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * m / rank)
        q[i] = running
    return q


def test_bh_hand_computed_example():
    p = [0.01, 0.04, 0.03, 0.005, 0.2]
    # sorted: .005 (1) .01 (2) .03 (3) .04 (4) .2 (5); p·m/k = .025 .025 .05 .05 .2; running min from the top:
    # q = .025 .025 .05 .05 .2  -> in the input order:
    np.testing.assert_allclose(benjamini_hochberg(p), [0.025, 0.05, 0.05, 0.025, 0.2])
    np.testing.assert_allclose(bh_by_hand(p), [0.025, 0.05, 0.05, 0.025, 0.2])
    # NaN entries stay NaN and do not count as tests (m = 2 here): q = .02·2/1=.04 -> min(.04, .03·2/2=.03) = .03
    np.testing.assert_allclose(benjamini_hochberg([0.03, np.nan, 0.02]), [0.03, np.nan, 0.03])
    assert np.isnan(benjamini_hochberg([np.nan, np.nan])).all()
    np.testing.assert_allclose(benjamini_hochberg([0.7]), [0.7])


def test_bh_matches_hand_step_up_on_random_inputs():
    rng = np.random.default_rng(8)
    for _ in range(300):
        m = int(rng.integers(1, 40))
        p = np.where(rng.random(m) < 0.3, rng.random(m) ** 4, rng.random(m))
        p[rng.random(m) < 0.1] = np.nan
        p[rng.random(m) < 0.1] = 1.0
        np.testing.assert_allclose(benjamini_hochberg(p), bh_by_hand(p), equal_nan=True)


# --------------------------------------------------------------------------------------------------------------
# Simulations of the whole audit.

def _null_table(rng, n_tasks, n_rows, prevalence=0.3):
    parts = []
    for t in range(n_tasks):
        y = (rng.random(n_rows) < prevalence).astype(int)
        s = np.clip(rng.normal(0.3 + 0.35 * y, 0.2), 0, 1)
        parts.append(pd.DataFrame({"task": f"t{t:02d}", "y": y, "s": s, "two": rng.choice(["F", "M"], n_rows),
                                   "five": rng.choice(list("ABCDE"), n_rows)}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def null_audits():
    df = _null_table(np.random.default_rng(31), 60, 2000)
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("two", "five"))
    return {rule: run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, gap_rule=rule, n_boot=500, n_permutations=500,
                                                     seed=32, calibration=False))  # gap tests only
            for rule in GAP_RULES}


def _share(s: pd.Series) -> float:
    return float((s == True).mean())  # noqa: E712 (object column with None)


@pytest.mark.slow
@pytest.mark.parametrize("rule", GAP_RULES)
@pytest.mark.parametrize("attribute", ["two", "five"])
def test_no_disparity_false_positive_share_near_alpha(null_audits, rule, attribute):
    """(a) 60 tasks × 3 metrics with no planted gap: share of tests with p ≤ α before correction ≤ α + .035, and
    share of records "differs" after the audit's correction ≤ α + .035.

    Issue 9: the tested units are the pairs of groups (max, between) or group vs rest, all in ``res.tests``; the
    unadjusted share is judged there. A record shows the pair with the largest gap of its group, selected on the
    data, so its *unadjusted* p is the smallest of several (measured 0.14 for five groups) — which is why every
    pair is in the correction family and only the corrected verdict is read (old expectation on records'
    unadjusted column was the selection defect of finding 7).
    Tests of one (task, metric) are correlated, so the independent units are the 180 (task, metric) pairs:
    sd of the share ≈ sqrt(.05 · .95 / 180) = .016, and the margin is about 2 sd. (Measured and reported.)
    """
    res = null_audits[rule]
    r = res.records
    r = r[(r["attribute"] == attribute) & r["gap"].notna()]
    assert len(r) == 60 * 3 * (1 if rule == "between" else 2 if attribute == "two" else 5)
    t = res.tests[(res.tests["attribute"] == attribute) & (res.tests["metric"] != "calibration")]  # the gap tests
    n_units = 1 if attribute == "two" else (5 if rule in ("one-vs-rest", "to-overall") else 10)
    assert len(t) == 60 * 3 * n_units
    before, after = float((t["p_value"] <= ALPHA).mean()), _share(r["significant_bh"])
    print(f"FPR {rule:12s} {attribute}: {before:.3f} of tests before correction, {after:.3f} of records after")
    assert before <= ALPHA + 0.035
    assert after <= ALPHA + 0.035
    # the p-values are not degenerate: under the null they spread over (0, 1]
    p = t["p_value"].to_numpy(float)
    assert 0.3 < np.mean(p <= 0.5) < 0.7


def _planted_table(rng, n_tasks, n_per_group, gap, prevalence=0.2, base_recall=0.70, fpr=0.2,
                   patients_per_row: float | None = None):
    """Two groups; group A has recall base + gap, B has base. Specificity is the same in both.

    With ``patients_per_row`` set, rows come in patients of 1–4 rows (mean 2.5): a patient keeps its group and label,
    and half of the patients keep one prediction for all their rows (strongly correlated rows).
    """
    parts = []
    for t in range(n_tasks):
        frames = []
        for grp, rec in (("A", base_recall + gap), ("B", base_recall)):
            if patients_per_row is None:
                y = (rng.random(n_per_group) < prevalence).astype(int)
                yhat = np.where(y == 1, rng.random(n_per_group) < rec, rng.random(n_per_group) < fpr)
                pid = None
            else:
                n_pat = int(n_per_group / 2.5)
                size = rng.integers(1, 5, n_pat)
                pid = np.repeat(np.arange(n_pat), size)
                y_pat = (rng.random(n_pat) < prevalence).astype(int)
                y = y_pat[pid]
                shared = (rng.random(n_pat) < np.where(y_pat == 1, rec, fpr))[pid]
                own = rng.random(pid.size) < np.where(y == 1, rec, fpr)
                yhat = np.where((rng.random(n_pat) < 0.5)[pid], shared, own)
                pid = np.char.add(f"{grp}", pid.astype(str))
            frame = pd.DataFrame({"y": y, "s": np.where(yhat, 0.8, 0.2), "g": grp})
            if pid is not None:
                frame["pid"] = pid
            frames.append(frame)
        parts.append(pd.concat(frames).assign(task=f"t{t:02d}"))
    return pd.concat(parts, ignore_index=True)


def _found(records, task_filter, group="A"):
    r = records[(records["metric"] == "recall") & records["task"].map(task_filter)]
    a = r[r["group"] == group]
    ok = (a["significant_bh"] == True) & (a["favours"] == group) & (a["gap"] > 0)  # noqa: E712
    return a, ok


@pytest.mark.slow
def test_planted_recall_gap_is_found_in_nearly_every_run():
    """(b) 40 tasks with recall .80 vs .70 (5,000 rows per group, prevalence .2) and 40 without, in one BH family.

    Expected power: 1,000 positives per group, sd of the gap ≈ .019, so z ≈ 5.2 — essentially every run.
    """
    rng = np.random.default_rng(41)
    planted = _planted_table(rng, 40, 5000, 0.10)
    null = _planted_table(rng, 40, 5000, 0.0).assign(task=lambda d: "n" + d["task"])
    df = pd.concat([planted, null], ignore_index=True)
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("g",))
    res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=500, seed=42, metrics=("recall", "specificity")))
    a, ok = _found(res.records, lambda t: t.startswith("t"))
    print(f"power (row bootstrap): {ok.mean():.3f} of {len(a)} runs; mean gap {a['gap'].mean():.4f}, sd "
          f"{a['gap'].std():.4f}, bootstrap se {((a['ci_high'] - a['ci_low']) / 3.92).mean():.4f}")
    assert len(a) == 40 and ok.mean() >= 0.95
    assert abs(a["gap"].mean() - 0.10) < 0.01  # 40 gaps with sd ≈ .019 each: sd of mean ≈ .003
    implied_se = ((a["ci_high"] - a["ci_low"]) / 3.92).mean()  # the bootstrap's se matches the real spread
    assert 0.65 < a["gap"].std() / implied_se < 1.35
    b = res.records[(res.records["metric"] == "recall") & (res.records["group"] == "B")
                    & res.records["task"].str.startswith("t")]
    assert ((b["significant_bh"] == True) & (b["favours"] == "A")).mean() >= 0.95  # noqa: E712
    # the null tasks of the same family and the unplanted specificity gap stay near alpha
    n_a, n_ok = _found(res.records, lambda t: t.startswith("n"))
    assert _share(n_a["significant_bh"]) <= ALPHA + 0.05
    spec = res.records[res.records["metric"] == "specificity"]
    assert _share(spec["significant_bh"]) <= ALPHA + 0.05


@pytest.mark.slow
def test_planted_recall_gap_is_found_with_repeated_patients():
    """(c) as (b) with patients of 1–4 rows (mean 2.5) sharing group and label, half of them one prediction for all
    their rows; prevalence .3. The correlation costs power (sd of the gap ≈ .022 instead of .016: z ≈ 4.5)."""
    rng = np.random.default_rng(51)
    df = _planted_table(rng, 40, 5000, 0.10, prevalence=0.3, patients_per_row=2.5)
    assert df.groupby("task")["pid"].apply(lambda p: p.duplicated().any()).all()
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("g",), patient_id="pid")
    # whole-patient resampling draws a multinomial over ~4,000 patients per replicate: 300 replicates keep this quick
    res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=300, seed=52, metrics=("recall",)))
    assert set(res.provenance["bootstrap"].values()) == {"whole-patient (cluster) resampling"}
    a, ok = _found(res.records, lambda t: True)
    implied_se = ((a["ci_high"] - a["ci_low"]) / 3.92).mean()
    print(f"power (cluster bootstrap): {ok.mean():.3f} of {len(a)} runs; sd of the 40 gaps {a['gap'].std():.4f}, "
          f"bootstrap se {implied_se:.4f}")
    assert len(a) == 40 and ok.mean() >= 0.95
    # the whole-patient bootstrap measures the real run-to-run spread (sd of 40 gaps: relative sd ≈ .11; ±35%)
    assert 0.65 < a["gap"].std() / implied_se < 1.35


def _duplicated_patients_table(rng, n_tasks, n_patients, copies):
    """No disparity; every patient has ``copies`` identical rows (perfectly correlated)."""
    parts = []
    for t in range(n_tasks):
        y = (rng.random(n_patients) < 0.3).astype(int)
        s = np.clip(rng.normal(0.3 + 0.35 * y, 0.2), 0, 1)
        d = pd.DataFrame({"task": f"t{t:02d}", "pid": np.arange(n_patients), "y": y, "s": s,
                          "two": rng.choice(["F", "M"], n_patients), "five": rng.choice(list("ABCDE"), n_patients),
                          "age": rng.uniform(18, 90, n_patients)})
        parts.append(d.loc[d.index.repeat(copies)])
    return pd.concat(parts, ignore_index=True)


@pytest.mark.slow
def test_cluster_resampling_is_wider_and_keeps_alpha_where_row_resampling_is_overconfident():
    """Each patient's 5 rows are identical: the row bootstrap sees 5× the information there is.

    Cluster CIs should be about sqrt(5) ≈ 2.2 times wider; with no disparity the row bootstrap flags far more
    than alpha while whole-patient resampling stays near alpha — for the bootstrap CI rules, the between rule and
    Δ_eo (whose row-level permutation tests are replaced by a centred whole-patient bootstrap under repeats).
    """
    df = _duplicated_patients_table(np.random.default_rng(61), 40, 300, 5)
    for rule, continuous in (("max", ("age",)), ("between", ())):
        kw = dict(threshold=0.5, gap_rule=rule, n_boot=300, n_permutations=300, seed=62, bins=(2, 5), min_group_size=20,
                  calibration=False)
        out = {}
        for pid in ("pid", None):
            roles = ColumnRoles(label="y", score="s", task="task", attributes=("two", "five"),
                                continuous_attributes=continuous, patient_id=pid)
            out[pid] = run_group_audit(df, GroupAuditPlan(roles=roles, **kw))
        tests = {pid: res.tests for pid, res in out.items()}
        clus, rows = out["pid"].records, out[None].records
        pd.testing.assert_series_equal(clus["gap"], rows["gap"])  # same estimates, different uncertainty
        gaps = (clus["metric"] != "delta_eo") & clus["gap"].notna()
        ratio = ((clus["ci_high"] - clus["ci_low"]) / (rows["ci_high"] - rows["ci_low"]))[gaps]
        print(f"{rule}: CI width cluster / row: median {ratio.median():.2f}, min {ratio.min():.2f}")
        assert ratio.median() > 1.9 and ratio.min() > 1.2  # each width is itself a bootstrap estimate
        parts = [("gaps", gaps, 0.04)] + ([("delta_eo", clus["metric"] == "delta_eo", 0.06)] if continuous else [])
        for name, part, margin in parts:
            # units: 40 tasks × 3 metrics (sd ≈ .02) for the gaps, 40 tasks × 2 bin counts (sd ≈ .025) for Δ_eo.
            # Gaps: judged on the tests (every pair once; a record's displayed pair is selected, see test (a)).
            if name == "gaps":
                tc, tr = tests["pid"], tests[None]
                c = float((tc.loc[tc["metric"] != "delta_eo", "p_value"] <= ALPHA).mean())
                r = float((tr.loc[tr["metric"] != "delta_eo", "p_value"] <= ALPHA).mean())
            else:
                c, r = _share(clus.loc[part, "significant"]), _share(rows.loc[part, "significant"])
            print(f"{rule} {name}: significant with no disparity: cluster {c:.3f}, row {r:.3f}")
            assert c <= ALPHA + margin
            assert r >= 0.2  # the naive row bootstrap / row permutation is overconfident here
