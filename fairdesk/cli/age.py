"""``fairdesk-cli data age-demo`` and ``fairdesk-cli train age-independent`` (METHODS §2–3).

Wired into :mod:`fairdesk.cli` with ``add_age_commands(data_subparsers, train_subparsers)``. ``train
age-independent`` calls the job :func:`fairdesk.jobs.age.train_age_independent` on the project given with
``--project`` (or on a temporary project deleted afterwards), so the command and the GUI store the same document:
``--json`` is the stored document byte for byte, ``--predictions`` the stored out-of-fold predictions in the
long layout (``PREDICTION_COLUMNS`` of :mod:`fairdesk.core.audits.age_independence`), ``--pdf`` goes through the one
PDF route :func:`fairdesk.jobs.reports.export_report`.
Nothing heavy is imported here; torch and sklearn load when the command runs.
"""
from __future__ import annotations

import argparse

from fairdesk.console import say
from fairdesk.cli.args import add_executor, add_html, add_release_json, executor_spec, split_list
from fairdesk.core.compute import set_torch_threads
from fairdesk.cli.progress import TerminalProgress
from fairdesk.core.errors import DataError
from fairdesk.core.guard import guard_outputs
from fairdesk.core.models.age_independent import LearnerSettings  # numpy only; the parser names its K


def cmd_data_age_demo(args: argparse.Namespace) -> int:
    from fairdesk.core.export import write_table
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    guard_outputs([("--out", args.out)])
    df = make_age_cohort(n_participants=args.participants, n_features=args.features, seed=args.seed)
    write_table(df, args.out)
    n_feat = df.shape[1] - 3
    say(f"{len(df)} sessions of {df['participant_id'].nunique()} participants, {n_feat} features "
          f"(columns participant_id, age, label, f000…) -> {args.out}")
    return 0


def _methods(value) -> tuple[str, ...] | None:
    from fairdesk.core.models.age_independent import METHODS

    methods = split_list(value)
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise DataError(f"Unknown method(s) {', '.join(bad)} in --methods; choose from {','.join(METHODS)}.")
    return tuple(methods) or None


def _lambdas(value, option: str = "--frontier") -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in split_list(value))
    except ValueError:
        raise DataError(f"{option} takes adversary strengths λ as numbers, e.g. 0,0.5,1,2.") from None


def cmd_train_age_independent(args: argparse.Namespace) -> int:
    from fairdesk.cli.outputs import release_of, write_json, write_reports
    from fairdesk.core.export import write_table
    from fairdesk.jobs.age import predictions_csv_table, train_age_independent

    outputs = [("--json", args.json), ("--release-json", args.release_json), ("--predictions", args.predictions),
               ("--pdf", args.pdf), ("--html", args.html)]
    guard_outputs(outputs, inputs=[("the data table (--data)", args.data)],
                  project=("the project (--project)", args.project))
    from fairdesk.core.kinds import ReportSettings

    ReportSettings(suppress_k=args.suppress_k)  # a bad k fails now, not after the training
    methods = _methods(args.methods)
    lambdas = _lambdas(args.frontier)
    grid = _lambdas(args.lambda_grid, "--lambda-grid") or None
    if args.lam is not None and (grid or args.leakage_target is not None or args.choose_body):
        raise DataError("--lambda fixes λ; --lambda-grid, --leakage-target and --choose-body choose it: give one or "
                        "the other.")
    k_adv = LearnerSettings.k_adv if args.k_adv is None else args.k_adv
    learner = LearnerSettings(lam=1.0 if args.lam is None else args.lam, k_adv=k_adv, epochs=args.epochs,
                              device=args.device)
    set_torch_threads(args.threads)
    executor = executor_spec(args)
    progress = TerminalProgress(args.quiet)
    from fairdesk.cli.outputs import audit_project

    with audit_project(args.project) as project_path:
        audit_id = train_age_independent(project_path, args.data, args.label, args.attribute, args.group_id,
                                         methods=methods, folds=args.folds, repeats=args.repeats, lam=args.lam,
                                         seed=args.seed, learner=learner, reference=not args.no_reference,
                                         frontier_lambdas=lambdas, leakage_target=args.leakage_target,
                                         lambda_grid=grid, select_body=True if args.choose_body else None,
                                         test=args.test, progress=progress,
                                         executor=executor)
        progress.done()
        doc = write_json(project_path, audit_id, args.json, release_of(args))
        if args.predictions:
            write_table(predictions_csv_table(project_path, audit_id), args.predictions)
        write_reports(project_path, audit_id, args)
    if args.project:
        say(f"stored as audit {audit_id} in {args.project}")
    _print_summary(doc)
    written = [p for _, p in outputs if p]
    say(f"results -> {', '.join(map(str, written))}")
    return 0


def _print_summary(doc: dict) -> None:
    from fairdesk.core.reports.age_independence import age_left_words, difference_words

    for name, m in doc["methods"].items():
        leak = m.get("leakage")
        verdicts = ", ".join(f"{k} {c['verdict']} ({difference_words(c)})"
                             for k, c in (m.get("comparison") or {}).items())
        say(f"{name:>22}: accuracy {m['accuracy']['mean']:.3f} ± {m['accuracy']['std']:.3f}, "
              f"Δ(5) {m['delta_eo_5']['mean']:.3f} ± {m['delta_eo_5']['std']:.3f}"
              + (f", leakage R² {leak['r2']:.2f}" if leak and leak.get("r2") is not None else "")
              + (f" (beyond the label {leak['beyond_label']['r2']:.2f})"
                 if leak and (leak.get("beyond_label") or {}).get("r2") is not None else "")
              + (f" [vs dnn: {verdicts}]" if verdicts else ""))
    for name in doc["methods"]:
        words = age_left_words(doc, name)
        if words:
            say(words)


def add_age_commands(data, train) -> None:
    """``data age-demo`` on the ``data`` sub-parsers, ``train age-independent`` on the ``train`` sub-parsers."""
    demo = data.add_parser("age-demo", help="a generated cohort for the age-independent learners (seeded)")
    demo.add_argument("--out", required=True, help="CSV (or .parquet) file to write")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--participants", type=int, default=200, help="participants (1–4 sessions each)")
    demo.add_argument("--features", type=int, default=300, help="number of 'linguistic' features")
    demo.set_defaults(func=cmd_data_age_demo)

    age = train.add_parser("age-independent", help="age-independent representation learners vs baselines, "
                                                   "participant-disjoint cross-validation (seed 000)")
    age.add_argument("--data", required=True, help="features table (CSV or Parquet), one row per session")
    age.add_argument("--label", required=True, help="outcome column (0/1)")
    age.add_argument("--attribute", required=True, help="continuous protected attribute, e.g. age")
    age.add_argument("--group-id", required=True, help="participant id: no participant is in two folds")
    age.add_argument("--methods", help="comma-separated: dnn,svm,rf,adaboost,simple,autoencoder,consensus,"
                                       "entropy,entropy-binary,entropy-h (default: all; dnn is required)")
    age.add_argument("--folds", type=int, default=5)
    age.add_argument("--repeats", type=int, default=1)
    age.add_argument("--lambda", dest="lam", type=float, default=None,
                     help="a fixed adversary strength λ (default: chosen per learner and fold, see --lambda-grid)")
    age.add_argument("--lambda-grid", help="λ values to choose from by nested participant-grouped cross-validation "
                                           "(comma-separated; default 0.3,1,3)")
    age.add_argument("--leakage-target", type=float, default=None,
                     help="the probe's R² for the age beyond the label that a learner's representation should "
                          "stay under (default 0.05)")
    age.add_argument("--choose-body", action="store_true",
                     help="also choose each learner's body, its own layers or the DNN's (fitted with the DNN's seed), "
                          "by the same nested validation as λ")
    age.add_argument("--seed", type=int, default=0)
    age.add_argument("--k-adv", type=int, default=None,
                     help=f"adversary steps K per minibatch (default {LearnerSettings.k_adv})")
    age.add_argument("--epochs", type=int, default=40)
    age.add_argument("--device", default="auto", help="auto, cpu or cuda")
    age.add_argument("--test", default="corrected", choices=["corrected", "plain"],
                     help="test of each method against the DNN over the folds: corrected = the corrected resampled "
                          "t-test (Nadeau and Bengio 2003; default); plain = the plain paired t-test, "
                          "anti-conservative (the folds share training rows; worse with --repeats)")
    age.add_argument("--frontier", help="also run the accuracy–fairness frontier at these λ (comma-separated)")
    age.add_argument("--no-reference", action="store_true",
                     help="leave out fairlearn's AdversarialFairnessClassifier (run when fairlearn is installed)")
    age.add_argument("--json", required=True, help="write the results document here")
    age.add_argument("--predictions", help="write the out-of-fold predictions here (long CSV)")
    age.add_argument("--pdf", help="also write the PDF report here")
    add_html(age)
    age.add_argument("--suppress-k", type=int, default=11, help="counts below k show as <k in the report")
    add_release_json(age)
    age.add_argument("--project", help="store the audit, predictions and model record in this project file")
    age.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    age.add_argument("--quiet", action="store_true", help="no progress bar")
    add_executor(age)
    age.set_defaults(func=cmd_train_age_independent)
