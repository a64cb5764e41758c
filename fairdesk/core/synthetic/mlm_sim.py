"""Simulated masked-LM probe scores with known truth (METHODS §4).

:func:`simulate_probe_scores` returns the long score table :func:`fairdesk.core.audits.mlm_bias.category_statistics`
reads — one row per (category, template, attribute, group, word pair) with ``score`` — without a model, so the size
and power of the per-category tests can be measured in thousands of runs (tests, ``benchmarks/bench_mlm_bias.py``
and ``fairdesk-cli bench validity``).

The model of a score, for category c, template t, attribute a, word pair i and group g (male = +½, female = −½)::

    score = level[t, i]                      # the prior level of the word pair in this template: shared by both
                                             #   groups, so it cancels in the paired difference
          + g · (bias[c] + u[t])             # u[t] ~ N(0, template_sd): the template's own lean (its wording and
                                             #   prior), shared by every attribute and word pair of the template
          + e                                # e ~ N(0, noise_sd), independent per sentence

so the paired male − female difference of one (template, attribute, pair) is ``bias[c] + u[t] + e_m − e_f``. With
``bias`` = 0 everywhere the probe's null holds on average over templates, yet every template leans one way: the
situation in which a test over all (template, attribute, pair) rows is pseudo-replicated.

``template_law`` (:data:`TEMPLATE_LAWS`) sets the law of the template leans u[t], always with mean 0 and SD
``template_sd``: ``normal``; ``skewed`` (a centred exponential, skewness 2); ``lognormal`` (a centred lognormal with
log-SD 1, skewness 6.2: an extreme case); ``heavy`` (Student t with 3 df, symmetric, heavy tails); ``outlying``
(one template in ten shifted by +4 SD, the rest normal: an odd wording now and then); ``space``: a law drawn at random
from the stated space :data:`LAW_SPACE` each time leans are drawn (so each category of a simulated probe gets its own
law) — the space over which the template test's size is verified (docs/methods.md §4).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

TEMPLATE_LAWS: tuple[str, ...] = ("normal", "skewed", "lognormal", "heavy", "outlying", "twomode", "space", "fresh")
#: The space of template laws of ``template_law="space"``: one family drawn with equal chance, then its
#: parameters uniformly; every law has mean 0 and SD 1 and, when skewed or contaminated, a random direction.
#: gamma: |skewness| in 0.3–2.5 (shape 4/skewness²); lognormal: log-SD 0.1–0.64 (skewness 0.3–2.5); t3; contaminated:
#: a share 0.05–0.2 of templates shifted by 3–5 SD. Skewness beyond 2.5 is outside it (see docs/methods.md §4).
LAW_SPACE = {"families": ("normal", "gamma", "lognormal", "heavy", "contaminated", "twomode"),
             "gamma_skewness": (0.3, 2.5), "lognormal_sigma": (0.1, 0.64), "contaminated_share": (0.05, 0.2),
             "contaminated_shift": (3.0, 5.0), "twomode_share": (0.1, 0.3), "twomode_shift": (2.0, 5.0)}
#: Laws kept out of building the template test, to check it on (``template_law="fresh"``, one drawn per category):
#: three modes (two minorities of 5–20% each, shifted by 1.5–4 SD in either direction), a Weibull with shape 0.8–1.5
#: (skewness 1–2.4), a Beta(0.5–2, 4–10) (bounded and skewed), a Laplace (symmetric, heavy) and a skew-normal with
#: shape ±2–10; every law centred to mean 0 and scaled to SD 1, skewed ones in a random direction.
FRESH_LAW_SPACE = {"families": ("threemode", "weibull", "beta", "laplace", "skewnormal"),
                   "threemode_share": (0.05, 0.2), "threemode_shift": (1.5, 4.0), "weibull_shape": (0.8, 1.5),
                   "beta_a": (0.5, 2.0), "beta_b": (4.0, 10.0), "skewnormal_shape": (2.0, 10.0)}
#: The two word groups and the number of word pairs of the shipped lists (man↔woman, he↔she, male↔female, m↔f).
GROUPS = ("male", "female")
N_PAIRS = 4


def shipped_template_counts() -> dict[str, int]:
    """Templates per category of the shipped list (ADD 8, CVD 15, DIAB 15, DNR 4, DRUG 2, HIV 15, HTN 15, MENT 15)."""
    from fairdesk.core.text.templates import load_bias_templates

    return {c.code: len(c.templates) for c in load_bias_templates().categories}


def simulate_probe_scores(templates_per_category: dict[str, int] | None = None, n_attributes: int = 5,
                          template_sd: float = 0.5, noise_sd: float = 0.2, bias: dict[str, float] | None = None,
                          seed: int = 0, template_law: str = "normal") -> pd.DataFrame:
    """A score table with the columns ``category, template, attribute, group, pair_index, word, score``.

    ``templates_per_category`` maps category → number of templates (default: the shipped list's counts);
    ``n_attributes`` attribute phrases per category; ``template_sd`` the SD (nats) of the templates' own lean on
    the male − female difference; ``noise_sd`` the SD of each sentence's score around its template; ``bias`` maps
    category → the planted mean male − female difference in nats (default 0 for every category: the null);
    ``template_law`` the law of the template leans (:data:`TEMPLATE_LAWS`, mean 0, SD ``template_sd``)."""
    counts = dict(templates_per_category) if templates_per_category is not None else shipped_template_counts()
    bias = dict(bias or {})
    unknown = set(bias) - set(counts)
    if unknown:
        raise ValueError(f"bias names categories that are not simulated: {', '.join(sorted(unknown))}")
    if n_attributes < 1 or any(int(n) < 1 for n in counts.values()):
        raise ValueError("Every category needs at least one template and one attribute.")
    if template_law not in TEMPLATE_LAWS:
        raise ValueError(f"Unknown template law '{template_law}'; choose from {', '.join(TEMPLATE_LAWS)}.")
    rng = np.random.default_rng(seed)
    words = {"male": ("man", "he", "male", "m"), "female": ("woman", "she", "female", "f")}
    frames = []
    for code, n_t in counts.items():
        n_t = int(n_t)
        level = rng.normal(0.0, 1.0, size=(n_t, 1, N_PAIRS))               # shared by both groups
        lean = float(bias.get(code, 0.0)) + template_sd * template_leans(template_law, n_t, rng)[:, None, None]
        shape = (n_t, n_attributes, N_PAIRS)
        male = level + 0.5 * lean + rng.normal(0.0, noise_sd, size=shape)
        female = level - 0.5 * lean + rng.normal(0.0, noise_sd, size=shape)
        t_idx, a_idx, p_idx = np.meshgrid(np.arange(n_t), np.arange(n_attributes), np.arange(N_PAIRS),
                                          indexing="ij")
        for g, values in (("male", male), ("female", female)):
            frames.append(pd.DataFrame({
                "category": code,
                "template": [f"{code} template {t + 1}" for t in t_idx.ravel()],
                "attribute": [f"{code} attribute {a + 1}" for a in a_idx.ravel()],
                "group": g,
                "pair_index": p_idx.ravel(),
                "word": [words[g][i] for i in p_idx.ravel()],
                "score": values.ravel(),
            }))
    return pd.concat(frames, ignore_index=True)


def template_leans(law: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of a template law (:data:`TEMPLATE_LAWS`) standardised to mean 0 and SD 1."""
    if law == "normal":
        return rng.normal(size=n)
    if law == "skewed":
        return rng.exponential(size=n) - 1.0
    if law == "lognormal":
        x = rng.lognormal(0.0, 1.0, size=n)
        return (x - np.exp(0.5)) / np.sqrt((np.e - 1.0) * np.e)
    if law == "heavy":
        return rng.standard_t(3, size=n) / np.sqrt(3.0)
    if law == "outlying":
        return _contaminated(n, 0.1, 4.0, rng)
    if law == "twomode":   # most templates near 0, a fifth shifted by 4 SD
        return _contaminated(n, 0.2, 4.0, rng)
    if law == "space":
        family, params = draw_template_law(rng)
        return law_leans(family, params, n, rng)
    if law == "fresh":
        return fresh_leans(n, rng)
    raise ValueError(f"Unknown template law '{law}'; choose from {', '.join(TEMPLATE_LAWS)}.")


def _contaminated(n: int, share: float, shift: float, rng: np.random.Generator) -> np.ndarray:
    z = rng.normal(size=n) + shift * (rng.random(n) < share)
    return (z - shift * share) / np.sqrt(1.0 + shift ** 2 * share * (1.0 - share))


def draw_template_law(rng: np.random.Generator) -> tuple[str, dict]:
    """One law of :data:`LAW_SPACE`: (family, parameters) for :func:`law_leans`."""
    sp = LAW_SPACE
    family = str(rng.choice(sp["families"]))
    sign = float(rng.choice([-1.0, 1.0]))
    if family == "gamma":
        return family, {"skewness": float(rng.uniform(*sp["gamma_skewness"])), "sign": sign}
    if family == "lognormal":
        return family, {"sigma": float(rng.uniform(*sp["lognormal_sigma"])), "sign": sign}
    if family == "contaminated":
        return family, {"share": float(rng.uniform(*sp["contaminated_share"])),
                        "shift": float(rng.uniform(*sp["contaminated_shift"])), "sign": sign}
    if family == "twomode":
        return family, {"share": float(rng.uniform(*sp["twomode_share"])),
                        "shift": float(rng.uniform(*sp["twomode_shift"])), "sign": sign}
    return family, {}


def law_skewness(family: str, params: dict) -> float:
    """The skewness of a law of :data:`LAW_SPACE` (0 for the symmetric ones)."""
    if family == "gamma":
        return params["sign"] * params["skewness"]
    if family == "lognormal":
        w = np.exp(params["sigma"] ** 2)
        return float(params["sign"] * (w + 2.0) * np.sqrt(w - 1.0))
    if family in ("contaminated", "twomode"):
        p, d = params["share"], params["shift"]
        return float(params["sign"] * p * (1 - p) * (1 - 2 * p) * d ** 3 / (1 + d * d * p * (1 - p)) ** 1.5)
    return 0.0


def law_leans(family: str, params: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of the law (``family``, ``params``) of :func:`draw_template_law`, mean 0 and SD 1."""
    if family == "normal":
        return rng.normal(size=n)
    if family == "heavy":
        return template_leans("heavy", n, rng)
    if family == "gamma":
        k = 4.0 / params["skewness"] ** 2
        return params["sign"] * (rng.gamma(k, size=n) - k) / np.sqrt(k)
    if family == "lognormal":
        s = params["sigma"]
        x = rng.lognormal(0.0, s, size=n)
        return params["sign"] * (x - np.exp(s * s / 2)) / np.sqrt((np.exp(s * s) - 1.0) * np.exp(s * s))
    if family in ("contaminated", "twomode"):
        return params["sign"] * _contaminated(n, params["share"], params["shift"], rng)
    raise ValueError(f"Unknown template-law family '{family}'; choose from {', '.join(LAW_SPACE['families'])}.")


def fresh_leans(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of a law drawn from :data:`FRESH_LAW_SPACE` (mean 0, SD 1)."""
    from scipy import stats

    sp = FRESH_LAW_SPACE
    family = str(rng.choice(sp["families"]))
    sign = float(rng.choice([-1.0, 1.0]))
    if family == "threemode":
        p1, p2 = rng.uniform(*sp["threemode_share"], size=2)
        s1, s2 = rng.uniform(*sp["threemode_shift"], size=2) * rng.choice([-1.0, 1.0], size=2)
        u = rng.random(n)
        x = rng.normal(size=n) + s1 * (u < p1) + s2 * ((u >= p1) & (u < p1 + p2))
        m = s1 * p1 + s2 * p2
        v = 1 + s1 * s1 * p1 + s2 * s2 * p2 - m * m
        return (x - m) / np.sqrt(v)
    if family == "weibull":
        law = stats.weibull_min(float(rng.uniform(*sp["weibull_shape"])))
    elif family == "beta":
        law = stats.beta(float(rng.uniform(*sp["beta_a"])), float(rng.uniform(*sp["beta_b"])))
    elif family == "laplace":
        law = stats.laplace()
    else:
        law = stats.skewnorm(float(rng.uniform(*sp["skewnormal_shape"])))
    mean, var = (float(v) for v in law.stats(moments="mv"))
    return sign * (law.rvs(size=n, random_state=rng) - mean) / math.sqrt(var)
