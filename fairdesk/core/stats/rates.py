"""Intervals of one rate (a group's recall, specificity or positive prediction rate), the numbers a notebook user
reads first (``fairdesk.audit_groups(...).rates()``).

* **Independent rows**: the Wilson score interval (Wilson 1927) — it covers close to its level from a handful of cases
  up, where the Wald interval does not (Brown, Cai & DasGupta 2001). Equals
  ``scipy.stats.binomtest(x, n).proportion_ci(method="wilson")``; hand-written because a table needs many at once.
* **Whole patients** (a patient has several rows in the rate's denominator): Wilson at the *effective* number of
  rows ``n / deff``, ``deff = max(1, V_patients / V_binomial)``, with the whole-patient sandwich variance of the
  gap audit (:func:`.gaps.cluster_rate_variance`, CR1) and Student's t with the gap audit's patient degrees of
  freedom (:func:`.gaps.cluster_df`) in place of the normal quantile — the effective-sample-size Wilson interval
  of survey statistics (Korn & Graubard 1998), built from the same pieces as the gap tests.
"""
from __future__ import annotations

import numpy as np

from fairdesk.core.stats import gaps as G


def wilson(x, n, level: float = 0.95, df=np.inf) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of ``x`` successes in ``n`` (vectorised; ``n`` may be an effective, non-whole count).
    ``df``: Student's t degrees of freedom of the quantile (infinite: the normal law). NaN where ``n`` is 0."""
    x, n = np.asarray(x, dtype=float), np.asarray(n, dtype=float)
    z = G.quantile(level, df)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = x / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(np.clip(p * (1 - p), 0, None) / n + z * z / (4 * n * n)) / denom
        low = np.where(x <= 0, 0.0, np.clip(centre - half, 0, 1))
        high = np.where(x >= n, 1.0, np.clip(centre + half, 0, 1))
    return np.where(n > 0, low, np.nan), np.where(n > 0, high, np.nan)


def rate_interval(hits, rows, patients=None, level: float = 0.95) -> dict:
    """The rate ``Σ hits / Σ rows`` of 0/1 row indicators (``rows``: the row is in the denominator; ``hits``: it is
    also in the numerator) with its interval. ``patients``: each row's patient (None: rows are independent); the
    whole-patient interval is used when some patient holds more than one denominator row.

    Returns ``{"n", "numerator", "rate", "ci_low", "ci_high", "design_effect", "interval"}``."""
    hits, rows = np.asarray(hits, dtype=bool), np.asarray(rows, dtype=bool)
    hits = hits & rows
    n, x = int(rows.sum()), int(hits.sum())
    out = {"n": n, "numerator": x, "rate": x / n if n else float("nan"), "design_effect": 1.0,
           "interval": "Wilson"}
    if n == 0:
        out.update(ci_low=float("nan"), ci_high=float("nan"))
        return out
    deff, df = 1.0, np.inf
    if patients is not None:
        ids = np.asarray(patients)[rows]
        _, inverse = np.unique(ids, return_inverse=True)
        m = np.bincount(inverse).astype(float)
        if (m > 1).any():
            h = np.bincount(inverse, weights=hits[rows].astype(float), minlength=m.size)
            p_smooth = (x + G.JEFFREYS) / (n + 1)  # never 0, so a rate of 0 or 1 keeps deff 1
            deff = max(1.0, G.cluster_rate_variance(h, m) / (p_smooth * (1 - p_smooth) / n))
            df = G.cluster_df(m)
            out["interval"] = "Wilson, whole patients (effective n, t reference)"
    lo, hi = wilson(x / deff, n / deff, level, df)
    out.update(ci_low=float(lo), ci_high=float(hi), design_effect=float(deff))
    return out
