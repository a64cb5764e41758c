"""The age-independent learners on four cohorts that differ from the demo (issue 27), with λ chosen per fold.

* ``strong`` — a strong age signal (oracle linear age R² ≈ 0.95 from the features), 1–4 sessions, seed 101;
* ``sessions`` — a weaker age signal (oracle R² ≈ 0.6) and up to 8 sessions per participant (participant identity
  is in every representation), seed 202;
* ``independent`` / ``independent-sessions`` — age and diagnosis independent causes of the features (the
  diagnosis drawn without regard to age, ``dx_age_scale=None``; raw-feature age R² ≈ 0.95), 1–4 / up to 8
  sessions, seeds 303 / 404: the label carries no age, so the age R² itself is the target (≤ 0.10).

Both use 100 features with the per-direction signals of the default 300-feature cohort scaled by √3 (as the slow
protocol test does), so a run fits in minutes on one CPU thread. For each: the DNN, age-indep-simple and
age-indep-entropy by the protocol's defaults (5 participant-disjoint folds, λ chosen per learner and fold by nested
validation, leakage target R² ≤ 0.05 for the age beyond the label; ``--lambda`` fixes λ); per method accuracy,
Δ^(5), the leakage probe's R² of age and of the age beyond the label, the verdict, the λ chosen per fold, the
accuracy cost against the DNN in points (000: 2–3 points) and whether the issue's targets hold (R² ≤ 0.10, cost ≤ 5
points, Δ^(5) ≤ the DNN's); and the age R² the label alone carries. ``--participants 200 --folds 3 --lambda 1`` is
the regression guard ``tests/core/test_age_protocol.py::test_fresh_cohorts_regression_guard``; ``--participants 200
--folds 3 --seeds 0,1,2,3`` (λ chosen) is ``test_independent_cohort_default_path_guard`` for ``independent``; numbers in
docs/methods.md §3.

    PYTHONPATH=. OMP_NUM_THREADS=1 python -m benchmarks.bench_age_fresh_cohorts [--cohort strong|sessions]
        [--folds 5] [--participants 200] [--methods dnn,simple,entropy] [--lambda L] [--epochs E] [--seeds 0,1,2]
        [--weight-decay W] [--dnn-body] [--select-body] [--k-adv K] [--fresh-data] [--out results.json]

With several ``--seeds`` (each seed draws other folds and other training seeds) it also prints each learner's cost
and Δ^(5) against the DNN as mean ± SD over the seeds: one run's cost is dominated by the networks its seed drew.
Each run prints the product's own comparison too: the cost's 95% CI and the verdicts of accuracy and Δ^(5).
"""
from __future__ import annotations

import argparse
import json
import math
import time

SCALE = math.sqrt(3.0)
COHORTS = {
    "strong": dict(age_signal=0.51, dx_signal=0.12 * SCALE, max_sessions=4, seed=101),
    "sessions": dict(age_signal=0.14, dx_signal=0.12 * SCALE, max_sessions=8, seed=202),
    # age and diagnosis independent causes of the features (the independent review's design): raw-feature age R²
    # ≈ 0.95, the label carries no age, so the age R² and the R² beyond the label coincide
    "independent": dict(age_signal=0.51, dx_signal=0.12 * SCALE, max_sessions=4, dx_age_scale=None, seed=303),
    "independent-sessions": dict(age_signal=0.51, dx_signal=0.12 * SCALE, max_sessions=8, dx_age_scale=None,
                                 seed=404),
}
METHODS = ("dnn", "simple", "entropy")
#: ``--fresh-data``: the cohort's data are drawn with seed FRESH_DATA[cohort] + the protocol seed, so every seed is a
#: new draw of the design, not new folds of the one fixed draw (issue 27, round 12: held-back data)
FRESH_DATA = {"strong": 30_000, "sessions": 40_000, "independent": 10_000, "independent-sessions": 20_000}


def cohort_settings(name: str, seed: int = 0, fresh_data: bool = False) -> dict:
    """``make_age_cohort``'s keywords for a cohort: its fixed draw, or with ``fresh_data`` a draw per protocol seed."""
    kw = dict(COHORTS[name])
    if fresh_data:
        kw["seed"] = FRESH_DATA[name] + seed
    return kw


def run(name: str, participants: int, folds: int, seed: int = 0, methods=METHODS, lam: float | None = None,
        epochs: int | None = None, weight_decay: float | None = None, dnn_body: bool | None = None,
        select_body: bool | None = None, k_adv: int | None = None, fresh_data: bool = False) -> dict:
    """One cohort through the protocol; ``lam`` fixes λ (else it is chosen per learner and fold); ``epochs`` sets
    the training epochs of every network (the DNN's too; default 40); ``select_body`` chooses the learner's body with
    λ (issue 27, round 10; default: the protocol's); ``fresh_data`` draws the cohort anew for the seed
    (:func:`cohort_settings`)."""
    from fairdesk.core.audits.age_independence import AgeProtocolSettings, run_age_independence
    from fairdesk.core.models.age_independent import LearnerSettings
    from fairdesk.core.synthetic.age_cohort import make_age_cohort, oracle_age_r2

    kw = cohort_settings(name, seed, fresh_data)
    cohort = make_age_cohort(n_participants=participants, n_features=100, **kw)
    t0 = time.perf_counter()
    learner = LearnerSettings(**({} if lam is None else {"lam": lam}), **({} if epochs is None else {"epochs": epochs}),
                              **({} if weight_decay is None else {"weight_decay": weight_decay}),
                              **({} if dnn_body is None else {"dnn_body": dnn_body}),
                              **({} if k_adv is None else {"k_adv": k_adv}))
    fixed = {"learner": learner} if lam is None else {"select_lambda": False, "learner": learner}
    if select_body is not None:
        fixed["select_body"] = select_body
    doc = run_age_independence(cohort, "label", "age", "participant_id", settings=AgeProtocolSettings(
        methods=tuple(methods), folds=folds, seed=seed, reference=False, **fixed)).document
    out = {"cohort": name, "rows": len(cohort), "participants": participants, "folds": folds,
           "oracle_age_r2": oracle_age_r2(kw["age_signal"], 100), "age_r2_from_label":
           doc["settings"]["age_r2_from_label"], "seconds": time.perf_counter() - t0,
           "dnn_body": doc["settings"]["learner"]["dnn_body"], "k_adv": doc["settings"]["learner"]["k_adv"],
           "select_body": doc["settings"].get("select_body", False), "data_seed": kw["seed"], "methods": {}}
    dnn = doc["methods"]["dnn"]
    for m, e in doc["methods"].items():
        row = {"accuracy": e["accuracy"]["mean"], "delta_eo_5": e["delta_eo_5"]["mean"],
               "leakage_r2": e["leakage"]["r2"], "leakage_auroc": e["leakage"]["auroc"],
               "leakage_r2_beyond_label": e["leakage"]["beyond_label"]["r2"]}
        if m != "dnn":
            cost = 100 * (dnn["accuracy"]["mean"] - e["accuracy"]["mean"])
            acc_c, d5_c = e["comparison"]["accuracy"], e["comparison"]["delta_eo_5"]
            # the product's own comparison: the cost's 95% CI (corrected resampled t) and the Δ^(5) verdict
            row |= {"accuracy_cost_ci_points": [-100 * acc_c["ci_high"], -100 * acc_c["ci_low"]],
                    "accuracy_verdict": acc_c["verdict"], "delta_eo_5_difference_ci": [d5_c["ci_low"], d5_c["ci_high"]],
                    "delta_eo_5_verdict": d5_c["verdict"]}
            sel = e.get("lambda_selection") or {"folds": [{"lambda": lam}] * folds, "reached_in_folds": None}
            row |= {"accuracy_cost_points": cost,
                    "lambda_chosen": [c["lambda"] for c in sel["folds"]],
                    "body_chosen": [c.get("body") for c in sel["folds"]],
                    "selection": {"folds": [{k: c.get(k) for k in ("lambda", "body", "reached", "points")}
                                            for c in sel["folds"]]} if e.get("lambda_selection") else None,
                    "reached_in_folds": sel["reached_in_folds"],
                    "verdict": e["age_independence"]["verdict"],
                    "targets": {"r2<=0.10": row["leakage_r2"] <= 0.10,
                                "beyond<=0.10": row["leakage_r2_beyond_label"] <= 0.10, "cost<=5": cost <= 5,
                                "delta5<=dnn": row["delta_eo_5"] <= dnn["delta_eo_5"]["mean"]}}
        out["methods"][m] = row
    return out


def spread(results: list[dict]) -> dict:
    """Per learner over runs of one cohort with different seeds (folds and training seeds): the accuracy cost and
    Δ^(5) minus the DNN's, mean, SD and the values — one run's cost is dominated by which networks the seed drew
    (docs/methods.md §3)."""
    import numpy as np

    out = {}
    for m in results[0]["methods"]:
        if m == "dnn":
            continue
        cost = [r["methods"][m]["accuracy_cost_points"] for r in results]
        d5 = [r["methods"][m]["delta_eo_5"] - r["methods"]["dnn"]["delta_eo_5"] for r in results]
        r2 = [r["methods"][m]["leakage_r2"] for r in results]
        series = [("cost_points", cost), ("delta5_minus_dnn", d5), ("leakage_r2", r2)]
        out[m] = {name: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
                         "values": v} for name, v in series}
    return out


def main(argv=None) -> list[dict]:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--cohort", choices=sorted(COHORTS), action="append")
    ap.add_argument("--participants", type=int, default=200)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated, dnn first")
    ap.add_argument("--lambda", dest="lam", type=float, default=None, help="fix λ (default: chosen per fold)")
    ap.add_argument("--epochs", type=int, default=None, help="epochs of every network (default 40)")
    ap.add_argument("--weight-decay", type=float, default=None,
                    help="AdamW weight decay of every predicting network (the DNN's too; default: the module's)")
    ap.add_argument("--dnn-body", action=argparse.BooleanOptionalAction, default=None,
                    help="the learners are the DNN plus an adversary (its layers and fit seed; default: the module's)")
    ap.add_argument("--select-body", action=argparse.BooleanOptionalAction, default=None,
                    help="choose the learners' body (own layers or the DNN's) with λ by the nested validation")
    ap.add_argument("--k-adv", type=int, default=None, help="adversary steps K per minibatch (default: the module's)")
    ap.add_argument("--seeds", default="0", help="comma-separated protocol seeds (folds and training seeds); with "
                                                     "more than one, the cost's mean ± SD over them")
    ap.add_argument("--fresh-data", action="store_true",
                    help="draw each seed's cohort anew (data seed = a per-cohort offset + the seed; default: one draw)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    for name in args.cohort or sorted(COHORTS):
        runs = []
        for seed in (int(v) for v in args.seeds.split(",")):
            r = run(name, args.participants, args.folds, seed=seed, methods=args.methods.split(","), lam=args.lam,
                    epochs=args.epochs, weight_decay=args.weight_decay, dnn_body=args.dnn_body,
                    select_body=args.select_body, k_adv=args.k_adv, fresh_data=args.fresh_data)
            r["seed"] = seed
            r["weight_decay"] = args.weight_decay
            runs.append(r)
            results.append(r)
            print(f"\n{name}, seed {seed}: {r['rows']} rows, {r['participants']} participants, oracle age R² "
                  f"{r['oracle_age_r2']:.2f}, age R² from the label alone {r['age_r2_from_label']:.2f}, "
                  f"{r['seconds']:.0f} s")
            for m, row in r["methods"].items():
                extra = (f"  cost {row['accuracy_cost_points']:+.1f} pts (95% CI "
                         f"{row['accuracy_cost_ci_points'][0]:+.1f} to {row['accuracy_cost_ci_points'][1]:+.1f}: "
                         f"{row['accuracy_verdict']}), Δ(5) {row['delta_eo_5_verdict']}, λ {row['lambda_chosen']}, "
                         f"body {row['body_chosen']}, "
                         f"reached {row['reached_in_folds']}/{r['folds']}, targets {row['targets']}"
                         ) if m != "dnn" else ""
                print(f"  {m:8s} accuracy {row['accuracy']:.3f}  Δ(5) {row['delta_eo_5']:.3f}  leakage R² "
                      f"{row['leakage_r2']:.3f} (AUROC {row['leakage_auroc']:.2f}), beyond the label "
                      f"{row['leakage_r2_beyond_label']:.3f}{extra}", flush=True)
        if len(runs) > 1:
            for m, v in spread(runs).items():
                print(f"  {name} over seeds {args.seeds}: {m} cost {v['cost_points']['mean']:+.1f} ± "
                      f"{v['cost_points']['sd']:.1f} pts, Δ(5) − DNN's {v['delta5_minus_dnn']['mean']:+.2f} ± "
                      f"{v['delta5_minus_dnn']['sd']:.2f}, age R² {v['leakage_r2']['mean']:.3f} ± "
                      f"{v['leakage_r2']['sd']:.3f}", flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return results


if __name__ == "__main__":
    main()
