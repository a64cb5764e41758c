"""Issue 21: calibration with repeated patients, the design-space map's failing clustered slope / intercept regions,
and the calibration LR test's size at few cases. The small fixed-seed versions are
``tests/core/test_cluster_calibration.py``; the numbers are in docs/methods.md ("Validity over a design space").

``python -m benchmarks.bench_cluster_calibration [--reps 300] [--part slope|boot|lr]``

* ``slope`` single clustered groups (the map's ``_latent``: patients with 1 to m rows sharing their label and a
  patient effect): the Monte-Carlo SD of the calibration slope against its whole-patient SE — CR1 (the plain
  sandwich × G/(G − 1)) and CR2 (:func:`fairdesk.core.stats.calibration.cr2_covariance`) — and the coverage of
  the 95% interval with each, the t reference taking its df from all the group's patients or from the patients of
  the smaller class (:func:`fairdesk.core.stats.gaps.cluster_df` of their rows), or G_small − 1.
* ``boot``  near separation (AUROC 0.99–0.999): the slope's SD against its CR2 SE and its whole-patient bootstrap
  SE (:func:`fairdesk.core.stats.calibration.slope_bootstrap_variance`), coverage with CR2 and with the larger.
* ``lr``    size of the calibration LR test (calibrated groups): with independent rows the χ² reference against
  F(2, cases − 2) at 15–200 cases of the smaller class; with repeated patients, through ``run_group_audit``,
  χ² / deff (the former test) against the Rao–Scott F reference the audit now uses.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from fairdesk.core.stats import calibration as C
from fairdesk.core.stats import gaps as G
from fairdesk.core.stats.discrimination import ranked
from fairdesk.core.synthetic import design_space as DS

SLOPE_DESIGNS = (  # name, prevalence, AUROC, max rows per patient, ICC, rows, score slope factor β
    ("14 case patients, AUROC 0.8", 0.25, 0.8, 17, 0.6, 497, 1.0),
    ("14 case patients, AUROC 0.95", 0.25, 0.95, 17, 0.6, 497, 1.0),
    ("11 case patients, 2,000 rows", 0.03, 0.8, 10, 0.6, 2000, 1.0),
    ("16 case patients, β 0.6", 0.25, 0.8, 30, 0.8, 1000, 0.6),
    ("50 case patients", 0.1, 0.9, 5, 0.5, 1500, 1.0),
    ("13 case patients, β 1.6", 0.4, 0.8, 25, 0.9, 400, 1.6),
    ("59 case patients, AUROC 0.99", 0.3, 0.99, 30, 0.8, 3000, 1.0),
    ("18 case patients, AUROC 0.99, β 0.7", 0.15, 0.99, 12, 0.7, 800, 0.7),
)


def _slope_once(d, n, rng):
    y, latent, pid = DS._latent(d, 0, n, rng, True)
    values, pos, neg, cell = ranked(y, DS._score(d, 0, latent), return_cell=True)
    pt = C.point_from_ranked(values, pos, neg)
    if pt["info"] is None:
        return None
    cr1 = C.influence(values, pos, neg, pt)
    # CR1 as before the fix: the influence contributions summed per patient, × G/(G − 1)
    row = (np.cumsum(pt["cells"]["keep"]) - 1)[cell]
    k = int(pid.max()) + 1
    s = np.bincount(pid, weights=cr1["slope"][row], minlength=k)
    var1 = float(s @ s) * k / (k - 1)
    var2 = C.variances(cr1, pt, row_cell=cell, clusters=pid)["slope"]  # CR2 (the audit's)
    smaller = y if y.mean() < 0.5 else 1 - y
    case_rows = np.bincount(pid, weights=smaller, minlength=k)
    return (pt["slope"], math.sqrt(var1), math.sqrt(var2), G.cluster_df(np.bincount(pid)),
            G.cluster_df(case_rows[case_rows > 0]), float((case_rows > 0).sum()))


def part_slope(reps: int) -> None:
    print(f"calibration slope, single clustered groups, {reps} data sets each")
    print(f"{'design':<38} {'SD':>6} {'CR1':>6} {'CR2':>6} {'df all':>6} {'df sm':>6} | coverage: CR1/all "
          "CR1/small CR2/all CR2/small CR2/G_sm−1")
    for name, prev, auroc, m, rho, n, beta in SLOPE_DESIGNS:
        d = DS.Design("calibrated", [n], [prev], auroc, 0.0, beta, 0.2, m, rho, mu=[0.0])
        rng = np.random.default_rng(1)
        res = np.array([r for r in (_slope_once(d, n, rng) for _ in range(reps)) if r is not None])
        b, se1, se2, df_all, df_small, g_small = res.T
        cov = []
        for se, df in ((se1, df_all), (se1, df_small), (se2, df_all), (se2, df_small), (se2, np.maximum(g_small - 1,
                                                                                                         1))):
            cov.append(np.mean(np.abs(b - 1 / beta) <= G.quantile(0.95, df) * se))
        print(f"{name:<38} {b.std():6.3f} {np.median(se1):6.3f} {np.median(se2):6.3f} {df_all.mean():6.0f} "
              f"{df_small.mean():6.1f} | " + "  ".join(f"{c:.3f}" for c in cov), flush=True)


NEAR_SEPARATION = (  # name, prevalence, AUROC, max rows per patient, ICC, rows, β
    ("AUROC 0.998, 3,000 rows", 0.2, 0.998, 20, 0.65, 3000, 1.0),
    ("AUROC 0.99, 3,000 rows", 0.3, 0.99, 30, 0.8, 3000, 1.0),
    ("AUROC 0.995, 1,500 rows, β 0.7", 0.15, 0.995, 12, 0.7, 1500, 0.7),
    ("AUROC 0.999, prevalence 0.1, β 1.3", 0.1, 0.999, 10, 0.5, 3000, 1.3),
    ("AUROC 0.998, 1,000 rows", 0.3, 0.998, 15, 0.65, 1000, 1.0),
    ("AUROC 0.95, 497 rows", 0.25, 0.95, 17, 0.6, 497, 1.0),
)


def part_boot(reps: int) -> None:
    """Near separation: the slope's Monte-Carlo SD against its CR2 SE and its whole-patient bootstrap SE
    (:func:`fairdesk.core.stats.calibration.slope_bootstrap_variance`), and the coverage of the t interval (df of
    the smaller class's patients) with CR2 (before) and with the larger of the two (the audit's)."""
    print(f"calibration slope near separation, single clustered groups, {reps} data sets each")
    print(f"{'design':<38} {'SD':>6} {'bias':>6} {'CR2':>6} {'boot':>6} | coverage: CR2  max(CR2, boot)")
    for name, prev, auroc, m, rho, n, beta in NEAR_SEPARATION:
        d = DS.Design("calibrated", [n], [prev], auroc, 0.0, beta, 0.2, m, rho, mu=[0.0])
        rng = np.random.default_rng(1)
        out = []
        for _ in range(reps):
            y, latent, pid = DS._latent(d, 0, n, rng, True)
            values, pos, neg, cell = ranked(y, DS._score(d, 0, latent), return_cell=True)
            pt = C.point_from_ranked(values, pos, neg)
            if pt["info"] is None:
                continue
            var = C.variances(C.influence(values, pos, neg, pt), pt, row_cell=cell, clusters=pid)["slope"]
            boot = C.slope_bootstrap_variance(pt, cell, pid, rng)
            smaller = y if y.mean() < 0.5 else 1 - y
            case_rows = np.bincount(pid, weights=smaller)
            out.append((pt["slope"], math.sqrt(var), math.sqrt(boot) if math.isfinite(boot) else math.nan,
                        G.cluster_df(case_rows[case_rows > 0])))
        b, se, bse, df = np.array(out).T
        q = G.quantile(0.95, df)
        both = np.fmax(se, bse)
        print(f"{name:<38} {b.std():6.3f} {b.mean() - 1 / beta:6.3f} {np.median(se):6.3f} {np.nanmedian(bse):6.3f} | "
              f"{np.mean(np.abs(b - 1 / beta) <= q * se):.3f}  {np.mean(np.abs(b - 1 / beta) <= q * both):.3f}",
              flush=True)


def part_lr(reps: int) -> None:
    from scipy.special import chdtrc, fdtrc

    print(f"calibration LR test size, independent rows, {reps} calibrated groups each")
    for prev, auroc, n in ((0.05, 0.8, 400), (0.1, 0.95, 200), (0.02, 0.9, 1000), (0.3, 0.999, 60),
                           (0.05, 0.99, 400), (0.2, 0.7, 1000), (0.1, 0.999, 2000), (0.01, 0.95, 1500)):
        d = DS.Design("calibrated", [n], [prev], auroc, 0.0, 1.0, 0.2, 1, 0.0, mu=[0.0])
        rng = np.random.default_rng(0)
        out = []
        for _ in range(reps):
            y, latent, _ = DS._latent(d, 0, n, rng, False)
            pt = C.point_stats(y, DS._score(d, 0, latent))
            if pt["info"] is not None:
                out.append((pt["lr_stat"], min(pt["n_positive"], n - pt["n_positive"])))
        lr, small = np.array(out).T
        print(f"prevalence {prev}, AUROC {auroc}, {n} rows (~{small.mean():.0f} cases): χ² "
              f"{np.mean(chdtrc(2, lr) <= .05):.3f}, F(2, cases − 2) "
              f"{np.mean(fdtrc(2, np.maximum(small - 2, 1), lr / 2) <= .05):.3f}", flush=True)
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="y", score="p", attributes=("group",), patient_id="pid")
    audits = max(reps // 10, 20)
    print(f"repeated patients, {audits} audits of 2 calibrated groups each (run_group_audit)")
    for prev, auroc, n, m in ((0.05, 0.9, 2000, 10), (0.2, 0.95, 1000, 20), (0.06, 0.8, 1500, 12)):
        d = DS.Design("calibrated", [n, n], [prev, prev], auroc, 0.0, 1.0, 0.2, m, 0.6, mu=[0.0, 0.0], threshold=0.1)
        rng = np.random.default_rng(5)
        chi, f = [], []
        for i in range(audits):
            cal = run_group_audit(DS.simulate(d, rng), GroupAuditPlan(roles, threshold=0.1, n_boot=100,
                                                                       seed=i)).calibration
            cal = cal[cal["p_value"].notna()]
            chi += list(chdtrc(2, cal["lr_stat"].astype(float) / cal["design_effect"].astype(float)) <= 0.05)
            f += list(cal["p_value"] <= 0.05)
        print(f"prevalence {prev}, AUROC {auroc}, {n} rows, 1–{m} rows per patient: χ²/deff {np.mean(chi):.3f}, "
              f"Rao–Scott F {np.mean(f):.3f} ({len(f)} tests)", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--part", choices=("slope", "boot", "lr"), default=None)
    args = ap.parse_args(argv)
    if args.part in (None, "slope"):
        part_slope(args.reps)
    if args.part in (None, "boot"):
        part_boot(args.reps)
    if args.part in (None, "lr"):
        part_lr(args.reps)


if __name__ == "__main__":
    main()
