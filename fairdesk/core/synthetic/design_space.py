"""Validity over a design space: group audits of designs drawn at random from a stated space,
with the size of every test and the coverage of every interval, by region.

The space (:data:`SPACE`): 2–8 groups of 30–5,000 rows, prevalence 0.01–0.5 drawn for each group (unequal),
AUROC 0.6–0.999, scores calibrated or miscalibrated (intercept ±1, slope ×0.5–2, which makes extreme scores), and
half of the designs clustered — patients with 1 to m rows (m drawn in 2–30, so cluster sizes are very unequal)
sharing their label and a strong patient effect (intra-patient correlation 0.3–0.9 of the latent score).

The model of one design (the truth of every number is known, most in closed form):

* a group's rows have labels y ~ Bernoulli(π_g) and a latent score L | y ~ N(μ_g + δ·y, 1), δ = √2·Φ⁻¹(AUROC), so
  the AUROC is the same in every group; with clustering, L = μ_g + δ·y_p + √ρ·u_p + √(1 − ρ)·e (the same marginal);
* the reported score is ``expit(α + β·(k_g + δ·L))`` (k_g = logit π_ref − δ²/2): with α = 0, β = 1 and π_ref = π_g it
  is each group's true risk (calibrated); its true calibration slope is 1/β (but where the clipping of the scores
  binds), and the rates at the threshold are normal tail areas of L.

Three modes decide which tests have a true null (their rejection rate is the test's size):

* ``label``: μ_g = 0 and one score map for all groups — recall, specificity and AUROC are equal in every group,
  prevalence (so parity and AUPRC) differ;
* ``parity``: μ_g solved so that every group is flagged at the same rate (parity equal, prevalence unequal: the case
  of the label-stratified bootstrap defect) — AUROC equal too;
* ``calibrated``: the score is each group's own risk (π_ref = π_g), so every group's calibration test is a true null
  when α = 0 and β = 1 — AUROC equal too.

Every interval's coverage is measured against its true value (rate gaps in closed form; the calibration intercept,
slope, O/E, Brier and ECE exactly by numerical integration, :func:`calibration_truths`; AUPRC from one large
independent sample of the population, :data:`TRUTH_ROWS` rows per group).

Entry point: :func:`run_design_space` ``(designs, seed, n_boot, progress, cancel) -> DesignSpaceResult``; the map
by region is :meth:`DesignSpaceResult.regions` (each region's verdict meets / fails / unclear(n),
:func:`region_verdict`) and the figure :func:`plot_regions`. A region left "unclear" (too few tests to tell) gets
designs drawn to reach it: ``run_design_space(..., regions=("MEASURE | REGION",))`` (:func:`draw_targeted`) or a
second pass over every unclear region, :func:`resolve_unclear` (more data sets of its own designs and new designs,
decided by a sequential rule).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.stats.verified_region import case_patients, cases_of

ALPHA = 0.05
SIZE_TARGET = ALPHA + 0.02  # the promise: per-test size ≤ α + 0.02
COVERAGE_TARGET = 0.93      # the promise: 95% intervals cover at least 0.93
TRUTH_ROWS = 100_000        # rows per group of the large sample behind the Monte-Carlo truths
DEFAULT_N_BOOT = 200

SPACE = {"groups": (2, 8), "rows_per_group": (30, 5000), "prevalence": (0.01, 0.5), "auroc": (0.6, 0.999),
         "calibration_intercept": (-1.0, 1.0), "calibration_slope_factor": (0.5, 2.0),
         "rows_per_patient": (1, 30), "patient_correlation": (0.3, 0.9), "flag_rate": (0.05, 0.5),
         "modes": ("label", "parity", "calibrated"), "share_clustered": 0.5, "share_miscalibrated": 0.5}

RATE_MEASURES = ("parity", "recall", "specificity")
DISC_MEASURES = ("auroc", "auprc")
CAL_MEASURES = ("calibration_intercept", "calibration_slope", "oe_ratio", "brier", "ece")
#: Bands of the cases a measure rests on (:func:`fairdesk.core.stats.verified_region.cases_of`).
CASE_BANDS = ((10, 30), (30, 100), (100, 300), (300, math.inf))


@dataclass
class Design:
    mode: str
    sizes: list[int]
    prevalence: list[float]
    auroc: float
    alpha: float          # score intercept (0: calibrated)
    beta: float           # score slope factor (1: calibrated)
    flag_rate: float      # target share flagged (sets the threshold)
    max_rows_per_patient: int   # 1: independent rows
    rho: float            # intra-patient correlation of the latent score
    mu: list[float] = field(default_factory=list)
    threshold: float = 0.5

    @property
    def delta(self) -> float:
        from scipy.special import ndtri

        return float(math.sqrt(2.0) * ndtri(self.auroc))

    @property
    def clustered(self) -> bool:
        return self.max_rows_per_patient > 1

    def k(self) -> np.ndarray:
        """k_g = logit π_ref − δ²/2 per group (π_ref = π_g in the calibrated mode, the mean prevalence otherwise)."""
        from scipy.special import logit

        p = np.asarray(self.prevalence)
        ref = p if self.mode == "calibrated" else np.full(p.size, p.mean())
        return logit(ref) - self.delta ** 2 / 2

    def cutoffs(self) -> np.ndarray:
        """The latent cut-off c_g of the threshold in each group: score ≥ τ ⇔ L ≥ c_g."""
        from scipy.special import logit

        return ((logit(self.threshold) - self.alpha) / self.beta - self.k()) / self.delta

    def true_rates(self) -> dict[str, np.ndarray]:
        from scipy.special import ndtr

        c, mu, p = self.cutoffs(), np.asarray(self.mu), np.asarray(self.prevalence)
        tpr, fpr = ndtr(mu + self.delta - c), ndtr(mu - c)
        return {"recall": tpr, "specificity": 1 - fpr, "parity": p * tpr + (1 - p) * fpr}


def draw_design(rng: np.random.Generator, space: dict | None = None) -> Design:
    """One design drawn from :data:`SPACE` (``space``: a narrower one, e.g. small groups for a quick check)."""
    from scipy.optimize import brentq
    from scipy.special import expit, ndtr, ndtri

    sp = {**SPACE, **(space or {})}
    g = int(rng.integers(sp["groups"][0], sp["groups"][1] + 1))
    lo, hi = sp["rows_per_group"]
    sizes = [int(round(math.exp(rng.uniform(math.log(lo), math.log(hi))))) for _ in range(g)]
    plo, phi = sp["prevalence"]
    prev = [float(math.exp(rng.uniform(math.log(plo), math.log(phi)))) for _ in range(g)]
    # AUROC uniform on the probit scale over 0.6–0.999: the high-AUROC end (extreme scores) is well represented
    z = rng.uniform(ndtri(sp["auroc"][0]), ndtri(sp["auroc"][1]))
    auroc = float(ndtr(z))
    mode = str(rng.choice(sp["modes"]))
    miscal = rng.random() < sp["share_miscalibrated"]
    alpha = float(rng.uniform(*sp["calibration_intercept"])) if miscal else 0.0
    beta = float(math.exp(rng.uniform(*np.log(sp["calibration_slope_factor"])))) if miscal else 1.0
    clustered = rng.random() < sp["share_clustered"]
    m = int(rng.integers(2, sp["rows_per_patient"][1] + 1)) if clustered else 1
    rho = float(rng.uniform(*sp["patient_correlation"])) if clustered else 0.0
    q = float(rng.uniform(*sp["flag_rate"]))
    d = Design(mode, sizes, prev, auroc, alpha, beta, q, m, rho, mu=[0.0] * g)
    # the threshold: a share q of the first group flagged (latent cut-off c₀ with P(L ≥ c₀) = q)
    p0, delta = prev[0], d.delta
    c0 = brentq(lambda c: p0 * ndtr(delta - c) + (1 - p0) * ndtr(-c) - q, -20, 20)
    d.threshold = float(np.clip(expit(alpha + beta * (d.k()[0] + delta * c0)), 1e-4, 1 - 1e-4))
    if mode == "parity":  # shift each group's latent score so that it is flagged as often as the first
        c = d.cutoffs()
        # at the threshold as clipped: near AUROC 1 the clip binds in ~5% of parity designs, and solving for the
        # drawn q then left the first group's rate apart from the others' (a false "null": the map counted those
        # designs' parity gaps as null tests, 0.23 of them rejected, and showed parity size 0.077–0.10)
        q = float(p0 * ndtr(delta - c[0]) + (1 - p0) * ndtr(-c[0]))
        d.mu = [0.0] + [float(brentq(lambda u, p=prev[j], cj=c[j]: p * ndtr(u + delta - cj)
                                     + (1 - p) * ndtr(u - cj) - q, -40, 40)) for j in range(1, g)]
    return d


def _latent(d: Design, g: int, n: int, rng: np.random.Generator, clustered: bool):
    """(y, L, patient ids) of n rows of group g."""
    if clustered and d.clustered:
        per = []
        while sum(per) < n:
            per.append(int(rng.integers(1, d.max_rows_per_patient + 1)))
        per[-1] -= sum(per) - n
        per = np.asarray([r for r in per if r > 0])
        yp = (rng.random(per.size) < d.prevalence[g]).astype(int)
        up = rng.standard_normal(per.size)
        pid = np.repeat(np.arange(per.size), per)
        e = rng.standard_normal(n)
        L = d.mu[g] + d.delta * yp[pid] + math.sqrt(d.rho) * up[pid] + math.sqrt(1 - d.rho) * e
        return yp[pid], L, pid
    y = (rng.random(n) < d.prevalence[g]).astype(int)
    return y, d.mu[g] + d.delta * y + rng.standard_normal(n), np.arange(n)


def _score(d: Design, g: int, L: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return np.clip(expit(d.alpha + d.beta * (d.k()[g] + d.delta * L)), 1e-6, 1 - 1e-6)


def simulate(d: Design, rng: np.random.Generator) -> pd.DataFrame:
    """One data set of the design: columns y, p (score), group (G1…), pid (patient)."""
    frames = []
    for g, n in enumerate(d.sizes):
        y, L, pid = _latent(d, g, n, rng, clustered=True)
        frames.append(pd.DataFrame({"y": y, "p": _score(d, g, L), "group": f"G{g + 1}",
                                    "pid": [f"G{g + 1}-{i}" for i in pid]}))
    return pd.concat(frames, ignore_index=True)


_GRID = np.linspace(-14.0, 14.0, 8001)  # latent grid (standard units around the classes' means) of the exact truths


def calibration_truths(d: Design, g: int) -> dict[str, float]:
    """The exact calibration numbers of group ``g`` (L | y ~ N(μ + δy, 1) — also the marginal with repeated
    patients — and the score ``expit(α + β(k + δL))`` clipped to [1e-6, 1 − 1e-6], as :func:`_score`), by the
    trapezoid rule on a fine latent grid: the population fits of the calibration intercept (offset model) and slope,
    O/E, Brier and ECE (10 equal-width bins of the score).

    Why not ``1/β`` for the slope, nor a large sample for the rest: where the clipping binds — a group
    whose latent scores are shifted far out (mode ``parity``) at AUROC near 1 — the clipped scores' slope is not
    ``1/β`` (1.56 for one group of the 2026-11-25 map, whose truth was taken as 1), and 100,000 rows at prevalence
    0.01 leave the intercept and O/E truths ±3% off."""
    from scipy.optimize import brentq
    from scipy.special import expit, logit
    from scipy.stats import norm

    from fairdesk.core.stats.calibration import ece_bin

    pi, delta, mu = d.prevalence[g], d.delta, d.mu[g]
    L = mu + delta / 2 + _GRID
    w = np.gradient(L)
    f1, f0 = pi * norm.pdf(L, mu + delta, 1) * w, (1 - pi) * norm.pdf(L, mu, 1) * w
    s = _score(d, g, L)
    lg = logit(s)
    out = {"oe_ratio": pi / float((f1 + f0) @ s), "brier": float(f1 @ (1 - s) ** 2 + f0 @ s ** 2),
           "ece": float(np.abs(np.bincount(ece_bin(s), weights=f1 - s * (f1 + f0), minlength=10)).sum())}
    out["calibration_intercept"] = brentq(lambda a: float(f1 @ (1 - expit(a + lg)) - f0 @ expit(a + lg)), -30, 30)
    # logit P(y=1 | L) = logit π − δ²/2 + δ(L − μ): linear in the score's logit, exactly so but for the clipping
    b = 1.0 / d.beta
    a = float(logit(pi) - delta ** 2 / 2 - delta * mu - b * (d.alpha + d.beta * d.k()[g]))
    for _ in range(100):  # Newton on the population log-likelihood of the slope model
        p = expit(a + b * lg)
        r, v = f1 * (1 - p) - f0 * p, (f1 + f0) * p * (1 - p)
        step = np.linalg.solve(np.array([[v.sum(), v @ lg], [v @ lg, v @ lg ** 2]]), np.array([r.sum(), r @ lg]))
        step *= min(1.0, 1.0 / np.abs(step).max())
        a, b = a + step[0], b + step[1]
        if np.abs(step).max() < 1e-12:
            break
    out["calibration_slope"] = float(b)
    return out


def truths(d: Design, rng: np.random.Generator, rows: int = TRUTH_ROWS) -> dict[str, np.ndarray]:
    """The true value of every measure in each group: the rates at the threshold in closed form, the calibration
    numbers exactly (:func:`calibration_truths`), AUPRC from a large sample."""
    from fairdesk.core.stats.calibration import point_stats

    out = {k: v for k, v in d.true_rates().items()}
    cal = [calibration_truths(d, g) for g in range(len(d.sizes))]
    out.update({m: np.array([c[m] for c in cal]) for m in CAL_MEASURES})
    auprc = []
    for g in range(len(d.sizes)):
        y, L, _ = _latent(d, g, rows, rng, clustered=False)
        auprc.append(point_stats(y, _score(d, g, L))["auprc"])
    out["auprc"] = np.asarray(auprc, float)
    out["auroc"] = np.full(len(d.sizes), d.auroc)
    return out


def null_measures(d: Design) -> set[str]:
    """The measures whose gaps (or, for "calibration", each group's test) are null by construction."""
    out = {"auroc"}
    if d.mode == "label":
        out |= {"recall", "specificity"}
    elif d.mode == "parity":
        out.add("parity")
    elif d.alpha == 0 and d.beta == 1:
        out.add("calibration")
    return out


def band(cases: float) -> str:
    for lo, hi in CASE_BANDS:
        if lo <= cases < hi:
            return f"{lo}–{hi - 1}" if math.isfinite(hi) else f"≥{lo}"
    return f"<{CASE_BANDS[0][0]}"


def evaluate(d: Design, design_id: int, seed: int, n_boot: int = DEFAULT_N_BOOT,
             cancel: CancelToken | None = None, truth_rows: int = TRUTH_ROWS,
             truth: dict[str, np.ndarray] | None = None) -> list[dict]:
    """Simulate one data set of ``d``, audit it as a user would, and score every test and interval against the
    truth: one row per (test or interval) with measure, kind, null, rejected, covered, cases, clustered, AUROC.
    ``truth``: the design's truths (:func:`truths`) when already known — the replicate data sets of a design in
    :func:`resolve_unclear` share them."""
    from fairdesk.core.audits.groups import TOO_FEW_CASES, GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    rng = np.random.default_rng(seed)
    df = simulate(d, rng)
    if truth is None:
        truth = truths(d, rng, truth_rows)
    roles = ColumnRoles(label="y", score="p", attributes=("group",), patient_id="pid")
    plan = GroupAuditPlan(roles, threshold=d.threshold, n_boot=n_boot, seed=seed, min_group_size=30)
    res = run_group_audit(df, plan, cancel=cancel)
    grp = res.groups.set_index("group")
    index = {f"G{g + 1}": g for g in range(len(d.sizes))}
    nulls = null_measures(d)
    base = {"design": design_id, "mode": d.mode, "clustered": d.clustered, "auroc": d.auroc,
            "max_rows_per_patient": d.max_rows_per_patient}
    rows = []
    for t in res.tests.to_dict(orient="records"):
        m = t["metric"]
        if t["p_value"] is None or (isinstance(t["p_value"], float) and math.isnan(t["p_value"])):
            continue
        a = index[t["group"]]
        cases_a = cases_of(m, grp.loc[t["group"], "n"], grp.loc[t["group"], "n_positive"])
        if m == "calibration":
            rows.append({**base, "measure": "calibration test", "kind": "test", "null": "calibration" in nulls,
                         "rejected": bool(t["p_value"] <= ALPHA), "covered": None, "cases": cases_a,
                         "patients": _case_patients(grp, m, t["group"])})
            continue
        if m not in truth or t["kind"] != "pair":
            continue
        b = index[t["comparison"]]
        cases = min(cases_a, cases_of(m, grp.loc[t["comparison"], "n"], grp.loc[t["comparison"], "n_positive"]))
        true_gap = float(truth[m][a] - truth[m][b])
        rows.append({**base, "measure": f"{m} gap", "kind": "test", "null": m in nulls,
                     "rejected": bool(t["p_value"] <= ALPHA),
                     # each test's own (unadjusted) interval: the adjusted one is wider by design
                     "covered": bool(t.get("ci_low_unadjusted", t["ci_low"]) - 1e-12 <= true_gap
                                     <= t.get("ci_high_unadjusted", t["ci_high"]) + 1e-12), "cases": cases,
                     "patients": min(_case_patients(grp, m, t["group"]), _case_patients(grp, m, t["comparison"]))})
    # comparisons the audit declared "inconclusive: too few cases" (:func:`..audits.groups.too_few_cases`): counted
    # per region as not tested — neither failures nor silently dropped
    few = {(t, r["group"]) for t, tab in (("calibration", res.calibration), ("disc", res.discrimination))
           for r in tab.to_dict(orient="records") if str(r.get("reason") or "").startswith(TOO_FEW_CASES)}
    for r in res.calibration.to_dict(orient="records"):
        g = index[r["group"]]
        if ("calibration", r["group"]) in few:
            for m in ("calibration test",) + CAL_MEASURES:
                cal = "calibration" if m == "calibration test" else m
                rows.append({**base, "measure": m, "kind": "not tested", "null": None, "rejected": None,
                             "covered": None, "cases": cases_of(cal, r["n"], r["n_positive"]),
                             "patients": _case_patients(grp, cal, r["group"])})
            continue
        for m in CAL_MEASURES:
            lo, hi = (None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
                      for v in (r.get(f"{m}_ci_low"), r.get(f"{m}_ci_high")))
            if lo is None and hi is None:  # no interval (e.g. no slope: the scores separate the classes)
                rows.append({**base, "measure": m, "kind": "not tested", "null": None, "rejected": None,
                             "covered": None, "cases": cases_of(m, r["n"], r["n_positive"]),
                             "patients": _case_patients(grp, m, r["group"])})
                continue
            lo, hi = -math.inf if lo is None else lo, math.inf if hi is None else hi  # one side without a limit
            rows.append({**base, "measure": m, "kind": "interval", "null": None, "rejected": None,
                         "covered": bool(lo - 1e-12 <= truth[m][g] <= hi + 1e-12),
                         "cases": cases_of(m, r["n"], r["n_positive"]), "patients": _case_patients(grp, m, r["group"])})
    disc = res.discrimination.to_dict(orient="records")
    for i, r in enumerate(disc):  # the groups and pairs not tested
        m = r["metric"]
        if ("disc", r["group"]) not in few:
            continue
        rows.append({**base, "measure": m, "kind": "not tested", "null": None, "rejected": None, "covered": None,
                     "cases": cases_of(m, r["n"], r["n_positive"]), "patients": _case_patients(grp, m, r["group"])})
        for j, o in enumerate(disc):
            if o["metric"] != m or o["group"] == r["group"] or (("disc", o["group"]) in few and j < i) \
                    or o["value"] is None or (isinstance(o["value"], float) and math.isnan(o["value"])):
                continue
            rows.append({**base, "measure": f"{m} gap", "kind": "not tested", "null": None, "rejected": None,
                         "covered": None, "cases": min(cases_of(m, x["n"], x["n_positive"]) for x in (r, o)),
                         "patients": min(_case_patients(grp, m, x["group"]) for x in (r, o))})
    for r in disc:
        if ("disc", r["group"]) in few:
            continue
        lo, hi = r.get("value_ci_low"), r.get("value_ci_high")
        if lo is None or hi is None or any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
            continue
        g, m = index[r["group"]], r["metric"]
        rows.append({**base, "measure": m, "kind": "interval", "null": None, "rejected": None,
                     "covered": bool(lo - 1e-12 <= truth[m][g] <= hi + 1e-12),
                     "cases": cases_of(m, r["n"], r["n_positive"]), "patients": _case_patients(grp, m, r["group"])})
    return rows


def _case_patients(grp: pd.DataFrame, measure: str, group: str) -> float:
    """The patients among a group's cases of ``measure`` (:func:`..stats.verified_region.case_patients`)."""
    r = grp.loc[group]
    return case_patients(measure, r["n"], r["n_positive"], r["n_patients"])


@dataclass
class DesignSpaceResult:
    rows: pd.DataFrame            # one per test or interval scored
    designs: list[dict]
    config: dict
    elapsed_s: float

    def regions(self) -> pd.DataFrame:
        """Size and coverage by measure × region (cases band × independent/clustered × AUROC band for AUROC and
        AUPRC), with Clopper–Pearson 95% CIs, the targets and whether each is met."""
        return region_table(self.rows, self.config.get("resolution"))

    def to_dict(self) -> dict:
        return jsonable({"config": self.config, "designs": self.designs, "elapsed_s": self.elapsed_s,
                         "regions": self.regions().to_dict(orient="records"),
                         "rows": self.rows.to_dict(orient="records")})

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @property
    def failing(self) -> pd.DataFrame:
        reg = self.regions()
        return reg[(reg["size_verdict"] == "misses") | (reg["coverage_verdict"] == "misses")]


PATIENT_BANDS = ((0, 10), (10, 30), (30, 100), (100, math.inf))
AUROC_SPLIT = ("auroc", "auprc", "calibration") + CAL_MEASURES  # the measures whose regions split at AUROC 0.99


def region_of(measure: str, cases: float, clustered: bool, patients: float, auroc: float) -> str:
    """The region of one test or interval: independent rows by the cases it rests on (:func:`case_count`, the
    smaller group's for a gap); whole patients by the patients among those cases (the smaller group's;
    :func:`..stats.verified_region.case_patients`); AUROC, AUPRC and calibration also by whether the AUROC reaches
    0.99 (calibration: with repeated patients the slope's whole-patient SE falls far below its SD there)."""
    if clustered:
        lo, hi = next(b for b in PATIENT_BANDS if b[0] <= patients < b[1])
        where = (f"clustered, {lo}–{hi - 1} case patients" if math.isfinite(hi) else
                 f"clustered, ≥{lo} case patients")
    else:
        where = f"independent, {band(cases)} cases"
    if measure.startswith(AUROC_SPLIT):
        where += "; AUROC ≥ 0.99" if auroc >= 0.99 else "; AUROC < 0.99"
    return where


def _region_key(region: str) -> tuple:
    """Sort key: independent before clustered, then by the band's lower end, then the AUROC band."""
    import re

    num = re.search(r"(\d+)", region.split(";")[0].replace("<10", "0"))
    return (region.startswith("clustered"), int(num.group(1)) if num else 0, region)


def _region_of(rows: pd.DataFrame) -> pd.Series:
    return pd.Series([region_of(m, c, bool(cl), p, a) for m, c, cl, p, a in
                      zip(rows["measure"], rows["cases"], rows["clustered"], rows["patients"], rows["auroc"])],
                     index=rows.index)


def _rate(hits: pd.Series, designs: pd.Series | None = None, level: float = 0.95) -> tuple[float, float, float]:
    """A rate with its ``level`` (95%) interval: Clopper–Pearson at the Korn–Graubard effective sample size (Korn & Graubard
    1998: the exact binomial interval with n/deff trials and the same rate, deff the design effect of the rate over
    designs, at least 1). The tests of one design are not independent — the 28 pairs of an 8-group design share
    its groups, one unlucky group makes 7 of them reject — so the plain interval, which counts every test as one
    trial, was too narrow: the merged map's parity size 0.077 at ≥ 300 rows (207 tests, 37 designs) read as a
    near-miss [0.045, 0.12] where the designs allow [0.038, 0.127], and 389 targeted designs measured 0.063.
    Without ``designs`` (or with one test per design) it is the plain Clopper–Pearson interval."""
    from scipy.stats import beta

    n = len(hits)
    if n == 0:
        return math.nan, math.nan, math.nan
    x = hits.astype(bool).to_numpy(float)
    k = float(x.sum())
    rate = k / n
    deff = 1.0
    if designs is not None and 0 < k < n:
        per = pd.DataFrame({"x": x, "d": designs.to_numpy()}).groupby("d")["x"].agg(["sum", "size"]).to_numpy(float)
        g = len(per)
        if g > 1:  # the ratio estimator's variance over designs (with G/(G − 1)) against the binomial one
            var = g / (g - 1) * float(((per[:, 0] - rate * per[:, 1]) ** 2).sum()) / n ** 2
            deff = max(1.0, var / (rate * (1 - rate) / n))
    n_eff = n / deff
    k_eff = rate * n_eff
    tail = (1 - level) / 2
    lo = float(beta.ppf(tail, k_eff, n_eff - k_eff + 1)) if k_eff > 0 else 0.0
    hi = float(beta.ppf(1 - tail, k_eff + 1, n_eff - k_eff)) if k_eff < n_eff else 1.0
    return rate, lo, hi


def _verdict(rate: float, lo: float, hi: float, target: float, upper: bool, decided: bool = False) -> str:
    """One rate against its target. First pass (``decided`` False): "meets" when the point estimate is within the
    target, "misses" when the whole interval is beyond it, else "unclear". A region in the second pass
    (:func:`resolve_unclear`, ``decided`` True) meets only when its whole interval is within the target — the
    sequential rule: adding data until a point estimate dips below the target would turn a real failure into
    "meets" about as often as the estimate wanders below it."""
    if math.isnan(rate):
        return "—"
    within = (hi <= target + 1e-12 if upper else lo >= target - 1e-12) if decided else \
        ((rate <= target + 1e-12) if upper else (rate >= target - 1e-12))
    if within:
        return "meets"
    beyond = lo > target if upper else hi < target
    return "misses" if beyond else "unclear"


#: The second pass (:func:`resolve_unclear`): at most this many looks per region, each region's interval at level
#: 1 − 0.05/RESOLVE_LOOKS (Bonferroni over the looks: a region's verdict is wrong with probability at most 0.025 in
#: either direction, whichever look decides it), and this many new designs targeted to each open region per look.
RESOLVE_LOOKS = 4
RESOLVE_LEVEL = 1 - ALPHA / RESOLVE_LOOKS
RESOLVE_NEW_DESIGNS = 2
RESOLVE_SETS = (1, 1, 2, 2)  # new data sets of each own design at each look (the same for every design of a look)


def _needed(rate: float, target: float, level: float, n: int, n_eff: float) -> float:
    """About how many tests or intervals (at the region's design effect n/n_eff) would put the interval of a rate of
    ``rate`` wholly on one side of ``target`` (normal approximation; inf at the target)."""
    from scipy.stats import norm

    if not n or math.isclose(rate, target):
        return math.inf
    z = norm.ppf(1 - (1 - level) / 2)
    return z ** 2 * _variance(rate, n) / (rate - target) ** 2 * (n / max(n_eff, 1e-9))


def region_table(rows: pd.DataFrame, resolution: dict[str, dict] | None = None) -> pd.DataFrame:
    """Size and coverage by measure × region with their intervals and verdicts (:func:`_verdict`,
    :func:`region_verdict`). ``resolution`` (``config["resolution"]`` of :func:`resolve_unclear`): the regions of
    the second pass, each judged on the rows up to its deciding look (column ``look`` of ``rows``) at level
    :data:`RESOLVE_LEVEL`, by the sequential rule; the others by the first pass's rule on every row."""
    cols = ["measure", "region", "n_not_tested", "n_null_tests", "size", "size_ci_low", "size_ci_high", "size_verdict",
            "n_intervals", "coverage", "coverage_ci_low", "coverage_ci_high", "coverage_verdict", "level", "look",
            "reason"]
    if rows.empty:
        return pd.DataFrame(columns=cols + ["verdict"])
    resolution = resolution or {}
    rows = rows.assign(region=_region_of(rows))
    if "look" not in rows:
        rows = rows.assign(look=0)
    out = []
    groups = rows.groupby(["measure", "region"], sort=False)
    for m, reg in sorted(groups.groups, key=lambda k: (k[0], _region_key(k[1]))):
        sub = groups.get_group((m, reg))
        res = resolution.get(f"{m} | {reg}")
        if res:
            sub = sub[sub["look"] <= res["look"]]
        level = RESOLVE_LEVEL if res else 0.95
        nul = sub[(sub["kind"] == "test") & (sub["null"] == True)]  # noqa: E712 (object column)
        cov = sub[sub["covered"].notna()]
        s, slo, shi = _rate(nul["rejected"], nul["design"] if "design" in nul else None, level)
        c, clo, chi = _rate(cov["covered"], cov["design"] if "design" in cov else None, level)
        row = {"measure": m, "region": reg, "n_not_tested": int((sub["kind"] == "not tested").sum()),
               "n_null_tests": len(nul), "size": s, "size_ci_low": slo, "size_ci_high": shi,
               "size_verdict": _verdict(s, slo, shi, SIZE_TARGET, True, bool(res)),
               "n_intervals": len(cov), "coverage": c, "coverage_ci_low": clo, "coverage_ci_high": chi,
               "coverage_verdict": _verdict(c, clo, chi, COVERAGE_TARGET, False, bool(res)), "level": level,
               "look": res["look"] if res else 0, "reason": ""}
        row["verdict"] = region_verdict(row)
        if row["verdict"].startswith("unclear"):
            row["reason"] = _unclear_reason(row, res)
        out.append(row)
    return pd.DataFrame.from_records(out, columns=cols + ["verdict"])


def _unclear_reason(row: dict, res: dict | None) -> str:
    """Why a region is unclear: which rate's interval still reaches across its target, and (second pass) how far
    the sequential rule got and about how many more tests or intervals its estimate would need."""
    parts = []
    for key, n_key, target in (("size", "n_null_tests", SIZE_TARGET), ("coverage", "n_intervals", COVERAGE_TARGET)):
        if row[f"{key}_verdict"] != "unclear":
            continue
        rate, lo, hi, n = row[key], row[f"{key}_ci_low"], row[f"{key}_ci_high"], row[n_key]
        text = f"{key} {rate:.3f} of {n}, {row['level']:.4g} CI {lo:.3f}–{hi:.3f} reaches {target:.2f}"
        if res:
            need = _needed(rate, target, row["level"], n, _n_eff(rate, lo, hi, row["level"], n))
            text += ("; its estimate is at the target" if math.isinf(need) else
                     f"; about {need:,.0f} would decide it at this estimate")
        parts.append(text)
    if not res:
        where = ("point estimate misses, interval reaches the target (first pass rule; --resolve decides the first "
                 "pass's unclear regions, not one that only the second pass's rows made unclear)")
    elif res.get("status") == "not reached":
        where = "no targeted design reaches it and its designs' replicates did not decide it"
    else:
        where = f"undecided after look {res['look']} of {RESOLVE_LOOKS} ({res.get('status', 'open')})"
    return f"{where}: " + "; ".join(parts)


def _variance(rate: float, n: int) -> float:
    """A rate's per-trial variance for the normal approximations below, floored at 1/n: at an estimate of 0 or 1
    ``rate(1 − rate)`` is 0, and an effective n and a count needed computed from it are meaningless (a size of 0 of
    24 tests once read "about 1,853,543 would decide it")."""
    return max(rate * (1 - rate), 1 / max(n, 1))


def _n_eff(rate: float, lo: float, hi: float, level: float, n: int) -> float:
    """The effective number of trials behind an interval of ``n`` (its half-width against the binomial one)."""
    from scipy.stats import norm

    half = (hi - lo) / 2
    if half <= 0:
        return math.inf
    z = norm.ppf(1 - (1 - level) / 2)
    return _variance(rate, n) * (z / half) ** 2


def region_verdict(row: dict) -> str:
    """One region's verdict on both targets: "fails" when either misses (its whole interval beyond the target),
    "unclear(n)" when either is unclear (n: the null tests or intervals it rests on — ``--resolve`` adds data
    there), else "meets" ("—" when the region holds neither)."""
    parts = (("size_verdict", "n_null_tests"), ("coverage_verdict", "n_intervals"))
    verdicts = [row[v] for v, _ in parts]
    if "misses" in verdicts:
        return "fails"
    unclear = [int(row[n]) for v, n in parts if row[v] == "unclear"]
    if unclear:
        return f"unclear({min(unclear)})"
    return "meets" if "meets" in verdicts else "—"


#: Which rows of the map decide each measure's verified region (:mod:`fairdesk.core.stats.verified_region`): the tests'
#: size and every interval shown beside their verdicts — the gap's, each group's AUROC or AUPRC, and each group's
#: calibration intercept, slope, O/E, Brier and ECE for the calibration verdict — so that no region of the map that
#: misses a target lies inside the verified region (AUPRC is never null by construction: coverage only).
MIN_EVIDENCE = 30
REGION_SOURCES = {"parity": ("parity gap",), "recall": ("recall gap",), "specificity": ("specificity gap",),
                  "auroc": ("auroc gap", "auroc"), "auprc": ("auprc gap", "auprc"),
                  "calibration": ("calibration test",) + CAL_MEASURES}


def verified_region(regions: pd.DataFrame) -> dict[str, dict]:
    """Per measure, the part of the space where the map verified it, in the form of
    :data:`fairdesk.core.stats.verified_region.VERIFIED`: the fewest cases (independent rows) and patients (clustered) from
    which every band up meets both targets (point estimates; a band with fewer than :data:`MIN_EVIDENCE` null tests or
    intervals neither helps nor hurts on that count), None when no band does; for AUROC, AUPRC and calibration
    ``max_auroc`` 0.99 when a band with AUROC ≥ 0.99 misses (the bands are then
    judged below it)."""
    out = {}
    thin_size = regions["n_null_tests"] < MIN_EVIDENCE  # too few to tell either way: neither helps nor hurts
    thin_cov = regions["n_intervals"] < MIN_EVIDENCE
    ok = ((thin_size | regions["size_verdict"].eq("meets")) & (thin_cov | regions["coverage_verdict"].eq("meets")))
    reg = regions.assign(ok=ok)[~(thin_size & thin_cov)]
    for key, sources in REGION_SOURCES.items():
        sub = reg[reg["measure"].isin(sources)]
        rule: dict = {}
        if key in ("auroc", "auprc", "calibration"):
            high = sub[sub["region"].str.endswith("AUROC ≥ 0.99")]
            rule["max_auroc"] = None if high["ok"].all() else 0.99
            if rule["max_auroc"] is not None:
                sub = sub[~sub["region"].str.endswith("AUROC ≥ 0.99")]
        for kind, name, bands in (("independent", "min_cases", CASE_BANDS), ("clustered", "min_patients",
                                                                              PATIENT_BANDS)):
            part = sub[sub["region"].str.startswith(kind)]
            lows = sorted({_region_key(r)[1] for r in part["region"]})
            good = None
            for low in reversed(lows):  # from the top band down while every band is verified
                if part[[_region_key(r)[1] == low for r in part["region"]]]["ok"].all():
                    good = low
                else:
                    break
            rule[name] = None if good is None else max(int(good), bands[0][0] if kind == "independent" else 1)
        out[key] = rule
    return out


def inside(measure: str, region: str, rules: dict[str, dict]) -> bool:
    """Whether a region of the map (a row of :meth:`DesignSpaceResult.regions`) lies inside the verified region
    ``rules`` (the form of :data:`fairdesk.core.stats.verified_region.VERIFIED`); measures that decide no verdict
    are never inside."""
    key = next((k for k, src in REGION_SOURCES.items() if measure in src), None)
    if key is None or key not in rules:
        return False
    rule = rules[key]
    low = rule["min_patients" if region.startswith("clustered") else "min_cases"]
    if low is None or _region_key(region)[1] < low:
        return False
    top = rule.get("max_auroc_clustered", rule.get("max_auroc")) if region.startswith("clustered") else \
        rule.get("max_auroc")
    return not (region.endswith("AUROC ≥ 0.99") and top is not None)


# ---- targeted designs: more evidence where the map is "unclear" (too few tests or intervals to tell)

PAIR_MEASURES = tuple(f"{m} gap" for m in RATE_MEASURES + DISC_MEASURES)
GROUP_MEASURES = DISC_MEASURES + ("calibration test",) + CAL_MEASURES
#: The gaps whose test is null in some mode (:func:`null_measures`); a design targeted to one of their regions must
#: have it null (so that it adds to the size as well as to the coverage). The others are scored in every design.
NULL_GAPS = {"parity gap": "parity", "recall gap": "recall", "specificity gap": "specificity", "auroc gap": "auroc"}
MAX_DRAWS = 20_000  # draws per targeted design before giving up on a region the space (almost) never reaches


def _normal_region(text: str) -> str:
    """A region as the map prints it, from what a user may type ("-" for "–", ">=" for "≥", spaces around "|")."""
    text = text.replace(">=", "≥").replace("<=", "≤")
    text = "".join("–" if c == "-" and i and text[i - 1].isdigit() else c for i, c in enumerate(text))
    return " | ".join(part.strip() for part in text.split("|"))


def region_names() -> list[str]:
    """Every "measure | region" of the map's grid (the form ``--region`` takes)."""
    out = []
    for m in PAIR_MEASURES + GROUP_MEASURES:
        places = [f"independent, {band(lo)} cases" for lo, _ in CASE_BANDS]
        places += [f"clustered, {lo}–{hi - 1} case patients" if math.isfinite(hi)
                   else f"clustered, ≥{lo} case patients" for lo, hi in PATIENT_BANDS]
        if m.startswith(AUROC_SPLIT):
            places = [f"{p}; AUROC {b}" for p in places for b in ("< 0.99", "≥ 0.99")]
        out += [f"{m} | {p}" for p in places]
    return out


def parse_regions(texts) -> tuple[str, ...]:
    """The targeted regions, each "MEASURE | REGION" as the map prints it (a region may stop early: "auprc gap |
    independent, 10–29 cases" takes both AUROC bands). Raises DataError naming ``--region`` for one that matches
    no region of the map."""
    from fairdesk.core.errors import DataError

    names = region_names()
    out = []
    for text in texts:
        t = _normal_region(str(text))
        if "|" not in t or not any(n.startswith(t) for n in names):
            raise DataError(f"--region {text!r} is not a region of the map; give it as the map prints it, "
                            f"'MEASURE | REGION', e.g. 'parity gap | independent, ≥300 cases'.")
        out.append(t)
    return tuple(out)


def expected_regions(d: Design) -> set[str]:
    """The "measure | region" names that one data set of ``d`` is expected to fill (each group's cases and patients
    at their expected values: rows × prevalence, patients of (1 + m)/2 rows on average), the gaps only where
    :data:`NULL_GAPS` says the design scores their size."""
    nulls = null_measures(d)
    groups = []
    for n, p in zip(d.sizes, d.prevalence):
        patients = n / ((1 + d.max_rows_per_patient) / 2) if d.clustered else n
        groups.append((n, n * p, patients))

    def place(measure: str, members) -> str:
        base = measure.removesuffix(" gap").removesuffix(" test")
        cases = min(cases_of(base, n, k) for n, k, _ in members)
        pats = min(case_patients(base, n, k, pp) for n, k, pp in members)
        return f"{measure} | {region_of(measure, cases, d.clustered, pats, d.auroc)}"

    out = set()
    for m in PAIR_MEASURES:
        if m in NULL_GAPS and NULL_GAPS[m] not in nulls:
            continue
        out |= {place(m, (a, b)) for i, a in enumerate(groups) for b in groups[i + 1:]}
    for m in GROUP_MEASURES:
        if m == "calibration test" and "calibration" not in nulls:
            continue
        out |= {place(m, (a,)) for a in groups}
    return out


def draw_targeted(rng: np.random.Generator, regions: tuple[str, ...], space: dict | None = None) -> Design:
    """A design drawn from the space (:func:`draw_design`) that is expected to fill at least one of ``regions``
    (:func:`expected_regions`): the space conditioned on reaching them (rejection sampling)."""
    from fairdesk.core.errors import DataError

    for _ in range(MAX_DRAWS):
        d = draw_design(rng, space)
        if any(e.startswith(r) for e in expected_regions(d) for r in regions):
            return d
    raise DataError(f"--region: {MAX_DRAWS} designs drawn from the space and none reaches {', '.join(regions)}; "
                    "choose a region the space reaches (a band of the map with rows in it).")


def run_design_space(designs: int = 200, seed: int = 0, n_boot: int = DEFAULT_N_BOOT,
                     progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                     space: dict | None = None, truth_rows: int = TRUTH_ROWS,
                     regions: tuple[str, ...] = ()) -> DesignSpaceResult:
    """Draw ``designs`` designs from :data:`SPACE` (deterministic from ``seed``; ``space`` narrows it), audit one
    data set of each and score every test and interval (:func:`evaluate`). With ``regions`` ("MEASURE | REGION"
    as the map prints them, :func:`parse_regions`) every design is drawn to reach at least one of them
    (:func:`draw_targeted`): the way to resolve a region the whole-space map leaves "unclear"."""
    regions = parse_regions(regions) if regions else ()
    rep = Reporter(progress, cancel)
    t0 = time.monotonic()
    rng = np.random.default_rng([int(seed), 21])
    rows: list[dict] = []
    drawn = []
    for i in range(designs):
        rep(i / designs, f"design space: design {i + 1}/{designs}")
        d = draw_targeted(rng, regions, space) if regions else draw_design(rng, space)
        drawn.append(asdict(d))
        rows += evaluate(d, i, int(rng.integers(0, 2**31 - 1)), n_boot, cancel=rep.cancel, truth_rows=truth_rows)
    rep(1.0, "done")
    config = {"designs": designs, "seed": seed, "n_boot": n_boot, "alpha": ALPHA, "size_target": SIZE_TARGET,
              "coverage_target": COVERAGE_TARGET, "space": {**SPACE, **(space or {})}, "truth_rows": truth_rows,
              "regions": list(regions)}
    return DesignSpaceResult(pd.DataFrame.from_records(rows), drawn, config, time.monotonic() - t0)


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence([int(x) for x in parts]).generate_state(1)[0])


def resolve_unclear(result: DesignSpaceResult, datasets: int, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None) -> DesignSpaceResult:
    """The second pass: decide the regions ``result`` leaves "unclear" by a sequential rule, auditing at most
    ``datasets`` more data sets.

    Why not only new designs (as before): a region made unclear by a few unlucky data sets of its designs stays
    unclear when new designs are added beside them — their data sets are never redrawn. At each look every open
    region gets (a) more data sets of **each of its own designs** (every design with a null test or an interval in
    it; the same design and truths, a new sample; :data:`RESOLVE_SETS` per design at a look, the same for every
    design so that none weighs more than another; the open regions share them) and (b)
    :data:`RESOLVE_NEW_DESIGNS` new designs targeted to it (:func:`draw_targeted`). Then each open region is judged
    on every row so far with its interval at level :data:`RESOLVE_LEVEL`: "meets" when the whole interval is within
    the target, "fails" when it is wholly beyond (:func:`_verdict` with ``decided``), else it stays open. A decided
    region keeps the verdict of its deciding look and is shown on the rows up to it. Only the first pass's unclear
    regions take part: the others keep the first pass's rule on every row (the new rows are by-products for them;
    one that they make unclear says so — it is not resolved). At most :data:`RESOLVE_LOOKS` looks, each only when
    the budget left pays for all of it; regions still open then are "unclear" with the reason (``config
    ["resolution"]``, the map's ``reason`` column). Error: at most 0.025 per region that a look's interval lies
    wholly on the wrong side (Bonferroni over its ≤ :data:`RESOLVE_LOOKS` looks, given the Korn–Graubard intervals'
    coverage); over R regions decided, at most 0.025·R wrong verdicts are expected — and far fewer where the truth
    is not at the target. Deterministic from the first pass's seed."""
    from fairdesk.core.errors import DataError

    cfg = result.config
    seed = int(cfg["seed"])
    rep = Reporter(progress, cancel)
    rows = result.rows.assign(look=0) if "look" not in result.rows else result.rows
    rows = rows.assign(dataset="0") if "dataset" not in rows else rows
    drawn, spent = list(result.designs), result.elapsed_s
    narrowed = {k: v for k, v in cfg["space"].items() if k not in SPACE or v != SPACE[k]}
    resolution: dict[str, dict] = {}
    truth_cache: dict[int, dict] = {}
    audited, look, stop = 0, 0, "looks"
    t0 = time.monotonic()


    def own_designs(keys: list[str]) -> list[int]:
        tagged = rows.assign(key=rows["measure"] + " | " + _region_of(rows))
        scored = tagged[((tagged["kind"] == "test") & (tagged["null"] == True)) | tagged["covered"].notna()]  # noqa
        return sorted(int(d) for d in scored.loc[scored["key"].isin(keys), "design"].unique())

    table = region_table(rows)
    current = [f"{m} | {r}" for m, r, v in zip(table["measure"], table["region"], table["verdict"])
               if v.startswith("unclear")]
    if not current or datasets < 1:
        return result
    resolution.update({k: {"look": 0, "status": "open"} for k in current})
    while current and look < RESOLVE_LOOKS:
        mine = own_designs(current)
        sets = RESOLVE_SETS[look]
        cost = sets * len(mine) + RESOLVE_NEW_DESIGNS * len(current)
        if audited + cost > datasets:
            stop = "cap"
            break
        look += 1
        new = []
        for j, i in enumerate(mine):
            d = Design(**drawn[i])
            if i not in truth_cache:
                truth_cache[i] = truths(d, np.random.default_rng(_seed(seed, 22, i)), cfg["truth_rows"])
            for r in range(sets):
                rep(min(0.99, audited / datasets), f"design space, look {look}: design {i + 1} ({j + 1}/{len(mine)})")
                new += [{**row, "look": look, "dataset": f"{look}.{r}"} for row in
                        evaluate(d, i, _seed(seed, 21, look, i, r), cfg["n_boot"], cancel=rep.cancel,
                                 truth_rows=cfg["truth_rows"], truth=truth_cache[i])]
                audited += 1
        for k in current:
            rep(min(0.99, audited / datasets), f"design space, look {look}: new designs for {k}")
            try:
                extra = run_design_space(RESOLVE_NEW_DESIGNS, seed=_seed(seed, 23, look, len(drawn)),
                                         n_boot=cfg["n_boot"], cancel=rep.cancel, space=narrowed,
                                         truth_rows=cfg["truth_rows"], regions=(k,))
            except DataError:
                resolution[k]["not_reached"] = True
                continue
            new += [{**r, "design": r["design"] + len(drawn), "look": look, "dataset": "0"}
                    for r in extra.rows.to_dict(orient="records")]
            drawn += extra.designs
            audited += RESOLVE_NEW_DESIGNS
        rows = pd.concat([rows, pd.DataFrame.from_records(new)], ignore_index=True) if new else rows
        for k in current:
            resolution[k]["look"] = look
        table = region_table(rows, resolution)
        verdicts = dict(zip(table["measure"] + " | " + table["region"], table["verdict"]))
        for k in current:
            if not verdicts[k].startswith("unclear"):
                resolution[k]["status"] = "decided"
        current = [k for k in current if resolution[k]["status"] == "open"]
    for k in current:
        resolution[k]["status"] = "not reached" if resolution[k].get("not_reached") else stop
        resolution[k]["look"] = look
    rep(1.0, "done")
    config = {**cfg, "resolution": resolution, "resolve_datasets": datasets, "resolve_audited": audited,
              "resolve_looks": look, "designs_total": len(drawn)}
    return DesignSpaceResult(rows, drawn, config, spent + time.monotonic() - t0)


def format_regions(result: DesignSpaceResult) -> str:
    """The printed map: one line per measure × region, each with its verdict on both targets (meets, fails or
    unclear(n), :func:`region_verdict`) and whether it lies inside the stated verified region (``VERIFIED``)."""
    from fairdesk.core.stats.verified_region import VERIFIED

    reg = result.regions()
    mark = {"meets": "ok", "misses": "FAILS", "unclear": "unclear", "—": "—"}
    head = (f"{'measure':<22} {'region':<46} {'untested':>8} {'null':>5} {'size':>6} {'':>7} {'intervals':>9} {'cover':>6} "
            f"{'':>7} {'verdict':>12} {'look':>4} {'VERIFIED':>8}")
    lines = [head, "-" * len(head)]
    for r in reg.itertuples(index=False):
        size = f"{r.size:6.3f}" if r.n_null_tests else f"{'—':>6}"
        cover = f"{r.coverage:6.3f}" if r.n_intervals else f"{'—':>6}"
        within = "inside" if inside(r.measure, r.region, VERIFIED) else "outside"
        look = f"{r.look}" if r.level < 0.95 else ""
        lines.append(f"{r.measure:<22} {r.region:<46} {r.n_not_tested:>8} {r.n_null_tests:>5} {size} {mark[r.size_verdict]:>7} "
                     f"{r.n_intervals:>9} {cover} {mark[r.coverage_verdict]:>7} {r.verdict:>12} {look:>4} {within:>8}")
    failing = result.failing
    lines.append(f"targets: size ≤ {SIZE_TARGET:.2f}, coverage ≥ {COVERAGE_TARGET:.2f}. First pass (no look): FAILS = "
                 "the whole 95% CI is beyond the target, ok = the point estimate is within it, unclear = the point "
                 "estimate misses but the CI reaches it. Second pass (--resolve; look = the look that decided it): "
                 f"ok / FAILS = the whole {RESOLVE_LEVEL:.4g} CI (95% over ≤ {RESOLVE_LOOKS} looks) is within / "
                 "beyond the target, shown on the rows up to that look; unclear(n): n null tests or intervals, reason "
                 "below. untested = tests and intervals the audit declared \"inconclusive: too few cases\" (none "
                 "shown, none scored).")
    if result.config.get("regions"):
        lines.append("designs drawn targeted to: " + "; ".join(result.config["regions"]) + " (the space conditioned "
                     "on reaching them; the other regions' rows are by-products of those designs)")
    res = result.config.get("resolution") or {}
    if res:
        status = pd.Series([v["status"] for v in res.values()]).value_counts()
        lines.append(f"second pass (--resolve {result.config['resolve_datasets']}): {len(res)} unclear region(s), "
                     f"{result.config['resolve_looks']} look(s), {result.config['resolve_audited']} data sets audited "
                     f"({', '.join(map(str, RESOLVE_SETS))} more data sets of each open region's own designs at "
                     f"looks 1–{RESOLVE_LOOKS}, {RESOLVE_NEW_DESIGNS} new designs targeted to it at each; "
                     f"{result.config['designs_total']} designs in all): "
                     + ", ".join(f"{n} {k}" for k, n in status.items()))
    counts = reg["verdict"].map(lambda v: v.split("(")[0]).value_counts()
    lines.append(f"{len(reg)} regions: {counts.get('meets', 0)} meet, {counts.get('fails', 0)} fail, "
                 f"{counts.get('unclear', 0)} unclear.")
    stated = [f"{r.measure} | {r.region}" for r in failing.itertuples(index=False) if inside(r.measure, r.region,
                                                                                                VERIFIED)]
    lines.append("Every failing region lies outside the stated verified region (VERIFIED): audits there say so." if
                 not stated else f"{len(stated)} failing region(s) inside the stated verified region (VERIFIED): "
                 + "; ".join(stated))
    unsure = [f"{r.measure} | {r.region} {r.verdict}" for r in reg.itertuples(index=False)
              if r.verdict.startswith("unclear") and inside(r.measure, r.region, VERIFIED)]
    if unsure:
        lines.append(f"{len(unsure)} unclear region(s) inside VERIFIED: " + "; ".join(unsure))
    for r in reg.itertuples(index=False):
        if r.verdict.startswith("unclear"):
            lines.append(f"  unclear: {r.measure} | {r.region}: {r.reason}")
    rules = verified_region(reg)
    lines.append("verified region (every band from there up meets both targets):")
    for key, rule in rules.items():
        c, p = rule["min_cases"], rule["min_patients"]
        cases = "not verified" if c is None else f"from {c} case{'s' * (c != 1)}"
        pats = "not verified" if p is None else f"from {p} patient{'s' * (p != 1)}"
        top = f"; AUROC below {rule['max_auroc']:g}" if rule.get("max_auroc") else ""
        lines.append(f"  {key:<12} independent rows {cases}; repeated patients {pats}{top}")
    return "\n".join(lines)


def plot_regions(result: DesignSpaceResult, path) -> None:
    """A PNG: per-test size (left) and interval coverage (right) by measure and region, with the targets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reg = result.regions()
    size = reg[reg["n_null_tests"] > 0].reset_index(drop=True)
    cov = reg[reg["n_intervals"] > 0].reset_index(drop=True)
    height = max(4.0, 0.16 * max(len(size), len(cov)) + 1.5)
    fig, axes = plt.subplots(1, 2, figsize=(13, height))
    for ax, tab, col, target, title in ((axes[0], size, "size", SIZE_TARGET, "per-test size (true nulls)"),
                                        (axes[1], cov, "coverage", COVERAGE_TARGET, "95% interval coverage")):
        ypos = np.arange(len(tab))
        ok = tab[f"{col}_verdict"].eq("misses")
        ax.errorbar(tab[col], ypos, xerr=[tab[col] - tab[f"{col}_ci_low"], tab[f"{col}_ci_high"] - tab[col]],
                    fmt="none", ecolor="0.6", lw=1)
        ax.scatter(tab[col], ypos, c=np.where(ok, "tab:red", "tab:blue"), s=14, zorder=3)
        ax.axvline(target, color="tab:red", ls="--", lw=1)
        if col == "size":
            ax.axvline(ALPHA, color="0.5", ls=":", lw=1)
        ax.set_yticks(ypos)
        ax.set_yticklabels([f"{m} | {r}" for m, r in zip(tab["measure"], tab["region"])], fontsize=6)
        ax.set_ylim(len(tab) - 0.5, -0.5)
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    second = (f" + second pass: {result.config['resolve_audited']} data sets in {result.config['resolve_looks']} "
              "look(s)") if result.config.get("resolution") else ""
    fig.suptitle(f"Validity over the design space: {result.config['designs']} random designs (seed "
                 f"{result.config['seed']}){second}; red: the region misses its target", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / height))
    fig.savefig(path, dpi=120)
    plt.close(fig)
