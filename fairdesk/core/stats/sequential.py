"""Anytime-valid confidence sequences: the two-sided normal-mixture boundary.

For a process S_t with mean-zero increments and (estimated) variance process V_t, Robbins' normal mixture

    u(V) = sqrt((V + ρ) · log((V + ρ) / (ρ · α²)))

bounds |S_t| at every t at once with probability at least 1 − α (exactly α of Brownian paths ever cross it:
Robbins 1970, "Statistical methods related to the law of the iterated logarithm", Ann. Math. Statist. 41; Howard,
Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist.
49, eq. (14) and Table 2 for the two-sided form). With V_t estimated from the data (sums of independent,
asymptotically normal period terms) the sequence is asymptotic in the sense of Waudby-Smith, Arbour, Sinha, Kennedy &
Ramdas (2024), "Time-uniform central limit theory and asymptotic confidence sequences", Ann. Statist. 52,
Theorem 2.2, whose width is this boundary with V = t·σ̂². ρ sets the intrinsic time at which the boundary is
tightest; their choice ρ = V* / (2 log(1/α) + log(1 + 2 log(1/α))) is about optimal at V = V*.

The boundary is a function of V only, so it is the same whether the periods arrive one at a time or all at once:
the monitor's chunked and one-call runs agree because of that.
"""
from __future__ import annotations

import math

import numpy as np


def normal_mixture_radius(v, rho: float, alpha: float):
    """u(V) above: |S_t| ≤ u(V_t) for all t with probability ≥ 1 − α (two-sided, one mixture)."""
    if not (0.0 < alpha < 1.0) or not rho > 0.0:
        raise ValueError("normal_mixture_radius needs 0 < alpha < 1 and rho > 0.")
    v = np.asarray(v, dtype=float)
    return np.sqrt((v + rho) * np.log((v + rho) / (rho * alpha ** 2)))


def tuned_rho(v_star: float, alpha: float) -> float:
    """The ρ at which :func:`normal_mixture_radius` is about tightest at intrinsic time ``v_star`` (Waudby-Smith
    et al. 2024, after Theorem 2.2: ρ = V* / (2 log(1/α) + log(1 + 2 log(1/α))))."""
    if not v_star > 0.0:
        raise ValueError("tuned_rho needs a positive intrinsic time.")
    a = 2.0 * math.log(1.0 / alpha)
    return float(v_star / (a + math.log(1.0 + a)))


def confidence_sequence(s: float, v: float, w: float, rho: float, alpha: float) -> tuple[float, float, float]:
    """(estimate, low, high) of δ from S = Σ w_p·d_p with Var(S) ≈ V and W = Σ w_p, where each period's d_p has
    mean δ: δ̂ = S/W ± u(V)/W."""
    if not w > 0.0 or not v > 0.0:
        return float("nan"), float("nan"), float("nan")
    est = s / w
    r = float(normal_mixture_radius(v, rho, alpha)) / w
    return est, est - r, est + r


def start_weights(j: int) -> float:
    """The share of a comparison's α spent on the sequence that starts at its j-th period (j = 1, 2, …):
    1/(j(j+1)), which sums to 1 over all j, so a union over every start time keeps the level whatever the number
    of periods."""
    if j < 1:
        raise ValueError("start index must be at least 1")
    return 1.0 / (j * (j + 1))
