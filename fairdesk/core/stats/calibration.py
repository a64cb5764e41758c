"""Calibration and discrimination of a probability score in one group (METHODS §8).

With ``l = logit(s)``:

* **calibration intercept** (calibration-in-the-large) ``a`` in ``logit P(y=1) = a + l`` — logistic regression with
  offset ``l`` and no slope;
* **calibration slope** ``b`` in ``logit P(y=1) = a' + b·l``;
* **O/E** ``mean(y) / mean(s)``; **Brier** ``mean((s − y)²)``; **ECE** ``Σ_bins (n_bin/n)·|mean(y) − mean(s)|`` over
  10 equal-width bins of ``s`` (rows weight the bins);
* **joint test** of "calibrated" (``a' = 0`` and ``b = 1``): likelihood ratio ``2·[ℓ(â', b̂) − ℓ(0, 1)]`` against
  χ² with 2 df (an exact-form p from the χ² law, not a Monte-Carlo share, so it is not floored);
* **standard errors** of every number by influence functions (:func:`influence`, :func:`variances`): the
  delta-method variance of the empirical distribution, i.e. the normal limit of the row (or whole-patient) bootstrap,
  in closed form; the intercept's and O/E's intervals invert the robust score test instead (:func:`score_interval`:
  the same sandwich, evaluated at each candidate value);
* **reliability curve**: 10 equal-width bins, observed share with a Clopper–Pearson interval and n per bin, and an
  isotonic (PAV) recalibration curve as the smoothed curve;
* **ROC and precision–recall** points (sklearn's definitions) with the operating point at the audit's threshold.

Everything is computed from one sort of the group (:func:`..discrimination.ranked`: the distinct scores with the
positive and negative rows at each), as weighted sums over the distinct (label, score) cells.

Scores are clipped to ``[EPS, 1 − EPS]`` before the logit (a score of exactly 0 or 1 has an infinite logit); only the
logit-scale fits see the clipped values, O/E, Brier and ECE use the scores as given.

Why the fits are written here: statsmodels (whose GLM takes an offset) is not a FairDesk dependency, and
sklearn's LogisticRegression has no offset, so the intercept-with-offset model cannot be fitted with it. The fits are
a few lines of Newton–Raphson on the (concave) binomial log-likelihood over the distinct (label, score) cells, each
weighted by its rows.
"""
from __future__ import annotations

import math

import numpy as np

from fairdesk.core.errors import DataError

EPS = 1e-6  # scores are clipped to [EPS, 1 − EPS] for the logit
N_BINS = 10  # equal-width bins of the ECE and the reliability curve
MAX_POINTS = 200  # ROC / PR / smoothed curves are downsampled to at most this many points
_MAX_ITER = 60
_MAX_STEP = 5.0  # Newton steps are capped (logit scale) so that a poor start cannot overshoot into overflow
_SEPARATION = 50.0  # a fitted |coefficient| beyond this means (quasi-)separation: the fit is reported as failed
ECE_EDGES = np.arange(1, N_BINS) / N_BINS  # inner edges of the equal-width bins; a bin is [lower, upper)


def ece_bin(s) -> np.ndarray:
    """Equal-width bin of each score, 0 … N_BINS − 1 (a score of exactly 1 falls in the last bin)."""
    return np.searchsorted(ECE_EDGES, np.asarray(s, dtype=float), side="right")


def check_probabilities(s) -> np.ndarray:
    """The scores as a float array; :class:`DataError` when any lies outside [0, 1] or is not a number."""
    s = np.asarray(s, dtype=float)
    bad = ~np.isfinite(s) | (s < 0) | (s > 1)
    if bad.any():
        raise DataError(f"Scores are not probabilities: calibration is not defined ({int(bad.sum())} of {s.size} "
                        f"scores lie outside [0, 1] or are not numbers). Convert logits or ranks to probabilities "
                        "first (e.g. with the sigmoid function), or switch calibration off.")
    return s


def clipped_logit(s) -> np.ndarray:
    s = np.clip(np.asarray(s, dtype=float), EPS, 1 - EPS)
    return np.log(s) - np.log1p(-s)


def _softplus(eta):
    """``log(1 + e^η)`` without overflow."""
    return np.maximum(eta, 0.0) + np.log1p(np.exp(-np.abs(eta)))


def _loglik(y, eta, w) -> float:
    """Binomial log-likelihood ``Σ w (y η − log(1 + e^η))``."""
    return float(w @ (y * eta - _softplus(eta)))


def fit_logistic(y, l, w, slope: bool, start, tol: float = 1e-7):
    """Maximum likelihood of ``logit P(y=1) = a + l`` (``slope`` False: offset ``l``, the calibration intercept) or
    ``a + b·l`` (``slope`` True) over rows or cells weighted by ``w``, by Newton–Raphson on the concave
    log-likelihood (steps capped at ``_MAX_STEP``). It stops when the next step would be below ``tol``: convergence
    is quadratic, so the coefficients are then within about ``tol`` of the maximum, and the probabilities just
    computed are the fitted ones. Returns (coefficients, fitted probabilities at them), or None when no finite
    estimate
    exists: one class only; for the slope model, classes that do not overlap in ``l`` (complete or quasi-complete
    separation, or a single score value: the estimate runs off to ±∞); or no convergence.
    """
    pos, neg = (w > 0) & (y == 1), (w > 0) & (y == 0)
    if not pos.any() or not neg.any():
        return None
    if slope and not (l[neg].max() > l[pos].min() and l[pos].max() > l[neg].min()):
        return None
    a, b = float(start[0]), (float(start[1]) if slope else 1.0)
    w4 = 0.25 * w
    for _ in range(_MAX_ITER):
        th = np.tanh(0.5 * (a + b * l if slope else a + l))  # p = (1 + th)/2, p(1 − p) = (1 − th²)/4
        r = w * (y - 0.5 - 0.5 * th)
        v = w4 * (1.0 - th * th)
        if slope:
            vl = v * l
            g0, g1, h00, h01, h11 = r.sum(), r @ l, v.sum(), vl.sum(), vl @ l
            det = h00 * h11 - h01 * h01
            if not det > 0:
                return None
            da, db = (h11 * g0 - h01 * g1) / det, (h00 * g1 - h01 * g0) / det
        else:
            h00 = v.sum()
            if not h00 > 0:
                return None
            da, db = r.sum() / h00, 0.0
        size = max(abs(da), abs(db))
        if not math.isfinite(size):
            return None
        if size < tol:
            break
        scale = min(1.0, _MAX_STEP / size)
        a, b = a + da * scale, b + db * scale
    else:
        return None
    if max(abs(a), abs(b)) >= _SEPARATION:
        return None
    return (np.array([a, b]) if slope else np.array([a])), 0.5 + 0.5 * th


def point_stats(y, s) -> dict:
    """The group's calibration numbers, the joint likelihood-ratio test and model-based standard errors.

    Keys: n, n_positive, expected (Σ scores), intercept, slope, slope_intercept (a'), oe_ratio, brier, ece,
    ece_bin_errors (each bin's mean error D_b), lr_stat, p_value (the joint
    2-df test), lr_stat_intercept, p_value_intercept (intercept 0 alone, 1 df), intercept_se, slope_se, info (2×2
    information of (a', b) at the fit, for a design effect), auroc with its DeLong variance auroc_var, auprc
    (average precision), reason (None, or why the logit-scale numbers are not estimable), and ``cells`` (the
    weighted (label, score) cells the numbers were computed on, with the fitted probabilities, for
    :func:`influence`).
    """
    from fairdesk.core.stats.discrimination import ranked

    y = np.asarray(y, float)
    s = check_probabilities(s)
    if y.size != s.size:
        raise ValueError("labels and scores differ in length")
    return point_from_ranked(*ranked(y, s))


def _cells(values, pos, neg):
    """The group as weighted cells, one per distinct (label, score) with rows: label, score, logit, count, and
    which of the 2T (label, score) pairs of :func:`..discrimination.ranked` (positives first) they are."""
    y = np.r_[np.ones(values.size), np.zeros(values.size)]
    s = np.r_[values, values]
    w = np.r_[pos, neg]
    keep = w > 0
    return y[keep], s[keep], clipped_logit(s[keep]), w[keep], keep


def point_from_ranked(values, pos, neg, discrimination: dict | None = None) -> dict:
    """:func:`point_stats` from one sort of the group (:func:`..discrimination.ranked`: distinct scores, positive and
    negative rows at each); every number is a weighted sum over the distinct (label, score) cells.
    ``discrimination``: the group's :func:`..discrimination.summary` when already computed."""
    from scipy.special import chdtrc  # the χ² tail (scipy.stats.chi2.sf without its per-call overhead)

    from fairdesk.core.stats.discrimination import summary

    n1, n0 = float(pos.sum()), float(neg.sum())
    n = int(n1 + n0)
    out = {"n": n, "n_positive": int(n1), "expected": math.nan, "ece_bin_errors": None, "intercept": math.nan,
           "slope": math.nan, "slope_intercept": math.nan, "oe_ratio": math.nan, "brier": math.nan, "ece": math.nan,
           "lr_stat": math.nan, "p_value": math.nan, "intercept_se": math.nan, "slope_se": math.nan,
           "lr_stat_intercept": math.nan, "p_value_intercept": math.nan, "info": None, "reason": None,
           "auroc": math.nan, "auroc_var": math.nan, "auprc": math.nan}
    if n == 0:
        out["reason"] = "empty group"
        return out
    out.update(discrimination or summary(pos, neg))
    y, s, l, w, keep = _cells(values, pos, neg)
    out["cells"] = {"y": y, "s": s, "l": l, "w": w, "keep": keep, "p_intercept": None, "p_slope": None}
    out["brier"] = float(w @ (s - y) ** 2 / n)
    out["ece_bin_errors"] = np.bincount(ece_bin(s), weights=w * (y - s), minlength=N_BINS) / n  # D_b, Σ|D_b| = ECE
    out["ece"] = float(np.abs(out["ece_bin_errors"]).sum())
    s_sum = float(w @ s)
    out["expected"] = s_sum
    out["oe_ratio"] = n1 / s_sum if s_sum > 0 else math.nan
    if n1 == 0 or n0 == 0:
        out["reason"] = "both classes are needed to fit the calibration intercept and slope"
        return out
    # the model "calibrated" (a' = 0, b = 1): η = l, so log(1 + e^η) = −log(1 − s), clipped as the logit is
    ll0 = float(w @ (y * l + np.log1p(-np.clip(s, EPS, 1 - EPS))))
    start = math.log(n1 / n0) - math.log(s_sum / (n - s_sum)) if 0 < s_sum < n else 0.0
    fit = fit_logistic(y, l, w, slope=False, start=[start])
    if fit is not None:
        a, p = float(fit[0][0]), fit[1]
        out["intercept"], out["cells"]["p_intercept"] = a, p
        out["intercept_se"] = float(1.0 / math.sqrt(w @ (p * (1 - p))))
        stat1 = max(0.0, 2.0 * (_loglik(y, a + l, w) - ll0))
        out["lr_stat_intercept"], out["p_value_intercept"] = stat1, float(chdtrc(1, stat1))
    fit = fit_logistic(y, l, w, slope=True, start=[0.0 if fit is None else a, 1.0])
    if fit is None:
        out["reason"] = ("the calibration slope cannot be fitted: the scores separate the classes (no overlap) or "
                         "take a single value")
        return out
    (a2, b), p = (float(c) for c in fit[0]), fit[1]
    out["slope"], out["slope_intercept"] = b, a2
    v = w * p * (1 - p)
    vl = v * l
    info = np.array([[v.sum(), vl.sum()], [vl.sum(), vl @ l]])
    det = info[0, 0] * info[1, 1] - info[0, 1] ** 2
    var_b = float(info[0, 0] / det) if det > 0 else math.nan  # [I⁻¹]₁₁ of the 2×2 information
    if not var_b > 0 or not math.isfinite(var_b):
        out["slope"] = out["slope_intercept"] = math.nan
        out["reason"] = "the calibration slope cannot be estimated (the scores barely overlap between the classes)"
        return out
    out["info"], out["cells"]["p_slope"] = info, p
    out["slope_se"] = math.sqrt(var_b)
    stat = 2.0 * (_loglik(y, a2 + b * l, w) - ll0)
    out["lr_stat"] = max(stat, 0.0)
    out["p_value"] = float(chdtrc(2, out["lr_stat"]))
    return out


# ------------------------------------------------------------------------------------------------------------------
# Standard errors by influence functions (the linearised bootstrap)

INFLUENCE_KEYS = ("intercept", "slope_intercept", "slope", "log_oe", "brier", "ece", "auroc", "auprc")
# the estimates :func:`variances` gives a variance; ``ece`` is not smooth: :func:`influence` gives ``ece_err``
# (each cell's error) and :func:`variances` folds the bins' mean errors


def influence(values, pos, neg, point: dict) -> dict:
    """Each cell's contribution to every estimate, ``{key: array}`` over the cells of ``point["cells"]`` (the
    distinct (label, score) pairs that hold rows), scaled so that ``Var ≈ Σ over rows of c²`` — and, with whole
    patients, ``Σ over patients of (Σ of the patient's rows' c)²`` (:func:`variances`).

    This is the delta method applied to the empirical distribution (the infinitesimal jackknife): the variance the
    row bootstrap estimates by resampling, here in closed form, so it costs one pass over the group instead of B
    refits and has no Monte-Carlo error; the tests check it against the row bootstrap. Written by hand because no
    installed library gives influence functions of these estimates (statsmodels, which has GLM sandwich
    covariances, is not a dependency). Keys (:data:`INFLUENCE_KEYS`): ``intercept`` (the M-estimate's
    ``ψ/I``); ``slope_intercept`` and ``slope`` (a', b of the slope model, jointly ``I⁻¹ψ``: the sandwich);
    ``log_oe`` (of log O/E); ``brier``; ``ece_err`` (each cell's error, the raw material of every bin's ``D_b``,
    not centred: :func:`variances` centres it per bin); ``auroc`` (DeLong's
    placement values); ``auprc`` (average precision, :func:`_ap_influence`). A key whose estimate is NaN is absent.
    """
    cells = point.get("cells")
    out: dict[str, np.ndarray] = {}
    if not cells or point["n"] == 0:
        return out
    y, s, l, keep = cells["y"], cells["s"], cells["l"], cells["keep"]
    n1, n = float(point["n_positive"]), float(point["n"])
    n0 = n - n1
    if n1 > 0 and point["expected"] > 0:
        out["log_oe"] = (y / (n1 / n) - s / (point["expected"] / n)) / n
    out["brier"] = ((s - y) ** 2 - point["brier"]) / n
    # ECE = Σ|D_b| over the bins' mean errors D_b = Σ_{i∈b}(y_i − s_i)/n: each cell's error, whose bin is
    # ece_bin(s); :func:`variances` gives each D_b its variance and folds them
    out["ece_err"] = (y - s) / n
    if cells["p_intercept"] is not None:
        p = cells["p_intercept"]
        out["intercept"] = (y - p) * point["intercept_se"] ** 2
    if cells["p_slope"] is not None:
        (i00, i01), (_, i11) = np.linalg.inv(point["info"])
        r = y - cells["p_slope"]
        out["slope_intercept"], out["slope"] = r * (i00 + i01 * l), r * (i01 + i11 * l)
    if n1 > 0 and n0 > 0:
        auc = point["auroc"]
        v10 = (np.cumsum(neg) - 0.5 * neg) / n0  # negatives below a positive at this score (ties ½)
        v01 = (n1 - np.cumsum(pos) + 0.5 * pos) / n1  # positives above a negative at this score
        out["auroc"] = np.r_[(v10 - auc) / n1, (v01 - auc) / n0][keep]
    if n1 > 0:
        out["auprc"] = _ap_influence(values, pos, neg, point["auprc"])[keep]
    return out


def _ap_influence(values, pos, neg, ap) -> np.ndarray:
    """Influence contributions of average precision ``AP = (1/n₁) Σ_t pos_t·R_t``, ``R_t = TP_t/(TP_t + FP_t)`` the
    precision at threshold t (rows with score ≥ t predicted positive).

    With shares π₁(t) = TP_t/n, π₀(t) = FP_t/n, p₁ = n₁/n and A = Σ_t (pos_t/n)·R_t (so AP = A/p₁), the Gateaux
    derivative towards a row (y*, s*) is ``[y*·C₀(s*) − (1 − y*)·C₁(s*) + y*·R(s*) − A − AP·(y* − p₁)] / p₁`` with
    ``C_j(s*) = Σ_{t ≤ s*} (pos_t/n)·π_{1−j}(t)/(π₁(t) + π₀(t))²`` (a row at s* moves the precision of every
    threshold at or below its score). Checked against the row bootstrap and the jackknife in the tests.
    """
    n1, n = float(pos.sum()), float(pos.sum() + neg.sum())
    tp, fp = np.cumsum(pos[::-1])[::-1] / n, np.cumsum(neg[::-1])[::-1] / n  # rows at or above each score
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        d2 = np.where(tp + fp > 0, (tp + fp) ** -2, 0.0)
    c0 = np.cumsum(pos / n * fp * d2)  # C₀: a positive at this score raises the precision of lower thresholds
    c1 = np.cumsum(pos / n * tp * d2)  # C₁: a negative lowers it
    p1 = n1 / n
    a = ap * p1
    inf_pos = (c0 + r - a - ap * (1 - p1)) / p1
    inf_neg = (-c1 - a + ap * p1) / p1
    return np.r_[inf_pos, inf_neg] / n


def auprc_logit_se(ap: float, var: float, var_rows: float, n_positive: float) -> float:
    """Standard error of ``logit(AP)`` behind every AUPRC interval and equivalence test (the pair test of
    a difference keeps the influence variance alone, whose size was right): the influence variance
    ``var`` (whole patients when they repeat), at least Boyd, Eng & Page's (2013) binomial variance
    ``AP(1 − AP)/n₁`` — times the whole-patient design effect ``var / var_rows`` (floored at 1) when patients
    repeat — divided by ``AP(1 − AP)`` (the delta method on the logit scale). NaN when AP is 0 or 1 or has no variance.

    Why the floor: the influence variance is the right first-order variance, but average precision is biased
    upward at small n₁ (the precision at the first few positives is a convex function of a small count of negatives
    above them: +0.2 to +0.6 SDs at 15–50 positives) and its estimated variance is smallest in the data sets that
    overestimate it most, so its logit interval covered only 0.89–0.93 with 10–99 positives; with whole patients
    0.85–0.92. Over 4,000 drawn designs the floored interval covers at least 0.94 in every region of the map
    (docs/methods.md, "AUPRC and Brier intervals over the design space"); near AP = 1, where the binomial variance
    exceeds the influence one most, it is conservative."""
    if not (0.0 < ap < 1.0) or not var > 0 or not n_positive > 0:
        return math.nan
    deff = max(1.0, var / var_rows) if var_rows > 0 else 1.0
    return math.sqrt(max(var, ap * (1.0 - ap) / n_positive * deff)) / (ap * (1.0 - ap))


def brier_model_variance(point: dict) -> float:
    """The variance the Brier score would have if each row's label were Bernoulli(its score),
    ``Σ s(1 − s)(1 − 2s)² / n²`` over the rows: the floor of the Brier interval's variance. With fewer than
    10 cases the influence variance rests on the few cases observed — a group that happens to show 1 case of an
    expected 4 gets a low Brier score and a variance of one case — so its interval missed the truth from below (0.84
    of intervals covered with fewer than 10 cases, 0.70 when 0 cases count); the model variance does not depend on
    which rows turned out positive."""
    cells = point.get("cells")
    if not cells or point["n"] == 0:
        return math.nan
    s = cells["s"]
    return float(cells["w"] @ (s * (1 - s) * (1 - 2 * s) ** 2)) / float(point["n"]) ** 2


def variances(contrib: dict, point: dict, row_cell=None, clusters=None) -> dict:
    """``Var = Σ c²`` of each key of :func:`influence` over the rows (cells weighted by their counts), and the
    covariance of (slope_intercept, slope) as ``slope_cov``. With ``clusters`` (a patient code per row) and
    ``row_cell`` (each row's (label, score) pair, :func:`..discrimination.ranked` with ``return_cell``), the
    contributions are summed per patient first: the whole-patient variance, the normal limit of the whole-patient
    bootstrap (the cluster-robust "sandwich"), times the small-sample factor ``G/(G − 1)`` of G patients — except the
    calibration intercept and slope fits, whose whole-patient (co)variances are CR2 (:func:`cr2_covariance`).
    Returns ``{key: variance}``.
    """
    out: dict = {}
    cells = point.get("cells")
    contrib = dict(contrib)
    err = contrib.pop("ece_err", None)
    if clusters is None:
        w = cells["w"] if contrib else None
        for k, c in contrib.items():
            out[k] = float(w @ (c * c))
        if "slope" in contrib:
            out["slope_cov"] = float(w @ (contrib["slope"] * contrib["slope_intercept"]))
        if err is not None:  # Σ over a bin's rows of (err − D_b/n)² and the other rows' (D_b/n)²: closed form
            d = point["ece_bin_errors"]
            bin_var = np.bincount(ece_bin(cells["s"]), weights=w * err * err, minlength=N_BINS) - d * d / w.sum()
    else:
        index = np.cumsum(cells["keep"]) - 1  # (label, score) pair → its cell
        row = index[row_cell]
        _, pid = np.unique(np.asarray(clusters), return_inverse=True)
        pid = pid.ravel()
        k = int(pid.max()) + 1 if pid.size else 0
        sums = {key: np.bincount(pid, weights=c[row], minlength=k) for key, c in contrib.items()}
        for key, v in sums.items():
            out[key] = float(v @ v)
        if "slope" in sums:
            out["slope_cov"] = float(sums["slope"] @ sums["slope_intercept"])
        if err is not None:  # per patient and bin: the patient's errors in the bin minus its rows' share of D_b
            n = float(row.size)
            per = np.bincount(pid * N_BINS + ece_bin(cells["s"])[row], weights=err[row],
                              minlength=k * N_BINS).reshape(k, N_BINS)
            per -= np.bincount(pid, minlength=k)[:, None] * point["ece_bin_errors"][None, :] / n
            bin_var = (per * per).sum(axis=0)
        # the sandwich over k patients falls short of unbiased by (k − 1)/k (CR1; without it AUROC and
        # AUPRC pair tests of groups of 10 patients rejected 11% and 16% of nulls)
        factor = k / (k - 1.0) if k > 1 else 1.0
        out = {key: v * factor for key, v in out.items()}
        if err is not None:
            bin_var = bin_var * factor
        # the calibration fits: the leverage-corrected (CR2) sandwich instead, see :func:`cr2_covariance`
        if cells["p_intercept"] is not None and "intercept" in out:
            p = cells["p_intercept"][row]
            out["intercept"] = float(cr2_covariance(np.ones((row.size, 1)), cells["y"][row] - p, p * (1 - p), pid, k,
                                                    np.array([[point["intercept_se"] ** 2]]))[0, 0])
        if cells["p_slope"] is not None and "slope" in out:
            p = cells["p_slope"][row]
            x = np.column_stack([np.ones(row.size), cells["l"][row]])
            cov = cr2_covariance(x, cells["y"][row] - p, p * (1 - p), pid, k, np.linalg.inv(point["info"]))
            out["slope_intercept"], out["slope"], out["slope_cov"] = (float(cov[0, 0]), float(cov[1, 1]),
                                                                       float(cov[0, 1]))
    if err is not None:
        out["ece"] = _folded_variance(point["ece_bin_errors"], bin_var)
        out["ece_bins"] = np.clip(bin_var, 0.0, None)  # each bin's Var(D_b), for :func:`ece_debiased`
    return out


def cr2_covariance(x, resid, weight, pid, k: int, bread) -> np.ndarray:
    """Whole-patient covariance of a logistic fit's coefficients with the Bell–McCaffrey leverage correction (CR2):
    ``B·Σ_g u_g u_gᵀ·B`` with ``u_g = X_gᵀ W_g^½ (I − H_gg)^−½ W_g^−½ e_g`` — each patient's score ``X_gᵀe_g``
    inflated by the leverage ``H_gg = W_g^½ X_g B X_gᵀ W_g^½`` of the patient's rows. Rows ``x`` (n × q, q ≤ 2: the
    model's columns), residuals ``y − p``, weights ``p(1 − p)``, patient codes ``pid`` (0 … k − 1), ``bread`` B the
    inverse information.

    Why: with ~14 patients among the positives the plain sandwich (CR1, times G/(G − 1)) was 8–18% below
    the Monte-Carlo SD of the calibration slope; a patient holding many of the few positive rows has a large leverage
    that the plain sandwich ignores. CR2 recovers 2–4% of the SE there (``benchmarks/bench_cluster_calibration.py``);
    the t reference with the df of the smaller class's patients does the rest.

    Closed form from per-patient sums (no m × m matrix): H_gg has rank ≤ q, so with ``Q = W_g^½ X_g B^½``,
    ``(I − QQᵀ)^−½ = I + Q f(QᵀQ) Qᵀ``, ``f(λ) = ((1 − λ)^−½ − 1)/λ``, and ``u_g = s_g + I_g B^½ f(M_g) B^½ s_g``
    with the patient's score ``s_g``, information ``I_g = X_gᵀW_gX_g`` and ``M_g = B^½ I_g B^½``. For q = 2,
    ``f(M) = αI + βM`` from M's two eigenvalues (those of ``B·I_g``), so ``B^½ f(M) B^½ = αB + β·B I_g B`` and no
    square root of B is needed; written out element-wise (a batched ``eigh`` of the 2 × 2 matrices cost 9 ms per
    3,500 patients). Hand-written: statsmodels' CR2 is not a FairDesk dependency and would need the per-patient
    matrices."""
    x = np.asarray(x, float)
    bread = np.asarray(bread, float)
    q = x.shape[1]
    s = [np.bincount(pid, weights=resid * x[:, i], minlength=k) for i in range(q)]

    def f(lam):  # ((1 − λ)^−½ − 1)/λ, ½ at 0; a patient's leverage is below 1 (1 only if it alone fixes the fit)
        lam = np.clip(lam, 0.0, 1.0 - 1e-9)
        small = lam < 1e-12
        return np.where(small, 0.5, ((1.0 - lam) ** -0.5 - 1.0) / np.where(small, 1.0, lam))

    if q == 1:
        i00 = np.bincount(pid, weights=weight * x[:, 0] ** 2, minlength=k)
        u = [s[0] * (1.0 + i00 * f(bread[0, 0] * i00) * bread[0, 0])]
    else:
        i00, i01, i11 = (np.bincount(pid, weights=weight * x[:, a] * x[:, b], minlength=k)
                         for a, b in ((0, 0), (0, 1), (1, 1)))
        (b00, b01), (_, b11) = bread

        def times_info(v0, v1):  # I_g·v per patient
            return i00 * v0 + i01 * v1, i01 * v0 + i11 * v1

        def times_bread(v0, v1):
            return b00 * v0 + b01 * v1, b01 * v0 + b11 * v1

        p00, p01 = b00 * i00 + b01 * i01, b00 * i01 + b01 * i11  # P = B·I_g, similar to M_g
        p10, p11 = b01 * i00 + b11 * i01, b01 * i01 + b11 * i11
        tr, det = p00 + p11, p00 * p11 - p01 * p10
        half_gap = np.sqrt(np.clip(tr * tr / 4 - det, 0.0, None))
        lam1, lam2 = tr / 2 + half_gap, tr / 2 - half_gap
        f1, f2 = f(lam1), f(lam2)
        apart = half_gap > 1e-12
        beta = np.where(apart, (f1 - f2) / np.where(apart, 2 * half_gap, 1.0), 0.0)
        alpha = f1 - beta * lam1
        bs = times_bread(*s)
        bibs = times_bread(*times_info(*bs))
        v = times_info(alpha * bs[0] + beta * bibs[0], alpha * bs[1] + beta * bibs[1])
        u = [s[0] + v[0], s[1] + v[1]]
    bu = np.stack(u, -1) @ bread.T
    return bu.T @ bu


SLOPE_BOOT = 200  # whole-patient replicates of the calibration slope fit (:func:`slope_bootstrap_variance`)
NEAR_SEPARATION_AUROC = 0.99  # from this AUROC the audit floors a clustered slope's variance at the bootstrap's


def slope_bootstrap_variance(point: dict, row_cell, clusters, rng, reps: int = SLOPE_BOOT) -> float:
    """Whole-patient bootstrap variance of the calibration slope: the slope model refitted (from the estimate) on
    ``reps`` resamples of the group's patients, the variance of the replicates that have a slope (NaN when fewer
    than half do). ``row_cell`` and ``clusters`` as in :func:`variances`.

    Why: near separation (AUROC ≥ 0.99) the slope is a strongly non-linear function of the few patients
    whose rows fall where the classes overlap, and every linearised variance — the sandwich, CR2, CR3 — is far
    below the slope's sampling variance (3,000 rows of ~1,000 patients, AUROC 0.998: SD 0.161, CR2 SE 0.119, the
    interval covering 0.893), while with independent rows the sandwich is right. The refits see the
    non-linearity (SE 0.151); the audit takes the larger of the two (``benchmarks/bench_cluster_calibration.py``)
    from AUROC :data:`NEAR_SEPARATION_AUROC`, the map's band where CR2 failed (below it CR2 with the smaller class's
    df covered 0.92–0.96; refitting every clustered group cost 2.9 × a clustered audit of 20,000 rows).
    Hand-written: a bootstrap of a weighted logistic fit is a loop over :func:`fit_logistic`."""
    cells = point.get("cells")
    if not cells or cells["p_slope"] is None:
        return math.nan
    row = (np.cumsum(cells["keep"]) - 1)[row_cell]
    y, l = cells["y"][row], cells["l"][row]
    _, pid = np.unique(np.asarray(clusters), return_inverse=True)
    pid = pid.ravel()
    k = int(pid.max()) + 1
    start = [point["slope_intercept"], point["slope"]]
    slopes = []
    for _ in range(reps):
        w = np.bincount(rng.integers(0, k, k), minlength=k)[pid].astype(float)
        fit = fit_logistic(y, l, w, slope=True, start=start)
        if fit is not None:
            slopes.append(fit[0][1])
    return float(np.var(slopes, ddof=1)) if len(slopes) >= max(reps / 2, 2) else math.nan


SCORE_MEASURES = ("intercept", "slope", "oe_ratio")  # the measures :func:`score_interval` gives an interval of


def informative_df(point: dict) -> float:
    """Degrees of freedom of the sandwich behind the calibration-in-the-large intervals with independent rows: ``ν = 2(Σ v)² / Σ v(1 − 2p)²``, ``v = p(1 − p)`` at the intercept fit — Satterthwaite's df of
    ``Σ (y − p)²`` when each row's label is Bernoulli(p) (its mean ``Σ v``, its variance ``Σ v(1 − 2p)²``). It counts
    the rows that carry information: about twice the cases when they are rare, and far fewer than the rows near
    separation, where only the rows in the classes' overlap have ``p`` away from 0 and 1 (20 positives of 400 rows
    at AUROC 0.998: ν ≈ 11 where n − 1 = 399, and the score interval with a normal quantile covered 0.91). NaN
    without an intercept fit."""
    cells = point.get("cells")
    if not cells or cells["p_intercept"] is None:
        return math.nan
    p, w = cells["p_intercept"], cells["w"]
    v = p * (1 - p)
    den = float(w @ (v * (1 - 2 * p) ** 2))
    return 2.0 * float(w @ v) ** 2 / den if den > 0 else math.nan


def score_interval(point: dict, measure: str, q: float, row_cell=None, clusters=None) -> tuple[float, float]:
    """Robust score interval of the calibration intercept, slope or O/E of one group: the values θ at
    which the estimating equation's score ``U(θ) = Σ ψ_i(θ)`` is within ``q`` of its own robust standard error
    **evaluated at θ**, ``U(θ)² ≤ q²·V(θ)`` — the test of "the true value is θ" inverted, as Wilson's interval
    inverts the score test of a proportion (Boos 1992, generalised score tests). ``q`` is the two-sided quantile
    (normal, or t with the df of the patients among the cases).

    ``ψ``: intercept ``y − expit(θ + l)`` (the offset model); O/E ``y − θ·s`` (so ``U = O − θ·E``); slope the
    efficient score ``(y − p)(l − l̄_v)``, ``p = expit(a(θ) + θ·l)`` with the intercept ``a(θ)`` profiled out and
    ``l̄_v`` the ``p(1 − p)``-weighted mean logit. ``V(θ)``: ``Σ ψ²`` over the rows × n/(n − 1), or with
    ``clusters`` (a patient per row, ``row_cell`` as in :func:`variances`) ``Σ`` over patients of the squared sum
    of their rows' ψ × G/(G − 1) — the same sandwich as :func:`variances`, not at the estimate but at θ.

    Why: the Wald interval ``θ̂ ± q·SE(θ̂)`` takes its SE at the estimate, and with few cases or near
    separation that SE is small exactly when the estimate is far out — the few rows where the classes overlap
    carry the fit — so with 10–29 cases and AUROC ≥ 0.99 the intercept interval covered 0.87 (its SE was 31% short
    of the estimate's SD) and near separation with repeated patients the slope's 0.73–0.90. The score's
    variance at the true value does not depend on where the estimate fell (``benchmarks/bench_calibration_regions.
    py``). Hand-written: no installed library inverts a robust score test (statsmodels, not a dependency, has
    score tests at one value only).

    Returns (low, high); ±inf where the score never leaves the band on that side (then no finite limit exists);
    NaN when the estimate does not exist."""
    from scipy.optimize import brentq

    cells = point.get("cells")
    est = {"intercept": point.get("intercept"), "slope": point.get("slope"),
           "oe_ratio": point.get("oe_ratio")}[measure]
    if not cells or est is None or not math.isfinite(est) or (measure == "slope" and cells["p_slope"] is None):
        return math.nan, math.nan
    y, l, w, s = cells["y"], cells["l"], cells["w"], cells["s"]
    if clusters is None:
        n = float(w.sum())
        factor = n / (n - 1.0) if n > 1 else 1.0
        row = pid = None
    else:
        row = (np.cumsum(cells["keep"]) - 1)[row_cell]
        _, pid = np.unique(np.asarray(clusters), return_inverse=True)
        pid = pid.ravel()
        k = int(pid.max()) + 1
        factor = k / (k - 1.0) if k > 1 else 1.0
    state = {"a": point.get("slope_intercept")}

    def psi(theta):
        if measure == "intercept":
            return y - _expit(theta + l)
        if measure == "oe_ratio":
            return y - theta * s
        a = state["a"]  # the slope: profile the intercept out (1-d Newton from the last value)
        for _ in range(4 * _MAX_ITER):
            p = _expit(a + theta * l)
            v = w * p * (1 - p)
            step = float(w @ (y - p)) / max(float(v.sum()), 1e-300)
            a += max(-_MAX_STEP, min(_MAX_STEP, step))
            if abs(step) < 1e-10:
                break
        state["a"] = a
        p = _expit(a + theta * l)
        v = w * p * (1 - p)
        return (y - p) * (l - float(v @ l) / max(float(v.sum()), 1e-300))

    def band(theta, sign):  # U(θ) − sign·q·√V(θ): its root is the lower (sign +1) or upper (sign −1) limit
        c = psi(theta)
        u = float(w @ c)
        if pid is None:
            v = float(w @ (c * c))
        else:
            per = np.bincount(pid, weights=c[row], minlength=k)
            v = float(per @ per)
        return u - sign * q * math.sqrt(factor * max(v, 0.0))

    scale = max(abs(est), 1.0)
    out = []
    for sign in (1, -1):  # U decreases in θ: the lower limit lies below the estimate, where U > 0
        state["a"] = point.get("slope_intercept")
        inner, step, limit = est, 0.05 * scale, -sign * math.inf
        while abs(inner) < (100.0 * scale if measure == "oe_ratio" else _SEPARATION):
            # beyond: the score never leaves the band on this side (no finite limit)
            outer = inner - sign * step
            if measure == "oe_ratio" and outer < 0:
                outer = 0.0  # an O/E is never negative
            if band(outer, sign) * sign > 0:  # the score has left the band between inner and outer
                limit = brentq(lambda t: band(t, sign), min(inner, outer), max(inner, outer), xtol=1e-7 * scale)
                break
            if measure == "oe_ratio" and outer == 0.0:
                limit = 0.0
                break
            inner, step = outer, step * 2
        out.append(limit)
    return out[0], out[1]


def _expit(x):
    return 0.5 + 0.5 * np.tanh(0.5 * x)


def ece_debiased(point: dict, bin_var, level: float = 0.95, df: float = math.inf) -> tuple[float, float, float]:
    """(debiased ECE, interval low, interval high) of one group.

    The plug-in ECE ``Σ|D_b|`` is biased upward: ``E|D_b| > |d_b|`` whenever a bin's mean error has sampling
    spread, so for a perfectly calibrated group of 100–2,000 rows it sat about 4 SDs above the true 0 and a normal
    interval around it excluded 0 in 98% of such groups. Here each bin's squared error is debiased,
    ``d̂_b = √max(0, D_b² − v_b)`` (``E[D_b²] = d_b² + v_b``), and the ECE is ``Σ d̂_b``. No normal interval
    around a sum of absolute values can cover near 0 (the estimate's law piles up at 0), so the interval is
    **simultaneous**: each non-empty bin's normal interval for ``d_b`` at level ``1 − (1 − level)/K`` (Bonferroni
    over the K bins), folded — ``|d_b| ∈ [max(0, |D_b| − q·sd_b), |D_b| + q·sd_b]`` — and summed. If every bin's
    interval holds, so does the sum's: coverage at least ``level`` (conservative, and wide in small groups: it
    describes, the calibration test decides). ``v_b`` is the bin's influence variance (whole patients when they
    repeat), floored at the binomial variance of its rows at the bin's Jeffreys-smoothed observed share (a bin
    whose rows are all 0 would otherwise show no spread), and each bin's interval is widened to its Clopper–Pearson
    interval of the observed share where that reaches further (a bin of a few rows is far from normal). The
    estimate lies inside its interval. ``df``: a t quantile instead of the normal one (whole patients)."""
    from fairdesk.core.stats.gaps import quantile

    cells = point.get("cells")
    d = point.get("ece_bin_errors")
    if d is None or cells is None or point["n"] == 0:
        return math.nan, math.nan, math.nan
    n = float(point["n"])
    b = ece_bin(cells["s"])
    rows = np.bincount(b, weights=cells["w"], minlength=N_BINS)
    k = np.bincount(b, weights=cells["w"] * cells["y"], minlength=N_BINS)
    share = (k + 0.5) / (rows + 1.0)
    var = np.maximum(np.asarray(bin_var, float), rows * share * (1 - share) / (n * n))
    present = rows > 0
    each = 1 - (1 - level) / max(int(present.sum()), 1)
    q = float(quantile(each, df))
    estimate = float(np.sqrt(np.clip(d * d - var, 0.0, None))[present].sum())
    low, high = np.clip(np.abs(d) - q * np.sqrt(var), 0.0, None), np.abs(d) + q * np.sqrt(var)
    # a bin of a few rows is far from normal: its Clopper–Pearson interval of the observed share (vs the bin's mean
    # score, weighted by the bin's share of rows) widens the bin's interval where it reaches further
    from scipy.special import betaincinv

    m = np.maximum(rows, 1.0)
    mean_s = np.bincount(b, weights=cells["w"] * cells["s"], minlength=N_BINS) / m
    cp_lo = np.where(k > 0, betaincinv(np.maximum(k, 1), rows - k + 1, (1 - each) / 2), 0.0)
    cp_hi = np.where(k < rows, betaincinv(k + 1, np.maximum(rows - k, 1), 1 - (1 - each) / 2), 1.0)
    gap_lo = np.clip(np.maximum(cp_lo - mean_s, mean_s - cp_hi), 0.0, None)
    gap_hi = np.maximum(np.abs(cp_lo - mean_s), np.abs(cp_hi - mean_s))
    low = np.minimum(low, rows / n * gap_lo)
    high = np.maximum(high, rows / n * gap_hi)
    return estimate, float(low[present].sum()), float(high[present].sum())


def _folded_variance(d, var) -> float:
    """Variance of ECE = Σ_b |D_b| with each bin's mean error ``D_b ~ N(d_b, var_b)``: the folded normal's
    ``Var|X| = μ² + σ² − (E|X|)²``, ``E|X| = σ√(2/π)·e^(−μ²/2σ²) + μ(1 − 2Φ(−μ/σ))``, summed over the bins (their
    covariance, −D_b·D_b'/n, is of a smaller order). Unlike holding each bin's sign fixed (the plain delta method,
    which overstated the row bootstrap's SD by a third at 150 rows), this keeps the fold of bins whose mean error
    is near 0 — where ECE's sampling spread is narrower than a sum of signed terms would suggest."""
    from scipy.special import ndtr

    d, var = np.asarray(d, float), np.clip(np.asarray(var, float), 0.0, None)
    sd = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_abs = np.where(sd > 0, sd * math.sqrt(2 / math.pi) * np.exp(-d * d / (2 * var))
                            + d * (1 - 2 * ndtr(-d / sd)), np.abs(d))
    return float(np.clip(d * d + var - mean_abs * mean_abs, 0.0, None).sum())


def equivalence_p(intercept, intercept_se, slope, slope_se, intercept_margin: float,
                  slope_range: tuple[float, float]) -> float:
    """p of the intersection–union TOST "calibrated within the margins": |intercept| < ``intercept_margin`` and
    ``slope_range[0]`` < slope < ``slope_range[1]``; the largest of the four one-sided normal p-values."""
    from scipy.special import ndtr

    vals = (intercept, intercept_se, slope, slope_se)
    if any(v is None or not math.isfinite(v) for v in vals) or intercept_se <= 0 or slope_se <= 0:
        return math.nan
    lo, hi = slope_range
    ps = (ndtr(-(intercept + intercept_margin) / intercept_se), ndtr((intercept - intercept_margin) / intercept_se),
          ndtr(-(slope - lo) / slope_se), ndtr((slope - hi) / slope_se))
    return float(max(ps))


# ------------------------------------------------------------------------------------------------------------------
# Curves


def _downsample(n: int, k: int = MAX_POINTS) -> np.ndarray:
    """Indices of at most ``k`` points out of ``n``, first and last kept."""
    if n <= k:
        return np.arange(n)
    return np.linspace(0, n - 1, k).round().astype(int)  # steps > 1 apart: rounding keeps them distinct


def reliability_bins(values, pos, neg, level: float = 0.95) -> list[dict]:
    """From one sort of the group (:func:`..discrimination.ranked`), per non-empty equal-width bin: bin, lower,
    upper, n, mean predicted, observed share and its Clopper–Pearson interval (scipy's inverse regularised
    incomplete beta, vectorised over the bins).

    Clopper–Pearson rather than Wilson: it never under-covers, which matters for the sparse end bins of a
    reliability curve (a bin of 3 rows is common), and it is defined at 0/n and n/n.
    """
    from scipy.special import betaincinv

    idx = ece_bin(values)
    rows = pos + neg
    n = np.bincount(idx, weights=rows, minlength=N_BINS).round().astype(int)
    k = np.bincount(idx, weights=pos, minlength=N_BINS).round()
    ssum = np.bincount(idx, weights=values * rows, minlength=N_BINS)
    tail = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, betaincinv(np.maximum(k, 1), n - k + 1, tail), 0.0)
        hi = np.where(k < n, betaincinv(k + 1, np.maximum(n - k, 1), 1.0 - tail), 1.0)
    return [{"bin": b, "lower": b / N_BINS, "upper": (b + 1) / N_BINS, "n": int(n[b]),
             "predicted": float(ssum[b] / n[b]), "observed": float(k[b] / n[b]),
             "ci_low": float(lo[b]), "ci_high": float(hi[b])} for b in range(N_BINS) if n[b] > 0]


def smoothed_curve(values, pos, neg) -> tuple[np.ndarray, np.ndarray]:
    """From one sort of the group (:func:`..discrimination.ranked`), the isotonic (pool-adjacent-violators)
    recalibration curve, x = score, y = estimated P(y=1 | score).

    Isotonic rather than lowess: it is in scipy and sklearn (lowess is in statsmodels, not a dependency), has no
    bandwidth to choose, and is the consistent, reproducible smoother of the CORP reliability diagram (Dimitriadis,
    Gneiting & Jordan 2021). scipy's ``isotonic_regression`` on the distinct scores (share of positives, weighted by
    rows) is sklearn's ``IsotonicRegression`` fit without its per-call overhead (0.07 ms against 7 ms for 10,000
    rows; a test checks they agree). It is a step function; at most ``MAX_POINTS`` points are returned.
    """
    from scipy.optimize import isotonic_regression

    xs = values
    if xs.size == 0:
        return xs, xs
    w = pos + neg
    fitted = isotonic_regression(pos / w, weights=w, increasing=True).x
    # a step function is drawn exactly by the two ends of each step
    change = np.flatnonzero(np.diff(fitted) != 0)
    keep = np.unique(np.concatenate([[0, xs.size - 1], change, change + 1]))
    keep = keep[_downsample(keep.size)]
    return xs[keep], fitted[keep]


def roc_pr(values, pos_c, neg_c, threshold: float) -> dict | None:
    """ROC and precision–recall points (each ≤ ``MAX_POINTS``) and the operating point at ``threshold``
    (prediction ``s ≥ threshold``, as in the audit). None when the group lacks a class.

    From one sort (:func:`..discrimination.ranked`), the points of sklearn's ``roc_curve(...,
    drop_intermediate=False)`` (a leading (0, 0) point at threshold +inf, then one point per distinct score, highest
    first) and of ``precision_recall_curve`` (same thresholds in increasing order, precision = TP/(TP + FP), recall =
    TPR, with its final (recall 0, precision 1) point); a test checks both against sklearn.
    """
    pos, neg = pos_c.sum(), neg_c.sum()
    if pos == 0 or neg == 0:
        return None
    tps, fps = np.cumsum(pos_c[::-1]), np.cumsum(neg_c[::-1])
    fpr, tpr = np.r_[0.0, fps / neg], np.r_[0.0, tps / pos]
    thr = np.r_[np.inf, values[::-1]]
    i = _downsample(fpr.size)
    prec = np.where(tps + fps > 0, tps / np.maximum(tps + fps, 1e-300), 1.0)
    rec = tps / pos
    prec, rec, thr_pr = np.append(prec[::-1], 1.0), np.append(rec[::-1], 0.0), values
    j = _downsample(prec.size)
    at = np.searchsorted(values, threshold, side="left")  # predicted positive: s ≥ threshold
    tp, fp = float(pos_c[at:].sum()), float(neg_c[at:].sum())
    return {"roc": (fpr[i], tpr[i], thr[i]),
            "pr": (rec[j], prec[j], np.append(thr_pr, np.nan)[j]),  # the last PR point has no threshold
            "operating": {"fpr": fp / neg, "tpr": tp / pos, "recall": tp / pos,
                          "precision": tp / (tp + fp) if tp + fp else math.nan}}
