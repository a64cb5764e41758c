"""The disentanglement protocol of 000 for age-independent learners (METHODS §2–3), plus leakage and a frontier.

Entry points (plain functions ``f(inputs, progress=None, cancel=None) -> result``):

* :func:`run_age_independence` ``(table, label, attribute, group_id, features, settings) -> AgeIndependenceResult``
  — repeated group-disjoint k-fold cross-validation of every method; per (repeat, fold), on that fold's held-out
  rows: accuracy, Δ_eo^(2), Δ_eo^(5) (equal-frequency bins of the attribute *within the fold*, the group audit's
  own :func:`~fairdesk.core.audits.groups.delta_eo`); one-tailed paired t-tests against the DNN (scipy); the three
  verdicts; leakage of age from each representation; the JSON document and the long predictions table.
* :func:`accuracy_fairness_frontier` — accuracy, Δ^(5) and leakage as λ varies, per learner (points to plot).
* :func:`group_folds`, :func:`fold_metrics`, :func:`paired_comparison`, :func:`leakage_probe` — the pieces.

Folds: ``StratifiedGroupKFold(k, shuffle=True)`` (sklearn) per repeat, seeded from (seed, repeat), stratified by
label so every held-out fold holds both classes; no participant is in two folds. Each (repeat, fold, method) fit
gets its own seed from (seed, repeat, fold, method), so a method's numbers do not depend on which other methods run;
with ``learner.dnn_body`` the learners take the DNN's (:func:`fit_seed`: common random numbers with the DNN).

Verdicts per (method, metric), against the DNN over the R·k paired per-fold differences d_j:

* **differs** — the one-tailed test (``alternative="less"``: method below the DNN; for accuracy that is the
  accuracy cost, for Δ the fairness gain) is significant after Benjamini–Hochberg over every test of the document;
* **equivalent within ±margin** — the TOST (two one-sided tests of the mean difference against ±margin, same
  variance) is significant after BH over every TOST of the document;
* **inconclusive** — neither. Margins (:data:`MARGINS`): accuracy ±0.02 (two points; 000 calls a 2–3 point cost
  small), Δ^(2) ±0.05, Δ^(5) ±0.10 (about a tenth of the DNN's Δ in 000 Tables 1–2).

The test (:data:`TESTS`, ``AgeProtocolSettings.test``): by default the **corrected resampled t-test** (Nadeau and
Bengio 2003): t = mean(d) / sqrt((1/(R·k) + n_test/n_train)·s²_d) on R·k − 1 degrees of freedom — the folds share
training rows (and, with R > 1, held-out rows), so their differences are correlated and the plain variance
s²_d/(R·k) is too small. ``test="plain"`` is the plain paired t-test over folds (scipy ``ttest_rel``), kept for
reproducing 000 and named anti-conservative: with two equally good methods it rejects more often than α, the more
so the more repeats (measured in docs/methods.md §3).

Leakage (beyond 000): for each fitted representation a fresh probe — ridge (``RidgeCV``) and gradient boosting
(``HistGradientBoostingRegressor``) — predicts the age of each held-out participant: it learns from the fold's
training rows' representations (the same fitted model) plus the held-out rows of the other participant-disjoint
inner folds (:func:`leakage_probe`), so it sees about five times one fold's rows and never the participant it
predicts. Pooled per repeat: R², MAE (years) and AUROC for "age above the table's mean age". The probe with the
higher mean R² is reported (``probe``); both are kept under ``probes``. Methods without a representation: null.
The same probes also predict the **age beyond the label** — age minus the mean training age of the row's label
(:func:`label_age`, :func:`leakage_probes`) — reported as ``leakage.beyond_label`` (R², probe). A representation is
"age-independent" when that R² is at most ``leakage_target`` (0.05), else "not age-independent"
(``age_independence``): older participants are more often impaired, so a representation that predicts the label
carries the age the label implies (``settings.age_r2_from_label``: the held-out age R² of the label alone), which
no accurate classifier can shed and which 000's equalized-odds score Δ_eo does not count; the age R² itself is
reported beside it.

λ: by default chosen per learner and outer fold (:func:`select_lambda`) by nested participant-grouped
cross-validation: every λ of ``lambda_grid`` (0.3, 1, 3) is fitted on each of ``SELECTION_FOLDS`` inner splits of
the training participants and scored on the rest, accuracy and probe R² pooled over all training participants; among
the λ whose probe R² (the one beyond the label) is at most the target, the smallest within one standard error of the
best accuracy is used (:func:`choose_lambda`), else the λ with the least age, and the document says the target was
not reached (``lambda_selection``). ``select_lambda=False`` uses ``learner.lam``. Inner fold j is fitted with the
same seed at every λ (common random numbers). ``select_body`` (off) lets the same validation
choose the learner's body too: every (body, λ) of {its own layers, the DNN's layers (``LearnerSettings.dnn_body``)}
× the grid, one rule (:func:`choose_point`: the own layers unless only the DNN's reach the target within one
standard error of the best accuracy); the final fit uses the chosen body (the DNN's with the DNN's fit seed), and
the document records it per fold (``lambda_selection.folds[].body``, ``dnn_body_in_folds``).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd

from fairdesk.core import provenance as _prov
from fairdesk.core.audits.groups import assign_bins, delta_eo, equal_frequency_bins
from fairdesk.core.data.loaders import table_sha256
from fairdesk.core.errors import DataError
from fairdesk.core.models.age_independent import (LEARNERS, METHOD_LABELS, METHODS, REFERENCE_METHOD,
                                                  WITH_REPRESENTATION, LearnerSettings, fairlearn_available,
                                                  fit_method)
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

METRICS: tuple[str, ...] = ("accuracy", "delta_eo_2", "delta_eo_5")
BINS: dict[str, int] = {"delta_eo_2": 2, "delta_eo_5": 5}
ALTERNATIVE = "less"
MARGINS: dict[str, float] = {"accuracy": 0.02, "delta_eo_2": 0.05, "delta_eo_5": 0.10}
#: Level of the two-sided confidence interval of each mean difference against the DNN (same test, same variance).
CI_LEVEL = 0.95
VERDICTS: tuple[str, ...] = ("differs", "equivalent within margin", "inconclusive")
#: Tests of a method against the DNN over the per-fold differences: the default first.
TESTS: tuple[str, ...] = ("corrected", "plain")
TEST_NAMES = {"corrected": "corrected resampled t-test (Nadeau and Bengio 2003): variance factor 1/(R·k) + "
                           "n_test/n_train",
              "plain": "plain paired t-test over folds (scipy ttest_rel; anti-conservative: the folds share "
                       "training rows)"}
BASELINE = "dnn"
PREDICTION_COLUMNS = ("row", "group_id", "method", "repeat", "fold", "label", "attribute", "score", "predicted")
THRESHOLD = 0.5
PROBE_FOLDS = 3
#: Leakage target: a representation is called age-independent when the probe's R² for the age beyond the label on
#: held-out participants is at most this.
LEAKAGE_TARGET = 0.05
#: λ values the nested selection tries per learner and outer fold (000's λ = 1 among them). 0.3 rather than 10:
#: with the bounded term a larger λ did not remove more age (λ = 10 left more than λ = 1) and cost
#: 5–12 points, while λ = 0.3 already reached the target at no cost on the independent cohort (docs/methods.md §3).
LAMBDA_GRID: tuple[float, ...] = (0.3, 1.0, 3.0)
#: The learner bodies :func:`select_lambda` validates when ``select_body`` is on (``LearnerSettings.dnn_body``),
#: in the order of preference among candidates of equal standing: the learner's own layers first.
BODIES: tuple[bool, ...] = (False, True)
BODY_NAMES = {False: "own", True: "dnn"}
#: Inner participant-disjoint folds of an outer fold's training participants over which each λ is validated (pooled).
SELECTION_FOLDS = 4
_METHOD_INDEX = {m: i for i, m in enumerate(METHODS + (REFERENCE_METHOD,))}


@dataclass
class AgeProtocolSettings:
    """What to run. Mirrors ``fairdesk-cli train age-independent``."""

    methods: tuple[str, ...] = METHODS
    folds: int = 5
    repeats: int = 1
    seed: int = 0
    learner: LearnerSettings = field(default_factory=LearnerSettings)
    alpha: float = 0.05
    margins: dict[str, float] = field(default_factory=lambda: dict(MARGINS))
    reference: bool = True  # add fairlearn's AdversarialFairnessClassifier when it is importable
    select_lambda: bool = True  # choose λ per learner and outer fold by nested validation (else learner.lam)
    # with select_lambda, also choose the learner's body per learner and outer fold by the same validation: its own
    # layers or the DNN's (LearnerSettings.dnn_body), :data:`BODIES` × lambda_grid; False:
    # learner.dnn_body
    select_body: bool = False
    lambda_grid: tuple[float, ...] = LAMBDA_GRID
    leakage_target: float = LEAKAGE_TARGET
    test: str = "corrected"  # TESTS: the comparison against the DNN ("plain": the anti-conservative paired t)

    def __post_init__(self) -> None:
        self.methods = tuple(self.methods)
        bad = [m for m in self.methods if m not in METHODS and m != REFERENCE_METHOD]
        if bad:
            raise DataError(f"Unknown method(s) {', '.join(bad)}; choose from {', '.join(METHODS)}.")
        if len(set(self.methods)) != len(self.methods) or not self.methods:
            raise DataError("List each method once (at least one).")
        if self.folds < 2:
            raise DataError("Cross-validation needs at least 2 folds.")
        if self.repeats < 1:
            raise DataError("Run at least one repeat of the cross-validation.")
        if not 0 < self.alpha < 1:
            raise DataError("The significance level α must lie in (0, 1).")
        if self.test not in TESTS:
            raise DataError(f"Unknown test '{self.test}'; use 'corrected' (the corrected resampled t-test, the "
                            "default) or 'plain' (the plain paired t-test, anti-conservative).")
        if set(self.margins) != set(METRICS) or any(v <= 0 for v in self.margins.values()):
            raise DataError("Give a positive equivalence margin for each of accuracy, delta_eo_2 and delta_eo_5.")
        self.lambda_grid = tuple(sorted({float(v) for v in self.lambda_grid}))
        if not self.lambda_grid or any(not v >= 0 for v in self.lambda_grid):
            raise DataError("Give the λ values to choose from as numbers ≥ 0 (at least one).")
        if not -1 < self.leakage_target < 1:
            raise DataError("The leakage target is an age R² and must lie between −1 and 1 (default 0.05).")

    def run_methods(self) -> tuple[str, ...]:
        methods = self.methods
        if self.reference and REFERENCE_METHOD not in methods and fairlearn_available():
            methods = methods + (REFERENCE_METHOD,)
        return methods

    def to_dict(self) -> dict:
        d = asdict(self)
        d["methods"] = list(self.methods)
        d["learner"] = self.learner.to_dict()
        d["lambda_grid"] = list(self.lambda_grid)
        return d


@dataclass
class AgeIndependenceResult:
    document: dict  # {"methods", "settings", "provenance"}: the future ``--json`` output
    predictions: pd.DataFrame  # PREDICTION_COLUMNS: the future ``--predictions`` CSV

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.document, indent=indent, allow_nan=False)


@dataclass
class FoldSplit:
    repeat: int
    fold: int
    train: np.ndarray
    test: np.ndarray


# --------------------------------------------------------------------------------------------------------------
# Pieces


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] % (2 ** 31 - 1))


def group_folds(groups, y, folds: int = 5, repeats: int = 1, seed: int = 0) -> list[FoldSplit]:
    """Repeated participant-disjoint, label-stratified k-fold splits (sklearn ``StratifiedGroupKFold``)."""
    from sklearn.model_selection import StratifiedGroupKFold

    groups = np.asarray(groups)
    y = np.asarray(y).astype(int)
    n_groups = len(pd.unique(groups))
    if n_groups < folds:
        raise DataError(f"{folds}-fold cross-validation needs at least {folds} participants; the table has "
                        f"{n_groups}.")
    out = []
    for r in range(repeats):
        cv = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=_seed(seed, r))
        for f, (train, test) in enumerate(cv.split(np.zeros(len(y)), y, groups)):
            out.append(FoldSplit(r, f, np.sort(train), np.sort(test)))
    return out


def fold_delta(y, predicted, attribute, n_bins: int) -> tuple[float, int]:
    """(Δ_eo^(N), bins used) on one fold's rows: equal-frequency bins of the attribute within these rows."""
    y = np.asarray(y).astype(int)
    predicted = np.asarray(predicted).astype(int)
    edges = equal_frequency_bins(np.asarray(attribute, float), y, n_bins)
    k = len(edges) - 1
    b = assign_bins(np.asarray(attribute, float), edges)
    counts = np.bincount(4 * b + 2 * y + predicted, minlength=4 * k).reshape(k, 4)
    return float(delta_eo(counts)), k


def fold_metrics(y, predicted, attribute) -> dict:
    """Accuracy, Δ^(2), Δ^(5) (and the bins actually used) on one fold's held-out rows."""
    y = np.asarray(y).astype(int)
    predicted = np.asarray(predicted).astype(int)
    if len(np.unique(y)) < 2:
        raise DataError("A held-out fold holds only one class; use fewer folds or more participants per class.")
    out = {"accuracy": float(np.mean(y == predicted))}
    for metric, n in BINS.items():
        out[metric], out[f"bins_{metric}"] = fold_delta(y, predicted, attribute, n)
    return out


def _num(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def paired_comparison(values, baseline, margin: float, alternative: str = ALTERNATIVE, test: str = "corrected",
                      test_train_ratio: float | None = None) -> dict:
    """One-tailed test of ``values`` against ``baseline`` over paired per-fold values, and the TOST at ±margin.

    ``test="corrected"`` (default): the corrected resampled t-test of Nadeau and Bengio (2003), t = mean(d) /
    sqrt((1/J + test_train_ratio)·s²_d) on J − 1 degrees of freedom (J = R·k per-fold differences,
    ``test_train_ratio`` = n_test/n_train of the splits); no library offers it (scipy and sklearn have only the
    plain paired t), so it is written out with scipy's t distribution. ``test="plain"``: scipy ``ttest_rel``
    (factor 1/J), anti-conservative over CV folds. The TOST uses the same variance and degrees of freedom, and so
    does the two-sided :data:`CI_LEVEL` confidence interval of the mean difference (``ci_low``, ``ci_high``: how
    uncertain the accuracy cost or the Δ gain is)."""
    from scipy.stats import t as t_dist
    from scipy.stats import ttest_rel

    if test not in TESTS:
        raise DataError(f"Unknown test '{test}'; use 'corrected' or 'plain'.")
    values = np.asarray(values, float)
    baseline = np.asarray(baseline, float)
    d = values - baseline
    n = d.size
    if test == "corrected" and (test_train_ratio is None or not test_train_ratio > 0):
        raise DataError("The corrected resampled t-test needs the ratio of held-out to training rows (> 0).")
    factor = 1.0 / n + (float(test_train_ratio) if test == "corrected" else 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = math.sqrt(factor * float(np.var(d, ddof=1))) if n > 1 else float("nan")
        if test == "plain":
            res = ttest_rel(values, baseline, alternative=alternative)
            statistic, p = float(res.statistic), float(res.pvalue)
        else:
            statistic = float(d.mean()) / se if se > 0 else float("nan")
            p = {"less": t_dist.cdf, "greater": t_dist.sf}.get(alternative, None)
            p = (float(p(statistic, n - 1)) if p is not None
                 else float(2 * t_dist.sf(abs(statistic), n - 1))) if n > 1 else float("nan")
        half = float(t_dist.ppf(0.5 + CI_LEVEL / 2, n - 1)) * se if n > 1 else float("nan")
        p_low = float(t_dist.sf((d.mean() + margin) / se, n - 1)) if n > 1 and se > 0 else float("nan")
        p_high = float(t_dist.cdf((d.mean() - margin) / se, n - 1)) if n > 1 and se > 0 else float("nan")
    if np.all(d == 0):  # identical per-fold values: no evidence of a difference, equal within any margin
        statistic, p, p_tost, half = 0.0, 1.0, 0.0, 0.0
    else:
        p_tost = max(p_low, p_high)
    return {"statistic": _num(statistic), "p": _num(p), "alternative": alternative,
            "mean_difference": float(d.mean()), "p_equivalence": _num(p_tost), "test": test,
            "df": n - 1, "se": _num(se), "ci_low": _num(float(d.mean()) - half),
            "ci_high": _num(float(d.mean()) + half)}


def split_ratio(splits) -> float:
    """n_test/n_train of the Nadeau–Bengio correction: mean held-out rows over mean training rows of the splits."""
    return float(np.mean([len(s.test) for s in splits]) / np.mean([len(s.train) for s in splits]))


def _probes(seed: int) -> dict:
    """The two unfitted probes: ridge (shrinkage by RidgeCV's efficient leave-one-out) and gradient boosting."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {"ridge": make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))),
            "gbm": HistGradientBoostingRegressor(max_iter=50, learning_rate=0.2, max_leaf_nodes=8,
                                                 min_samples_leaf=20, early_stopping=False, random_state=seed)}


def leakage_probe(z_train, age_train, z_test, age_test, groups_test, seed: int = 0) -> dict[str, np.ndarray]:
    """Out-of-sample age predictions for the held-out rows ``z_test`` by ridge and gradient boosting.

    The held-out participants are split into ``PROBE_FOLDS`` participant-disjoint inner folds; each inner fold is
    predicted by probes trained on the training rows' representations ``z_train`` (the same fitted model applied to
    the rows it was fitted on) plus the other inner folds' held-out rows. A probe so learns from several times
    one fold's rows, held-out rows among them (an interpreter that hides age on its own training rows only is still
    read), and never sees the participant it predicts: with no age in ``z`` its R² is at or below 0."""
    from sklearn.model_selection import GroupKFold

    z_train, z_test = np.asarray(z_train, float), np.asarray(z_test, float)
    age_train, age_test = np.asarray(age_train, float), np.asarray(age_test, float)
    groups_test = np.asarray(groups_test)
    out = {name: np.full(len(z_test), np.nan) for name in ("ridge", "gbm")}
    n_groups = len(pd.unique(groups_test))
    if n_groups >= 2:
        inner = list(GroupKFold(n_splits=min(PROBE_FOLDS, n_groups), shuffle=True,
                                random_state=seed).split(z_test, groups=groups_test))
    else:
        inner = [(np.array([], int), np.arange(len(z_test)))]
    for fit_rows, predict_rows in inner:
        zf = np.vstack([z_train, z_test[fit_rows]])
        af = np.concatenate([age_train, age_test[fit_rows]])
        for name, est in _probes(seed).items():
            out[name][predict_rows] = est.fit(zf, af).predict(z_test[predict_rows])
    return out


def leakage_probes(z_train, y_train, age_train, z_test, y_test, age_test, groups_test, seed: int = 0) -> dict:
    """:func:`leakage_probe` of age (``"age"``) and of the age beyond the label (``"beyond_label"``: age minus its
    label's mean training age, :func:`label_age`, on both sides) from the same representations; each maps probe
    name → out-of-sample predictions of its target for ``z_test``."""
    r_train = np.asarray(age_train, float) - label_age(y_train, age_train, y_train)
    r_test = np.asarray(age_test, float) - label_age(y_train, age_train, y_test)
    return {"age": leakage_probe(z_train, age_train, z_test, age_test, groups_test, seed),
            "beyond_label": leakage_probe(z_train, r_train, z_test, r_test, groups_test, seed)}


def leakage_scores(pred, age, age_threshold: float) -> dict:
    """R², MAE and AUROC (age above the threshold) of out-of-sample age predictions."""
    from sklearn.metrics import mean_absolute_error, r2_score, roc_auc_score

    pred = np.asarray(pred, float)
    age = np.asarray(age, float)
    ok = np.isfinite(pred)
    if ok.sum() < 3:
        return {"r2": None, "mae": None, "auroc": None}
    above = (age[ok] > age_threshold).astype(int)
    auroc = float(roc_auc_score(above, pred[ok])) if 0 < above.sum() < above.size else None
    return {"r2": float(r2_score(age[ok], pred[ok])), "mae": float(mean_absolute_error(age[ok], pred[ok])),
            "auroc": auroc}


def best_r2(predictions: dict[str, np.ndarray], age) -> float | None:
    """The higher out-of-sample R² of the probes' age predictions (None when no probe predicted)."""
    from sklearn.metrics import r2_score

    age = np.asarray(age, float)
    values = [float(r2_score(age, p)) for p in predictions.values() if np.isfinite(p).all() and len(p) >= 3]
    return max(values) if values else None


def choose_point(points: list[dict], target: float, n_validation: int | None = None) -> tuple[dict, bool]:
    """(point, reached) from validation points ``{"lambda", "accuracy", "leakage_r2"}`` (optionally ``"dnn_body"``,
    the learner's body, :data:`BODIES`): among the points whose probe R² is at most ``target``, the one with the
    least accuracy cost — by the one-standard-error rule when the number of validation rows ``n_validation`` is
    given: the points whose accuracy is within one binomial standard error √(a(1 − a)/n) of the best accuracy a among
    them (even pooled over an outer fold's ~130 training participants, accuracy differences of a few points are
    noise, and a larger λ than needed costs accuracy on new data: measured in docs/methods.md §3), and of these the
    learner's own body before the DNN's (the DNN's body is taken only when the own body is worse by more than the
    noise), then the smallest λ; without ``n_validation`` the most accurate (ties: the own body,
    the smaller λ). When none reaches the target, the point with the lowest probe R² (ties: the higher accuracy,
    the own body, the smaller λ), and ``reached`` False."""
    def body(p):
        return bool(p.get("dnn_body", False))

    ok = [p for p in points if p["leakage_r2"] is not None and p["leakage_r2"] <= target]
    if ok:
        best = max(p["accuracy"] for p in ok)
        se = math.sqrt(best * (1 - best) / n_validation) if n_validation else 0.0
        return min((p for p in ok if p["accuracy"] >= best - se - 1e-12), key=lambda p: (body(p), p["lambda"])), True
    scored = [p for p in points if p["leakage_r2"] is not None] or points
    best = min(scored, key=lambda p: (p["leakage_r2"] if p["leakage_r2"] is not None else 0.0, -p["accuracy"],
                                      body(p), p["lambda"]))
    return best, False


def choose_lambda(points: list[dict], target: float, n_validation: int | None = None) -> tuple[float, bool]:
    """(λ, reached) of :func:`choose_point` (the same rule)."""
    point, reached = choose_point(points, target, n_validation)
    return point["lambda"], reached


def _inner_seeds(seed: int, j: int) -> tuple[int, int]:
    """(fit seed, probe seed) of inner fold ``j``: the same for every λ, so the λ of the grid are compared on common
    random numbers (the same inner splits, initial weights and minibatch orders)."""
    return _seed(seed, j), _seed(seed, 1000, j)


def select_lambda(method: str, X, y, age, groups, settings: AgeProtocolSettings, seed: int,
                  rep: Reporter) -> dict:
    """Nested participant-grouped cross-validation of λ (with ``settings.select_body`` also of the learner's body,
    :data:`BODIES` × the grid, on the same inner splits and seeds) for one learner on one outer fold's training rows.

    The training participants are split into ``SELECTION_FOLDS`` participant-disjoint inner folds
    (``StratifiedGroupKFold``); at every λ of ``settings.lambda_grid`` the learner is fitted on each inner fold's
    training participants and scored on its validation participants, so every training participant validates once.
    Accuracy and the leakage probe's R² beyond the label (:func:`leakage_probes`, trained on the inner training rows'
    representations) are pooled over the inner folds; :func:`choose_lambda` picks. *Why pooled*: one inner split (a
    quarter of the training participants, ~33 of 133) judged each λ by one fit on few participants — its R² missed
    the held-out fold's by RMSE 0.12 (pooled: 0.09) and sent folds to λ = 3 where λ = 0.3 reached the target (docs/methods.md §3). The outer fold's held-out rows are never used. Inner fold j's
    fit and probe seeds are the same at every λ (:func:`_inner_seeds`)."""
    inner = group_folds(groups, y, SELECTION_FOLDS, 1, seed)
    bodies = BODIES if settings.select_body else (bool(settings.learner.dnn_body),)
    candidates = [(b, lam) for b in bodies for lam in settings.lambda_grid]
    points = []
    steps = len(candidates) * len(inner)
    for i, (body, lam) in enumerate(candidates):
        learner = replace(settings.learner, lam=float(lam), dnn_body=body)
        correct, beyond, ages = [], [], []
        pred: dict[str, dict[str, list]] = {"age": {}, "beyond_label": {}}
        for j, sp in enumerate(inner):
            tr, va = sp.train, sp.test
            sub = rep.sub((i * len(inner) + j) / steps, (i * len(inner) + j + 1) / steps)
            sub(0.0, f"{method}: validating λ = {lam:g}{', the DNN body' if body and settings.select_body else ''} "
                     f"({j + 1}/{len(inner)})")
            fit_seed, probe_seed = _inner_seeds(seed, j)
            fitted = fit_method(method, X[tr], y[tr], age[tr], learner, seed=fit_seed, progress=sub,
                                cancel=rep.cancel)
            correct.append((fitted.predict_proba(X[va]) >= THRESHOLD).astype(int) == y[va])
            lp = leakage_probes(fitted.represent(X[tr]), y[tr], age[tr], fitted.represent(X[va]), y[va], age[va],
                                groups[va], seed=probe_seed)
            beyond.append(age[va] - label_age(y[tr], age[tr], y[va]))
            ages.append(age[va])
            for target, by_probe in lp.items():
                for probe, p in by_probe.items():
                    pred[target].setdefault(probe, []).append(p)
        pooled = {t: {probe: np.concatenate(v) for probe, v in by.items()} for t, by in pred.items()}
        points.append({"lambda": float(lam), "dnn_body": body, "accuracy": float(np.mean(np.concatenate(correct))),
                       "leakage_r2": best_r2(pooled["beyond_label"], np.concatenate(beyond)),
                       "age_r2": best_r2(pooled["age"], np.concatenate(ages))})
    point, reached = choose_point(points, settings.leakage_target, int(len(y)))
    return {"lambda": point["lambda"], "dnn_body": point["dnn_body"], "body": BODY_NAMES[point["dnn_body"]],
            "reached": reached, "points": points, "validation_rows": int(len(y)),
            "validation_participants": int(len(pd.unique(groups))), "inner_folds": len(inner)}


# --------------------------------------------------------------------------------------------------------------
# Input


def _prepare(table: pd.DataFrame, label: str, attribute: str, group_id: str, features) -> dict:
    for role, col in (("label", label), ("attribute", attribute), ("participant id", group_id)):
        if col not in table.columns:
            raise DataError(f"The {role} column '{col}' is not in the table.")
    if len({label, attribute, group_id}) < 3:
        raise DataError("The label, attribute and participant id must be three different columns.")
    if features is None:
        features = [c for c in table.columns if c not in (label, attribute, group_id)]
    features = list(features)
    missing = [c for c in features if c not in table.columns]
    if missing:
        raise DataError(f"Feature column(s) not in the table: {', '.join(map(str, missing[:5]))}.")
    if not features:
        raise DataError("No feature columns: the table needs columns besides label, attribute and participant id.")
    non_numeric = [c for c in features if not pd.api.types.is_numeric_dtype(table[c])]
    if non_numeric:
        raise DataError(f"Feature column(s) are not numeric: {', '.join(map(str, non_numeric[:5]))}.")
    X = table[features].to_numpy(float)
    if not np.isfinite(X).all():
        raise DataError("The feature columns contain missing or infinite values; impute or drop them first.")
    y_raw = table[label]
    if y_raw.isna().any() or not set(pd.unique(y_raw)).issubset({0, 1, True, False}):
        raise DataError(f"The label column '{label}' must hold 0/1 values only.")
    y = y_raw.astype(int).to_numpy()
    if len(np.unique(y)) < 2:
        raise DataError(f"The label column '{label}' holds one class only.")
    if not pd.api.types.is_numeric_dtype(table[attribute]) or not np.isfinite(table[attribute].to_numpy(float)).all():
        raise DataError(f"The attribute column '{attribute}' must be numeric with no missing values.")
    if table[group_id].isna().any():
        raise DataError(f"The participant id column '{group_id}' has missing values.")
    return {"X": X, "y": y, "age": table[attribute].to_numpy(float), "groups": table[group_id].to_numpy(),
            "features": features}


# --------------------------------------------------------------------------------------------------------------
# Cross-validation


def _held_out(fitted, sp: FoldSplit, data: dict, probe_seed: int) -> tuple[dict, dict | None, np.ndarray]:
    """(metrics, leakage probes' predictions, scores) of one fitted model on the split's held-out rows."""
    X, y, age, groups = data["X"], data["y"], data["age"], data["groups"]
    score = np.asarray(fitted.predict_proba(X[sp.test]), float)
    probes = None
    if fitted.represent is not None:
        probes = leakage_probes(fitted.represent(X[sp.train]), y[sp.train], age[sp.train],
                                fitted.represent(X[sp.test]), y[sp.test], age[sp.test], groups[sp.test],
                                seed=probe_seed)
    return fold_metrics(y[sp.test], (score >= THRESHOLD).astype(int), age[sp.test]), probes, score


def fit_seed(settings: AgeProtocolSettings, sp: FoldSplit, method: str, dnn_body: bool | None = None) -> int:
    """The seed of ``method``'s final fit on split ``sp``: (seed, repeat, fold, method). With
    ``settings.learner.dnn_body`` the learners take the DNN's, so a learner starts from the DNN's initial weights and
    sees its minibatches (common random numbers): its per-fold accuracy difference against the DNN is what its
    adversary does, not the noise of two independent training runs. ``dnn_body``: the
    body chosen for this fit (``select_body``), else the settings'."""
    shared = (settings.learner.dnn_body if dnn_body is None else dnn_body) and method in LEARNERS
    return _seed(settings.seed, sp.repeat, sp.fold, _METHOD_INDEX[BASELINE if shared else method])


def cv_unit(item: tuple, shared: tuple, rep: Reporter) -> dict:
    """One task of the executor: one method on one (repeat, fold) split — λ chosen by nested validation where
    asked, the fit (seeded by (seed, repeat, fold, method)), the held-out metrics and predictions, and the leakage
    probe's held-out predictions."""
    sp, m, weight = item
    data, settings = shared
    X, y, age, groups = data["X"], data["y"], data["age"], data["groups"]
    rep(0.0, f"repeat {sp.repeat + 1}, fold {sp.fold + 1}/{settings.folds}: {m}")
    learner, choice = settings.learner, None
    share = 1 - 1 / weight
    if m in LEARNERS and settings.select_lambda:
        choice = select_lambda(m, X[sp.train], y[sp.train], age[sp.train], groups[sp.train], settings,
                               _seed(settings.seed, sp.repeat, sp.fold, _METHOD_INDEX[m], 2000), rep.sub(0.0, share))
        learner = replace(learner, lam=choice["lambda"], dnn_body=choice["dnn_body"])
    rep = rep.sub(share, 1.0)
    fitted = fit_method(m, X[sp.train], y[sp.train], age[sp.train], learner,
                        seed=fit_seed(settings, sp, m, learner.dnn_body),
                        progress=rep.sub(0.0, 0.9), cancel=rep.cancel)
    probe_seed = _seed(settings.seed, sp.repeat, sp.fold, 1000)
    metrics, probes, score = _held_out(fitted, sp, data, probe_seed)
    return {"metrics": metrics, "hash": fitted.model_hash, "choice": choice, "probes": probes,
            "predictions": pd.DataFrame({"row": sp.test, "group_id": groups[sp.test], "method": m,
                                         "repeat": sp.repeat, "fold": sp.fold, "label": y[sp.test],
                                         "attribute": age[sp.test], "score": score,
                                         "predicted": (score >= THRESHOLD).astype(int)})}


def _cross_validate(data: dict, methods: tuple[str, ...], settings: AgeProtocolSettings, rep: Reporter,
                    executor=None) -> dict:
    """Fit every method on every split; per-fold metrics, predictions, leakage predictions and model hashes. Each
    (split, method) is one task of ``executor`` (:func:`cv_unit`)."""
    from fairdesk.core.executor import open_executor

    splits = group_folds(data["groups"], data["y"], settings.folds, settings.repeats, settings.seed)
    y, age = data["y"], data["age"]
    age_threshold = float(age.mean())
    beyond = {r: np.full(len(y), np.nan) for r in range(settings.repeats)}  # age − its label's mean training age
    for sp in splits:
        beyond[sp.repeat][sp.test] = age[sp.test] - label_age(y[sp.train], age[sp.train], y[sp.test])
    per_fold = {m: [] for m in methods}
    probe_pred = {m: {} for m in methods if m in WITH_REPRESENTATION}
    selections: dict[str, list] = {m: [] for m in methods if m in LEARNERS and settings.select_lambda}
    preds, hashes = [], {}
    # a learner whose λ is chosen costs (grid × inner folds + 1) fits of one
    n_bodies = len(BODIES) if settings.select_body else 1
    weight = {m: 1 + n_bodies * len(settings.lambda_grid) * SELECTION_FOLDS * 0.75 if m in selections else 1
              for m in methods}
    items = [(sp, m, weight[m]) for sp in splits for m in methods]
    with open_executor(executor) as ex:
        done = ex.map(cv_unit, items, rep, lambda it: f"repeat {it[0].repeat + 1}, fold {it[0].fold + 1}/"
                      f"{settings.folds}: {it[1]}", shared=(data, settings), weights=[w for *_, w in items])
        executor_record = ex.provenance()
    for (sp, m, _), out in zip(items, done):
        if out["choice"] is not None:
            selections[m].append({"repeat": sp.repeat, "fold": sp.fold, **out["choice"]})
        per_fold[m].append(out["metrics"])
        hashes[f"{m}/repeat{sp.repeat}/fold{sp.fold}"] = out["hash"]
        preds.append(out["predictions"])
        for target, by_probe in (out["probes"] or {}).items():
            for probe, p in by_probe.items():
                full = probe_pred[m].setdefault((sp.repeat, target, probe), np.full(len(y), np.nan))
                full[sp.test] = p
    leakage = {m: _leakage(probe_pred[m], age, beyond, settings.repeats, age_threshold) if m in probe_pred else None
               for m in methods}
    order = {m: i for i, m in enumerate(methods)}
    table = pd.concat(preds, ignore_index=True)
    label_floor = _mean_or_none([label_age_r2(y, age, [sp for sp in splits if sp.repeat == r])
                                 for r in range(settings.repeats)])
    table = table.sort_values(["method", "repeat", "row"], key=lambda s: s.map(order) if s.name == "method" else s,
                              kind="stable").reset_index(drop=True)
    return {"per_fold": per_fold, "leakage": leakage, "predictions": table[list(PREDICTION_COLUMNS)],
            "hashes": hashes, "splits": splits, "selections": selections, "age_r2_from_label": label_floor,
            "executor": executor_record}


def _leakage(pred: dict, age, beyond: dict, repeats: int, age_threshold: float) -> dict:
    """One method's leakage entry from its probes' held-out predictions ``pred[(repeat, target, probe)]``: per
    probe R², MAE and AUROC of age and R² of the age beyond the label, averaged over repeats; the probe that finds
    the most age is reported."""
    probes, beyond_probes = {}, {}
    for probe in ("ridge", "gbm"):
        per_repeat = [leakage_scores(pred[(r, "age", probe)], age, age_threshold) for r in range(repeats)]
        probes[probe] = {k: _mean_or_none([s[k] for s in per_repeat]) for k in ("r2", "mae", "auroc")}
        beyond_probes[probe] = {"r2": _mean_or_none([best_r2({probe: pred[(r, "beyond_label", probe)]}, beyond[r])
                                                     for r in range(repeats)])}
    best = _best_probe(probes)
    best_beyond = _best_probe(beyond_probes)
    return {**probes[best], "probe": best, "probes": probes, "age_threshold": age_threshold,
            "beyond_label": {"r2": beyond_probes[best_beyond]["r2"], "probe": best_beyond, "probes": beyond_probes}}


def _best_probe(probes: dict) -> str:
    """The probe with the highest R² (the one that finds the most age)."""
    return max(probes, key=lambda p: -math.inf if probes[p]["r2"] is None else probes[p]["r2"])


def label_age(y_train, age_train, y) -> np.ndarray:
    """Each row's label's mean age over the training rows (the overall mean for a label absent from them): the age
    the label alone predicts."""
    y_train, age_train = np.asarray(y_train).astype(int), np.asarray(age_train, float)
    means = {c: age_train[y_train == c].mean() if np.any(y_train == c) else age_train.mean() for c in (0, 1)}
    return np.where(np.asarray(y).astype(int) == 1, means[1], means[0])


def label_age_r2(y, age, splits: list[FoldSplit]) -> float | None:
    """Held-out R² of age predicted from the label alone (each held-out row gets its label's mean training age),
    pooled over one repeat's folds: the age any representation that predicts the label well carries with it."""
    from sklearn.metrics import r2_score

    y, age = np.asarray(y).astype(int), np.asarray(age, float)
    pred = np.full(len(age), np.nan)
    for sp in splits:
        pred[sp.test] = label_age(y[sp.train], age[sp.train], y[sp.test])
    ok = np.isfinite(pred)
    return float(r2_score(age[ok], pred[ok])) if ok.sum() >= 3 else None


def leakage_verdict(r2, target: float) -> dict:
    """Whether a representation counts as age-independent: the probe's pooled held-out R² at most ``target``."""
    if r2 is None:
        return {"target": target, "verdict": "inconclusive"}
    return {"target": target, "verdict": "age-independent" if r2 <= target else "not age-independent"}


def _mean_or_none(values) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _summary(values: list[float]) -> dict:
    arr = np.asarray(values, float)
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
            "folds": [float(v) for v in arr]}


# --------------------------------------------------------------------------------------------------------------
# The protocol


def run_age_independence(table: pd.DataFrame, label: str, attribute: str, group_id: str,
                         features: list[str] | None = None, settings: AgeProtocolSettings | None = None,
                         progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                         executor=None) -> AgeIndependenceResult:
    """Train and compare every method by repeated participant-disjoint CV (see the module docstring).
    ``executor`` (:mod:`fairdesk.core.executor`): where the (split, method) fits run, one task each."""
    from fairdesk.core.stats.multiple import benjamini_hochberg

    settings = settings or AgeProtocolSettings()
    rep = Reporter(progress, cancel)
    data = _prepare(table, label, attribute, group_id, features)
    methods = settings.run_methods()
    if BASELINE not in methods:
        raise DataError("The DNN baseline (dnn) must be among the methods: every t-test compares against it.")
    cv = _cross_validate(data, methods, settings, rep.sub(0.0, 0.98), executor)
    doc_methods: dict[str, dict] = {}
    ratio = split_ratio(cv["splits"])
    tests = []  # (method, metric, comparison dict) for the corrections
    for m in methods:
        folds = cv["per_fold"][m]
        entry: dict = {"label": METHOD_LABELS[m], "external_reference": m == REFERENCE_METHOD}
        for metric in METRICS:
            entry[metric] = _summary([f[metric] for f in folds])
            if metric in BINS:
                entry[metric]["bins_requested"] = BINS[metric]
                entry[metric]["bins_used"] = [int(f[f"bins_{metric}"]) for f in folds]
        if m != BASELINE:
            entry["t_test"], entry["comparison"] = {}, {}
            for metric in METRICS:
                c = paired_comparison([f[metric] for f in folds], [f[metric] for f in cv["per_fold"][BASELINE]],
                                      settings.margins[metric], test=settings.test, test_train_ratio=ratio)
                entry["t_test"][metric] = {"statistic": c["statistic"], "p": c["p"], "alternative": c["alternative"]}
                entry["comparison"][metric] = {"baseline": BASELINE, "mean_difference": c["mean_difference"],
                                               "ci_low": c["ci_low"], "ci_high": c["ci_high"],
                                               "ci_level": CI_LEVEL, "margin": settings.margins[metric],
                                               "p_equivalence": c["p_equivalence"], "df": c["df"]}
                tests.append((m, metric))
        entry["leakage"] = cv["leakage"][m]
        if entry["leakage"] is not None:
            entry["age_independence"] = leakage_verdict(entry["leakage"]["beyond_label"].get("r2"),
                                                        settings.leakage_target)
        if m in cv["selections"]:
            chosen = cv["selections"][m]
            entry["lambda_selection"] = {"target": settings.leakage_target, "grid": list(settings.lambda_grid),
                                         "reached_in_folds": int(sum(c["reached"] for c in chosen)),
                                         "folds": chosen}
            if settings.select_body:  # which body each fold took
                entry["lambda_selection"]["bodies"] = [BODY_NAMES[b] for b in BODIES]
                entry["lambda_selection"]["dnn_body_in_folds"] = int(sum(c["dnn_body"] for c in chosen))
        doc_methods[m] = entry
    if tests:
        p = np.array([np.nan if doc_methods[m]["t_test"][k]["p"] is None else doc_methods[m]["t_test"][k]["p"]
                      for m, k in tests])
        pe = np.array([np.nan if doc_methods[m]["comparison"][k]["p_equivalence"] is None
                       else doc_methods[m]["comparison"][k]["p_equivalence"] for m, k in tests])
        q, qe = benjamini_hochberg(p), benjamini_hochberg(pe)
        for (m, metric), qi, qei in zip(tests, q, qe):
            c = doc_methods[m]["comparison"][metric]
            c["p_bh"], c["p_equivalence_bh"] = _num(qi), _num(qei)
            if np.isfinite(qi) and qi <= settings.alpha:
                c["verdict"] = "differs"
            elif np.isfinite(qei) and qei <= settings.alpha:
                c["verdict"] = "equivalent within margin"
            else:
                c["verdict"] = "inconclusive"
    n_participants = int(len(pd.unique(data["groups"])))
    doc_settings = {
        **settings.to_dict(), "methods_run": list(methods), "label": label, "attribute": attribute,
        "group_id": group_id, "features": data["features"], "n_features": len(data["features"]),
        "n_rows": int(len(data["y"])), "n_participants": n_participants, "threshold": THRESHOLD,
        "alternative": ALTERNATIVE, "baseline": BASELINE, "correction": "Benjamini-Hochberg over every t-test "
        "(and separately every TOST) of this document", "test_name": TEST_NAMES[settings.test],
        "test_train_ratio": ratio, "std": "sample standard deviation (ddof = 1) over folds",
        "folds_order": "repeat, then fold", "leakage_probes": ["ridge", "gbm"], "probe_folds": PROBE_FOLDS,
        "probe_training": "the training rows' representations plus the other inner folds of the held-out rows",
        "age_r2_from_label": cv["age_r2_from_label"],
        "leakage_measure": ("the probe's held-out R² of the age beyond the label (age minus its label's mean "
                            "training age); the age R² itself is reported beside it"),
        "lambda_selection": ("per learner and outer fold, nested participant-grouped cross-validation ("
                             f"{SELECTION_FOLDS} inner folds of the training participants, accuracy and probe R² pooled "
                             "over them): among the λ whose probe R² beyond the "
                             "label ≤ the target, the smallest within one standard error of the best accuracy, else "
                             "the λ with the lowest R²" + (
                                 "; the body too: every (body, λ) of {own layers, the DNN's layers} × the grid "
                                 "validated alike, the own layers taken when within one standard error of the best "
                                 "accuracy, else the DNN's" if settings.select_body else "")) if settings.select_lambda
        else "fixed",
    }
    from fairdesk.core.models.age_independent import resolve_device

    uses_torch = any(m in WITH_REPRESENTATION or m == REFERENCE_METHOD for m in methods)
    provenance = _prov.make(settings.seed, table_sha256(table), cv["hashes"],
                            device=resolve_device(settings.learner.device) if uses_torch else "cpu",
                            executor=cv["executor"])
    rep(1.0, "done")
    return AgeIndependenceResult({"methods": doc_methods, "settings": doc_settings, "provenance": provenance},
                                 cv["predictions"])


def accuracy_fairness_frontier(table: pd.DataFrame, label: str, attribute: str, group_id: str,
                               features: list[str] | None = None, methods: tuple[str, ...] = LEARNERS,
                               lambdas: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0),
                               settings: AgeProtocolSettings | None = None, progress: ProgressFn | None = None,
                               cancel: CancelToken | None = None) -> list[dict]:
    """Accuracy, Δ^(5) and leakage per learner as λ varies, on the same folds; plus the DNN (``lambda`` None).

    Returns one point per (method, λ): ``method, lambda, accuracy, accuracy_std, delta_eo_5, delta_eo_5_std,
    delta_eo_2, leakage_r2, leakage_r2_beyond_label, leakage_mae, leakage_auroc``.
    """
    settings = settings or AgeProtocolSettings()
    bad = [m for m in methods if m not in LEARNERS]
    if bad:
        raise DataError(f"The frontier varies λ, which only the learners have; not: {', '.join(bad)}.")
    if not lambdas or any(lam < 0 for lam in lambdas):
        raise DataError("Give one or more adversary strengths λ ≥ 0.")
    rep = Reporter(progress, cancel)
    data = _prepare(table, label, attribute, group_id, features)
    runs = [(None, (BASELINE,))] + [(float(lam), tuple(methods)) for lam in lambdas]
    points = []
    for i, (lam, ms) in enumerate(runs):
        learner = LearnerSettings(**{**settings.learner.to_dict(), "lam": lam if lam is not None else 0.0})
        s = replace(settings, methods=ms, learner=learner, reference=False, select_lambda=False)
        cv = _cross_validate(data, ms, s, rep.sub(i / len(runs), (i + 1) / len(runs)))
        for m in ms:
            folds = cv["per_fold"][m]
            acc, d5 = _summary([f["accuracy"] for f in folds]), _summary([f["delta_eo_5"] for f in folds])
            leak = cv["leakage"][m] or {}
            points.append({"method": m, "lambda": lam, "accuracy": acc["mean"], "accuracy_std": acc["std"],
                           "delta_eo_5": d5["mean"], "delta_eo_5_std": d5["std"],
                           "delta_eo_2": _summary([f["delta_eo_2"] for f in folds])["mean"],
                           "leakage_r2": leak.get("r2"),
                           "leakage_r2_beyond_label": (leak.get("beyond_label") or {}).get("r2"),
                           "leakage_mae": leak.get("mae"), "leakage_auroc": leak.get("auroc")})
    return points
