"""Issue 21, items 1 and 4: the five defects a second review found outside the designs simulated before, measured
over designs drawn at random (group sizes, prevalences, AUROCs, score spreads, cluster layouts), through the
product's public ``run_group_audit``. The small fixed-seed versions are ``tests/core/test_design_space.py``; the
numbers are in docs/methods.md §1 and §8.

``python -m benchmarks.bench_design_space [--runs 400] [--part parity|auroc|clustered|calibration|cost]``
(about 20 minutes on one core at the defaults).

* ``parity``      null parity gaps with unequal prevalence between groups: design effect and size.
* ``auroc``       null AUROC pairs with 12–200 positives and AUROCs 0.6–0.999 (half near 1), shapes
                  differing between groups; power with a planted AUROC gap.
* ``clustered``   whole patients, 70% with one row and the rest with 2–30, a strong patient effect, 2–3 groups of
                  10–80 patients: per-test size of every gap test and the whole audit's false "differs"; power.
* ``calibration`` coverage of the Brier, slope and ECE intervals (calibrated and miscalibrated groups, 60–2,000
                  rows, score logits with SD 1–5).
* ``cost``        the P1 workload (5 tasks of ``bench_groups``, 20,000 rows, calibration on) timed against an older
                  checkout given by ``--baseline DIR`` (alternating processes, CPU seconds, best of 5).
"""
from __future__ import annotations

import argparse
import math
import subprocess
import sys

import numpy as np
import pandas as pd

ROLES = dict(label="y", score="s", attributes=("g",))


def audit_plan(**kw):
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(**{**ROLES, **kw.pop("roles", {})})
    return GroupAuditPlan(roles=roles, **{"n_boot": 200, "threshold": 0.5, **kw})


def unequal_prevalence_table(rng, sizes=(2000, 200), prevalences=(0.05, 0.5), parity=0.3, fpr=None):
    """Groups whose prevalences differ and whose positive prediction rate is ``parity`` in every group (the parity
    gap is 0: recall and false positive rate differ by group to make it so); with ``fpr`` given, recall 0.95 and
    that false positive rate in every group instead (a parity gap from prevalence)."""
    frames = []
    for g, (n, p) in enumerate(zip(sizes, prevalences)):
        if fpr is None:
            tpr = min(0.95, parity / p) if p > 0 else 0.0
            f = (parity - p * tpr) / (1 - p)
        else:
            tpr, f = 0.95, fpr
        y = (rng.random(n) < p).astype(int)
        flagged = rng.random(n) < np.where(y == 1, tpr, f)
        frames.append(pd.DataFrame({"y": y, "s": np.where(flagged, 0.8, 0.2), "g": f"G{g}"}))
    return pd.concat(frames, ignore_index=True)


def binormal_group(rng, auc, n1, n0, sd_pos, name):
    """n1 positives with score logit ~ N(μ, sd_pos²), n0 negatives ~ N(0, 1), μ set so that the AUROC is ``auc``."""
    from scipy.stats import norm

    mu = norm.ppf(auc) * math.sqrt(1 + sd_pos * sd_pos)
    l = np.r_[rng.normal(mu, sd_pos, n1), rng.normal(0, 1, n0)]
    return pd.DataFrame({"y": np.r_[np.ones(n1, int), np.zeros(n0, int)], "s": 1 / (1 + np.exp(-l)), "g": name})


def random_auroc_pair(rng, gap=0.0):
    """Two groups with 12–200 positives each, prevalences 0.05–0.5, positive-score SDs 0.5–2 (shapes differ), and
    one AUROC (half the draws 0.6–0.999 uniform, half 1 − 10^U(−3, −1), i.e. 0.9–0.999); group G1's AUROC lower by
    ``gap`` (on the probit scale of the binormal model it is set exactly)."""
    auc = rng.uniform(0.6, 0.999) if rng.random() < 0.5 else 1 - 10 ** rng.uniform(-3, -1)
    n1 = rng.integers(12, 201, 2)
    prev = rng.uniform(0.05, 0.5, 2)
    frames = [binormal_group(rng, max(0.55, auc - gap * g), int(n1[g]), int(n1[g] / prev[g] - n1[g]),
                             rng.uniform(0.5, 2.0), f"G{g}") for g in (0, 1)]
    return pd.concat(frames, ignore_index=True), auc


def clustered_table(rng, patients=(60, 40, 30), single=0.7, max_rows=30, patient_sd=1.5, gap=0.0):
    """Whole patients: a share ``single`` hold one row, the others 2–``max_rows`` rows (uniform); a patient effect
    N(0, ``patient_sd``²) moves outcome and score; every group alike (a null) unless ``gap`` shifts group G0's score
    logit up (a parity and AUROC-free gap)."""
    frames, first = [], 0
    for g, k in enumerate(patients):
        m = np.where(rng.random(k) < single, 1, rng.integers(2, max_rows + 1, k))
        pid = np.repeat(np.arange(first, first + k), m)
        first += k
        u = np.repeat(rng.normal(0, patient_sd, k), m)
        y = (rng.random(pid.size) < 1 / (1 + np.exp(-(-1.5 + u + rng.normal(0, 0.5, pid.size))))).astype(int)
        l = -1.2 + 2.0 * y + 0.8 * u + rng.normal(0, 1, pid.size) + (gap if g == 0 else 0.0)
        frames.append(pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-l)), "g": f"G{g}", "pid": pid}))
    return pd.concat(frames, ignore_index=True)


def calibrated_table(rng, n, mu=-1.0, sd=1.0, slope=1.0, groups=2):
    """``groups`` groups of ``n`` rows, score logit ~ N(mu, sd²), outcome logit = slope × score logit (slope 1:
    calibrated)."""
    l = rng.normal(mu, sd, n * groups)
    y = (rng.random(l.size) < 1 / (1 + np.exp(-slope * l))).astype(int)
    return pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-l)), "g": np.repeat([f"G{i}" for i in range(groups)], n)})


def true_calibration(mu, sd, slope, rows=2_000_000, seed=99):
    """Brier and binned ECE of the population, from ``rows`` draws."""
    from fairdesk.core.stats import calibration as C

    t = calibrated_table(np.random.default_rng(seed), rows, mu, sd, slope, groups=1)
    pt = C.point_stats(t["y"].to_numpy(), t["s"].to_numpy())
    return {"brier": pt["brier"], "ece": float(np.abs(pt["ece_bin_errors"]).sum()), "calibration_slope": slope}


# ----------------------------------------------------------------------------------------------------------------


def parity_study(runs, seed=0):
    from fairdesk.core.audits.groups import run_group_audit

    rng = np.random.default_rng(seed)
    deff, rej, tests = {"parity": [], "recall": [], "specificity": []}, 0, 0
    for r in range(runs):
        sizes = tuple(int(v) for v in rng.integers(100, 3000, 2))
        prev = tuple(rng.uniform(0.02, 0.5, 2))
        t = run_group_audit(unequal_prevalence_table(rng, sizes, prev, parity=rng.uniform(0.2, 0.4)),
                            audit_plan(seed=r, calibration=False)).tests
        for m in deff:
            deff[m] += t.loc[t["metric"] == m, "design_effect"].tolist()
        p = t.loc[t["metric"] == "parity", "p_value"]
        rej += int((p <= 0.05).sum())
        tests += len(p)
    return {"runs": runs, "parity size": round(rej / tests, 4),
            **{f"mean design effect {m}": round(float(np.mean(v)), 3) for m, v in deff.items()}}


def auroc_study(runs, seed=0, gap=0.0):
    from fairdesk.core.audits.groups import run_group_audit

    rng = np.random.default_rng(seed)
    out = {}
    for region in ("all", "AUROC ≥ 0.95", "< 30 positives in a group"):
        out[region] = {"auroc": [0, 0]}
    for r in range(runs):
        df, auc = random_auroc_pair(rng, gap)
        few = int(df.groupby("g")["y"].sum().min()) < 30
        t = run_group_audit(df, audit_plan(seed=r, n_boot=100, metrics=("parity",))).tests
        for m in ("auroc",):  # the groups' prevalences differ, so their AUPRCs do too: no AUPRC null here
            p = t.loc[t["metric"] == m, "p_value"].dropna()
            for region, inside in (("all", True), ("AUROC ≥ 0.95", auc >= 0.95), ("< 30 positives in a group", few)):
                if inside:
                    out[region][m][0] += int((p <= 0.05).sum())
                    out[region][m][1] += len(p)
    return {"runs": runs, "gap": gap, **{region: {m: (round(k / max(n, 1), 3), n) for m, (k, n) in v.items()}
                                          for region, v in out.items()}}


def clustered_study(runs, seed=0, gap=0.0):
    from fairdesk.core.audits.groups import run_group_audit

    rng = np.random.default_rng(seed)
    rej, cnt, audits = {}, {}, 0
    for r in range(runs):
        k = int(rng.integers(2, 4))
        patients = tuple(int(v) for v in rng.integers(10, 81, k))
        df = clustered_table(rng, patients, single=rng.uniform(0.5, 0.85), max_rows=int(rng.integers(10, 31)),
                             gap=gap)
        t = run_group_audit(df, audit_plan(seed=r, threshold=0.3, roles={"patient_id": "pid"})).tests
        t = t[t["metric"] != "calibration"]  # the scores are not calibrated by design
        for m, sub in t.groupby("metric"):
            p = sub["p_value"].dropna()
            rej[m] = rej.get(m, 0) + int((p <= 0.05).sum())
            cnt[m] = cnt.get(m, 0) + len(p)
        audits += bool((t["verdict"] == "differs").any())
    return {"runs": runs, "gap": gap, "per test": {m: (round(rej[m] / cnt[m], 3), cnt[m]) for m in rej},
            "audits with any gap 'differs'": round(audits / runs, 3)}


def calibration_study(runs, seed=0):
    from fairdesk.core.audits.groups import run_group_audit

    rng = np.random.default_rng(seed)
    designs = [(100, -1.0, 3.0, 1.0), (100, 0.0, 5.0, 1.0), (60, -3.0, 4.0, 1.0), (300, -2.0, 3.0, 1.0),
               (2000, -1.0, 1.0, 1.0), (100, -1.0, 1.0, 1.0), (500, -1.0, 1.0, 0.6), (150, -1.0, 2.0, 1.5)]
    rows = []
    for n, mu, sd, slope in designs:
        truth = true_calibration(mu, sd, slope)
        hits = dict.fromkeys(truth, 0)
        counted = dict.fromkeys(truth, 0)
        for r in range(runs):
            cal = run_group_audit(calibrated_table(rng, n, mu, sd, slope),
                                  audit_plan(seed=r, n_boot=100, metrics=("parity",))).calibration
            for m, v in truth.items():
                lo, hi = cal[f"{m}_ci_low"].to_numpy(float), cal[f"{m}_ci_high"].to_numpy(float)
                ok = np.isfinite(lo) & np.isfinite(hi)
                counted[m] += int(ok.sum())
                hits[m] += int(((lo <= v) & (v <= hi))[ok].sum())
        rows.append({"rows": n, "logit mean": mu, "logit SD": sd, "true slope": slope,
                     "true ECE": round(truth["ece"], 4),
                     **{m: round(hits[m] / max(counted[m], 1), 3) for m in truth}})
    return rows


COST_SNIPPET = """
import time, sys
sys.path.insert(0, {root!r})
from benchmarks.bench_groups import _roles, generate
from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
data = generate(5, 20_000)
run_group_audit(generate(1, 2000), GroupAuditPlan(roles=_roles(), n_boot=100, threshold=0.5))
start = time.process_time()
run_group_audit(data, GroupAuditPlan(roles=_roles(), threshold=0.5))
print(time.process_time() - start)
"""


def cost(baseline: str, repeats: int = 5, snippet: str = COST_SNIPPET) -> dict:
    """CPU seconds of the P1 workload (5 tasks of the 57-task benchmark, 20,000 rows, 4 attributes, 1,000
    replicates, calibration on; or another ``snippet`` that prints its CPU seconds) with this checkout and with
    ``baseline``, alternating processes, best of each."""
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    times = {"baseline": [], "this": []}
    for _ in range(repeats):
        for name, root in (("baseline", baseline), ("this", here)):
            env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}
            out = subprocess.run([sys.executable, "-c", snippet.format(root=root)], env=env, cwd=root,
                                 capture_output=True, text=True, check=True)
            times[name].append(float(out.stdout.strip().splitlines()[-1]))
    best = {k: min(v) for k, v in times.items()}
    return {"cpu_s_baseline": round(best["baseline"], 3), "cpu_s_this": round(best["this"], 3),
            "ratio": round(best["this"] / best["baseline"], 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_design_space", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("parity", "auroc", "clustered", "calibration", "cost", "all"), default="all")
    ap.add_argument("--baseline", help="a checkout of FairDesk before issue 21 (for --part cost)")
    args = ap.parse_args(argv)
    part = args.part
    if part in ("parity", "all"):
        print("parity, unequal prevalence:", parity_study(args.runs, args.seed))
    if part in ("auroc", "all"):
        print("AUROC pairs, null:", auroc_study(args.runs, args.seed))
        print("AUROC pairs, G1's AUROC 0.05 lower:", auroc_study(args.runs // 2, args.seed + 1, gap=0.05))
    if part in ("clustered", "all"):
        print("whole patients, null:", clustered_study(args.runs, args.seed))
        print("whole patients, G0's score logit +0.8:", clustered_study(args.runs // 2, args.seed + 1, gap=0.8))
    if part in ("calibration", "all"):
        for row in calibration_study(max(args.runs // 2, 1), args.seed):
            print("coverage:", row)
    if part == "cost" or (part == "all" and args.baseline):
        if not args.baseline:
            ap.error("--part cost needs --baseline DIR (a checkout before issue 21)")
        print("P1 workload:", cost(args.baseline))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
