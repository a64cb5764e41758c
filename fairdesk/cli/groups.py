"""Group-gap commands of ``fairdesk-cli``: ``audit groups``, ``validate``, ``report`` and ``train tabular``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fairdesk.console import say
from fairdesk.cli.args import (add_executor, add_html, add_release_json, add_roles, column_roles, drop_groups,
                               executor_spec, split_list)
from fairdesk.cli.progress import TerminalProgress
from fairdesk.core.errors import FairDeskError
from fairdesk.core.guard import guard_outputs


def cmd_audit_groups(args: argparse.Namespace) -> int:
    """The group audit through the GUI's jobs: :func:`~fairdesk.core.data.tables.import_table` then
    :func:`~fairdesk.jobs.groups.audit_groups`, on a scratch project (:mod:`fairdesk.cli.outputs`)."""
    from fairdesk.cli.outputs import run_table_audit
    from fairdesk.core.audits.groups import GroupAuditPlan, GroupAuditResult, comparison_counts, tests_text
    from fairdesk.jobs.groups import audit_groups

    roles = column_roles(args)
    if args.threshold is None:
        raise FairDeskError("audit groups needs --threshold: the score at which the model flags a patient (e.g. "
                            "--threshold 0.3), or --threshold best_f1 to choose it per task on the validation split.")
    plan = GroupAuditPlan(roles=roles, metrics=tuple(args.metric or ("parity", "recall", "specificity")),
                          gap_rule=args.gap_rule, threshold=args.threshold, bins=tuple(args.bins or (2, 5)),
                          intersections=tuple(tuple(split_list([c])) for c in args.intersect or ()),
                          tasks=tuple(split_list(args.tasks)) or None, n_boot=args.n_boot, seed=args.seed,
                          alpha=args.alpha, min_group_size=args.min_group_size,
                          min_denominator=args.min_denominator,
                          drop_groups=drop_groups(args.drop_group), family=args.family or "audit",
                          correction=args.correction or "bh", margin=args.margin,
                          calibration=not args.no_calibration,
                          calibration_own_family=args.calibration_family == "own",
                          procedure=args.procedure or ("flat" if args.family or args.correction
                                                       or args.calibration_family == "shared" else "hierarchical"),
                          primary=tuple(split_list(args.primary)) if args.primary else ("parity", "recall",
                                                                                         "specificity"))
    guard_outputs([("--json", args.json), ("--release-json", args.release_json), ("--pdf", args.pdf),
                   ("--html", args.html)], inputs=[("the data table", args.data)],
                  project=("the project (--project)", args.project))
    doc = run_table_audit(args, roles, audit_groups, plan, executor=executor_spec(args))
    result = GroupAuditResult.from_dict(doc)
    for warning in dict.fromkeys(result.warnings):  # the data warnings of the JSON/PDF, each once, on stderr
        say(f"fairdesk-cli: warning: {' '.join(str(warning).split())}", file=sys.stderr)
    c = comparison_counts(result)
    say(f"{c['total']} comparisons: {c['differs']} differ, {c['equivalent']} equivalent within ±{plan.margin:g}, "
        f"{c['inconclusive']} inconclusive ({plan_words(plan)}; {tests_text(c)}); "
          f"{c['rows']} result rows -> {args.json}" + (f", {args.pdf}" if args.pdf else ""))
    return 0


def plan_words(plan) -> str:
    """The testing plan in a few words for the CLI's summary line."""
    if plan.procedure == "hierarchical":
        return f"hierarchical plan, primary {','.join(plan.primary)}"
    return f"flat plan: {plan.correction}, family {plan.family}"


def cmd_validate(args: argparse.Namespace) -> int:
    from fairdesk.core.data.loaders import load_table
    from fairdesk.core.data.schema import validate

    roles = column_roles(args)
    report = validate(load_table(args.data, columns=roles.all_columns(), missing=tuple(args.missing_value or ())),
                      roles, args.min_group_size)
    say(report.text())
    return 0 if report.ok else 2


def cmd_report(args: argparse.Namespace) -> int:
    """``report --pdf`` (the PDF of a stored audit) or ``report model-card --out`` (its model card)."""
    if args.what == "compare":
        return cmd_report_compare(args)
    if len(args.audit) != 1:
        raise FairDeskError(f"Give one --audit ID (it was given {len(args.audit)}); two are for 'report compare'.")
    args.audit = args.audit[0]
    if args.what == "model-card":
        return cmd_model_card(args)
    for option in ("out", "markdown", "intended_use", "intended_use_file", "limitation"):
        if getattr(args, option):
            raise FairDeskError(f"--{option.replace('_', '-')} belongs to 'report model-card'; the report "
                                "takes --pdf or --html.")
    if not args.pdf and not args.html:
        raise FairDeskError("Give --pdf FILE for the PDF report, --html FILE for the HTML report, or "
                            "'report model-card --out FILE' for the model card.")
    from fairdesk.jobs.reports import export_html, export_report

    guard_outputs([("--pdf", args.pdf), ("--html", args.html)], project=("the project (--project)", args.project))
    for export, out in ((export_report, args.pdf), (export_html, args.html)):
        if out:
            path = export(args.project, args.audit, out, suppress_k=args.suppress_k)
            say(f"report written to {path}")
    return 0


def cmd_report_compare(args: argparse.Namespace) -> int:
    """``report compare --project P --audit A --audit B --pdf OUT``: what changed between two stored group audits."""
    from fairdesk.core.compare import comparison_sentences
    from fairdesk.jobs.compare import compare_stored, export_comparison

    for option in ("out", "markdown", "intended_use", "intended_use_file", "limitation"):
        if getattr(args, option):
            raise FairDeskError(f"--{option.replace('_', '-')} belongs to 'report model-card'; 'report compare' "
                                "takes --pdf.")
    if args.html:
        raise FairDeskError("'report compare' writes its report as a PDF (--pdf), not --html.")
    if len(args.audit) != 2:
        raise FairDeskError(f"'report compare' needs two audits: --audit A --audit B (it was given "
                            f"{len(args.audit)}).")
    if args.pdf:
        guard_outputs([("--pdf", args.pdf)], project=("the project (--project)", args.project))
    cmp = compare_stored(args.project, *args.audit)
    for line in comparison_sentences(cmp):
        say(line)
    if args.pdf:
        path = export_comparison(args.project, *args.audit, args.pdf, suppress_k=args.suppress_k)
        say(f"comparison written to {path}")
    return 0


def cmd_model_card(args: argparse.Namespace) -> int:
    """``report model-card``: the fairness and equity part of an applied model card, as JSON (and Markdown)."""
    from fairdesk.jobs.reports import export_model_card

    if args.pdf or args.html:
        raise FairDeskError("'report model-card' writes JSON (--out) and Markdown (--markdown), not --pdf or --html; "
                            "for the report leave out 'model-card'.")
    if not args.out:
        raise FairDeskError("Give --out FILE.json for the model card.")
    if args.intended_use and args.intended_use_file:
        raise FairDeskError("Give the intended use once: --intended-use TEXT or --intended-use-file FILE.")
    outputs = [("--out", args.out), ("--markdown", args.markdown)]
    guard_outputs(outputs, inputs=[("--intended-use-file", args.intended_use_file)],
                  project=("the project (--project)", args.project))
    use = args.intended_use
    if args.intended_use_file:
        path = Path(args.intended_use_file)
        try:
            use = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise FairDeskError(f"--intended-use-file {path} is not UTF-8 text; save it as plain text.") from None
        except OSError as err:
            raise FairDeskError(f"Cannot read --intended-use-file {path} ({err.strerror or err}).") from None
    path = export_model_card(args.project, args.audit, args.out, intended_use=use, limitations=args.limitation or (),
                             suppress_k=args.suppress_k, out_markdown=args.markdown)
    say(f"model card written to {path}" + (f" and {args.markdown}" if args.markdown else "") +
          ("" if use and use.strip() else " (no intended use given: the card says it was not stated)"))
    return 0


def cmd_train_tabular(args: argparse.Namespace) -> int:
    from fairdesk.core.data.loaders import load_table
    from fairdesk.core.export import write_table
    from fairdesk.core.models.tabular import TrainSpec, train_and_predict

    guard_outputs([("--out", args.out)], inputs=[("the data table", args.data)])
    df = load_table(args.data)
    labels = split_list(args.labels)
    tasks = {c[len(args.label_prefix):] if c.startswith(args.label_prefix) else c: c for c in labels} if labels \
        else {c[len(args.label_prefix):]: c for c in df.columns if c.startswith(args.label_prefix)}
    if not tasks:
        raise FairDeskError(f"No label columns: give --labels or name them with the prefix '{args.label_prefix}'.")
    features = split_list(args.features) or [c for c in df.columns if c.startswith(args.feature_prefix)]
    if not features:
        raise FairDeskError(f"No feature columns: give --features or name them with the prefix "
                            f"'{args.feature_prefix}'.")
    spec = TrainSpec(kind=args.kind, features=features, tasks=tasks, patient_id=args.patient_id,
                     id_columns=split_list(args.id_columns), passthrough=split_list(args.keep), seed=args.seed,
                     threads=args.threads)
    progress = TerminalProgress(args.quiet)
    result = train_and_predict(df, spec, progress)
    progress.done()
    out = write_table(result.predictions, args.out)  # spreadsheet-safe CSV or Parquet, atomic
    say(result.metrics.to_string(index=False))
    say(f"predictions written to {out}")
    return 0



def add_audit_groups(audit) -> None:
    """``audit groups`` on the ``audit`` sub-parsers."""
    groups = audit.add_parser("groups", help="group performance gaps and error spread")
    add_roles(groups)
    groups.add_argument("--bins", type=int, action="append", help="bins N for Δ_eo^(N) (repeatable; default 2 and 5)")
    groups.add_argument("--intersect", action="append", help="cross attributes, e.g. sex,ethnicity (repeatable)")
    groups.add_argument("--metric", action="append", choices=["parity", "recall", "specificity"])
    groups.add_argument("--tasks", action="append", help="audit only these tasks (comma-separated)")
    groups.add_argument("--threshold", help="required: the score at which the model flags a patient (e.g. 0.3), "
                        "or best_f1 (chosen per task on 'val' rows); there is no default")
    groups.add_argument("--n-boot", type=int, default=1000)
    groups.add_argument("--seed", type=int, default=0)
    groups.add_argument("--alpha", type=float, default=0.05)
    groups.add_argument("--min-denominator", type=int, default=10,
                        help="rates resting on fewer cases (e.g. positives for recall) are shown but not tested")
    groups.add_argument("--gap-rule", default="max", choices=["max", "one-vs-rest", "between", "to-overall"],
                        help="to-overall is run as one-vs-rest (they always decide alike)")
    groups.add_argument("--procedure", choices=["hierarchical", "flat"],
                        help="testing plan: hierarchical (default: the primary gaps tested task × attribute first, "
                             "then their pairs; each secondary kind a family of its own) or flat (--family, "
                             "--correction; giving either chooses flat)")
    groups.add_argument("--primary", help="the primary measures of the hierarchical plan, comma-separated (default "
                                          "parity,recall,specificity; auroc and auprc may be added)")
    groups.add_argument("--family", choices=["audit", "task", "attribute-group-measure"],
                        help="flat plan's correction family: the whole audit (default), each task, or 001's per "
                             "attribute, group and measure across tasks")
    groups.add_argument("--correction", choices=["bh", "holm"],
                        help="Benjamini–Hochberg (default) or Holm (family-wise); the flat plan's correction and the "
                             "hierarchical plan's in its secondary families")
    groups.add_argument("--margin", type=float, default=0.05,
                        help="equivalence margin for the 'equivalent' verdict (TOST), default 0.05")
    groups.add_argument("--no-calibration", action="store_true",
                        help="skip calibration and discrimination by group (AUROC/AUPRC intervals and gap tests) and "
                             "the ROC/PR/reliability curves (their tables stay empty)")
    groups.add_argument("--calibration-family", default="own", choices=["own", "shared"],
                        help="flat plan: correct the calibration tests in a family of their own next to the gaps' "
                             "(default) or together with the gap tests (shared chooses the flat plan)")
    groups.add_argument("--drop-group", action="append", help="ATTRIBUTE=GROUP to leave out (listed in the report)")
    groups.add_argument("--json", required=True, help="write all results here")
    groups.add_argument("--pdf", help="also write the PDF report here")
    add_html(groups)
    groups.add_argument("--suppress-k", type=int, default=11, help="counts below k show as <k in the report")
    add_release_json(groups)
    groups.add_argument("--project", help="also store the audit in this project file (the GUI can open it)")
    add_executor(groups)
    groups.set_defaults(func=cmd_audit_groups)


def add_validate_and_report(sub) -> None:
    """The top-level ``validate`` and ``report`` commands."""
    val = sub.add_parser("validate", help="check a table against its column roles")
    add_roles(val)
    val.set_defaults(func=cmd_validate)

    # 'report' stays a leaf command so that 'report --project P --audit ID --pdf OUT.pdf' works exactly as before;
    # the optional positional 'what' adds 'report model-card --project P --audit ID --out card.json'.
    rep = sub.add_parser("report", help="write the PDF (--pdf) or HTML (--html) report or the model card (model-card --out) of an "
                                        "audit stored in a project",
                         usage="%(prog)s --project P --audit ID [--pdf OUT.pdf] [--html OUT.html] [--suppress-k K]\n"
                               "       %(prog)s compare --project P --audit A --audit B [--pdf OUT.pdf]\n"
                               "       %(prog)s model-card --project P --audit ID --out CARD.json [--markdown CARD.md] "
                               "[--intended-use TEXT | --intended-use-file FILE] [--limitation TEXT] [--suppress-k K]")
    rep.add_argument("what", nargs="?", choices=["model-card", "compare"],
                     help="model-card: the fairness and equity part of an applied model card (JSON, and Markdown); "
                          "compare: which verdicts changed between two group audits (--audit A --audit B)")
    rep.add_argument("--project", required=True)
    rep.add_argument("--audit", type=int, required=True, action="append",
                     help="the stored audit's id (twice for compare)")
    rep.add_argument("--pdf", help="the PDF report")
    rep.add_argument("--html", metavar="OUT.html", help="the self-contained HTML report (one file, works offline)")
    rep.add_argument("--out", help="model-card: the card as JSON (validates against resources/model_card.schema.json)")
    rep.add_argument("--markdown", help="model-card: also write the card as Markdown here")
    rep.add_argument("--intended-use", help="model-card: the model's intended use, in your words")
    rep.add_argument("--intended-use-file", help="model-card: read the intended use from this UTF-8 text file")
    rep.add_argument("--limitation", action="append", help="model-card: a known limitation (repeatable)")
    rep.add_argument("--suppress-k", type=int, default=11, help="counts below k show as <k")
    rep.set_defaults(func=cmd_report)


def add_train_tabular(train) -> None:
    """``train tabular`` on the ``train`` sub-parsers."""
    tab = train.add_parser("tabular", help="baseline classifiers on a features table, patient-disjoint splits")
    tab.add_argument("data")
    tab.add_argument("--kind", default="logistic_regression",
                     choices=["logistic_regression", "gradient_boosting", "random_forest", "mlp"])
    tab.add_argument("--labels", action="append", help="label columns (default: columns starting with --label-prefix)")
    tab.add_argument("--label-prefix", default="y_")
    tab.add_argument("--features", action="append", help="feature columns (default: --feature-prefix)")
    tab.add_argument("--feature-prefix", default="f_")
    tab.add_argument("--patient-id")
    tab.add_argument("--id-columns", action="append")
    tab.add_argument("--keep", action="append", help="columns copied into the predictions (protected attributes)")
    tab.add_argument("--seed", type=int, default=0)
    tab.add_argument("--threads", type=int, default=1)
    tab.add_argument("--out", required=True, help="predictions file (.csv or .parquet), long format")
    tab.add_argument("--quiet", action="store_true")
    tab.set_defaults(func=cmd_train_tabular)
