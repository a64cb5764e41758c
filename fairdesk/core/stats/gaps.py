"""Tests and intervals for a difference of two rates, ``d = x_a/n_a − x_b/n_b`` (METHODS §1).

Why not the bootstrap percentile interval and tail-share p any more (``bootstrap_p_value``): a Monte-Carlo tail
share is floored at ``1/(B+1)``, so with 1,000 replicates no gap can survive a correction over a few dozen tests;
and the percentile interval of a rate on 10–20 cases under-covers (0.73–0.77 without smoothing) or, with the
Jeffreys pseudo-rows, is conservative and shifted off the estimate (see ``benchmarks/bench_group_intervals.py``).

What is used instead, for each tested pair of groups (all vectorised over pairs):

* **design effect** ``deff = Var*(d) / V1``: the bootstrap variance of the difference (rows resampled within groups,
  with the Jeffreys half pseudo-row, see :mod:`.bootstrap`; whole patients: below) over its binomial value
  ``V1 = Σ p̃(1 − p̃)/n``, ``p̃ = (x + ½)/(n + 1)``. About 1 for independent rows; above 1 when a patient's rows are
  correlated. The bootstrap is used only for this ratio, so its p-value is not a Monte-Carlo share and has no floor.
* **test of d = 0**: a score test with the design effect, ``z = d / sqrt(deff · V0)``, ``V0 = p̄(1 − p̄)(1/n_a + 1/n_b)``
  at the pooled rate ``p̄ = (x_a + x_b + ½)/(n_a + n_b + 1)``; two-sided normal p. (The Wald test with the
  bootstrap's own SE was liberal at 10–40 cases: size 0.06–0.13 at α = 0.05.)
  With independent rows and fewer than ``MIN_EXPECTED_CELL`` expected events in the 2×2 table, the conditional
  exact test's mid-p instead (:func:`gap_p_value`).
* **interval**: Agresti–Caffo — add one success and one failure to each group, ``c = (x_a+1)/(n_a+2) − (x_b+1)/(n_b+2)``,
  ``se = sqrt(deff · Σ p'(1 − p')/(n + 2))``, ``c ± z·se`` clipped to [−1, 1]. Chosen by the coverage study.
  With repeated patients instead the inversion of the score test (:func:`score_interval`; the TOST likewise,
  :func:`score_tost_p`): Agresti–Caffo's variance at the observed rates swung with the gap when the design effect
  is large, and the interval missed 0 more often than the test rejected.
* **equivalence (TOST)** within ``±margin`` on the same scale: ``p_eq = max(Φ((c − m)/se), Φ((−m − c)/se))``;
  ``p_eq ≤ α`` exactly when the ``1 − 2α`` interval lies inside ``(−m, m)``.

**Whole patients, few or unequal**: with repeated patients the reference law is Student's t with
:func:`cluster_df` degrees of freedom (a Bell–McCaffrey-type count of the patients that carry the variance), and the
design effect's variance is the whole-patient sandwich of each rate given its patients with ``G/(G − 1)``
(:func:`cluster_rate_variance`; the whole-patient bootstrap also redraws how many patients a rate rests on, which
inflates the variance of a rate on a handful of patients). ``df = inf`` (rows independent) is the normal law.

Hand-written because no installed library offers these with a design effect (statsmodels, which has the
Agresti–Caffo interval for independent rows, is not a FairDesk dependency); scipy supplies the normal law.
"""
from __future__ import annotations

import math

import numpy as np

JEFFREYS = 0.5


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=float)


def binomial_variance(x_a, n_a, x_b, n_b) -> np.ndarray:
    """``V1``: binomial variance of the difference at the Jeffreys-smoothed rates (never 0)."""
    x_a, n_a, x_b, n_b = map(_f, (x_a, n_a, x_b, n_b))
    pa, pb = (x_a + JEFFREYS) / (n_a + 1), (x_b + JEFFREYS) / (n_b + 1)
    return pa * (1 - pa) / n_a + pb * (1 - pb) / n_b


def design_effect(boot_diff: np.ndarray, x_a, n_a, x_b, n_b) -> np.ndarray:
    """Bootstrap variance of the difference (replicates on axis 0, NaN ignored) over its binomial value."""
    with np.errstate(invalid="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            var = np.nanvar(boot_diff, axis=0, ddof=1)
    return var / binomial_variance(x_a, n_a, x_b, n_b)


def tail(z, df=np.inf) -> np.ndarray:
    """Lower tail ``P(T ≤ z)`` of Student's t with ``df`` degrees of freedom; the normal law when df is infinite."""
    from scipy.special import ndtr, stdtr  # the cdfs without scipy.stats' per-call overhead (~0.3 ms)

    z, df = _f(z), _f(df)
    return np.where(np.isfinite(df), stdtr(np.where(np.isfinite(df), df, 1.0), z), ndtr(z))


def quantile(level: float, df=np.inf) -> np.ndarray:
    """The two-sided ``level`` critical value of Student's t with ``df`` degrees of freedom (normal when infinite)."""
    from scipy.special import ndtri, stdtrit

    df = _f(df)
    q = 0.5 + level / 2
    return np.where(np.isfinite(df), stdtrit(np.where(np.isfinite(df), df, 1.0), q), ndtri(q))


def effective_patients(rows_per_patient) -> float:
    """Effective number of patients ``(Σ m²)² / Σ m⁴`` of a group whose patients hold ``m`` rows each (those with
    no row left out): the Kish-type count under the working model that a patient's rows move together, so that a
    patient's share of a rate's variance is ∝ m². Equals G for G patients of one size; 100 single-row patients and
    10 of 30 rows count as about 10."""
    m = _f(rows_per_patient)
    m2 = m[m > 0] ** 2
    return float(m2.sum() ** 2 / (m2 * m2).sum()) if m2.size else 0.0


def cluster_df(rows_a, rows_b=None, var_a=1.0, var_b=1.0) -> float:
    """Degrees of freedom of a test or interval whose variance is a whole-patient sandwich: each group's
    effective number of patients (:func:`effective_patients`) minus 1, combined for a difference of two groups by
    Welch–Satterthwaite, ``(V_a + V_b)² / (V_a²/df_a + V_b²/df_b)`` with the groups' variances ``var_a``, ``var_b``.
    The Bell–McCaffrey idea (a t reference whose df come from the clusters that carry the variance, not from the
    rows) with a working model that keeps it in closed form; at least 1."""
    df_a = max(effective_patients(rows_a) - 1.0, 1.0)
    if rows_b is None:
        return df_a
    df_b = max(effective_patients(rows_b) - 1.0, 1.0)
    va, vb = float(var_a), float(var_b)
    if not (va + vb) > 0:
        return min(df_a, df_b)
    return float(max(1.0, (va + vb) ** 2 / (va * va / df_a + vb * vb / df_b)))


def small_sample_factor(n_patients) -> float:
    """``G/(G − 1)``: the factor by which a whole-patient sandwich (or bootstrap) variance over G patients falls
    short of unbiased (CR1); 1 when there is at most one patient (no variance to correct)."""
    g = float(n_patients)
    return g / (g - 1.0) if g > 1 else 1.0


def cluster_rate_variance(hits, rows) -> float:
    """Whole-patient (CR1) sandwich variance of a rate ``Σ hits / Σ rows`` over the patients with a row in its
    denominator (``rows`` > 0): ``G/(G − 1) · Σ_p (h_p − r·m_p)² / (Σ m_p)²`` — the ratio estimator's linearised
    variance given those G patients (the whole-patient bootstrap also redraws G, which with a handful of
    patients inflates the variance). 0 without a row or when every patient's rate equals r."""
    h, m = _f(hits), _f(rows)
    keep = m > 0
    h, m = h[keep], m[keep]
    if not m.size:
        return 0.0
    r = h.sum() / m.sum()
    return small_sample_factor(m.size) * float(((h - r * m) ** 2).sum()) / float(m.sum()) ** 2


def score_test(x_a, n_a, x_b, n_b, deff=1.0, df=np.inf) -> tuple[np.ndarray, np.ndarray]:
    """(z, two-sided p) of "the two rates are equal" (pooled-variance score test times the design effect; p from
    Student's t with ``df`` degrees of freedom when patients repeat, else normal)."""
    x_a, n_a, x_b, n_b, deff = map(_f, (x_a, n_a, x_b, n_b, deff))
    d = x_a / n_a - x_b / n_b
    pooled = (x_a + x_b + JEFFREYS) / (n_a + n_b + 1)
    v0 = pooled * (1 - pooled) * (1 / n_a + 1 / n_b)
    z = d / np.sqrt(deff * v0)
    return z, 2 * tail(-np.abs(z), df)


#: A 2×2 table whose smallest expected count is below this is not tested against the normal law (Cochran's rule
#: says 5; at 5–10 the score test still rejected up to 0.071 of null pairs of two groups of 13–16 at rates near ½,
#: exactly enumerated, and the conditional mid-p ≤ 0.06 — 10 rather than 5 costs about 1 point of mean power, docs/methods.md §1).
MIN_EXPECTED_CELL = 10.0


def smallest_expected_cell(x_a, n_a, x_b, n_b) -> np.ndarray:
    """The smallest expected count of the 2×2 table (rate numerator and its complement by group) under "the two rates
    are equal", given its margins: ``min(n_a, n_b) · min(t, N − t) / N`` with ``t = x_a + x_b``, ``N = n_a + n_b``."""
    x_a, n_a, x_b, n_b = map(_f, (x_a, n_a, x_b, n_b))
    t, big_n = x_a + x_b, n_a + n_b
    return np.minimum(n_a, n_b) * np.minimum(t, big_n - t) / big_n


def conditional_midp(x_a, n_a, x_b, n_b) -> np.ndarray:
    """Two-sided mid-p of the conditional exact test of equal rates (Fisher's test with the mid-p, Lancaster 1961):
    given both margins ``x_a`` is hypergeometric under the null, ``p = 2·min(P(X < x_a) + ½P(X = x_a), P(X > x_a) +
    ½P(X = x_a))``. scipy has Fisher's test without the mid-p (conservative with few events) and no vectorised
    form, so only the tails are hand-combined here; scipy supplies the hypergeometric law."""
    from scipy.stats import hypergeom

    x_a, n_a, x_b, n_b = (np.rint(_f(v)).astype(np.int64) for v in (x_a, n_a, x_b, n_b))
    big_n, t = n_a + n_b, x_a + x_b
    lower = hypergeom.cdf(x_a - 1, big_n, t, n_a) + 0.5 * hypergeom.pmf(x_a, big_n, t, n_a)
    return np.minimum(1.0, 2 * np.minimum(lower, 1 - lower))


def gap_p_value(x_a, n_a, x_b, n_b, deff=1.0, df=np.inf) -> np.ndarray:
    """Two-sided p of "the two rates are equal", as the group audit tests it: the score test with the design effect
    (:func:`score_test`, Student's t with ``df`` when patients repeat) — but with independent rows (``df``
    infinite) and a table whose smallest expected count is below :data:`MIN_EXPECTED_CELL` the conditional exact
    test's mid-p (:func:`conditional_midp`), which needs no normal law (11–16 positives at recall 0.99
    against 1,000 made a single miss "significant"; the score test's size was 0.09–0.12 there)."""
    _, p = score_test(x_a, n_a, x_b, n_b, deff, df)
    small = ~np.isfinite(_f(df)) & (smallest_expected_cell(x_a, n_a, x_b, n_b) < MIN_EXPECTED_CELL)
    if np.any(small):
        p = np.array(p, dtype=float)
        x_a, n_a, x_b, n_b, small = np.broadcast_arrays(*map(_f, (x_a, n_a, x_b, n_b)), small)
        p[small] = conditional_midp(x_a[small], n_a[small], x_b[small], n_b[small])
    return p


def agresti_caffo(x_a, n_a, x_b, n_b, deff=1.0) -> tuple[np.ndarray, np.ndarray]:
    """(centre, standard error) of the Agresti–Caffo interval, the variance times the design effect."""
    x_a, n_a, x_b, n_b, deff = map(_f, (x_a, n_a, x_b, n_b, deff))
    pa, pb = (x_a + 1) / (n_a + 2), (x_b + 1) / (n_b + 2)
    se = np.sqrt(deff * (pa * (1 - pa) / (n_a + 2) + pb * (1 - pb) / (n_b + 2)))
    return pa - pb, se


def restricted_variance(x_a, n_a, x_b, n_b, delta) -> np.ndarray:
    """Binomial variance of the difference, ``p_a(1 − p_a)/n_a + p_b(1 − p_b)/n_b``, at the maximum-likelihood rates
    under the constraint ``p_a − p_b = delta`` (Miettinen & Nurminen 1985, the closed-form root of their cubic; at
    ``delta = 0`` the pooled rate). Hand-written: scipy has no such estimator and statsmodels (whose
    ``confint_proportions_2indep(method="score")`` has it) is not a FairDesk dependency."""
    x_a, n_a, x_b, n_b, delta = map(_f, (x_a, n_a, x_b, n_b, delta))
    big_n = n_a + n_b
    l3 = big_n
    l2 = (n_a + 2 * n_b) * delta - big_n - x_a - x_b
    l1 = (n_b * delta - big_n - 2 * x_b) * delta + x_a + x_b
    l0 = x_b * delta * (1 - delta)
    q = l2 ** 3 / (3 * l3) ** 3 - l1 * l2 / (6 * l3 ** 2) + l0 / (2 * l3)
    p = np.sign(q) * np.sqrt(np.maximum(l2 ** 2 / (3 * l3) ** 2 - l1 / (3 * l3), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(p != 0, q / np.where(p != 0, p, 1.0) ** 3, 0.0)
    a = (math.pi + np.arccos(np.clip(r, -1.0, 1.0))) / 3
    pb = np.clip(2 * p * np.cos(a) - l2 / (3 * l3), 0.0, 1.0)
    pa = np.clip(pb + delta, 0.0, 1.0)
    return pa * (1 - pa) / n_a + pb * (1 - pb) / n_b


def score_interval(x_a, n_a, x_b, n_b, deff=1.0, level: float = 0.95, df=np.inf) -> tuple[np.ndarray, np.ndarray]:
    """The interval of ``d = x_a/n_a − x_b/n_b`` that inverts the score test: every ``δ`` with
    ``|d − δ| ≤ q·sqrt(deff · V(δ))``, ``V`` the :func:`restricted_variance` at ``δ`` and ``q`` the normal or
    Student-t (``df``) critical value — the test's own variance at each candidate gap, so the interval excludes 0
    when the score test rejects (up to the test's ½ pseudo-row in the pooled rate). Why not Agresti–Caffo with the
    design effect: its variance is taken at the observed rates, which with repeated patients (a design effect of
    5–20) swing with the gap itself; the interval then missed 0 in 6.4% of null parity pairs at 10–99 case
    patients while the test rejected 4.2% (docs/methods.md §1). Bounds by bisection (40 halvings, vectorised):
    the score statistic is monotone on each side of ``d``; clipped to [−1, 1]."""
    x_a, n_a, x_b, n_b, deff = (np.stack([v, v]) for v in np.broadcast_arrays(*map(_f, (x_a, n_a, x_b, n_b, deff))))
    q2 = _f(quantile(level, df)) ** 2
    d = x_a / n_a - x_b / n_b  # row 0: the lower bound's search, row 1: the upper's (one pass for both)
    far = np.stack([np.full(d.shape[1:], -1.0), np.full(d.shape[1:], 1.0)])

    def outside(delta):
        return (d - delta) ** 2 > q2 * deff * restricted_variance(x_a, n_a, x_b, n_b, delta)

    inner, outer = d, far  # inner: inside the interval; outer: outside it (or the bound ±1)
    for _ in range(40):  # to 2⁻⁴⁰: far below any printed digit
        mid = (inner + outer) / 2
        out = outside(mid)
        outer, inner = np.where(out, mid, outer), np.where(out, inner, mid)
    bound = np.where(outside(far), (inner + outer) / 2, far)
    return bound[0], bound[1]


def score_tost_p(x_a, n_a, x_b, n_b, margin: float, deff=1.0, df=np.inf) -> np.ndarray:
    """p of the two one-sided score tests of "|difference| ≥ margin" (Farrington & Manning 1990, with the design
    effect and ``df``): each side's variance is the :func:`restricted_variance` at ``δ = ±margin``. ``p ≤ α`` exactly
    when the ``1 − 2α`` :func:`score_interval` lies inside ``(−margin, margin)``."""
    x_a, n_a, x_b, n_b, deff = map(_f, (x_a, n_a, x_b, n_b, deff))
    d = x_a / n_a - x_b / n_b
    se_hi = np.sqrt(deff * restricted_variance(x_a, n_a, x_b, n_b, margin))
    se_lo = np.sqrt(deff * restricted_variance(x_a, n_a, x_b, n_b, -margin))
    return np.maximum(tail((d - margin) / se_hi, df), tail((-margin - d) / se_lo, df))


def interval(centre, se, level: float = 0.95, df=np.inf) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided interval ``centre ± q·se`` (q normal, or Student's t with ``df``) clipped to [−1, 1]."""
    z = quantile(level, df)
    centre, se = _f(centre), _f(se)
    return np.clip(centre - z * se, -1, 1), np.clip(centre + z * se, -1, 1)


def tost_p(centre, se, margin: float, df=np.inf) -> np.ndarray:
    """p of the two one-sided tests of "|difference| ≥ margin" (small p: equivalent within ±margin)."""
    centre, se = _f(centre), _f(se)
    return np.maximum(tail((centre - margin) / se, df), tail((-margin - centre) / se, df))


def newcombe(x_a, n_a, x_b, n_b, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe's hybrid score interval (method 10) from Wilson intervals; the coverage study's comparator."""
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)

    def wilson(x, n):
        p = x / n
        mid = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return mid - half, mid + half

    x_a, n_a, x_b, n_b = map(_f, (x_a, n_a, x_b, n_b))
    pa, pb = x_a / n_a, x_b / n_b
    la, ua = wilson(x_a, n_a)
    lb, ub = wilson(x_b, n_b)
    d = pa - pb
    low = d - np.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    high = d + np.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    return low, high


def mover(a: float, ci_a: tuple[float, float], b: float, ci_b: tuple[float, float]) -> tuple[float, float]:
    """Interval of ``a − b`` from each estimate's own interval (MOVER, the "method of variance estimates recovery",
    Zou & Donner 2008): ``a − b − √((a − l_a)² + (u_b − b)²)`` to ``a − b + √((u_a − a)² + (b − l_b)²)``. The
    difference inherits the asymmetry of intervals on a transformed scale (e.g. logit) instead of a symmetric
    interval around a − b on the value scale, which covers poorly when either estimate is near a bound."""
    (la, ua), (lb, ub) = ci_a, ci_b
    d = a - b
    return d - math.hypot(a - la, ub - b), d + math.hypot(ua - a, b - lb)
