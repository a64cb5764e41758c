"""Counterfactual token fairness commands (METHODS §5)::

    fairdesk-cli data madlibs --out FILE.csv
    fairdesk-cli data ctf-demo --out FILE.csv [--n N] [--seed S]
    fairdesk-cli counterfactuals --data CSV --text-col COL [--terms dixon|gender|race|FILE] --out OUT.csv
    fairdesk-cli train text-classifier --data CSV --text-col COL --label-col COL
            --method baseline|blindness|augmentation|clp|clp-nontox [--lambda L] [--terms …] [--seed S] --out DIR
    fairdesk-cli audit ctf --model DIR --data CSV --text-col COL [--label-col COL] [--terms …]
            [--held-out-terms FILE] [--max-tokens 10] [--seed S] --json OUT.json [--pdf OUT.pdf] [--project P]
    fairdesk-cli audit ctf-pairs --data CSV --text-col COL [--label-col COL] [--terms …] --out PAIRS.csv
    fairdesk-cli audit ctf-scores --scores SCORED.csv --json OUT.json [--pdf OUT.pdf] [--project P]

Wired into :mod:`fairdesk.cli` with ``add_ctf_commands(sub, audit, train)``. The audit and training commands call
:mod:`fairdesk.jobs.ctf` (on a temporary project when no ``--project`` is given); ``--json`` is the stored
document, ``--pdf`` goes through :func:`fairdesk.jobs.reports.export_report`. Nothing heavy is imported here.
"""
from __future__ import annotations

import argparse

from fairdesk.console import say
from fairdesk.cli.args import add_html, add_release_json
from fairdesk.cli.outputs import audit_project, release_of, stored_where, write_json, write_reports
from fairdesk.cli.progress import TerminalProgress

TERMS_HELP = ("identity terms: dixon, dixon_train (default), dixon_held_out, gender, race, or a text file with one "
              "term per line (multi-word terms allowed; 'a | b' lines for two aligned groups)")


def _print_summary(doc: dict, json_path: str, pdf_path: str | None, project: str | None, audit_id: int) -> None:
    margin = (doc.get("settings") or {}).get("margin", 0.02)
    for r in doc.get("ctf_gap") or []:
        def f(v):
            return "–" if v is None else f"{v:.3f}"
        line = (f"{r['terms']}/{r['subset']}: CTF gap {f(r.get('value'))} [{f(r.get('ci_low'))}, "
                f"{f(r.get('ci_high'))}] over {r.get('n', 0)} examples")
        if r.get("control") is not None:
            line += f", control band {f(r.get('control'))}"
        verdict = r.get("verdict", "")
        verdict = f"equivalent within ±{margin:g}" if verdict.startswith("equivalent") else verdict
        say(f"{line} -> {verdict}")
    from fairdesk.core.reports.ctf import term_sentences

    for sentence in term_sentences(doc):
        say(f"  {sentence}")
    for note in doc.get("notes") or []:
        say(f"note: {note}")
    where = f"results -> {json_path}" + (f", {pdf_path}" if pdf_path else "")
    say(where)
    if project:
        say(stored_where(project, audit_id))


def _terms_arg(value: str | None, default: str | None = "dixon_train"):
    return value if value not in (None, "") else default


def cmd_data_madlibs(args: argparse.Namespace) -> int:
    from fairdesk.core.export import write_table
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.text.madlibs import MADLIBS_ATTRIBUTION, madlibs

    guard_outputs([("--out", args.out)])
    df = madlibs()
    write_table(df[["text", "label", "template", "term"]], args.out)
    n_cf = int(df["has_counterfactual"].sum())
    say(f"{len(df):,} sentences ({int((df['label'] == 0).sum()):,} non-toxic, {int((df['label'] == 1).sum()):,} "
          f"toxic) from {df['template'].nunique()} template pairs; {len(df) - n_cf:,} hold no identity term (empty "
          f"term: no counterfactual) -> {args.out}")
    say(f"Attribution (CC BY 4.0): {MADLIBS_ATTRIBUTION}")
    return 0


def cmd_data_ctf_demo(args: argparse.Namespace) -> int:
    from fairdesk.core.errors import DataError
    from fairdesk.core.export import write_table
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.text.madlibs import clinical_notes_demo

    guard_outputs([("--out", args.out)])
    if args.n < 10:
        raise DataError("--n must be at least 10 notes.")
    df = clinical_notes_demo(args.n, seed=args.seed)
    write_table(df, args.out)
    say(f"{len(df):,} generated triage notes ({int(df['label'].sum()):,} needing review); some identity terms are "
          f"spuriously associated with the label -> {args.out}")
    return 0


def cmd_counterfactuals(args: argparse.Namespace) -> int:
    from fairdesk.core.export import write_table
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.text.counterfactual import counterfactual_table, load_terms
    from fairdesk.jobs.ctf import read_text_table

    guard_outputs([("--out", args.out)],
                  inputs=[("the data (--data)", args.data), ("the term list (--terms)", args.terms)])
    table = read_text_table(None, args.data, args.text_col, id_col=args.id_col)
    terms = load_terms(_terms_arg(args.terms, "dixon"))
    progress = TerminalProgress(args.quiet)
    cf = counterfactual_table(table["texts"], terms, ids=table["ids"], progress=progress)
    progress.done()
    write_table(cf.rows[["id", "text", "counterfactual", "term", "counterfactual_term"]], args.out)
    say(f"{cf.n_texts:,} texts, {cf.n_with_terms:,} mention a term of '{terms.name}', {cf.n_excluded:,} left out "
          f"(no valid counterfactual: the meaning depends on sex); {len(cf.rows):,} counterfactuals -> {args.out}")
    return 0


def cmd_train_text_classifier(args: argparse.Namespace) -> int:
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.project import Project
    from fairdesk.jobs.ctf import train_text_classifier_job

    guard_outputs(folders=[("--out", args.out)], inputs=[("the data (--data)", args.data),
                                                         ("the term list (--terms)", args.terms)],
                  project=("the project (--project)", args.project))
    progress = TerminalProgress(args.quiet)
    with audit_project(args.project) as project:
        model_id = train_text_classifier_job(
            project, args.data, args.text_col, args.label_col, args.out, method=args.method, lam=args.lam,
            terms=_terms_arg(args.terms), pair_loss=args.pair_loss, epochs=args.epochs, batch_size=args.batch_size,
            lr=args.lr, seed=args.seed, threads=args.threads, resume=args.resume,
            validation=args.validation, name=args.name, progress=progress)
        info = next(m for m in Project(project, create=False).models() if m.id == model_id).info
    progress.done()
    last = info["history"][-1] if info["history"] else {}
    line = f"trained {info['method']}" + (f" (λ = {info['lambda']:g}, {info['pair_loss']})"
                                          if info["method"] in ("clp", "clp_nontox") else "")
    loss = last.get("loss", float("nan"))
    line += f" for {info['epochs']} epochs on {info['data']['n']:,} texts; final loss {loss:.4f}"
    if info.get("resume"):
        line += f" (resumed after epoch {info['resumed_from_epoch']})"
    if info.get("validation") and info["validation"].get("auroc") is not None:
        line += f"; validation AUROC {info['validation']['auroc']:.3f} on {info['validation']['n']:,} held-out rows"
    say(line)
    say(f"model saved in {info['path']}" + (f" (model #{model_id} in {args.project})" if args.project else ""))
    return 0


def cmd_audit_ctf(args: argparse.Namespace) -> int:
    from fairdesk.core.guard import guard_outputs
    from fairdesk.jobs.ctf import audit_ctf
    guard_outputs([("--json", args.json), ("--release-json", args.release_json), ("--pdf", args.pdf),
                   ("--html", args.html)],
                  inputs=[("the data (--data)", args.data), ("the term list (--terms)", args.terms),
                          ("the held-out term list (--held-out-terms)", args.held_out_terms),
                          ("the control terms (--control-terms)", args.control_terms)],
                  models=[("the model folder (--model)", args.model)],
                  project=("the project (--project)", args.project))
    progress = TerminalProgress(args.quiet)
    with audit_project(args.project) as project:
        audit_id = audit_ctf(project, args.model, args.data, args.text_col, label_col=args.label_col,
                             id_col=args.id_col, terms=_terms_arg(args.terms, None),
                             held_out_terms=_terms_arg(args.held_out_terms, None),
                             control_terms=None if args.no_control else _terms_arg(args.control_terms, "control"),
                             max_tokens=args.max_tokens or None, margin=args.margin, n_boot=args.n_boot,
                             threshold=args.threshold, k_control=args.k_control, seed=args.seed,
                             positive_label=args.positive_label, threads=args.threads,
                             synthetic=args.synthetic or None, name=args.name, template_col=args.template_col,
                             correction=args.correction, progress=progress)
        progress.done()
        doc = write_json(project, audit_id, args.json, release_of(args))
        write_reports(project, audit_id, args)
    _print_summary(doc, args.json, args.pdf, args.project, audit_id)
    return 0


def cmd_audit_ctf_pairs(args: argparse.Namespace) -> int:
    from fairdesk.core.guard import guard_outputs
    from fairdesk.jobs.ctf import export_ctf_pairs

    guard_outputs([("--out", args.out)],
                  inputs=[("the data (--data)", args.data), ("the term list (--terms)", args.terms),
                          ("the held-out term list (--held-out-terms)", args.held_out_terms),
                          ("the control terms (--control-terms)", args.control_terms)],
                  project=("the project (--project)", args.project))
    progress = TerminalProgress(args.quiet)
    res = export_ctf_pairs(args.project, args.data, args.text_col, args.out, label_col=args.label_col,
                           id_col=args.id_col, terms=_terms_arg(args.terms),
                           held_out_terms=_terms_arg(args.held_out_terms, None),
                           control_terms=None if args.no_control else _terms_arg(args.control_terms, "control"),
                           max_tokens=args.max_tokens or None, k_control=args.k_control, seed=args.seed,
                           template_col=args.template_col, progress=progress)
    progress.done()
    say(f"{res['rows']:,} pairs ({res['identity']:,} identity, {res['control']:,} control) of {res['examples']:,} "
          f"texts -> {args.out}; fill score = f(text) and counterfactual_score = f(counterfactual), then run "
          "'fairdesk-cli audit ctf-scores --scores FILE'")
    return 0


def cmd_audit_ctf_scores(args: argparse.Namespace) -> int:
    from fairdesk.core.guard import guard_outputs
    from fairdesk.jobs.ctf import audit_ctf_scores
    guard_outputs([("--json", args.json), ("--release-json", args.release_json), ("--pdf", args.pdf),
                   ("--html", args.html)],
                  inputs=[("the scored pairs (--scores)", args.scores)],
                  project=("the project (--project)", args.project))
    progress = TerminalProgress(args.quiet)
    with audit_project(args.project) as project:
        audit_id = audit_ctf_scores(project, args.scores, margin=args.margin, n_boot=args.n_boot,
                                    threshold=args.threshold, seed=args.seed, model_name=args.model_name,
                                    name=args.name, template_col=args.template_col, correction=args.correction,
                                    progress=progress)
        progress.done()
        doc = write_json(project, audit_id, args.json, release_of(args))
        write_reports(project, audit_id, args)
    _print_summary(doc, args.json, args.pdf, args.project, audit_id)
    return 0


def _k(value: str) -> int:
    k = int(value)
    if k < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return k


def _rows(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 (off) or a number of rows")
    return n


def _method(value: str) -> str:
    v = value.strip().lower()
    if v == "clp_nontox":
        v = "clp-nontox"
    return v


def _audit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--margin", type=float, default=0.02,
                   help="equivalence margin on the CTF gap, a change in probability (default 0.02)")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates (default 2000)")
    p.add_argument("--threshold", type=float, default=0.5, help="decision threshold τ for flips and TPR/TNR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--suppress-k", type=_k, default=11, help="counts below k print as <k in the PDF (default 11)")
    add_release_json(p)
    p.add_argument("--name", help="the audit's name in the project")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--correction", choices=["bh", "holm"], default="bh",
                   help="correction over the per-term tests: bh (Benjamini–Hochberg, default) or holm")
    p.add_argument("--template-col", metavar="COL",
                   help="column naming each text's template: the bootstrap resamples templates (default: the "
                        "sentence without its identity terms is the unit)")


def _pair_options(p: argparse.ArgumentParser, terms_help: str = TERMS_HELP) -> None:
    p.add_argument("--terms", help=terms_help)
    p.add_argument("--held-out-terms", metavar="FILE",
                   help="a second term set audited separately (file, or dixon_held_out)")
    p.add_argument("--control-terms", metavar="FILE",
                   help="neutral words for the control band (default: the shipped control list)")
    p.add_argument("--no-control", action="store_true", help="no control band ('differs' then needs only the gap)")
    p.add_argument("--k-control", type=int, default=3, help="control pairs per example (default 3)")
    p.add_argument("--max-tokens", type=int, default=10,
                   help="only texts of at most this many whitespace tokens (default 10, as 002; 0: no limit)")
    p.add_argument("--id-col", metavar="COL", help="id column (default: the row number)")


def add_ctf_commands(sub, data, audit, train) -> None:
    """Add ``data madlibs``, ``data ctf-demo``, ``counterfactuals``, ``train text-classifier``, ``audit ctf``,
    ``audit ctf-pairs`` and ``audit ctf-scores`` to the CLI's top-level, ``audit`` and ``train`` sub-parsers."""
    from fairdesk.core.text.madlibs import SYNTHETIC_ROWS

    p = data.add_parser("madlibs", help="the synthetic madlibs template set of Dixon et al. / 002 (76,564 rows)",
                        description="Columns text, label (0 non-toxic, 1 toxic), template (the template pair), term "
                                    "(empty: no identity term, no counterfactual). Word lists CC BY 4.0.")
    p.add_argument("--out", required=True, help="output CSV (or .parquet)")
    p.set_defaults(func=cmd_data_madlibs)
    p = data.add_parser("ctf-demo", help="generated clinical triage notes with spurious identity terms",
                        description="Short triage notes (≤ 10 tokens) whose label follows the finding; some identity "
                                    "terms are over-represented among positives. Columns text, label, term, finding.")
    p.add_argument("--out", required=True, help="output CSV (or .parquet)")
    p.add_argument("--n", type=int, default=2000, help="number of notes (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_data_ctf_demo)

    p = sub.add_parser("counterfactuals", help="counterfactual texts: swap identity terms (METHODS §5)",
                       description="One row per (example, counterfactual): id, text, counterfactual, term, "
                                   "counterfactual_term. Substitutes whole words (never deletes), keeps "
                                   "capitalisation; texts whose meaning depends on sex are left out and counted.")
    p.add_argument("--data", required=True, help="CSV or Parquet table")
    p.add_argument("--text-col", required=True, metavar="COL")
    p.add_argument("--terms", help="identity terms: dixon (default: all 50), dixon_train, dixon_held_out, gender, "
                                   "race, or a text file with one term per line ('a | b' lines: two aligned groups)")
    p.add_argument("--id-col", metavar="COL", help="id column (default: the row number)")
    p.add_argument("--out", required=True, help="output CSV (or .parquet)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_counterfactuals)

    t = train.add_parser("text-classifier", help="a small CNN text classifier with a counterfactual remedy (002)",
                         description="Methods: baseline, blindness (identity terms -> one token), augmentation (add "
                                     "every counterfactual), clp (counterfactual logit pairing, λ), clp-nontox "
                                     "(pairing on label-0 examples only). A checkpoint is written in "
                                     "DIR/checkpoints after every epoch; --resume continues from it.")
    t.add_argument("--data", required=True, help="CSV or Parquet table")
    t.add_argument("--text-col", required=True, metavar="COL")
    t.add_argument("--label-col", required=True, metavar="COL", help="0/1 label column")
    t.add_argument("--method", required=True, type=_method,
                   choices=["baseline", "blindness", "augmentation", "clp", "clp-nontox"])
    t.add_argument("--lambda", dest="lam", type=float, default=1.0, help="λ of the pairing term (default 1)")
    t.add_argument("--terms", help=TERMS_HELP + "; recorded in the model folder")
    t.add_argument("--pair-loss", choices=["mse", "abs", "cosine"], default="mse")
    t.add_argument("--epochs", type=int, default=5)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, help="torch CPU threads")
    t.add_argument("--project", help="also store the model in this project file")
    t.add_argument("--name", help="the model's name in the project")
    t.add_argument("--out", required=True, help="model folder (config.json + model.safetensors)")
    t.add_argument("--validation", type=float, default=0.0, metavar="SHARE",
                   help="hold out this share of the rows (stratified by label, seeded) and record the model's AUROC "
                        "on them (default 0: train on every row)")
    t.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in DIR/checkpoints (left by a cancelled or failed run "
                        "with the same data and settings; --epochs may be larger)")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=cmd_train_text_classifier)

    a = audit.add_parser("ctf", help="counterfactual token fairness of a FairDesk text classifier (METHODS §5)",
                         description="CTF gap (mean |f(x) - f(x')|) with bootstrap CIs per term split and label, "
                                     "flip rates per direction, per-term-pair table, TPR/TNR gaps and a control band "
                                     "(the same statistic for neutral words in the same slot). Verdicts: differs, "
                                     "equivalent within ±margin, inconclusive.")
    a.add_argument("--model", required=True, metavar="DIR",
                   help="text classifier folder (train text-classifier), or a local Hugging Face "
                        "sequence-classification folder (safetensors; never downloaded)")
    a.add_argument("--positive-label", metavar="LABEL",
                   help="the positive class of a Hugging Face model with more than two classes (index or name)")
    a.add_argument("--data", required=True, help="CSV or Parquet table")
    a.add_argument("--text-col", required=True, metavar="COL")
    a.add_argument("--label-col", metavar="COL", help="0/1 label column (label subsets, TPR/TNR)")
    _pair_options(a, TERMS_HELP.replace("dixon_train (default)", "dixon_train")
                  + " (default: the term set the model folder records, else dixon_train)")
    _audit_options(a)
    a.add_argument("--threads", type=int, help="torch CPU threads")
    a.add_argument("--synthetic", type=_rows, default=SYNTHETIC_ROWS, metavar="N",
                   help=f"also score N rows (seeded sample) of the madlibs template set, reported as the subset "
                        f"'synthetic' (default {SYNTHETIC_ROWS}; 0: off)")
    a.add_argument("--json", required=True, help="write the audit document here")
    a.add_argument("--pdf", help="also write the PDF report here")
    add_html(a)
    a.add_argument("--project", help="store the audit in this project file (default: a temporary one)")
    a.set_defaults(func=cmd_audit_ctf)

    e = audit.add_parser("ctf-pairs", help="export counterfactual and control pairs to score with another model",
                         description="Columns id, text, counterfactual, term, counterfactual_term, split, kind "
                                     "(identity / control), label (with --label-col), and empty score and "
                                     "counterfactual_score to fill; then 'audit ctf-scores'.")
    e.add_argument("--data", required=True, help="CSV or Parquet table")
    e.add_argument("--text-col", required=True, metavar="COL")
    e.add_argument("--label-col", metavar="COL")
    _pair_options(e)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--template-col", metavar="COL",
                   help="copy this column (each text's template) into the pairs, for ctf-scores --template-col")
    e.add_argument("--project", help="also store the pairs in this project file")
    e.add_argument("--out", required=True, help="output CSV (or .parquet)")
    e.add_argument("--quiet", action="store_true")
    e.set_defaults(func=cmd_audit_ctf_pairs)

    s = audit.add_parser("ctf-scores", help="the CTF audit of pairs scored elsewhere (from audit ctf-pairs)",
                         description="Reads the ctf-pairs table with score and counterfactual_score filled "
                                     "(probabilities) and runs the same statistics as audit ctf.")
    s.add_argument("--scores", required=True, help="the scored pairs table")
    s.add_argument("--model-name", help="what scored them (printed in the report)")
    _audit_options(s)
    s.add_argument("--json", required=True)
    s.add_argument("--pdf")
    add_html(s)
    s.add_argument("--project", help="store the audit in this project file (default: a temporary one)")
    s.set_defaults(func=cmd_audit_ctf_scores)

