"""The synthetic structural causal model of 004 (§6.2, App. F.1) with TRUE counterfactuals (METHODS §6).

Structural equations (k = 32 features, n = 3 steps, σ = 0.01)::

    A    ~ Bernoulli(0.3)
    Z_n  = δ·A·1 + U_n,            U_n ~ N(0, I_k)           (δ = 0: the paper; δ > 0: the "confounded" variant)
    Z_i  = M_i Z_{i+1} A + N_i Z_{i+1} (1 − A) + ξ_i,   i = n−1 … 0,   ξ_i ~ N(0, σ² I_k)
    X    = M_X Z_0 + r + ε_X,      ε_X ~ N(0, σ² I_k)
    Y    = 1[U_Y < sigmoid(f_Y(Z_n))],   U_Y ~ U(0, 1)

``M_i, N_i ~ U(−10, 10)`` with every row divided by its L1 norm (as the authors' release does, so the chain stays
bounded); ``M_X, r ~ U(−1, 1)``; the weights of ``f_Y`` follow 004 App. F.1 (see :data:`F_Y_WEIGHTS`).

A unit is its exogenous draw ``(A, U_n, ξ_0 … ξ_{n−1}, ε_X, U_Y)``. Its counterfactual under ``do(A = a')`` keeps
every exogenous term and every structural parameter and recomputes the equations with ``A = a'``
(:meth:`SyntheticSCM.counterfactual`), so flipping twice returns the original ``X`` exactly. Counterfactual
invariance in 004 (Def. 4.1) conditions on the non-sensitive root ``Z = Z_n``; by default the counterfactual
therefore keeps ``Z_n`` itself (``hold_root=True``). In the paper's design (δ = 0) that is also the Pearl
counterfactual; in the confounded variant (δ > 0) ``A → Z_n → Y`` is a *legitimate* path that the audit holds fixed,
and ``hold_root=False`` gives the total-effect counterfactual ``Z_n' = U_n + δ·a'`` instead.

What the authors' release does differently (recorded, not copied): it redraws the matrices for the counterfactual,
uses ``A ~ Bernoulli(0.5)`` and a constant ``N_i``. FairDesk follows the paper.

numpy only; deterministic from the seed.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace

import numpy as np

from fairdesk.core.errors import DataError

DATASETS: tuple[str, ...] = ("linear", "quadratic", "exponential", "interactive", "log-exponent", "sin")

#: 004 App. F.1: ω_Y ~ N(0, scale² I) and b_Y ~ N(bias_mean, 1) per dataset.
F_Y_WEIGHTS: dict[str, dict[str, float]] = {
    "linear": {"w_std": 1.0, "b_mean": 0.0},        # f = ω·z + b
    "quadratic": {"w_std": 2.0, "b_mean": 20.0},    # f = ω·z² + b,     ω ~ N(0, 4I)
    "exponential": {"w_std": 1.0, "b_mean": 10.0},  # f = ω·exp(z) + b
    "interactive": {"w_std": 1.0, "b_mean": 0.0},   # f = Σ_{i≠j} ω_ij z_i z_j + b
    "log-exponent": {"w_std": 1.0, "b_mean": 5.0},  # f = log(exp(ω·z) + b)
    "sin": {"w_std": 1.0, "b_mean": 2.0},           # f = ω·sin(z) + b
}


def _dataset_key(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


@dataclass
class SCMSample:
    """Units drawn from the SCM: exogenous terms plus the endogenous variables they determine.

    ``z[0] = Z_0 … z[n] = Z_n`` (shape ``(n_steps + 1, n_units, k)``); ``xi[i]`` is the noise of ``Z_i``.
    """

    a: np.ndarray        # (m,) int 0/1
    u_root: np.ndarray   # (m, k) exogenous part of Z_n
    xi: np.ndarray       # (n_steps, m, k)
    eps_x: np.ndarray    # (m, k)
    u_y: np.ndarray      # (m,) uniform
    z: np.ndarray        # (n_steps + 1, m, k)
    x: np.ndarray        # (m, k)
    y: np.ndarray        # (m,) int 0/1
    p_y: np.ndarray      # (m,) sigmoid(f_Y(Z_n))

    @property
    def z_root(self) -> np.ndarray:
        """``Z_n``: the A-independent (paper) or A-shifted (confounded) root the audit conditions on."""
        return self.z[-1]

    def __len__(self) -> int:
        return int(self.a.shape[0])

    def subset(self, idx) -> "SCMSample":
        idx = np.asarray(idx)
        return SCMSample(a=self.a[idx], u_root=self.u_root[idx], xi=self.xi[:, idx], eps_x=self.eps_x[idx],
                         u_y=self.u_y[idx], z=self.z[:, idx], x=self.x[idx], y=self.y[idx], p_y=self.p_y[idx])


@dataclass
class SyntheticSCM:
    """One synthetic dataset of 004: fixed structural parameters drawn from ``seed``.

    ``delta`` > 0 gives the confounded variant: ``Z_n ~ N(δ·A·1, I)``, so A and Y are associated through the
    legitimate path ``A → Z_n → Y`` and a classifier reading ``Z_n`` is counterfactually invariant yet fails DP.
    """

    f_y_name: str = "linear"
    k: int = 32
    n_steps: int = 3
    sigma: float = 0.01
    p_a: float = 0.3
    delta: float = 0.0
    seed: int = 0
    M: np.ndarray = field(init=False, repr=False)
    N: np.ndarray = field(init=False, repr=False)
    M_x: np.ndarray = field(init=False, repr=False)
    r: np.ndarray = field(init=False, repr=False)
    w_y: np.ndarray = field(init=False, repr=False)
    b_y: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.f_y_name not in DATASETS:
            raise DataError(f"Unknown synthetic dataset '{self.f_y_name}'; choose from {', '.join(DATASETS)}.")
        if self.k < 2 or self.n_steps < 1:
            raise DataError("The synthetic SCM needs k ≥ 2 features and n ≥ 1 steps.")
        if not 0.0 < self.p_a < 1.0:
            raise DataError("P(A = 1) must lie strictly between 0 and 1.")
        # Parameters depend on the dataset name too: 004 uses a different realisation per f_Y.
        rng = np.random.default_rng([int(self.seed), _dataset_key(self.f_y_name)])
        k, n = self.k, self.n_steps

        def l1_rows(m: np.ndarray) -> np.ndarray:
            return m / np.abs(m).sum(axis=-1, keepdims=True)

        self.M = l1_rows(rng.uniform(-10.0, 10.0, size=(n, k, k)))
        self.N = l1_rows(rng.uniform(-10.0, 10.0, size=(n, k, k)))
        self.M_x = rng.uniform(-1.0, 1.0, size=(k, k))
        self.r = rng.uniform(-1.0, 1.0, size=k)
        spec = F_Y_WEIGHTS[self.f_y_name]
        if self.f_y_name == "interactive":
            w = rng.normal(0.0, spec["w_std"], size=(k, k))
            np.fill_diagonal(w, 0.0)
        else:
            w = rng.normal(0.0, spec["w_std"], size=k)
        self.w_y = w
        self.b_y = float(rng.normal(spec["b_mean"], 1.0))

    # ---------------------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.f_y_name + (f"+confounded(δ={self.delta:g})" if self.delta else "")

    @property
    def confounded(self) -> bool:
        return self.delta != 0.0

    def f_y(self, z_root: np.ndarray) -> np.ndarray:
        """The logit ``f_Y(Z_n)`` of 004 App. F.1."""
        z = np.asarray(z_root, dtype=float)
        name, w, b = self.f_y_name, self.w_y, self.b_y
        if name == "linear":
            return z @ w + b
        if name == "quadratic":
            return (z ** 2) @ w + b
        if name == "exponential":
            return np.exp(z) @ w + b
        if name == "interactive":
            return np.einsum("mi,ij,mj->m", z, w, z) + b
        if name == "log-exponent":
            # log(exp(s) + b) computed stably; b_Y ~ N(5, 1) is positive except with probability ~3e-7.
            s = z @ w
            if b <= 0:
                return np.log(np.maximum(np.exp(s) + b, 1e-300))
            return np.logaddexp(s, np.log(b))
        return np.sin(z) @ w + b  # sin

    def p_y_given_root(self, z_root: np.ndarray) -> np.ndarray:
        f = self.f_y(z_root)
        return 0.5 * (1.0 + np.tanh(0.5 * f))  # sigmoid without overflow

    def bayes_predict(self, z_root: np.ndarray) -> np.ndarray:
        """The Bayes classifier on the root: ``1[f_Y(Z_n) > 0]`` (the exact oracle, invariant by construction)."""
        return (self.f_y(z_root) > 0).astype(int)

    def propensity(self, z_root: np.ndarray) -> np.ndarray:
        """P(A = 1 | Z_n): constant p_A in the paper's design, logistic in Σ z for the confounded variant."""
        z = np.asarray(z_root, dtype=float)
        if not self.delta:
            return np.full(z.shape[0], self.p_a)
        d = self.delta
        logit = np.log(self.p_a / (1 - self.p_a)) + d * z.sum(axis=1) - 0.5 * self.k * d * d
        return 0.5 * (1.0 + np.tanh(0.5 * logit))

    # ---------------------------------------------------------------------------------------------------------
    def _propagate(self, a: np.ndarray, z_root: np.ndarray, xi: np.ndarray, eps_x: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Structural equations below the root: returns ``(z, x)`` with ``z[n] = z_root``."""
        n = self.n_steps
        m = z_root.shape[0]
        z = np.empty((n + 1, m, self.k))
        z[n] = z_root
        af = a.astype(float)[:, None]
        for i in range(n - 1, -1, -1):
            zi1 = z[i + 1]
            z[i] = (zi1 @ self.M[i].T) * af + (zi1 @ self.N[i].T) * (1.0 - af) + xi[i]
        x = z[0] @ self.M_x.T + self.r + eps_x
        return z, x

    def _assemble(self, a, u_root, xi, eps_x, u_y, z_root=None) -> SCMSample:
        a = np.asarray(a).astype(int)
        if z_root is None:
            z_root = u_root + self.delta * a[:, None]
        z, x = self._propagate(a, z_root, xi, eps_x)
        p_y = self.p_y_given_root(z_root)
        y = (u_y < p_y).astype(int)
        return SCMSample(a=a, u_root=u_root, xi=xi, eps_x=eps_x, u_y=u_y, z=z, x=x, y=y, p_y=p_y)

    def sample(self, n_units: int, seed: int | np.random.Generator = 0) -> SCMSample:
        """Draw ``n_units`` units (exogenous terms and the variables they determine)."""
        if n_units < 1:
            raise DataError("Draw at least one unit from the synthetic SCM.")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
            [int(seed), _dataset_key(self.f_y_name), 7])
        m, k = int(n_units), self.k
        a = (rng.random(m) < self.p_a).astype(int)
        u_root = rng.standard_normal((m, k))
        xi = rng.normal(0.0, self.sigma, size=(self.n_steps, m, k))
        eps_x = rng.normal(0.0, self.sigma, size=(m, k))
        u_y = rng.random(m)
        return self._assemble(a, u_root, xi, eps_x, u_y)

    def counterfactual(self, s: SCMSample, a_new=None, hold_root: bool = True) -> SCMSample:
        """The TRUE counterfactual of the same units under ``do(A = a_new)`` (default: A flipped).

        Same exogenous terms, same matrices; ``Z_n`` is kept (``hold_root=True``, the audit's conditioning set) or
        recomputed from ``U_n`` (``hold_root=False``, total effect). Applying it twice returns the original units.
        """
        a_new = 1 - s.a if a_new is None else np.broadcast_to(np.asarray(a_new).astype(int), s.a.shape).copy()
        if hold_root:
            # Z_n is held, so U_n is re-expressed for the new world: Z_n = U_n' + δ a'.
            u_root = s.z_root - self.delta * a_new[:, None]
            return self._assemble(a_new, u_root, s.xi, s.eps_x, s.u_y, z_root=s.z_root)
        return self._assemble(a_new, s.u_root, s.xi, s.eps_x, s.u_y)

    def with_delta(self, delta: float) -> "SyntheticSCM":
        """The same structural parameters with a different root shift δ (the confounded variant)."""
        return replace(self, delta=float(delta))

    def summary(self) -> dict:
        return {"dataset": self.f_y_name, "k": self.k, "n_steps": self.n_steps, "sigma": self.sigma,
                "p_a": self.p_a, "delta": self.delta, "seed": self.seed, "b_y": self.b_y}


def expected_counterfactual_accuracy(pred: np.ndarray, pred_cf: np.ndarray) -> float:
    """ECA = mean(f(x) == f(x_cf)) over the units (hard predictions)."""
    pred = np.asarray(pred)
    pred_cf = np.asarray(pred_cf)
    if pred.shape != pred_cf.shape or pred.size == 0:
        raise DataError("ECA needs predictions on the units and on their counterfactuals, of equal length.")
    return float(np.mean(pred == pred_cf))
