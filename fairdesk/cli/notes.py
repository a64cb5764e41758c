"""``fairdesk-cli train notes`` and ``fairdesk-cli audit encoders``: note-level classifiers on frozen clinical-BERT
features and the baseline-vs-debiased encoder comparison (001 §4.1, Tables 5 and D4).

Wired into :mod:`fairdesk.cli` with ``add_note_commands(audit_subparsers, train_subparsers)``. Nothing heavy is
imported here. Errors are :class:`~fairdesk.core.errors.FairDeskError` (exit code 2 through ``fairdesk.cli.main``),
cancel is Ctrl-C (130).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from fairdesk.console import say
from fairdesk.cli.args import add_html, add_release_json, split_list
from fairdesk.cli.progress import TerminalProgress
from fairdesk.core.compute import set_torch_threads


def _spec(args: argparse.Namespace, tasks: list[str], attributes: list[str]):
    from fairdesk.core.errors import DataError
    from fairdesk.core.models.note_classifier import MERGE_C_GRID, NoteClassifierSpec

    if not tasks:
        raise DataError("--tasks needs at least one 0/1 label column of the notes table, e.g. --tasks mortality.")
    grid = _mlp_grid(args.hidden, args.alpha)
    return NoteClassifierSpec(
        tasks=tasks, text_column=args.text_column, patient_id=args.patient_id or None, note_id=args.note_id,
        attributes=attributes, continuous_attributes=split_list(args.continuous_attribute),
        numeric_columns=split_list(args.numeric), max_length=args.max_length, stride=args.stride,
        max_windows=args.max_windows, c_grid=tuple(float(c) for c in split_list(args.c_grid)) or MERGE_C_GRID,
        mlp_grid=grid, max_iter=args.max_iter, val_size=args.val_size, test_size=args.test_size, seed=args.seed,
        batch_size=args.batch_size, device=args.device)


def _mlp_grid(hidden: list[str] | None, alpha: list[str] | None):
    """``--hidden 64 --hidden 64-32 --alpha 1e-4,1e-2`` -> the product grid (default: the module's grid)."""
    from fairdesk.core.errors import DataError
    from fairdesk.core.models.note_classifier import DEFAULT_MLP_GRID

    if not hidden and not alpha:
        return DEFAULT_MLP_GRID
    try:
        sizes = [tuple(int(h) for h in s.split("-")) for s in split_list(hidden)] or sorted(
            {g["hidden_layer_sizes"] for g in DEFAULT_MLP_GRID})
        alphas = [float(a) for a in split_list(alpha)] or sorted({g["alpha"] for g in DEFAULT_MLP_GRID})
    except ValueError as err:
        raise DataError("--hidden takes layer widths joined by '-' (e.g. 64-32) and --alpha numbers (e.g. 1e-4).") \
            from err
    if any(h < 1 for s in sizes for h in s):
        raise DataError("Hidden layer widths must be positive.")
    return tuple({"hidden_layer_sizes": s, "alpha": a} for s in sizes for a in alphas)


def _write_table(df, path: str) -> None:
    from fairdesk.core.export import write_table

    write_table(df, path)  # spreadsheet-safe CSV or Parquet, atomic


def cmd_train_notes(args: argparse.Namespace) -> int:
    from fairdesk.core import atomic
    from fairdesk.core.data.loaders import file_sha256, load_table
    from fairdesk.core.models import note_classifier as nc

    from fairdesk.core.guard import guard_outputs

    guard_outputs([("--out", args.out), ("--json", args.json)], inputs=[("the notes table", args.notes)],
                  models=[("the model folder (--model)", args.model)],
                  project=("the project (--project)", args.project))
    set_torch_threads(args.threads)
    spec = _spec(args, split_list(args.tasks), split_list(args.attribute))
    progress = TerminalProgress(args.quiet)
    if args.project:
        from fairdesk.core.project import Project
        from fairdesk.jobs.notes import train_note_classifiers

        model_id, pred_id = train_note_classifiers(args.project, args.notes, args.model, spec, progress=progress)
        project = Project(args.project)
        preds = project.load_dataset(pred_id)
        info = next(m.info for m in project.models() if m.id == model_id)
        where = f"; stored in {project.path} as model {model_id}, predictions dataset {pred_id}"
    else:
        notes = load_table(args.notes)
        result = nc.train_note_classifiers(notes, args.model, spec, data_sha256=file_sha256(args.notes),
                                           progress=progress)
        preds, info, where = result.predictions, result.to_dict(), ""
    progress.done()
    _write_table(preds, args.out)
    if args.json:
        atomic.write_text(args.json, json.dumps(info, indent=1, ensure_ascii=False, allow_nan=False))
    for m in info["metrics"]:
        auroc, auprc = m.get("test_auroc"), m.get("test_auprc")
        say(f"{m['task']}: test AUROC {auroc if auroc is None else f'{auroc:.3f}'}, AUPRC "
              f"{auprc if auprc is None else f'{auprc:.3f}'}, c {m['c']:g}, threshold {m['threshold']:.3f}")
    enc = info["encoder"]
    say(f"{enc['n_notes']} notes in {enc['n_windows']} windows ({enc['truncated_notes']} truncated), "
          f"{enc['notes_per_second']:.1f} notes/s; predictions -> {args.out}"
          + (f", details -> {args.json}" if args.json else "") + where)
    return 0


def cmd_audit_encoders(args: argparse.Namespace) -> int:
    """The encoder comparison through the GUI's job :func:`~fairdesk.jobs.notes.compare_encoders_job` (on
    ``--project`` or a scratch project), ``--json`` from the stored document, ``--pdf`` through ``export_report``."""
    from fairdesk.cli.outputs import audit_project, release_of, stored_where, write_outputs
    from fairdesk.core.errors import DataError
    from fairdesk.core.guard import guard_outputs
    from fairdesk.jobs.notes import compare_encoders_job

    encoders = {"baseline": args.baseline}
    if args.debiased:
        encoders["debiased"] = args.debiased
    for item in args.encoder or []:
        if "=" not in item:
            raise DataError(f"--encoder takes NAME=DIR, got '{item}'.")
        name, path = item.split("=", 1)
        if name.strip() in encoders:
            raise DataError(f"Encoder name '{name.strip()}' is used twice; give each encoder its own name.")
        encoders[name.strip()] = path.strip()
    guard_outputs([("--json", args.json), ("--release-json", args.release_json), ("--pdf", args.pdf), ("--html", args.html)],
                  inputs=[("the notes table", args.notes)],
                  models=[(f"the encoder folder '{n}'", p) for n, p in encoders.items()],
                  project=("the project (--project)", args.project))
    set_torch_threads(args.threads)
    tasks = split_list(args.tasks)
    spec = _spec(args, tasks, [args.attribute])
    progress = TerminalProgress(args.quiet)
    with audit_project(args.project) as project:
        audit_id = compare_encoders_job(project, args.notes, encoders, tasks, args.attribute, spec,
                                        n_boot=args.n_boot, min_group_size=args.min_group_size, progress=progress)
        progress.done()
        doc = write_outputs(project, audit_id, args.json, args.pdf, args.suppress_k, release_of(args),
                            html_path=args.html)
    where = f"; {stored_where(args.project, audit_id)}" if args.project else ""
    for name in encoders:
        rows = [r for r in doc["results"] if r["encoder"] == name]
        n_sig = sum(int(g.get("n_significant_bh") or 0) for g in doc["gaps"] if g["encoder"] == name)
        probe = doc["probe"].get(name) or {}
        aurocs = ", ".join(f"{r['task']} {r['test_auroc']:.3f}" if r.get("test_auroc") is not None
                           else f"{r['task']} –" for r in rows)
        say(f"{name}: test AUROC {aurocs}; {n_sig} significant gap(s) after BH; probe accuracy "
              f"{probe.get('accuracy', float('nan')):.3f} (majority {probe.get('majority', float('nan')):.3f})")
    say(f"results -> {args.json}" + (f", {args.pdf}" if args.pdf else "") + where)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--notes", required=True, help="notes table (CSV/Parquet): text, 0/1 task labels, patient id, "
                                                  "protected attributes")
    p.add_argument("--tasks", required=True, action="append", help="0/1 label columns, one classifier each "
                                                                   "(comma-separated)")
    p.add_argument("--text-column", default="text")
    p.add_argument("--patient-id", default="patient_id", help="patient id column (splits are patient-disjoint); "
                                                              "'' if every note is a different patient")
    p.add_argument("--note-id", help="unique note id column (default: the row number)")
    p.add_argument("--continuous-attribute", action="append", help="continuous attribute carried into the "
                                                                   "predictions, e.g. age")
    p.add_argument("--numeric", action="append", help="numeric columns appended to the features (e.g. age, acuity "
                                                      "scores), standardised on the training notes")
    p.add_argument("--max-length", type=int, help="window length in tokens (default: the model's maximum)")
    p.add_argument("--stride", type=int, help="tokens between window starts (default: no overlap)")
    p.add_argument("--max-windows", type=int, default=10, help="windows per note; the rest is truncated (counted)")
    p.add_argument("--c-grid", help="merge constants c to try (comma-separated; default: the METHODS grid)")
    p.add_argument("--hidden", action="append", help="MLP hidden sizes to try, e.g. 64 or 64-32 (repeatable)")
    p.add_argument("--alpha", action="append", help="MLP L2 penalties to try (comma-separated)")
    p.add_argument("--max-iter", type=int, default=200)
    p.add_argument("--val-size", type=float, default=0.15)
    p.add_argument("--test-size", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32, help="windows per encoder forward pass")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--project", help="also store the result in this project file (the GUI can open it)")
    p.add_argument("--quiet", action="store_true")


def add_note_commands(subparsers_audit, subparsers_train) -> None:
    """Add ``train notes`` and ``audit encoders`` to the CLI's ``train`` and ``audit`` sub-parsers."""
    t = subparsers_train.add_parser(
        "notes", help="note-level classifiers on frozen masked-LM features (001 §4.1)",
        description="Sliding windows (at most --max-windows per note), last-4-layer [CLS] features of the frozen "
                    "encoder, an MLP grid selected with the merge constant c by validation AUPRC, best-F1 threshold, "
                    "patient-disjoint splits; writes long-format predictions the group audit reads.")
    t.add_argument("--model", required=True, help="local masked-LM folder (config, weights, tokenizer)")
    t.add_argument("--attribute", action="append", help="protected attribute columns carried into the predictions")
    t.add_argument("--out", required=True, help="predictions file (.csv or .parquet), long format")
    t.add_argument("--json", help="also write the per-task metrics, chosen settings and provenance here")
    _common(t)
    t.set_defaults(func=cmd_train_notes)

    a = subparsers_audit.add_parser(
        "encoders", help="baseline vs debiased encoder: downstream performance, gap counts, attribute probe",
        description="Train note classifiers on each encoder's frozen features, audit their predictions for group "
                    "gaps (BH-corrected counts, 001 Table 5) and probe the features for the attribute (Table D4).")
    a.add_argument("--baseline", required=True, help="baseline encoder folder")
    a.add_argument("--debiased", help="debiased encoder folder")
    a.add_argument("--encoder", action="append", metavar="NAME=DIR", help="further encoders (repeatable)")
    a.add_argument("--attribute", required=True, help="protected attribute column (gaps and probe)")
    a.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates of the group audit (at least 100)")
    a.add_argument("--min-group-size", type=int, default=30, help="smaller groups are listed, not tested")
    a.add_argument("--json", required=True, help="write the comparison document here")
    a.add_argument("--pdf", help="also write the PDF report here")
    add_html(a)
    a.add_argument("--suppress-k", type=int, default=11, help="counts below k show as <k in the report")
    add_release_json(a)
    _common(a)
    a.set_defaults(func=cmd_audit_encoders)
