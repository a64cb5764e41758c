"""Discrimination by group (METHODS §8, issue 14 part 2): AUROC with DeLong's variance and average precision against
sklearn and a brute-force computation, the cell bootstrap against the row bootstrap, and the AUROC / AUPRC gaps in
the group audit — planted gap found, equivalence with large groups, too few cases not tested, the correction
family, the per-test size and the whole audit's null rate (small fixed-seed versions; the full studies are in
``benchmarks/bench_calibration.py``)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import (GroupAuditPlan, GroupAuditResult, correct, findings, run_group_audit,
                                         verdict_counts)
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.stats import calibration as C
from fairdesk.core.stats import discrimination as D
from fairdesk.core.stats.multiple import adjust

ALPHA = 0.05


def _brute_delong(y, s):
    """DeLong (1988) by its definition: every positive against every negative, ties counted ½."""
    pos, neg = s[y == 1], s[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    return psi.mean(), v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size


@pytest.mark.parametrize("seed,n", [(0, 12), (1, 57), (2, 400)])
def test_auroc_delong_and_average_precision_against_sklearn_and_brute_force(seed, n):
    from sklearn.metrics import average_precision_score, roc_auc_score

    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.35).astype(int)
    y[:2] = [0, 1]
    s = np.round(rng.random(n) * (0.6 + 0.4 * y), 1)  # rounded: many ties
    auc, var = D.auroc_delong(y, s)
    auc_b, var_b = _brute_delong(y, s)
    assert auc == pytest.approx(roc_auc_score(y, s), abs=1e-12) and auc == pytest.approx(auc_b, abs=1e-12)
    assert var == pytest.approx(var_b, rel=1e-10)
    assert D.average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    # grouped counts with one interval per distinct score are the exact statistics
    _, inv = np.unique(s, return_inverse=True)
    k = inv.max() + 1
    g_auc, g_ap = D.grouped(np.bincount(inv[y == 1], minlength=k)[None], np.bincount(inv[y == 0], minlength=k)[None])
    assert g_auc[0] == pytest.approx(auc, abs=1e-12) and g_ap[0] == pytest.approx(D.average_precision(y, s), abs=1e-12)


def test_one_class_gives_no_number():
    assert all(np.isnan(D.auroc_delong([1, 1, 1], [0.2, 0.4, 0.9])))
    assert np.isnan(D.average_precision([0, 0], [0.2, 0.4]))
    auc, ap = D.grouped([[0, 0], [1, 2]], [[3, 1], [0, 0]])
    assert np.isnan(auc).all() and np.isnan(ap[0]) and ap[1] == pytest.approx(1.0)


def test_influence_variances_agree_with_the_row_bootstrap_the_jackknife_and_delong():
    """AUROC's influence variance is DeLong's (up to n/(n − 1)); average precision's, derived by hand in
    ``calibration._ap_influence``, agrees with the jackknife and with the exact row bootstrap."""
    from test_calibration import influence_se, row_bootstrap

    rng = np.random.default_rng(5)
    n = 600
    l = rng.normal(-1, 1.2, n)
    s = np.round(1 / (1 + np.exp(-l)), 3)  # ties too
    y = (rng.random(n) < s).astype(int)
    pt = C.point_stats(y, s)
    se = influence_se(y, s)
    n1, n0 = y.sum(), n - y.sum()
    delong_ddof0 = _brute_delong_ddof0(y, s)
    assert se["auroc"] ** 2 == pytest.approx(delong_ddof0, rel=1e-10)
    assert se["auroc"] ** 2 == pytest.approx(pt["auroc_var"], rel=2 * max(1 / n1, 1 / n0))
    jack = np.array([D.average_precision(np.delete(y, i), np.delete(s, i)) for i in range(n)])
    var_jack = (n - 1) / n * ((jack - jack.mean()) ** 2).sum()
    assert se["auprc"] ** 2 == pytest.approx(var_jack, rel=0.05)
    boot = row_bootstrap(y, s, 1000, np.random.default_rng(2))
    for key in ("auroc", "auprc"):
        assert se[key] == pytest.approx(np.nanstd(boot[key], ddof=1), rel=0.1), key


def _brute_delong_ddof0(y, s):
    pos, neg = s[y == 1], s[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    return psi.mean(axis=1).var() / pos.size + psi.mean(axis=0).var() / neg.size


# ------------------------------------------------------------------------------------------------------------------
# In the group audit

def _table(seed, n=2000, noise_c=1.0, prev=0.3, tasks=1, patients=None):
    """Scores logit = −1 + 1.5·y + noise; group C's noise has SD ``noise_c`` (1 = like the others: no gap)."""
    rng = np.random.default_rng(seed)
    frames = []
    g = rng.choice(["A", "B", "C"], n, p=[0.45, 0.35, 0.2])
    h = rng.choice(["X", "Y"], n)
    for t in range(tasks):
        y = (rng.random(n) < prev).astype(int)
        l = -1 + 1.5 * y + rng.normal(0, 1, n) * np.where(g == "C", noise_c, 1.0)
        frames.append(pd.DataFrame({"task": f"t{t}", "y": y, "s": 1 / (1 + np.exp(-l)), "g": g, "h": h}))
    df = pd.concat(frames, ignore_index=True)
    if patients:
        df["pid"] = np.tile(rng.integers(0, patients, n), tasks)
    return df


ROLES = ColumnRoles(label="y", score="s", attributes=("g",))


def test_planted_auroc_gap_is_found_and_the_table_is_complete():
    # the flat plan: one BH family for the gaps (the hierarchical plan's AUROC / AUPRC families: test_testing_plan.py)
    res = run_group_audit(_table(1, noise_c=2.5), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=200,
                                                                 procedure="flat"))
    d = res.discrimination.set_index(["metric", "group"])
    assert len(d) == 6 and d["test_id"].notna().all()
    c = d.loc[("auroc", "C")]
    assert c["verdict"] == "differs" and c["gap"] < -0.1 and c["ci_high"] < 0
    for m in ("auroc", "auprc"):
        sub = d.loc[m]
        assert ((sub["value_ci_low"] <= sub["value"]) & (sub["value"] <= sub["value_ci_high"])).all()
        assert (sub["gap"] == sub["value"] - sub["comparison_value"]).all()
    # a pair shown in two rows is one test: mirrored gap and interval, the same id, p, q and verdict
    a_row = d.loc[("auroc", "A")]
    assert a_row["comparison"] == "C"
    assert a_row["test_id"] == c["test_id"] or d.loc[("auroc", "B"), "test_id"] == c["test_id"]
    twin = d.loc[("auroc", "B")] if d.loc[("auroc", "B"), "test_id"] == c["test_id"] else a_row
    assert twin["gap"] == pytest.approx(-c["gap"]) and twin["ci_low"] == pytest.approx(-c["ci_high"])
    assert twin["q_value"] == c["q_value"] and twin["verdict"] == c["verdict"]
    # every pair is a test in the gaps' family (not the calibration family); findings shows each test once
    t = res.tests[res.tests["metric"].isin(["auroc", "auprc"])]
    assert len(t) == 6 and set(t["family_key"]) == {"audit"} and set(t["kind"]) == {"pair"}
    gap_tests = res.tests[res.tests["metric"] != "calibration"]
    assert np.allclose(gap_tests["q_value"], adjust(gap_tests["p_value"].to_numpy(float), "bh"), equal_nan=True)
    f = findings(res)
    # every AUROC pair test is a comparison (issue 24), the pair shown in no row (A vs B) included
    assert f["test_id"].is_unique and (f["metric"] == "auroc").sum() == 3 > len(set(d.loc["auroc", "test_id"]))
    assert set(f.loc[f["metric"] == "auroc", "test_id"]) == set(t.loc[t["metric"] == "auroc", "test_id"])
    assert verdict_counts(res, "discrimination")["tests"] == 6
    assert verdict_counts(res, "gaps")["tests"] == verdict_counts(res)["tests"] - verdict_counts(res, "calibration")[
        "tests"] - verdict_counts(res, "delta_eo")["tests"]


def test_test_matches_a_hand_computation():
    """The AUROC pair test (issue 21): a score-type z on the cube-root scale of 1 − AUROC at the pooled AUROC Ā
    (weights n₁n₀), each group's variance at least Hanley–McNeil's at Ā; the gap's interval from max(DeLong,
    Hanley–McNeil at its own AUROC)."""
    from scipy.stats import norm

    res = run_group_audit(_table(2), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=200))
    df = _table(2)
    t = res.tests.set_index("test_id")
    a, b = (df[df["g"] == k] for k in ("A", "B"))
    (va, wa), (vb, wb) = D.auroc_delong(a["y"], a["s"]), D.auroc_delong(b["y"], b["s"])
    (n1a, n0a), (n1b, n0b) = ((int(g["y"].sum()), int((1 - g["y"]).sum())) for g in (a, b))
    pooled = (va * n1a * n0a + vb * n1b * n0b) / (n1a * n0a + n1b * n0b)

    def hm(auc, n1, n0):  # Hanley & McNeil (1982), by hand
        q1, q2 = auc / (2 - auc), 2 * auc ** 2 / (1 + auc)
        return (auc * (1 - auc) + (n1 - 1) * (q1 - auc ** 2) + (n0 - 1) * (q2 - auc ** 2)) / (n1 * n0)

    v0 = max(wa, hm(pooled, n1a, n0a)) + max(wb, hm(pooled, n1b, n0b))
    # d(1 − A)^⅓/dA = −⅓(1 − A)^(−⅔), taken at Ā
    z = ((1 - vb) ** (1 / 3) - (1 - va) ** (1 / 3)) / ((1 - pooled) ** (-2 / 3) / 3 * np.sqrt(v0))
    row = t.loc["(all)|g|auroc|A|B"]
    assert row["gap"] == pytest.approx(va - vb) and row["p_value"] == pytest.approx(2 * norm.sf(abs(z)))
    se2 = max(wa, hm(va, n1a, n0a)) + max(wb, hm(vb, n1b, n0b))
    assert row["ci_high_unadjusted"] - row["ci_low_unadjusted"] == pytest.approx(2 * norm.ppf(0.975) * np.sqrt(se2))


def test_large_equal_groups_are_equivalent_and_too_few_cases_are_not_tested():
    res = run_group_audit(_table(3, n=24000), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100))
    v = res.discrimination.set_index(["metric", "group"])["verdict"]
    assert v.loc["auroc"].eq("equivalent").all()
    few = _table(4, n=400, prev=0.04)  # C: ~80 rows, ~3 positives
    res = run_group_audit(few, GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, min_group_size=20))
    c = res.discrimination.set_index(["metric", "group"]).loc[("auroc", "C")]
    assert c["verdict"] is None and c["test_id"] is None
    assert c["reason"].startswith("inconclusive: too few cases to test (only ")


def test_whole_patients_raise_the_auroc_variance_and_json_round_trip():
    res = run_group_audit(_table(6, n=900, patients=150), GroupAuditPlan(threshold=0.5, 
        roles=ColumnRoles(label="y", score="s", attributes=("g",), patient_id="pid"), n_boot=200))
    t = res.tests[res.tests["metric"] == "auroc"]
    assert (t["design_effect"] >= 1).all()
    text = res.to_json()
    doc = json.loads(text)
    rec = doc["discrimination"][0]
    for key in ("task", "attribute", "group", "metric", "n", "value", "value_ci_low", "value_ci_high", "gap",
                "ci_low", "ci_high", "p_value", "q_value", "verdict"):
        assert key in rec
    back = GroupAuditResult.from_json(text)
    assert back.to_json() == text
    del doc["discrimination"]  # stored before discrimination was tested
    doc["tests"] = [t for t in doc["tests"] if t["metric"] not in ("auroc", "auprc")]
    old = GroupAuditResult.from_dict(doc)
    assert old.discrimination.empty and verdict_counts(old, "discrimination")["tests"] == 0


def _size(runs: int, n: int) -> dict:
    rej = {"auroc": [0, 0], "auprc": [0, 0]}
    for r in range(runs):
        res = run_group_audit(_table(100 + r, n=n), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, seed=r,
                                                                   metrics=("recall",)))
        for m in rej:
            p = res.tests.loc[res.tests["metric"] == m, "p_value"]
            rej[m][0] += int((p <= ALPHA).sum())
            rej[m][1] += len(p)
    return {m: k / max(t, 1) for m, (k, t) in rej.items()}


def test_size_of_the_pair_tests_small():
    """No gap anywhere: the uncorrected pair tests reject about α (60 audits × 3 pairs of groups of ~40–90 rows;
    the 400-run study is in benchmarks/bench_calibration.py)."""
    rates = _size(60, 200)
    assert rates["auroc"] <= 0.10 and rates["auprc"] <= 0.10


def test_whole_audit_null_rate_with_discrimination_small():
    """Three tasks, two attributes, no gap of any kind: audits with any gap (rates, AUROC, AUPRC) said to differ
    after the correction, ≤ 4 of 30 (expected ≤ α; the 200-run version is in benchmarks/bench_calibration.py)."""
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("g", "h"))
    hits = 0
    for r in range(30):
        res = run_group_audit(_table(500 + r, n=600, tasks=3), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, seed=r))
        f = findings(res)
        hits += bool(((f["verdict"] == "differs") & (f["metric"] != "calibration")).any())
    assert hits <= 4
