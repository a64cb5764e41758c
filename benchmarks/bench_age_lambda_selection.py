"""How λ is chosen for the age-independent learners, and what each choice costs on held-out participants (issue 27).

For one fresh cohort (``bench_age_fresh_cohorts.COHORTS``) and one protocol seed this records, per outer fold of the
protocol and per learner:

* the *held-out* outcome at every λ of the grid — the protocol's own fit (:func:`cv_unit` with λ fixed: same folds,
  same training seed as the default path, whose fit seed does not depend on λ): accuracy, Δ^(5) and the leakage
  probes' held-out predictions;
* the *validation* evidence at every λ on each of the ``SELECTION_FOLDS`` participant-disjoint inner splits of the
  fold's training participants (with :func:`select_lambda`'s seeds, the same at every λ since issue 27's round 5;
  the round-4 output in ``benchmarks/results`` was made with the earlier seeds, split 0 being the one-split rule's):
  correct predictions, the probes' predictions of the age beyond the label.

Any selection rule is then a function of the validation evidence, and its held-out numbers are read off the held-out
outcomes without refitting (:func:`evaluate`): the one-split rule (before), pooled validation over all inner splits,
and variants. The per-fold "oracle" (the λ with the best held-out accuracy among those whose held-out fold R² is
within the target) separates the cost of a wrong λ from the networks' own training noise.

    PYTHONPATH=. OMP_NUM_THREADS=1 python -m benchmarks.bench_age_lambda_selection --cohort independent --seed 0 \
        --out lam_independent_0.json
    PYTHONPATH=. python -m benchmarks.bench_age_lambda_selection --evaluate lam_*.json
    PYTHONPATH=. OMP_NUM_THREADS=1 python -m benchmarks.bench_age_lambda_selection --timing   # CPU s, now / before
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

LEARNERS = ("simple", "entropy")


def collect(name: str, seed: int, participants: int = 200, folds: int = 3, out_path: str | None = None) -> dict:
    """Held-out outcomes at every λ and the validation evidence of every inner split (see the module docstring);
    written to ``out_path`` after every outer fold (a slow run leaves its finished folds)."""
    from dataclasses import replace

    from benchmarks.bench_age_fresh_cohorts import COHORTS
    from fairdesk.core.audits import age_independence as ap
    from fairdesk.core.models.age_independent import fit_method
    from fairdesk.core.progress import Reporter
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    cohort = make_age_cohort(n_participants=participants, n_features=100, **COHORTS[name])
    data = ap._prepare(cohort, "label", "age", "participant_id", None)
    X, y, age, groups = data["X"], data["y"], data["age"], data["groups"]
    settings = ap.AgeProtocolSettings(methods=("dnn",) + LEARNERS, folds=folds, seed=seed, reference=False,
                                      select_lambda=False)
    grid = settings.lambda_grid
    splits = ap.group_folds(groups, y, folds, 1, seed)
    rep = Reporter()
    out = {"cohort": name, "seed": seed, "participants": participants, "folds": folds, "grid": list(grid),
           "target": settings.leakage_target, "y": y.tolist(), "age": age.tolist(), "outer": [],
           "seconds": {}}
    t0 = time.perf_counter()
    for sp in splits:
        fold = {"test": sp.test.tolist(), "train_label_age": ap.label_age(y[sp.train], age[sp.train],
                                                                          y[sp.test]).tolist(), "methods": {}}
        res = ap.cv_unit((sp, "dnn", 1), (data, settings), rep)
        fold["methods"]["dnn"] = {"heldout": {"dnn": _heldout(res)}}
        for m in LEARNERS:
            entry = {"heldout": {}, "validation": {}}
            for lam in grid:
                s = replace(settings, learner=replace(settings.learner, lam=float(lam)))
                entry["heldout"][f"{lam:g}"] = _heldout(ap.cv_unit((sp, m, 1), (data, s), rep))
            # the inner splits and seeds select_lambda uses
            sel_seed = ap._seed(seed, sp.repeat, sp.fold, ap._METHOD_INDEX[m], 2000)
            Xo, yo, ao, go = X[sp.train], y[sp.train], age[sp.train], groups[sp.train]
            for j, inner in enumerate(ap.group_folds(go, yo, ap.SELECTION_FOLDS, 1, sel_seed)):
                tr, va = inner.train, inner.test
                beyond = ao[va] - ap.label_age(yo[tr], ao[tr], yo[va])
                for i, lam in enumerate(grid):
                    fit_seed, probe_seed = ap._inner_seeds(sel_seed, j)  # select_lambda's: the same at every λ
                    fitted = fit_method(m, Xo[tr], yo[tr], ao[tr], replace(settings.learner, lam=float(lam)),
                                        seed=fit_seed)
                    correct = (fitted.predict_proba(Xo[va]) >= ap.THRESHOLD).astype(int) == yo[va]
                    lp = ap.leakage_probes(fitted.represent(Xo[tr]), yo[tr], ao[tr], fitted.represent(Xo[va]),
                                           yo[va], ao[va], go[va], seed=probe_seed)
                    entry["validation"].setdefault(f"{lam:g}", []).append(
                        {"correct": correct.astype(int).tolist(), "beyond": beyond.tolist(), "age": ao[va].tolist(),
                         "beyond_pred": {p: v.tolist() for p, v in lp["beyond_label"].items()},
                         "age_pred": {p: v.tolist() for p, v in lp["age"].items()}})
            fold["methods"][m] = entry
        out["outer"].append(fold)
        if out_path:
            with open(out_path, "w") as fh:
                json.dump(out, fh)
        print(f"{name} seed {seed} fold {sp.fold + 1}/{folds}: {time.perf_counter() - t0:.0f} s", flush=True)
    out["seconds"]["total"] = time.perf_counter() - t0
    return out


def _heldout(res: dict) -> dict:
    return {"accuracy": res["metrics"]["accuracy"], "delta_eo_5": res["metrics"]["delta_eo_5"],
            "probes": {t: {p: v.tolist() for p, v in by.items()} for t, by in (res["probes"] or {}).items()}}


# --------------------------------------------------------------------------------------------------------------
# Rules and their held-out numbers


def _r2(target, pred) -> float:
    from sklearn.metrics import r2_score

    return float(r2_score(np.asarray(target, float), np.asarray(pred, float)))


def validation_points(entry: dict, grid, splits=None) -> list[dict]:
    """Per λ: accuracy, n and the best probe's R² beyond the label, pooled over the inner ``splits`` (all by
    default), plus the per-split R² (best probe per split) for a standard error."""
    points = []
    for lam in grid:
        recs = entry["validation"][f"{lam:g}"]
        recs = [recs[j] for j in (range(len(recs)) if splits is None else splits)]
        correct = np.concatenate([r["correct"] for r in recs])
        beyond = np.concatenate([r["beyond"] for r in recs])
        pooled = max(_r2(beyond, np.concatenate([r["beyond_pred"][p] for r in recs])) for p in ("ridge", "gbm"))
        per_split = [max(_r2(r["beyond"], r["beyond_pred"][p]) for p in ("ridge", "gbm")) for r in recs]
        points.append({"lambda": float(lam), "accuracy": float(correct.mean()), "n": int(correct.size),
                       "leakage_r2": pooled, "per_split_r2": per_split,
                       "per_split_accuracy": [float(np.mean(r["correct"])) for r in recs]})
    return points


def rule_one_split(points, target):
    from fairdesk.core.audits.age_independence import choose_lambda

    return choose_lambda(points, target, points[0]["n"])[0]


def _se_leakage(points, target):
    """The one-standard-error rule applied to the leakage as well: a λ reaches the target when its pooled R² is
    within one standard error (SD of the per-split R² / √splits) of it; among those, the accuracy rule."""
    ok = [dict(p, leakage_r2=p["leakage_r2"] - float(np.std(p["per_split_r2"], ddof=1)) / np.sqrt(
        len(p["per_split_r2"]))) for p in points]
    return rule_one_split(ok, target)


def _isotonic(points, target):
    """Pooled R² made non-increasing in λ (isotonic regression over the grid) before the rule."""
    from sklearn.isotonic import IsotonicRegression

    lam = [p["lambda"] for p in points]
    smooth = IsotonicRegression(increasing=False).fit_transform(lam, [p["leakage_r2"] for p in points])
    return rule_one_split([dict(p, leakage_r2=float(v)) for p, v in zip(points, smooth)], target)


def _se_fallback(points, target):
    """Pooled; when no λ reaches the target, the smallest λ whose R² is within one standard error (SD of the
    per-split R² / √splits, of the lowest) of the lowest R², instead of the lowest itself."""
    from fairdesk.core.audits.age_independence import choose_lambda

    lam, reached = choose_lambda(points, target, points[0]["n"])
    if reached:
        return lam
    low = min(points, key=lambda p: p["leakage_r2"])
    se = float(np.std(low["per_split_r2"], ddof=1)) / np.sqrt(len(low["per_split_r2"]))
    return min(p["lambda"] for p in points if p["leakage_r2"] <= low["leakage_r2"] + se)


RULES = {
    # before: one inner split (a quarter of the training participants), one-SE rule on accuracy
    "one split": (lambda e, g, t: rule_one_split(validation_points(e, g, [0]), t)),
    # pooled over all inner splits, the same rule (n = every training row)
    "pooled": (lambda e, g, t: rule_one_split(validation_points(e, g), t)),
    # pooled over two of the four splits (half the training participants)
    "pooled, 2 splits": (lambda e, g, t: rule_one_split(validation_points(e, g, [0, 1]), t)),
    # pooled, the smallest λ whose R² reaches the target (no accuracy comparison)
    "pooled, smallest": (lambda e, g, t: next((p["lambda"] for p in validation_points(e, g)
                                                if p["leakage_r2"] <= t), None)
                         or rule_one_split(validation_points(e, g), t)),
    "pooled, 1-SE leakage": (lambda e, g, t: _se_leakage(validation_points(e, g), t)),
    "pooled, isotonic R²": (lambda e, g, t: _isotonic(validation_points(e, g), t)),
    "pooled, 1-SE fallback": (lambda e, g, t: _se_fallback(validation_points(e, g), t)),
}


def rule_values(data: dict, rule: str) -> dict:
    grid, target = data["grid"], data["target"]
    return {m: [RULES[rule](f["methods"][m], grid, target) for f in data["outer"]] for m in LEARNERS}


def heldout_numbers(data: dict, chosen: dict) -> dict:
    """The protocol's numbers had λ been ``chosen[m][fold]``: mean accuracy and Δ^(5) over folds, pooled probe R²
    (the better probe) of age and of the age beyond the label, as ``_cross_validate`` computes them."""
    y, age = np.asarray(data["y"]), np.asarray(data["age"], float)
    out = {}
    for m in ("dnn",) + LEARNERS:
        lams = ["dnn"] * len(data["outer"]) if m == "dnn" else [f"{v:g}" for v in chosen[m]]
        rows = [f["methods"][m]["heldout"][k] for f, k in zip(data["outer"], lams)]
        pred = {t: {p: np.full(len(y), np.nan) for p in ("ridge", "gbm")} for t in ("age", "beyond_label")}
        beyond = np.full(len(y), np.nan)
        for f, r in zip(data["outer"], rows):
            idx = np.asarray(f["test"])
            beyond[idx] = age[idx] - np.asarray(f["train_label_age"])
            for t in pred:
                for p in pred[t]:
                    pred[t][p][idx] = r["probes"][t][p]
        out[m] = {"accuracy": float(np.mean([r["accuracy"] for r in rows])),
                  "delta_eo_5": float(np.mean([r["delta_eo_5"] for r in rows])),
                  "leakage_r2": max(_r2(age, pred["age"][p]) for p in ("ridge", "gbm")),
                  "beyond_r2": max(_r2(beyond, pred["beyond_label"][p]) for p in ("ridge", "gbm")),
                  "lambda": None if m == "dnn" else list(chosen[m])}
    return out


def fold_detail(d: dict) -> list[dict]:
    """Per outer fold and learner, per λ: validation accuracy and R² beyond the label on split 0 (the one-split
    rule's evidence), on each split and pooled; the held-out fold's accuracy and its probe R² (that fold's rows
    only) — the reproduction of the instability."""
    age = np.asarray(d["age"], float)
    rows = []
    for k, f in enumerate(d["outer"]):
        idx = np.asarray(f["test"])
        beyond = age[idx] - np.asarray(f["train_label_age"])
        for m in LEARNERS:
            pooled = validation_points(f["methods"][m], d["grid"])
            for p in pooled:
                h = f["methods"][m]["heldout"][f"{p['lambda']:g}"]
                rows.append({"cohort": d["cohort"], "seed": d["seed"], "fold": k, "method": m, "lambda": p["lambda"],
                             "val_split0_accuracy": p["per_split_accuracy"][0], "val_split0_r2": p["per_split_r2"][0],
                             "val_split_r2": p["per_split_r2"], "val_pooled_accuracy": p["accuracy"],
                             "val_pooled_r2": p["leakage_r2"], "heldout_accuracy": h["accuracy"],
                             "heldout_fold_r2_beyond": max(_r2(beyond, h["probes"]["beyond_label"][q])
                                                           for q in ("ridge", "gbm"))})
    return rows


def evaluate(paths: list[str]) -> dict:
    """Per cohort, per rule: per seed numbers and mean ± SD over seeds of cost, age R², Δ^(5) − DNN's."""
    runs = [json.load(open(p)) for p in paths]
    table = {}
    for d in runs:
        for rule in RULES:
            nums = heldout_numbers(d, rule_values(d, rule))
            table.setdefault(d["cohort"], {}).setdefault(rule, {})[d["seed"]] = nums
        # per fold, the best held-out accuracy among all λ: the cost no choice of λ from the grid avoids
        best = {m: [max(f["methods"][m]["heldout"][f"{v:g}"]["accuracy"] for v in d["grid"]) for f in d["outer"]]
                for m in LEARNERS}
        table[d["cohort"]].setdefault("best λ per fold (held-out accuracy)", {})[d["seed"]] = {
            "dnn": {"accuracy": table[d["cohort"]]["one split"][d["seed"]]["dnn"]["accuracy"]},
            **{m: {"accuracy": float(np.mean(best[m]))} for m in LEARNERS}}
    summary = {}
    for cohort, rules in table.items():
        for rule, seeds in rules.items():
            s = {}
            for m in LEARNERS:
                cost = [100 * (v["dnn"]["accuracy"] - v[m]["accuracy"]) for v in seeds.values()]
                s[m] = {"cost": _ms(cost)}
                if "leakage_r2" in next(iter(seeds.values()))[m]:
                    s[m] |= {"age_r2": _ms([v[m]["leakage_r2"] for v in seeds.values()]),
                             "beyond_r2": _ms([v[m]["beyond_r2"] for v in seeds.values()]),
                             "d5_minus_dnn": _ms([v[m]["delta_eo_5"] - v["dnn"]["delta_eo_5"]
                                                  for v in seeds.values()]),
                             "d5_above_dnn": int(sum(v[m]["delta_eo_5"] > v["dnn"]["delta_eo_5"]
                                                     for v in seeds.values())),
                             "lambda": [v[m]["lambda"] for v in seeds.values()]}
            summary.setdefault(cohort, {})[rule] = {"seeds": sorted(seeds), **s}
    return {"per_seed": table, "summary": summary, "folds": [r for d in runs for r in fold_detail(d)]}


def timing(name: str = "independent", participants: int = 200, seed: int = 0, method: str = "simple") -> dict:
    """Run time of choosing λ for one learner on one outer fold's training rows, in one process: the selection now
    (:func:`select_lambda`, every inner split) against the one-split selection it replaced (the same code on inner
    split 0 only, written out here) and against the one fit that follows either; ratios."""
    from dataclasses import replace

    from benchmarks.bench_age_fresh_cohorts import COHORTS
    from fairdesk.core.audits import age_independence as ap
    from fairdesk.core.models.age_independent import fit_method
    from fairdesk.core.progress import Reporter
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    cohort = make_age_cohort(n_participants=participants, n_features=100, **COHORTS[name])
    data = ap._prepare(cohort, "label", "age", "participant_id", None)
    sp = ap.group_folds(data["groups"], data["y"], 3, 1, seed)[0]
    X, y, age, groups = (data[k][sp.train] for k in ("X", "y", "age", "groups"))
    settings = ap.AgeProtocolSettings(methods=("dnn", method), folds=3, seed=seed, reference=False)

    def one_split():
        inner = ap.group_folds(groups, y, ap.SELECTION_FOLDS, 1, seed)[0]
        tr, va = inner.train, inner.test
        points = []
        for i, lam in enumerate(settings.lambda_grid):
            fitted = fit_method(method, X[tr], y[tr], age[tr], replace(settings.learner, lam=float(lam)),
                                seed=ap._seed(seed, i))
            lp = ap.leakage_probes(fitted.represent(X[tr]), y[tr], age[tr], fitted.represent(X[va]), y[va], age[va],
                                   groups[va], seed=ap._seed(seed, i, 1000))
            points.append({"lambda": float(lam), "accuracy": float(np.mean(
                (fitted.predict_proba(X[va]) >= ap.THRESHOLD).astype(int) == y[va])), "leakage_r2": ap.best_r2(
                lp["beyond_label"], age[va] - ap.label_age(y[tr], age[tr], y[va]))})
        return ap.choose_lambda(points, settings.leakage_target, len(va))

    seconds = {}
    for label, fn in (("one fit", lambda: fit_method(method, X, y, age, settings.learner, seed=seed)),
                      ("one-split selection (before)", one_split),
                      ("pooled selection (now)", lambda: ap.select_lambda(method, X, y, age, groups, settings, seed,
                                                                           Reporter()))):
        t0 = time.process_time()
        fn()
        seconds[label] = time.process_time() - t0
    fit, old, new = seconds.values()
    return {"cohort": name, "participants": participants, "training_rows": int(len(y)), "cpu_seconds": seconds,
            "selection_ratio_now_vs_before": new / old,
            "learner_per_fold_ratio_now_vs_before": (new + fit) / (old + fit)}


def _ms(v) -> dict:
    v = [float(x) for x in v]
    return {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, "values": v}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cohort")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--participants", type=int, default=200)
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--evaluate", nargs="*")
    ap.add_argument("--timing", action="store_true", help="CPU time of the selection now against before")
    args = ap.parse_args(argv)
    if args.timing:
        import torch

        torch.set_num_threads(1)
        res = timing(args.cohort or "independent", args.participants, args.seed)
        print(json.dumps(res, indent=1))
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(res, fh, indent=1)
        return res
    if args.evaluate:
        res = evaluate(args.evaluate)
        for r in res["folds"]:
            print(f"{r['cohort']:20s} seed {r['seed']} fold {r['fold']} {r['method']:7s} λ {r['lambda']:<3g} validation: "
                  f"split 0 acc {r['val_split0_accuracy']:.3f} R² {r['val_split0_r2']:+.3f} | splits R² "
                  + " ".join(f"{v:+.3f}" for v in r["val_split_r2"])
                  + f" | pooled acc {r['val_pooled_accuracy']:.3f} R² {r['val_pooled_r2']:+.3f} || held-out acc "
                  f"{r['heldout_accuracy']:.3f} R² {r['heldout_fold_r2_beyond']:+.3f}")
        for cohort, rules in res["summary"].items():
            for rule, s in rules.items():
                print(f"{cohort:22s} {rule:38s} " + "  ".join(
                    f"{m}: cost {s[m]['cost']['mean']:+.1f}±{s[m]['cost']['sd']:.1f}"
                    + (f" R² {s[m]['age_r2']['mean']:.3f}±{s[m]['age_r2']['sd']:.3f} ΔΔ5 "
                       f"{s[m]['d5_minus_dnn']['mean']:+.2f}±{s[m]['d5_minus_dnn']['sd']:.2f} "
                       f"(above {s[m]['d5_above_dnn']}/{len(s['seeds'])})" if "age_r2" in s[m] else "")
                    for m in LEARNERS))
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(res, fh, indent=1)
        return res
    import torch

    torch.set_num_threads(1)
    return collect(args.cohort, args.seed, args.participants, args.folds, args.out)


if __name__ == "__main__":
    main()
