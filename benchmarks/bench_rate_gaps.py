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


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    return (df.groupby(["measure", "band", "null"])
            .agg(tests=("after", "size"), designs=("design", "nunique"), before=("before", "mean"),
                 after=("after", "mean"), share_mid_p=("mid_p", "mean")).round(3).reset_index())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("exact", "map"), default="exact")
    ap.add_argument("--tables", type=int, default=400)
    ap.add_argument("--designs", type=int, default=60)
    ap.add_argument("--region", default="recall gap | independent, 10–29 cases")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default=None, help="with --part map: every test's row here")
    a = ap.parse_args(argv)
    if a.part == "exact":
        print(json.dumps(exact_tables(a.tables, a.seed), indent=1, ensure_ascii=False))
        return 0
    df = map_region(a.designs, a.region, a.seed)
    if a.csv:
        df.to_csv(a.csv, index=False)
    print(summarise(df).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
