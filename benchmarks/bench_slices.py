"""Benchmark of the slice search (issue 26): FairDesk's vectorised lattice search against ``sliceline`` (SliceLine,
PyPI 0.3.0) on 100,000 rows × 8 attributes, and the whole slice audit end to end.

Workload: :func:`fairdesk.core.synthetic.slice_sim.simulate_slice_table` — 100,000 rows, 8 categorical attributes
(3, 4, 2, 5, 3, 4, 2, 3 values), prevalence 0.3, recall 0.8 everywhere except a planted 3-way slice (about 2% of
the rows) with recall 0.5. The search runs on the discovery half (50,000 rows), orders 1–3, at least 50 rows.

* **lattice** — :func:`fairdesk.core.audits.slices.search` (every slice of order ≤ 3 scored; recall vs the rest).
* **sliceline** — ``sliceline.Slicefinder(alpha=0.99, k=20, max_l=3, min_sup=50)`` fitted on the positive rows of
  the same half with the error vector "missed positive" (SliceLine scores average error, so recall means fitting on
  the positives; at its usual α = 0.95 the size term outweighs a 2% slice's error and it returns no slice at all,
  so α = 0.99). sliceline is not a FairDesk dependency: give its folder with ``--sliceline-path`` (``pip install
  --no-deps --target DIR sliceline==0.3.0``) or leave it out and only the lattice lines are printed.
* **audit** — :func:`fairdesk.core.audits.slices.run_slice_audit` end to end (split, search, carry 20, 1,000
  bootstrap replicates per carried slice, correction).

Times are the best of ``--repeat`` runs in this process (after one warm-up), and the ratio sliceline / lattice is
the number to read. Run: ``OMP_NUM_THREADS=1 nice python -m benchmarks.bench_slices [--sliceline-path DIR]``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def _best(fn, repeat: int) -> tuple[float, object]:
    fn()  # warm-up (imports, caches)
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sliceline-path", help="folder holding the sliceline package (not a FairDesk dependency)")
    ap.add_argument("--json", help="also write the measurements here")
    args = ap.parse_args(argv)

    from fairdesk.core.audits.slices import SliceAuditPlan, carry_forward, run_slice_audit, search, split_rows
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.synthetic.slice_sim import simulate_slice_table

    df, planted = simulate_slice_table(args.rows, 8, order=3, gap=0.3, seed=0, slice_share=0.02)
    cols = [f"a{j + 1}" for j in range(8)]
    y = df["y"].to_numpy()
    yhat = (df["p"].to_numpy() >= 0.5).astype(int)
    disc = split_rows(y, None, 0.5, 0)
    codes = np.column_stack([df[c].str[1:].astype(int).to_numpy() for c in cols])[disc]
    cells = (2 * y + yhat)[disc].astype(np.int64)
    out: dict = {"rows": args.rows, "discovery_rows": int(disc.sum()), "attributes": 8, "max_order": 3,
                 "planted": planted}

    t_lat, cand = _best(lambda: search(codes, cells, "recall", 3, 50, 11), args.repeat)
    top = carry_forward(cand, codes, 20)
    planted_codes = {cols.index(c): int(v[1:]) for c, v in planted.items()}
    rank = next((r for r, i in enumerate(top, 1)
                 if dict(zip(cand.attrs[i], cand.values[i])) == planted_codes), None)
    out["lattice"] = {"seconds": t_lat, "candidates": len(cand), "planted_rank_in_carried": rank}
    print(f"lattice search: {t_lat:.3f} s for {len(cand):,} slices scored; planted slice carried at rank {rank}")

    if args.sliceline_path:
        sys.path.insert(0, args.sliceline_path)
    try:
        import warnings

        from sliceline.slicefinder import Slicefinder
    except ImportError:
        print("sliceline: not measured (not importable; give --sliceline-path)")
    else:
        pos = cells >= 2
        X = codes[pos]
        errors = (cells[pos] == 2).astype(float)  # a missed positive

        def fit():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return Slicefinder(alpha=0.99, k=20, max_l=3, min_sup=50, verbose=False).fit(X, errors)

        t_sl, sf = _best(fit, args.repeat)
        found = [{cols[j]: int(v) for j, v in enumerate(s) if v is not None} for s in sf.top_slices_]
        want = {c: int(v[1:]) for c, v in planted.items()}
        sl_rank = next((r for r, s in enumerate(found, 1) if s == want), None)
        out["sliceline"] = {"seconds": t_sl, "top_k": len(found), "planted_rank": sl_rank,
                            "ratio_to_lattice": t_sl / t_lat}
        print(f"sliceline 0.3.0: {t_sl:.3f} s (k = 20, positives only); planted slice at rank {sl_rank}; "
              f"{t_sl / t_lat:.1f}× the lattice search's time")

    roles = ColumnRoles(label="y", score="p", attributes=tuple(cols))
    plan = SliceAuditPlan(roles=roles, threshold=0.5, seed=0)
    t_audit, res = _best(lambda: run_slice_audit(df, plan), max(1, args.repeat - 1))
    differs = res.slices[res.slices["verdict"] == "differs"]["description"].tolist()
    out["audit"] = {"seconds": t_audit, "searched": res.searched, "carried": int(len(res.slices)),
                    "differs": differs}
    print(f"whole audit: {t_audit:.3f} s ({res.searched:,} searched, {len(res.slices)} carried, "
          f"{len(differs)} differ: {differs[:3]})")
    if args.json:
        from pathlib import Path

        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
