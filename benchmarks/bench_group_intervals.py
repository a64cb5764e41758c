"""Coverage study behind the group-gap interval (issue 9, finding 6): which 95% interval for a difference of two
rates covers at small denominators?

Two groups, recall-like rates (the denominator is the group's positives): the small group has 10, 20, 50 or 100
positives, the large one 4× as many; true rates near 0, 0.5 and 1, with and without a gap. For each design,
``--reps`` data sets; for each, the bootstrap of the cell counts (as the audit draws it: ``stratified_cell_counts``,
1,000 replicates) and these intervals:

* ``percentile``           percentile interval of the unsmoothed cell bootstrap (= label-stratified row resampling)
* ``percentile+jeffreys``  percentile interval with the Jeffreys half pseudo-row (FairDesk before issue 9)
* ``wald-boot``            estimate ± 1.96 · bootstrap SE (smoothed)
* ``newcombe``             Newcombe's hybrid Wilson score interval (rows independent only)
* ``agresti-caffo×deff``   Agresti–Caffo with the bootstrap design effect (:mod:`fairdesk.core.stats.gaps`; chosen)

and the size of two tests of "no gap" at α = 0.05 (designs without a gap): ``wald-boot`` (estimate / bootstrap SE)
and ``score×deff`` (the audit's test). Prints coverage (with its binomial 95% CI half-width) and mean width.

Part two (``--sizes``): the size of the audit's own test through the public API (``run_group_audit`` on
``simulate_audit_table`` complete nulls): the share of tests with p ≤ α (binomial 95% CI; tests of one audit share
data, so the CI is approximate) for (a) two unequal groups at low prevalence, (b) the max rule with five unequal
groups (every pair), (c) whole-patient resampling (patients of 3 identical rows); and the share of complete-null
audits (10 tasks × 5 unequal groups) with at least one "differs" after the default correction (one family per
audit, BH) and after 001's narrow families.

    python -m benchmarks.bench_group_intervals [--reps 2000] [--quick] [--sizes [--audits 400]]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

METHODS = ("percentile", "percentile+jeffreys", "wald-boot", "newcombe", "agresti-caffo×deff")
SIZES = (10, 20, 50, 100)
RATES = ((0.03, 0.03), (0.5, 0.5), (0.97, 0.97), (0.15, 0.03), (0.6, 0.4), (0.85, 0.97))


def one_design(n_a: int, n_b: int, p_a: float, p_b: float, reps: int, n_boot: int, rng) -> dict:
    from scipy.stats import norm

    from fairdesk.core.stats import gaps as G
    from fairdesk.core.stats.bootstrap import percentile_ci, stratified_cell_counts

    truth = p_a - p_b
    cover = {m: 0 for m in METHODS}
    width = {m: 0.0 for m in METHODS}
    reject = {"wald-boot": 0, "score×deff": 0}
    for _ in range(reps):
        x_a, x_b = rng.binomial(n_a, p_a), rng.binomial(n_b, p_b)
        cells = np.r_[np.zeros(n_a - x_a, int), np.ones(x_a, int), np.full(n_b - x_b, 2), np.full(x_b, 3)]
        strata = np.zeros(cells.size, int)
        d_obs = x_a / n_a - x_b / n_b
        boots = {}
        for pseudo in (0.0, 0.5):
            c = stratified_cell_counts(cells, strata, 4, n_boot, rng, pseudo=pseudo).astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                boots[pseudo] = c[:, 1] / (c[:, 0] + c[:, 1]) - c[:, 3] / (c[:, 2] + c[:, 3])
        iv = {}
        iv["percentile"] = percentile_ci(boots[0.0])
        iv["percentile+jeffreys"] = percentile_ci(boots[0.5])
        se_boot = float(np.nanstd(boots[0.5], ddof=1))
        iv["wald-boot"] = (d_obs - 1.96 * se_boot, d_obs + 1.96 * se_boot)
        iv["newcombe"] = G.newcombe(x_a, n_a, x_b, n_b)
        deff = G.design_effect(boots[0.5], x_a, n_a, x_b, n_b)
        iv["agresti-caffo×deff"] = G.interval(*G.agresti_caffo(x_a, n_a, x_b, n_b, deff))
        for m, (lo, hi) in iv.items():
            lo, hi = float(lo), float(hi)
            cover[m] += lo - 1e-12 <= truth <= hi + 1e-12
            width[m] += hi - lo
        if truth == 0:
            reject["wald-boot"] += bool(se_boot > 0 and 2 * norm.sf(abs(d_obs) / se_boot) <= 0.05) or \
                (se_boot == 0 and d_obs != 0)
            reject["score×deff"] += bool(G.score_test(x_a, n_a, x_b, n_b, deff)[1] <= 0.05)
    out = {"n_a": n_a, "n_b": n_b, "p_a": p_a, "p_b": p_b,
           "coverage": {m: cover[m] / reps for m in METHODS}, "width": {m: width[m] / reps for m in METHODS}}
    if truth == 0:
        out["size"] = {k: v / reps for k, v in reject.items()}
    return out


def binomial_ci(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


SIZE_DESIGNS = {
    "(a) two unequal groups (400/100 rows), prevalence .05": dict(group_sizes=(400, 100), prevalence=0.05),
    "(b) max rule, five unequal groups (400/200/100/60/40), prevalence .1": dict(),
    "(c) whole patients (600/300 rows, 3 identical rows each), prevalence .1":
        dict(group_sizes=(600, 300), prevalence=0.1, repeats_per_patient=3),
}


def audit_sizes(n_audits: int, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Rejection rates under complete nulls through run_group_audit (see the module docstring)."""
    from fairdesk.core.audits import groups as groups_module
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.synthetic.group_sim import simulate_audit_table

    groups_module._auc = lambda y, s: (float("nan"), float("nan"))  # per-group AUROC plays no part in the tests
    out = {}
    for name, kw in SIZE_DESIGNS.items():
        k = n = any_audit = any_narrow = 0
        for rep in range(n_audits):
            df, roles = simulate_audit_table(n_tasks=10, seed=seed + 7919 * rep, **kw)
            # the simulated scores are not calibrated probabilities: calibration tests (issue 14) would be true
            # findings here, so they are off — this measures the size of the gap tests
            res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=n_boot, seed=rep, alpha=alpha,
                                                     calibration=False))
            p = res.tests["p_value"].dropna().to_numpy(float)
            k += int((p <= alpha).sum())
            n += p.size
            any_audit += bool((res.tests["verdict"] == "differs").any())
            narrow = groups_module.correct(res.tests, GroupAuditPlan(threshold=0.5, roles=roles, family="attribute-group-measure"))
            any_narrow += bool((narrow["verdict"] == "differs").any())
        out[name] = {"tests": n, "size": k / n, "size_ci": binomial_ci(k, n), "audits": n_audits,
                     "any_differs": any_audit / n_audits, "any_differs_ci": binomial_ci(any_audit, n_audits),
                     "any_differs_narrow": any_narrow / n_audits}
    return out


def delta_eo_tail_check(seed: int = 0, n_ref: int = 400_000) -> list[tuple]:
    """How the Δ_eo p's gamma tail (1,000 permutations) compares with the tail of 400,000 permutations."""
    from fairdesk.core.audits.groups import permutation_null_delta_eo, tail_p

    rng = np.random.default_rng(seed)
    rows = []
    for k, n_pos, n_neg in ((2, 300, 700), (5, 300, 700), (5, 60, 940), (2, 40, 400)):
        pos, neg = np.full(k, n_pos // k), np.full(k, n_neg // k)
        fp = rng.multivariate_hypergeometric(neg, int(neg.sum() * 0.15))
        tp = rng.multivariate_hypergeometric(pos, int(pos.sum() * 0.7))
        obs = np.stack([neg - fp, fp, pos - tp, tp], axis=1)
        ref = permutation_null_delta_eo(obs, n_ref, rng)
        small = permutation_null_delta_eo(obs, 1000, rng)
        rows.append((k, n_pos, n_neg, [(q, tail_p(small, float(np.quantile(ref, 1 - q))))
                                       for q in (1e-2, 1e-3, 1e-4, 2e-5)]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_group_intervals",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="300 data sets per design")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", action="store_true", help="also the audit-level sizes through run_group_audit")
    ap.add_argument("--audits", type=int, default=400, help="complete-null audits per design (--sizes)")
    ap.add_argument("--only-sizes", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--delta-tail", action="store_true", help="only the Δ_eo gamma-tail check")
    args = ap.parse_args(argv)
    if args.delta_tail:
        print("Δ_eo p from 1,000 permutations (count, or gamma tail beyond 10 exceedances) at the values whose "
              "tail probability is q in 400,000 permutations:")
        for k, n_pos, n_neg, pairs in delta_eo_tail_check(args.seed):
            print(f"  N={k}, {n_pos} positives, {n_neg} negatives: "
                  + ", ".join(f"q {q:g} -> p {p:.2g}" for q, p in pairs))
        return 0
    if args.sizes or args.only_sizes:
        start = time.perf_counter()
        n_audits = 60 if args.quick else args.audits
        res = audit_sizes(n_audits, args.n_boot, args.seed)
        print(f"Size of the audit's tests under complete nulls, α = .05, {n_audits} audits of 10 tasks per design "
              f"({time.perf_counter() - start:.0f} s):")
        for name, r in res.items():
            print(f"  {name}: {r['size']:.4f} of {r['tests']} tests (95% CI {r['size_ci'][0]:.4f}–"
                  f"{r['size_ci'][1]:.4f}); audits with ≥1 'differs': default family {r['any_differs']:.3f} "
                  f"(95% CI {r['any_differs_ci'][0]:.3f}–{r['any_differs_ci'][1]:.3f}), 001's families "
                  f"{r['any_differs_narrow']:.3f}")
        if args.only_sizes:
            return 0
    reps = 300 if args.quick else args.reps
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = [one_design(n, 4 * n, pa, pb, reps, args.n_boot, rng) for n in SIZES for pa, pb in RATES]
    half = 1.96 * np.sqrt(0.95 * 0.05 / reps)
    print(f"Coverage of 95% intervals for a difference of two rates ({reps} data sets per design, "
          f"{args.n_boot} bootstrap replicates; binomial 95% CI of a coverage near .95: ±{half:.3f}); "
          f"{time.perf_counter() - start:.0f} s")
    head = f"{'n_a/n_b':>8s} {'p_a':>5s} {'p_b':>5s} " + "".join(f"{m:>22s}" for m in METHODS)
    print(head + f"{'size wald-boot':>16s}{'size score×deff':>17s}")
    for r in rows:
        cells = "".join(f"{r['coverage'][m]:>12.3f} ({r['width'][m]:.3f})" for m in METHODS)
        size = r.get("size")
        tail = (f"{size['wald-boot']:>16.3f}{size['score×deff']:>17.3f}") if size else ""
        print(f"{r['n_a']:>4d}/{r['n_b']:<3d} {r['p_a']:>5.2f} {r['p_b']:>5.2f} {cells}{tail}")
    print("cells: coverage (mean width)")
    for m in METHODS:
        cov = np.array([r["coverage"][m] for r in rows])
        print(f"{m:22s} coverage min {cov.min():.3f}, mean {cov.mean():.3f}; mean width "
              f"{np.mean([r['width'][m] for r in rows]):.3f}")
    sizes = np.array([[r["size"]["wald-boot"], r["size"]["score×deff"]] for r in rows if "size" in r])
    print(f"size at α = .05 over the no-gap designs: wald-boot {sizes[:, 0].min():.3f}–{sizes[:, 0].max():.3f}, "
          f"score×deff {sizes[:, 1].min():.3f}–{sizes[:, 1].max():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
