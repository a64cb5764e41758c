"""Issue 21, item 3: validity over a design space — the random-design generator (its truths checked against large
samples), a tiny fixed-seed map (the full map is benchmarks/bench_validity.py --design-space), and the
verified-region check the audit and the report share."""
import json

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import GroupAuditPlan, findings, run_group_audit
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.reports.groups import OUTSIDE_MARK, build_group_report
from fairdesk.core.synthetic import design_space as DS
from fairdesk.core.stats import verified_region
from fairdesk.core.stats.verified_region import VERIFIED, outside_region


def _designs(mode, k=3, seed=11):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < k:
        d = DS.draw_design(rng)
        if d.mode == mode:
            out.append(d)
    return out


@pytest.mark.parametrize("mode", DS.SPACE["modes"])
def test_closed_form_truths_match_a_large_sample(mode):
    rng = np.random.default_rng(5)
    for d in _designs(mode):
        true = d.true_rates()
        for g in range(len(d.sizes)):
            y, L, _ = DS._latent(d, g, 200_000, rng, clustered=False)
            flag = DS._score(d, g, L) >= d.threshold
            got = {"parity": flag.mean(), "recall": flag[y == 1].mean(), "specificity": 1 - flag[y == 0].mean()}
            for m, v in got.items():
                n = len(y) if m == "parity" else (y == 1).sum() if m == "recall" else (y == 0).sum()
                se = np.sqrt(max(true[m][g] * (1 - true[m][g]), 1e-4) / n)
                assert abs(v - true[m][g]) < 5 * se + 1e-3, (mode, m, g, v, true[m][g])
        # the mode's null holds by construction
        nulls = DS.null_measures(d)
        for m in ("parity", "recall", "specificity"):
            if m in nulls:
                assert np.ptp(true[m]) < 1e-9
        assert np.ptp(d.prevalence) > 0 or len(d.sizes) < 2


def test_clustered_rows_keep_the_marginal_and_share_patients():
    d = _designs("label", 1)[0]
    d.max_rows_per_patient, d.rho = 30, 0.9
    rng = np.random.default_rng(2)
    y, L, pid = DS._latent(d, 0, 60_000, rng, clustered=True)
    assert len(np.unique(pid)) < 60_000 / 5  # patients repeat (1–30 rows, mean about 15.5)
    assert abs(L[y == 0].mean() - d.mu[0]) < 0.1 and abs(L[y == 0].std() - 1) < 0.1
    assert all(len(set(y[pid == p])) == 1 for p in np.unique(pid)[:50])  # a patient has one label


def test_tiny_map_scores_tests_and_intervals_by_region(tmp_path):
    # a narrowed space keeps CI quick (the full space: benchmarks/bench_validity.py --design-space)
    res = DS.run_design_space(designs=3, seed=4, n_boot=100, space={"groups": (2, 3), "rows_per_group": (60, 400)},
                              truth_rows=20_000)
    assert all(2 <= len(d["sizes"]) <= 3 and max(d["sizes"]) <= 400 for d in res.designs)
    kinds = set(res.rows["kind"])
    assert {"test", "interval"} <= kinds <= {"test", "interval", "not tested"}  # not tested: too few cases
    reg = res.regions()
    assert {"size", "coverage", "size_verdict", "coverage_verdict"} <= set(reg.columns) and len(reg)
    assert set(res.rows["measure"]) >= {"auroc", "calibration_slope"}
    text = DS.format_regions(res)
    assert "targets: size ≤ 0.07, coverage ≥ 0.93" in text
    json.loads(res.to_json())
    DS.plot_regions(res, tmp_path / "map.png")
    assert (tmp_path / "map.png").read_bytes()[:4] == b"\x89PNG"


def test_region_table_fails_a_region_whose_intervals_do_not_cover():
    rows = pd.DataFrame({"measure": "recall gap", "kind": "test", "null": True, "rejected": [True] * 30 + [False] * 70,
                         "covered": [False] * 30 + [True] * 70, "cases": 50, "clustered": False, "patients": 50,
                         "auroc": 0.8})
    reg = DS.region_table(rows)
    assert reg.loc[0, "size_verdict"] == "misses" and reg.loc[0, "coverage_verdict"] == "misses"
    ok = rows.assign(rejected=[True] * 3 + [False] * 97, covered=[False] * 3 + [True] * 97)
    reg = DS.region_table(ok)
    assert reg.loc[0, "size_verdict"] == "meets" and reg.loc[0, "coverage_verdict"] == "meets"


def test_outside_region_names_the_reason(monkeypatch):
    g = lambda n, pos, pat=None, auc=0.8: {"n": n, "n_positive": pos, "n_patients": pat or n, "auroc": auc}  # noqa
    rules = {"recall": {"min_cases": 30, "min_patients": 100}, "parity": {"min_cases": None, "min_patients": None},
             "auroc": {"min_cases": 100, "min_patients": 100, "max_auroc": 0.99}}
    monkeypatch.setattr(verified_region, "VERIFIED", rules)
    assert "12 cases (verified from 30)" in outside_region("recall", [g(500, 12), g(500, 100)], clustered=False)
    assert outside_region("recall", [g(2000, 400), g(1500, 300)], clustered=False) is None
    assert "about 3 patients among its cases (verified from 100)" in outside_region(
        "recall", [g(600, 100, 20), g(900, 200, 300)], True)
    # whole patients: what counts is the patients among the cases (the positives for recall), not the group's
    # patients — 529 rows of 460 patients with 10 positive rows rest on about 9 (the first maps counted 460)
    assert "about 9 patients among its cases" in outside_region("recall", [g(529, 10, 460), g(4000, 400, 3000)], True)
    assert outside_region("recall", [g(2000, 400, 1000), g(4000, 800, 3000)], True) is None
    assert "not verified" in outside_region("parity", [g(2000, 400), g(1500, 300)], clustered=False)
    assert "AUROC" in outside_region("auroc", [g(2000, 400, auc=0.995), g(2000, 400)], clustered=False)
    assert "prevalence" in outside_region("recall", [g(20000, 100), g(2000, 400)], clustered=False)
    assert set(VERIFIED) == set(DS.REGION_SOURCES)
    assert outside_region("delta_eo", [g(10, 1)], clustered=False) is None


def test_audit_flags_tests_outside_the_region_in_json_and_report(monkeypatch):
    monkeypatch.setattr(verified_region, "VERIFIED", {m: {"min_cases": 30, "min_patients": 100}
                                                      for m in ("parity", "recall", "specificity")})
    rng = np.random.default_rng(0)
    n = 1200
    grp = rng.choice(["A", "B"], n, p=[0.9, 0.1])
    y = (rng.random(n) < np.where(grp == "A", 0.3, 0.05)).astype(int)  # B: about 6 positives
    p = np.clip(rng.beta(2, 5, n) + 0.3 * y, 0.01, 0.99)
    df = pd.DataFrame({"y": y, "p": p, "g": grp})
    res = run_group_audit(df, GroupAuditPlan(ColumnRoles(label="y", score="p", attributes=("g",)), threshold=0.4,
                                             n_boot=100, min_denominator=5))
    f = findings(res)
    rec = f.set_index("metric")
    assert isinstance(rec.loc["recall", "outside_region"], str)   # about 6 positives in B
    assert rec.loc["parity", "outside_region"] is None or pd.isna(rec.loc["parity", "outside_region"])
    doc = json.loads(res.to_json())
    assert any(r["outside_region"] for r in doc["records"]) and "outside_region" in doc["tests"][0]
    report = build_group_report(res)
    text = " ".join(getattr(b, "text", "") for b in report.section("summary").blocks)
    assert OUTSIDE_MARK in text and "FairDesk's simulations verified" in text  # page 1: in words
    methods = " ".join(getattr(b, "text", "") for b in report.section("methods").blocks)
    assert OUTSIDE_MARK in methods and "Validity over a design space" in methods  # where to read more: one deeper


def test_cli_design_space_options_belong_to_design_space(tmp_path, capsys):
    from fairdesk.cli import main

    code = main(["bench", "validity", "--designs", "3", "--json", str(tmp_path / "v.json")])
    assert code == 2 and "--design-space" in capsys.readouterr().err


def test_every_interval_shown_beside_a_verdict_shapes_its_verified_region():
    """A Brier interval that under-covers with few case patients shrinks the calibration verdict's verified region
    (before: only the calibration test, intercept and slope counted, so a failing Brier or O/E region could lie
    inside the region the audit called verified); each group's AUROC interval shapes the AUROC verdict's."""
    def rows(measure, patients, covered):
        return pd.DataFrame({"measure": measure, "kind": "interval", "null": None, "rejected": None,
                             "covered": covered, "cases": 500, "clustered": True, "patients": patients,
                             "auroc": 0.8})
    good, bad = [True] * 97 + [False] * 3, [True] * 70 + [False] * 30
    reg = DS.region_table(pd.concat([rows("brier", 15, bad), rows("brier", 150, good),
                                     rows("calibration_slope", 15, good), rows("calibration_slope", 150, good),
                                     rows("auroc", 50, bad), rows("auroc", 150, good)], ignore_index=True))
    rule = DS.verified_region(reg)
    assert rule["calibration"]["min_patients"] == 100 and rule["auroc"]["min_patients"] == 100
    # the printed map checks that every failing region lies outside the verified region
    assert DS.inside("brier", "clustered, ≥100 case patients", rule)
    assert not DS.inside("brier", "clustered, 10–29 case patients", rule)
    assert not DS.inside("auroc", "clustered, ≥100 case patients; AUROC ≥ 0.99", {"auroc": {**rule["auroc"],
                                                                                          "max_auroc": 0.99}})


def test_clustered_calibration_near_separation_is_outside_the_verified_region(monkeypatch):
    """Calibration with repeated patients at AUROC ≥ 0.99 is outside the region whatever the patients (the slope
    interval covered 0.90–0.95 there even with the whole-patient bootstrap floor); independent rows keep theirs."""
    g = lambda auc: {"n": 4000, "n_positive": 1200, "n_patients": 1000, "auroc": auc}  # noqa: E731
    monkeypatch.setattr(verified_region, "VERIFIED", {"calibration": {**VERIFIED["calibration"], "min_patients": 30}})
    assert "AUROC 0.995 (verified below 0.99)" in outside_region("calibration", [g(0.995)], clustered=True)
    assert outside_region("calibration", [g(0.95)], clustered=True) is None
    assert outside_region("calibration", [g(0.995)], clustered=False) is None
    rules = {"calibration": {**VERIFIED["calibration"], "min_patients": 30}}
    assert not DS.inside("calibration_slope", "clustered, ≥100 case patients; AUROC ≥ 0.99", rules)
    assert DS.inside("calibration_slope", "clustered, ≥100 case patients; AUROC < 0.99", rules)
    assert DS.inside("calibration_slope", "independent, ≥300 cases; AUROC ≥ 0.99", rules)
