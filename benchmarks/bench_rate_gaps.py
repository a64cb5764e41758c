"""Issue 21: the size and power of the rate-gap pair test (recall, parity, specificity) with independent rows, before
(the score test everywhere) and after (the conditional exact mid-p where the 2×2 table's smallest expected count is
below ``gaps.MIN_EXPECTED_CELL``). Small versions: ``tests/core/test_rate_gap_size.py``; numbers: docs/methods.md §1.

``python -m benchmarks.bench_rate_gaps --part exact [--tables 400]``
    exact enumeration over tables drawn at random from the class (smaller group 10–300 cases, larger up to 5,000, a
    common rate log-uniform towards 0 and 1 or uniform): size of each table; power at a planted gap of 2.5 binomial
    SEs of the smaller group.
``python -m benchmarks.bench_rate_gaps --part map --designs 60 --region 'recall gap | independent, 10–29 cases'``
    designs of the design-space map drawn to reach the region (``design_space.draw_targeted``), audited as the map
    does; every pair test of every measure with independent rows, by the map's case bands: size (null by the
    design's mode) and rejection rate of the non-null gaps, before (score test at the same design effect, recomputed
    from the audit's counts) and after (the audit's p).
``python -m benchmarks.bench_rate_gaps --part cluster --designs 300 --reps 5 [--max-rows 30] [--map-seed 0]``
    rate gaps with repeated patients (issue 21): designs drawn from the map's space, clustered only (rows per patient
    1 to m, m drawn up to ``--max-rows``; 2–8 groups, 30–5,000 rows, prevalence 0.01–0.5 unequal, intra-patient
    correlation 0.3–0.9), ``--reps`` data sets each, every pair of groups through ``groups.rate_gap_test`` from the
    groups' per-patient counts (the audit's own numbers: the first data set of a map design gives the map's
    intervals): coverage of parity, recall and specificity intervals, size of the null gaps, mean width, by the map's
    case-patient bands (``--region``, repeatable: designs drawn to reach those regions). ``--map-seed S``: replay the designs of the map's first pass with seed S (``--designs 200``)
    instead of fresh ones — more data sets of the same designs tell a design's mechanism from one data set's chance.
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pandas as pd

ALPHA = 0.05


def exact_tables(tables: int, seed: int = 0) -> dict:
    from scipy.stats import binom

    from fairdesk.core.stats import gaps as G

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(tables):
        n_a = int(round(math.exp(rng.uniform(math.log(10), math.log(300)))))
        n_b = int(round(math.exp(rng.uniform(math.log(n_a), math.log(5000)))))
        u = rng.random()
        p = float(math.exp(rng.uniform(math.log(0.002), math.log(0.5)))) if u < 2 / 3 else float(rng.uniform(0.02, 0.5))
        if rng.random() < 0.5:
            p = 1 - p
        planted = float(np.clip(p - np.sign(p - 0.5) * 2.5 * math.sqrt(p * (1 - p) / n_a), 0.001, 0.999))
        x_a, x_b = np.meshgrid(np.arange(n_a + 1), np.arange(n_b + 1), indexing="ij")
        before = G.score_test(x_a, n_a, x_b, n_b)[1] <= ALPHA
        after = G.gap_p_value(x_a, n_a, x_b, n_b) <= ALPHA
        w0 = binom.pmf(x_a, n_a, p) * binom.pmf(x_b, n_b, p)
        w1 = binom.pmf(x_a, n_a, planted) * binom.pmf(x_b, n_b, p)
        rows.append({"n_a": n_a, "n_b": n_b, "p": p, "size_before": float((w0 * before).sum()),
                     "size_after": float((w0 * after).sum()), "power_before": float((w1 * before).sum()),
                     "power_after": float((w1 * after).sum())})
    df = pd.DataFrame(rows)
    out = {"tables": tables}
    for band, sub in (("10–29", df[df.n_a < 30]), ("30–99", df[(df.n_a >= 30) & (df.n_a < 100)]),
                      ("100–300", df[df.n_a >= 100]), ("all", df)):
        out[band] = {"tables": len(sub), **{f"{k}_{s}": round(float(getattr(sub[k], s)()), 4)
                                             for k in ("size_before", "size_after") for s in ("mean", "max")},
                     "share_size_above_0.07_before": round(float((sub.size_before > 0.07).mean()), 4),
                     "share_size_above_0.07_after": round(float((sub.size_after > 0.07).mean()), 4),
                     "power_before": round(float(sub.power_before.mean()), 4),
                     "power_after": round(float(sub.power_after.mean()), 4)}
    worst = df.sort_values("size_before", ascending=False).head(3)
    out["worst_before"] = worst[["n_a", "n_b", "p", "size_before", "size_after"]].round(4).to_dict(orient="records")
    return out


def map_region(designs: int, region: str, seed: int = 0, n_boot: int = 200) -> pd.DataFrame:
    """Every pair test with independent rows of ``designs`` designs drawn to reach ``region``."""
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.stats import gaps as G
    from fairdesk.core.stats.verified_region import cases_of
    from fairdesk.core.synthetic import design_space as DS

    rng = np.random.default_rng([seed, 2121])
    regions = DS.parse_regions([region])
    rows = []
    for i in range(designs):
        d = DS.draw_targeted(rng, regions)
        s = int(rng.integers(0, 2**31 - 1))
        if d.clustered:
            continue
        df = DS.simulate(d, np.random.default_rng(s))
        roles = ColumnRoles(label="y", score="p", attributes=("group",), patient_id="pid")
        res = run_group_audit(df, GroupAuditPlan(roles, threshold=d.threshold, n_boot=n_boot, seed=s,
                                                 min_group_size=30, calibration=False))
        grp = res.groups.set_index("group")
        rec = res.records.set_index(["metric", "group"])
        nulls = DS.null_measures(d)
        for t in res.tests.to_dict(orient="records"):
            if t["kind"] != "pair" or t["p_value"] is None or math.isnan(t["p_value"]):
                continue
            m = t["metric"]
            xa, na = (float(rec.loc[(m, t["group"]), k]) for k in ("numerator", "denominator"))
            xb, nb = (float(rec.loc[(m, t["comparison"]), k]) for k in ("numerator", "denominator"))
            cases = min(cases_of(m, grp.loc[g, "n"], grp.loc[g, "n_positive"]) for g in (t["group"], t["comparison"]))
            rows.append({"design": i, "measure": m, "null": m in nulls, "band": DS.band(cases), "auroc": d.auroc,
                         "before": bool(G.score_test(xa, na, xb, nb, t["design_effect"])[1] <= ALPHA),
                         "after": bool(t["p_value"] <= ALPHA),
                         "mid_p": bool(G.smallest_expected_cell(xa, na, xb, nb) < G.MIN_EXPECTED_CELL)})
    return pd.DataFrame(rows)


def cluster_pairs(d, df: pd.DataFrame, design: int, rep: int, truth=None) -> list[dict]:
    """Every pair of groups of one clustered data set, each rate gap through ``groups.rate_gap_test`` with the
    groups' per-patient counts (as ``run_group_audit`` builds them), scored against the design's true gap."""
    from types import SimpleNamespace

    from fairdesk.core.audits.groups import rate_gap_test
    from fairdesk.core.stats import gaps as G
    from fairdesk.core.stats.verified_region import case_patients, cases_of
    from fairdesk.core.synthetic import design_space as DS

    plan = SimpleNamespace(ci_level=0.95, margin=0.05)
    truth = d.true_rates() if truth is None else truth
    flagged, y, grp = df["p"].to_numpy() >= d.threshold, df["y"].to_numpy(), df["group"].to_numpy()
    pid = pd.factorize(df["pid"])[0]
    nulls = DS.null_measures(d)
    names = [f"G{g + 1}" for g in range(len(d.sizes))]
    sel = {g: grp == g for g in names}
    stats = {g: (int(sel[g].sum()), int(y[sel[g]].sum()), len(np.unique(pid[sel[g]]))) for g in names}
    rows = []
    for m in ("parity", "recall", "specificity"):
        den = {"parity": np.ones(y.size, bool), "recall": y == 1, "specificity": y == 0}[m]
        hit = den & (~flagged if m == "specificity" else flagged)
        per = {}
        for g in names:
            h, n = (np.bincount(pid[sel[g]], weights=w[sel[g]]) for w in (hit, den))
            per[g] = (h[n > 0], n[n > 0])
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                (h_a, m_a), (h_b, m_b) = per[names[a]], per[names[b]]
                if min(m_a.sum(), m_b.sum()) < 10:  # GroupAuditPlan.min_denominator: not tested
                    continue
                t = rate_gap_test(h_a.sum(), m_a.sum(), h_b.sum(), m_b.sum(), np.zeros(2), plan, (m_a, m_b),
                                  (h_a, h_b))
                gap = float(truth[m][a] - truth[m][b])
                # the Agresti–Caffo interval at the same design effect and df (the independent-row interval): the
                # width the score interval is compared with
                ac_lo, ac_hi = G.interval(*G.agresti_caffo(h_a.sum(), m_a.sum(), h_b.sum(), m_b.sum(),
                                                           t["design_effect"]), 0.95, t["df"])
                pats = min(case_patients(m, *stats[g]) for g in (names[a], names[b]))
                cases = min(cases_of(m, *stats[g][:2]) for g in (names[a], names[b]))
                rows.append({"design": design, "rep": rep, "measure": m, "null": m in nulls,
                             "band": DS.region_of(f"{m} gap", cases, True, pats, d.auroc).removeprefix("clustered, "),
                             "max_rows": d.max_rows_per_patient, "design_effect": t["design_effect"],
                             "covered": bool(t["ci_low"] - 1e-12 <= gap <= t["ci_high"] + 1e-12),
                             "rejected": bool(t["p_value"] <= ALPHA), "width": t["ci_high"] - t["ci_low"],
                             "width_ac": float(ac_hi - ac_lo)})
    return rows


def cluster_designs(designs: int, reps: int, seed: int = 0, max_rows: int = 30, map_seed: int | None = None,
                    space: dict | None = None, regions: tuple[str, ...] = ()) -> pd.DataFrame:
    """Rate gaps with repeated patients over drawn designs (see the module's ``--part cluster``); ``regions``: drawn
    to reach one of them (``design_space.draw_targeted``)."""
    from fairdesk.core.synthetic import design_space as DS

    if map_seed is not None:  # the map's first pass: run_design_space's own stream (a design, then its data seed)
        rng = np.random.default_rng([int(map_seed), 21])
        drawn = [(DS.draw_design(rng), int(rng.integers(0, 2**31 - 1))) for _ in range(designs)]
    else:
        rng = np.random.default_rng([seed, 2122])
        sp = {"share_clustered": 1.0, "rows_per_patient": (1, max_rows), **(space or {})}
        regions = DS.parse_regions(regions) if regions else ()
        drawn = [(DS.draw_targeted(rng, regions, sp) if regions else DS.draw_design(rng, sp),
                  int(rng.integers(0, 2**31 - 1))) for _ in range(designs)]
    rows = []
    for i, (d, s) in enumerate(drawn):
        if not d.clustered:
            continue
        truth = d.true_rates()
        for r in range(reps):  # data set 0 of a map design is the map's own (evaluate() simulates from seed s)
            data = DS.simulate(d, np.random.default_rng(s if r == 0 else [s, r]))
            rows += cluster_pairs(d, data, i, r, truth)
    return pd.DataFrame(rows)


def cluster_summary(df: pd.DataFrame) -> pd.DataFrame:
    cov = df.groupby(["measure", "band"]).agg(intervals=("covered", "size"), designs=("design", "nunique"),
                                              coverage=("covered", "mean"), width=("width", "mean"),
                                              width_ac=("width_ac", "mean"))
    size = df[df["null"]].groupby(["measure", "band"]).agg(null_tests=("rejected", "size"),
                                                            size=("rejected", "mean"))
    power = df[~df["null"]].groupby(["measure", "band"]).agg(other_tests=("rejected", "size"),
                                                              rejected=("rejected", "mean"))
    return cov.join(size).join(power).round(3).reset_index()


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    return (df.groupby(["measure", "band", "null"])
            .agg(tests=("after", "size"), designs=("design", "nunique"), before=("before", "mean"),
                 after=("after", "mean"), share_mid_p=("mid_p", "mean")).round(3).reset_index())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("exact", "map", "cluster"), default="exact")
    ap.add_argument("--tables", type=int, default=400)
    ap.add_argument("--designs", type=int, default=60)
    ap.add_argument("--region", action="append", default=None,
                    help="--part map: the region (default 'recall gap | independent, 10–29 cases'); --part cluster: "
                         "draw designs to reach it (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default=None, help="with --part map or cluster: every test's row here")
    ap.add_argument("--reps", type=int, default=5, help="--part cluster: data sets per design")
    ap.add_argument("--max-rows", type=int, default=30, help="--part cluster: most rows per patient")
    ap.add_argument("--map-seed", type=int, default=None, help="--part cluster: replay the map's first pass")
    a = ap.parse_args(argv)
    if a.part == "exact":
        print(json.dumps(exact_tables(a.tables, a.seed), indent=1, ensure_ascii=False))
        return 0
    if a.part == "cluster":
        df = cluster_designs(a.designs, a.reps, a.seed, a.max_rows, a.map_seed, regions=tuple(a.region or ()))
        table = cluster_summary(df)
    else:
        df = map_region(a.designs, (a.region or ["recall gap | independent, 10–29 cases"])[0], a.seed)
        table = summarise(df)
    if a.csv:
        df.to_csv(a.csv, index=False)
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
