"""Watch a deployed model: the fairness monitor (audit kind ``monitor``).

Entry points: :func:`prepare_stream` (a table of predictions with a period column, checked and in canonical
form), :func:`merge_stream` (the periods stored so far plus the ones given now: new periods appended, late labels
filled in, a stored period given with other rows refused) and :func:`run_monitor` ``(stream, plan) ->
MonitorResult``.

What is computed, per task × attribute × group (group vs the rest of the attribute's rows) × metric (recall,
specificity or the positive prediction rate, "parity"):

1. **Per period** p, whole patients: the rows of one patient in one period are one cluster (its flagged cases over
   its cases), so the group's rate Y/M is a ratio estimator with the cluster-robust variance
   C/(C−1)·Σ(y_i − r·m_i)²/M² (a binomial variance with a half-case continuity shift when every cluster agrees).
   The period's gap d_p = rate(group) − rate(rest), its variance v_p the sum of the two.
2. **Across periods**, a weighted sum S = Σ w_p·d_p with the outcome-free weights w_p = M_g·M_r/(M_g + M_r) (the
   effective size of a difference of two rates; a stratified, Mantel–Haenszel-type combination, so drifting
   prevalence or calibration that moves group and rest alike never makes a gap), V = Σ w_p²·v_p. The gap
   δ̂ = S/W (W = Σ w_p) has the anytime-valid confidence sequence δ̂ ± u(V)/W with the two-sided normal-mixture
   boundary u of :mod:`fairdesk.core.stats.sequential` (Robbins 1970; Howard et al. 2021; asymptotic in the sense of
   Waudby-Smith et al. 2024). ρ is tuned so the boundary is tightest after about :data:`TUNE_PERIODS` periods of
   the window's first period's size (a choice from counts only, never from the flags).
3. **A gap that opens mid-stream**: a sequence is started at every period j (window j..t), with the share
   1/(j(j+1)) of the comparison's level (they sum to 1 over every j, so the union over start times keeps the level
   for any number of periods). The record at period t shows the window whose sequence is furthest from 0 when any
   excludes 0 (the alarm; its start, ``since``, is where the strongest evidence begins, not an estimate of
   when the gap opened), and the window of the whole stream
   otherwise.
4. **Multiplicity**: α is split equally (Bonferroni) over every comparison watched. Bonferroni over sequences that
   are each anytime-valid is anytime-valid: the chance of any false alarm, at any period, in a stream whose gaps
   are all 0, is at most α for the whole monitor.

``alarm`` = the record's sequence excludes 0 at that period; ``alarms`` lists each comparison's first such period.
Everything is recomputed from the stored periods on every call, in a canonical row order, so a stream that arrived
in chunks gives the same document as the same rows given at once.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core import provenance as _prov
from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.stats.sequential import confidence_sequence, start_weights, tuned_rho

METRICS = ("recall", "specificity", "parity")
DEFAULT_METRICS = ("recall", "specificity")
METRIC_TEXT = {"recall": "recall", "specificity": "specificity", "parity": "positive prediction rate"}
CASES_TEXT = {"recall": "positive cases", "specificity": "negative cases", "parity": "rows"}
COMPARISON = "vs rest"
#: the boundary of a window is tightest after about this many periods of the size of its first period
TUNE_PERIODS = 4
ALL_TASKS = "(all)"
METHOD_TEXT = ("per period, whole-patient clusters; stratified weighted gap across periods; two-sided "
               "normal-mixture confidence sequence (Robbins 1970; Howard et al. 2021), one per start period with "
               "level share 1/(j(j+1)); Bonferroni over comparisons")


@dataclass
class MonitorPlan:
    """What to watch. Mirrors the options of ``fairdesk-cli monitor``."""

    label: str
    score: str
    attributes: tuple[str, ...]
    threshold: float
    period: str
    task: str | None = None
    patient_id: str | None = None
    metrics: tuple[str, ...] = DEFAULT_METRICS
    margin: float = 0.05
    alpha: float = 0.05
    suppress_k: int = 11

    def __post_init__(self) -> None:
        from fairdesk.core.limits import check_number

        self.attributes = tuple(self.attributes or ())
        self.metrics = tuple(dict.fromkeys(self.metrics or DEFAULT_METRICS))
        if not self.attributes:
            raise DataError("Give at least one --attribute to watch (e.g. --attribute ethnicity).")
        for option, col in (("--label", self.label), ("--score", self.score), ("--period", self.period),
                            ("--task", self.task), ("--patient-id", self.patient_id),
                            *[("--attribute", a) for a in self.attributes]):
            if col is not None and (not isinstance(col, str) or not col.strip()):
                raise DataError(f"{option} must name a column of the table, not {col!r}.")
        cols = self.columns()
        if len(set(cols)) < len(cols):
            raise DataError("One column is named for two roles (label, score, period, task, patient id, "
                            "attributes); give each role its own column.")
        bad = [m for m in self.metrics if m not in METRICS]
        if bad:
            raise DataError(f"--metric '{bad[0]}' is not known; choose from {', '.join(METRICS)}.")
        if self.threshold is None:
            raise DataError("monitor needs --threshold: the score at which the model flags a patient (e.g. "
                            "--threshold 0.3).")
        self.threshold = check_number(self.threshold, "--threshold", 0.0, 1.0, whole=False, open_ends=True,
                                      what="the score at which the model flags a patient")
        self.margin = check_number(self.margin, "--margin", 0.0, 1.0, whole=False, open_ends=True,
                                   what="the gap that does not matter, a difference of rates")
        self.alpha = check_number(self.alpha, "--alpha", 0.0, 0.5, whole=False, open_ends=True,
                                  what="the chance of any false alarm of the whole monitor, e.g. 0.05")
        self.suppress_k = check_number(self.suppress_k, "--suppress-k", 1, 10**6, whole=True,
                                       what="the small-cell threshold k")

    def columns(self) -> list[str]:
        return [c for c in (self.label, self.score, self.period, self.task, self.patient_id, *self.attributes)
                if c]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["attributes"], d["metrics"] = list(self.attributes), list(self.metrics)
        return d

    def stream_key(self) -> dict:
        """What makes two calls the same stream (everything that changes a verdict)."""
        return self.to_dict()

    @classmethod
    def from_dict(cls, d: dict) -> "MonitorPlan":
        d = dict(d)
        d["attributes"], d["metrics"] = tuple(d.get("attributes") or ()), tuple(d.get("metrics") or ())
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


# --------------------------------------------------------------------------------------------------------------
# The stream: checked, canonical, merged


def _text(values: pd.Series) -> pd.Series:
    """Values as text (whole numbers without a spurious .0, so 3 and 3.0 are one group); empty cells missing."""
    s = values.reset_index(drop=True)
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        f = pd.to_numeric(s, errors="coerce").astype(float)
        whole = f.notna() & np.isfinite(f) & (f == np.floor(f))
        txt = f.astype(str).astype(object)
        txt[whole] = f[whole].astype("int64").astype(str)
        return txt.where(f.notna(), None)
    txt = s.astype("string").str.strip()
    return txt.astype(object).where(txt.notna() & (txt != ""), None)


def prepare_stream(df: pd.DataFrame, plan: MonitorPlan) -> pd.DataFrame:
    """The plan's columns in canonical form and order: label 0/1 or missing (a label that arrives later), score a
    number in [0, 1], period, task, patient and attributes as text, rows sorted by every column. Bad input is
    refused in one sentence."""
    from fairdesk.core.data.schema import coerce_binary_label

    missing = [c for c in plan.columns() if c not in df.columns]
    if missing:
        raise DataError(f"The table has no column {missing[0]!r} (columns: {', '.join(map(str, df.columns[:12]))}"
                        f"{' …' if len(df.columns) > 12 else ''}); check the column options.")
    if df.empty:
        raise DataError("The table has no rows to monitor.")
    out = pd.DataFrame(index=range(len(df)))
    period = _text(df[plan.period].reset_index(drop=True))
    if period.isna().any():
        raise DataError(f"The period column '{plan.period}' is empty in {int(period.isna().sum()):,} rows; every "
                        "prediction needs its period (e.g. 2026-01).")
    digits = [p for p in period.unique() if p.isdigit()]
    if digits and len({len(p) for p in digits}) > 1:
        raise DataError(f"The periods of '{plan.period}' must sort as text (e.g. 2026-01, or numbers padded with "
                        f"zeros such as 01, 02 … 12): {min(digits, key=len)} and {max(digits, key=len)} would sort "
                        "wrongly.")
    out[plan.period] = period
    label = coerce_binary_label(df[plan.label].reset_index(drop=True))
    label = pd.to_numeric(label, errors="coerce").where(lambda s: s.isin([0, 1]))
    raw_missing = df[plan.label].reset_index(drop=True).isna() | (_text(df[plan.label].reset_index(drop=True))
                                                                     .isna())
    bad = label.isna() & ~raw_missing
    if bad.any():
        value = df[plan.label].reset_index(drop=True)[bad].iloc[0]
        raise DataError(f"The label column '{plan.label}' must hold 0/1 or be empty (a label not known yet); found "
                        f"{value!r} in {int(bad.sum()):,} rows.")
    out[plan.label] = label.astype(float)
    score = pd.to_numeric(df[plan.score].reset_index(drop=True), errors="coerce")
    if score.isna().any() or not score.between(0.0, 1.0).all():
        n = int((score.isna() | ~score.between(0.0, 1.0)).sum())
        raise DataError(f"The score column '{plan.score}' must hold numbers from 0 to 1 in every row; {n:,} rows do "
                        "not.")
    out[plan.score] = score.astype(float)
    if plan.task:
        task = _text(df[plan.task].reset_index(drop=True))
        if task.isna().any():
            raise DataError(f"The task column '{plan.task}' is empty in {int(task.isna().sum()):,} rows.")
        out[plan.task] = task
    if plan.patient_id:
        pid = _text(df[plan.patient_id].reset_index(drop=True))
        if pid.isna().any():
            raise DataError(f"The patient id column '{plan.patient_id}' is empty in {int(pid.isna().sum()):,} rows; "
                            "every row needs its patient.")
        out[plan.patient_id] = pid
    for a in plan.attributes:
        out[a] = _text(df[a].reset_index(drop=True))
    out = out[plan.columns()]
    return canonical(out, plan)


def canonical(df: pd.DataFrame, plan: MonitorPlan) -> pd.DataFrame:
    """Rows in one order whatever order they came in (every column, the label last, missing labels last)."""
    keys = [c for c in plan.columns() if c != plan.label] + [plan.label]
    order = df.assign(**{c: df[c].fillna("\uffff") if df[c].dtype == object else df[c] for c in keys})
    order = order.sort_values(keys, kind="mergesort", na_position="last")
    return df.loc[order.index].reset_index(drop=True)


def merge_stream(stored: pd.DataFrame | None, new: pd.DataFrame, plan: MonitorPlan) -> tuple[pd.DataFrame, dict]:
    """The stream after this call: ``stored`` (prepared) plus ``new`` (prepared). A period not stored yet is
    appended; a stored period given again must be the same rows, where it may fill in labels that were missing
    (late labels: they update that period only); any other change is refused. Returns (stream, what happened)."""
    if stored is None or stored.empty:
        return canonical(new, plan), {"added": sorted(new[plan.period].unique()), "updated": [], "unchanged": []}
    stored = canonical(prepare_stream(stored, plan), plan)
    have = set(stored[plan.period].unique())
    added, updated, unchanged = [], [], []
    parts = [stored]
    for p in sorted(new[plan.period].unique()):
        rows = new[new[plan.period] == p]
        if p not in have:
            added.append(p)
            parts.append(rows)
            continue
        old = stored[stored[plan.period] == p]
        same = _fills_labels(old, rows, plan)
        if same is None:
            raise DataError(f"Period {p} is already stored with other rows ({len(old):,} stored, {len(rows):,} "
                            "given); a stored period can only get labels that were missing, so give new periods "
                            "(or start a new project).")
        (updated if same else unchanged).append(p)
        if same:
            parts[0] = parts[0][parts[0][plan.period] != p]
            parts.append(rows)
    last = max(have)
    early = [p for p in added if p < last]
    if early:
        raise DataError(f"Period {early[0]} comes before the last stored period {last}; a monitor only moves forward "
                        "(periods are sorted as text), so give later periods or start a new project.")
    return canonical(pd.concat(parts, ignore_index=True), plan), {"added": added, "updated": updated,
                                                                   "unchanged": unchanged}


def _fills_labels(old: pd.DataFrame, new: pd.DataFrame, plan: MonitorPlan) -> bool | None:
    """None: ``new`` is not ``old`` with missing labels filled in; False: the same rows; True: labels filled."""
    if len(old) != len(new):
        return None
    keys = [c for c in plan.columns() if c != plan.label]
    a = canonical(old, plan)
    b = canonical(new, plan)
    for c in keys:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if a[c].dtype == object or b[c].dtype == object:
            if not all((u == v) or (u is None and v is None) for u, v in zip(x, y)):
                return None
        elif not np.array_equal(x.astype(float), y.astype(float)):
            return None
    la, lb = a[plan.label].to_numpy(float), b[plan.label].to_numpy(float)
    known = ~np.isnan(la)
    if not np.array_equal(la[known], lb[known]):
        return None
    return bool(np.any(~known & ~np.isnan(lb)))


# --------------------------------------------------------------------------------------------------------------
# Per-period cluster statistics


def _outcome(df: pd.DataFrame, plan: MonitorPlan, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(in the metric's denominator, counted in its numerator) per row."""
    y = df[plan.label].to_numpy(float)
    flag = df[plan.score].to_numpy(float) >= plan.threshold
    if metric == "recall":
        return y == 1, flag
    if metric == "specificity":
        return y == 0, ~flag
    return np.ones(len(df), dtype=bool), flag


def cluster_sums(period_idx: np.ndarray, group_idx: np.ndarray, cluster: np.ndarray, in_den: np.ndarray,
                 hit: np.ndarray, n_periods: int, n_groups: int) -> np.ndarray:
    """Per (period, group): [M, Y, YY, YM, MM, C] over the clusters (patient × period × group) of the rows in the
    metric's denominator: m_i cases and y_i of them counted, and their sums of squares and products."""
    out = np.zeros((n_periods, n_groups, 6))
    keep = in_den & (group_idx >= 0)
    if not keep.any():
        return out
    key = pd.DataFrame({"p": period_idx[keep], "g": group_idx[keep], "c": cluster[keep],
                        "m": np.ones(int(keep.sum())), "y": hit[keep].astype(float)})
    per = key.groupby(["p", "g", "c"], sort=False)[["m", "y"]].sum().reset_index()
    per["yy"], per["ym"], per["mm"], per["n"] = per["y"] ** 2, per["y"] * per["m"], per["m"] ** 2, 1.0
    agg = per.groupby(["p", "g"])[["m", "y", "yy", "ym", "mm", "n"]].sum().reset_index()
    out[agg["p"].to_numpy(int), agg["g"].to_numpy(int)] = agg[["m", "y", "yy", "ym", "mm", "n"]].to_numpy(float)
    return out


def rate_and_variance(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rate Y/M and its cluster-robust variance C/(C−1)·Σ(y − r·m)²/M² from sums [M, Y, YY, YM, MM, C] (last
    axis). When every cluster agrees (a variance of 0) or there is one cluster, the binomial variance over the C
    clusters of the rate shifted by half a cluster, r̃(1 − r̃)/C with r̃ = (r·C + ½)/(C + 1), so a period with a
    rate of 0 or 1 still has a width (with one row per patient: (Y + ½)/(M + 1) over M)."""
    m, y, yy, ym, mm, c = (s[..., i] for i in range(6))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(m > 0, y / np.where(m > 0, m, 1.0), np.nan)
        ss = yy - 2 * r * ym + r ** 2 * mm
        v = np.where(c > 1, c / np.where(c > 1, c - 1, 1.0) * np.maximum(ss, 0.0) / np.where(m > 0, m, 1.0) ** 2, 0.0)
        cs = np.maximum(c, 1.0)
        rt = (r * cs + 0.5) / (cs + 1.0)  # half a patient's shift: rows of one patient add no information
        v = np.where((v <= 0) & (m > 0), rt * (1 - rt) / cs, v)
    return r, np.where(m > 0, v, np.nan)


def comparison_path(group: np.ndarray, rest: np.ndarray, alpha: float, periods: list[str]) -> dict[str, np.ndarray]:
    """Per period: the group's and the rest's rate, the period's gap, and the monitor's record (window estimate,
    confidence sequence, its start, alarm) for one comparison at level ``alpha`` (its share of the monitor's α).

    ``group``, ``rest``: sums [M, Y, YY, YM, MM, C] per period (shape (T, 6))."""
    T = len(periods)
    rg, vg = rate_and_variance(group)
    rr, vr = rate_and_variance(rest)
    mg, mr = group[:, 0], rest[:, 0]
    ok = (mg > 0) & (mr > 0)
    w = np.where(ok, mg * mr / np.where(ok, mg + mr, 1.0), 0.0)
    d = np.where(ok, rg - rr, np.nan)
    v = np.where(ok, vg + vr, 0.0)
    cs_w, cs_s, cs_v = (np.concatenate([[0.0], np.cumsum(x)]) for x in (w, np.where(ok, w * d, 0.0), w ** 2 * v))
    est, low, high = (np.full(T, np.nan) for _ in range(3))
    since = np.full(T, -1, dtype=int)
    first_data = np.full(T + 1, -1, dtype=int)  # the first period ≥ s with data (−1: none)
    nxt = -1
    for s in range(T - 1, -1, -1):
        if ok[s]:
            nxt = s
        first_data[s] = nxt
    rho = [tuned_rho(TUNE_PERIODS * w[first_data[s]] / 4.0, alpha) if first_data[s] >= 0 else None
           for s in range(T)]
    for t in range(T):
        best, best_dist, whole = None, -math.inf, None
        for s in range(t + 1):
            q = first_data[s]
            if q < 0 or q > t or (s > 0 and not ok[s]):
                continue  # a window is started at a period with data only (one start per distinct window)
            W, S, V = cs_w[t + 1] - cs_w[s], cs_s[t + 1] - cs_s[s], cs_v[t + 1] - cs_v[s]
            a_s = alpha * start_weights(s + 1)
            e, lo, hi = confidence_sequence(S, V, W, rho[s], a_s)
            if not math.isfinite(e):
                continue
            if whole is None:
                whole = (s, e, lo, hi)
            dist = max(lo, -hi)
            if dist > 0 and dist > best_dist:
                best, best_dist = (s, e, lo, hi), dist
        pick = best or whole
        if pick is not None:
            since[t], est[t], low[t], high[t] = pick
    alarm = np.isfinite(low) & ((low > 0) | (high < 0))
    return {"rate": rg, "rest_rate": rr, "n": mg, "rest_n": mr, "clusters": group[:, 5], "period_gap": d,
            "period_se": np.where(ok, np.sqrt(v), np.nan),
            "gap": est, "cs_low": low, "cs_high": high, "since": since, "alarm": alarm}


# --------------------------------------------------------------------------------------------------------------
# The monitor


RECORD_COLUMNS = ["task", "attribute", "group", "comparison", "metric", "period", "n", "rest_n", "patients", "rate",
                  "rest_rate", "period_gap", "period_se", "gap", "cs_low", "cs_high", "since", "alarm", "within_margin", "level"]
CONTEXT_COLUMNS = ["task", "attribute", "group", "period", "rows", "labelled", "prevalence", "flagged",
                   "score_q25", "score_median", "score_q75"]


@dataclass
class MonitorResult:
    plan: MonitorPlan
    records: pd.DataFrame
    alarms: list[dict]
    context: pd.DataFrame
    periods: list[dict]
    comparisons: int
    changes: dict
    provenance: dict
    stream: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return jsonable({
            "kind": "monitor", "plan": self.plan.to_dict(), "method": METHOD_TEXT,
            "monitor": self.records.to_dict(orient="records"), "alarms": self.alarms,
            "context": self.context.to_dict(orient="records"), "periods": self.periods,
            "comparisons": int(self.comparisons),
            "alpha_per_comparison": self.plan.alpha / self.comparisons if self.comparisons else None,
            "changes": self.changes, "stream": self.stream, "provenance": self.provenance,
            "warnings": list(self.warnings)})

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def _num(x):
    x = float(x)
    return x if math.isfinite(x) else None


def run_monitor(stream: pd.DataFrame, plan: MonitorPlan, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None, *, data_sha256: str | None = None,
                stream_info: dict | None = None) -> MonitorResult:
    """The monitor over a prepared stream (:func:`prepare_stream` / :func:`merge_stream`)."""
    rep = Reporter(progress, cancel)
    df = prepare_stream(stream, plan)  # (canonical order)
    periods = sorted(df[plan.period].unique())
    T = len(periods)
    pidx = pd.Categorical(df[plan.period], categories=periods).codes.astype(int)
    tasks = sorted(df[plan.task].unique()) if plan.task else [ALL_TASKS]
    warnings: list[str] = []
    # the comparisons watched: every group of every attribute with rows, in every task, for every metric
    plan_cmp = []
    for task in tasks:
        sub = df if not plan.task else df[df[plan.task] == task]
        for a in plan.attributes:
            groups = sorted(g for g in sub[a].dropna().unique())
            if len(groups) < 2:
                warnings.append(f"{a} has fewer than two groups{'' if not plan.task else f' in task {task}'}; "
                                "it is not watched there.")
                continue
            plan_cmp += [(task, a, groups, m) for m in plan.metrics]
    K = sum(len(g) for _, _, g, _ in plan_cmp)
    if K == 0:
        raise DataError("No attribute has two groups with rows, so there is nothing to compare; check --attribute.")
    level = plan.alpha / K
    records, alarms = [], []
    for i, (task, a, groups, metric) in enumerate(plan_cmp):
        rep(0.9 * i / len(plan_cmp), f"{metric} by {a}")
        sel = np.ones(len(df), bool) if not plan.task else (df[plan.task] == task).to_numpy()
        sub = df[sel]
        gidx = pd.Categorical(sub[a], categories=groups).codes.astype(int)  # −1: missing
        cluster = (sub[plan.patient_id].to_numpy(object) if plan.patient_id else np.arange(len(sub)).astype(object))
        in_den, hit = _outcome(sub, plan, metric)
        sums = cluster_sums(pidx[sel], gidx, cluster, in_den, hit, T, len(groups))
        total = sums.sum(axis=1)
        for j, g in enumerate(groups):
            path = comparison_path(sums[:, j], total - sums[:, j], level, periods)
            first = None
            for t, p in enumerate(periods):
                low, high = path["cs_low"][t], path["cs_high"][t]
                alarm = bool(path["alarm"][t])
                records.append({
                    "task": task, "attribute": a, "group": g, "comparison": COMPARISON, "metric": metric,
                    "period": p, "n": int(path["n"][t]), "rest_n": int(path["rest_n"][t]),
                    "patients": int(path["clusters"][t]), "rate": _num(path["rate"][t]),
                    "rest_rate": _num(path["rest_rate"][t]), "period_gap": _num(path["period_gap"][t]),
                    "period_se": _num(path["period_se"][t]),
                    "gap": _num(path["gap"][t]), "cs_low": _num(low), "cs_high": _num(high),
                    "since": periods[path["since"][t]] if path["since"][t] >= 0 else None, "alarm": alarm,
                    "within_margin": bool(np.isfinite(low) and low > -plan.margin and high < plan.margin),
                    "level": level})
                if alarm and first is None:
                    first = p
            if first is not None:
                last = next(r for r in reversed(records) if r["alarm"])
                alarms.append({"task": task, "attribute": a, "group": g, "comparison": COMPARISON, "metric": metric,
                               "first_period": first, "period": last["period"], "since": last["since"],
                               "gap": last["gap"], "cs_low": last["cs_low"], "cs_high": last["cs_high"],
                               "alarm_now": bool(records[-1]["alarm"])})
    rec = pd.DataFrame.from_records(records, columns=RECORD_COLUMNS)
    rep(0.92, "context")
    context = _context(df, plan, tasks, periods)
    counts = df.groupby(plan.period)[plan.label].agg(["size", "count"])
    period_rows = [{"period": p, "rows": int(counts.loc[p, "size"]), "labelled": int(counts.loc[p, "count"])}
                   for p in periods]
    unl = [r["period"] for r in period_rows if r["labelled"] < r["rows"]]
    if unl:
        warnings.append(f"Periods {', '.join(unl)} have rows without a label yet: recall and specificity there rest "
                        "on the labelled rows; give the labels later and they update those periods only.")
    prov = _prov.make(None, data_sha256, study="monitor")
    return MonitorResult(plan, rec, alarms, context, period_rows, K, what_changed(rec, periods), prov,
                         stream=dict(stream_info or {}), warnings=warnings)


def _context(df: pd.DataFrame, plan: MonitorPlan, tasks: list[str], periods: list[str]) -> pd.DataFrame:
    """Prevalence and score distribution by group and period: context beside the verdicts, not tested."""
    rows = []
    for task in tasks:
        sub = df if not plan.task else df[df[plan.task] == task]
        for a in plan.attributes:
            for (p, g), part in sub.groupby([plan.period, a], sort=True):
                y = part[plan.label].dropna()
                s = part[plan.score].to_numpy(float)
                q = np.quantile(s, [0.25, 0.5, 0.75]) if len(s) else [np.nan] * 3
                rows.append({"task": task, "attribute": a, "group": g, "period": p, "rows": int(len(part)),
                             "labelled": int(len(y)), "prevalence": _num(y.mean()) if len(y) else None,
                             "flagged": _num(np.mean(s >= plan.threshold)), "score_q25": _num(q[0]),
                             "score_median": _num(q[1]), "score_q75": _num(q[2])})
    return pd.DataFrame.from_records(rows, columns=CONTEXT_COLUMNS)


def what_changed(records: pd.DataFrame, periods: list[str]) -> dict:
    """The last period against the one before: alarms raised and cleared, and the largest moves of a period's
    gap."""
    if len(periods) < 2 or records.empty:
        return {"period": periods[-1] if periods else None, "previous": None, "raised": [], "cleared": [],
                "moves": []}
    last, prev = periods[-1], periods[-2]
    key = ["task", "attribute", "group", "comparison", "metric"]
    a = records[records["period"] == last]
    b = records[records["period"] == prev]
    both = a.merge(b, on=key, how="inner", suffixes=("", "_prev")).set_index(key)
    raised = [dict(zip(key, k)) for k, r in both.iterrows() if r["alarm"] and not r["alarm_prev"]]
    cleared = [dict(zip(key, k)) for k, r in both.iterrows() if r["alarm_prev"] and not r["alarm"]]
    moves = []
    for k, r in both.iterrows():
        if r["period_gap"] is not None and r["period_gap_prev"] is not None and \
                np.isfinite(r["period_gap"]) and np.isfinite(r["period_gap_prev"]):
            moves.append({**dict(zip(key, k)), "gap": float(r["period_gap"]), "previous_gap": float(r["period_gap_prev"]),
                          "n": int(r["n"]), "previous_n": int(r["n_prev"])})
    moves.sort(key=lambda m: -abs(m["gap"] - m["previous_gap"]))
    return {"period": last, "previous": prev, "raised": raised, "cleared": cleared, "moves": moves[:5]}


def period_z(records: pd.DataFrame) -> pd.Series:
    """Each period's own gap over its standard error (the "snapshot audit each month" comparators of the validity
    bench test these, with no sequence)."""
    gap = pd.to_numeric(records["period_gap"], errors="coerce")
    se = pd.to_numeric(records["period_se"], errors="coerce")
    return (gap / se).fillna(0.0)


__all__ = ["MonitorPlan", "MonitorResult", "prepare_stream", "merge_stream", "run_monitor", "comparison_path",
           "cluster_sums", "rate_and_variance", "what_changed", "period_z", "METRICS"]
