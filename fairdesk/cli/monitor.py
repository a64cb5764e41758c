"""``fairdesk-cli monitor``: watch a deployed model's fairness over periods, with anytime-valid alarms, through the
GUI's job (:func:`fairdesk.jobs.monitor.watch_model`)."""
from __future__ import annotations

import argparse
import sys

from fairdesk.console import say
from fairdesk.core.errors import FairDeskError
from fairdesk.core.guard import guard_outputs


def html_builder():
    """``fairdesk.core.kinds.build_html`` (the report tree as HTML) when this version has it, else None."""
    from fairdesk.core import kinds

    return getattr(kinds, "build_html", None)


def cmd_monitor(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fairdesk.cli.args import split_list
    from fairdesk.cli.outputs import copy_into, scratch_project, stored_where, write_json, write_pdf
    from fairdesk.cli.progress import TerminalProgress
    from fairdesk.core.audits.monitor import MonitorPlan
    from fairdesk.core.project import Project
    from fairdesk.core.reports.monitor import alarm_sentences
    from fairdesk.core.data.tables import import_table
    from fairdesk.jobs.monitor import previous_stream, watch_model

    if args.threshold is None:
        raise FairDeskError("monitor needs --threshold: the score at which the model flags a patient (e.g. "
                            "--threshold 0.3).")
    try:
        threshold = float(args.threshold)
    except ValueError:
        raise FairDeskError(f"--threshold must be a number between 0 and 1, not {args.threshold!r}.") from None
    plan = MonitorPlan(label=args.label, score=args.score, attributes=tuple(args.attribute or ()),
                       threshold=threshold, period=args.period, task=args.task, patient_id=args.patient_id,
                       metrics=tuple(split_list(args.metric)) or None, margin=args.margin, alpha=args.alpha,
                       suppress_k=args.suppress_k)
    guard_outputs([("--json", args.json), ("--pdf", args.pdf), ("--html", args.html)],
                  inputs=[("the data table", args.data)], project=("the project (--project)", args.project))
    if args.html and html_builder() is None:
        raise FairDeskError("HTML reports are not available in this version of FairDesk; leave out --html (the PDF "
                            "report, --pdf, says the same).")
    progress = TerminalProgress(args.quiet)
    with scratch_project() as scratch:
        if args.project and Path(args.project).exists():
            # the stream so far (its latest audit and dataset) comes along, so the job sees the stored periods; the
            # new audit goes back into --project in one transaction afterwards
            prev, _ = previous_stream(Project(args.project, create=False), plan)
            if prev is not None:
                Project(scratch).copy_audit(Project(args.project, create=False), prev)
        dataset_id = import_table(scratch, args.data, missing=tuple(args.missing_value or ()),
                                  progress=lambda f, m: progress(0.05 * f, m))
        audit_id = watch_model(scratch, dataset_id, plan, progress=lambda f, m: progress(0.05 + 0.95 * f, m))
        progress.done()
        doc = write_json(scratch, audit_id, args.json)
        if args.project:
            say(stored_where(args.project, copy_into(args.project, scratch, audit_id)))
        if args.pdf:
            write_pdf(scratch, audit_id, args.pdf, args.suppress_k)
        if args.html:
            from fairdesk.core.kinds import ReportSettings

            html_builder()("monitor", doc, args.html, ReportSettings(suppress_k=args.suppress_k))
    for warning in dict.fromkeys(doc.get("warnings") or []):
        say(f"fairdesk-cli: warning: {' '.join(str(warning).split())}", file=sys.stderr)
    stream = doc.get("stream") or {}
    added, updated = stream.get("added") or [], stream.get("updated") or []
    say(f"{len(doc.get('periods') or [])} periods watched ({len(added)} added"
          + (f", {len(updated)} with late labels" if updated else "") + f"), {doc.get('comparisons')} comparisons "
          f"at α = {plan.alpha:g} for the whole monitor: {_alarms(len(doc.get('alarms') or []))} -> {args.json}"
          + "".join(f", {p}" for p in (args.pdf, args.html) if p))
    for line in alarm_sentences(doc, args.suppress_k, limit=5):
        say(f"  {line}")
    return 0


def add_monitor_command(sub) -> None:
    """``monitor`` on the top-level sub-parsers (the exact contract of the monitor)."""
    p = sub.add_parser("monitor", help="watch a deployed model's fairness over periods with anytime-valid alarms")
    p.add_argument("data", help="CSV or Parquet file of predictions, one row per prediction, with a period column")
    p.add_argument("--label", required=True, help="true outcome column (0/1; empty: not known yet, a late label)")
    p.add_argument("--score", required=True, help="model probability column in [0, 1]")
    p.add_argument("--task", help="task column (long format): each task is watched on its own")
    p.add_argument("--attribute", action="append", required=True,
                   help="attribute whose groups are watched, each against the rest (repeatable)")
    p.add_argument("--threshold", required=True, help="the score at which the model flags a patient (e.g. 0.3)")
    p.add_argument("--period", required=True, help="period column, sortable as text (e.g. 2026-01)")
    p.add_argument("--patient-id", help="patient id column: a patient's rows in one period count as one cluster")
    p.add_argument("--metric", action="extend", nargs="+", metavar="recall|specificity|parity",
                   help="rates watched: one or more, repeatable or comma-separated (default recall specificity)")
    p.add_argument("--margin", type=float, default=0.05,
                   help="a gap within ±margin does not matter: a sequence inside it says so (default 0.05)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="chance of any false alarm of the whole monitor, over any number of periods (default 0.05)")
    p.add_argument("--json", required=True, help="write the monitor's document here")
    p.add_argument("--pdf", help="also write the PDF report here")
    p.add_argument("--html", help="also write the report as HTML here")
    p.add_argument("--project", help="the project holding the stream: each call adds the periods not stored yet")
    p.add_argument("--suppress-k", type=int, default=11, help="small-cell k: counts below k show as <k")
    p.add_argument("--missing-value", action="append", metavar="TEXT", help="a text that means a missing value")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_monitor)


def _alarms(n: int) -> str:
    return f"{n} alarm{'' if n == 1 else 's'}"
