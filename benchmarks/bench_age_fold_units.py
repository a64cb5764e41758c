"""The default path of the age protocol on the fresh cohorts, one outer fold per process (issue 27, round 6).

``bench_age_fresh_cohorts`` runs a cohort's folds one after another; on a shared machine a full-size default-path run
(λ chosen per learner and fold: 13 fits per learner and fold) did not finish in a working session. This runs one
outer fold — the protocol's own :func:`~fairdesk.core.audits.age_independence.cv_unit` for the DNN,
age-indep-simple and age-indep-entropy, the same code and seeds ``run_age_independence`` uses — and writes its
metrics, λ choice and the leakage probes' held-out predictions; ``--merge`` pools the folds of one (cohort, seed)
as the protocol does (accuracy and Δ^(5) the mean over folds, the probes' R² on the pooled held-out predictions,
the cost's 95% CI from the corrected resampled t) and prints one JSON record. Checked: *independent*, 30
participants, seed 0 — the merged accuracy, Δ^(5), age R² and R² beyond the label of all three methods equal
``bench_age_fresh_cohorts --participants 30 --folds 3``'s.

    PYTHONPATH=. OMP_NUM_THREADS=1 python -m benchmarks.bench_age_fold_units --cohort independent --seed 0 --fold 0
        [--participants 200 --folds 3 --dir /tmp/units]
    PYTHONPATH=. python -m benchmarks.bench_age_fold_units --cohort independent --seed 0 --merge
"""
from __future__ import annotations

import argparse
import json
import os

METHODS = ("dnn", "simple", "entropy")


def _setup(cohort: str, participants: int, folds: int, seed: int):
    from benchmarks.bench_age_fresh_cohorts import COHORTS
    from fairdesk.core.audits import age_independence as ap
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    df = make_age_cohort(n_participants=participants, n_features=100, **COHORTS[cohort])
    data = ap._prepare(df, "label", "age", "participant_id", None)
    settings = ap.AgeProtocolSettings(methods=METHODS, folds=folds, seed=seed, reference=False)
    return data, settings, ap.group_folds(data["groups"], data["y"], folds, 1, seed)


def _path(d: str, cohort: str, seed: int, fold: int) -> str:
    return os.path.join(d, f"unit-{cohort}-{seed}-{fold}.json")


def run_fold(cohort: str, seed: int, fold: int, participants: int, folds: int, out_dir: str) -> dict:
    from fairdesk.core.audits import age_independence as ap
    from fairdesk.core.progress import Reporter

    data, settings, splits = _setup(cohort, participants, folds, seed)
    sp = splits[fold]
    out = {"cohort": cohort, "seed": seed, "fold": fold, "participants": participants, "folds": folds, "methods": {}}
    for m in METHODS:
        weight = 1 + len(settings.lambda_grid) * ap.SELECTION_FOLDS * 0.75 if m != "dnn" else 1
        r = ap.cv_unit((sp, m, weight), (data, settings), Reporter())
        out["methods"][m] = {"metrics": r["metrics"], "choice": r["choice"],
                             "probes": {t: {p: v.tolist() for p, v in by.items()} for t, by in r["probes"].items()}}
    with open(_path(out_dir, cohort, seed, fold), "w") as fh:
        json.dump(out, fh)
    return out


def merge(cohort: str, seed: int, participants: int, folds: int, out_dir: str) -> dict:
    import numpy as np

    from fairdesk.core.audits import age_independence as ap

    data, settings, splits = _setup(cohort, participants, folds, seed)
    y, age = data["y"], data["age"]
    units = []
    for f in range(folds):
        with open(_path(out_dir, cohort, seed, f)) as fh:
            units.append(json.load(fh))
    beyond = np.full(len(y), np.nan)
    for sp in splits:
        beyond[sp.test] = age[sp.test] - ap.label_age(y[sp.train], age[sp.train], y[sp.test])
    res = {"cohort": cohort, "seed": seed, "participants": participants, "folds": folds, "lambda": "chosen",
           "methods": {}}
    for m in METHODS:
        pred = {t: {p: np.full(len(y), np.nan) for p in ("ridge", "gbm")} for t in ("age", "beyond_label")}
        for sp, u in zip(splits, units):
            for t, by in u["methods"][m]["probes"].items():
                for p, v in by.items():
                    pred[t][p][sp.test] = v
        met = [u["methods"][m]["metrics"] for u in units]
        row = {"accuracy": float(np.mean([x["accuracy"] for x in met])), "accuracy_folds": [x["accuracy"] for x in met],
               "delta_eo_5": float(np.mean([x["delta_eo_5"] for x in met])),
               "delta_eo_5_folds": [x["delta_eo_5"] for x in met],
               "leakage_r2": ap.best_r2(pred["age"], age), "leakage_r2_beyond_label": ap.best_r2(pred["beyond_label"],
                                                                                                  beyond)}
        if m != "dnn":
            row["lambda_chosen"] = [u["methods"][m]["choice"]["lambda"] for u in units]
            row["reached_in_folds"] = int(sum(u["methods"][m]["choice"]["reached"] for u in units))
        res["methods"][m] = row
    dnn = res["methods"]["dnn"]
    for m in METHODS[1:]:
        row = res["methods"][m]
        c = ap.paired_comparison(row["accuracy_folds"], dnn["accuracy_folds"], ap.MARGINS["accuracy"],
                                 test_train_ratio=ap.split_ratio(splits))
        row |= {"accuracy_cost_points": 100 * (dnn["accuracy"] - row["accuracy"]),
                "accuracy_cost_ci_points": [-100 * c["ci_high"], -100 * c["ci_low"]],
                "delta5_minus_dnn": row["delta_eo_5"] - dnn["delta_eo_5"]}
    return res


def main(argv=None):
    import torch

    ap_ = argparse.ArgumentParser()
    ap_.add_argument("--cohort", required=True)
    ap_.add_argument("--seed", type=int, default=0)
    ap_.add_argument("--fold", type=int, default=None)
    ap_.add_argument("--merge", action="store_true")
    ap_.add_argument("--participants", type=int, default=200)
    ap_.add_argument("--folds", type=int, default=3)
    ap_.add_argument("--dir", default=".")
    args = ap_.parse_args(argv)
    torch.set_num_threads(1)
    if args.merge:
        print(json.dumps(merge(args.cohort, args.seed, args.participants, args.folds, args.dir), indent=1))
    elif args.fold is not None:
        run_fold(args.cohort, args.seed, args.fold, args.participants, args.folds, args.dir)
    else:
        raise SystemExit("Give --fold F (run one outer fold) or --merge (pool the folds written).")


if __name__ == "__main__":
    main()
