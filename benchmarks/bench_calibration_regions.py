"""Issue 21: the calibration intervals in the design-space map's low regions, on single groups drawn from the map's
own space (:func:`fairdesk.core.synthetic.design_space.draw_design`, one group of each drawn design, kept when it
falls in the region asked for), audited by the audit's own per-group path
(:func:`fairdesk.core.audits.groups.group_calibration`) and scored against exact truths
(:func:`fairdesk.core.synthetic.design_space.calibration_truths`: numerical integration over the latent score). The small fixed-seed versions are
``tests/core/test_calibration_regions.py``; the numbers are in docs/methods.md ("Calibration intervals in the map's
low regions").

``python -m benchmarks.bench_calibration_regions [--region independent-10|clustered-10|clustered-30|...]
[--groups 400] [--seed 1] [--null] [--by realized|expected]``

Per region and AUROC band (the map's split at 0.99): coverage of each calibration interval (intercept, slope, O/E,
Brier, ECE), with the misses split into "interval below the truth" / "above", and the groups the audit declared
inconclusive (no interval); with ``--null`` only calibrated groups are drawn and the joint calibration test's
rejection rate (its size) is shown too.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

#: name → (clustered, lower, upper) of the cases (independent rows) or case patients (clustered) of the smaller
#: class, and the AUROC band (lower, upper)
REGIONS = {
    "independent-10": (False, 10, 30, (0.6, 0.999)),
    "independent-30": (False, 30, 100, (0.6, 0.999)),
    "independent-100-high": (False, 100, 300, (0.99, 0.999)),
    "clustered-10": (True, 10, 30, (0.6, 0.99)),
    "clustered-30": (True, 30, 100, (0.6, 0.99)),
    "clustered-100": (True, 100, math.inf, (0.6, 0.99)),
    "clustered-10-high": (True, 10, 30, (0.99, 0.999)),
    "clustered-30-high": (True, 30, 100, (0.99, 0.999)),
    "clustered-100-high": (True, 100, math.inf, (0.99, 0.999)),
}
MEASURES = ("calibration_intercept", "calibration_slope", "oe_ratio", "brier", "ece")
def draw_group(rng, region: str, max_tries: int = 2000, null: bool = False, by: str = "realized"):
    """One group (drawn at random among the design's groups) of a design drawn from the map's space, kept when it
    falls in ``region``: (design, group index, y, score, patient ids or None). ``by``: "realized" places the group
    by the cases its sample happened to have (as the map does), "expected" by its design's expected cases (rows ×
    prevalence of the smaller class; patients of (1 + m)/2 rows on average), which the sample cannot move."""
    from fairdesk.core.stats.verified_region import case_patients
    from fairdesk.core.synthetic import design_space as DS

    clustered, lo, hi, (alo, ahi) = REGIONS[region]
    space = {"auroc": (alo, ahi), "share_clustered": 1.0 if clustered else 0.0}
    if null:  # every group calibrated: the calibration test's null
        space.update(modes=("calibrated",), share_miscalibrated=0.0)
    for _ in range(max_tries):
        d = DS.draw_design(rng, space)
        g = int(rng.integers(0, len(d.sizes)))
        y, latent, pid = DS._latent(d, g, d.sizes[g], rng, clustered=True)
        n, n1 = y.size, int(y.sum())
        if by == "expected":
            n1 = d.sizes[g] * d.prevalence[g]
            patients = n / ((1 + d.max_rows_per_patient) / 2)
        else:
            patients = np.unique(pid).size
        cases = min(n1, n - n1)
        count = case_patients("calibration", n, n1, patients) if clustered else cases
        if lo <= count < hi:
            return d, g, y.astype(float), DS._score(d, g, latent), (pid if clustered else None)
    raise RuntimeError(f"no group in region {region} after {max_tries} draws")


def audit_group(y, s, pid, seed: int = 0) -> dict:
    """The audit's calibration row of one group (:func:`fairdesk.core.audits.groups.group_calibration`)."""
    from fairdesk.core.audits.groups import GroupAuditPlan, group_calibration
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.stats.discrimination import ranked, summary

    values, pos, neg, cell = ranked(y, s, return_cell=True)
    plan = GroupAuditPlan(ColumnRoles(label="y", score="s", attributes=("g",)), threshold=0.5)
    return group_calibration(values, pos, neg, cell, summary(pos, neg), pid, plan, np.random.default_rng(seed))


def run_region(region: str, groups: int, seed: int, audit=None, null: bool = False, by: str = "realized"):
    """Every calibration interval of ``groups`` groups drawn in ``region``, scored against the truth: a table with
    one row per (group, measure) — covered, below (the whole interval below the truth), above, the estimate, the
    truth, and the group's design (AUROC, prevalence, rows, cases, case patients, miscalibrated) — and one row per
    group declared inconclusive (measure "too few cases"). ``audit``: the per-group audit (default
    :func:`audit_group`)."""
    import pandas as pd

    from fairdesk.core.stats.verified_region import case_patients
    from fairdesk.core.synthetic import design_space as DS

    audit = audit or audit_group
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(groups):
        d, k, y, s, pid = draw_group(rng, region, null=null, by=by)
        n, n1 = y.size, int(y.sum())
        base = {"group": i, "auroc": d.auroc, "prevalence": d.prevalence[k], "mode": d.mode, "n": n, "cases": min(n1, n - n1),
                "case_patients": (case_patients("calibration", n, n1, np.unique(pid).size) if pid is not None
                                  else math.nan), "miscalibrated": d.alpha != 0 or d.beta != 1,
                "max_rows": d.max_rows_per_patient}
        g = audit(y, s, pid, seed=i)
        if g["too_few"]:
            rows.append({**base, "measure": "too few cases"})
            continue
        t = DS.calibration_truths(d, k)
        if g["test"] is not None and null:
            rows.append({**base, "measure": "calibration test", "rejected": g["test"][0] <= 0.05})
        for m in MEASURES:
            lo, hi = g["row"][f"{m}_ci_low"], g["row"][f"{m}_ci_high"]
            if lo is None and hi is None:
                continue
            # one side without a finite limit (an O/E score interval can be open above): as the map counts it
            lo, hi = -math.inf if lo is None else lo, math.inf if hi is None else hi
            rows.append({**base, "measure": m, "covered": lo <= t[m] <= hi, "below": hi < t[m], "above": lo > t[m],
                         "estimate": g["row"][m], "truth": t[m], "low": lo, "high": hi})
    return pd.DataFrame.from_records(rows)


def summarise(region: str, tab) -> None:
    """Coverage by measure and AUROC band (the map's split at 0.99)."""
    few = int((tab["measure"] == "too few cases").sum())
    tab = tab[tab["measure"] != "too few cases"]
    for high, part in tab.groupby(tab["auroc"] >= 0.99):
        r = part[part["measure"] == "calibration test"]
        if len(r):
            print(f"{region:<20} {'≥' if high else '<'}0.99 {'test size':<22} {r['rejected'].mean():6.3f} {len(r):5d}",
                  flush=True)
        for m in MEASURES:
            r = part[part["measure"] == m]
            if len(r):
                print(f"{region:<20} {'≥' if high else '<'}0.99 {m:<22} {r['covered'].mean():6.3f} {len(r):5d} "
                      f"{r['below'].mean():6.3f} {r['above'].mean():6.3f}", flush=True)
    print(f"{region:<20} inconclusive (too few cases): {few}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--region", choices=tuple(REGIONS), action="append")
    ap.add_argument("--groups", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", help="write every scored interval to this CSV")
    ap.add_argument("--null", action="store_true", help="calibrated groups only: also the calibration test's size")
    ap.add_argument("--by", choices=("realized", "expected"), default="realized",
                    help="place a group by its sample's cases (as the map does) or by its design's expected cases")
    args = ap.parse_args(argv)
    print(f"{'region':<20} {'AUROC':<6} {'measure':<22} {'cover':>6} {'n':>5} {'below':>6} {'above':>6}")
    tabs = []
    for region in args.region or ("independent-10", "clustered-10", "clustered-30"):
        tab = run_region(region, args.groups, args.seed, null=args.null, by=args.by)
        summarise(region, tab)
        tabs.append(tab.assign(region=region))
    if args.csv:
        import pandas as pd

        pd.concat(tabs).to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
