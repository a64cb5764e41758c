"""``fairdesk-cli bench``: the built-in audits of the audits (``cit-synthetic``, ``validity``)."""
from __future__ import annotations

import argparse

from fairdesk.console import say
from fairdesk.cli.args import add_executor, executor_spec
from fairdesk.cli.progress import TerminalProgress
from fairdesk.core.guard import guard_outputs
from fairdesk.core.errors import FairDeskError


def cmd_bench_cit_synthetic(args: argparse.Namespace) -> int:
    from fairdesk.core import atomic
    from fairdesk.core.synthetic.cit_benchmark import BenchmarkConfig, run_cit_benchmark
    from fairdesk.core.synthetic.scm import DATASETS

    guard_outputs([("--json", args.json), ("--png", args.png)])
    executor = executor_spec(args)
    cfg = BenchmarkConfig(datasets=DATASETS if args.dataset == "all" else (args.dataset,),
                          n_classifiers=args.classifiers, seed=args.seed,
                          n_confounded_classifiers=args.confounded_classifiers, confounded=not args.no_confounded)
    progress = TerminalProgress(args.quiet)
    result = run_cit_benchmark(cfg, progress, executor=executor)
    progress.done()
    atomic.write_text(args.json, result.to_json())
    if args.png:  # drawn in memory, then written atomically like every other output
        import io

        buf = io.BytesIO()
        result.plot(buf)
        atomic.write_bytes(args.png, buf.getvalue())
    for s in result.summary:
        if s["dataset"] != "all":
            rho = {k: round(v, 2) for k, v in s["spearman_eca"].items() if v is not None}
            say(f"{s['dataset']} ({s['variant']}): Spearman(log10 p, ECA) {rho}")
        else:  # pooled: what each test flags (docs/cit_synthetic_findings.md §2b)
            for key, label, n in (("rejections_low_eca", "flagged, ECA < 0.8", s["n_low_eca"]),
                                  ("rejections_oracles", "flagged, oracles", s["n_oracles"])):
                say(f"all ({s['variant']}) {label}: "
                      + ", ".join(f"{t} {k}/{n}" for t, k in s[key].items()))
    say(f"-> {args.json}")
    return 0


def cmd_bench_validity(args: argparse.Namespace) -> int:
    from fairdesk.core import atomic
    from fairdesk.core.validity import format_table, run_validity

    if args.design_space:
        return cmd_bench_design_space(args)
    if args.power:
        return cmd_bench_power(args)
    for option in ("designs", "png", "region", "resolve"):
        if getattr(args, option) is not None:
            raise FairDeskError(f"--{option} belongs to 'bench validity --design-space'.")
    guard_outputs([("--json", args.json)])
    executor = executor_spec(args)
    progress = TerminalProgress(args.quiet)
    result = run_validity(args.family, runs=args.runs, seed=args.seed, n=args.n, progress=progress,
                          executor=executor)
    progress.done()
    atomic.write_text(args.json, result.to_json())
    say(format_table(result))
    for note in result.notes:
        say(f"note: {note}")
    say("rate: share of simulated runs rejected (null: false alarms of a whole audit after correction; "
          "planted: found); 95% CI: Clopper–Pearson.")
    say(f"-> {args.json}")
    return 0


def cmd_bench_power(args: argparse.Namespace) -> int:
    """``bench validity --power``: the group audit's testing plans on planted harms and null cohorts."""
    import json

    from fairdesk.core import atomic
    from fairdesk.core.synthetic.group_sim import format_power, power_study

    guard_outputs([("--json", args.json)])
    progress = TerminalProgress(args.quiet)
    study = power_study(n_audits=args.runs or 10, n_boot=args.n_boot, seed=args.seed, progress=progress)
    progress.done()
    atomic.write_text(args.json, json.dumps(study, indent=1))
    say(format_power(study))
    say(f"-> {args.json}")
    return 0


def cmd_bench_design_space(args: argparse.Namespace) -> int:
    """``bench validity --design-space``: the size and coverage map over random designs."""
    from fairdesk.core import atomic
    from fairdesk.core.validity import format_regions, parse_regions, plot_regions, resolve_unclear, run_design_space

    if args.executor != "local" or args.scheduler:
        raise FairDeskError("--design-space runs in this process; leave out --executor and --scheduler.")
    designs = 200 if args.designs is None else args.designs
    if designs < 1:
        raise FairDeskError("--designs must be at least 1.")
    if args.n_boot < 100:
        raise FairDeskError("--n-boot must be at least 100.")
    if args.resolve is not None and args.resolve < 1:
        raise FairDeskError("--resolve must be at least 1 (the most data sets the second pass audits).")
    guard_outputs([("--json", args.json), ("--png", args.png)])
    progress = TerminalProgress(args.quiet)
    regions = parse_regions(args.region) if args.region else ()  # a bad region fails before any design runs
    result = run_design_space(designs, seed=args.seed, n_boot=args.n_boot, progress=progress, regions=regions)
    if args.resolve:  # its own bar: the first pass's ended at 100%
        progress.done()
        progress = TerminalProgress(args.quiet)
        result = resolve_unclear(result, args.resolve, progress=progress)
    progress.done()
    atomic.write_text(args.json, result.to_json())
    say(format_regions(result))
    if args.png:
        plot_regions(result, args.png)
    say(f"{result.config.get('designs_total', designs)} designs, "
          f"{designs + result.config.get('resolve_audited', 0)} data sets in {result.elapsed_s:.0f} s -> {args.json}"
          + (f", {args.png}" if args.png else ""))
    return 0


def add_bench_commands(sub) -> None:
    """The ``bench`` command and its sub-commands."""
    bench = sub.add_parser("bench", help="built-in audits of the audits").add_subparsers(dest="bench", required=True)
    cs = bench.add_parser("cit-synthetic", help="004 Fig. 2 study on the synthetic SCM with true counterfactuals")
    cs.add_argument("--dataset", default="all", choices=["all", "linear", "quadratic", "exponential", "interactive",
                                                         "log-exponent", "sin"])
    cs.add_argument("--classifiers", type=int, default=100)
    cs.add_argument("--confounded-classifiers", type=int, default=10)
    cs.add_argument("--no-confounded", action="store_true")
    cs.add_argument("--seed", type=int, default=0)
    cs.add_argument("--json", required=True)
    cs.add_argument("--png", help="log10 p against ECA figure")
    cs.add_argument("--quiet", action="store_true")
    add_executor(cs)
    cs.set_defaults(func=cmd_bench_cit_synthetic)
    va = bench.add_parser("validity", help="null and planted simulations of each audit family: rejection rates "
                                           "with binomial 95%% CIs")
    va.add_argument("--family", default="all",
                    choices=["all", "groups", "mlm", "cit", "ctf", "age", "slices", "calibration", "monitor"])
    va.add_argument("--runs", type=int, help="simulated runs per design (default: 40 groups, 200 mlm, 100 cit, 100 monitor, "
                                             "100 ctf, 200 age)")
    va.add_argument("--n", type=int, default=1000, help="sample size of the cit family's simulations")
    va.add_argument("--seed", type=int, default=0)
    va.add_argument("--power", action="store_true",
                    help="the group audit's power study: planted harms at per-test p about 1e-3 among hundreds of "
                         "null comparisons and null cohorts of the same shape, hierarchical and flat plans side by "
                         "side (--runs cohorts of each, default 10)")
    va.add_argument("--design-space", action="store_true",
                    help="draw group audits at random from the stated design space and map every test's size and "
                         "interval's coverage by region (instead of the fixed designs)")
    va.add_argument("--designs", type=int, help="with --design-space: designs drawn (default 200)")
    va.add_argument("--n-boot", type=int, default=200, help="with --design-space: bootstrap replicates per audit")
    va.add_argument("--png", help="with --design-space: the map as a figure")
    va.add_argument("--region", action="append", metavar="'MEASURE | REGION'",
                    help="with --design-space: draw every design so that it reaches this region of the map (as the "
                         "map prints it, e.g. 'parity gap | independent, >=300 cases'; repeatable) — to resolve "
                         "an unclear region")
    va.add_argument("--resolve", type=int, metavar="DATASETS",
                    help="with --design-space: then decide the regions the map leaves unclear, auditing at most "
                         "DATASETS more data sets: at each of up to 4 looks one more data set of each open region's "
                         "own designs and 2 new designs targeted to it, until its interval lies wholly on one side "
                         "of its target; print the map of both passes")
    va.add_argument("--json", required=True, help="write every row (rates, CIs, targets, settings) here")
    va.add_argument("--quiet", action="store_true")
    add_executor(va)
    va.set_defaults(func=cmd_bench_validity)
