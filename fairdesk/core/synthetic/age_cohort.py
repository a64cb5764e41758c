"""A generated demo cohort for the age-independent learners (METHODS §3), in the spirit of 000's DementiaBank.

DementiaBank is not redistributable, so FairDesk ships a generator instead. 000's v-structure ``age → X ← dx``:
age and diagnosis both shift a few hundred "linguistic" features, in different (but not orthogonal) directions,
and older participants are more often impaired (000 Fig. 2). A classifier trained on ``X`` can therefore infer age
and use it as evidence of dementia, so its false-positive rate rises and its false-negative rate falls with age
(a large Δ_eo^(N), METHODS §2).

Generative model (all draws from ``numpy.random.default_rng(seed)``)::

    participant i:   a_i ~ N(68, 9²) clipped to [45, 90]          (baseline age; 000: mean 68.3, sd 9.0)
                     dx_i ~ Bernoulli(sigmoid((a_i − 68) / 6))      (older → more often impaired; fixed per person;
                                                                     ``dx_age_scale=None``: Bernoulli(½), no link)
                     b_i ~ N(0, σ_p² I_d)                           (participant's own style, σ_p = 0.6)
                     S_i ~ uniform{1 … max_sessions}               (sessions, one year apart)
    session j:       age_ij = a_i + j
                     X_ij = age_signal · ((age_ij − 68) / 9) · u_age + dx_signal · (dx_i − ½) · u_dx
                            + b_i + e_ij,                           e_ij ~ N(0, σ_e² I_d), σ_e = 1

``u_age`` and ``u_dx`` are fixed loading vectors over the ``d`` features (each with unit RMS loading, i.e.
‖u‖² = d), drawn so that their cosine is ``cosine`` (0.3 by default: aging changes language "in a similar but
different fashion" from dementia). Only ``dense_share`` of the features (60 %) load on each, the rest is noise.

The **amount of age signal** is known in closed form: projected onto ``u_age / ‖u_age‖`` the age term has standard
deviation ``age_signal · √d`` (in units of standardised age) while the participant and session noise along that
direction has variance ``σ_p² + σ_e²``, so the oracle linear R² of age from the features (ignoring the diagnosis
term) is ``age_signal² · d / (age_signal² · d + σ_p² + σ_e²)`` per unit-variance age — see
:func:`oracle_age_r2`. With the defaults (d = 300, age_signal = 0.15) that is ≈ 0.95: age is easy to read from
the features, as 000 found for its linguistic features. ``age_signal = 0`` gives the same cohort (same ages,
diagnoses, participants, noise) without any age trace in the features: the control for "a model trained without the
age signal".

Columns: ``participant_id``, ``age`` (years, one decimal), ``label`` (1 = impaired), then the features ``f000 …``
(every other column is a feature, so the table goes straight into the protocol; sessions are in row order).
numpy/pandas only; 200 participants × 300 features in well under a second.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairdesk.core.errors import DataError

AGE_MEAN = 68.0
AGE_SD = 9.0
PARTICIPANT_SD = 0.6
SESSION_SD = 1.0


def oracle_age_r2(age_signal: float, n_features: int) -> float:
    """The R² of the best linear read-out of standardised age along ``u_age`` (see the module docstring)."""
    s2 = float(age_signal) ** 2 * int(n_features)
    return s2 / (s2 + PARTICIPANT_SD ** 2 + SESSION_SD ** 2)


def _loadings(rng: np.random.Generator, d: int, cosine: float, dense_share: float) -> tuple[np.ndarray, np.ndarray]:
    """Two loading vectors with ‖u‖² = d and cos(u_age, u_dx) = ``cosine`` (on a shared sparse support)."""
    k = max(2, int(round(dense_share * d)))
    support = rng.choice(d, size=k, replace=False)
    g = rng.standard_normal((k, 2))
    a = g[:, 0] / np.linalg.norm(g[:, 0])
    b = g[:, 1] - (g[:, 1] @ a) * a
    b /= np.linalg.norm(b)
    c = cosine * a + np.sqrt(1.0 - cosine ** 2) * b
    u_age, u_dx = np.zeros(d), np.zeros(d)
    u_age[support] = a * np.sqrt(d)
    u_dx[support] = c * np.sqrt(d)
    return u_age, u_dx


def make_age_cohort(n_participants: int = 200, n_features: int = 300, max_sessions: int = 4,
                    age_signal: float = 0.15, dx_signal: float = 0.12, cosine: float = 0.3,
                    dense_share: float = 0.6, dx_age_scale: float | None = 6.0, seed: int = 0) -> pd.DataFrame:
    """The demo cohort described in the module docstring, one row per session. ``dx_age_scale`` is the 6 of
    ``sigmoid((a_i − 68) / 6)``; ``None`` draws the diagnosis independently of age (Bernoulli(½): age and diagnosis
    are then independent causes of the features, the same random stream otherwise)."""
    if n_participants < 10:
        raise DataError("The demo cohort needs at least 10 participants.")
    if n_features < 3:
        raise DataError("The demo cohort needs at least 3 features.")
    if max_sessions < 1:
        raise DataError("Each participant needs at least one session.")
    if not -1.0 < cosine < 1.0:
        raise DataError("The cosine between the age and diagnosis directions must lie strictly between −1 and 1.")
    if age_signal < 0 or dx_signal < 0:
        raise DataError("Signal strengths must be ≥ 0.")
    if dx_age_scale is not None and not dx_age_scale > 0:
        raise DataError("The age scale of the diagnosis (dx_age_scale) must be > 0, or None for no link to age.")
    rng = np.random.default_rng(seed)
    u_age, u_dx = _loadings(rng, n_features, cosine, dense_share)
    base_age = np.clip(rng.normal(AGE_MEAN, AGE_SD, n_participants), 45.0, 90.0)
    p_dx = 0.5 if dx_age_scale is None else 1.0 / (1.0 + np.exp(-(base_age - AGE_MEAN) / dx_age_scale))
    dx = (rng.random(n_participants) < p_dx).astype(int)
    style = rng.normal(0.0, PARTICIPANT_SD, (n_participants, n_features))
    sessions = rng.integers(1, max_sessions + 1, n_participants)
    pid = np.repeat(np.arange(n_participants), sessions)
    session = np.concatenate([np.arange(s) for s in sessions])
    age = base_age[pid] + session
    noise = rng.normal(0.0, SESSION_SD, (pid.size, n_features))
    age_z = (age - AGE_MEAN) / AGE_SD
    x = (age_signal * age_z[:, None] * u_age[None, :] + dx_signal * (dx[pid] - 0.5)[:, None] * u_dx[None, :]
         + style[pid] + noise)
    width = len(str(n_features - 1))
    features = pd.DataFrame(x, columns=[f"f{j:0{max(3, width)}d}" for j in range(n_features)])
    head = pd.DataFrame({"participant_id": [f"P{i:04d}" for i in pid], "age": np.round(age, 1),
                         "label": dx[pid]})
    return pd.concat([head, features], axis=1)
