"""Issue 21: the power two conservative tests of the group audit give away — the AUROC gap near AUROC 1 and the
recall gap with fewer than 10 patients among the positives (the design-space map: size 0.000 in both regions).

For each design, null and planted data sets go through the product's ``run_group_audit``; the rows are the test's
size and power at α = 0.05 and its **size-calibrated power**: the share of planted p-values below the 5% quantile of
the null p-values of the same design (the power the same statistic would have with its critical value set so that
its size is exactly α; an oracle no audit can use, the upper bound of what a better reference law could recover).
Numbers in docs/methods.md ("The map's unclear regions resolved").

``python -m benchmarks.bench_conservative_tests [--runs 300] [--part auroc|recall|all]``
"""
from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

ALPHA = 0.05


def _plan(roles, **kw):
    from fairdesk.core.audits.groups import GroupAuditPlan

    return GroupAuditPlan(roles, **{"threshold": 0.5, "n_boot": 100, "calibration": False, **kw})


def auroc_pair(rng, auc_a, auc_b, n1, n0):
    """Two groups of the binormal equal-variance model (the map's), n1 positives and n0 negatives each."""
    from scipy.special import expit, ndtri

    frames = []
    for name, auc in (("A", auc_a), ("B", auc_b)):
        d = math.sqrt(2) * ndtri(auc)
        y = np.r_[np.ones(n1, int), np.zeros(n0, int)]
        frames.append(pd.DataFrame({"y": y, "s": expit(-2 + d * y + rng.standard_normal(y.size)), "g": name}))
    return pd.concat(frames, ignore_index=True)


def recall_pair(rng, recall_a, recall_b, pos_patients=8, neg_patients=150, max_rows=30, patient_sd=1.5):
    """Two groups of whole patients with 1–``max_rows`` rows each (uniform): ``pos_patients`` positive patients and
    ``neg_patients`` negative ones per group; a positive row is flagged with probability expit(logit r + u), u a
    patient effect N(0, ``patient_sd``²) (recall about r); negatives flagged with probability 0.1."""
    from scipy.special import expit, logit

    frames, first = [], 0
    for name, r in (("A", recall_a), ("B", recall_b)):
        k = pos_patients + neg_patients
        m = rng.integers(1, max_rows + 1, k)
        pid = np.repeat(np.arange(first, first + k), m)
        first += k
        y = np.repeat((np.arange(k) < pos_patients).astype(int), m)
        u = np.repeat(rng.normal(0, patient_sd, k), m)
        flag = rng.random(pid.size) < np.where(y == 1, expit(logit(r) + u), 0.1)
        frames.append(pd.DataFrame({"y": y, "s": np.where(flag, 0.8, 0.2), "g": name, "pid": pid}))
    return pd.concat(frames, ignore_index=True)


def study(make, runs, seed, metric, roles_kw, calibration=False):
    """(size, power, size-calibrated power, tests) of ``metric``'s pair test over ``runs`` null and planted sets."""
    from fairdesk.core.audits.groups import run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="y", score="s", attributes=("g",), **roles_kw)
    p = {}
    for kind in ("null", "planted"):
        rng = np.random.default_rng([seed, kind == "planted"])
        vals = []
        for r in range(runs):
            t = run_group_audit(make(rng, kind), _plan(roles, seed=r, metrics=("parity", "recall"),
                                                        calibration=calibration)).tests
            v = t.loc[(t["metric"] == metric) & (t["kind"] == "pair"), "p_value"].dropna()
            vals += v.tolist()
        p[kind] = np.asarray(vals)
    crit = np.quantile(p["null"], ALPHA) if p["null"].size else math.nan
    return {"size": round(float((p["null"] <= ALPHA).mean()), 3),
            "power": round(float((p["planted"] <= ALPHA).mean()), 3),
            "size-calibrated power": round(float((p["planted"] <= crit).mean()), 3),
            "null p 5% quantile": float(f"{crit:.3g}"), "tests": (p["null"].size, p["planted"].size)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_conservative_tests",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("auroc", "recall", "all"), default="all")
    args = ap.parse_args(argv)
    if args.part in ("auroc", "all"):
        for n1, n0, hi, lo in ((30, 270, 0.995, 0.98), (100, 900, 0.995, 0.985)):
            res = study(lambda rng, kind, n1=n1, n0=n0, hi=hi, lo=lo:
                        auroc_pair(rng, hi, hi if kind == "null" else lo, n1, n0),
                        args.runs, args.seed, "auroc", {}, calibration=True)  # AUROC: the calibration audit
            print(f"AUROC gap, {n1} positives / {n0} negatives per group, AUROC {hi} vs {lo}:", res, flush=True)
    if args.part in ("recall", "all"):
        for pos in (5, 8):
            res = study(lambda rng, kind, pos=pos: recall_pair(rng, 0.7, 0.7 if kind == "null" else 0.25, pos),
                        args.runs, args.seed, "recall", {"patient_id": "pid"})
            print(f"recall gap, whole patients, {pos} positive patients (1–30 rows) per group, recall 0.7 vs 0.25:",
                  res, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
