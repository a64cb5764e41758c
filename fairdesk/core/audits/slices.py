"""Slices nobody named: search the intersections of the chosen attributes for the worst-served subgroups,
then test the ones carried forward on rows the search never saw.

Entry point: :func:`run_slice_audit` ``(table, plan, progress, cancel) -> SliceAuditResult``.

Per task:

1. **Split.** The rows are cut into a discovery part (share ``plan.discovery_fraction``) and a confirmation part,
   stratified by label and patient-disjoint when a patient id is given (:func:`split_rows`; fraction, seed and the
   row and patient counts are stored).
2. **Search** on discovery only (:func:`search`): every intersection of one to ``plan.max_order`` attribute values
   (continuous attributes cut into ``plan.bins`` equal-frequency bins whose edges come from the discovery rows)
   with at least ``plan.min_size`` rows and at least the small-cell k rows and cases its rate rests on is scored
   against the rest of the task's rows by the group audit's own score statistic
   (:func:`fairdesk.core.stats.gaps.score_test`), signed so that large means worse served (lower recall or
   specificity, higher error rate; either direction for parity).
3. **Carry** the ``plan.carry`` best-scored slices forward, a slice skipped when at least :data:`OVERLAP` of its
   discovery rows are rows of a slice already carried (METHODS §9: a near-duplicate, or a part of a better slice).
   The list is fixed before any confirmation row is looked at.
4. **Confirm**: each carried slice against the rest on the confirmation rows with the group audit's test, interval
   and equivalence test (:func:`fairdesk.core.audits.groups.rate_gap_test`: score test with a bootstrap design
   effect, Agresti–Caffo interval, TOST at ±margin, whole-patient t reference when patients repeat), corrected over
   every carried slice of the audit (:func:`fairdesk.core.audits.groups.correct`, one family). A slice "differs"
   only when the confirmation part says so; the discovery numbers are stored beside it, never tested.

Why a lattice search of our own rather than ``sliceline`` (SliceLine on sparse one-hot data, PyPI 0.3.0): SliceLine
scores slices by average error over the whole data (one error vector), so recall and specificity need one run per
class with its own rest, and its score trades error against size with a weight α instead of the test the
confirmation uses; its pruning is by score bounds of that objective. Enumerating every intersection with one
``np.bincount`` of confusion cells per attribute combination costs less than one SliceLine fit at this size and
ranks by the statistic that is tested afterwards: ``benchmarks/bench_slices.py`` measured both on 100,000 rows × 8
attributes (numbers in docs/methods.md, "Slices nobody named").
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core import provenance as _prov
from fairdesk.core.audits.groups import (BOUNDARY_PSEUDO, THRESHOLD_REQUIRED, assign_bins, correct,
                                         equal_frequency_bins, flat_threshold_warning, rate, rate_gap_test,
                                         task_column)
from fairdesk.core.data.loaders import table_sha256
from fairdesk.core.data.schema import ColumnRoles, prepare, validate
from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.stats.bootstrap import cluster_cell_counts, stratified_cell_counts
from fairdesk.core.stats.thresholds import best_f1_threshold

METRICS = ("recall", "specificity", "parity", "error")
METRIC_TEXT = {"recall": "recall", "specificity": "specificity", "parity": "positive prediction rate",
               "error": "error rate"}
#: the cases a metric's rate rests on (its denominator), in words
CASES_TEXT = {"recall": "positive cases", "specificity": "negative cases", "parity": "rows", "error": "rows"}
VERDICTS = ("differs", "equivalent", "inconclusive")
#: a candidate of which at least this share of the rows belongs to a carried (better) slice is not carried (§9)
OVERLAP = 0.8
#: at most this many candidates per task are looked at (best first) while filling the carried list
MAX_EXAMINED = 5000
MAX_ORDER = 4
SEARCH_TEXT = ("exhaustive lattice search: every intersection of one to {order} attribute values with at least "
               "{size} rows (and at least {k} rows and cases of its rate) scored by the score statistic of its rate "
               "against the rest, on the discovery rows only")
TEST_TEXT = ("slice vs rest on the confirmation rows: score test with a bootstrap design effect, Agresti–Caffo "
             "interval, TOST at ±margin (the group audit's test)")


@dataclass
class SliceAuditPlan:
    """What to search and how. Mirrors the options of ``fairdesk-cli audit slices``."""

    roles: ColumnRoles
    threshold: float | str | None = None  # required: a number in (0, 1) or "best_f1" (chosen on the discovery rows)
    metric: str = "recall"
    bins: int = 5
    max_order: int = 3
    min_size: int = 50
    carry: int = 20
    discovery_fraction: float = 0.5
    seed: int = 0
    alpha: float = 0.05
    margin: float = 0.05
    correction: str = "bh"
    n_boot: int = 1000  # bootstrap of the confirmation counts for the design effect (as the group audit)
    min_denominator: int = 10  # a rate on fewer cases is not tested (the group audit's default)
    suppress_k: int = 11  # the small-cell k: slices with fewer rows or cases are not searched
    ci_level: float = 0.95
    family: str = "audit"  # one correction family: every carried slice of the audit (read by groups.correct)
    evaluate_on: str = "test"  # with a split column mapped (roles.split): search and confirm on these rows only

    def __post_init__(self) -> None:
        from fairdesk.core.limits import check_number

        if self.threshold is None:
            raise DataError(THRESHOLD_REQUIRED)
        if isinstance(self.threshold, str) and self.threshold != "best_f1":
            try:
                self.threshold = float(self.threshold)
            except ValueError:
                raise DataError("--threshold must be a number in (0, 1) or 'best_f1'.") from None
        if not isinstance(self.threshold, str):
            self.threshold = check_number(self.threshold, "--threshold", 0.0, 1.0, whole=False, open_ends=True,
                                          what="the score at which the model flags a patient")
        if self.metric not in METRICS:
            raise DataError(f"--metric '{self.metric}' is not known; choose one of {', '.join(METRICS)}.")
        if self.correction not in ("bh", "holm"):
            raise DataError(f"Unknown correction '{self.correction}'; choose bh or holm.")
        for name, option, low, high, whole, what in (
                ("bins", "--bins", 2, 100, True, "the number of bins of a continuous attribute"),
                ("max_order", "--max-order", 1, MAX_ORDER, True, "the most attribute values a slice combines"),
                ("min_size", "--min-size", 1, 10**9, True, "the fewest rows a searched slice has"),
                ("carry", "--carry", 1, 1000, True, "how many slices are carried to the confirmation rows"),
                ("discovery_fraction", "--discovery-fraction", 0.0, 1.0, False,
                 "the share of the rows the search sees, e.g. 0.5"),
                ("seed", "--seed", 0, 2**32 - 1, True, "the random seed"),
                ("alpha", "--alpha", 0.0, 1.0, False, "the significance level, e.g. 0.05"),
                ("margin", "--margin", 0.0, 1.0, False, "the equivalence margin, a difference of rates"),
                ("n_boot", "--n-boot", 100, 100_000, True, "the bootstrap replicates of the design effect"),
                ("min_denominator", "--min-denominator", 1, 10**9, True, "the fewest cases a tested rate rests on"),
                ("suppress_k", "--suppress-k", 1, 10**6, True, "the small-cell threshold k"),
                ("ci_level", "ci_level", 0.0, 1.0, False, "the confidence level")):
            setattr(self, name, check_number(getattr(self, name), option, low, high, whole=whole, what=what,
                                             open_ends=not whole))
        if not self.roles.attributes and not self.roles.continuous_attributes:
            raise DataError("Give at least one --attribute (or --continuous-attribute) to search slices over.")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["roles"] = self.roles.to_dict()
        return d


SLICE_COLUMNS = ["task", "rank", "definition", "description", "order", "metric", "n", "cases", "value", "rest_n",
                 "rest_cases", "rest_value", "gap", "ci_low", "ci_high", "p_value", "q_value", "p_equivalence",
                 "q_equivalence", "verdict", "reason", "test_id", "discovery_n", "discovery_cases",
                 "discovery_value", "discovery_rest_value", "discovery_gap", "discovery_score", "ci_low_unadjusted",
                 "ci_high_unadjusted"]
TASK_COLUMNS = ["task", "threshold", "searched", "carried", "discovery_rows", "confirmation_rows",
                "discovery_patients", "confirmation_patients", "bins"]


@dataclass
class SliceAuditResult:
    plan: SliceAuditPlan
    slices: pd.DataFrame  # one row per carried slice (its confirmation test and its discovery numbers)
    tasks: pd.DataFrame  # per task: threshold, candidates searched, slices carried, split counts, bin edges
    searched: int
    searched_by_order: dict[str, int]
    split: dict
    thresholds: dict[str, float]
    provenance: dict
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return jsonable({
            "kind": "slices", "plan": self.plan.to_dict(), "slices": self.slices.to_dict(orient="records"),
            "tasks": self.tasks.to_dict(orient="records"), "searched": int(self.searched),
            "searched_by_order": dict(self.searched_by_order), "split": self.split, "thresholds": self.thresholds,
            "search": SEARCH_TEXT.format(order=self.plan.max_order, size=self.plan.min_size,
                                         k=self.plan.suppress_k),
            "test": TEST_TEXT, "counts": verdict_counts(self.slices), "provenance": self.provenance,
            "warnings": list(self.warnings)})

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def verdict_counts(slices: pd.DataFrame) -> dict[str, int]:
    out = {v: int((slices["verdict"] == v).sum()) if not slices.empty else 0 for v in VERDICTS}
    out["total"] = int(len(slices))
    return out


# --------------------------------------------------------------------------------------------------------------
# Rates


def slice_rate(counts: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rate, numerator, denominator) of confusion counts ``[..., TN, FP, FN, TP]``: the group audit's rates
    (:func:`fairdesk.core.audits.groups.rate`) and the error rate (FP + FN) / N."""
    if metric != "error":
        return rate(counts, metric)
    c = counts.astype(float)
    num, den = c[..., 1] + c[..., 2], c.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return r, num, den


def harm_sign(metric: str) -> float:
    """+1 when a higher rate is worse (error), −1 when lower is worse (recall, specificity), 0 for parity (either
    direction: the score is |z|)."""
    return {"error": 1.0, "recall": -1.0, "specificity": -1.0}.get(metric, 0.0)


# --------------------------------------------------------------------------------------------------------------
# Split


def split_rows(y: np.ndarray, patients: np.ndarray | None, fraction: float, seed: int) -> np.ndarray:
    """True for the discovery rows: a share ``fraction`` of the patients (rows when ``patients`` is None), drawn
    within each label stratum with ``seed``; a patient's stratum is whether any of their rows is positive, and all
    their rows go to one part. (What sklearn's ``train_test_split(stratify=...)`` does, in three lines of numpy:
    importing scikit-learn costs seconds, more than the whole search.)"""
    y = np.asarray(y, int)
    if patients is None:
        inverse = np.arange(y.size)
        strata = y
    else:
        _, inverse = np.unique(np.asarray(patients).astype(str), return_inverse=True)
        strata = np.zeros(int(inverse.max()) + 1, int)
        np.maximum.at(strata, inverse, y)
    counts = np.bincount(strata, minlength=2)
    if counts.min() < 2:
        raise DataError("Too few patients (or rows) of each class to split into discovery and confirmation parts: "
                        "the slice search needs at least two of each class.")
    rng = np.random.default_rng(int(seed))
    chosen = np.zeros(strata.size, bool)
    for c in (0, 1):
        units = rng.permutation(np.flatnonzero(strata == c))
        take = min(max(int(round(fraction * units.size)), 1), units.size - 1)  # both parts get each class
        chosen[units[:take]] = True
    return chosen[inverse]


# --------------------------------------------------------------------------------------------------------------
# Attributes as codes


@dataclass
class _Attribute:
    name: str
    values: list[str]  # the value (or bin) names, by code
    codes_of: object  # function: a column of the task's rows -> int codes (−1 missing)


def _categorical(name: str, column: pd.Series) -> _Attribute:
    values = sorted(column.dropna().astype(str).unique())

    def codes(col: pd.Series) -> np.ndarray:
        return pd.Categorical(col.astype("string"), categories=values).codes.astype(np.int64)  # −1: missing

    return _Attribute(name, values, codes)


def bin_names(edges: np.ndarray) -> list[str]:
    """Names of the bins of ``edges`` (lowest "< b", middle "a to < b", top "≥ a")."""
    k = len(edges) - 1
    if k == 1:
        return [f"{edges[0]:g} to {edges[1]:g}"]
    out = []
    for i in range(k):
        lo, hi = edges[i], edges[i + 1]
        out.append(f"< {hi:g}" if i == 0 else f"≥ {lo:g}" if i == k - 1 else f"{lo:g} to < {hi:g}")
    return out


def _continuous(name: str, x: np.ndarray, y: np.ndarray, bins: int) -> tuple[_Attribute, list[float]]:
    ok = ~np.isnan(x)
    if ok.sum() < 2:
        edges = np.array([np.nanmin(x) if ok.any() else 0.0, np.nanmax(x) if ok.any() else 1.0])
    else:
        edges = equal_frequency_bins(x[ok], y[ok], bins)  # the group audit's bins (each holds both classes)

    def codes(col: pd.Series) -> np.ndarray:
        v = pd.to_numeric(col, errors="coerce").to_numpy(float)
        out = assign_bins(np.nan_to_num(v, nan=edges[0]), edges).astype(np.int64)
        out[np.isnan(v)] = -1
        return out

    return _Attribute(name, bin_names(edges), codes), [float(e) for e in edges]


# --------------------------------------------------------------------------------------------------------------
# Search


@dataclass
class Candidates:
    """Every searched slice of one task: ``attrs[i]`` (attribute indices) and ``values[i]`` (their codes) define
    slice i; its discovery counts, rates and score."""

    attrs: list[tuple[int, ...]]
    values: list[tuple[int, ...]]
    n: np.ndarray
    cases: np.ndarray
    value: np.ndarray
    rest_value: np.ndarray
    score: np.ndarray
    by_order: dict[int, int]

    def __len__(self) -> int:
        return int(self.n.size)


def search(codes: np.ndarray, cells: np.ndarray, metric: str, max_order: int, min_size: int, min_cases: int,
           cancel: CancelToken | None = None) -> Candidates:
    """Score every intersection of 1 to ``max_order`` attribute values against the rest.

    ``codes``: (rows, attributes) int codes, −1 = missing (a missing value defines no slice; the row stays in the
    rest); ``cells``: the confusion cell of each row, ``2·y + ŷ``. A slice is kept when it has at least
    ``min_size`` rows and at least ``min_cases`` cases of its rate (the rest as well). Vectorised per attribute
    combination: the combined codes are made unique (``np.unique``) and the confusion counts of all slices of the
    combination are one ``np.bincount``; the score is the group audit's score statistic
    (:func:`fairdesk.core.stats.gaps.score_test`) of slice vs rest, signed by :func:`harm_sign`."""
    from fairdesk.core.stats import gaps as G

    n_rows, n_attr = codes.shape
    total = np.bincount(cells, minlength=4).astype(float)
    sign = harm_sign(metric)
    attrs, values, parts = [], [], []
    by_order: dict[int, int] = {}
    radix = codes.max(axis=0).astype(np.int64) + 2 if n_rows else np.ones(n_attr, np.int64)
    for order in range(1, min(max_order, n_attr) + 1):
        by_order[order] = 0
        for combo in itertools.combinations(range(n_attr), order):
            if cancel is not None:
                cancel.check()
            sub = codes[:, combo]
            ok = (sub >= 0).all(axis=1)
            if ok.sum() < min_size:
                continue
            key = np.zeros(int(ok.sum()), np.int64)
            for j, a in enumerate(combo):
                key = key * radix[a] + sub[ok, j]
            uniq, inv = np.unique(key, return_inverse=True)
            counts = np.bincount(inv * 4 + cells[ok], minlength=4 * uniq.size).reshape(uniq.size, 4).astype(float)
            rest = total[None, :] - counts
            r, x, d = slice_rate(counts, metric)
            rr, xr, dr = slice_rate(rest, metric)
            keep = (counts.sum(axis=1) >= min_size) & (d >= min_cases) & (dr >= min_cases)
            if not keep.any():
                continue
            z, _ = G.score_test(x[keep], d[keep], xr[keep], dr[keep])
            score = np.abs(z) if sign == 0 else sign * z
            # the codes of each kept slice back from its key (mixed radix)
            k_keys = uniq[keep]
            vals = np.empty((k_keys.size, order), np.int64)
            rem = k_keys.copy()
            for j in range(order - 1, -1, -1):
                vals[:, j] = rem % radix[combo[j]]
                rem //= radix[combo[j]]
            attrs.extend([combo] * k_keys.size)
            values.extend(map(tuple, vals.tolist()))
            parts.append(np.column_stack([counts[keep].sum(axis=1), d[keep], r[keep], rr[keep], score]))
            by_order[order] += int(k_keys.size)
    table = np.vstack(parts) if parts else np.empty((0, 5))
    return Candidates(attrs, values, table[:, 0], table[:, 1], table[:, 2], table[:, 3], table[:, 4], by_order)


def slice_mask(codes: np.ndarray, attrs: tuple[int, ...], values: tuple[int, ...]) -> np.ndarray:
    mask = np.ones(codes.shape[0], bool)
    for a, v in zip(attrs, values):
        mask &= codes[:, a] == v
    return mask


def carry_forward(cand: Candidates, codes: np.ndarray, carry: int, overlap: float = OVERLAP) -> list[int]:
    """The indices of the carried slices: best score first, only slices worse served than the rest (score > 0),
    a slice skipped when at least ``overlap`` of its rows are rows of a carried one (so a part of a carried slice,
    and a near copy of one, is not carried; a larger slice holding a carried one is); at most
    ``carry`` of them (:data:`MAX_EXAMINED` candidates looked at)."""
    order = np.argsort(-cand.score, kind="stable")
    chosen: list[int] = []
    masks: list[np.ndarray] = []
    for i in order[:MAX_EXAMINED]:
        if len(chosen) >= carry or not cand.score[i] > 0:
            break
        m = slice_mask(codes, cand.attrs[i], cand.values[i])
        size = m.sum()
        if any((m & c).sum() >= overlap * size for c in masks):
            continue
        chosen.append(int(i))
        masks.append(m)
    return chosen


# --------------------------------------------------------------------------------------------------------------
# The audit


def describe(definition: dict[str, str], continuous: set[str]) -> str:
    """A slice in words: "age ≥ 80, insurance = none and ethnicity = B"."""
    parts = [f"{col} {val}" if col in continuous else f"{col} = {val}" for col, val in definition.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def run_slice_audit(table: pd.DataFrame, plan: SliceAuditPlan, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None, data_sha256: str | None = None,
                    model_hashes: dict[str, str] | None = None) -> SliceAuditResult:
    """Run the slice audit. Raises :class:`DataError` for unusable input, ``Cancelled`` on cancel."""
    rep = Reporter(progress, cancel)
    roles = plan.roles
    report = validate(table, roles, 1)
    report.raise_if_errors()
    df = prepare(table, roles)
    data_sha256 = data_sha256 or table_sha256(table)
    evaluated_on = "all rows"
    if roles.split:  # the rows that judge the model: its held-out evaluation rows, not those it was fitted on
        df[roles.split] = df[roles.split].astype(str)
        values = sorted(df[roles.split].unique())
        if plan.evaluate_on not in values:
            raise DataError(f"The split column '{roles.split}' has no '{plan.evaluate_on}' rows (it has {values}); "
                            "choose the evaluation rows with --evaluate-on.")
        df = df[df[roles.split] == plan.evaluate_on].reset_index(drop=True)
        evaluated_on = f"the '{plan.evaluate_on}' rows of the split column '{roles.split}'"
    task_col = task_column(df, roles)
    tasks = sorted(df[task_col].unique())
    warnings = [i.message for i in report.warnings]
    names = list(roles.attributes) + list(roles.continuous_attributes)
    continuous = set(roles.continuous_attributes)
    min_cases = max(plan.min_denominator, plan.suppress_k)
    min_size = max(plan.min_size, plan.suppress_k)
    rng = np.random.default_rng(plan.seed)

    rows, task_rows, thresholds = [], [], {}
    by_order: dict[str, int] = {}
    totals = dict.fromkeys(("discovery_rows", "confirmation_rows"), 0)
    seen_patients: dict[str, set] = {"discovery_patients": set(), "confirmation_patients": set()}
    for t_no, task in enumerate(tasks):
        where = f"Task {t_no + 1} of {len(tasks)} ({task})"
        rep(0.9 * t_no / len(tasks), f"{where}: splitting into discovery and confirmation rows")
        sub = df[df[task_col] == task].reset_index(drop=True)
        y = sub[roles.label].to_numpy(int)
        s = sub[roles.score].to_numpy(float)
        patients = sub[roles.patient_id].astype(str).to_numpy() if roles.patient_id else None
        try:
            disc = split_rows(y, patients, plan.discovery_fraction, plan.seed)
        except DataError as err:
            warnings.append(f"Task '{task}' is left out: {err}")
            continue
        conf = ~disc
        if plan.threshold == "best_f1":
            tau = best_f1_threshold(y[disc], s[disc])  # chosen on the discovery rows: confirmation never sees it
        else:
            tau = float(plan.threshold)
        thresholds[task] = tau
        yhat = (s >= tau).astype(int)
        flat = flat_threshold_warning(task, yhat, s, tau)
        if flat:
            warnings.append(flat)
        cells = (2 * y + yhat).astype(np.int64)
        attributes, bins = [], {}
        for name in names:
            if name in continuous:
                a, edges = _continuous(name, sub[name].to_numpy(float)[disc], y[disc], plan.bins)
                bins[name] = edges
            else:
                a = _categorical(name, sub.loc[disc, name])
            attributes.append(a)
        codes = np.column_stack([a.codes_of(sub[a.name]) for a in attributes])
        rep(0.9 * (t_no + 0.2) / len(tasks), f"{where}: searching slices on {int(disc.sum()):,} discovery rows")
        cand = search(codes[disc], cells[disc], plan.metric, plan.max_order, min_size, min_cases, rep.cancel)
        for order, count in cand.by_order.items():
            by_order[str(order)] = by_order.get(str(order), 0) + count
        chosen = carry_forward(cand, codes[disc], plan.carry)
        rep(0.9 * (t_no + 0.7) / len(tasks), f"{where}: testing {len(chosen)} slices on the confirmation rows")
        cluster = patients is not None and pd.Series(patients[conf]).duplicated().any()
        conf_codes, conf_cells = codes[conf], cells[conf]
        conf_pat = patients[conf] if patients is not None else None
        for rank, i in enumerate(chosen, start=1):
            definition = {attributes[a].name: attributes[a].values[v] for a, v in zip(cand.attrs[i], cand.values[i])}
            in_slice = slice_mask(conf_codes, cand.attrs[i], cand.values[i])
            row = _confirm(task, rank, definition, in_slice, conf_cells, conf_pat, cluster, plan, rng)
            row.update(description=describe(definition, continuous), order=len(definition),
                       discovery_n=int(cand.n[i]), discovery_cases=int(cand.cases[i]),
                       discovery_value=float(cand.value[i]), discovery_rest_value=float(cand.rest_value[i]),
                       discovery_gap=float(cand.value[i] - cand.rest_value[i]), discovery_score=float(cand.score[i]))
            rows.append(row)
        n_pd = int(len(np.unique(patients[disc]))) if patients is not None else int(disc.sum())
        n_pc = int(len(np.unique(patients[conf]))) if patients is not None else int(conf.sum())
        task_rows.append({"task": task, "threshold": tau, "searched": len(cand), "carried": len(chosen),
                          "discovery_rows": int(disc.sum()), "confirmation_rows": int(conf.sum()),
                          "discovery_patients": n_pd, "confirmation_patients": n_pc, "bins": bins})
        for key, v in (("discovery_rows", int(disc.sum())), ("confirmation_rows", int(conf.sum()))):
            totals[key] += v
        # patients counted once however many tasks they have (a row per patient and task is not a patient)
        for key, part in (("discovery_patients", disc), ("confirmation_patients", conf)):
            if patients is not None:
                seen_patients[key].update(patients[part])
            else:  # independent rows: each row its own unit
                seen_patients[key].update((task, i) for i in np.flatnonzero(part))
    if not task_rows:
        raise DataError("No task could be split into discovery and confirmation rows: "
                        + " ".join(w for w in warnings if w.startswith("Task '")))
    rep(0.95, "Correcting for multiple testing over the carried slices")
    slices = _corrected(pd.DataFrame.from_records(rows, columns=SLICE_COLUMNS + ["_dual"]), plan)
    searched = int(sum(r["searched"] for r in task_rows))
    split = {"fraction": plan.discovery_fraction, "seed": plan.seed, "stratified_by": "label",
             "unit": "patient" if roles.patient_id else "row", **totals,
             **{k: len(v) for k, v in seen_patients.items()}, "evaluated_on": evaluated_on}
    prov = _prov.make(plan.seed, data_sha256, model_hashes, n_rows=int(len(table)), n_boot=plan.n_boot)
    return SliceAuditResult(plan=plan, slices=slices, tasks=pd.DataFrame.from_records(task_rows, columns=TASK_COLUMNS),
                            searched=searched, searched_by_order=by_order, split=split, thresholds=thresholds,
                            provenance=prov, warnings=warnings)


def _confirm(task, rank, definition, in_slice, cells, patients, cluster, plan, rng) -> dict:
    """The group audit's test of one carried slice against the rest, on the confirmation rows."""
    strata = (~in_slice).astype(np.int64)  # 0 = the slice, 1 = the rest
    cell8 = 4 * strata + cells
    observed = np.bincount(cell8, minlength=8).reshape(2, 4)
    r, x, d = slice_rate(observed, plan.metric)
    test_id = f"{task}|slice {rank}|{plan.metric}"
    row = dict.fromkeys(SLICE_COLUMNS)
    row.update(task=task, rank=rank, definition=definition, metric=plan.metric, n=int(observed[0].sum()),
               cases=int(d[0]), value=_finite(r[0]), rest_n=int(observed[1].sum()), rest_cases=int(d[1]),
               rest_value=_finite(r[1]), test_id=test_id)
    if min(d) < plan.min_denominator:
        row["reason"] = (f"only {int(min(d))} {CASES_TEXT[plan.metric]} on the confirmation rows "
                         f"(fewer than {plan.min_denominator}): too few to test")
        return row
    if cluster:
        boot = cluster_cell_counts(cell8, patients, 8, plan.n_boot, rng, pseudo=BOUNDARY_PSEUDO)
    else:
        boot = stratified_cell_counts(cell8, strata, 8, plan.n_boot, rng, pseudo=BOUNDARY_PSEUDO)
    rb = slice_rate(boot.reshape(plan.n_boot, 2, 4), plan.metric)[0]
    rows_pp = hits_pp = None
    if cluster:
        _, pcode = np.unique(patients, return_inverse=True)
        den_rows = {"recall": cells >= 2, "specificity": cells < 2}.get(plan.metric, np.ones(cells.size, bool))
        num_rows = {"recall": cells == 3, "specificity": cells == 0,  # parity: flagged; error: FP or FN
                    "error": (cells == 1) | (cells == 2)}.get(plan.metric, cells % 2 == 1)
        rows_pp, hits_pp = (tuple(np.bincount(pcode[sel & side], minlength=pcode.max() + 1)
                                  for side in (in_slice, ~in_slice)) for sel in (den_rows, num_rows))
    t = rate_gap_test(x[0], d[0], x[1], d[1], rb[:, 0] - rb[:, 1], plan, rows_pp, hits_pp)
    row.update(gap=t["gap"], ci_low=t["ci_low"], ci_high=t["ci_high"], p_value=t["p_value"],
               p_equivalence=_finite(t["p_equivalence"]), _dual=t["_dual"])
    if t["flat"]:
        row["reason"] = f"inconclusive: {METRIC_TEXT[plan.metric]} is {r[0]:g} in the slice and the rest"
    return row


def _corrected(slices: pd.DataFrame, plan: SliceAuditPlan) -> pd.DataFrame:
    """q-values, verdicts and the intervals that agree with them (adjusted; the unadjusted kept as
    ``ci_*_unadjusted``) by the group audit's correction (one family: every carried slice); a slice that could not
    be tested on the confirmation rows is "inconclusive" with its reason."""
    if slices.empty:
        return slices.drop(columns="_dual")
    tests = slices.assign(attribute="slice", group=slices["test_id"], comparison="rest")
    tests["p_value"] = tests["p_value"].astype(float)
    tests["p_equivalence"] = tests["p_equivalence"].astype(float)
    done = correct(tests, plan)  # with each test's ``_dual``: intervals that agree with the verdicts
    slices = slices.drop(columns="_dual")
    slices["q_value"] = done["q_value"].astype(float).to_numpy()
    slices["q_equivalence"] = done["q_equivalence"].astype(float).to_numpy()
    slices["verdict"] = done["verdict"].where(done["verdict"].notna(), "inconclusive").astype(object).to_numpy()
    for col in ("ci_low", "ci_high", "ci_low_unadjusted", "ci_high_unadjusted"):
        slices[col] = [_finite(v) for v in done[col].tolist()]
    return slices


def _finite(v):
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None
