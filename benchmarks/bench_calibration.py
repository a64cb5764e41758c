"""Calibration and discrimination by group (METHODS §8, issue 14): null rate and power of the joint calibration test
inside its correction family, the χ² test's size alone, the AUROC / AUPRC pair tests' size and power, the whole
audit's null rate with them, the coverage of the calibration and discrimination intervals (with the row bootstrap's
percentile intervals as a reference at small n), and the cost calibration, discrimination and curves add to a group
audit.

``python -m benchmarks.bench_calibration [--runs 200] [--cost-tasks 5]`` (about 3 minutes at the defaults on one
core). The designs are those of ``tests/core/test_calibration.py``: calibrated scores (logit ~ N(−1, 1)); group C's
outcomes shifted on the logit scale for power; 100 bootstrap replicates, BH over the whole audit (calibration tests
and recall-gap tests together), an attribute of 3 groups (shares 0.5/0.3/0.2) and one of 2 groups.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd


def table(seed: int, n: int = 300, shift: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice(["A", "B", "C"], n, p=[0.5, 0.3, 0.2])
    h = rng.choice(["X", "Y"], n)
    l = rng.normal(-1.0, 1.0, n)
    eta = np.where(g == "C", shift + l, l)
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-l)), "g": g, "h": h})


def family_rates(runs: int, n: int, shift: float) -> dict:
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="y", score="s", attributes=("g", "h"))
    any_differs = c_found = differs = tests = 0
    for r in range(runs):
        res = run_group_audit(table(r, n, shift), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, seed=r, metrics=("recall",)))
        cal = res.calibration
        d = cal["verdict"] == "differs"
        any_differs += bool(d.any())
        differs += int(d.sum())
        tests += int(cal["test_id"].notna().sum())
        c_found += bool(((cal["attribute"] == "g") & (cal["group"] == "C") & d).any())
    return {"n": n, "shift": shift, "runs": runs, "any_differs": any_differs / runs,
            "per_test": differs / max(tests, 1), "c_found": c_found / runs}


def disc_table(seed: int, n: int, tasks: int = 1, noise_c: float = 1.0) -> pd.DataFrame:
    """Scores logit = −1 + 1.5·y + noise, prevalence 0.3; groups A/B/C (0.45/0.35/0.2) and X/Y; C's noise SD is
    ``noise_c`` (1: no gap anywhere). The design of ``tests/core/test_discrimination.py``."""
    rng = np.random.default_rng(seed)
    g = rng.choice(["A", "B", "C"], n, p=[0.45, 0.35, 0.2])
    h = rng.choice(["X", "Y"], n)
    frames = []
    for t in range(tasks):
        y = (rng.random(n) < 0.3).astype(int)
        l = -1 + 1.5 * y + rng.normal(0, 1, n) * np.where(g == "C", noise_c, 1.0)
        frames.append(pd.DataFrame({"task": f"t{t}", "y": y, "s": 1 / (1 + np.exp(-l)), "g": g, "h": h}))
    return pd.concat(frames, ignore_index=True)


def discrimination_rates(runs: int, n: int, noise_c: float = 1.0) -> dict:
    """Per pair test, uncorrected: share of AUROC / AUPRC pair tests with p ≤ 0.05 (size when noise_c = 1), and
    the share of runs where group C's AUROC gap is said to differ after the correction (power otherwise)."""
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="y", score="s", attributes=("g",))
    rej = {"auroc": [0, 0], "auprc": [0, 0]}
    c_found = 0
    for r in range(runs):
        res = run_group_audit(disc_table(100 + r, n, noise_c=noise_c),
                              GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, seed=r, metrics=("recall",)))
        for m in rej:
            p = res.tests.loc[res.tests["metric"] == m, "p_value"]
            rej[m][0] += int((p <= 0.05).sum())
            rej[m][1] += len(p)
        d = res.discrimination
        c_found += bool(((d["metric"] == "auroc") & (d["verdict"] == "differs")
                         & ((d["group"] == "C") | (d["comparison"] == "C"))).any())
    return {"n": n, "noise_c": noise_c, "runs": runs, "auroc_per_test": rej["auroc"][0] / max(rej["auroc"][1], 1),
            "auprc_per_test": rej["auprc"][0] / max(rej["auprc"][1], 1), "c_auroc_differs": c_found / runs}


def audit_null_rate(runs: int, n: int = 600, tasks: int = 3) -> dict:
    """Whole audits with nothing planted (3 tasks × 2 attributes; recall, parity, specificity, AUROC and AUPRC
    gaps in one BH family): share of audits with any gap said to differ, and with any calibration "differs"."""
    from fairdesk.core.audits.groups import GroupAuditPlan, findings, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="y", score="s", task="task", attributes=("g", "h"))
    gaps = cal = 0
    for r in range(runs):
        f = findings(run_group_audit(disc_table(500 + r, n, tasks), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100,
                                                                                   seed=r)))
        d = f["verdict"] == "differs"
        gaps += bool((d & (f["metric"] != "calibration")).any())
        cal += bool((d & (f["metric"] == "calibration")).any())
    # the scores of this design are not calibrated probabilities (they come from the label), so calibration
    # "differs" everywhere: the gaps' rate shows that those findings do not loosen the gaps' correction
    return {"runs": runs, "n": n, "tasks": tasks, "any_gap_differs": gaps / runs,
            "any_calibration_differs (miscalibrated by design)": cal / runs}


COVERED = ("calibration_intercept", "calibration_slope", "oe_ratio", "auroc", "auprc")


def coverage(n: int, runs: int, boot: int = 0, seed: int = 0) -> dict:
    """Share of 95% intervals that cover the true value, per measure, over ``runs`` audits of two calibrated groups
    of ``n`` rows each (score logit ~ N(−1, 1), outcome ~ Bernoulli(score): true intercept 0, slope 1, O/E 1; true
    AUROC and AUPRC from a million rows). With ``boot`` > 0 also the percentile interval of the exact row bootstrap
    with that many replicates (rows resampled, every number recomputed) on the same groups: the method the closed
    form replaced, as a reference."""
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.stats import calibration as C

    rng = np.random.default_rng(seed + n)

    def draw(k):
        s = 1 / (1 + np.exp(-rng.normal(-1.0, 1.0, k)))
        return (rng.random(k) < s).astype(int), s

    big = C.point_stats(*draw(1_000_000))
    truth = {"calibration_intercept": 0.0, "calibration_slope": 1.0, "oe_ratio": 1.0, "auroc": big["auroc"],
             "auprc": big["auprc"]}
    key = {"calibration_intercept": "intercept", "calibration_slope": "slope", "oe_ratio": "oe_ratio",
           "auroc": "auroc", "auprc": "auprc"}
    plan = GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s", attributes=("g",)), n_boot=100, seed=1,
                          min_group_size=1, min_denominator=1)
    hits, boot_hits, counted = dict.fromkeys(COVERED, 0), dict.fromkeys(COVERED, 0), dict.fromkeys(COVERED, 0)
    for _ in range(runs):
        y, s = draw(2 * n)
        res = run_group_audit(pd.DataFrame({"y": y, "s": s, "g": np.repeat(["A", "B"], n)}), plan)
        cal = res.calibration.set_index("group")
        disc = res.discrimination.set_index(["group", "metric"])
        for g, rows in (("A", slice(0, n)), ("B", slice(n, 2 * n))):
            ci = {m: (cal.loc[g, f"{m}_ci_low"], cal.loc[g, f"{m}_ci_high"]) for m in COVERED[:3]}
            ci.update({m: (disc.loc[(g, m), "value_ci_low"], disc.loc[(g, m), "value_ci_high"]) for m in COVERED[3:]})
            reps = None
            if boot:
                yg, sg = y[rows], s[rows]
                reps = {m: [] for m in COVERED}
                for _ in range(boot):
                    idx = rng.integers(0, n, n)
                    pt = C.point_stats(yg[idx], sg[idx])
                    for m in COVERED:
                        reps[m].append(pt[key[m]])
            for m in COVERED:
                lo, hi = ci[m]
                if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
                    continue  # no interval (e.g. no slope): not counted
                counted[m] += 1
                hits[m] += lo <= truth[m] <= hi
                if reps is not None:
                    blo, bhi = np.nanpercentile(reps[m], [2.5, 97.5])
                    boot_hits[m] += blo <= truth[m] <= bhi
    out = {"n": n, "runs": runs, "intervals": counted,
           "closed form": {m: round(hits[m] / max(counted[m], 1), 3) for m in COVERED}}
    if boot:
        out[f"row bootstrap (B = {boot}) percentile"] = {m: round(boot_hits[m] / max(counted[m], 1), 3)
                                                         for m in COVERED}
    return out


def lr_size(n: int, draws: int = 2000, seed: int = 0) -> float:
    from fairdesk.core.stats import calibration as C

    rng = np.random.default_rng(seed + n)
    rej = valid = 0
    for _ in range(draws):
        s = 1 / (1 + np.exp(-rng.normal(-1.0, 1.0, n)))
        y = (rng.random(n) < s).astype(int)
        p = C.point_stats(y, s)["p_value"]
        if np.isfinite(p):
            valid += 1
            rej += p <= 0.05
    return rej / valid


def cost(n_tasks: int, repeats: int = 3) -> dict:
    from benchmarks.bench_groups import _roles, generate
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit

    data = generate(n_tasks, 20_000)
    run_group_audit(generate(1, 2000), GroupAuditPlan(threshold=0.5, roles=_roles(), n_boot=100))  # imports, warm caches
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for on in (False, True):
            start = time.process_time()
            run_group_audit(data, GroupAuditPlan(threshold=0.5, roles=_roles(), calibration=on))
            times[on].append(time.process_time() - start)
    off, on = min(times[False]), min(times[True])
    return {"tasks": n_tasks, "cpu_s_without": round(off, 3), "cpu_s_with": round(on, 3),
            "added": round(on / off - 1, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--cost-tasks", type=int, default=5)
    args = ap.parse_args()
    for n in (30, 50, 100, 300):
        print(f"χ² LR test alone, calibrated group of {n}: size {lr_size(n):.3f}")
    print(family_rates(args.runs, 300, 0.0))
    for n, shift in ((300, 0.8), (1000, 0.8), (1000, 0.5)):
        print(family_rates(max(args.runs // 2, 1), n, shift))
    for n in (100, 200, 600):
        print(discrimination_rates(2 * args.runs, n))
    print(discrimination_rates(args.runs, 600, noise_c=1.5))
    print(audit_null_rate(args.runs))
    for n, boot in ((50, 400), (150, 400), (600, 0), (5000, 0)):
        print(coverage(n, max(args.runs // 2, 1) if boot else 5 * args.runs, boot))
    print(cost(args.cost_tasks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
