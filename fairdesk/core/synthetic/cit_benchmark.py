"""The 004 Fig. 2 study, run honestly: does a test's log10 p track the expected counterfactual accuracy (ECA)?

For each synthetic dataset (:mod:`fairdesk.core.synthetic.scm`) the benchmark trains base classifiers — the 10
scikit-learn model types of 004 App. G.1 Table 1 × seeds — on X, and oracle classifiers that read the root ``Z_n``
(the Bayes rule ``1[f_Y(Z_n) > 0]`` and the same model types trained on ``Z_n``; invariant by construction,
ECA = 1). Per classifier it records, on an audit sample with ``Z = Z_n``:

* ``eca`` — mean(f(x) == f(x_cf)) over a separate sample of units and their TRUE counterfactuals;
* ``rms_gap`` — √E[(g(1, Z) − g(0, Z))²] with g(a, z) = E[Ŷ | do(A = a), Z_n = z] computed by Monte Carlo over
  the SCM's noise: the population quantity the conditional tests target (ECA also counts flips that only re-map
  noise, which no test conditioning on Z can see);
* ``cit_p`` — the published CIT-LR (004 Alg. 1: regressors fitted on one half, paired t-test on the other) with
  the release's MLP regressors;
* ``cit_cf_p`` — the same statistic, 5-fold cross-fitted with FairDesk's logistic regressors;
* ``wgcm_p`` — FairDesk's default test, the sequentially fitted weighted GCM (:func:`fairdesk.core.audits.cit.gcm_test`),
  and four alternatives: ``wgcm_alone_p`` (its weighted statistic without the plain-GCM combination),
  ``wgcm_bonf_p`` (Bonferroni instead of the joint-normal combination; both read off the same fit),
  ``wgcm_pergroup_p`` (the weight as one model per group instead of the default's shared-baseline effect model)
  and ``wgcm_logistic_p`` (logistic nuisances throughout);
* ``gcm_p`` — the unweighted GCM;
* ``dp_p`` / ``eo_p`` — Welch t-tests of f(X) between groups (EO within Y = 1).

Per dataset and variant: Spearman correlations of log10 p with ECA (and with ``rms_gap``) per test
(``scipy.stats.spearmanr``), power on base classifiers with ECA below :attr:`BenchmarkConfig.eca_threshold`, and the
false-positive rate on the oracles. The confounded variant (``Z_n ~ N(δ·A·1, I)``) repeats this with A and Y
associated through the legitimate root path, where DP fails the oracles and a counterfactual test should not.

Entry point: :func:`run_cit_benchmark` ``(config, progress, cancel) -> BenchmarkResult`` (``to_json()``,
``plot(path)``). scipy, sklearn and matplotlib are imported inside functions.
"""
from __future__ import annotations

import json
import math
import time
import warnings
import zlib
from dataclasses import asdict, dataclass, field

import numpy as np

from fairdesk.core import provenance as _prov
from fairdesk.core.audits import cit
from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.synthetic.scm import DATASETS, SyntheticSCM, expected_counterfactual_accuracy

#: 004 App. G.1 Table 1, in its order.
MODEL_TYPES: tuple[str, ...] = ("linear_svc", "svc_rbf", "svc_poly", "logistic", "tree", "random_forest",
                                "gradient_boosting", "tree_depth5", "mlp_16_8_4", "mlp_16_4")
TESTS: tuple[str, ...] = ("cit_p", "cit_cf_p", "wgcm_p", "wgcm_alone_p", "wgcm_bonf_p", "wgcm_pergroup_p",
                          "wgcm_logistic_p", "gcm_p", "dp_p", "eo_p")
TEST_LABELS = {
    "cit_p": "CIT-LR (published; release MLPs, split)",
    "cit_cf_p": "CIT-LR (cross-fitted, logistic)",
    "wgcm_p": "weighted GCM (FairDesk default)",
    "wgcm_alone_p": "weighted GCM alone (default without the plain-GCM combination)",
    "wgcm_bonf_p": "weighted GCM, Bonferroni with the plain GCM",
    "wgcm_pergroup_p": "weighted GCM with one weight model per group (the earlier default)",
    "wgcm_logistic_p": "weighted GCM with logistic nuisances",
    "gcm_p": "GCM (unweighted)",
    "dp_p": "demographic parity (Welch)",
    "eo_p": "equal opportunity (Welch, Y=1)",
}
P_FLOOR = 1e-300  # log10 of p = 0 is reported as -300


def make_classifier(kind: str, seed: int, standardize: bool = True):
    """One base classifier of 004 Table 1 (scikit-learn 1.9 spelling), optionally behind a StandardScaler.

    ``max_features='auto'`` of Table 1 is spelled ``'sqrt'`` (what 'auto' meant for classifiers).
    """
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    s = int(seed)
    models = {
        "linear_svc": lambda: LinearSVC(C=1.0, loss="squared_hinge", dual=True, tol=1e-4, max_iter=2000,
                                        random_state=s),
        "svc_rbf": lambda: SVC(C=1.0, kernel="rbf", gamma="scale", random_state=s),
        "svc_poly": lambda: SVC(C=1.0, kernel="poly", degree=3, gamma="scale", random_state=s),
        "logistic": lambda: LogisticRegression(C=1.0, solver="lbfgs", max_iter=100, random_state=s),
        "tree": lambda: DecisionTreeClassifier(criterion="gini", splitter="best", max_depth=None, random_state=s),
        "random_forest": lambda: RandomForestClassifier(n_estimators=50, criterion="gini", max_features="sqrt",
                                                        n_jobs=1, random_state=s),
        "gradient_boosting": lambda: GradientBoostingClassifier(n_estimators=100, learning_rate=0.1, max_depth=3,
                                                                random_state=s),
        "tree_depth5": lambda: DecisionTreeClassifier(criterion="gini", splitter="best", max_depth=5,
                                                      random_state=s),
        "mlp_16_8_4": lambda: MLPClassifier(hidden_layer_sizes=(16, 8, 4), activation="relu", solver="adam",
                                            max_iter=500, random_state=s),
        "mlp_16_4": lambda: MLPClassifier(hidden_layer_sizes=(16, 4), activation="relu", solver="adam",
                                          max_iter=500, random_state=s),
    }
    if kind not in models:
        raise DataError(f"Unknown model type '{kind}'; choose from {', '.join(MODEL_TYPES)}.")
    model = models[kind]()
    return make_pipeline(StandardScaler(), model) if standardize else model


@dataclass
class BenchmarkConfig:
    datasets: tuple[str, ...] = DATASETS
    n_classifiers: int = 100          # base classifiers per dataset: model types cycled, seeds 0, 1, …
    model_types: tuple[str, ...] = MODEL_TYPES
    seed: int = 0
    n_train: int = 1000               # per classifier seed: a fresh training sample from the same SCM
    n_audit: int = 2000               # the sample every test sees (Ŷ, A, Z_n; Y for EO)
    n_eca: int = 4000                 # units (and their exact counterfactuals) for the ECA ground truth
    gap_units: int = 400              # Monte Carlo for rms_gap: root values × noise replicates per value of A
    gap_reps: int = 16
    n_folds: int = 5
    alpha: float = 0.05
    eca_threshold: float = 0.8
    regressor: str = cit.DEFAULT_REGRESSOR   # the default test's (and the plain GCM's) nuisance regressors
    crossfit_regressor: str = "logistic"     # cit_cf_p: the published statistic, cross-fitted, logistic
    release_regressor: str = "mlp_release"
    standardize: bool = True
    oracle_types: tuple[str, ...] = ("bayes",) + MODEL_TYPES
    confounded: bool = True
    confounded_delta: float = 0.25
    n_confounded_classifiers: int = 10
    k: int = 32
    n_steps: int = 3
    sigma: float = 0.01

    def __post_init__(self) -> None:
        self.datasets = tuple(self.datasets)
        self.model_types = tuple(self.model_types)
        self.oracle_types = tuple(self.oracle_types)
        bad = [d for d in self.datasets if d not in DATASETS]
        if bad:
            raise DataError(f"Unknown synthetic dataset(s) {bad}; choose from {', '.join(DATASETS)} or 'all'.")
        bad = [m for m in self.model_types + self.oracle_types if m not in MODEL_TYPES + ("bayes",)]
        if bad:
            raise DataError(f"Unknown model type(s) {bad}; choose from {', '.join(MODEL_TYPES)}.")
        if self.n_classifiers < 0 or self.n_confounded_classifiers < 0:
            raise DataError("The number of classifiers must be ≥ 0.")
        if self.n_audit < 10 * self.n_folds:
            raise DataError(f"The audit sample needs at least {10 * self.n_folds} units.")

    def to_dict(self) -> dict:
        return asdict(self)


def _key(*parts) -> list[int]:
    return [zlib.crc32(str(p).encode("utf-8")) for p in parts]


def _log10p(p: float) -> float:
    if p is None or not math.isfinite(p):
        return float("nan")
    return math.log10(max(p, P_FLOOR))


# ==============================================================================================================
# The nuisance scenarios (size and power of the default test, and `bench validity`)


def nuisance_scenario(n: int, seed: int, h_nonlinear: bool = False, m_nonlinear: bool = False, beta: float = 0.0,
                      d: int = 4, effect: str = "constant") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ŷ, a, z) with Z ~ N(0, I_d) and

    * P(A = 1 | Z) = sigmoid(0.8·z₀ − 0.8) (linear) or sigmoid(1.2·(z₀² − 1) − 0.8) (non-linear: A is likelier
      at both ends of z₀, so a logistic fit of it is flat);
    * logit P(Ŷ = 1 | A, Z) = 1.5·z₀ − z₁ (linear) or 1.5·(z₀² − 1) + sin(2·z₁) (non-linear: shares z₀² with the
      propensity, so misspecified fits of both err in the same direction) — plus ``beta``·A
      (``effect="constant"``) or ``beta``·(2A − 1)·z₂ (``effect="sign-changing"``: A raises Ŷ for z₂ > 0 and lowers
      it for z₂ < 0, so the average effect is 0 and only a weighted test sees it).

    With ``beta = 0``, Ŷ ⟂ A | Z holds although A and Ŷ are associated through z₀ (DP would flag it); with both
    nuisances non-linear the first default (logistic nuisances) rejected in 100 % of runs."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, d))
    lm = 1.2 * (z[:, 0] ** 2 - 1) - 0.8 if m_nonlinear else 0.8 * z[:, 0] - 0.8
    a = (rng.random(n) < 1.0 / (1.0 + np.exp(-lm))).astype(int)
    lh = 1.5 * (z[:, 0] ** 2 - 1) + np.sin(2 * z[:, 1]) if h_nonlinear else 1.5 * z[:, 0] - z[:, 1]
    if effect == "constant":
        lh = lh + beta * a
    elif effect == "sign-changing":
        lh = lh + beta * (2 * a - 1) * z[:, 2]
    else:
        raise DataError("The effect of A must be 'constant' or 'sign-changing'.")
    yhat = (rng.random(n) < 1.0 / (1.0 + np.exp(-lh))).astype(int)
    return yhat, a, z


#: Shapes of one coordinate that the drawn designs (:func:`draw_cit_design`) use for the propensity and the
#: classifier's mean: monotone, even (U-shaped), periodic and a step — a logistic fit is right only for the first.
CIT_SHAPES: tuple[str, ...] = ("linear", "square", "abs", "sin", "step")
#: How A enters a planted classifier's latent score: a constant shift, an even sign-changing effect
#: A·(z₁² − 1) and an odd one (2A − 1)·z₂ — the last two average to 0 over Z.
CIT_EFFECTS: tuple[str, ...] = ("constant", "even", "odd")


def _shape(kind: str, x: np.ndarray) -> np.ndarray:
    if kind == "linear":
        return x
    if kind == "square":
        return x * x - 1.0
    if kind == "abs":
        return np.abs(x) - 0.8
    if kind == "sin":
        return np.sin(2.0 * x)
    if kind == "step":
        return np.where(x > 0, 1.0, -1.0)
    raise DataError(f"Unknown shape '{kind}'.")


def draw_cit_design(rng: np.random.Generator) -> dict:
    """One design of the drawn CIT space (``bench validity --family cit``): Z ~ N(0, I_d), d ∈ 3…6; the
    propensity logit ``s_m·φ_m(z₀) + c_m`` and the classifier's latent mean ``s_h·φ_h(z₀) + t·sin(2z₁)`` share z₀
    (so misfits of both nuisances err together), φ from :data:`CIT_SHAPES`; heteroscedastic noise
    ``σ(z) = exp(γ·z_k)`` (k = 0 or 1) on the latent, logistic or normal; the output hard (latent > 0) or a soft
    score (sigmoid of the latent)."""
    return {"d": int(rng.integers(3, 7)),
            "m_shape": str(rng.choice(CIT_SHAPES)), "m_scale": float(rng.uniform(0.6, 1.5)),
            "m_shift": float(rng.uniform(-1.0, 0.3)),
            "h_shape": str(rng.choice(CIT_SHAPES)), "h_scale": float(rng.uniform(0.8, 2.0)),
            "h_other": float(rng.uniform(0.0, 1.0)),
            "noise_coord": int(rng.integers(0, 2)), "noise_gamma": float(rng.uniform(0.0, 0.8)),
            "noise": str(rng.choice(("logistic", "normal"))), "output": str(rng.choice(("hard", "soft")))}


def cit_design_data(design: dict, n: int, seed: int, beta: float = 0.0,
                    effect: str = "constant") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ŷ, a, z) of a drawn design (:func:`draw_cit_design`); ``beta`` of A planted as ``effect``
    (:data:`CIT_EFFECTS`) on the latent score. With ``beta = 0`` Ŷ ⟂ A | Z."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, design["d"]))
    lm = design["m_scale"] * _shape(design["m_shape"], z[:, 0]) + design["m_shift"]
    a = (rng.random(n) < 1.0 / (1.0 + np.exp(-lm))).astype(int)
    mean = design["h_scale"] * _shape(design["h_shape"], z[:, 0]) + design["h_other"] * np.sin(2 * z[:, 1])
    if effect == "constant":
        mean = mean + beta * a
    elif effect == "even":
        mean = mean + beta * a * (z[:, 1] ** 2 - 1.0)
    elif effect == "odd":
        mean = mean + beta * (2 * a - 1) * z[:, 2]
    else:
        raise DataError(f"The effect of A must be one of {', '.join(CIT_EFFECTS)}.")
    sd = np.exp(design["noise_gamma"] * z[:, design["noise_coord"]])
    u = rng.random(n)
    eps = np.log(u) - np.log1p(-u) if design["noise"] == "logistic" else rng.standard_normal(n) * 1.7
    latent = mean + sd * eps
    yhat = (latent > 0).astype(int) if design["output"] == "hard" else 1.0 / (1.0 + np.exp(-latent))
    return yhat, a, z


def cit_design_truth(design: dict, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact nuisances of a drawn design (:func:`draw_cit_design`) at rows ``z`` under the null (β = 0):
    (E[Ŷ|Z], P(A = 1|Z)). With the latent μ(z) + σ(z)·ε: a hard output is 1 when ε > −μ/σ, so
    E[Ŷ|Z] = F(μ/σ) with F the logistic CDF or Φ(·/1.7); a soft output's mean E[sigmoid(μ + σε)] is the average
    over 400 mid-point quantiles of ε (error < 1e-4)."""
    from scipy.stats import norm

    z = np.asarray(z, dtype=float)
    lm = design["m_scale"] * _shape(design["m_shape"], z[:, 0]) + design["m_shift"]
    m = 1.0 / (1.0 + np.exp(-lm))
    mu = design["h_scale"] * _shape(design["h_shape"], z[:, 0]) + design["h_other"] * np.sin(2 * z[:, 1])
    sd = np.exp(design["noise_gamma"] * z[:, design["noise_coord"]])
    logistic = design["noise"] == "logistic"
    if design["output"] == "hard":
        h = 1.0 / (1.0 + np.exp(-mu / sd)) if logistic else norm.cdf(mu / (1.7 * sd))
    else:
        u = (np.arange(400) + 0.5) / 400
        eps = np.log(u) - np.log1p(-u) if logistic else 1.7 * norm.ppf(u)
        h = np.empty(len(mu))
        for start in range(0, len(mu), 2048):   # rows in blocks: a 400-column temporary per block
            sl = slice(start, start + 2048)
            h[sl] = (1.0 / (1.0 + np.exp(-(mu[sl, None] + sd[sl, None] * eps[None, :])))).mean(axis=1)
    return h, m


# ==============================================================================================================
# Result


@dataclass
class BenchmarkResult:
    config: BenchmarkConfig
    records: list[dict]
    summary: list[dict]
    provenance: dict
    elapsed_s: float
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return jsonable({"config": self.config.to_dict(), "tests": TEST_LABELS, "default_test": "wgcm_p",
                           "summary": self.summary, "classifiers": self.records, "provenance": self.provenance,
                           "elapsed_s": self.elapsed_s, "warnings": self.warnings})

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def table(self):
        import pandas as pd

        return pd.DataFrame.from_records(self.records)

    def plot(self, path, tests: tuple[str, ...] = ("cit_p", "wgcm_p", "dp_p", "eo_p"),
             variant: str = "paper", x: str = "eca") -> str:
        """log10 p against ECA (or ``x="rms_gap"``) per test (rows) and dataset (columns), with the p = α line;
        PNG (matplotlib Agg)."""
        if x not in ("eca", "rms_gap"):
            raise DataError("Plot log10 p against 'eca' or 'rms_gap'.")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        recs = [r for r in self.records if r["variant"] == variant]
        datasets = [d for d in self.config.datasets if any(r["dataset"] == d for r in recs)]
        if not datasets:
            raise DataError(f"No records for variant '{variant}' to plot.")
        fig, axes = plt.subplots(len(tests), len(datasets), figsize=(2.6 * len(datasets) + 0.6, 2.2 * len(tests)),
                                 squeeze=False, sharex=True)
        for j, ds in enumerate(datasets):
            summ = next((s for s in self.summary if s["dataset"] == ds and s["variant"] == variant), {})
            for i, test in enumerate(tests):
                ax = axes[i][j]
                for role, marker, colour in (("base", "o", "tab:blue"), ("oracle", "^", "tab:orange")):
                    pts = [(r[x], _log10p(r[test])) for r in recs
                           if r["dataset"] == ds and r["role"] == role and r.get(test) is not None]
                    if pts:
                        xs, ys = zip(*pts)
                        ax.scatter(xs, np.maximum(ys, -30), s=10, marker=marker, c=colour, alpha=0.7, label=role)
                ax.axhline(math.log10(self.config.alpha), color="red", ls="--", lw=0.8)
                rho = summ.get("spearman_eca" if x == "eca" else "spearman_gap", {}).get(test)
                ax.set_title(f"{ds}\nρ = {rho:.2f}" if (i == 0 and rho is not None) else
                             (f"ρ = {rho:.2f}" if rho is not None else ds if i == 0 else ""), fontsize=8)
                if j == 0:
                    ax.set_ylabel(f"log10 p\n{TEST_LABELS[test]}", fontsize=7)
                if i == len(tests) - 1:
                    ax.set_xlabel("ECA" if x == "eca" else "√E[(g(1,Z) − g(0,Z))²]", fontsize=8)
                ax.tick_params(labelsize=7)
        axes[0][0].legend(fontsize=6, loc="lower right")
        fig.suptitle(f"log10 p vs {'ECA' if x == 'eca' else 'interventional gap'} ({variant} variant; p clipped "
                     f"at 1e-30 for display; red: p = {self.config.alpha:g}"
                     f"{'' if x == 'eca' else '; ρ is Spearman with −gap'})", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return str(path)


# ==============================================================================================================
# One classifier


def _interventional_means(scm: SyntheticSCM, predict, z_root: np.ndarray, reps: int, rng) -> tuple[list, list]:
    """Per root value and a ∈ {0, 1}: the Monte Carlo mean of f(X) under do(A = a) over ``reps`` noise draws
    (≈ g(a, z)), and the variance of that mean."""
    zr = np.repeat(z_root, reps, axis=0)
    means, variances = [], []
    for a in (0, 1):
        xi = rng.normal(0.0, scm.sigma, size=(scm.n_steps, len(zr), scm.k))
        eps = rng.normal(0.0, scm.sigma, size=(len(zr), scm.k))
        _, x = scm._propagate(np.full(len(zr), a), zr, xi, eps)
        pred = np.asarray(predict(x), float).reshape(len(z_root), reps)
        means.append(pred.mean(axis=1))
        variances.append(pred.var(axis=1, ddof=1) / reps)
    return means, variances


def _rms_gap(scm: SyntheticSCM, predict, units: int, reps: int, seed) -> float:
    """√E_Z[(g(1, Z) − g(0, Z))²], g(a, z) = P(f(X) = 1 | do(A = a), Z_n = z), by Monte Carlo over the noise,
    with the within-z sampling variance subtracted (unbiased for the squared gap)."""
    rng = np.random.default_rng(seed)
    means, variances = _interventional_means(scm, predict, scm.sample(units, rng).z_root, reps, rng)
    sq = (means[1] - means[0]) ** 2 - variances[0] - variances[1]
    return float(math.sqrt(max(float(sq.mean()), 0.0)))


def _evaluate(scm, variant, role, kind, seed_idx, predict, uses_root, audit, eca_units, eca_cf, folds, m_hat,
              split, cfg: BenchmarkConfig) -> dict:
    inp = (lambda s: s.z_root) if uses_root else (lambda s: s.x)
    yhat = np.asarray(predict(inp(audit)), float)
    pred_units = predict(inp(eca_units))
    pred_cf = predict(inp(eca_cf))
    eca = expected_counterfactual_accuracy(pred_units, pred_cf)
    rec = {"dataset": scm.f_y_name, "variant": variant, "role": role, "model_type": kind, "seed": seed_idx,
           "input": "z_root" if uses_root else "x", "accuracy": float(np.mean(yhat == audit.y)),
           "positive_rate": float(yhat.mean()), "eca": eca}
    rec["rms_gap"] = 0.0 if uses_root else _rms_gap(scm, lambda x: predict(x), cfg.gap_units, cfg.gap_reps,
                                                    _key(cfg.seed, scm.f_y_name, variant, "gap"))
    z, a = audit.z_root, audit.a
    r = cit.cit_test(yhat, a, z, "cit_lr_split", cfg.release_regressor, seed=cfg.seed, split=split)
    rec["cit_t"], rec["cit_p"] = r.statistic, r.p_value
    r = cit.cit_lr_test(yhat, a, z, cfg.crossfit_regressor, cfg.n_folds, cfg.seed)
    rec["cit_cf_t"], rec["cit_cf_p"] = r.statistic, r.p_value
    r = cit.gcm_test(yhat, a, z, True, cfg.regressor, seed=cfg.seed, m_hat=m_hat, folds=folds)
    rec["wgcm_t"], rec["wgcm_p"] = r.statistic, r.p_value
    rec["wgcm_fit"] = {k: {f: v[f] for f in ("skill", "calibration_slope", "calibration_in_the_large", "ok")}
                       for k, v in r.details["nuisance_fit"].items()}
    rec["wgcm_regressors"] = {k: sorted(set(v or [])) for k, v in r.details["regressors_chosen"].items()}
    comb = r.details["combined_with_plain_gcm"]
    rec["wgcm_alone_p"] = comb["p_weighted"]
    rec["wgcm_bonf_p"] = min(1.0, 2.0 * min(comb["p_weighted"], comb["p_plain"]))
    rec["wgcm_pergroup_p"] = cit.gcm_test(yhat, a, z, True, cfg.regressor, seed=cfg.seed, m_hat=m_hat, folds=folds,
                                          weight="difference").p_value
    r = cit.gcm_test(yhat, a, z, True, "logistic", seed=cfg.seed, folds=folds)
    rec["wgcm_logistic_p"] = r.p_value
    r = cit.gcm_test(yhat, a, z, False, cfg.regressor, seed=cfg.seed, m_hat=m_hat, folds=folds)
    rec["gcm_t"], rec["gcm_p"] = r.statistic, r.p_value
    rec["dp_t"], rec["dp_p"] = cit.dp_test(yhat, a)
    rec["eo_t"], rec["eo_p"] = cit.eo_test(yhat, a, audit.y)
    return rec


# ==============================================================================================================
# Summaries


def summarise(records: list[dict], cfg: BenchmarkConfig) -> list[dict]:
    """Per (dataset, variant): Spearman of log10 p with ECA and with rms_gap, power on low-ECA base classifiers,
    false-positive rate on oracles, per test."""
    from scipy.stats import spearmanr

    out = []
    keys = sorted({(r["dataset"], r["variant"]) for r in records},
                  key=lambda k: (DATASETS.index(k[0]), k[1] != "paper"))
    for ds, variant in keys:
        recs = [r for r in records if r["dataset"] == ds and r["variant"] == variant]
        base = [r for r in recs if r["role"] == "base"]
        oracles = [r for r in recs if r["role"] == "oracle"]
        low = [r for r in base if r["eca"] < cfg.eca_threshold]
        s = {"dataset": ds, "variant": variant, "n_base": len(base), "n_oracles": len(oracles),
             "n_low_eca": len(low), "eca_min": min((r["eca"] for r in base), default=None),
             "eca_median": float(np.median([r["eca"] for r in base])) if base else None,
             "n_constant": sum(1 for r in base if r["positive_rate"] in (0.0, 1.0)),
             "spearman_eca": {}, "spearman_eca_p": {}, "spearman_gap": {}, "power_low_eca": {},
             "rejections_low_eca": {}, "fpr_oracles": {}, "rejections_oracles": {}}
        for test in TESTS:
            pts = [(r["eca"], _log10p(r[test]), r["rms_gap"]) for r in base
                   if r.get(test) is not None and math.isfinite(r[test])]
            if len(pts) >= 3:
                eca, lp, gap = (np.array(v) for v in zip(*pts))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # constant input → NaN, reported as null
                    rho = spearmanr(lp, eca)
                    rho_gap = spearmanr(lp, -gap)
                s["spearman_eca"][test] = float(rho.statistic)
                s["spearman_eca_p"][test] = float(rho.pvalue)
                s["spearman_gap"][test] = float(rho_gap.statistic)
            else:
                s["spearman_eca"][test] = s["spearman_eca_p"][test] = s["spearman_gap"][test] = None
            rej = [r[test] < cfg.alpha for r in low if r.get(test) is not None and math.isfinite(r[test])]
            s["rejections_low_eca"][test] = int(sum(rej))
            s["power_low_eca"][test] = float(np.mean(rej)) if rej else None
            rej = [r[test] < cfg.alpha for r in oracles if r.get(test) is not None and math.isfinite(r[test])]
            s["rejections_oracles"][test] = int(sum(rej))
            s["fpr_oracles"][test] = float(np.mean(rej)) if rej else None
        out.append(s)
    # pooled over datasets, per variant
    for variant in sorted({r["variant"] for r in records}, key=lambda v: v != "paper"):
        recs = [r for r in records if r["variant"] == variant]
        low = [r for r in recs if r["role"] == "base" and r["eca"] < cfg.eca_threshold]
        oracles = [r for r in recs if r["role"] == "oracle"]
        s = {"dataset": "all", "variant": variant, "n_base": sum(r["role"] == "base" for r in recs),
             "n_oracles": len(oracles), "n_low_eca": len(low), "power_low_eca": {}, "rejections_low_eca": {},
             "fpr_oracles": {}, "rejections_oracles": {}}
        for test in TESTS:
            rej = [r[test] < cfg.alpha for r in low if r.get(test) is not None and math.isfinite(r[test])]
            s["rejections_low_eca"][test] = int(sum(rej))
            s["power_low_eca"][test] = float(np.mean(rej)) if rej else None
            rej = [r[test] < cfg.alpha for r in oracles if r.get(test) is not None and math.isfinite(r[test])]
            s["rejections_oracles"][test] = int(sum(rej))
            s["fpr_oracles"][test] = float(np.mean(rej)) if rej else None
        out.append(s)
    return out


# ==============================================================================================================
# Driver


def _plan(cfg: BenchmarkConfig) -> list[tuple]:
    """(dataset, variant, role, kind, seed index) in run order."""
    jobs = []
    variants = [("paper", 0.0, cfg.n_classifiers)]
    if cfg.confounded and cfg.confounded_delta:
        variants.append(("confounded", cfg.confounded_delta, cfg.n_confounded_classifiers))
    types = cfg.model_types
    for ds in cfg.datasets:
        for variant, _, n_base in variants:
            for i in range(n_base):
                jobs.append((ds, variant, "base", types[i % len(types)], i // len(types)))
            for kind in cfg.oracle_types:
                jobs.append((ds, variant, "oracle", kind, 0))
    return jobs


def _context(cfg: BenchmarkConfig, ds: str, variant: str) -> tuple:
    """What every classifier of a (dataset, variant) shares: (scm, audit sample, ECA units, their counterfactuals,
    folds, cross-fitted m̂, the published test's split)."""
    delta = cfg.confounded_delta if variant == "confounded" else 0.0
    scm = SyntheticSCM(ds, k=cfg.k, n_steps=cfg.n_steps, sigma=cfg.sigma, delta=delta, seed=cfg.seed)
    audit = scm.sample(cfg.n_audit, np.random.default_rng(_key(cfg.seed, ds, variant, "audit")))
    units = scm.sample(cfg.n_eca, np.random.default_rng(_key(cfg.seed, ds, variant, "eca")))
    folds = cit.make_folds(audit.a, cfg.n_folds, cfg.seed)
    # the default scheme ("sequential-weight") and the plain GCM both cross-fit m̂ over all other folds
    m_hat = cit.crossfit_propensity(audit.a, audit.z_root, folds, cfg.regressor, cfg.seed, "crossfit")
    perm = np.random.default_rng(_key(cfg.seed, ds, variant, "split")).permutation(cfg.n_audit)
    split = (perm[: cfg.n_audit // 2], perm[cfg.n_audit // 2:])
    return scm, audit, units, scm.counterfactual(units), folds, m_hat, split


def _fit(cfg: BenchmarkConfig, scm, job: tuple, notes: list[str]):
    """(predict, uses_root) of one planned classifier, trained on its seed's own sample (keyed by dataset,
    variant and seed index, so every model type of a seed sees the same rows)."""
    ds, variant, role, kind, seed_idx = job
    if kind == "bayes":
        return scm.bayes_predict, True
    uses_root = role == "oracle"
    train = scm.sample(cfg.n_train, np.random.default_rng(_key(cfg.seed, ds, variant, "train", seed_idx)))
    xtr = train.z_root if uses_root else train.x
    if np.unique(train.y).size < 2:
        const = int(train.y[0])
        notes.append(f"{ds}/{variant}: training labels of seed {seed_idx} are all {const}; {kind} predicts a "
                     "constant.")
        return (lambda x, c=const: np.full(np.asarray(x).shape[0], c)), uses_root
    return make_classifier(kind, seed_idx, cfg.standardize).fit(xtr, train.y).predict, uses_root


class _quiet_fits:
    """One BLAS thread and no convergence chatter while the many small fits run (in a task, on any worker)."""

    def __enter__(self):
        from sklearn.exceptions import ConvergenceWarning

        self._threads, self._warnings = cit._single_thread(), warnings.catch_warnings()
        self._threads.__enter__()
        self._warnings.__enter__()
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", message=".*max_iter.*")
        return self

    def __exit__(self, *exc):
        self._warnings.__exit__(*exc)
        return self._threads.__exit__(*exc)


def _classifiers(cfg: BenchmarkConfig, notes: list[str], rep: Reporter):
    """Yield (job, predict, uses_root, context) per planned classifier, in :func:`_plan` order."""
    jobs = _plan(cfg)
    contexts: dict = {}
    for j, job in enumerate(jobs):
        rep(j / max(len(jobs), 1), f"{job[0]} ({job[1]}): {job[2]} {job[3]} seed {job[4]}")
        if (job[0], job[1]) not in contexts:
            contexts = {(job[0], job[1]): _context(cfg, job[0], job[1])}
        ctx = contexts[(job[0], job[1])]
        predict, uses_root = _fit(cfg, ctx[0], job, notes)
        yield job, predict, uses_root, ctx


def context_task(key: tuple, cfg: BenchmarkConfig, rep: Reporter) -> tuple:  # noqa: ARG001
    """A task of the executor: the shared context of one (dataset, variant)."""
    with _quiet_fits():
        return _context(cfg, *key)


def classifier_task(job: tuple, shared: tuple, rep: Reporter) -> tuple[dict, list[str]]:  # noqa: ARG001
    """A task of the executor: train one planned classifier and run every test on it; (record, notes)."""
    cfg, ctx = shared
    scm, audit, units, units_cf, folds, m_hat, split = ctx
    notes: list[str] = []
    with _quiet_fits():
        predict, uses_root = _fit(cfg, scm, job, notes)
        ds, variant, role, kind, seed_idx = job
        return _evaluate(scm, variant, role, kind, seed_idx, predict, uses_root, audit, units, units_cf, folds,
                         m_hat, split, cfg), notes


def classifier_outputs(config: BenchmarkConfig | None = None, progress: ProgressFn | None = None,
                       cancel: CancelToken | None = None, effect_reps: int = 0) -> list[dict]:
    """The study's classifiers without the tests: per classifier its dataset, variant, role, model type, seed, ECA
    and its hard predictions ``yhat`` on the audit sample with that sample's ``a`` and ``z`` (= Z_n). For comparing
    tests on the same classifiers (``benchmarks/bench_cit_default.py``) and for the fixed-seed regression guard.
    ``effect_reps`` > 0 adds ``effect``: the true g(1, z) − g(0, z) at each audit unit's root, by Monte Carlo over
    that many noise draws per value of A (0 for the oracles, which read Z_n) — the best weight a weighted test of
    the audit sample could have."""
    cfg = config or BenchmarkConfig()
    rep = Reporter(progress, cancel)
    out: list[dict] = []
    with _quiet_fits():
        for (ds, variant, role, kind, seed_idx), predict, uses_root, ctx in _classifiers(cfg, [], rep):
            _, audit, units, units_cf, *_ = ctx
            inp = (lambda s: s.z_root) if uses_root else (lambda s: s.x)
            out.append({"dataset": ds, "variant": variant, "role": role, "model_type": kind, "seed": seed_idx,
                        "eca": expected_counterfactual_accuracy(predict(inp(units)), predict(inp(units_cf))),
                        "yhat": np.asarray(predict(inp(audit)), float), "a": audit.a, "z": audit.z_root})
            if effect_reps:
                rng = np.random.default_rng(_key(cfg.seed, ds, variant, "effect", kind, seed_idx))
                means, _ = _interventional_means(ctx[0], predict, audit.z_root, effect_reps, rng)
                out[-1]["effect"] = np.zeros(len(audit.a)) if uses_root else means[1] - means[0]
    return out


def run_cit_benchmark(config: BenchmarkConfig | None = None, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None, executor=None) -> BenchmarkResult:
    """Run the study. Deterministic from ``config.seed``; progress per classifier; cancel between classifiers.

    ``executor`` (:mod:`fairdesk.core.executor`): each (dataset, variant)'s shared context is one task, then each
    classifier (trained on its own keyed sample, then tested) is one; the records are the same on any executor."""
    from fairdesk.core.executor import open_executor

    cfg = config or BenchmarkConfig()
    rep = Reporter(progress, cancel)
    t0 = time.monotonic()
    records: list[dict] = []
    notes: list[str] = []
    jobs = _plan(cfg)
    keys = list(dict.fromkeys((j[0], j[1]) for j in jobs))
    with open_executor(executor) as ex:
        contexts = ex.map(context_task, keys, rep.sub(0.0, 0.05), lambda k: f"{k[0]} ({k[1]}): audit sample and "
                          "cross-fitted propensity", shared=cfg)
        start = 0
        for key, ctx in zip(keys, contexts):
            mine = [j for j in jobs if (j[0], j[1]) == key]
            sub = rep.sub(0.05 + 0.95 * start / len(jobs), 0.05 + 0.95 * (start + len(mine)) / len(jobs))
            start += len(mine)
            for rec, said in ex.map(classifier_task, mine, sub, lambda j: f"{j[0]} ({j[1]}): {j[2]} {j[3]} seed "
                                    f"{j[4]}", shared=(cfg, ctx)):
                records.append(rec)
                notes += said
        executor_record = ex.provenance()
    rep(1.0, "summarising")
    summary = summarise(records, cfg)
    prov = _prov.make(cfg.seed, None, study="cit-synthetic", default_test="wgcm_p", executor=executor_record)
    return BenchmarkResult(cfg, records, summary, prov, time.monotonic() - t0, sorted(set(notes)))
