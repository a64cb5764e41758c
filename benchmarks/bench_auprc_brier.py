"""Issue 21: the coverage of each group's AUPRC interval, of the AUPRC gap's interval and of the Brier interval over
designs drawn at random from the design space of ``fairdesk.core.synthetic.design_space`` (its own generator, two
groups of each drawn design), by the regions of the map, against the exact AUPRC (a binormal integral) and a large
sample's Brier score. The small fixed-seed versions are ``tests/core/test_auprc_brier_intervals.py``; the numbers
are in docs/methods.md ("AUPRC and Brier intervals over the design space").

``python -m benchmarks.bench_auprc_brier [--designs 3000] [--seed 1] [--part auprc|brier|power] [--runs 200]`` (about 15 minutes
on one core at the defaults).

* ``auprc``  each group's interval: ``before`` (the influence variance alone, logit scale — the method up to
             2026-11-25) and ``now`` (:func:`fairdesk.core.stats.calibration.auprc_logit_se`: at least the binomial
             variance); the gap's interval of two groups: ``wald`` (d ± q·√(se_a² + se_b²), value scale) and
             ``mover`` (:func:`fairdesk.core.stats.gaps.mover` from the groups' intervals), each with the before and
             now variances.
* ``power``  the AUPRC pair test's rejection rate (p ≤ 0.05) in null and planted pairs of two binormal groups of
             the map's generator, through ``run_group_audit`` (it keeps the influence variance: see docs).
* ``brier``  groups with fewer than 30 cases of the smaller class: the log-scale interval ``before`` (influence
             variance × n/(n − 1)) and ``now`` (at least :func:`fairdesk.core.stats.calibration.brier_model_variance`).
"""
from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd


def true_auprc(prevalence: float, auroc: float) -> float:
    """The population AUPRC of the design space's score (latent L | y ~ N(δy, 1), δ = √2·Φ⁻¹(AUROC); any increasing
    map of L has the same PR curve): ∫ precision d recall = ∫ π·R(c)/(π·R(c) + (1 − π)·F(c)) φ(δ − c) dc with
    R(c) = Φ(δ − c), F(c) = Φ(−c)."""
    from scipy import integrate
    from scipy.special import ndtr, ndtri
    from scipy.stats import norm

    d = math.sqrt(2.0) * float(ndtri(auroc))

    def f(c):
        r, fp = ndtr(d - c), ndtr(-c)
        return prevalence * r / (prevalence * r + (1 - prevalence) * fp) * norm.pdf(d - c)

    return float(integrate.quad(f, -30.0, 30.0, limit=400, points=[d / 2])[0])


def group_numbers(y, s, pid=None) -> dict:
    """AP and Brier of one group with their influence variances (rows, and whole patients when ``pid`` is given)."""
    from fairdesk.core.stats import calibration as C
    from fairdesk.core.stats.discrimination import ranked

    values, pos, neg, cell = ranked(np.asarray(y, float), np.asarray(s, float), return_cell=True)
    pt = C.point_from_ranked(values, pos, neg)
    contrib = C.influence(values, pos, neg, pt)
    var_rows = C.variances(contrib, pt)
    var = C.variances(contrib, pt, row_cell=cell, clusters=pid) if pid is not None else var_rows
    return {"point": pt, "var": var, "var_rows": var_rows}


def auprc_intervals(g: dict, df: float, level: float = 0.95) -> dict:
    """{"before" | "now": (low, high)} of one group's AUPRC (logit scale)."""
    from scipy.special import expit, logit

    from fairdesk.core.stats import calibration as C
    from fairdesk.core.stats import gaps as G

    pt = g["point"]
    ap, n1 = pt["auprc"], pt["n_positive"]
    v, v_rows = g["var"].get("auprc", math.nan), g["var_rows"].get("auprc", math.nan)
    q = float(G.quantile(level, df))
    out = {}
    if not (0 < ap < 1) or not v > 0:
        return out
    for name, lse in (("before", math.sqrt(v) / (ap * (1 - ap))), ("now", C.auprc_logit_se(ap, v, v_rows, n1))):
        out[name] = tuple(float(x) for x in expit(logit(ap) + np.array([-1.0, 1.0]) * q * lse))
    return out


def brier_intervals(g: dict, df: float, clustered: bool, level: float = 0.95) -> dict:
    from fairdesk.core.stats import calibration as C
    from fairdesk.core.stats import gaps as G

    pt = g["point"]
    b, n = pt["brier"], float(pt["n"])
    vk = g["var"]["brier"] if clustered else g["var"]["brier"] * n / (n - 1)
    z = float(G.quantile(level, df))
    out = {}
    for name, var in (("before", vk), ("now", max(vk, C.brier_model_variance(pt)))):
        se = math.sqrt(var)
        out[name] = (b * math.exp(-z * se / b), min(1.0, b * math.exp(min(z * se / b, 50.0)))) if b > 0 else (
            0.0, z * se)
    return out


def region(clustered: bool, cases: float, case_patients: float, auroc: float | None) -> str:
    from fairdesk.core.synthetic.design_space import region_of

    return region_of("auprc" if auroc is not None else "brier", cases, clustered, case_patients,
                     auroc if auroc is not None else 0.5)


def auprc_study(designs: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows of (region, method, covered) for each group's interval and for the gap of each design's first two
    groups (when both have at least 10 cases of each class, as the audit requires to compare)."""
    from fairdesk.core.stats import gaps as G
    from fairdesk.core.stats.verified_region import case_patients, cases_of
    from fairdesk.core.synthetic.design_space import draw_design, simulate

    rng = np.random.default_rng(seed)
    rows, gaps = [], []
    for i in range(designs):
        d = draw_design(rng, {"groups": (2, 2)})
        d.mu = [0.0, 0.0]  # a shift of the latent score leaves the PR curve as it is
        df = simulate(d, rng)
        info = []
        for g, (_, sub) in enumerate(df.groupby("group", sort=True)):
            pid = sub["pid"].to_numpy() if d.clustered else None
            num = group_numbers(sub["y"].to_numpy(), sub["p"].to_numpy(), pid)
            pt = num["point"]
            n, n1 = pt["n"], pt["n_positive"]
            rows_pp = np.unique(pid, return_counts=True)[1] if d.clustered else None
            dof = G.cluster_df(rows_pp) if d.clustered else math.inf
            cases = cases_of("auprc", n, n1)
            patients = case_patients("auprc", n, n1, rows_pp.size if d.clustered else n)
            truth = true_auprc(d.prevalence[g], d.auroc)
            ci = auprc_intervals(num, dof)
            reg = region(d.clustered, cases, patients, d.auroc)
            for k, (lo, hi) in ci.items():
                rows.append({"design": i, "region": reg, "method": k, "covered": lo <= truth <= hi,
                             "above": lo > truth})
            info.append({"ap": pt["auprc"], "ci": ci, "truth": truth, "cases": cases, "patients": patients,
                         "df": dof, "n1": n1})
        a, b = info
        if a["ci"] and b["ci"] and min(a["cases"], b["cases"]) >= 10:
            reg = region(d.clustered, min(a["cases"], b["cases"]), min(a["patients"], b["patients"]), d.auroc)
            true_gap, gap = a["truth"] - b["truth"], a["ap"] - b["ap"]
            for k in ("before", "now"):
                (la, ua), (lb, ub) = a["ci"][k], b["ci"][k]
                q_a = float(G.quantile(0.95, a["df"]))
                q_b = float(G.quantile(0.95, b["df"]))
                # the value-scale SEs the logit intervals imply (the Wald gap interval of before)
                se = math.hypot((ua - la) / (2 * q_a), (ub - lb) / (2 * q_b))
                q = float(G.quantile(0.95, min(a["df"], b["df"])))
                for how, (lo, hi) in (("wald", (gap - q * se, gap + q * se)),
                                      ("mover", G.mover(a["ap"], (la, ua), b["ap"], (lb, ub)))):
                    gaps.append({"design": i, "region": reg, "method": f"{k}/{how}", "covered": lo <= true_gap <= hi})
    return pd.DataFrame(rows), pd.DataFrame(gaps)


def brier_study(designs: int, seed: int, truth_rows: int = 200_000) -> pd.DataFrame:
    """Groups with fewer than 30 cases of the smaller class drawn from the space (prevalence 0.005–0.1, 30–2,000
    rows, so that such groups are common): coverage of the Brier interval before and now."""
    from fairdesk.core.stats import gaps as G
    from fairdesk.core.stats.verified_region import case_patients, cases_of
    from fairdesk.core.synthetic.design_space import draw_design, simulate, truths

    rng = np.random.default_rng(seed)
    rows = []
    while len(rows) < 2 * designs:
        d = draw_design(rng, {"groups": (2, 2), "rows_per_group": (30, 2000), "prevalence": (0.005, 0.1)})
        sub = simulate(d, rng)
        sub = sub[sub["group"] == "G1"]
        n, n1 = len(sub), int(sub["y"].sum())
        if cases_of("brier", n, n1) >= 30:
            continue
        pid = sub["pid"].to_numpy() if d.clustered else None
        num = group_numbers(sub["y"].to_numpy(), sub["p"].to_numpy(), pid)
        rows_pp = np.unique(pid, return_counts=True)[1] if d.clustered else None
        dof = G.cluster_df(rows_pp) if d.clustered else n - 1.0
        truth = float(truths(d, rng, truth_rows)["brier"][0])
        reg = region(d.clustered, cases_of("brier", n, n1),
                     case_patients("brier", n, n1, rows_pp.size if d.clustered else n), None)
        for k, (lo, hi) in brier_intervals(num, dof, d.clustered).items():
            rows.append({"region": reg, "method": k, "covered": lo <= truth <= hi, "below": hi < truth})
    return pd.DataFrame(rows)


PAIR_DESIGNS = (("null, AUROC 0.8, 100 positives", 500, 0.2, (0.8, 0.8)),
                ("null, AUROC 0.99, 60 positives", 300, 0.2, (0.99, 0.99)),
                ("AUROC 0.80 vs 0.70, 100 positives", 500, 0.2, (0.8, 0.7)),
                ("AUROC 0.995 vs 0.97, 100 positives", 500, 0.2, (0.995, 0.97)))


def pair_test_rates(runs: int, seed: int = 5) -> dict[str, float]:
    """Share of the AUPRC pair tests with p ≤ 0.05 in each of :data:`PAIR_DESIGNS` (two groups: rows, prevalence,
    their AUROCs; calibrated binormal scores of the design space's generator)."""
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.synthetic.design_space import Design, simulate

    roles = ColumnRoles(label="y", score="p", attributes=("group",))
    out = {}
    for name, n, prev, aucs in PAIR_DESIGNS:
        rng = np.random.default_rng(seed)
        hits = 0
        for r in range(runs):
            frames = []
            for i, auc in enumerate(aucs):
                df = simulate(Design("label", [n], [prev], auc, 0.0, 1.0, 0.2, 1, 0.0, mu=[0.0]), rng)
                frames.append(df.assign(group=f"G{i}"))
            t = run_group_audit(pd.concat(frames, ignore_index=True),
                                GroupAuditPlan(roles, threshold=0.3, n_boot=100, seed=r, metrics=("parity",))).tests
            hits += bool(t.loc[t["metric"] == "auprc", "p_value"].iloc[0] <= 0.05)
        out[name] = hits / runs
    return out


def coverage_table(rows: pd.DataFrame) -> pd.DataFrame:
    tab = rows.pivot_table(index="region", columns="method", values="covered", aggfunc="mean").round(3)
    n = rows.groupby("region")["design"].size() // rows["method"].nunique() if "design" in rows else \
        rows.groupby("region").size() // rows["method"].nunique()
    return tab.assign(intervals=n)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--part", choices=("auprc", "brier", "power", "all"), default="all")
    ap.add_argument("--runs", type=int, default=200, help="data sets per design of --part power")
    a = ap.parse_args(argv)
    pd.set_option("display.width", 200)
    if a.part in ("auprc", "all"):
        rows, gaps = auprc_study(a.designs, a.seed)
        print("each group's AUPRC interval (coverage):")
        print(coverage_table(rows).to_string())
        print("\nthe AUPRC gap's interval (coverage):")
        print(coverage_table(gaps).to_string())
    if a.part in ("brier", "all"):
        rows = brier_study(max(a.designs // 4, 1), a.seed)
        print("\nBrier interval with fewer than 30 cases (coverage):")
        print(coverage_table(rows).to_string())
    if a.part in ("power", "all"):
        print("\nAUPRC pair test, share with p ≤ 0.05:")
        for name, rate in pair_test_rates(a.runs).items():
            print(f"  {name}: {rate:.3f}")


if __name__ == "__main__":
    main()
