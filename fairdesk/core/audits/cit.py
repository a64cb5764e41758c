"""Counterfactual-invariance tests on arrays (METHODS §6): the published CIT-LR statistic, a weighted
generalised-covariance-measure test with proper size (FairDesk's default), the DP / EO baselines as tests, and the
oriented effect with an equivalence verdict for exact counterfactuals.

Everything here works on plain arrays, so the image audit can call it with ``z`` = the generator's latent and the
synthetic benchmark with ``z`` = the SCM's root ``Z_n``:

* :func:`cit_lr` — 004 Alg. 1 step 3: ``u = ŷ·ĝ(a, z)``, ``v = ŷ·ĥ(z)``, ``scipy.stats.ttest_rel(u, v)`` → (t, p).
* :func:`fit_cit_regressors` — ĝ(a, z) = E[Ŷ | A, Z] (one model per value of a, as the release does) and
  ĥ(z) = E[Ŷ | Z]. Kinds: ``"mlp_release"`` (the release's z → z/2 → z/4 → z/4 → 1 MLP, BCE, Adam 1e-3),
  ``"logistic"`` (standardised logistic regression; one per a = full A×Z interactions), ``"hgb"`` (histogram
  gradient boosting with early stopping) and ``"auto"`` (FairDesk's default: per nuisance, the convex combination
  of logistic regression, an additive-spline logistic fit and boosting with the lowest cross-fitted held-out
  log-loss, :func:`_fit_auto`).
* :func:`cit_lr_test` — the published statistic with either the paper's train/test split or K-fold cross-fitting.
* :func:`gcm_test` — **the default test** (``weighted=True``): the weighted generalised covariance measure
  (Shah & Peters 2020; Scheidegger, Hörrmann & Bühlmann 2022) of ``Ŷ ⟂ A | Z``. On each tested fold,
  ``R_i = (ŷ_i − ĥ(z_i)) · (a_i − m̂(z_i)) · ŵ(z_i)`` with ``ŵ = ĝ(1, ·) − ĝ(0, ·)``; ĥ and m̂ cross-fitted on the
  other folds, the weight (a flexible E[Ŷ|Z] shared by both groups as the offset of a logistic model of the
  effect of a on [z, a, a·z], with a·z² too when that lowers the held-out log-loss) fitted on the EARLIER folds only (sequential /
  online fitting, Luedtke & van der Laan 2016), so the per-fold statistics' sum — each weighted by the square root
  of the rows its weight was fitted on, fixed in advance — is N(0, 1) under the null even though the weight is
  learned. One-sided: ŵ estimates the direction of the effect, so under the
  alternative E[R] ≈ E[m(1−m)(g(1,Z) − g(0,Z))²] > 0. The reported p combines it with the plain GCM on the same
  residuals: the smaller p of the two, referred to their joint normal law (``combine="maxT"``); the out-of-fold
  fit of ĥ and m̂ is in ``details["nuisance_fit"]``.
  ``weighted=False`` is the plain cross-fitted two-sided GCM, which only sees the average conditional covariance
  and misses effects that change sign across Z.
* :func:`dp_test`, :func:`eo_test` — Welch two-sample t-tests of f(X) between groups (EO within Y = 1).
* :func:`invariance_table` — the above per classifier output with Benjamini–Hochberg q-values (004 Tables 12–13).
* :func:`oriented_effect` — per direction a → a′: mean of f(x_cf) − f(x) with a CI, flip rate, TOST at a margin,
  and a verdict "dependent" / "equivalent within margin" / "inconclusive" (optionally with a negative-control band).

scipy and sklearn are imported inside functions; torch is not needed.
"""
from __future__ import annotations

import math
import threading
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

REGRESSOR_KINDS: tuple[str, ...] = ("auto", "logistic", "hgb", "mlp_release")
DEFAULT_REGRESSOR = "auto"
DEFAULT_METHOD = "wgcm"
METHODS: tuple[str, ...] = ("wgcm", "gcm", "cit_lr_crossfit", "cit_lr_split")
VERDICTS: tuple[str, ...] = ("dependent", "equivalent within margin", "inconclusive")

#: Hyper-parameters of the release's MLP regressor where the release (or paper) does not fix them (FairDesk's).
MLP_RELEASE_DEFAULTS = {"epochs": 50, "batch_size": 64, "lr": 1e-3}
HGB_DEFAULTS = {"max_iter": 200, "learning_rate": 0.1, "max_leaf_nodes": 15, "min_samples_leaf": 20,
                "l2_regularization": 1.0, "early_stopping": True, "validation_fraction": 0.2,
                "n_iter_no_change": 10}
LOGISTIC_C = 1.0
#: How the weighted GCM fits its nuisances: "sequential-weight" (default) — the weight ĝ(1,·) − ĝ(0,·) on the
#: earlier folds only, ĥ and m̂ on every other fold; "sequential" — all three on the earlier folds (the
#: first default: the first tested fold's ĥ and m̂ saw only 1/K of the rows, and their error biased its
#: statistic — mean T_1 = 0.72 under the null with boosted nuisances at n = 1,000); "crossfit" — all on every
#: other fold (invalid with a learned weight; kept to show why).
SCHEMES: tuple[str, ...] = ("sequential-weight", "sequential", "crossfit")
DEFAULT_SCHEME = "sequential-weight"
#: The weight ĝ(1,·) − ĝ(0,·) of the weighted GCM: "offset" (default: a flexible E[Ŷ|Z] shared by both groups as
#: the offset of a logistic effect model on [z, a, a·z]; :func:`_offset_weight`), "difference" (one model per value
#: of a; an earlier default), "joint" (one model on [z, a, a·z]; the first default) or "sign" (the sign
#: of the per-group difference). On the 004 SCM (linear, seed 3) the joint model picked boosting in some
#: folds (65 features) and found 6 of the first 10 low-ECA classifiers against 8 of 10 with one model per group;
#: under non-linear nuisances one model per group often paired a logistic fit with a boosted one, and their
#: difference followed their errors, not a constant effect (docs/cit_synthetic_findings.md §2b).
WEIGHTS: tuple[str, ...] = ("difference", "joint", "sign", "offset")
DEFAULT_WEIGHT = "offset"
#: How the weighted GCM's p is combined with the plain GCM's on the same residuals: "maxT" (the min-p of the two,
#: referred to their joint normal law with the estimated correlation), "bonferroni" (2·min p; the first
#: default) or "none" (the weighted test alone).
COMBINATIONS: tuple[str, ...] = ("maxT", "bonferroni", "none")
DEFAULT_COMBINE = "maxT"
#: How the weighted GCM sums its tested folds' statistics T_k (sequential schemes): "sqrt_train" (default,
#: Σ c_k T_k/‖c‖ with c_k = √(rows fold k's weight was fitted on) — fold 1's weight saw 1/K of the rows,
#: fold K−1's (K−1)/K, so later folds' weights are better aligned with the effect) or "equal" (Σ T_k/√(K−1), the
#: default before). The c_k depend only on the fold sizes, fixed before any fit, so either sum is N(0, 1) under
#: the null; and with equal fold sizes a common finite-sample bias b of the T_k enters as b·Σc_k/‖c‖, which the
#: equal weights maximise. Measured over the SCM and nuisance designs (docs/cit_synthetic_findings.md §2e): 99/127
#: classifiers with ECA < 0.8 flagged against 93/127 (6 gained at the border, none lost), oracles 4/110 against
#: 3/110, and at n = 4,000 with both nuisances non-linear 4/100 false alarms against 3/100.
FOLD_WEIGHTS: tuple[str, ...] = ("equal", "sqrt_train")
DEFAULT_FOLD_WEIGHTS = "sqrt_train"


# ==============================================================================================================
# Input checks and threading


_THREAD_STATE = threading.local()


class _single_thread:
    """Limit BLAS/OpenMP pools to one thread while the many tiny fits run (on a shared 2-core machine a
    multi-threaded BLAS made a 1600×33 logistic fit ~75× slower). Restores the previous limits on exit; nested
    uses cost nothing (only the outermost one talks to threadpoolctl)."""

    def __enter__(self):
        depth = getattr(_THREAD_STATE, "depth", 0)
        _THREAD_STATE.depth = depth + 1
        self._ctx = None
        if depth == 0:
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
                return self
            self._ctx = threadpool_limits(limits=1)
        return self

    def __exit__(self, *exc):
        _THREAD_STATE.depth -= 1
        if self._ctx is not None:
            self._ctx.restore_original_limits()
        return False


def _one_thread(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _single_thread():
            return fn(*args, **kwargs)
    return wrapper



def _as_1d(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float).reshape(-1) if np.ndim(x) <= 1 else None
    if arr is None:
        raise DataError(f"'{name}' must be one value per sample (a 1-D array).")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"'{name}' contains missing or infinite values; drop those samples first.")
    return arr


def _as_2d(z, name: str = "z") -> np.ndarray:
    arr = np.asarray(z, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise DataError(f"'{name}' must be a table of features, one row per sample.")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"'{name}' contains missing or infinite values; drop those samples first.")
    return arr


def _binary_attr(a, name: str = "a") -> np.ndarray:
    arr = _as_1d(a, name)
    vals = np.unique(arr)
    if not np.all(np.isin(vals, (0.0, 1.0))):
        raise DataError(f"'{name}' must be coded 0/1 for this test (got values {vals[:5].tolist()}).")
    return arr.astype(int)


def _check_lengths(**arrays) -> int:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise DataError(f"Inputs differ in length: {lengths}.")
    return next(iter(lengths.values()))


def _is_binary(y: np.ndarray) -> bool:
    return bool(np.all((y == 0) | (y == 1)))


# ==============================================================================================================
# Result records


@dataclass
class CITResult:
    """One conditional-invariance test of a classifier's output against an attribute given Z."""

    method: str
    statistic: float
    p_value: float
    n: int
    estimate: float  # the estimated effect the statistic standardises (mean of the test's summands)
    alternative: str  # "two-sided" or "greater"
    regressor: str
    n_folds: int
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return jsonable(asdict(self))


# ==============================================================================================================
# Regressors ĝ(a, z), ĥ(z), m̂(z)

ProbModel = Callable[[np.ndarray], np.ndarray]


class _Constant:
    def __init__(self, value: float) -> None:
        self.value = float(value)

    def __call__(self, z: np.ndarray) -> np.ndarray:
        return np.full(np.asarray(z).shape[0], self.value)


def _sigmoid(s: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * s))


def _fit_logistic(z: np.ndarray, y: np.ndarray, seed: int,  # noqa: ARG001 (deterministic)
                  offset: np.ndarray | None = None) -> ProbModel:
    """L2-penalised logistic regression on standardised features, fitted by damped Newton steps.

    Same objective as scikit-learn's ``LogisticRegression(C=1)`` on standardised inputs (intercept unpenalised),
    but ~20× faster for the few-thousand-row, few-dozen-feature fits the tests make thousands of. Targets may be
    soft (in [0, 1]): the log-loss is then the cross-entropy with the soft labels. With ``offset`` (a fixed logit
    per row, which scikit-learn's LogisticRegression does not take) the model is sigmoid(offset + x·β) and the
    returned callable takes ``(z, offset)``.
    """
    mu = z.mean(axis=0)
    sd = z.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    x = np.hstack([np.ones((z.shape[0], 1)), (z - mu) / sd])
    pen = np.full(x.shape[1], 1.0 / LOGISTIC_C)
    pen[0] = 0.0
    off = np.zeros(len(y)) if offset is None else np.asarray(offset, dtype=float)
    ybar = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
    beta = np.zeros(x.shape[1])
    if offset is None:
        beta[0] = math.log(ybar / (1 - ybar))

    def objective(b: np.ndarray) -> float:
        s = x @ b + off
        return float(np.sum(np.logaddexp(0.0, s) - y * s) + 0.5 * np.sum(pen * b * b))

    obj = objective(beta)
    for _ in range(100):
        p = _sigmoid(x @ beta + off)
        grad = x.T @ (p - y) + pen * beta
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.diag(pen + 1e-10)
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        t = 1.0
        while True:
            cand = beta - t * step
            new = objective(cand)
            if new <= obj or t < 1e-8:
                break
            t *= 0.5
        converged = abs(obj - new) <= 1e-10 * max(1.0, abs(obj)) or np.max(np.abs(t * step)) < 1e-8
        beta, obj = cand, new
        if converged:
            break

    def predict(zz: np.ndarray, offset_: np.ndarray | float = 0.0) -> np.ndarray:
        return _sigmoid(((zz - mu) / sd) @ beta[1:] + beta[0] + offset_)

    return predict


def _fit_hgb(z: np.ndarray, y: np.ndarray, seed: int) -> ProbModel:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    params = dict(HGB_DEFAULTS)
    if len(y) < 100:  # too few rows for an early-stopping hold-out
        params.update(early_stopping=False, max_iter=50)
    if _is_binary(y):
        model = HistGradientBoostingClassifier(random_state=seed, **params)
        model.fit(z, y.astype(int))

        def predict(zz: np.ndarray) -> np.ndarray:
            return model.predict_proba(zz)[:, 1]
        return predict
    model = HistGradientBoostingRegressor(random_state=seed, **params)
    model.fit(z, y)

    def predict_soft(zz: np.ndarray) -> np.ndarray:
        return np.clip(model.predict(zz), 0.0, 1.0)
    return predict_soft


def _fit_mlp_release(z: np.ndarray, y: np.ndarray, seed: int) -> ProbModel:
    """The release's regressor: z → z/2 → z/4 → z/4 → 1, ReLU, sigmoid output, BCE loss, Adam (lr 1e-3).

    Written in numpy (forward, backward and Adam by hand, PyTorch's default ``nn.Linear`` initialisation) because
    the benchmark fits thousands of these tiny networks and a torch step costs ~10× more in framework overhead.
    Inputs are standardised; epochs and batch size (not fixed by the paper) are :data:`MLP_RELEASE_DEFAULTS`.
    """
    cfg = MLP_RELEASE_DEFAULTS
    rng = np.random.default_rng([int(seed), 4242])
    k = z.shape[1]
    widths = [k, max(k // 2, 1), max(k // 4, 1), max(k // 4, 1), 1]
    mu, sd = z.mean(axis=0), z.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    x = (z - mu) / sd
    params = []
    for w_in, w_out in zip(widths[:-1], widths[1:]):
        bound = 1.0 / math.sqrt(w_in)
        params += [rng.uniform(-bound, bound, size=(w_in, w_out)), rng.uniform(-bound, bound, size=w_out)]
    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, cfg["lr"]
    n_layers = len(widths) - 1
    step = 0
    n = x.shape[0]
    for _ in range(cfg["epochs"]):
        order = rng.permutation(n)
        for start in range(0, n, cfg["batch_size"]):
            idx = order[start:start + cfg["batch_size"]]
            acts = [x[idx]]
            pre = []
            for layer in range(n_layers):
                s_ = acts[-1] @ params[2 * layer] + params[2 * layer + 1]
                pre.append(s_)
                acts.append(np.maximum(s_, 0.0) if layer < n_layers - 1 else s_)
            delta = (_sigmoid(acts[-1][:, 0]) - y[idx])[:, None] / len(idx)  # d(mean BCE)/d(logit)
            grads = [None] * len(params)
            for layer in range(n_layers - 1, -1, -1):
                grads[2 * layer] = acts[layer].T @ delta
                grads[2 * layer + 1] = delta.sum(axis=0)
                if layer > 0:
                    delta = (delta @ params[2 * layer].T) * (pre[layer - 1] > 0)
            step += 1
            c1, c2 = 1 - b1 ** step, 1 - b2 ** step
            for i, g in enumerate(grads):
                m1[i] = b1 * m1[i] + (1 - b1) * g
                m2[i] = b2 * m2[i] + (1 - b2) * g * g
                params[i] = params[i] - lr * (m1[i] / c1) / (np.sqrt(m2[i] / c2) + eps)

    def predict(zz: np.ndarray) -> np.ndarray:
        h = (zz - mu) / sd
        for layer in range(n_layers):
            h = h @ params[2 * layer] + params[2 * layer + 1]
            if layer < n_layers - 1:
                h = np.maximum(h, 0.0)
        return _sigmoid(h[:, 0])

    return predict


def _log_loss(y: np.ndarray, p: np.ndarray) -> float:
    """Mean cross-entropy of (possibly soft) targets y under probabilities p."""
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


#: "auto" (the default nuisance learner) is a cross-validated convex combination — a "super learner" (van der Laan,
#: Polley & Hubbard 2007) — of these learners: logistic regression on z, on an additive spline basis of z, and
#: histogram gradient boosting. The mixing weights are chosen on a grid of step :data:`AUTO_GRID_STEP` over the
#: simplex by the held-out log-loss of :data:`AUTO_SELECTION_FOLDS`-fold cross-fitted predictions.
AUTO_LEARNERS: tuple[str, ...] = ("logistic", "spline", "hgb")
AUTO_SELECTION_FOLDS = 2
AUTO_GRID_STEP = 0.1
#: The additive spline basis of the "spline" learner: cubic B-splines with this many knots per coordinate (at
#: quantiles, linear beyond the data), so that U-shaped, periodic and step-like dependence on one coordinate can be
#: fitted by a penalised logistic regression.
SPLINE_KNOTS = 4


def _selection_folds(y: np.ndarray, n_splits: int, seed: int) -> np.ndarray:
    """Fold per row for the model choice, stratified for 0/1 targets."""
    rng = np.random.default_rng([int(seed), 31])
    folds = np.empty(len(y), dtype=int)
    groups = (y == 0.0, y == 1.0) if _is_binary(y) else (np.ones(len(y), dtype=bool),)
    for sel in groups:
        idx = rng.permutation(np.flatnonzero(sel))
        folds[idx] = np.arange(len(idx)) % n_splits
    return folds


def _fit_spline(z: np.ndarray, y: np.ndarray, seed: int) -> ProbModel:
    """Penalised logistic regression on an additive cubic-spline basis of every coordinate (a generalised additive
    model): sklearn's ``SplineTransformer`` (knots at quantiles of the training rows), then :func:`_fit_logistic`."""
    from sklearn.preprocessing import SplineTransformer

    basis = SplineTransformer(n_knots=SPLINE_KNOTS, degree=3, knots="quantile", extrapolation="linear",
                              include_bias=False).fit(z)
    model = _fit_logistic(basis.transform(z), y, seed)

    def predict(zz: np.ndarray) -> np.ndarray:
        return model(basis.transform(zz))
    return predict


def _simplex_grid(k: int, step: float) -> np.ndarray:
    m = int(round(1.0 / step))
    pts = [c for c in np.ndindex(*([m + 1] * (k - 1))) if sum(c) <= m]
    return np.array([[*c, m - sum(c)] for c in pts], dtype=float) / m


def _fit_auto(z: np.ndarray, y: np.ndarray, seed: int) -> ProbModel:
    """The default nuisance learner: the convex combination of :data:`AUTO_LEARNERS` with the lowest held-out
    log-loss.

    Every learner is cross-fitted over :data:`AUTO_SELECTION_FOLDS` folds of the rows, so every row has a held-out
    prediction under each; the mixing weights λ (a grid over the simplex) minimise the mean held-out log-loss of
    Σ λ_k p_k, and the learners with λ_k > 0 are refitted on all rows. Why a mixture chosen on held-out loss: the
    GCM's bias is the product of the errors of ĥ and m̂, so both must be consistent for the level to hold whatever
    the law; a logistic fit kept unless boosting won by a significance margin left a non-linear propensity of
    moderate strength misfitted (the test's size was 0.10–0.13 at n = 1,000 over drawn heteroscedastic designs),
    while the mixture keeps most weight on the logistic fit where the law is close to logistic (its variance is
    lower). Recorded on the model: ``.kind`` (the one learner, or "stacked"), ``.selection`` (weights and held-out
    losses) and ``.held_out`` (the mixture's cross-fitted predictions on the rows)."""
    folds = _selection_folds(y, AUTO_SELECTION_FOLDS, seed)
    held_out = np.empty((len(y), len(AUTO_LEARNERS)))
    for k in range(AUTO_SELECTION_FOLDS):
        fit, hold = folds != k, folds == k
        yf = y[fit]
        for j, kind in enumerate(AUTO_LEARNERS):
            if np.ptp(yf) == 0 or (_is_binary(yf) and min(int(yf.sum()), int(len(yf) - yf.sum())) < 2):
                model = _Constant(float(np.mean(yf)))
            else:
                model = _FITTERS[kind](z[fit], yf, seed + k)
            held_out[hold, j] = model(z[hold])
    grid = _simplex_grid(len(AUTO_LEARNERS), AUTO_GRID_STEP)
    mix = np.clip(held_out @ grid.T, 1e-9, 1 - 1e-9)  # rows × grid points
    losses = -(y[:, None] * np.log(mix) + (1 - y[:, None]) * np.log1p(-mix)).mean(axis=0)
    best = int(np.argmin(losses))
    lam = grid[best]
    models = [(lam[j], _FITTERS[kind](z, y, seed)) for j, kind in enumerate(AUTO_LEARNERS) if lam[j] > 0]

    def predict(zz: np.ndarray) -> np.ndarray:
        return sum(w * m(zz) for w, m in models)

    used = [kind for j, kind in enumerate(AUTO_LEARNERS) if lam[j] > 0]
    predict.kind = used[0] if len(used) == 1 else "stacked"
    predict.held_out = mix[:, best]
    predict.selection = {"weights": dict(zip(AUTO_LEARNERS, lam.tolist())),
                         "held_out_log_loss": float(losses[best]),
                         **{f"log_loss_{kind}": float(losses[np.flatnonzero(grid[:, j] == 1.0)[0]])
                            for j, kind in enumerate(AUTO_LEARNERS)}}
    return predict


_FITTERS = {"logistic": _fit_logistic, "spline": _fit_spline, "hgb": _fit_hgb, "mlp_release": _fit_mlp_release,
            "auto": _fit_auto}


def fit_prob_model(z, y, kind: str = DEFAULT_REGRESSOR, seed: int = 0) -> ProbModel:
    """Fit E[y | z] with values in [0, 1] (probabilities for 0/1 targets). Returns a callable z → array."""
    if kind not in _FITTERS:
        raise DataError(f"Unknown regressor '{kind}'; choose from {', '.join(REGRESSOR_KINDS)}.")
    z = _as_2d(z)
    y = _as_1d(y, "target")
    if len(y) == 0:
        raise DataError("Cannot fit a regressor on zero samples.")
    if y.min() < 0.0 or y.max() > 1.0:
        raise DataError("The classifier's outputs must be 0/1 predictions or probabilities in [0, 1].")
    if np.ptp(y) == 0 or len(y) < 5:
        return _Constant(float(np.mean(y)))
    if _is_binary(y) and min(int(y.sum()), int(len(y) - y.sum())) < 2:
        return _Constant(float(np.mean(y)))
    return _FITTERS[kind](z, y, int(seed))


@dataclass
class FittedRegressors:
    """ĝ(a, z) (one model per value of a) and ĥ(z), fitted on a training split."""

    g_models: dict[int, ProbModel]
    h_model: ProbModel
    kind: str

    def g(self, a, z) -> np.ndarray:
        z = _as_2d(z)
        a = np.broadcast_to(np.asarray(a).astype(int), (z.shape[0],))
        out = np.empty(z.shape[0])
        for value in np.unique(a):
            sel = a == value
            model = self.g_models.get(int(value))
            if model is None:  # a value never seen in training: fall back to ĥ
                model = self.h_model
            out[sel] = model(z[sel])
        return out

    def h(self, z) -> np.ndarray:
        return self.h_model(_as_2d(z))


@_one_thread
def fit_cit_regressors(yhat, a, z, kind: str = DEFAULT_REGRESSOR, seed: int = 0) -> FittedRegressors:
    """Fit ĝ(a, z) = E[Ŷ | A = a, Z = z] (one model per value of a) and ĥ(z) = E[Ŷ | Z = z] on a training split."""
    yhat = _as_1d(yhat, "yhat")
    a = _as_1d(a, "a").astype(int)
    z = _as_2d(z)
    _check_lengths(yhat=yhat, a=a, z=z)
    g_models = {int(v): fit_prob_model(z[a == v], yhat[a == v], kind, seed + 1 + int(v)) for v in np.unique(a)}
    return FittedRegressors(g_models=g_models, h_model=fit_prob_model(z, yhat, kind, seed), kind=kind)


# ==============================================================================================================
# Folds


def make_folds(a, n_folds: int = 5, seed: int = 0, first_fraction: float | None = None) -> np.ndarray:
    """Fold index per sample, stratified by the attribute so each fold holds every group.

    ``first_fraction`` (sequential fitting): fold 0 — which only trains — holds that share of every group and the
    other folds split the rest equally, so that the first tested fold's nuisances are not fitted on 1/K of the
    data (an option of :func:`gcm_test`; the default scheme fits ĥ and m̂ on every other fold and does not need it)."""
    from sklearn.model_selection import StratifiedKFold

    a = np.asarray(a)
    values, counts = np.unique(a, return_counts=True)
    if n_folds < 2:
        raise DataError("Cross-fitting needs at least 2 folds.")
    if counts.min() < n_folds:
        raise DataError(f"The smallest group has {counts.min()} samples; need at least {n_folds} "
                        f"(one per fold) for cross-fitting.")
    folds = np.empty(len(a), dtype=int)
    if first_fraction is not None:
        if not 0.0 < first_fraction < 1.0:
            raise DataError("The share of the first (training-only) fold must be between 0 and 1.")
        rng = np.random.default_rng([int(seed), 77])
        for value in values:
            idx = rng.permutation(np.flatnonzero(a == value))
            n0 = min(max(int(round(first_fraction * len(idx))), 1), len(idx) - (n_folds - 1))
            folds[idx[:n0]] = 0
            for k, part in enumerate(np.array_split(idx[n0:], n_folds - 1)):
                folds[part] = k + 1
        return folds
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=int(seed))
    for k, (_, test) in enumerate(skf.split(np.zeros(len(a)), a)):
        folds[test] = k
    return folds


def _with_attribute(z: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Features of the joint model ĝ(a, z): [z, a, a·z] — a logistic fit on them has full A×Z interactions (as
    one model per value of a has), and boosting can split on a or on a·z."""
    a = np.asarray(a, dtype=float)[:, None]
    return np.hstack([z, a, a * z])


#: The offset weight's effect models (:func:`_effect_features`), the one with the lower held-out log-loss is used.
EFFECT_MODELS: tuple[str, ...] = ("linear", "quadratic")


def _effect_features(z: np.ndarray, a: np.ndarray, model: str = "quadratic") -> np.ndarray:
    """Features of the offset weight's effect model: "linear" [z, a, a·z] — the effect of a may be constant or
    change sign along a coordinate (a·z: odd in z) — or "quadratic", with a·z² too: an effect that changes sign
    between the centre and the tails of a coordinate (even in z, e.g. A·(z₁² − 1), which averages to 0 and which no
    linear interaction represents)."""
    a = np.asarray(a, dtype=float)[:, None]
    return np.hstack([z, a, a * z] + ([a * z * z] if model == "quadratic" else []))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-6, 1 - 1e-6)
    return np.log(p) - np.log1p(-p)


def _offset_weight(z: np.ndarray, a: np.ndarray, yhat: np.ndarray, kind: str, seed: int,
                   base: ProbModel | None = None):
    """The weight ŵ = ĝ(1, ·) − ĝ(0, ·) of ``weight="offset"``, fitted on the rows given:
    ĝ(a, z) = sigmoid(η̂(z) + [1, z, a, a·z]·β), where η̂ = logit of E[Ŷ|Z] by the nuisance learner ``kind`` (what
    "auto" chooses: boosting when Ŷ is clearly non-linear in Z) and β an L2-penalised logistic fit with η̂ as a
    fixed offset (on "auto"'s cross-fitted η̂ of the same rows, so the offset has not seen a row's own label).

    The flexible part is shared by both groups and the attribute enters through a low-dimensional logistic
    effect model: a constant effect is one coefficient estimated from every row, an effect that changes sign with
    z one interaction. One model per group (``"difference"``) instead differences two independently fitted —
    often differently chosen — models, and under a non-linear nuisance that difference is mostly their errors.
    ``base``: a known E[Ŷ|Z] to use as the offset instead of fitting one (simulations with known truth).
    Returns (callable z → ŵ, the baseline's kind)."""
    base = fit_prob_model(z, yhat, kind, seed) if base is None else base
    if isinstance(base, _Constant):
        return (lambda zz: np.zeros(len(zz))), model_kind(base, kind)
    off = _logit(getattr(base, "held_out", None) if getattr(base, "held_out", None) is not None else base(z))
    # the effect model with the lower 2-fold held-out log-loss: the a·z² terms find even effects, but in many
    # dimensions they only add variance to the weight (on the 004 SCM's 32 coordinates they cost 2 of 10 low-ECA
    # classifiers when always included)
    folds = _selection_folds(yhat, AUTO_SELECTION_FOLDS, seed + 5)
    losses = {}
    for name in EFFECT_MODELS:
        x = _effect_features(z, a, name)
        loss = 0.0
        for k in range(AUTO_SELECTION_FOLDS):
            fit, hold = folds != k, folds == k
            p = _fit_logistic(x[fit], yhat[fit], seed, offset=off[fit])(x[hold], off[hold])
            loss += _log_loss(yhat[hold], p) * hold.sum()
        losses[name] = loss / len(yhat)
    model = min(EFFECT_MODELS, key=lambda m: (losses[m], EFFECT_MODELS.index(m)))
    effect = _fit_logistic(_effect_features(z, a, model), yhat, seed, offset=off)

    def w(zz: np.ndarray) -> np.ndarray:
        eta = _logit(base(zz))
        return (effect(_effect_features(zz, np.ones(len(zz)), model), eta)
                - effect(_effect_features(zz, np.zeros(len(zz)), model), eta))
    w.effect_model = model
    return w, model_kind(base, kind)


def _nuisance_scheme(scheme: str) -> str:
    """How ĥ and m̂ are fitted under a GCM scheme: on the earlier folds only ("sequential") or on every other
    fold ("crossfit", also for "sequential-weight", where only the learned weight is fitted sequentially)."""
    return "sequential" if scheme == "sequential" else "crossfit"


def _training_mask(folds: np.ndarray, k: int, scheme: str) -> np.ndarray:
    """Rows whose data may fit the nuisances used on fold ``k``: all other folds (cross-fitting) or only the
    earlier ones (sequential / online fitting)."""
    return folds < k if scheme == "sequential" else folds != k


#: The last few out-of-fold propensities by a digest of everything they depend on (a, z, folds, learner, seed,
#: scheme): every classifier audited on the same attribute and Z (the outputs of one image audit, the classifiers
#: of one SCM data set, a classifier and its negative control) needs the same m̂, and its fits are deterministic,
#: so a repeat is read here instead of refitted (in the SCM guard test, 11 of 13 s of propensity fits were repeats).
_PROPENSITY_CACHE: dict[bytes, tuple[np.ndarray, list[str]]] = {}
_PROPENSITY_CACHE_SIZE = 8
_PROPENSITY_LOCK = threading.Lock()


def _propensity_key(a: np.ndarray, z: np.ndarray, folds: np.ndarray, kind: str, seed: int, scheme: str) -> bytes:
    import hashlib

    h = hashlib.blake2b(digest_size=20)
    for arr in (a, z, folds):
        arr = np.ascontiguousarray(arr)
        h.update(f"{arr.dtype.str}{arr.shape};".encode())
        h.update(arr.data)
    h.update(repr((kind, int(seed), scheme)).encode())
    return h.digest()


@_one_thread
def crossfit_propensity(a, z, folds, kind: str = DEFAULT_REGRESSOR, seed: int = 0,
                        scheme: str = "crossfit", return_kinds: bool = False):
    """Out-of-fold m̂(z) = P(A = 1 | Z = z), fitted on the other folds (``scheme="crossfit"``) or on the earlier
    folds only (``"sequential"``; fold 0 gets NaN). Depends on (A, Z) only, so all classifiers share it: a call
    with the same inputs as one of the last few returns a copy of that result (:data:`_PROPENSITY_CACHE`).
    ``return_kinds=True`` also returns the regressor used per tested fold (what ``"auto"`` chose)."""
    a = _binary_attr(a)
    z = _as_2d(z)
    folds = np.asarray(folds)
    key = _propensity_key(a, z, folds, kind, seed, scheme)
    with _PROPENSITY_LOCK:
        hit = _PROPENSITY_CACHE.get(key)
    if hit is None:
        m_hat = np.full(len(a), np.nan)
        kinds: list[str] = []
        for k in np.unique(folds):
            train = _training_mask(folds, int(k), scheme)
            if not train.any():
                continue
            test = folds == k
            model = fit_prob_model(z[train], a[train], kind, seed + 101 + int(k))
            m_hat[test] = model(z[test])
            kinds.append(model_kind(model, kind))
        hit = (m_hat, kinds)
        with _PROPENSITY_LOCK:
            _PROPENSITY_CACHE[key] = hit
            while len(_PROPENSITY_CACHE) > _PROPENSITY_CACHE_SIZE:
                del _PROPENSITY_CACHE[next(iter(_PROPENSITY_CACHE))]
    m_hat, kinds = hit[0].copy(), list(hit[1])
    return (m_hat, kinds) if return_kinds else m_hat


def model_kind(model, requested: str) -> str:
    """What a fitted nuisance is: "constant" (too little variation to fit), the choice "auto" made, or the
    requested kind."""
    if model is None or isinstance(model, _Constant):
        return "constant"
    return getattr(model, "kind", requested)


#: A nuisance is flagged when its out-of-fold calibration slope is outside these bounds with confidence (the
#: slope's 95% interval lies wholly outside them) or its mean prediction is off by more than the second bound
#: (rules of thumb for a probability model; an uninformative nuisance — e.g. A independent of Z — has an unstable
#: slope and is not flagged for it).
CALIBRATION_SLOPE_OK = (0.8, 1.25)
CALIBRATION_LARGE_OK = 0.05


def _calibration_line(y: np.ndarray, p: np.ndarray) -> tuple[float, float, float] | None:
    """Logistic recalibration y ~ sigmoid(b0 + b1·logit p) → (b0, b1, standard error of b1), unpenalised, by
    Newton's method.

    Hand-written (two parameters) because the targets may be soft classifier scores in [0, 1], which
    scikit-learn's LogisticRegression does not take. None when logit p hardly varies (slope undefined)."""
    lp = np.log(np.clip(p, 1e-6, 1 - 1e-6)) - np.log1p(-np.clip(p, 1e-6, 1 - 1e-6))
    if len(y) < 20 or float(np.std(lp)) < 0.05 or np.ptp(y) == 0:
        return None
    x = np.column_stack([np.ones_like(lp), lp])
    beta = np.array([0.0, 1.0])
    for _ in range(50):
        q = _sigmoid(x @ beta)
        grad = x.T @ (q - y)
        hess = (x * (q * (1 - q))[:, None]).T @ x + 1e-9 * np.eye(2)
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            return None
        beta = beta - step
        if not np.all(np.isfinite(beta)):
            return None
        if np.max(np.abs(step)) < 1e-8:
            break
    q = _sigmoid(x @ beta)
    cov = np.linalg.pinv((x * (q * (1 - q))[:, None]).T @ x)
    return float(beta[0]), float(beta[1]), float(math.sqrt(max(cov[1, 1], 0.0)))


def nuisance_diagnostic(y, p) -> dict:
    """Out-of-fold fit of one nuisance regression (ĥ or m̂): its predictions ``p`` on rows it was not fitted on
    against the observed ``y``.

    ``brier`` and ``brier_constant`` (predicting the tested rows' mean: skill = 1 − brier / brier_constant),
    ``log_loss``, ``calibration_in_the_large`` (mean y − mean p), the logistic ``calibration_slope`` and
    ``calibration_intercept`` (slope 1, intercept 0 for a calibrated model; None when the predictions are
    nearly constant) and ``ok`` with a one-line ``note``."""
    y = np.asarray(y, dtype=float)
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    brier = float(np.mean((y - p) ** 2))
    brier0 = float(np.mean((y - y.mean()) ** 2))
    line = _calibration_line(y, p)
    citl = float(y.mean() - p.mean())
    out = {"n": int(len(y)), "brier": brier, "brier_constant": brier0,
           "skill": (1.0 - brier / brier0) if brier0 > 0 else None, "log_loss": _log_loss(y, p),
           "calibration_in_the_large": citl,
           "calibration_intercept": None if line is None else line[0],
           "calibration_slope": None if line is None else line[1],
           "calibration_slope_se": None if line is None else line[2]}
    problems = []
    if abs(citl) > CALIBRATION_LARGE_OK:
        problems.append(f"mean prediction off by {citl:+.3f}")
    if line is not None:
        lo, hi = line[1] - 1.96 * line[2], line[1] + 1.96 * line[2]
        if hi < CALIBRATION_SLOPE_OK[0]:
            problems.append(f"calibration slope {line[1]:.2f} < 1: over-fitted (predictions too extreme)")
        elif lo > CALIBRATION_SLOPE_OK[1]:
            problems.append(f"calibration slope {line[1]:.2f} > 1: under-fitted (predictions too timid)")
    out["ok"] = not problems
    out["note"] = "; ".join(problems) if problems else (
        "calibrated out of fold" if line is not None else "nearly constant predictions; mean calibrated")
    return out


# ==============================================================================================================
# The published statistic


def _paired_t(u: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """scipy.stats.ttest_rel, with identical pairs (no variance) read as 'no evidence' (t = 0, p = 1)."""
    from scipy.stats import ttest_rel

    d = u - v
    if len(d) < 2:
        return float("nan"), float("nan")
    if np.all(d == d[0]):
        return (0.0, 1.0) if d[0] == 0 else (math.copysign(math.inf, d[0]), 0.0)
    with warnings.catch_warnings():  # nearly constant differences: scipy warns, the statistic is still defined
        warnings.simplefilter("ignore", RuntimeWarning)
        res = ttest_rel(u, v)
    return float(res.statistic), float(res.pvalue)


def cit_lr(yhat_test, a_test, z_test, g, h) -> tuple[float, float]:
    """The published CIT-LR statistic (004 Alg. 1): u = ŷ·ĝ(a, z), v = ŷ·ĥ(z), paired t-test → (t, p).

    ``g(a, z)`` and ``h(z)`` are callables fitted on a separate training split (e.g. from
    :func:`fit_cit_regressors`). Small p ⇒ not counterfactually invariant. Two-sided, as in the paper.
    """
    yhat = _as_1d(yhat_test, "yhat_test")
    a = _as_1d(a_test, "a_test").astype(int)
    z = _as_2d(z_test, "z_test")
    _check_lengths(yhat=yhat, a=a, z=z)
    u = yhat * np.asarray(g(a, z), dtype=float)
    v = yhat * np.asarray(h(z), dtype=float)
    return _paired_t(u, v)


@_one_thread
def cit_lr_test(yhat, a, z, regressor: str = DEFAULT_REGRESSOR, n_folds: int = 5, seed: int = 0,
                split: tuple[np.ndarray, np.ndarray] | None = None, reporter: Reporter | None = None) -> CITResult:
    """CIT-LR with fitted regressors.

    ``split=(train_idx, test_idx)``: the paper's protocol (fit on train, test on test). Otherwise K-fold
    cross-fitting: every sample's u, v come from regressors fitted on the other folds, and the paired t-test runs
    over all samples.
    """
    rep = reporter or Reporter()
    yhat = _as_1d(yhat, "yhat")
    a = _as_1d(a, "a").astype(int)
    z = _as_2d(z)
    n = _check_lengths(yhat=yhat, a=a, z=z)
    if split is not None:
        train, test = (np.asarray(s) for s in split)
        fitted = fit_cit_regressors(yhat[train], a[train], z[train], regressor, seed)
        rep.check()
        t, p = cit_lr(yhat[test], a[test], z[test], fitted.g, fitted.h)
        u = yhat[test] * fitted.g(a[test], z[test])
        v = yhat[test] * fitted.h(z[test])
        return CITResult("cit_lr_split", t, p, int(len(test)), float(np.mean(u - v)), "two-sided", regressor, 1,
                         {"n_train": int(len(train))})
    folds = make_folds(a, n_folds, seed)
    u = np.empty(n)
    v = np.empty(n)
    for k in range(n_folds):
        rep.check()
        test = folds == k
        fitted = fit_cit_regressors(yhat[~test], a[~test], z[~test], regressor, seed + 17 * k)
        u[test] = yhat[test] * fitted.g(a[test], z[test])
        v[test] = yhat[test] * fitted.h(z[test])
        rep((k + 1) / n_folds, f"CIT-LR fold {k + 1}/{n_folds}")
    t, p = _paired_t(u, v)
    return CITResult("cit_lr_crossfit", t, p, n, float(np.mean(u - v)), "two-sided", regressor, n_folds)


# ==============================================================================================================
# The default: (weighted) generalised covariance measure, cross-fitted


def _weighted_plain_correlation(r: np.ndarray, ru: np.ndarray, used: np.ndarray, plain: np.ndarray,
                                folds: np.ndarray, coef: np.ndarray) -> tuple[float, list[float]]:
    """Null correlation of the weighted statistic T = Σ_k w_k T_k (T_k standardised per tested fold, rows
    ``used``; ``coef`` = the w_k, unit norm) with the plain GCM's pooled T over the rows ``plain`` (a superset:
    fold 0 too): Σ_k w_k ρ_k with ρ_k = √(n_k/N)·cov_k(R_w, R_plain)/(sd_k(R_w)·sd(R_plain)), N = the plain
    statistic's rows. Returns the correlation and the per-fold terms ρ_k (the correlation of T_k with the plain T,
    so that another fixed combination of the T_k can be referred to the same joint law)."""
    sd_plain = float(ru[plain].std())
    ks = np.unique(folds[used])
    terms = []
    for k in ks:
        sel = used & (folds == k)
        sw = float(r[sel].std())
        if sw <= 0 or sd_plain <= 0:
            terms.append(0.0)
            continue
        cov = float(np.mean((r[sel] - r[sel].mean()) * (ru[sel] - ru[sel].mean())))
        terms.append(math.sqrt(sel.sum() / plain.sum()) * cov / (sw * sd_plain))
    return float(np.clip(float(np.dot(coef, terms)), -1.0, 1.0)), terms


def gcm_min_p(p_weighted: float, p_plain: float, rho: float) -> float:
    """P(min(p_W, p_P) ≤ observed min) when (T_W, T_P) is bivariate normal with correlation ``rho`` (T_W
    one-sided, T_P two-sided): 1 − P(T_W < c_W, |T_P| < c_P). Between min p and Bonferroni's 2·min p; close to
    min p when the learned weight is nearly constant (the two statistics then nearly coincide). Below 1e-6 the
    bivariate normal integral is not accurate enough and Bonferroni's bound is returned (no decision at a usual
    α changes)."""
    from scipy.stats import multivariate_normal, norm

    pmin = min(p_weighted, p_plain)
    if pmin >= 1.0:
        return 1.0
    if pmin < 1e-6:
        return min(1.0, 2.0 * pmin)
    cw, cp = float(norm.isf(pmin)), float(norm.isf(pmin / 2))
    mvn = multivariate_normal(mean=[0.0, 0.0], cov=[[1.0, rho], [rho, 1.0]])
    inside = float(mvn.cdf([cw, cp]) - mvn.cdf([cw, -cp]))
    return float(min(max(1.0 - inside, pmin), 2.0 * pmin, 1.0))


@_one_thread
def gcm_test(yhat, a, z, weighted: bool = True, regressor: str = DEFAULT_REGRESSOR, n_folds: int = 5,
             seed: int = 0, m_hat: np.ndarray | None = None, folds: np.ndarray | None = None,
             propensity_regressor: str | None = None, scheme: str | None = None,
             burn_in: float | None = None, weight: str | None = None, combine: str | None = None,
             fold_weights: str | None = None, known_h: ProbModel | None = None,
             reporter: Reporter | None = None) -> CITResult:
    """(Weighted) generalised covariance measure test of ``Ŷ ⟂ A | Z`` for a 0/1 attribute.

    Residual products ``R_i = (ŷ_i − ĥ(z_i)) (a_i − m̂(z_i)) ŵ(z_i)`` with nuisances fitted on other folds.

    * Unweighted (``weighted=False``, Shah & Peters 2020): ŵ ≡ 1, K-fold cross-fitting,
      ``T = √n mean(R) / sd(R)``, two-sided normal p-value. Sees only the average conditional covariance
      E[m(1−m)(g(1,Z) − g(0,Z))], so effects that change sign across Z cancel (like DP does).
    * Weighted (default; Scheidegger, Hörrmann & Bühlmann 2022): ŵ = ĝ(1, ·) − ĝ(0, ·), so under the alternative
      E[R] ≈ E[m(1−m)(g(1,Z) − g(0,Z))²] > 0 — a test of the 004 quantity E[(g − h)²] > 0 with a one-sided
      normal p-value. A learned weight makes the cross-fitted sum a degenerate U-statistic under the null (unit i's
      label shapes unit j's weight and vice versa; in a simulation the one-sided 5% test rejected 12% of invariant
      oracles), so the weight is fitted **sequentially** (Luedtke & van der Laan 2016): fold k's weight on folds
      0…k−1 only, each fold's ``T_k = √n_k mean(R_k)/sd(R_k)`` is N(0, 1) given the past, and
      ``T = Σ_{k≥1} c_k T_k / ‖c‖`` is N(0, 1) under the null for any c fixed in advance. Fold 0 only trains the
      weight. ``fold_weights`` (:data:`FOLD_WEIGHTS`): c_k = 1 ("equal") or √(rows fold k's weight was fitted
      on) ("sqrt_train").
    * ``scheme``: "sequential-weight" (default for the weighted test) cross-fits ĥ and m̂ on all other folds and
      fits only the weight sequentially; "sequential" fits all three on the earlier folds (the first default,
      whose first tested fold saw 1/K of the rows: biased under non-linear nuisances); "crossfit" fits all three
      on the other folds (invalid with a learned weight). ``burn_in``: share of fold 0 (default: equal folds).
    * ``weight`` (:data:`WEIGHTS`): "offset" (default: a flexible E[Ŷ|Z] baseline shared by both groups plus a
      logistic effect model on [z, a, a·z], or [z, a, a·z, a·z²] when its held-out log-loss is lower; the choice
      per tested fold in ``details["weight_effect_models"]``), "difference" (one model per value of a), "joint"
      (one model ĝ on [z, a, a·z]; the first default) or "sign".
    * ``combine`` (:data:`COMBINATIONS`): "maxT" (default) reports P(min(p_W, p_P) ≤ observed) for the weighted
      statistic and the plain two-sided GCM on the same out-of-fold residuals, with their correlation estimated
      from those residuals — the plain GCM is the most powerful for an effect of one sign, the weighted one for an
      effect that changes sign, and the joint law costs less than Bonferroni when the two agree. The plain
      statistic uses every row (its ĥ on fold 0 too; the weighted one tests folds 1…K−1); "bonferroni"
      (2·min p; the first default) and "none" (the weighted test alone).

    ``m_hat`` (out-of-fold propensities for the same ``folds`` and scheme; see :func:`crossfit_propensity`) can be
    passed to share work across classifiers. ``known_h`` (a callable z → E[Ŷ|Z]) replaces every fit of ĥ and the
    weight's offset: with the true E[Ŷ|Z] and the true P(A=1|Z) as ``m_hat`` — known in a simulation — the test's
    error rate is what it would be with perfect nuisances, so a false-alarm rate can be split into the data's share
    and the nuisance fits' share (``bench validity --family cit``, the drawn designs' "exact nuisances" row). The
    level holds when ĥ and m̂ are consistent with ‖ĥ − h‖·‖m̂ − m‖ = o(n^-1/2); the weight only has to be fitted out of sample (any weight is valid; a good one
    gives power).
    """
    from scipy.stats import norm

    rep = reporter or Reporter()
    scheme = scheme or (DEFAULT_SCHEME if weighted else "crossfit")
    weight = weight or DEFAULT_WEIGHT
    combine = combine or DEFAULT_COMBINE
    fold_weights = fold_weights or DEFAULT_FOLD_WEIGHTS
    if fold_weights not in FOLD_WEIGHTS:
        raise DataError(f"The fold weights must be one of {', '.join(FOLD_WEIGHTS)}.")
    if weight not in WEIGHTS:
        raise DataError(f"The weight must be one of {', '.join(WEIGHTS)}.")
    if combine not in COMBINATIONS:
        raise DataError(f"The combination with the plain GCM must be one of {', '.join(COMBINATIONS)}.")
    if scheme not in SCHEMES:
        raise DataError(f"The fitting scheme must be one of {', '.join(SCHEMES)}.")
    yhat = _as_1d(yhat, "yhat")
    a = _binary_attr(a)
    z = _as_2d(z)
    n = _check_lengths(yhat=yhat, a=a, z=z)
    if folds is None:
        folds = make_folds(a, n_folds, seed, burn_in if scheme != "crossfit" else None)
    else:
        folds = np.asarray(folds)
        n_folds = int(len(np.unique(folds)))
    prop_kind = propensity_regressor or regressor
    m_kinds = None
    known = None
    if known_h is not None:
        def known(zz: np.ndarray) -> np.ndarray:
            return np.asarray(known_h(zz), dtype=float)
        known.kind = "known"

    def fit_h(zz: np.ndarray, yy: np.ndarray, s: int) -> ProbModel:
        return fit_prob_model(zz, yy, regressor, s) if known is None else known

    if m_hat is None:
        m_hat, m_kinds = crossfit_propensity(a, z, folds, prop_kind, seed, _nuisance_scheme(scheme),
                                             return_kinds=True)
    else:
        m_hat = np.asarray(m_hat, dtype=float).reshape(-1)
        _check_lengths(yhat=yhat, m_hat=m_hat)
    r = np.full(n, np.nan)
    h_oof = np.full(n, np.nan)
    chosen: dict[str, list[str]] = {"h": [], "g0": [], "g1": []}
    effect_models: list[str | None] = []  # the offset weight's effect model per tested fold
    fold_stats: list[float] = []
    fold_sizes: list[int] = []
    fold_train: list[int] = []
    for k in np.unique(folds):
        rep.check()
        train = _training_mask(folds, int(k), "crossfit" if scheme == "crossfit" else "sequential")
        test = folds == k
        if not train.any():
            if weighted and scheme == "sequential-weight" and combine != "none":
                # fold 0 trains the weight only, but the plain GCM needs no weight: its ĥ (on every other fold)
                # lets the plain statistic use all rows (25 % more rows than the weighted one)
                h_model = fit_h(z[folds != k], yhat[folds != k], seed + 17 * int(k))
                h_oof[test] = h_model(z[test])
                chosen["h"].append(model_kind(h_model, regressor))
            continue
        if np.any(np.isnan(m_hat[test])):
            raise DataError("m_hat has no value on a tested fold: compute it with the same folds and scheme.")
        if weighted:
            if scheme == "sequential-weight" and weight == "joint":
                joint = fit_prob_model(_with_attribute(z[train], a[train]), yhat[train], regressor,
                                       seed + 17 * int(k) + 1)
                g_models = {v: (lambda zz, v=v, f=joint: f(_with_attribute(zz, np.full(len(zz), v))))
                            for v in (0, 1)}
                for v in (0, 1):
                    g_models[v].kind = model_kind(joint, regressor)
                h_train = folds != k
                h_model = fit_h(z[h_train], yhat[h_train], seed + 17 * int(k))
            elif weight == "offset":  # the weight on `train`; ĥ as the scheme says
                w_fn, base_kind = _offset_weight(z[train], a[train], yhat[train], regressor, seed + 17 * int(k) + 1,
                                                 base=known)
                effect_models.append(getattr(w_fn, "effect_model", None))
                g_models = {}
                h_train = folds != k if scheme == "sequential-weight" else train
                h_model = fit_h(z[h_train], yhat[h_train], seed + 17 * int(k))
            elif scheme == "sequential-weight":  # ĥ from every other fold; only the weight waits for the past
                g_models = {v: fit_prob_model(z[train & (a == v)], yhat[train & (a == v)], regressor,
                                              seed + 17 * int(k) + 1 + v) for v in (0, 1)}
                h_train = folds != k
                h_model = fit_h(z[h_train], yhat[h_train], seed + 17 * int(k))
            else:
                fitted = fit_cit_regressors(yhat[train], a[train], z[train], regressor, seed + 17 * int(k))
                g_models, h_model = fitted.g_models, fitted.h_model if known is None else known
            w = w_fn(z[test]) if not g_models else g_models[1](z[test]) - g_models[0](z[test])
            if weight == "sign":
                w = np.sign(w)
            h_oof[test] = h_model(z[test])
            chosen["h"].append(model_kind(h_model, regressor))
            for v in (0, 1):
                chosen[f"g{v}"].append(base_kind if not g_models else model_kind(g_models[v], regressor))
        else:
            h_model = fit_h(z[train], yhat[train], seed + 17 * int(k))
            h_oof[test] = h_model(z[test])
            chosen["h"].append(model_kind(h_model, regressor))
            w = 1.0
        resid = yhat[test] - h_oof[test]
        r[test] = resid * (a[test] - m_hat[test]) * w
        if scheme != "crossfit":
            rk = r[test]
            mk, sk = float(rk.mean()), float(rk.std())
            fold_stats.append(0.0 if sk <= 1e-12 * max(1.0, abs(mk)) else math.sqrt(len(rk)) * mk / sk)
            fold_sizes.append(int(len(rk)))
            fold_train.append(int(train.sum()))
        rep((int(k) + 1) / n_folds, f"{'weighted ' if weighted else ''}GCM fold {int(k) + 1}/{n_folds}")
    used = ~np.isnan(r)
    mean = float(np.mean(r[used]))
    coef = np.sqrt(np.asarray(fold_train, float)) if fold_weights == "sqrt_train" else np.ones(len(fold_stats))
    coef = coef / np.linalg.norm(coef) if len(coef) else coef
    if scheme != "crossfit":
        stat = float(np.dot(coef, fold_stats))
    else:
        sd = float(np.std(r[used]))
        stat = 0.0 if sd <= 1e-12 * max(1.0, abs(mean)) else math.sqrt(int(used.sum())) * mean / sd
    p = float(norm.sf(stat)) if weighted else float(2 * norm.sf(abs(stat)))
    if np.all(r[used] == 0.0):  # e.g. constant predictions: no information at all, not "half" evidence
        stat, p = 0.0, 1.0
    combined = None
    if weighted and combine != "none":
        plain = ~np.isnan(h_oof) & ~np.isnan(m_hat)  # every row under "sequential-weight", else the tested rows
        ru = (yhat - h_oof) * (a - m_hat)
        mu, su = float(ru[plain].mean()), float(ru[plain].std())
        t_plain = 0.0 if su <= 1e-12 * max(1.0, abs(mu)) else math.sqrt(int(plain.sum())) * mu / su
        p_plain = float(2 * norm.sf(abs(t_plain)))
        combined = {"p_weighted": p, "t_plain": t_plain, "p_plain": p_plain, "rule": combine,
                    "n_plain": int(plain.sum())}
        if combine == "bonferroni":
            p = min(1.0, 2.0 * min(p, p_plain))
        else:
            rho, terms = (_weighted_plain_correlation(r, ru, used, plain, folds, coef) if scheme != "crossfit"
                          else (0.0, []))
            combined["correlation"] = rho
            combined["fold_correlations"] = terms
            p = gcm_min_p(p, p_plain, rho)
    method = "wgcm" if weighted else "gcm"
    details = {"propensity_regressor": prop_kind, "scheme": scheme, "n_tested": int(used.sum()),
               "nuisance_fit": {"E[Ŷ|Z]": nuisance_diagnostic(yhat[used], h_oof[used]),
                                "P(A=1|Z)": nuisance_diagnostic(a[used], m_hat[used])},
               "regressors_chosen": {"E[Ŷ|Z]": chosen["h"], "P(A=1|Z)": m_kinds,
                                     **({"E[Ŷ|A=0,Z]": chosen["g0"], "E[Ŷ|A=1,Z]": chosen["g1"]}
                                        if weighted else {})}}
    if combined is not None:
        details["combined_with_plain_gcm"] = combined
    if effect_models:
        details["weight_effect_models"] = effect_models
    if scheme != "crossfit":
        details["burn_in"] = float(np.mean(folds == 0))
        details["fold_statistics"] = fold_stats
        details["fold_sizes"] = fold_sizes
        details["fold_weights"] = {"rule": fold_weights, "coefficients": coef.tolist(), "training_rows": fold_train}
    return CITResult(method, stat, p, n, mean, "greater" if weighted else "two-sided", regressor, n_folds, details)


def cit_test(yhat, a, z, method: str = DEFAULT_METHOD, regressor: str = DEFAULT_REGRESSOR, n_folds: int = 5,
             seed: int = 0, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
             **kwargs) -> CITResult:
    """Dispatch to one of :data:`METHODS` (default: the weighted GCM, weight fitted sequentially, combined with the
    plain GCM; "auto" nuisance regressors)."""
    rep = Reporter(progress, cancel)
    if method in ("wgcm", "gcm"):
        return gcm_test(yhat, a, z, weighted=method == "wgcm", regressor=regressor, n_folds=n_folds, seed=seed,
                        reporter=rep, **kwargs)
    if method == "cit_lr_crossfit":
        return cit_lr_test(yhat, a, z, regressor, n_folds, seed, reporter=rep)
    if method == "cit_lr_split":
        split = kwargs.get("split")
        if split is None:
            idx = np.random.default_rng(seed).permutation(len(np.asarray(a)))
            half = len(idx) // 2
            split = (idx[:half], idx[half:])
        return cit_lr_test(yhat, a, z, regressor, n_folds, seed, split=split, reporter=rep)
    raise DataError(f"Unknown invariance test '{method}'; choose from {', '.join(METHODS)}.")


def invariance_table(outputs: dict, a, z, y: dict | None = None, method: str = DEFAULT_METHOD,
                     regressor: str = DEFAULT_REGRESSOR, published: bool = True, n_folds: int = 5, seed: int = 0,
                     split: tuple[np.ndarray, np.ndarray] | None = None, progress: ProgressFn | None = None,
                     cancel: CancelToken | None = None) -> list[dict]:
    """One row per classifier output (e.g. per disease, 004 Tables 12–13): the default invariance test, the
    published CIT-LR (paper split; ``published=True``), DP and — when labels ``y[name]`` are given — EO, each with
    Benjamini–Hochberg q-values across the outputs. Progress per output; cancel between outputs and folds."""
    from fairdesk.core.stats.multiple import benjamini_hochberg

    rep = Reporter(progress, cancel)
    names = list(outputs)
    rows: list[dict] = []
    for i, name in enumerate(names):
        sub = rep.sub(i / max(len(names), 1), (i + 1) / max(len(names), 1))
        yhat = outputs[name]
        res = cit_test(yhat, a, z, method, regressor, n_folds, seed, sub.progress, sub.cancel)
        row = {"output": name, "n": res.n, "test": method, "t": res.statistic, "p": res.p_value}
        if "nuisance_fit" in res.details:  # the default's out-of-fold nuisance diagnostics, for the report
            row["nuisance_fit"] = jsonable(res.details["nuisance_fit"])
            row["regressors_chosen"] = {k: sorted(set(v)) for k, v in res.details["regressors_chosen"].items()
                                        if v}
            row["scheme"] = res.details.get("scheme")
        if published:
            pub = cit_test(yhat, a, z, "cit_lr_split", regressor, n_folds, seed, cancel=sub.cancel,
                           **({"split": split} if split is not None else {}))
            row.update(cit_lr_t=pub.statistic, cit_lr_p=pub.p_value)
        row["dp_t"], row["dp_p"] = dp_test(yhat, a)
        if y is not None and name in y:
            row["eo_t"], row["eo_p"] = eo_test(yhat, a, y[name])
        rows.append(row)
        sub(1.0, f"invariance tests: {name}")
    for col in ("p", "cit_lr_p", "dp_p", "eo_p"):
        if any(col in r for r in rows):
            q = benjamini_hochberg([r.get(col, np.nan) for r in rows])
            for r, qv in zip(rows, q):
                if col in r:
                    r[col[:-1] + "q" if col != "p" else "q"] = float(qv)
    return rows


# ==============================================================================================================
# Association baselines


def welch_test(x1, x2) -> tuple[float, float]:
    """Welch two-sample t-test (scipy.stats.ttest_ind, equal_var=False) with degenerate cases resolved:
    both samples constant and equal → (0, 1); constant and different → (±inf, 0); fewer than 2 per side → NaN."""
    from scipy.stats import ttest_ind

    x1 = np.asarray(x1, float)
    x2 = np.asarray(x2, float)
    if len(x1) < 2 or len(x2) < 2:
        return float("nan"), float("nan")
    if np.ptp(x1) == 0 and np.ptp(x2) == 0:
        diff = float(x1[0] - x2[0])
        return (0.0, 1.0) if diff == 0 else (math.copysign(math.inf, diff), 0.0)
    res = ttest_ind(x1, x2, equal_var=False)
    return float(res.statistic), float(res.pvalue)


def _two_groups(a, groups):
    a = np.asarray(a)
    values = np.unique(a) if groups is None else np.asarray(groups)
    if len(values) != 2:
        raise DataError(f"The DP/EO tests compare two groups; got {len(values)} (pass groups=(g1, g2)).")
    return values


def dp_test(pred, a, groups=None) -> tuple[float, float]:
    """Demographic parity as a test: Welch t-test of f(X) between the two groups → (t, p)."""
    pred = _as_1d(pred, "pred")
    a = np.asarray(a).reshape(-1)
    _check_lengths(pred=pred, a=a)
    g1, g2 = _two_groups(a, groups)
    return welch_test(pred[a == g2], pred[a == g1])


def eo_test(pred, a, y, groups=None) -> tuple[float, float]:
    """Equality of opportunity as a test: the same Welch t-test restricted to Y = 1 (true-positive rates).
    Unlike the authors' release, this is NOT the DP test: it uses only the positives."""
    pred = _as_1d(pred, "pred")
    a = np.asarray(a).reshape(-1)
    y = _as_1d(y, "y")
    _check_lengths(pred=pred, a=a, y=y)
    g1, g2 = _two_groups(a, groups)
    pos = y == 1
    return welch_test(pred[pos & (a == g2)], pred[pos & (a == g1)])


# ==============================================================================================================
# Oriented effect with an equivalence verdict (exact counterfactuals, or vs a null-intervention reconstruction)


@dataclass
class DirectionEffect:
    source: object           # observed a
    target: object           # intervened a'
    n: int
    mean_shift: float        # mean of f(x_cf) − f(x)
    ci_low: float
    ci_high: float
    p_shift: float           # two-sided one-sample t-test of mean shift = 0
    p_tost: float            # TOST p for |mean shift| < margin
    mean_abs_shift: float    # mean |f(x_cf) − f(x)| (= flip rate for hard predictions)
    abs_lower: float         # one-sided lower confidence bound of mean |shift|
    abs_upper: float         # one-sided upper confidence bound of mean |shift|
    flip_rate: float         # share of units whose hard prediction changes
    verdict: str
    reason: str


@dataclass
class OrientedEffectResult:
    margin: float
    alpha: float
    control_band: float | None
    threshold: float
    directions: list[DirectionEffect]
    verdict: str

    def to_dict(self) -> dict:
        return jsonable(asdict(self))


def _binom_bounds(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided (1 − alpha) exact lower and upper bounds of a binomial proportion."""
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
    return float(ci.low), float(ci.high)


def _direction(d: np.ndarray, flips: np.ndarray, hard: bool, margin: float, alpha: float) -> tuple:
    from scipy.stats import t as t_dist
    from scipy.stats import ttest_1samp

    n = len(d)
    mean = float(d.mean())
    absd = np.abs(d)
    mean_abs = float(absd.mean())
    flip_rate = float(flips.mean())
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    nan = float("nan")
    if n < 2:
        return mean, nan, nan, nan, nan, mean_abs, nan, nan, flip_rate
    if sd <= 1e-12 * max(1.0, abs(mean)):  # every unit shifts by the same amount (up to rounding)
        sd = 0.0
        ci = (mean, mean)
        p_shift = 1.0 if abs(mean) <= 1e-12 else 0.0
    else:
        se = sd / math.sqrt(n)
        q = float(t_dist.ppf(1 - alpha / 2, n - 1))
        ci = (mean - q * se, mean + q * se)
        p_shift = float(ttest_1samp(d, 0.0).pvalue)
    # Upper bound on E|d|: exact binomial for hard predictions (|d| ∈ {0, 1}), t-based otherwise.
    if hard:
        abs_lower, abs_upper = _binom_bounds(int(absd.sum()), n, alpha)
    else:
        half = float(t_dist.ppf(1 - alpha, n - 1)) * float(absd.std(ddof=1)) / math.sqrt(n)
        abs_lower, abs_upper = mean_abs - half, mean_abs + half
    # TOST for |E d| < margin. With no variance, fall back on the bound for E|d| (|E d| ≤ E|d|).
    if sd == 0.0:
        if hard:
            p_tost = float(_binom_tost(int(absd.sum()), n, margin))
        else:
            p_tost = 0.0 if abs(mean) < margin else 1.0
    else:
        p_lo = float(ttest_1samp(d, -margin, alternative="greater").pvalue)
        p_hi = float(ttest_1samp(d, margin, alternative="less").pvalue)
        p_tost = max(p_lo, p_hi)
    return mean, ci[0], ci[1], p_shift, p_tost, mean_abs, abs_lower, abs_upper, flip_rate


def _binom_tost(k: int, n: int, margin: float) -> float:
    """p-value for H0: flip probability ≥ margin (one-sided exact binomial)."""
    from scipy.stats import binomtest

    if margin <= 0:
        return 1.0
    return float(binomtest(k, n, p=min(margin, 1.0), alternative="less").pvalue)


def oriented_effect(pred, pred_cf, a, a_cf=None, margin: float = 0.02, alpha: float = 0.05,
                    control_band: float | None = None, threshold: float = 0.5) -> OrientedEffectResult:
    """Per direction a → a′: the oriented shift f(x_cf) − f(x), its CI, the flip rate and a TOST verdict.

    ``pred`` are predictions on the originals (or, with a learned generator, on the null-intervention
    reconstructions), ``pred_cf`` on the counterfactuals with targets ``a_cf`` (default: 1 − a for 0/1 a).
    Rows may repeat a unit once per target. Hard 0/1 predictions or scores in [0, 1] (flips use ``threshold``).

    Verdict per direction:

    * "equivalent within margin" — TOST rejects |E shift| ≥ margin at ``alpha`` AND the upper bound of the mean
      absolute shift (the flip rate for hard predictions) is below the margin, so shifts cannot cancel;
    * "dependent" — the mean shift differs from 0 (two-sided t-test at ``alpha``) or the mean absolute shift is
      above the margin with confidence; when ``control_band`` (the shift an invariant classifier shows through the
      same generator) is given, a shift whose |mean| lies inside the band is never called dependent;
    * "inconclusive" — otherwise.

    The overall verdict is "dependent" if any direction is, "equivalent within margin" if all are, else
    "inconclusive".
    """
    pred = _as_1d(pred, "pred")
    pred_cf = _as_1d(pred_cf, "pred_cf")
    a = np.asarray(a).reshape(-1)
    if a_cf is None:
        a_int = _binary_attr(a)
        a_cf = 1 - a_int
        a = a_int
    a_cf = np.asarray(a_cf).reshape(-1)
    _check_lengths(pred=pred, pred_cf=pred_cf, a=a, a_cf=a_cf)
    if margin < 0:
        raise DataError("The equivalence margin must be ≥ 0.")
    hard = _is_binary(pred) and _is_binary(pred_cf)
    d = pred_cf - pred
    flips = (pred_cf >= threshold) != (pred >= threshold)
    out: list[DirectionEffect] = []
    pairs = sorted({(s, t) for s, t in zip(a.tolist(), a_cf.tolist()) if s != t}, key=str)
    if not pairs:
        raise DataError("No counterfactual changes the attribute (every target equals the observed value).")
    for s, t in pairs:
        sel = (a == s) & (a_cf == t)
        mean, lo, hi, p_shift, p_tost, mean_abs, abs_lo, abs_up, flip = _direction(d[sel], flips[sel], hard,
                                                                                      margin, alpha)
        n = int(sel.sum())
        if n < 2:
            verdict, reason = "inconclusive", "fewer than 2 units in this direction"
        elif p_tost < alpha and abs_up < margin:
            verdict, reason = "equivalent within margin", (f"|mean shift| < {margin:g} (TOST p = {p_tost:.3g}) and "
                                                           f"mean |shift| ≤ {abs_up:.3g}")
        elif p_shift < alpha or abs_lo > margin:
            if control_band is not None and abs(mean) <= control_band and mean_abs <= control_band:
                verdict, reason = "inconclusive", f"shift inside the negative-control band ±{control_band:g}"
            else:
                verdict, reason = "dependent", (f"mean shift {mean:+.3g} (p = {p_shift:.3g}), "
                                                f"mean |shift| {mean_abs:.3g}")
        else:
            verdict, reason = "inconclusive", "neither a shift nor equivalence within the margin is shown"
        out.append(DirectionEffect(s, t, n, mean, lo, hi, p_shift, p_tost, mean_abs, abs_lo, abs_up, flip,
                                   verdict, reason))
    verdicts = {e.verdict for e in out}
    overall = ("dependent" if "dependent" in verdicts else
               "equivalent within margin" if verdicts == {"equivalent within margin"} else "inconclusive")
    return OrientedEffectResult(margin, alpha, control_band, threshold, out, overall)
