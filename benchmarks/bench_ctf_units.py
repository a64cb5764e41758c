"""Issue 22, CTF: size at the margin per layout and power for one planted term, with the context as the unit and
per-term verdicts (docs/methods.md §5 "Unit of resampling and per-term verdicts").

Scores are simulated directly (``fairdesk.core.synthetic.ctf_sim``) and go through ``ctf_from_scored_pairs`` (the
``audit ctf-scores`` path). For each design: the share of audits whose summary says "differs" / "equivalent within
the margin" and the per-term shares, with Clopper–Pearson 95% intervals. ``--rows`` also runs the designs with the
pre-issue-22 unit (every row its own context) for comparison.

    OMP_NUM_THREADS=1 nice python -m benchmarks.bench_ctf_units --runs 200 --json out.json
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _ci(k: int, n: int) -> str:
    from scipy.stats import binomtest

    c = binomtest(k, n).proportion_ci()
    return f"{k / n:.3f} [{c.low:.3f}, {c.high:.3f}]"


def designs():
    from fairdesk.core.synthetic.ctf_sim import CTFDesign

    return [("complete 20 terms × 40 contexts", CTFDesign(n_terms=20, n_contexts=40)),
            ("complete 8 terms × 12 contexts, skewed", CTFDesign(n_terms=8, n_contexts=12, scale_sd=1.0)),
            ("sparse 150 sentences, rows ×1–3", CTFDesign(n_terms=10, n_contexts=150, layout="sparse", max_dup=3)),
            ("12 templates × 4 sentences, ρ 0.7 (declared)", CTFDesign(n_terms=8, n_contexts=48, n_templates=12,
                                                                       rho=0.7)),
            ("35 terms, one +0.19, others 0.002", CTFDesign(n_terms=35, n_contexts=30, planted=0.19,
                                                            background=0.002))]


def run(runs: int, seed: int, n_boot: int, rows_unit: bool) -> dict:
    from fairdesk.core.audits.ctf import ctf_from_scored_pairs
    from fairdesk.core.synthetic.ctf_sim import draw_design, run_audit, simulate_scored_pairs

    out = {}
    todo = [(name, d, False) for name, d in designs()] + [("random null designs", None, False),
                                                          ("random planted designs", None, True)]
    for name, design, planted in todo:
        t0 = time.process_time()
        summ, terms, planted_found = [], [], 0
        for i in range(runs):
            s = seed * 100_000 + i
            d = design if design is not None else draw_design(np.random.default_rng(s), planted=planted)
            if rows_unit:  # the pre-issue-22 unit: every row its own context (ids are rows)
                frame, _ = simulate_scored_pairs(d, s)
                frame["__row"] = frame["id"].astype(str)
                res = ctf_from_scored_pairs(frame, margin=d.margin, n_boot=n_boot, seed=s, template_col="__row")
                v = res.ctf_gap[0]["verdict"]
                recs = res.term_gaps
            else:
                v, recs = run_audit(d, s, n_boot=n_boot)
            summ.append(v)
            terms += [t["verdict"] for t in recs]
            if d.planted:
                planted_found += any(t["term"] == "idterm00" and t["verdict"] == "differs" for t in recs)
        n_t = max(len(terms), 1)
        rec = {"runs": runs, "summary_differs": summ.count("differs") / runs,
               "summary_equivalent": summ.count("equivalent within margin") / runs,
               "term_differs": terms.count("differs") / n_t,
               "term_equivalent": terms.count("equivalent within margin") / n_t,
               "planted_found": planted_found / runs, "cpu_s_per_audit": (time.process_time() - t0) / runs}
        out[name] = rec
        print(f"{name:<48} summary differs {_ci(summ.count('differs'), runs)}  equivalent "
              f"{_ci(summ.count('equivalent within margin'), runs)}  per term differs {rec['term_differs']:.3f} "
              f"equivalent {rec['term_equivalent']:.3f}  planted found {rec['planted_found']:.2f}  "
              f"{rec['cpu_s_per_audit']:.2f} s/audit", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=400)
    ap.add_argument("--rows", action="store_true", help="also the pre-issue-22 unit (rows) for comparison")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = {"contexts": run(args.runs, args.seed, args.n_boot, False)}
    if args.rows:
        print("--- every row its own context (the unit before issue 22) ---")
        out["rows"] = run(args.runs, args.seed, args.n_boot, True)
    if args.json:
        from fairdesk.core import atomic

        atomic.write_text(args.json, json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
