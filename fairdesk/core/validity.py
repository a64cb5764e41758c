"""Validity as a product feature: the null and planted simulations of each audit family, run through the same
public functions an audit uses, with rejection rates and binomial 95% CIs (METHODS §6 and docs/methods.md "Validity").

Families and what one simulated run is:

* ``groups`` — a whole group audit: :func:`fairdesk.core.synthetic.group_sim.simulate_audit_table` (10 tasks, 5
  groups of unequal size) through :func:`fairdesk.core.audits.groups.run_group_audit` with the audit's default
  correction. The audit "rejects" when at least one record says ``verdict == "differs"`` (older tables:
  ``significant_bh``). Null: no gap anywhere (target: at most α + 0.02 of audits). Planted: one recall gap.
* ``mlm`` — a whole masked-LM probe: :func:`fairdesk.core.synthetic.mlm_sim.simulate_probe_scores` (the shipped
  categories, templates leaning at random) through :func:`fairdesk.core.audits.mlm_bias.category_statistics`;
  rejects when a category says ``verdict == "differs"`` (older tables: ``flagged``); the null under each template
  law (normal, skewed, heavy-tailed, outlying, two-mode, one drawn per category from ``mlm_sim.LAW_SPACE``, or
  one drawn from the laws kept out of building the test, ``mlm_sim.FRESH_LAW_SPACE``; :data:`MLM_NULL_LAWS`; the
  last three with 6–15 templates per category). Planted: a bias in HIV.
* ``ctf`` — a whole CTF audit of simulated scores (:func:`fairdesk.core.synthetic.ctf_sim.validity_runs`, issue
  22): the null at the margin (template-complete, random designs of 4–60 terms) and 1 to T − 1 planted terms over
  random designs (the family-wise error over the unbiased terms, the planted terms found).
* ``age`` — one comparison of two equally good learners (null) or of a weaker one (planted) over repeated
  participant-disjoint CV: :mod:`fairdesk.core.synthetic.cv_compare_sim` through the protocol's folds and
  :func:`fairdesk.core.audits.age_independence.paired_comparison`, at 1 and 3 repeats; rows for the default
  corrected resampled t-test (target) and the plain paired t-test (reported: the anti-conservative option).
* ``slices`` — a whole slice audit: :func:`fairdesk.core.synthetic.slice_sim.validity_runs`, the null (any
  "differs" slice after search on discovery rows and confirmation on the others) and planted slices of order 1–3
  by size and gap (power).
* ``monitor`` — a whole fairness monitor over 24 monthly looks (:func:`fairdesk.core.synthetic.monitor_sim.validity_runs`):
  false alarms on null streams with drifting prevalence and calibration, and detection of a recall gap of 0.15 from
  month 13 in a group with a fifth of the patients, against a naive monthly test and a fixed-horizon correction.
* ``cit`` — one counterfactual-invariance test (:func:`fairdesk.core.audits.cit.cit_test`, the default) on
  :func:`fairdesk.core.synthetic.cit_benchmark.nuisance_scenario`: Ŷ ⟂ A | Z with E[Ŷ|Z] and P(A|Z) each linear or
  non-linear in Z (the four nuisance scenarios), and a planted A-dependence β, constant or
  changing sign with z₂.

Each row of the result: family, design, null/planted, runs, how many rejected, the rate with its Clopper–Pearson
95% CI (``scipy.stats.binomtest(k, n).proportion_ci()``), the target, whether the point estimate meets it, and —
for the multi-test families — the per-test rate (share of all tests that said "differs"). Deterministic from the
seed. The generators of the other families are imported lazily (they live in their own modules).

Entry point: :func:`run_validity` ``(families, runs, seed, n, progress, cancel) -> ValidityResult``.

Besides these fixed designs, ``--design-space`` draws group audits at random from a stated space and maps the size
of every test and the coverage of every interval by region: :mod:`fairdesk.core.synthetic.design_space`.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from fairdesk.core import provenance as _prov
from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

from fairdesk.core.synthetic.design_space import (format_regions, parse_regions, plot_regions,  # noqa: E402,F401
                                                  resolve_unclear, run_design_space)

FAMILIES: tuple[str, ...] = ("groups", "mlm", "cit", "ctf", "age", "slices", "calibration", "monitor")
ALPHA = 0.05
#: A null design passes when its rejection rate is at most α + this ("size ≤ α + 0.02").
SIZE_TOLERANCE = 0.02
#: Default runs per design (the CLI's --runs overrides all three); whole audits cost more than single tests.
DEFAULT_RUNS = {"groups": 40, "mlm": 200, "cit": 100, "ctf": 100, "age": 200, "slices": 40,
                "calibration": 400, "monitor": 100}
GROUP_N_BOOT = 200
GROUP_PLANTED_GAP = 0.2
MLM_PLANTED = {"HIV": 0.5}
MLM_NULL_LAWS = ("normal", "skewed", "heavy", "outlying", "space", "twomode", "fresh")
#: Laws whose probes draw 6–15 templates per category (the others keep the shipped counts).
MLM_DRAWN_COUNTS = ("space", "twomode", "fresh")
AGE_REPEATS = (1, 3)
AGE_PLANTED_SIGNAL = 0.3   # learner b's signal (a: 0.6): about 5 accuracy points worse
CIT_BETA = 0.5
CIT_POWER_TARGET = 0.90   # power on β = 0.5 at n = 4,000 stays ≥ 90 %
CIT_POWER_N = 4000


@dataclass
class ValidityRow:
    family: str
    design: str
    kind: str                 # "null" or "planted"
    runs: int
    rejections: int
    rate: float
    ci_low: float
    ci_high: float
    target: str               # in words, e.g. "≤ 0.07"
    meets: bool | None        # point estimate against the target; None when there is no target (power reported)
    verdict: str              # "meets" | "misses" (the whole 95% CI is beyond the target) | "unclear" (the point
                              # estimate misses but the CI reaches the target: run more) | "no target"
    level: str                # "whole audit" or "single test"
    meaning: str              # what the row says, in words
    per_test_rate: float | None = None
    n_tests: int | None = None
    seconds: float = 0.0


@dataclass
class ValidityResult:
    rows: list[ValidityRow]
    config: dict
    provenance: dict
    elapsed_s: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:

        return jsonable({"rows": [asdict(r) for r in self.rows], "config": self.config,
                       "provenance": self.provenance, "elapsed_s": self.elapsed_s, "notes": self.notes})

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def table(self):
        import pandas as pd

        return pd.DataFrame.from_records([asdict(r) for r in self.rows])

    @property
    def all_met(self) -> bool:
        return all(r.meets is not False for r in self.rows)

    @property
    def missed(self) -> list[ValidityRow]:
        return [r for r in self.rows if r.verdict == "misses"]


def binomial_ci(k: int, n: int) -> tuple[float, float]:
    """Clopper–Pearson 95% interval of a rejection rate (scipy.stats.binomtest(...).proportion_ci)."""
    from scipy.stats import binomtest

    if n <= 0:
        return float("nan"), float("nan")
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def _row(family, design, kind, flags, target_max=None, target_min=None, level="whole audit", meaning="",
         tests_flagged=None, n_tests=None, seconds=0.0) -> ValidityRow:
    runs = len(flags)
    k = int(sum(bool(f) for f in flags))
    rate = k / runs if runs else float("nan")
    lo, hi = binomial_ci(k, runs)
    if target_max is not None:
        target, meets = f"≤ {target_max:.2f}", rate <= target_max + 1e-12
    elif target_min is not None:
        target, meets = f"≥ {target_min:.2f}", rate >= target_min - 1e-12
    else:
        target, meets = "reported (power)", None
    per_test = (tests_flagged / n_tests) if n_tests else None
    if meets is None:
        verdict = "no target"
    elif meets:
        verdict = "meets"
    else:
        beyond = lo > target_max if target_max is not None else hi < target_min
        verdict = "misses" if beyond else "unclear"
    return ValidityRow(family, design, kind, runs, k, rate, lo, hi, target, meets, verdict, level, meaning,
                       per_test, n_tests, seconds)


def _run_seed(seed: int, family: str, design: str, run: int) -> int:
    import zlib

    return int(np.random.default_rng([int(seed), zlib.crc32(f"{family}/{design}".encode()), int(run)])
               .integers(0, 2**31 - 1))


# ==============================================================================================================
# Families


def _count_differs(records, verdict_col: str = "verdict", fallback: str = "significant_bh") -> tuple[int, int]:
    """(tests that said "differs", tests) over a record table (DataFrame or list of dicts)."""
    import pandas as pd

    df = records if isinstance(records, pd.DataFrame) else pd.DataFrame.from_records(list(records))
    if df.empty:
        return 0, 0
    if verdict_col in df.columns:
        col = df[verdict_col]
        tested = col.notna() & (col.astype(str) != "not tested")
        if "p_value" in df.columns:
            tested &= df["p_value"].notna()
        return int((col == "differs").sum()), int(tested.sum())
    if fallback in df.columns:
        col = df[fallback]
        tested = col.notna()
        if "p_value" in df.columns:
            tested &= df["p_value"].notna()
        return int((col == True).sum()), int(tested.sum())  # noqa: E712 (object column with None)
    raise DataError(f"The audit result has neither a '{verdict_col}' nor a '{fallback}' column to count.")


def _groups_run(item: tuple, shared, rep: Reporter) -> tuple[int, int, float]:  # noqa: ARG001
    """One simulated group audit (a task of the executor): (tests that said "differs", tests, CPU seconds)."""
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.synthetic.group_sim import simulate_audit_table

    seed, kind, gap, sizes, i = item
    t0 = time.process_time()
    s = _run_seed(seed, "groups", kind, i)
    df, roles = simulate_audit_table(group_sizes=sizes, planted_gap=gap, planted_metric="recall", seed=s)
    # The simulated scores are not calibrated probabilities (uniform on either side of 0.5), so calibration
    # tests (METHODS §8) would be true findings; in one BH family with the gaps they make gap false alarms
    # more frequent (measured 23 of 40 null audits against 2 of 40). This family measures the gap tests.
    res = run_group_audit(df, GroupAuditPlan(roles, threshold=0.5, n_boot=GROUP_N_BOOT, seed=s, calibration=False),
                          cancel=rep.cancel)
    k, m = _count_differs(res.records)
    return k, m, time.process_time() - t0


def _groups_family(runs: int, seed: int, rep: Reporter, notes: list[str], ex) -> list[ValidityRow]:
    # The null keeps groups small (the hard case for size); the planted gap sits in a cohort of a size a hospital
    # audit has (400 positives in the group), since 40 positives against 20 cannot carry a 0.2 recall gap through
    # an audit-wide correction of ~200 tests (measured: found in 1 of 20 audits).
    small, clinical = (400, 200, 100, 60, 40), (4000, 2000, 1000, 600, 400)
    designs = [("complete null: 10 tasks, 5 unequal groups (400–40), prevalence 0.1", "null", 0.0, small),
               (f"planted recall gap {GROUP_PLANTED_GAP:g} in one group of one task (groups 4000–400)", "planted",
                GROUP_PLANTED_GAP, clinical)]
    rows = []
    for d, (design, kind, gap, sizes) in enumerate(designs):
        sub = rep.sub(d / len(designs), (d + 1) / len(designs))
        out = ex.map(_groups_run, [(seed, kind, gap, sizes, i) for i in range(runs)], sub,
                     lambda it, kind=kind: f"groups: {kind} audit {it[-1] + 1}/{runs}")
        flags, hits, tests = [k > 0 for k, _, _ in out], sum(k for k, _, _ in out), sum(m for _, m, _ in out)
        meaning = ("share of complete-null audits (no gap anywhere) that report at least one gap as differing "
                   "after the audit's correction — the false-alarm rate a board sees"
                   if kind == "null" else
                   "share of audits with one planted recall gap that report at least one gap as differing")
        rows.append(_row("groups", design, kind, flags,
                         target_max=ALPHA + SIZE_TOLERANCE if kind == "null" else None, meaning=meaning,
                         tests_flagged=hits, n_tests=tests, seconds=sum(c for *_, c in out)))
    notes.append(f"groups: {GROUP_N_BOOT} bootstrap replicates per audit (the product default is 1000).")
    return rows


def _mlm_run(item: tuple, shared, rep: Reporter) -> tuple[bool, int, int, float]:  # noqa: ARG001
    """One simulated masked-LM probe (a task): (rejected, categories said "differs", categories, CPU seconds)."""
    import importlib

    from fairdesk.core.audits.mlm_bias import category_statistics
    from fairdesk.core.synthetic.mlm_sim import simulate_probe_scores

    seed, kind, bias, law, i = item
    t0 = time.process_time()
    planted_cat = next(iter(MLM_PLANTED))
    run_seed = _run_seed(seed, "mlm", kind if law == "normal" else f"{kind}/{law}", i)
    extra = {} if law == "normal" else {"template_law": law}
    shipped = getattr(importlib.import_module("fairdesk.core.synthetic.mlm_sim"), "shipped_template_counts", None)
    if law in MLM_DRAWN_COUNTS and shipped is not None:   # 6–15 templates per category, drawn per probe
        codes = list(shipped())
        counts = np.random.default_rng([run_seed, 6]).integers(6, 16, size=len(codes))
        extra["templates_per_category"] = {c: int(k) for c, k in zip(codes, counts)}
    scores = simulate_probe_scores(bias=bias, seed=run_seed, **extra)
    recs = category_statistics(scores, ("male", "female"))
    col = "verdict" if any("verdict" in r for r in recs) else "flagged"
    said = [(r.get("verdict") == "differs") if col == "verdict" else bool(r.get("flagged")) for r in recs]
    if kind == "null":
        flag = any(said)
    else:  # the planted category itself must be found
        flag = any(s for r, s in zip(recs, said) if r.get("category") == planted_cat)
    return flag, sum(said), len(recs), time.process_time() - t0


def _mlm_family(runs: int, seed: int, rep: Reporter, notes: list[str], ex) -> list[ValidityRow]:  # noqa: ARG001
    planted_cat, planted_bias = next(iter(MLM_PLANTED.items()))
    designs = [(f"template noise (SD 0.5 nats, {law}{', 6–15 templates' if law in MLM_DRAWN_COUNTS else ''}), "
                "no bias in any category", "null", None, law) for law in MLM_NULL_LAWS]
    designs[0] = ("template noise (SD 0.5 nats), no bias in any category", "null", None, "normal")
    designs.append((f"bias {planted_bias:g} nats in {planted_cat}", "planted", dict(MLM_PLANTED), "normal"))
    rows = []
    for d, (design, kind, bias, law) in enumerate(designs):
        sub = rep.sub(d / len(designs), (d + 1) / len(designs))
        out = ex.map(_mlm_run, [(seed, kind, bias, law, i) for i in range(runs)], sub,
                     lambda it, kind=kind: f"mlm: {kind} probe {it[-1] + 1}/{runs}")
        flags, hits, tests = [o[0] for o in out], sum(o[1] for o in out), sum(o[2] for o in out)
        meaning = ("share of probes of an unbiased model (templates lean at random) that call at least one "
                   "category biased" if kind == "null" else
                   f"share of probes that call the planted category {planted_cat} biased")
        rows.append(_row("mlm", design, kind, flags,
                         target_max=ALPHA + SIZE_TOLERANCE if kind == "null" else None,
                         level="whole audit" if kind == "null" else "planted category", meaning=meaning,
                         tests_flagged=hits, n_tests=tests, seconds=sum(o[-1] for o in out)))
    return rows


def _age_run(item: tuple, shared, rep: Reporter) -> tuple[bool, bool, float]:  # noqa: ARG001
    """One simulated comparison of two learners (a task): (corrected test rejects, plain test rejects, CPU s)."""
    from fairdesk.core.synthetic.cv_compare_sim import compare_learners, equal_learner_cohort

    seed, kind, repeats, i = item
    t0 = time.process_time()
    s = _run_seed(seed, "age", f"{kind}/{repeats}", i)
    table, a, b = equal_learner_cohort(signal_b=None if kind == "null" else AGE_PLANTED_SIGNAL, seed=s)
    res = compare_learners(table, a, b, folds=5, repeats=repeats, seed=s)
    return res["p_corrected"] < ALPHA, res["p_plain"] < ALPHA, time.process_time() - t0


def _age_family(runs: int, seed: int, rep: Reporter, notes: list[str], ex) -> list[ValidityRow]:
    designs = [(r, kind) for kind in ("null", "planted") for r in AGE_REPEATS]
    rows = []
    for d, (repeats, kind) in enumerate(designs):
        sub = rep.sub(d / len(designs), (d + 1) / len(designs))
        out = ex.map(_age_run, [(seed, kind, repeats, i) for i in range(runs)], sub,
                     lambda it, kind=kind, repeats=repeats: f"age: {kind}, {repeats} repeat(s), run {it[-1] + 1}/{runs}")
        p = {"corrected": [o[0] for o in out], "plain": [o[1] for o in out]}
        what = ("two equally good learners" if kind == "null" else "a learner about 5 accuracy points worse")
        for test, name in (("corrected", "corrected resampled t (default)"),
                           ("plain", "plain paired t (anti-conservative option)")):
            target = dict(target_max=ALPHA + SIZE_TOLERANCE) if kind == "null" and test == "corrected" else {}
            meaning = (f"share of comparisons of {what} over 5-fold participant-disjoint CV with {repeats} "
                       f"repeat(s) that the {name} calls different (one-tailed, α = {ALPHA:g})")
            rows.append(_row("age", f"{what}, {repeats} repeat(s): {name}", kind, p[test], level="single test",
                             meaning=meaning, seconds=sum(o[-1] for o in out), **target))
    notes.append("age: logistic regressions on two symmetric feature blocks of a synthetic cohort (120 participants, "
                 "1–4 sessions each); the plain paired t rows have no target — they show why it is not the default.")
    return rows


def cit_designs(n: int) -> list[tuple[str, str, dict]]:
    """The cit family's designs at sample size n: the four nuisance scenarios under the null, and β planted as a
    constant effect and as one whose sign changes with z₂."""
    out = []
    for h_nl in (False, True):
        for m_nl in (False, True):
            out.append((f"n={n}: E[Ŷ|Z] {'non-lin.' if h_nl else 'linear'}, "
                        f"P(A|Z) {'non-lin.' if m_nl else 'linear'}", "null",
                        dict(h_nonlinear=h_nl, m_nonlinear=m_nl, beta=0.0)))
    out.append((f"n={n}: β = {CIT_BETA:g}, both non-linear", "planted",
                dict(h_nonlinear=True, m_nonlinear=True, beta=CIT_BETA)))
    out.append((f"n={n}: sign-changing β·(2A−1)·z₂, β = {CIT_BETA:g}, both non-linear", "planted",
                dict(h_nonlinear=True, m_nonlinear=True, beta=CIT_BETA, effect="sign-changing")))
    return out


def cit_run(seed: int, design: str, params: dict, run: int, n: int) -> tuple[int, tuple]:
    """Run ``run`` of a cit design (:func:`cit_designs`): its seed and (ŷ, a, z), the same data as
    ``bench validity --family cit`` (also used by ``benchmarks/bench_cit_default.py``)."""
    from fairdesk.core.synthetic.cit_benchmark import nuisance_scenario

    s = _run_seed(seed, "cit", design, run)
    return s, nuisance_scenario(n, s, **params)


def _cit_run(item: tuple, shared, rep: Reporter) -> tuple[bool, float]:  # noqa: ARG001
    """One simulated counterfactual-invariance test (a task): (rejected, CPU seconds)."""
    from fairdesk.core.audits import cit

    seed, design, params, i, n = item
    t0 = time.process_time()
    s, (yhat, a, z) = cit_run(seed, design, params, i, n)
    return cit.cit_test(yhat, a, z, seed=s, cancel=rep.cancel).p_value < ALPHA, time.process_time() - t0


#: The drawn CIT designs' planted effects: (effect of :data:`..synthetic.cit_benchmark.CIT_EFFECTS`, β).
CIT_DRAWN_EFFECTS = (("constant", 0.5), ("even", 1.0), ("odd", 1.0))


def cit_drawn_run(seed: int, effect: str | None, beta: float, run: int, n: int) -> tuple[int, dict, tuple]:
    """Run ``run`` of the drawn CIT designs (:func:`..synthetic.cit_benchmark.draw_cit_design`): its seed, the
    design and (ŷ, a, z); ``effect`` None = the null."""
    from fairdesk.core.synthetic.cit_benchmark import cit_design_data, draw_cit_design

    s = _run_seed(seed, "cit", f"drawn/{effect}", run)
    design = draw_cit_design(np.random.default_rng([s, 7]))
    return s, design, cit_design_data(design, n, s, beta if effect else 0.0, effect or "constant")


def _cit_drawn_task(item: tuple, shared, rep: Reporter) -> tuple[bool, float]:  # noqa: ARG001
    """One drawn-design test (a task): (rejected, CPU seconds). ``exact`` (the item's last element): the same data
    with the design's true E[Ŷ|Z] and P(A|Z) in place of the fitted nuisances (null only)."""
    from fairdesk.core.audits import cit
    from fairdesk.core.synthetic.cit_benchmark import cit_design_truth

    seed, effect, beta, i, n, exact = item
    t0 = time.process_time()
    s, design, (yhat, a, z) = cit_drawn_run(seed, effect, beta, i, n)
    if exact:
        folds = cit.make_folds(a, 5, s)
        m_true = cit_design_truth(design, z)[1]
        res = cit.gcm_test(yhat, a, z, seed=s, folds=folds, m_hat=m_true,
                           known_h=lambda zz: cit_design_truth(design, zz)[0], reporter=rep)
    else:
        res = cit.cit_test(yhat, a, z, seed=s, cancel=rep.cancel)
    return res.p_value < ALPHA, time.process_time() - t0


def _cit_drawn_rows(runs: int, seed: int, rep: Reporter, n: int, ex) -> list[ValidityRow]:
    """A fresh design per run: heteroscedastic noise, propensity and classifier mean of drawn shapes sharing z₀,
    hard or soft outputs; the null and a planted constant, even (A·(z₁² − 1)) and odd ((2A − 1)·z₂) effect."""
    designs = [(None, 0.0, False), (None, 0.0, True)] + [(e, b, False) for e, b in CIT_DRAWN_EFFECTS]
    rows = []
    for d, (effect, beta, exact) in enumerate(designs):
        sub = rep.sub(d / len(designs), (d + 1) / len(designs))
        out = ex.map(_cit_drawn_task, [(seed, effect, beta, i, n, exact) for i in range(runs)], sub,
                     lambda it, effect=effect: f"cit: drawn designs, {effect or 'null'} run {it[-3] + 1}/{runs}")
        flags = [o[0] for o in out]
        if effect is None and exact:
            rows.append(_row("cit", f"n={n}: the same invariant designs, exact E[Ŷ|Z] and P(A|Z)", "null", flags,
                             target_max=ALPHA + SIZE_TOLERANCE, level="single test", seconds=sum(o[-1] for o in out),
                             meaning="the row above with the design's true nuisances in place of the fitted ones "
                                     "(the weight still learned): the false alarms the data alone make; the "
                                     "difference to the row above is the nuisance fits' share"))
        elif effect is None:
            rows.append(_row("cit", f"n={n}: drawn designs (heteroscedastic, non-linear shapes), invariant", "null",
                             flags, target_max=ALPHA + SIZE_TOLERANCE, level="single test",
                             seconds=sum(o[-1] for o in out),
                             meaning="share of invariant classifiers of freshly drawn designs (one per run) that the "
                                     "default test calls dependent"))
        else:
            what = {"constant": "β·A", "even": "β·A·(z₁² − 1)", "odd": "β·(2A − 1)·z₂"}[effect]
            rows.append(_row("cit", f"n={n}: drawn designs, {what} on the latent, β = {beta:g}", "planted", flags,
                             level="single test", seconds=sum(o[-1] for o in out),
                             meaning=f"share of classifiers of drawn designs with {what} planted that the default "
                                     "test calls dependent"))
    return rows


def _cit_family(runs: int, seed: int, rep: Reporter, notes: list[str], n: int, ex) -> list[ValidityRow]:
    from fairdesk.core.audits import cit

    fixed, rep = rep.sub(0.0, 0.5), rep.sub(0.5, 1.0)
    designs = cit_designs(n)
    rows = []
    for d, (design, kind, params) in enumerate(designs):
        sub = fixed.sub(d / len(designs), (d + 1) / len(designs))
        out = ex.map(_cit_run, [(seed, design, params, i, n) for i in range(runs)], sub,
                     lambda it, design=design: f"cit: {design} run {it[-2] + 1}/{runs}")
        flags = [o[0] for o in out]
        if kind == "null":
            meaning = ("share of classifiers that are invariant given Z (Ŷ ⟂ A | Z) that the default test calls "
                       "dependent")
            target = dict(target_max=ALPHA + SIZE_TOLERANCE)
        else:
            sign = params.get("effect") == "sign-changing"
            meaning = ("share of classifiers with a planted dependence on A (" +
                       ("β·(2A−1)·z₂ on the logit of Ŷ: no average effect" if sign else "β on the logit of Ŷ") +
                       ", both nuisances non-linear) that the default test calls dependent")
            target = dict(target_min=CIT_POWER_TARGET) if n >= CIT_POWER_N and not sign else {}
        rows.append(_row("cit", design, kind, flags, level="single test", meaning=meaning,
                         seconds=sum(o[-1] for o in out), **target))
    rows += _cit_drawn_rows(runs, seed, rep, n, ex)
    notes.append(f"cit: default test ({cit.DEFAULT_METHOD}, regressor '{cit.DEFAULT_REGRESSOR}', scheme "
                 f"'{cit.DEFAULT_SCHEME}'); power target {CIT_POWER_TARGET:.0%} applies at n ≥ {CIT_POWER_N}.")
    return rows


# ==============================================================================================================
# calibration: whole-patient calibration of one group over drawn cluster designs


#: The space the calibration family draws its clustered groups from (each run one design): rows, prevalence,
#: AUROC, most rows per patient, intra-patient correlation of the latent score, and the score's slope factor β
#: (the true calibration slope is 1/β; β = 1 and intercept 0 for the size rows).
CALIBRATION_SPACE = {"rows": (300, 4000), "prevalence": (0.03, 0.4), "auroc": (0.65, 0.995),
                     "max_rows_per_patient": (2, 30), "icc": (0.1, 0.9), "beta": (0.6, 1.6)}
#: A coverage row passes when its rate is at least the nominal 0.95 less this.
COVERAGE_TOLERANCE = 0.02
#: Bands of patients among the group's smaller class (the patients the calibration numbers rest on).
CALIBRATION_BANDS = ((10, 29), (30, 99), (100, 10**9))


def draw_calibration_design(rng: np.random.Generator, calibrated: bool):
    """One clustered group of :data:`CALIBRATION_SPACE` (rows log-uniform, the rest uniform; β = 1 when
    ``calibrated``) as a :class:`fairdesk.core.synthetic.design_space.Design`."""
    from fairdesk.core.synthetic.design_space import Design

    sp = CALIBRATION_SPACE
    n = int(round(math.exp(rng.uniform(*np.log(sp["rows"])))))
    beta = 1.0 if calibrated else float(math.exp(rng.uniform(*np.log(sp["beta"]))))
    return Design("calibrated", [n], [float(rng.uniform(*sp["prevalence"]))], float(rng.uniform(*sp["auroc"])), 0.0,
                  beta, 0.2, int(rng.integers(sp["max_rows_per_patient"][0], sp["max_rows_per_patient"][1] + 1)),
                  float(rng.uniform(*sp["icc"])), mu=[0.0])


def calibration_run(seed: int, kind: str, run: int) -> dict:
    """One drawn clustered group through the audit's own calibration path
    (:func:`fairdesk.core.audits.groups.group_calibration`, whole patients): the design, the patients of the
    smaller class, whether the slope interval covers 1/β, and the joint LR test's p (None: too few cases)."""
    from fairdesk.core.audits.groups import GroupAuditPlan, group_calibration
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.stats.discrimination import ranked, summary
    from fairdesk.core.synthetic import design_space as DS

    s = _run_seed(seed, "calibration", kind, run)
    rng = np.random.default_rng(s)
    d = draw_calibration_design(rng, calibrated=kind == "null")
    n = d.sizes[0]
    y, latent, pid = DS._latent(d, 0, n, rng, True)
    values, pos, neg, cell = ranked(y, DS._score(d, 0, latent), return_cell=True)
    plan = GroupAuditPlan(ColumnRoles(label="y", score="s", attributes=("g",), patient_id="pid"), threshold=0.5)
    g = group_calibration(values, pos, neg, cell, summary(pos, neg), pid, plan, np.random.default_rng([s, 1]))
    smaller = y if y.mean() <= 0.5 else 1 - y
    case_patients = int(np.unique(pid[smaller == 1]).size)
    lo, hi = g["row"].get("calibration_slope_ci_low"), g["row"].get("calibration_slope_ci_high")
    covered = None if lo is None or hi is None else bool(lo <= 1.0 / d.beta <= hi)
    return {"case_patients": case_patients, "rows": n, "prevalence": d.prevalence[0], "auroc": d.auroc,
            "max_rows_per_patient": d.max_rows_per_patient, "icc": d.rho, "beta": d.beta, "covered": covered,
            "p": None if g["test"] is None else float(g["test"][0])}


def _calibration_task(item: tuple, shared, rep: Reporter) -> tuple[dict, float]:  # noqa: ARG001
    seed, kind, i = item
    t0 = time.process_time()
    return calibration_run(seed, kind, i), time.process_time() - t0


def _calibration_family(runs: int, seed: int, rep: Reporter, notes: list[str], ex) -> list[ValidityRow]:
    rows = []
    for d, kind in enumerate(("null", "coverage")):
        sub = rep.sub(d / 2, (d + 1) / 2)
        out = ex.map(_calibration_task, [(seed, kind, i) for i in range(runs)], sub,
                     lambda it, kind=kind: f"calibration: {kind} group {it[-1] + 1}/{runs}")
        secs = sum(c for _, c in out)
        res = [r for r, _ in out]
        for lo, hi in ((10, 10**9),) + CALIBRATION_BANDS:
            band = [r for r in res if lo <= r["case_patients"] <= hi]
            where = ("drawn clustered groups" if hi == 10**9 and lo == 10 else
                     f"{lo}{'+' if hi == 10**9 else f'–{hi}'} patients in the smaller class")
            if kind == "null":
                flags = [r["p"] < ALPHA for r in band if r["p"] is not None]
                rows.append(_row("calibration", f"calibrated, whole patients: {where}", "null", flags,
                                 target_max=ALPHA + SIZE_TOLERANCE, level="single test", seconds=secs,
                                 meaning="share of calibrated groups with repeated patients that the joint LR test "
                                         "(Rao–Scott F with the smaller class's patients' df) calls miscalibrated"))
            else:
                flags = [r["covered"] for r in band if r["covered"] is not None]
                rows.append(_row("calibration", f"slope 1/β, β drawn, whole patients: {where}", "coverage", flags,
                                 target_min=0.95 - COVERAGE_TOLERANCE, level="single interval", seconds=secs,
                                 meaning="share of 95% whole-patient intervals of the calibration slope (CR2, t with "
                                         "the smaller class's patients' df) that cover the true slope"))
        untested = sum(r["p"] is None if kind == "null" else r["covered"] is None for r in res)
        notes.append(f"calibration/{kind}: {untested} of {runs} drawn groups had too few case patients (< 10) and "
                     "no test or interval — the audit says so.")
    notes.append("calibration: space " + ", ".join(f"{k} {v[0]}–{v[1]}" for k, v in CALIBRATION_SPACE.items()) +
                 " (β only in the coverage rows).")
    return rows


# ==============================================================================================================
# Driver


def run_validity(families: tuple[str, ...] | str = FAMILIES, runs: int | None = None, seed: int = 0,
                 n: int = 1000, progress: ProgressFn | None = None,
                 cancel: CancelToken | None = None, executor=None) -> ValidityResult:
    """Run the null and planted simulations of ``families`` (``"all"`` or a tuple of :data:`FAMILIES`).

    ``runs`` per design (default :data:`DEFAULT_RUNS` per family), ``n`` the cit family's sample size. Progress per
    run; cancel between runs. ``executor`` (:mod:`fairdesk.core.executor`): where the runs of the groups, mlm, age
    and cit families run, one task per run (each seeded by its design and number, so the rows are the same on any
    executor); the ctf family's runs stay in this process."""
    from fairdesk.core.executor import open_executor

    if isinstance(families, str):
        families = FAMILIES if families == "all" else (families,)
    families = tuple(families)
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        raise DataError(f"Unknown audit family {bad}; choose from {', '.join(FAMILIES)} or 'all'.")
    if runs is not None and runs < 1:
        raise DataError("The number of runs must be at least 1.")
    if n < 100:
        raise DataError("The cit family needs a sample size of at least 100.")
    rep = Reporter(progress, cancel)
    t0 = time.monotonic()
    rows: list[ValidityRow] = []
    notes: list[str] = []
    with open_executor(executor) as ex:
        for j, fam in enumerate(families):
            sub = rep.sub(j / len(families), (j + 1) / len(families))
            r = runs or DEFAULT_RUNS[fam]
            try:
                if fam == "groups":
                    rows += _groups_family(r, seed, sub, notes, ex)
                elif fam == "mlm":
                    rows += _mlm_family(r, seed, sub, notes, ex)
                elif fam == "ctf":  # the CTF audit's simulations live in core/synthetic/ctf_sim.py
                    from fairdesk.core.synthetic.ctf_sim import validity_runs

                    rows += [_row("ctf", **row) for row in validity_runs(r, seed, sub, notes)]
                elif fam == "age":
                    rows += _age_family(r, seed, sub, notes, ex)
                elif fam == "slices":  # the slice audit's simulations live in core/synthetic/slice_sim.py
                    from fairdesk.core.synthetic.slice_sim import validity_runs as slice_runs

                    rows += [_row("slices", **row) for row in slice_runs(r, seed, sub, notes)]
                elif fam == "calibration":
                    rows += _calibration_family(r, seed, sub, notes, ex)
                elif fam == "monitor":  # the monitor's streams live in core/synthetic/monitor_sim.py
                    from fairdesk.core.synthetic.monitor_sim import validity_runs as monitor_runs

                    rows += [_row("monitor", **row) for row in monitor_runs(r, seed, sub, notes)]
                else:
                    rows += _cit_family(r, seed, sub, notes, n, ex)
            except ImportError as err:
                if len(families) == 1:
                    raise DataError(f"The {fam} simulation is not available in this build ({err}).") from err
                notes.append(f"{fam}: not run — its simulation is not available in this build ({err}).")
        executor_record = ex.provenance()
    rep(1.0, "done")
    config = {"families": list(families), "runs": runs, "runs_per_family": {f: runs or DEFAULT_RUNS[f]
                                                                             for f in families},
              "seed": seed, "n": n, "alpha": ALPHA, "size_tolerance": SIZE_TOLERANCE}
    prov = _prov.make(seed, None, study="validity", executor=executor_record)
    return ValidityResult(rows, config, prov, time.monotonic() - t0, notes)


def format_table(result: ValidityResult) -> str:
    """The plain-text table the CLI prints."""
    head = f"{'family':<7} {'design':<62} {'kind':<8} {'runs':>5} {'rate':>6} {'95% CI':>15} {'target':>17}  meets"
    lines = [head, "-" * len(head)]
    for r in result.rows:
        ok = {"meets": "yes", "misses": "NO", "unclear": "unclear", "no target": "—"}[r.verdict]
        ci = f"[{r.ci_low:.3f}, {r.ci_high:.3f}]" if math.isfinite(r.ci_low) else "—"
        lines.append(f"{r.family:<7} {r.design[:62]:<62} {r.kind:<8} {r.runs:>5} {r.rate:>6.3f} {ci:>15} "
                     f"{r.target:>17}  {ok}")
    return "\n".join(lines)
