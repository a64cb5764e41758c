"""Calibration by group (METHODS §8, issue 14): null rate and power of the joint test inside the audit's correction
family, the χ² test's size alone, and the cost calibration and curves add to a group audit.

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
        res = run_group_audit(table(r, n, shift), GroupAuditPlan(roles=roles, n_boot=100, seed=r, metrics=("recall",)))
        cal = res.calibration
        d = cal["verdict"] == "differs"
        any_differs += bool(d.any())
        differs += int(d.sum())
        tests += int(cal["test_id"].notna().sum())
        c_found += bool(((cal["attribute"] == "g") & (cal["group"] == "C") & d).any())
    return {"n": n, "shift": shift, "runs": runs, "any_differs": any_differs / runs,
            "per_test": differs / max(tests, 1), "c_found": c_found / runs}


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
    run_group_audit(generate(1, 2000), GroupAuditPlan(roles=_roles(), n_boot=100))  # imports, warm caches
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for on in (False, True):
            start = time.process_time()
            run_group_audit(data, GroupAuditPlan(roles=_roles(), calibration=on))
            times[on].append(time.process_time() - start)
    off, on = min(times[False]), min(times[True])
    return {"tasks": n_tasks, "cpu_s_without": off, "cpu_s_with": on, "added": on / off - 1}


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
    print(cost(args.cost_tasks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
