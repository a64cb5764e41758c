"""``fairdesk-cli audit slices``: the slices nobody named, through the GUI's job."""
from __future__ import annotations

import argparse
import sys

from fairdesk.console import say
from fairdesk.cli.args import add_html, add_release_json
from fairdesk.core.errors import FairDeskError
from fairdesk.core.guard import guard_outputs


def cmd_audit_slices(args: argparse.Namespace) -> int:
    """:func:`~fairdesk.jobs.slices.audit_slices` through :func:`fairdesk.cli.outputs.run_table_audit`, as
    ``audit groups`` runs its job."""
    from fairdesk.cli.args import column_roles
    from fairdesk.cli.outputs import run_table_audit
    from fairdesk.core.audits.slices import SliceAuditPlan
    from fairdesk.core.reports.slices import slice_sentences
    from fairdesk.jobs.slices import audit_slices

    if args.threshold is None:
        raise FairDeskError("audit slices needs --threshold: the score at which the model flags a patient (e.g. "
                            "--threshold 0.3), or --threshold best_f1 to choose it per task on the discovery rows.")
    if args.bins is not None and not args.continuous_attribute:
        raise FairDeskError("--bins cuts a --continuous-attribute into bins; give the continuous attribute too, or "
                            "leave out --bins.")
    args.sample_id = None
    roles = column_roles(args)
    plan = SliceAuditPlan(roles=roles, threshold=args.threshold, metric=args.metric, bins=args.bins or 5,
                          max_order=args.max_order, min_size=args.min_size, carry=args.carry,
                          discovery_fraction=args.discovery_fraction, seed=args.seed, alpha=args.alpha,
                          margin=args.margin, n_boot=args.n_boot, suppress_k=args.suppress_k,
                          evaluate_on=args.evaluate_on)
    guard_outputs([("--json", args.json), ("--release-json", args.release_json), ("--pdf", args.pdf), ("--html", args.html)],
                  inputs=[("the data table", args.data)],
                  project=("the project (--project)", args.project))
    doc = run_table_audit(args, roles, audit_slices, plan)
    for warning in dict.fromkeys(doc.get("warnings") or []):
        say(f"fairdesk-cli: warning: {' '.join(str(warning).split())}", file=sys.stderr)
    c = doc["counts"]
    say(f"{doc['searched']:,} slices searched on {doc['split']['discovery_rows']:,} discovery rows, "
          f"{c['total']} carried to {doc['split']['confirmation_rows']:,} confirmation rows: {c['differs']} differ, "
          f"{c['equivalent']} equivalent within ±{plan.margin:g}, {c['inconclusive']} inconclusive -> {args.json}"
          + (f", {args.pdf}" if args.pdf else ""))
    for line in slice_sentences(doc, args.suppress_k, limit=5):
        say(f"  {line}")
    return 0


def add_audit_slices(audit) -> None:
    """``audit slices`` on the ``audit`` sub-parsers (its command-line contract)."""
    p = audit.add_parser("slices", help="search slices nobody named (intersections of attribute values) on "
                                        "discovery rows and test the worst on confirmation rows")
    p.add_argument("data", help="CSV or Parquet file, one row per sample (and task)")
    p.add_argument("--label", required=True, help="true outcome column (0/1)")
    p.add_argument("--score", required=True, help="model probability column in [0, 1]")
    p.add_argument("--task", help="task column (long format): each task is searched and confirmed on its own")
    p.add_argument("--attribute", action="append", help="categorical attribute to search over (repeatable)")
    p.add_argument("--continuous-attribute", action="append",
                   help="continuous attribute (e.g. age), cut into --bins equal-frequency bins (repeatable)")
    p.add_argument("--bins", type=int, help="bins of each continuous attribute (default 5)")
    p.add_argument("--threshold", help="required: the score at which the model flags a patient (e.g. 0.3), or "
                   "best_f1 (chosen per task on the discovery rows); there is no default")
    p.add_argument("--metric", default="recall", choices=["recall", "specificity", "parity", "error"],
                   help="the rate compared with the rest (default recall)")
    p.add_argument("--max-order", type=int, default=3, help="the most attribute values a slice combines (1–4)")
    p.add_argument("--min-size", type=int, default=50, help="the fewest rows of a searched slice (default 50)")
    p.add_argument("--carry", type=int, default=20,
                   help="slices carried from the search to the confirmation test (default 20)")
    p.add_argument("--discovery-fraction", type=float, default=0.5,
                   help="share of the patients (rows) the search sees; the rest confirm (default 0.5)")
    p.add_argument("--patient-id", help="patient id column: the split keeps each patient's rows together")
    p.add_argument("--split", help="split column (train/val/test): the search and the confirmation use only the "
                                   "--evaluate-on rows (default: all rows when no split column is given)")
    p.add_argument("--evaluate-on", default="test", help="with --split: the rows that judge the model (default test)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--margin", type=float, default=0.05,
                   help="equivalence margin for the 'equivalent' verdict (TOST), default 0.05")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates of each test's design effect")
    p.add_argument("--json", required=True, help="write all results here")
    p.add_argument("--pdf", help="also write the PDF report here")
    add_html(p)
    p.add_argument("--suppress-k", type=int, default=11,
                   help="small-cell k: slices with fewer rows or cases are not searched; counts below k show as <k")
    add_release_json(p)
    p.add_argument("--project", help="also store the audit in this project file (the GUI can open it)")
    p.add_argument("--missing-value", action="append", metavar="TEXT", help="a text that means a missing value")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_audit_slices)
