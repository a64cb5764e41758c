"""Validity of FairDesk's audits, measured: null and planted simulations per audit family (issue 9).

Runs :func:`fairdesk.core.validity.run_validity` — the same code as ``fairdesk-cli bench validity`` and the Audit
tab's "Validity" page — at full size, and writes the JSON and the printed table.

    .venv/bin/python benchmarks/bench_validity.py --family cit --runs 200 --n 1000 --out /tmp/validity_cit_1000.json
    .venv/bin/python benchmarks/bench_validity.py --family cit --runs 50 --n 4000 --out /tmp/validity_cit_4000.json
    .venv/bin/python benchmarks/bench_validity.py --family all --out /tmp/validity_all.json

Results of the cit study are recorded in docs/cit_synthetic_findings.md ("Size under non-linear nuisances").

The design-space map (issue 21; docs/methods.md "Validity over a design space"): random group-audit designs, the
size of every test and the coverage of every interval by region, a table and a figure:

    nice .venv/bin/python benchmarks/bench_validity.py --design-space --designs 300 --out /tmp/ds.json --png /tmp/ds.png

The power study of the group audit's testing plans (docs/methods.md §1 "Testing plan"): planted harms at an expected
per-test p of 1e-3 among hundreds of null comparisons in the benchmark cohort's shape, and null cohorts of the same
shape, each judged by the hierarchical and the flat plan on the same tests:

    nice .venv/bin/python benchmarks/bench_validity.py --power --runs 10 --out /tmp/power.json

``--resolve DATASETS`` adds the second pass that decides the unclear regions (as ``fairdesk-cli bench validity
--design-space --resolve``; docs/methods.md "The second pass: a sequential rule").
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairdesk.core.validity import (FAMILIES, format_regions, format_table, plot_regions,  # noqa: E402
                                    resolve_unclear, run_design_space, run_validity)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="all", choices=("all",) + FAMILIES)
    ap.add_argument("--runs", type=int)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="validity.json")
    ap.add_argument("--design-space", action="store_true", help="the random-design map instead of the families")
    ap.add_argument("--designs", type=int, default=300)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--png")
    ap.add_argument("--power", action="store_true", help="the group audit's power study (hierarchical vs flat plan)")
    ap.add_argument("--resolve", type=int, metavar="DATASETS", help="with --design-space: the second pass's cap")
    args = ap.parse_args(argv)
    t_cpu, t_wall = time.process_time(), time.monotonic()
    last = [-1]

    def progress(fraction, message):
        pct = int(100 * fraction)
        if pct != last[0] and pct % 5 == 0:
            last[0] = pct
            print(f"{pct:3d}%  {time.monotonic() - t_wall:7.0f} s  {message}", file=sys.stderr, flush=True)

    if args.power:
        import json

        from fairdesk.core.synthetic.group_sim import format_power, power_study

        study = power_study(n_audits=args.runs or 10, n_boot=args.n_boot, seed=args.seed, progress=progress)
        study["seconds_wall"] = time.monotonic() - t_wall
        Path(args.out).write_text(json.dumps(study, indent=1))
        print(format_power(study))
        print(f"{time.monotonic() - t_wall:.0f} s wall, {time.process_time() - t_cpu:.0f} s CPU -> {args.out}")
        return 0
    if args.design_space:
        ds = run_design_space(args.designs, seed=args.seed, n_boot=args.n_boot, progress=progress)
        if args.resolve:
            ds = resolve_unclear(ds, args.resolve, progress=progress)
        Path(args.out).write_text(ds.to_json())
        print(format_regions(ds))
        if args.png:
            plot_regions(ds, args.png)
        rows = ds.rows
        print(f"{ds.config.get('designs_total', args.designs)} designs, {len(rows)} tests and intervals scored; "
              f"{time.monotonic() - t_wall:.0f} s wall, {time.process_time() - t_cpu:.0f} s CPU -> {args.out}")
        return 0
    result = run_validity(args.family, runs=args.runs, seed=args.seed, n=args.n, progress=progress)
    Path(args.out).write_text(result.to_json())
    print(format_table(result))
    for note in result.notes:
        print("note:", note)
    for r in result.rows:
        print(f"{r.family}/{r.kind}: {r.design}: {r.rejections}/{r.runs} = {r.rate:.3f} "
              f"[{r.ci_low:.3f}, {r.ci_high:.3f}], {r.seconds / max(r.runs, 1):.2f} s CPU per run")
    print(f"{time.monotonic() - t_wall:.0f} s wall, {time.process_time() - t_cpu:.0f} s CPU -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
