"""``fairdesk-cli audit mlm-bias`` and ``fairdesk-cli train mlm``: the masked-LM commands.

Wired into :mod:`fairdesk.cli` with ``add_text_commands(audit_subparsers, train_subparsers)``. Nothing heavy is
imported here; the commands import torch and transformers when they run. Errors are
:class:`~fairdesk.core.errors.FairDeskError` (exit code 2 through ``fairdesk.cli.main``), cancel is Ctrl-C (130).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from fairdesk.console import say
from fairdesk.cli.args import add_html, add_release_json, split_list
from fairdesk.cli.progress import TerminalProgress
from fairdesk.core.compute import set_torch_threads


def cmd_audit_mlm_bias(args: argparse.Namespace) -> int:
    """The masked-LM bias probe through the GUI's job :func:`~fairdesk.jobs.text.audit_mlm_bias` (on ``--project``
    or a scratch project), ``--json`` from the stored document, ``--pdf`` through ``export_report``."""
    from fairdesk.cli.outputs import audit_project, release_of, stored_where, write_outputs
    from fairdesk.core.audits.mlm_bias import ProbeOptions, results_from_document
    from fairdesk.core.errors import FairDeskError
    from fairdesk.core.guard import guard_outputs
    from fairdesk.jobs.text import audit_mlm_bias

    guard_outputs([("--json", args.json), ("--release-json", args.release_json), ("--pdf", args.pdf), ("--html", args.html)],
                  inputs=[("the templates (--templates)", args.templates),
                          ("the completion templates", args.completion_templates)],
                  models=[("the model folder (--model)", args.model)]
                  + [("the model folder (--compare)", c) for c in args.compare or []],
                  project=("the project (--project)", args.project))
    groups = split_list(args.groups)
    if groups and len(groups) != 2:
        raise FairDeskError("--groups takes two word groups, e.g. male,female.")
    opts = ProbeOptions(prior=args.prior, test=args.test, groups=tuple(groups) or None,
                        categories=tuple(split_list(args.categories)) or None, batch_size=args.batch_size,
                        alpha=args.alpha, min_effect=args.min_effect, min_log_ratio=args.min_log_ratio, seed=args.seed,
                        margin=args.margin, min_templates=args.min_templates)
    progress = TerminalProgress(args.quiet)
    with audit_project(args.project) as project:
        audit_id = audit_mlm_bias(project, [args.model] + list(args.compare or []), args.templates, opts,
                                  args.completion, completion_templates=args.completion_templates, top_k=args.top_k,
                                  threads=args.threads, progress=progress)
        progress.done()
        doc = write_outputs(project, audit_id, args.json, args.pdf, args.suppress_k, release_of(args),
                            html_path=args.html)
    for name, res in results_from_document(doc).items():
        flagged = [r["category"] for r in res.records if r["flagged"]]
        counts = {v: sum(r.get("verdict") == v for r in res.records) for v in ("differs", "equivalent",
                                                                                "inconclusive")}
        say(f"{name}: {len(res.records)} categories, {len(flagged)} flagged"
              + (f" ({', '.join(flagged)})" if flagged else "") + f" [{res.method['test_code']}, BH q]; "
              + f"{counts['differs']} differ{'s' if counts['differs'] == 1 else ''}, {counts['equivalent']} "
                f"equivalent within ±{res.method['margin']:g} "
                f"nats, {counts['inconclusive']} inconclusive (unit: {res.method['unit']})")
    say(f"results -> {args.json}" + (f", {args.pdf}" if args.pdf else "")
          + (f"; {stored_where(args.project, audit_id)}" if args.project else ""))
    return 0


def cmd_train_mlm(args: argparse.Namespace) -> int:
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.models.mlm import MLMTrainConfig, train_mlm

    guard_outputs(folders=[("--out", args.out)], inputs=[("the corpus (--corpus)", args.corpus)],
                  models=[("the model folder (--init-model)", args.init_model),
                          ("the tokenizer folder (--tokenizer-from)", args.tokenizer_from)])
    set_torch_threads(args.threads)
    explicit = any(v is not None for v in (args.hidden, args.layers, args.heads))
    cfg = MLMTrainConfig(
        text_column=args.text_column, attribute_column=args.adversary_attribute, init_model=args.init_model,
        tokenizer_from=args.tokenizer_from, size=None if explicit and args.size is None else (args.size or "tiny"),
        hidden_size=args.hidden, num_layers=args.layers, num_heads=args.heads, intermediate_size=args.intermediate,
        vocab_size=args.vocab_size, max_length=args.max_length, min_sequence_tokens=args.min_sequence_tokens,
        dropout=args.dropout, mlm_probability=args.mlm_probability, focus_words=tuple(split_list(args.focus_word)),
        focus_probability=args.focus_probability, batch_size=args.batch_size, max_steps=args.steps,
        learning_rate=args.lr, weight_decay=args.weight_decay, warmup_steps=args.warmup, schedule=args.schedule,
        adversary_lambda=args.adversary_lambda, adversary_steps=args.adversary_steps,
        adversary_lr_scale=args.adversary_lr_scale, save_every=args.save_every,
        keep_checkpoints=args.keep_checkpoints, seed=args.seed, device=args.device)
    progress = TerminalProgress(args.quiet)
    result = train_mlm(args.corpus, args.out, cfg, resume=args.resume, progress=progress)
    progress.done()
    last = result.history[-1] if result.history else {}
    line = f"trained {result.steps} steps on {result.n_sequences} sequences from {result.n_notes} notes"
    if last:
        line += f"; final loss {last['mlm_loss']:.3f}"
        if last.get("adv_accuracy") is not None:
            line += f", adversary accuracy {last['adv_accuracy']:.2f}"
    say(line)
    say(f"model saved in {result.out_dir} (checkpoints in {Path(result.out_dir) / 'checkpoints'})")
    return 0


def add_text_commands(subparsers_audit, subparsers_train) -> None:
    """Add ``audit mlm-bias`` and ``train mlm`` to the CLI's ``audit`` and ``train`` sub-parsers."""
    p = subparsers_audit.add_parser(
        "mlm-bias", help="log-probability bias probe of a local masked language model (METHODS §4)",
        description="Score every (template, attribute, gendered word) sentence with ln(p_target/p_prior), test male "
                    "vs female per category with the template as the unit (t-test over the templates' mean "
                    "differences, BH across categories), give each category a verdict (differs, equivalent within "
                    "±margin, inconclusive) and write one JSON record per category with its per-sentence scores.")
    p.add_argument("--model", required=True, help="local Hugging Face masked-LM folder (config, weights, tokenizer)")
    p.add_argument("--compare", action="append", metavar="DIR",
                   help="also audit this model and add a side-by-side comparison (repeatable)")
    p.add_argument("--templates", help="template list JSON (default: resources/text/mlm_bias_templates.json)")
    p.add_argument("--categories", action="append", help="only these category codes (comma-separated)")
    p.add_argument("--groups", help="the two word groups to compare (default: the first two, male,female)")
    p.add_argument("--prior", choices=["pieces", "words"], default="pieces",
                   help="mask every word piece of the attribute (default) or one mask per word (the release)")
    p.add_argument("--test", choices=["template", "wilcoxon", "ranksum"], default="template",
                   help="t-test over the templates' mean differences (default: the template is the unit), or the "
                        "release's per-sentence tests: paired signed-rank (the paper) or unpaired rank-sum; these "
                        "treat one template's scores as independent")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--min-effect", type=float, default=0.3, help="|rank-biserial r| needed to flag a category")
    p.add_argument("--min-log-ratio", type=float, default=0.25,
                   help="|mean male - female score| in nats needed to flag a category")
    p.add_argument("--margin", type=float, default=None,
                   help="equivalence margin in nats (default: --min-log-ratio, 0.25)")
    p.add_argument("--min-templates", type=int, default=6,
                   help="fewer templates in a category: 'inconclusive: N templates' (default 6)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--completion", action="store_true", help="also run the race sentence-completion probe")
    p.add_argument("--completion-templates", help="completion template JSON (default: the shipped one)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--json", required=True, help="write all results here")
    p.add_argument("--pdf", help="also write the PDF report here")
    add_html(p)
    p.add_argument("--suppress-k", type=int, default=11, help="counts below k show as <k in the report")
    add_release_json(p)
    p.add_argument("--project", help="also store the audit in this project file (the GUI can open it)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_audit_mlm_bias)

    t = subparsers_train.add_parser(
        "mlm", help="train a WordPiece tokenizer and a BERT masked LM on local notes (METHODS §7)",
        description="PHI placeholders become special tokens, whole-word masking, short sentences packed into "
                    "sequences of at least 20 tokens, checkpoints (atomic) and resume; optional adversarial "
                    "debiasing of [CLS] against a per-note attribute.")
    t.add_argument("--corpus", required=True, help="CSV/Parquet with a text column, a .txt file or a folder of .txt")
    t.add_argument("--out", required=True, help="output folder (the finished model is saved in it)")
    t.add_argument("--text-column", default="text")
    t.add_argument("--adversary-attribute", metavar="COL", help="per-note protected attribute: adversarial debiasing")
    t.add_argument("--init-model", metavar="DIR", help="continue pretraining this local BERT/RoBERTa masked LM")
    t.add_argument("--tokenizer-from", metavar="DIR", help="use this folder's tokenizer instead of training one")
    t.add_argument("--size", choices=["tiny", "mini", "small", "base"], help="model size preset (default tiny)")
    t.add_argument("--hidden", type=int)
    t.add_argument("--layers", type=int)
    t.add_argument("--heads", type=int)
    t.add_argument("--intermediate", type=int)
    t.add_argument("--vocab-size", type=int, default=8000)
    t.add_argument("--max-length", type=int, default=128)
    t.add_argument("--min-sequence-tokens", type=int, default=20)
    t.add_argument("--dropout", type=float, default=0.1)
    t.add_argument("--mlm-probability", type=float, default=0.15)
    t.add_argument("--focus-word", action="append", help="words masked with --focus-probability (comma-separated)")
    t.add_argument("--focus-probability", type=float, default=0.5)
    t.add_argument("--steps", type=int, default=1000)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=5e-4)
    t.add_argument("--weight-decay", type=float, default=0.01)
    t.add_argument("--warmup", type=int, default=100)
    t.add_argument("--schedule", choices=["constant", "linear"], default="constant")
    t.add_argument("--adversary-lambda", type=float, default=1.0)
    t.add_argument("--adversary-steps", type=int, default=5, help="discriminator updates per training step")
    t.add_argument("--adversary-lr-scale", type=float, default=1.0)
    t.add_argument("--save-every", type=int, default=500)
    t.add_argument("--keep-checkpoints", type=int, default=2)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    t.add_argument("--threads", type=int, help="torch CPU threads")
    t.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=cmd_train_mlm)
