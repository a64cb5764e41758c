"""The synthetic counterfactual-invariance study (004 Fig. 2, run honestly) — METHODS §6, issue 4 point 4.

Runs :func:`fairdesk.core.synthetic.cit_benchmark.run_cit_benchmark` on one core and prints, per dataset and
variant, the Spearman correlation of log10 p with ECA (and with the interventional gap), the power on base
classifiers with ECA < 0.8 and the false-positive rate on the oracles, for every test. Writes the full JSON and the
log10 p vs ECA figures.

    .venv/bin/python benchmarks/bench_cit_synthetic.py --out-dir /tmp/cit_synthetic            # full study
    .venv/bin/python benchmarks/bench_cit_synthetic.py --dataset sin --classifiers 20 --quick   # a few minutes

The full study (6 datasets × 100 base classifiers + 11 oracles, plus the confounded variant with 10 base
classifiers and 11 oracles per dataset) took 915 s of CPU (973 s wall) on one core of the 2-core CI machine with
the pre-issue-9 default (logistic nuisances). With the "auto" nuisances of issue 9, a reduced run
(``--classifiers 20``: 312 classifiers) took 417 s CPU, 1.34 s per classifier.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairdesk.core.synthetic.cit_benchmark import TESTS, BenchmarkConfig, run_cit_benchmark  # noqa: E402
from fairdesk.core.synthetic.scm import DATASETS  # noqa: E402


def _fmt(v, digits=2):
    return "  –  " if v is None else f"{v:+.{digits}f}" if digits == 2 else f"{v:.{digits}f}"


def print_summary(result) -> None:
    short = {"cit_p": "CIT-LR", "cit_cf_p": "CIT-xfit", "wgcm_p": "wGCM*", "wgcm_alone_p": "w-alone",
             "wgcm_bonf_p": "w-Bonf", "wgcm_pergroup_p": "w-group", "wgcm_logistic_p": "w-logit", "gcm_p": "GCM",
             "dp_p": "DP", "eo_p": "EO"}
    head = "".join(f"{short[t]:>9}" for t in TESTS)
    for s in result.summary:
        label = f"{s['dataset']} / {s['variant']}"
        print(f"\n== {label}: {s['n_base']} base classifiers ({s['n_low_eca']} with ECA < "
              f"{result.config.eca_threshold}), {s['n_oracles']} oracles"
              + (f", median ECA {s['eca_median']:.3f}, {s['n_constant']} constant" if s.get("eca_median") else ""))
        print(f"{'':28}{head}")
        if "spearman_eca" in s:
            print(f"{'Spearman(log10 p, ECA)':28}" + "".join(f"{_fmt(s['spearman_eca'][t]):>9}" for t in TESTS))
            print(f"{'Spearman(log10 p, -gap)':28}" + "".join(f"{_fmt(s['spearman_gap'][t]):>9}" for t in TESTS))
        print(f"{'power (ECA < thr)':28}" + "".join(f"{_fmt(s['power_low_eca'][t], 3):>9}" for t in TESTS))
        print(f"{'FPR on oracles':28}" + "".join(f"{_fmt(s['fpr_oracles'][t], 3):>9}" for t in TESTS))
    print("\n* FairDesk's default test (weighted GCM, sequential fitting).")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="all", help=f"one of {', '.join(DATASETS)} or 'all'")
    ap.add_argument("--classifiers", type=int, default=100, help="base classifiers per dataset (10 types × seeds)")
    ap.add_argument("--confounded-classifiers", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smaller samples (n_train 500, n_audit 1000)")
    ap.add_argument("--out-dir", default="cit_synthetic_out")
    args = ap.parse_args(argv)

    datasets = DATASETS if args.dataset == "all" else (args.dataset,)
    extra = dict(n_train=500, n_audit=1000, n_eca=2000, gap_units=150) if args.quick else {}
    cfg = BenchmarkConfig(datasets=datasets, n_classifiers=args.classifiers, seed=args.seed,
                          n_confounded_classifiers=args.confounded_classifiers, **extra)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_cpu, t_wall = time.process_time(), time.monotonic()
    last = [-1]

    def progress(fraction, message):
        pct = int(100 * fraction)
        if pct != last[0] and pct % 5 == 0:
            last[0] = pct
            print(f"{pct:3d}%  {time.monotonic() - t_wall:7.0f} s  {message}", file=sys.stderr, flush=True)

    result = run_cit_benchmark(cfg, progress)
    cpu, wall = time.process_time() - t_cpu, time.monotonic() - t_wall
    (out / "cit_synthetic.json").write_text(result.to_json())
    result.plot(out / "cit_synthetic_paper.png", tests=("cit_p", "cit_cf_p", "wgcm_p", "dp_p", "eo_p"))
    result.plot(out / "cit_synthetic_paper_gap.png", tests=("cit_p", "cit_cf_p", "wgcm_p", "dp_p", "eo_p"),
                x="rms_gap")
    if cfg.confounded:
        result.plot(out / "cit_synthetic_confounded.png", tests=("cit_p", "cit_cf_p", "wgcm_p", "dp_p", "eo_p"),
                    variant="confounded")
    print_summary(result)
    print(f"\n{len(result.records)} classifiers evaluated in {wall:.0f} s wall, {cpu:.0f} s CPU "
          f"({cpu / max(len(result.records), 1):.2f} s CPU each); results in {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
