"""The group audit's tests and intervals: the test of one rate gap (:func:`rate_gap_test`), the calibration of
one group (:func:`group_calibration`), the error spread's null and p (:func:`tail_p`), and the intervals that
agree with the corrected verdicts (:func:`agreeing_intervals`). The numbers themselves are in
:mod:`fairdesk.core.stats`."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fairdesk.core.audits.group_counts import delta_eo


def _finite(v):
    """A float for the tables, None for NaN / ±inf (JSON has neither)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


TOO_FEW_CASES = "inconclusive: too few cases to test"  # the reason's words (:func:`too_few_cases`)


def too_few_cases(n_positive: int, n_negative: int, minimum: int, case_patients=None) -> str | None:
    """The one rule by which a group's calibration and discrimination are "inconclusive: too few cases":
    fewer than ``minimum`` (``plan.min_denominator``) cases in its smaller class — rows, or with repeated patients
    (``case_patients``: the patients with a positive row and with a negative row) the patients among them, since
    a whole-patient interval rests on those (the design-space map: with fewer than 10 patients among the cases every
    such interval under-covered, 0.76–0.90, and the AUROC pair test rejected 13% of nulls). The reason in words,
    None when there are enough; such a group gets no interval and no test."""
    if case_patients is None:
        (few, which), unit = min((n_positive, "positive"), (n_negative, "negative")), ""
    else:
        (few, which), unit = min((case_patients[0], "positive"), (case_patients[1], "negative")), "patients among the "
    if few >= minimum:
        return None
    return f"{TOO_FEW_CASES} (only {int(few)} {unit}{which} cases, fewer than {minimum})"


def _case_rows(cell: np.ndarray, n_values: int, patients_g: np.ndarray):
    """Per patient of a group, its rows of the group's smaller class (none: left out), and the number of patients
    with a positive and with a negative row. ``cell`` from :func:`..stats.discrimination.ranked` (positive < T)."""
    positive = cell < n_values
    _, pid = np.unique(patients_g, return_inverse=True)
    pid = pid.ravel()
    k = int(pid.max()) + 1 if pid.size else 0
    npos = np.bincount(pid, weights=positive, minlength=k)
    nneg = np.bincount(pid, weights=~positive, minlength=k)
    smaller = npos if positive.sum() <= (~positive).sum() else nneg
    return smaller[smaller > 0], (int((npos > 0).sum()), int((nneg > 0).sum()))


def group_calibration(values, pos, neg, cell, disc, patients_g, plan, slope_rng) -> dict:
    """Calibration of one group (METHODS §8), the one path of the audit (:func:`_audit_calibration`) and of the
    studies that check it (``benchmarks/bench_calibration_regions.py``). ``values, pos, neg, cell, disc``: the
    group's sort (:func:`..stats.discrimination.ranked` with the row cells) and :func:`..stats.discrimination.
    summary`; ``patients_g`` each row's patient (None: independent rows); ``slope_rng`` the generator of the
    near-separation slope bootstrap.

    Intervals and design effects come from influence functions (:func:`..stats.calibration.influence`): the
    variance the row bootstrap would estimate, in closed form, summed over whole patients when patients repeat —
    the audit's own resampling unit; with whole patients the slope's variance is at least its whole-patient
    bootstrap variance near separation (AUROC ≥ :data:`..stats.calibration.NEAR_SEPARATION_AUROC`;
    :func:`..stats.calibration.slope_bootstrap_variance`).

    Returns ``{"row": the calibration table's row (without task and attribute), "test": None or (p, p_equivalence,
    statistic, test text, design effect), "point", "var", "var_cl", "rows_per_patient", "too_few"}``."""
    from fairdesk.core.stats import calibration as C

    cluster = patients_g is not None
    pt = C.point_from_ranked(values, pos, neg, disc)
    contrib = C.influence(values, pos, neg, pt)
    var = C.variances(contrib, pt)
    var_cl = C.variances(contrib, pt, row_cell=cell, clusters=patients_g) if cluster else var
    rows_pp = case_rows = case_patients = None
    if cluster:
        rows_pp = np.unique(patients_g, return_counts=True)[1]
        case_rows, case_patients = _case_rows(cell, values.size, patients_g)
    few = too_few_cases(pt["n_positive"], pt["n"] - pt["n_positive"], plan.min_denominator, case_patients)
    row = {"n": pt["n"], "n_positive": pt["n_positive"],
           "test": None, "lr_stat": None, "p_value": None, "p_equivalence": None, "design_effect": None,
           "q_value": None, "q_equivalence": None, "verdict": None, "test_id": None,
           "reason": few or pt["reason"]}
    if cluster and few is None and math.isfinite(var_cl.get("slope", math.nan)) \
            and pt["auroc"] >= C.NEAR_SEPARATION_AUROC:
        # near separation the linearised slope variance falls short; the whole-patient refits do not
        boot = C.slope_bootstrap_variance(pt, cell, patients_g, slope_rng)
        var_cl = {**var_cl, "slope": max(var_cl["slope"], boot) if math.isfinite(boot) else var_cl["slope"]}
    row.update(_calibration_intervals(pt, var_cl, plan.ci_level, case_rows, shown=few is None,
                                      clusters=(cell, patients_g) if cluster else None))
    d_int = d_slope = deff = 1.0  # design effects of whole patients (independent rows: 1), floored at 1
    if cluster and math.isfinite(pt["intercept_se"]) and "intercept" in var_cl:
        d_int = max(1.0, var_cl["intercept"] / pt["intercept_se"] ** 2)
    test = None
    if few is None and pt["info"] is not None:  # too few cases: no test (the reason says so)
        if cluster:
            # Rao–Scott first-order correction: mean eigenvalue of (model information × whole-patient covariance)
            cov = np.array([[var_cl["slope_intercept"], var_cl["slope_cov"]],
                            [var_cl["slope_cov"], var_cl["slope"]]])
            deff = max(1.0, float(np.trace(pt["info"] @ cov)) / 2.0)
            d_slope = max(1.0, var_cl["slope"] / pt["slope_se"] ** 2)
        p = _lr_p(2, pt["lr_stat"] / deff, case_rows)
        p_eq = C.equivalence_p(pt["intercept"], pt["intercept_se"] * math.sqrt(d_int), pt["slope"],
                               pt["slope_se"] * math.sqrt(d_slope), plan.calibration_intercept_margin,
                               plan.calibration_slope_range)
        test = (p, p_eq, pt["lr_stat"], "joint LR test of intercept 0 and slope 1 (2 df)", deff)
    elif few is None and math.isfinite(pt["p_value_intercept"]):
        # no slope (separation or a single score value): calibration-in-the-large is still testable; without a
        # slope the group cannot be shown calibrated, so there is no equivalence test
        p = _lr_p(1, pt["lr_stat_intercept"] / d_int, case_rows)
        test = (p, math.nan, pt["lr_stat_intercept"], "LR test of intercept 0 alone (1 df; no slope)", d_int)
    return {"row": row, "test": test, "point": pt, "var": var, "var_cl": var_cl, "rows_per_patient": rows_pp,
            "too_few": few}


def _lr_p(k: int, stat: float, case_rows=None) -> float:
    """p of a calibration LR statistic with ``k`` df (already divided by its Rao–Scott design effect): χ²_k with
    independent rows; with whole patients (``case_rows``: each patient's rows of the smaller class) the Rao–Scott F
    form, ``stat/k ~ F(k, ν)`` with ν = :func:`..stats.gaps.cluster_df` of those patients — the design effect is
    estimated from them, as a t reference does for one coefficient (χ² rejected 9% of calibrated groups
    with ~18 patients among the positives)."""
    from scipy.special import chdtrc, fdtrc

    from fairdesk.core.stats import gaps as G

    if case_rows is None:
        return float(chdtrc(k, stat))
    return float(fdtrc(k, G.cluster_df(case_rows), stat / k))


def _calibration_intervals(pt: dict, var: dict, level: float, rows_per_patient=None, shown: bool = True,
                           clusters=None) -> dict:
    """``{measure: value, measure_ci_low, measure_ci_high}`` of one group from the influence variances ``var``:
    the calibration intercept and O/E by the robust score interval (:func:`..stats.calibration.score_interval`,
    whole patients when ``clusters`` = (each row's cell, each row's patient) is given; with independent rows its
    quantile is t with the df of the informative rows, :func:`..stats.calibration.informative_df`, when fewer than
    n − 1; the Wald interval covered 0.85–0.93 near separation, its SE taken at the estimate; exact
    Poisson upper bound of O/E when no case is observed), the slope on its own (logit) scale, Brier on the log scale, ECE debiased with a simultaneous interval (:func:`..stats.calibration.
    ece_debiased`). Small-sample corrections (Brier and slope intervals covered 0.90–0.92 at 100 rows with
    extreme scores): with independent rows the influence (HC0) variance is multiplied by n/(n − p) and the quantile
    is Student's t with n − p df (p = 1, or 2 for the slope model, whose variance is also at least the model-based
    one); with whole patients the variances already carry G/(G − 1) (the intercept and slope: the CR2 leverage
    correction, :func:`..stats.calibration.cr2_covariance`) and the quantile is t with :func:`..stats.gaps.cluster_df`
    df of ``rows_per_patient`` — each patient's rows of the group's smaller class, the patients these numbers rest on
    (df from all the group's patients, 31 and 86 where ~14 patients had a positive row, left the slope
    interval covering 0.83–0.90). ``shown`` False (too few cases): the values without intervals. A Brier score is a
    mean of squares, right-skewed when the scores are extreme: its log-scale interval stays positive and follows the
    skew, capped at 1; its variance is at least the one it would have if the scores were the risks
    (:func:`..stats.calibration.brier_model_variance`; with fewer than 10 cases the influence variance rests on the
    few observed)."""
    from fairdesk.core.stats import calibration as C
    from fairdesk.core.stats import gaps as G

    out = {}
    n = float(pt["n"])
    cluster_df = G.cluster_df(rows_per_patient) if rows_per_patient is not None else None
    values = {"calibration_intercept": ("intercept", pt["intercept"], 1),
              "calibration_slope": ("slope", pt["slope"], 2), "oe_ratio": ("log_oe", pt["oe_ratio"], 1),
              "brier": ("brier", pt["brier"], 1), "ece": ("ece", pt["ece"], 1)}
    for m, (key, value, k) in values.items():
        v = _finite(value)
        lo = hi = None
        vk = var.get(key, math.nan)
        if cluster_df is None and n > k + 1:
            vk = vk * n / (n - k)
            if m == "calibration_slope" and math.isfinite(pt["slope_se"]):
                vk = max(vk, pt["slope_se"] ** 2)
        df = cluster_df if cluster_df is not None else (max(n - k, 1.0) if n > k else math.inf)
        z = float(G.quantile(level, df))
        se = math.sqrt(vk) if vk >= 0 else math.nan
        if v is not None and m == "oe_ratio" and v == 0:
            # no case observed: O/E = 0 of E = Σ scores expected; the exact Poisson upper bound of O, over E
            lo, hi = 0.0, (-math.log((1 - level) / 2) / pt["expected"] if pt["expected"] > 0 else None)
        if v is not None and math.isfinite(se):
            if m in ("calibration_intercept", "oe_ratio"):
                # the robust score interval: the sandwich at each candidate value, not at the estimate; with
                # independent rows t with the df of the informative rows
                if cluster_df is None and math.isfinite(C.informative_df(pt)):
                    z = float(G.quantile(level, max(1.0, min(df, C.informative_df(pt)))))
                lo, hi = C.score_interval(pt, "intercept" if m == "calibration_intercept" else "oe_ratio", z,
                                          *(clusters or (None, None)))
            elif m == "ece":
                v, lo, hi = C.ece_debiased(pt, var["ece_bins"], level, cluster_df or math.inf)
            elif m == "brier":
                se = math.sqrt(max(vk, C.brier_model_variance(pt)))  # at least the model's
                lo, hi = ((v * math.exp(-z * se / v), min(1.0, v * math.exp(min(z * se / v, 50.0)))) if v > 0
                          else (0.0, z * se))
            else:
                lo, hi = v - z * se, v + z * se
        if not shown:
            lo = hi = None
        out[m], out[f"{m}_ci_low"], out[f"{m}_ci_high"] = v, _finite(lo), _finite(hi)
    return out


def rate_gap_test(x_a, n_a, x_b, n_b, boot_diff, plan, rows_per_patient=None, hits_per_patient=None) -> dict:
    """Score test, Agresti–Caffo interval (with whole patients: the score test's inversion) and TOST of one
    difference of rates (see :mod:`..stats.gaps`).

    ``rows_per_patient``: with whole patients, each side's rows per patient in the rate's denominator, and
    ``hits_per_patient`` each side's rows per patient in its numerator: the design effect is then the whole-patient
    sandwich of the two rates (:func:`..stats.gaps.cluster_rate_variance`, with G/(G − 1)) over their binomial
    variance, and the test, interval and TOST use a t reference with :func:`..stats.gaps.cluster_df` degrees of
    freedom (with many one-row patients and a few of 30 rows, the normal reference rejected 7–10% of null
    gaps). Not the whole-patient bootstrap's variance times G/(G − 1): the bootstrap redraws how many patients a rate
    rests on (E[1/G*] > 1/G), which already lifts its variance about as far above the plain sandwich as G/(G − 1)
    does, so the factor counted twice (recall gaps with 5–8 case patients had a size of 0.007–0.020)."""
    from fairdesk.core.stats import gaps as G

    n_valid = int((~np.isnan(boot_diff)).sum())
    deff = float(G.design_effect(boot_diff, x_a, n_a, x_b, n_b)) if n_valid > 1 else float("nan")
    if not deff > 0:  # no bootstrap spread at all (cannot happen with the smoothing unless both rates are empty)
        deff = 1.0
    df = np.inf
    if rows_per_patient is not None:
        m_a, m_b = (np.asarray(m, float) for m in rows_per_patient)
        if hits_per_patient is None:
            deff *= G.small_sample_factor(min((m_a > 0).sum(), (m_b > 0).sum()))
        else:
            h_a, h_b = (np.asarray(h, float) for h in hits_per_patient)
            var = G.cluster_rate_variance(h_a, m_a) + G.cluster_rate_variance(h_b, m_b)
            deff = max(1.0, float(var / G.binomial_variance(x_a, n_a, x_b, n_b)))
        pa, pb = (x_a + 0.5) / (n_a + 1), (x_b + 0.5) / (n_b + 1)
        df = G.cluster_df(m_a, m_b, pa * (1 - pa) * (m_a ** 2).sum() / max(n_a, 1) ** 2,
                          pb * (1 - pb) * (m_b ** 2).sum() / max(n_b, 1) ** 2)
    p = G.gap_p_value(x_a, n_a, x_b, n_b, deff, df)
    flat = no_variation(x_a, n_a, x_b, n_b)
    if rows_per_patient is None:  # independent rows: Agresti–Caffo (the score interval covered 0.91 at 12 vs 1,000
        centre, se = G.agresti_caffo(x_a, n_a, x_b, n_b, deff)  # cases at recall 0.99, docs/methods.md §1)
        lo, hi = G.interval(centre, se, plan.ci_level, df)
        p_eq = float("nan") if flat else float(G.tost_p(centre, se, plan.margin, df))
        dual = {"kind": "ac", "centre": float(centre), "se": float(se), "df": float(df), "x_a": float(x_a),
                "n_a": float(n_a), "x_b": float(x_b), "n_b": float(n_b), "deff": float(deff)}
    else:  # whole patients: the inversion of the score test (Agresti–Caffo missed 0 more often than the
        lo, hi = G.score_interval(x_a, n_a, x_b, n_b, deff, plan.ci_level, df)  # test rejected)
        p_eq = float("nan") if flat else float(G.score_tost_p(x_a, n_a, x_b, n_b, plan.margin, deff, df))
        dual = {"kind": "score", "x_a": float(x_a), "n_a": float(n_a), "x_b": float(x_b), "n_b": float(n_b),
                "deff": float(deff), "df": float(df)}
    return {"_dual": dual, "gap": float(x_a / n_a - x_b / n_b), "ci_low": float(lo), "ci_high": float(hi), "p_value": float(p),
            "p_equivalence": p_eq,
            "design_effect": deff, "df": float(df), "n_boot_valid": n_valid, "flat": flat}


# --------------------------------------------------------------------------------------------------------------
# Degenerate comparisons at the threshold: a rate that is 0 (or 1) in both groups by construction —
# the model flags nobody (everybody) there — says nothing about equivalence: the TOST p of such a pair is small only
# because the Agresti–Caffo pseudo-counts make a tiny standard error around 0. Such a pair gets no equivalence p
# (NaN: it leaves the equivalence family), so its verdict is "inconclusive", with the reason in its records.

FLAT_PREFIX = "The model flags "  # every task-level threshold warning starts so (the CLI prints them on stderr)


def no_variation(x_a, n_a, x_b, n_b) -> bool:
    """True when both rates are 0 or both are 1: the comparison carries no evidence of equivalence."""
    return bool((x_a == 0 and x_b == 0) or (x_a == n_a and x_b == n_b))


def flat_threshold_warning(task, yhat: np.ndarray, s: np.ndarray, tau: float) -> str | None:
    """The warning for a task in which the model flags nobody or everybody at the threshold, else None."""
    if yhat.size == 0 or 0 < int(yhat.sum()) < yhat.size:
        return None
    nobody = not yhat.any()
    where = "" if str(task) == "(all)" else f" in task '{task}'"
    extreme = f"highest score {float(s.max()):.3g}" if nobody else f"lowest score {float(s.min()):.3g}"
    return (f"{FLAT_PREFIX}{'nobody' if nobody else 'everybody'}{where} at threshold {tau:g} ({yhat.size:,} rows; "
            f"{extreme}): every comparison of rates at this threshold is inconclusive. Give the threshold the "
            "model is used at.")


def flat_reason(task, tau: float, yhat: np.ndarray, metric: str, value: float) -> str:
    """The reason of a comparison whose rate is 0 or 1 in both groups (see :func:`no_variation`)."""
    where = "" if str(task) == "(all)" else f" in {task}"
    if not yhat.any():
        return f"inconclusive: the model flags nobody{where} at threshold {tau:g}"
    if yhat.all():
        return f"inconclusive: the model flags everybody{where} at threshold {tau:g}"
    return (f"inconclusive: {metric} is {value:g} in both groups at threshold {tau:g} (nothing varies to compare, "
            "so no evidence of equivalence)")


def tail_p(null: np.ndarray, value: float, min_exceed: int = 10) -> float:
    """p = P(null ≥ value) from Monte-Carlo null draws, not floored at 1/(B+1).

    With at least ``min_exceed`` draws at or above the value: (b + 1)/(B + 1). Further out the Monte-Carlo share
    cannot resolve what a correction over many tests needs, so the tail of a gamma distribution fitted to the null
    draws by their mean and variance is used (Δ_eo is a non-negative sum of absolute deviations, right-skewed).
    """
    from scipy.stats import gamma

    null = np.asarray(null, float)
    null = null[~np.isnan(null)]
    if null.size == 0:
        return float("nan")
    b = int(np.sum(null >= value - 1e-12))
    if b >= min_exceed:
        return float((b + 1) / (null.size + 1))
    mean, var = float(null.mean()), float(null.var(ddof=1)) if null.size > 1 else 0.0
    if mean <= 0 or var <= 0:
        return float((b + 1) / (null.size + 1))
    return float(gamma.sf(value, mean * mean / var, scale=var / mean))


def permutation_null_delta_eo(observed: np.ndarray, n_perm: int, rng: np.random.Generator) -> np.ndarray:
    """Δ_eo of ``n_perm`` permutations: within each class, predicted positives spread over the bins at random.

    Under "errors do not depend on the attribute", the number of predicted positives in each bin among the rows of
    class y is multivariate hypergeometric (bin sizes within class y, predicted positives of class y).
    """
    k = observed.shape[0]
    neg_sizes = observed[:, 0] + observed[:, 1]
    pos_sizes = observed[:, 2] + observed[:, 3]
    fp_perm = rng.multivariate_hypergeometric(neg_sizes, int(observed[:, 1].sum()), size=n_perm)
    tp_perm = rng.multivariate_hypergeometric(pos_sizes, int(observed[:, 3].sum()), size=n_perm)
    perm = np.empty((n_perm, k, 4))
    perm[..., 0] = neg_sizes - fp_perm
    perm[..., 1] = fp_perm
    perm[..., 2] = pos_sizes - tp_perm
    perm[..., 3] = tp_perm
    return delta_eo(perm)


def permutation_p_delta_eo(observed: np.ndarray, value: float, n_perm: int, rng: np.random.Generator) -> float:
    """Plain Monte-Carlo permutation p for Δ_eo, (b + 1)/(B + 1) (the audit uses :func:`tail_p` on the same null)."""
    d = permutation_null_delta_eo(observed, n_perm, rng)
    return float((np.sum(d >= value - 1e-12) + 1) / (n_perm + 1))


def centred_bootstrap_null_delta_eo(observed: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """Null draws for "error rates do not depend on the bins" from the centred bootstrap: Δ_eo of ``rate* − ratê``."""
    def rates(c):
        with np.errstate(invalid="ignore", divide="ignore"):
            return c[..., 1] / (c[..., 0] + c[..., 1]), c[..., 2] / (c[..., 2] + c[..., 3])

    fpr, fnr = rates(observed.astype(float))
    fpr_b, fnr_b = rates(boot.astype(float))
    cf, cn = fpr_b - fpr, fnr_b - fnr
    ok = ~(np.isnan(cf).any(axis=1) | np.isnan(cn).any(axis=1))
    cf, cn = cf[ok], cn[ok]
    return (np.abs(cf - cf.mean(axis=1, keepdims=True)).sum(axis=1)
            + np.abs(cn - cn.mean(axis=1, keepdims=True)).sum(axis=1))


def centred_bootstrap_p_delta_eo(observed: np.ndarray, boot: np.ndarray, value: float) -> float:
    """Plain Monte-Carlo p, (b + 1)/(B + 1), from :func:`centred_bootstrap_null_delta_eo`."""
    d = centred_bootstrap_null_delta_eo(observed, boot)
    if d.size == 0:
        return float("nan")
    return float((np.sum(d >= value - 1e-12) + 1) / (d.size + 1))


def _intervals(duals: list, levels: np.ndarray, equivalence: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of many tests at their own levels, from what each carries (``_dual``; a test without one gets
    NaN): of the difference, or (``equivalence``) the interval whose inclusion in ±margin at ``1 − 2a`` is the TOST
    at ``a``. Computed per kind in one vectorised call (the score interval's bisection per test cost seconds on the
    57-task benchmark)."""
    from fairdesk.core.stats import gaps as G

    n = len(duals)
    lo, hi = np.full(n, np.nan), np.full(n, np.nan)
    levels = np.asarray(levels, float)

    def kind_of(d):
        if not isinstance(d, dict):
            return None
        k = d["kind"]
        if k == "ac" and not equivalence:
            # a rate gap's difference: the inversion of the score test that decided it (Agresti–Caffo, whose centre
            # is pulled towards 0, still held 0 at the level where the score test rejected: every harm at the edge
            # of the adjusted level lost its verdict); its equivalence: the Agresti–Caffo interval of its TOST
            return "score"
        if k == "mover" and equivalence:
            return "normal"  # AUPRC's TOST is on the value scale
        return "normal" if k == "ac" else k

    kinds = [kind_of(d) for d in duals]
    for kind in set(kinds) - {None}:
        idx = np.array([i for i, k in enumerate(kinds) if k == kind])
        ok = idx[(levels[idx] > 0) & (levels[idx] < 1)]
        if not ok.size:
            continue
        ds = [duals[i] for i in ok]
        lv = levels[ok]
        col = lambda key: np.array([d.get(key, math.inf) for d in ds], float)  # noqa: E731
        if kind == "score":
            a, b = G.score_interval(col("x_a"), col("n_a"), col("x_b"), col("n_b"), col("deff"), lv, col("df"))
        elif kind == "normal":
            a, b = G.interval(col("centre"), col("se"), lv, col("df"))
        elif kind == "mover":
            from scipy.special import expit, logit

            qa, qb = G.quantile(lv, col("df_a")), G.quantile(lv, col("df_b"))
            va, vb, la, lb = col("a"), col("b"), col("lse_a"), col("lse_b")
            with np.errstate(invalid="ignore", divide="ignore"):
                ca = expit(logit(va) + np.array([[-1], [1]]) * qa * la)
                cb = expit(logit(vb) + np.array([[-1], [1]]) * qb * lb)
            a = np.array([G.mover(x, (c0, c1), y, (e0, e1)) for x, c0, c1, y, e0, e1
                          in zip(va, ca[0], ca[1], vb, cb[0], cb[1])]).reshape(-1, 2).T
            a, b = a[0], a[1]
        else:  # "band"
            if equivalence:
                continue
            a = np.zeros(ok.size)
            b = np.array([band(d["null"], v) for d, v in zip(ds, lv)])
        lo[ok], hi[ok] = a, b
    return lo, hi


def band(null: np.ndarray, level: float) -> float:
    """The ``level`` quantile of Δ_eo's null draws, from the draws while at least 10 lie beyond it, else from the
    gamma fitted to them (as :func:`tail_p` computes p), so that Δ_eo above the band ⇔ p < 1 − level."""
    from scipy.stats import gamma

    null = np.asarray(null, float)
    null = null[~np.isnan(null)]
    if not null.size:
        return math.nan
    if (1 - level) * null.size >= 10 or null.size < 2:
        return float(np.quantile(null, level))
    mean, var = float(null.mean()), float(null.var(ddof=1))
    if mean <= 0 or var <= 0:
        return float(np.quantile(null, level))
    return float(gamma.isf(1 - level, mean * mean / var, scale=var / mean))


def agreeing_intervals(t: pd.DataFrame, plan) -> pd.DataFrame:
    """Intervals that agree with the verdicts (false-coverage-rate intervals, Benjamini & Yekutieli 2005, at the
    level the test's family rejects at: ``level`` from :func:`correct`). The interval printed beside a verdict:

    - "differs": the difference's interval at ``1 − a`` (``a`` the family's rejection level for this test), which
      excludes 0;
    - "equivalent": the ``1 − 2a_eq`` interval of its adjusted TOST (inside ±margin), stretched to reach 0;
    - "inconclusive": the span of both, which holds 0 and is not inside ±margin.

    Where the test and its interval are not exact duals (the exact mid-p with few expected events, the score
    test's pseudo-row, AUPRC's MOVER interval against its logit test) they can still disagree at the edge; then the
    interval is widened when that keeps the verdict true (an "inconclusive" gap's interval stretched to 0 or to the
    margin), and otherwise the claim is not made: a "differs" whose interval holds 0, or an "equivalent" whose
    interval leaves ±margin, becomes "inconclusive". Δ_eo's interval is its null band [0, band]: "differs" ⇔ Δ_eo
    above it. The unadjusted intervals stay as ``ci_low_unadjusted`` / ``ci_high_unadjusted``."""
    t = t.copy()
    t["ci_low_unadjusted"], t["ci_high_unadjusted"] = t["ci_low"], t["ci_high"]
    margin = float(plan.margin)
    duals = t["_dual"].tolist()
    a = t["level"].to_numpy(float)
    a_eq = t["level_equivalence"].to_numpy(float)
    d_lo, d_hi = _intervals(duals, 1 - a)
    e_lo, e_hi = _intervals(duals, 1 - 2 * a_eq, equivalence=True)
    lows, highs, verdicts = t["ci_low"].tolist(), t["ci_high"].tolist(), t["verdict"].tolist()
    rows = zip(duals, verdicts, a, t["gap"].tolist(), t["q_equivalence"].tolist(), d_lo, d_hi, e_lo, e_hi)
    for i, (dual, verdict, level, gap, q_eq, dl, dh, el, eh) in enumerate(rows):
        if not isinstance(dual, dict) or verdict is None or not level > 0 or math.isnan(dh):
            continue
        if dual["kind"] == "band":
            if verdict == "differs" and not gap > dh:
                verdict = "inconclusive"
            if verdict != "differs" and gap > dh:
                dh = float(gap)
            lows[i], highs[i], verdicts[i] = 0.0, float(dh), verdict
            continue
        if verdict == "differs" and not (dl > 0 or dh < 0):
            verdict = "equivalent" if q_eq <= plan.alpha else "inconclusive"
        if verdict == "equivalent":
            lo, hi = min(el, 0.0), max(eh, 0.0)
            if not (-margin < lo and hi < margin):  # (NaN: not shown inside either)
                verdict = "inconclusive"
        if verdict == "differs":
            lo, hi = dl, dh
        elif verdict == "inconclusive":
            lo, hi = np.nanmin([dl, el, 0.0]), np.nanmax([dh, eh, 0.0])
            if -margin < lo and hi < margin:  # inside the margin yet not shown equivalent: stretched to it
                if abs(hi) >= abs(lo):
                    hi = margin
                else:
                    lo = -margin
        lows[i], highs[i], verdicts[i] = float(lo), float(hi), verdict
    t["ci_low"], t["ci_high"] = lows, highs
    t["verdict"] = pd.Series(verdicts, index=t.index, dtype=object)
    return t

