"""Group performance gaps (METHODS §1) and error spread over a continuous attribute, Δ_eo^(N) (METHODS §2).

Entry point: :func:`run_group_audit` ``(table, plan, progress, cancel) -> GroupAuditResult``.

Every statistic is a function of confusion-cell counts, so the bootstrap draws those counts directly
(see :mod:`fairdesk.core.stats.bootstrap`). Cell layout per group: ``[TN, FP, FN, TP]`` = index ``2*y + yhat``.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core import provenance as _prov
from fairdesk.core.data.loaders import table_sha256
from fairdesk.core.data.schema import INTERSECTION_SEP, ColumnRoles, as_group_labels, prepare, validate
from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.stats.bootstrap import (bootstrap_p_value, cluster_cell_counts, percentile_ci,
                                           stratified_cell_counts)
from fairdesk.core.stats.multiple import benjamini_hochberg

METRICS = ("parity", "recall", "specificity")
GAP_RULES = ("max", "one-vs-rest", "between", "to-overall")
RULE_TEXT = {
    "max": "max-gap rule: each group is compared with the group whose rate differs most from its own "
           "(gap = own rate − that group's rate; positive favours the group)",
    "one-vs-rest": "one-vs-rest: each group's rate minus the rate of all other tested groups together",
    "between": "between groups: rate of the highest group minus rate of the lowest group (groups fixed on the "
               "audited data, signed in every bootstrap replicate)",
    "to-overall": "to overall: each group's rate minus the rate of all tested groups together",
}
METRIC_TEXT = {
    "parity": "positive prediction rate (TP+FP)/N",
    "recall": "recall, true positive rate TP/(TP+FN)",
    "specificity": "specificity, true negative rate TN/(TN+FP)",
    "delta_eo": "error spread Δ_eo^(N) = Σ|FPR−mean FPR| + Σ|FNR−mean FNR| over N ordered bins",
}
MISSING_GROUP = "(missing)"


@dataclass
class GroupAuditPlan:
    """What to audit and how. Mirrors the CLI flags of ``fairdesk-cli audit groups``."""

    roles: ColumnRoles
    metrics: tuple[str, ...] = METRICS
    gap_rule: str = "max"
    threshold: float | str = 0.5  # a number, or "best_f1" (chosen per task on the validation split)
    bins: tuple[int, ...] = (2, 5)
    intersections: tuple[tuple[str, ...], ...] = ()
    tasks: tuple[str, ...] | None = None
    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    ci_level: float = 0.95
    min_group_size: int = 30
    min_denominator: int = 10  # a rate resting on fewer cases (e.g. recall of 7 positives) is shown, not tested
    drop_groups: dict[str, list[str]] = field(default_factory=dict)
    eval_split: str = "test"
    val_split: str = "val"
    n_permutations: int = 1000

    def __post_init__(self) -> None:
        bad = [m for m in self.metrics if m not in METRICS]
        if bad:
            raise DataError(f"Unknown gap metric(s) {bad}; choose from {', '.join(METRICS)}.")
        if self.gap_rule not in GAP_RULES:
            raise DataError(f"Unknown multi-group rule '{self.gap_rule}'; choose from {', '.join(GAP_RULES)}.")
        if isinstance(self.threshold, str):
            if self.threshold != "best_f1":
                try:
                    self.threshold = float(self.threshold)
                except ValueError:
                    raise DataError("Threshold must be a number in (0, 1) or 'best_f1'.") from None
        if not isinstance(self.threshold, str) and not 0.0 < float(self.threshold) < 1.0:
            raise DataError(f"Threshold {self.threshold} is outside (0, 1); scores are probabilities.")
        if self.n_boot < 100:
            raise DataError("Use at least 100 bootstrap replicates (1,000 is the default).")
        if any(int(n) < 1 for n in self.bins):
            raise DataError("The number of bins for a continuous attribute must be at least 1.")
        self.intersections = tuple(tuple(c) for c in self.intersections)
        for combo in self.intersections:
            if len(combo) < 2:
                raise DataError("An intersection needs at least two attribute columns, e.g. sex,ethnicity.")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["roles"] = self.roles.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "GroupAuditPlan":
        d = dict(d)
        d["roles"] = ColumnRoles.from_dict(d["roles"])
        for key in ("metrics", "bins"):
            d[key] = tuple(d[key])
        d["intersections"] = tuple(tuple(c) for c in d.get("intersections", ()))
        if d.get("tasks") is not None:
            d["tasks"] = tuple(d["tasks"])
        return cls(**d)


TABLES = ("records", "groups", "summary", "dropped", "delta_bins")


@dataclass
class GroupAuditResult:
    plan: GroupAuditPlan
    records: pd.DataFrame  # one row per (task, attribute, group, metric), the CLI JSON contract
    groups: pd.DataFrame  # per (task, attribute, group): n, prevalence, AUROC, AUPRC, confusion counts
    summary: pd.DataFrame  # 001 Table 4: significant tasks and share favouring, before/after BH
    dropped: pd.DataFrame  # groups not tested, with their size and reason
    delta_bins: pd.DataFrame  # bins behind each Δ_eo record
    thresholds: dict[str, float]
    provenance: dict
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = {"plan": self.plan.to_dict(), "thresholds": self.thresholds, "provenance": self.provenance,
               "warnings": list(self.warnings)}
        for name in TABLES:
            out[name] = _records(getattr(self, name))
        return out

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, default=_json_default)

    @classmethod
    def from_dict(cls, d: dict) -> "GroupAuditResult":
        tables = {name: pd.DataFrame.from_records(d.get(name) or [], columns=_COLUMNS[name]) for name in TABLES}
        return cls(plan=GroupAuditPlan.from_dict(d["plan"]), thresholds=d["thresholds"],
                   provenance=d["provenance"], warnings=list(d.get("warnings", [])), **tables)

    @classmethod
    def from_json(cls, text: str) -> "GroupAuditResult":
        return cls.from_dict(json.loads(text))


_COLUMNS = {
    "records": ["task", "attribute", "group", "metric", "n", "numerator", "denominator", "rate", "reason",
                "comparison", "comparison_rate", "gap", "ci_low", "ci_high", "p_value", "q_value", "significant",
                "significant_bh", "favours", "n_boot_valid", "threshold", "bins", "test"],
    "groups": ["task", "attribute", "group", "n", "n_patients", "n_positive", "prevalence", "auroc", "auprc",
               "tn", "fp", "fn", "tp", "tested", "reason"],
    "summary": ["attribute", "group", "metric", "n_tasks", "n_significant", "share_favouring",
                "n_significant_bh", "share_favouring_bh"],
    "dropped": ["task", "attribute", "group", "n", "reason"],
    "delta_bins": ["task", "attribute", "bins_requested", "bins_used", "bin", "lower", "upper", "n",
                   "n_positive", "fpr", "fnr"],
}


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"not JSON serialisable: {type(value)}")


def _clean(value):
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: _clean(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


# --------------------------------------------------------------------------------------------------------------
# Rates and gaps on count arrays. ``counts`` has shape (..., 4) = [TN, FP, FN, TP].

def rate(counts: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rate, numerator, denominator); rate is NaN where the denominator is 0 (not estimable)."""
    tn, fp, fn, tp = (counts[..., i].astype(float) for i in range(4))
    if metric == "parity":
        num, den = tp + fp, tn + fp + fn + tp
    elif metric == "recall":
        num, den = tp, tp + fn
    elif metric == "specificity":
        num, den = tn, tn + fp
    else:
        raise ValueError(metric)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return r, num, den


def max_gap(rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max-gap rule for rates of shape (B, G): gap_j = m_j − m_i*, i* = argmax_i |m_j − m_i| over estimable i ≠ j.

    Returns (gaps (B, G), i* (B, G)); NaN / -1 where group j or every other group is not estimable.
    """
    diff = rates[:, :, None] - rates[:, None, :]
    g = rates.shape[1]
    invalid = np.isnan(diff) | np.eye(g, dtype=bool)[None]
    absdiff = np.where(invalid, -np.inf, np.abs(np.where(invalid, 0.0, diff)))
    idx = absdiff.argmax(axis=2)
    gaps = np.take_along_axis(diff, idx[:, :, None], axis=2)[:, :, 0]
    none_valid = np.all(invalid, axis=2)
    gaps = np.where(none_valid, np.nan, gaps)
    return gaps, np.where(none_valid, -1, idx)


def delta_eo(counts: np.ndarray) -> np.ndarray:
    """Δ_eo^(N) for counts of shape (..., N, 4): Σ_a |FPR_a − mean| + Σ_a |FNR_a − mean| (unweighted means)."""
    tn, fp, fn, tp = (counts[..., i].astype(float) for i in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = fp / (fp + tn)
        fnr = fn / (fn + tp)
    spread = (np.abs(fpr - fpr.mean(axis=-1, keepdims=True)).sum(axis=-1)
              + np.abs(fnr - fnr.mean(axis=-1, keepdims=True)).sum(axis=-1))
    return spread


def equal_frequency_bins(x: np.ndarray, y: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin edges (length N_used + 1) of equal-frequency bins of ``x`` where every bin holds both classes.

    Quantile bins (ties kept together); a bin lacking a class is merged with its smaller neighbour until every bin
    has both classes. The number of bins actually used is ``len(edges) - 1``.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, int)
    qs = np.unique(np.quantile(x, np.linspace(0, 1, n_bins + 1)))
    if qs.size < 2:
        return np.array([x.min(), x.max()])
    edges = list(qs)
    while len(edges) > 2:
        idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
        k = len(edges) - 1
        pos = np.bincount(idx, weights=y, minlength=k)
        tot = np.bincount(idx, minlength=k)
        lacking = np.flatnonzero((pos == 0) | (pos == tot))
        if lacking.size == 0:
            break
        b = int(lacking[0])
        if b == 0:
            merge_with = 1
        elif b == k - 1:
            merge_with = k - 2
        else:
            merge_with = b - 1 if tot[b - 1] <= tot[b + 1] else b + 1
        # merging bins b and merge_with removes the edge between them
        del edges[max(b, merge_with)]
    return np.asarray(edges)


def assign_bins(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)


# --------------------------------------------------------------------------------------------------------------

def best_f1_threshold(y: np.ndarray, s: np.ndarray) -> float:
    from sklearn.metrics import precision_recall_curve

    precision, recall, thresholds = precision_recall_curve(y, s)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = 2 * precision * recall / (precision + recall)
    f1 = np.nan_to_num(f1[:-1], nan=-1.0)
    return float(thresholds[int(np.argmax(f1))])


def _auc(y: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    from sklearn.metrics import average_precision_score, roc_auc_score

    if len(np.unique(y)) < 2:
        return float("nan"), float("nan")
    return float(roc_auc_score(y, s)), float(average_precision_score(y, s))


@dataclass
class _TaskData:
    y: np.ndarray
    yhat: np.ndarray
    s: np.ndarray
    patients: np.ndarray | None


def _group_labels(df: pd.DataFrame, col: str, intersections: dict[str, tuple[str, ...]]) -> pd.Series:
    if col in intersections:
        parts = [df[c].astype("string") for c in intersections[col]]
        joined = parts[0]
        for p in parts[1:]:
            joined = joined + " & " + p
        return joined.fillna(MISSING_GROUP)
    return df[col].astype("string").fillna(MISSING_GROUP)


BOUNDARY_PSEUDO = 0.5  # Jeffreys half-row per cell pair in the resampling shares (see stats.bootstrap)


def _resample_counts(cells, y, patients, n_cells, plan_n_boot, rng, cluster: bool):
    if cluster:
        return cluster_cell_counts(cells, patients, n_cells, plan_n_boot, rng, pseudo=BOUNDARY_PSEUDO)
    return stratified_cell_counts(cells, y, n_cells, plan_n_boot, rng, pseudo=BOUNDARY_PSEUDO)


def run_group_audit(table: pd.DataFrame, plan: GroupAuditPlan, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None, data_sha256: str | None = None,
                    model_hashes: dict[str, str] | None = None) -> GroupAuditResult:
    """Run the group audit. Raises :class:`DataError` for unusable input, ``Cancelled`` on cancel."""
    rep = Reporter(progress, cancel)
    roles = plan.roles
    if not roles.attributes and not roles.continuous_attributes and not plan.intersections:
        raise DataError("Choose at least one protected attribute to audit.")
    report = validate(table, roles, plan.min_group_size)
    report.raise_if_errors()
    for combo in plan.intersections:
        missing = [c for c in combo if c not in table.columns]
        if missing:
            raise DataError(f"Intersection column(s) {missing} are not in the table.")
    extra_cols = [c for combo in plan.intersections for c in combo if c not in roles.all_columns()]
    df = prepare(table, roles)
    for c in dict.fromkeys(extra_cols):
        df[c] = as_group_labels(table[c])
    data_sha256 = data_sha256 or table_sha256(table)

    if roles.task is None:
        df["__task__"] = "(all)"
        task_col = "__task__"
    else:
        task_col = roles.task
        df[task_col] = df[task_col].astype(str)
    all_tasks = sorted(df[task_col].unique())
    tasks = list(plan.tasks) if plan.tasks else all_tasks
    unknown = [t for t in tasks if t not in all_tasks]
    if unknown:
        raise DataError(f"Task(s) {unknown} are not in the table; it has {all_tasks}.")

    if roles.split:
        df[roles.split] = df[roles.split].astype(str)
        splits = set(df[roles.split].unique())
        if plan.eval_split not in splits:
            raise DataError(f"The split column '{roles.split}' has no '{plan.eval_split}' rows (it has "
                            f"{sorted(splits)}). The audit runs on held-out '{plan.eval_split}' rows.")
        eval_df = df[df[roles.split] == plan.eval_split]
        val_df = df[df[roles.split] == plan.val_split]
    else:
        eval_df, val_df = df, df.iloc[0:0]
    if plan.threshold == "best_f1" and val_df.empty:
        raise DataError(f"'best_f1' chooses the threshold on validation rows, but no rows have split = "
                        f"'{plan.val_split}'. Map a split column with validation rows, or give a fixed threshold.")

    intersections = {INTERSECTION_SEP.join(c): c for c in plan.intersections}
    attributes = list(roles.attributes) + list(intersections)
    warnings = [i.message for i in report.warnings]

    rng = np.random.default_rng(plan.seed)
    records: list[dict] = []
    group_rows: list[dict] = []
    dropped: list[dict] = []
    bin_rows: list[dict] = []
    thresholds: dict[str, float] = {}
    boot_mode: dict[str, str] = {}

    steps = max(1, len(tasks) * (len(attributes) + len(roles.continuous_attributes)))
    step = 0
    for task in tasks:
        sub = eval_df[eval_df[task_col] == task]
        if sub.empty:
            warnings.append(f"Task '{task}' has no '{plan.eval_split}' rows; it is left out.")
            continue
        if plan.threshold == "best_f1":
            vsub = val_df[val_df[task_col] == task]
            if vsub[roles.label].nunique() < 2:
                raise DataError(f"Task '{task}': the validation split needs both classes to choose a best-F1 "
                                "threshold. Use a fixed threshold for this audit.")
            tau = best_f1_threshold(vsub[roles.label].to_numpy(), vsub[roles.score].to_numpy())
        else:
            tau = float(plan.threshold)
        thresholds[task] = tau
        y = sub[roles.label].to_numpy(int)
        s = sub[roles.score].to_numpy(float)
        yhat = (s >= tau).astype(int)
        cluster = bool(roles.patient_id) and sub[roles.patient_id].duplicated().any()
        boot_mode[task] = ("whole-patient (cluster) resampling" if cluster
                           else "label-stratified row resampling")
        patients = sub[roles.patient_id].astype(str).to_numpy() if roles.patient_id else None

        for attr in attributes:
            rep(step / steps, f"{task}: {attr}")
            step += 1
            labels = _group_labels(sub, attr, intersections).to_numpy(dtype=object)
            _audit_attribute(task, attr, labels, y, s, yhat, patients, cluster, tau, plan, rng,
                             records, group_rows, dropped, sub_patients=patients)
        for attr in roles.continuous_attributes:
            rep(step / steps, f"{task}: {attr} error spread")
            step += 1
            x = sub[attr].to_numpy(float)
            ok = ~np.isnan(x)
            _audit_continuous(task, attr, x[ok], y[ok], yhat[ok], None if patients is None else patients[ok],
                              cluster, tau, plan, rng, records, bin_rows, warnings)

    rep(1.0, "Correcting for multiple testing")
    rec = pd.DataFrame.from_records(records, columns=_COLUMNS["records"])
    if not rec.empty:
        rec["q_value"] = np.nan
        # BH across the tasks of one (attribute, group, gap) family; for the between rule the family is
        # (attribute, gap), since the highest and lowest groups may differ from task to task.
        family = ["attribute", "metric"] if plan.gap_rule == "between" else ["attribute", "group", "metric"]
        for _, idx in rec.groupby(family, dropna=False).groups.items():
            rec.loc[idx, "q_value"] = benjamini_hochberg(rec.loc[idx, "p_value"].to_numpy(float))
        rec["significant_bh"] = np.where(rec["q_value"].isna(), None, rec["q_value"] <= plan.alpha)
        rec["significant_bh"] = rec["significant_bh"].astype(object)
    summary = summarise(rec)
    prov = _prov.make(plan.seed, data_sha256, model_hashes, n_boot=plan.n_boot, bootstrap=boot_mode,
                      n_rows=int(len(table)), n_eval_rows=int(len(eval_df)))
    return GroupAuditResult(plan=plan, records=rec,
                            groups=pd.DataFrame.from_records(group_rows, columns=_COLUMNS["groups"]),
                            summary=summary,
                            dropped=pd.DataFrame.from_records(dropped, columns=_COLUMNS["dropped"]),
                            delta_bins=pd.DataFrame.from_records(bin_rows, columns=_COLUMNS["delta_bins"]),
                            thresholds=thresholds, provenance=prov, warnings=warnings)


def _audit_attribute(task, attr, labels, y, s, yhat, patients, cluster, tau, plan, rng,
                     records, group_rows, dropped, sub_patients):
    excluded = set(plan.drop_groups.get(attr, []))
    names, inverse = np.unique(labels, return_inverse=True)
    sizes = np.bincount(inverse, minlength=len(names))
    tested: list[int] = []
    for k, name in enumerate(names):
        in_g = inverse == k
        cnt = np.bincount(2 * y[in_g] + yhat[in_g], minlength=4)
        auroc, auprc = _auc(y[in_g], s[in_g])
        reason = None
        if name == MISSING_GROUP:
            reason = "attribute value missing"
        elif name in excluded:
            reason = "excluded by the user"
        elif sizes[k] < plan.min_group_size:
            reason = f"fewer than {plan.min_group_size} rows"
        if reason:
            dropped.append({"task": task, "attribute": attr, "group": name, "n": int(sizes[k]), "reason": reason})
        else:
            tested.append(k)
        group_rows.append({"task": task, "attribute": attr, "group": name, "n": int(sizes[k]),
                           "n_patients": int(len(np.unique(sub_patients[in_g]))) if sub_patients is not None
                           else int(sizes[k]),
                           "n_positive": int(y[in_g].sum()), "prevalence": float(y[in_g].mean()),
                           "auroc": auroc, "auprc": auprc, "tn": int(cnt[0]), "fp": int(cnt[1]),
                           "fn": int(cnt[2]), "tp": int(cnt[3]), "tested": reason is None, "reason": reason})
    if len(tested) < 2:
        dropped.append({"task": task, "attribute": attr, "group": "(all groups)", "n": int(len(y)),
                        "reason": "fewer than two groups large enough to compare"})
        return
    remap = np.full(len(names), -1)
    remap[tested] = np.arange(len(tested))
    gidx = remap[inverse]
    keep = gidx >= 0
    g = len(tested)
    tnames = names[tested]
    cells = 4 * gidx[keep] + 2 * y[keep] + yhat[keep]
    observed = np.bincount(cells, minlength=4 * g).reshape(1, g, 4)
    boot = _resample_counts(cells, y[keep], None if patients is None else patients[keep], 4 * g,
                            plan.n_boot, rng, cluster).reshape(plan.n_boot, g, 4)

    for metric in plan.metrics:
        r_shown, num, den = rate(observed, metric)
        r_boot, _, _ = rate(boot, metric)
        # A rate on a handful of cases (recall 18/18) barely moves in bootstrap replicates, so its interval
        # collapses and tiny groups produce "significant" gaps. Such rates are shown but not compared.
        thin = (den[0] > 0) & (den[0] < plan.min_denominator)
        r_obs = np.where(thin[None], np.nan, r_shown)
        r_boot = np.where(thin[None], np.nan, r_boot)
        gaps_obs, comp_obs, gaps_boot = _gaps(plan.gap_rule, observed, boot, r_obs, r_boot, metric)
        low, high = percentile_ci(gaps_boot, plan.ci_level, axis=0)
        if plan.gap_rule == "between":
            # Fixing the highest and lowest groups on the data selects the extremes, so "the bootstrap CI excludes
            # 0" would flag equal groups far too often (measured: 29% at alpha 0.05 with 5 equal groups). The range
            # is tested against its permutation distribution instead; the CI stays descriptive.
            # Repeated patients: a row-level permutation treats a patient's rows as independent (measured: 33-73%
            # significant at alpha 0.05 with no disparity), so the null is taken from the whole-patient bootstrap.
            p = np.array([centred_bootstrap_p_range(r_obs[0], r_boot) if cluster
                          else permutation_p_range(observed[0][~thin], metric, plan.n_permutations, rng)])
        else:
            p = bootstrap_p_value(gaps_boot, axis=0)
        n_valid = (~np.isnan(gaps_boot)).sum(axis=0)
        for j in range(gaps_obs.shape[1]):
            gap = float(gaps_obs[0, j])
            estimable = not math.isnan(gap)
            if plan.gap_rule == "between":
                hi, lo = comp_obs
                group_name, comp_name = str(tnames[hi]), str(tnames[lo])
                n_j, rate_j, thin_j = int(observed[0, hi].sum()), r_shown[0, hi], thin[hi]
                numer, denom = num[0, hi], den[0, hi]
                comp_rate = r_obs[0, lo]
            else:
                group_name = str(tnames[j])
                n_j, rate_j, thin_j = int(observed[0, j].sum()), r_shown[0, j], thin[j]
                numer, denom = num[0, j], den[0, j]
                comp_name, comp_rate = _comparison(plan.gap_rule, comp_obs, j, tnames, observed, metric)
            reason = None
            if math.isnan(rate_j):
                reason = ("no positive cases in the group" if metric == "recall"
                          else "no negative cases in the group" if metric == "specificity" else "empty group")
            elif thin_j:
                unit = {"recall": "positive cases", "specificity": "negative cases"}.get(metric, "rows")
                reason = f"only {int(denom)} {unit} (fewer than {plan.min_denominator}): too few to test"
            elif not estimable:
                reason = "no other group has a rate that can be tested"
            if estimable and n_valid[j] < plan.n_boot:
                # some replicates lost every positive/negative of a group: say so rather than hide it
                reason = f"estimable in {int(n_valid[j])} of {plan.n_boot} bootstrap replicates"
            lo_j = float(low[j]) if estimable else float("nan")
            hi_j = float(high[j]) if estimable else float("nan")
            significant = (lo_j > 0 or hi_j < 0) if estimable and not math.isnan(lo_j) else None
            if plan.gap_rule == "between" and estimable:
                significant = bool(p[j] <= plan.alpha)
            favours = None
            if estimable and gap != 0:
                favours = group_name if gap > 0 else comp_name
            records.append({
                "task": task, "attribute": attr, "group": group_name, "metric": metric, "n": n_j,
                "numerator": float(numer), "denominator": float(denom),
                "rate": None if math.isnan(rate_j) else float(rate_j), "reason": reason,
                "comparison": comp_name, "comparison_rate": None if comp_rate is None or math.isnan(comp_rate)
                else float(comp_rate),
                "gap": gap if estimable else None, "ci_low": lo_j if estimable else None,
                "ci_high": hi_j if estimable else None,
                "p_value": float(p[j]) if estimable and not math.isnan(p[j]) else None, "q_value": None,
                "significant": significant, "significant_bh": None, "favours": favours,
                "n_boot_valid": int(n_valid[j]), "threshold": tau, "bins": None,
                "test": ("bootstrap percentile CI; " + ("centred whole-patient bootstrap p" if cluster else "permutation p")
                         + " of the range max − min" if plan.gap_rule == "between"
                         else "bootstrap percentile CI; two-sided bootstrap p")})


def _comparison(rule, comp_obs, j, names, observed, metric):
    if rule == "max":
        i = int(comp_obs[0, j])
        if i < 0:
            return None, None
        r, _, _ = rate(observed[0, i], metric)
        return str(names[i]), float(r)
    if rule == "one-vs-rest":
        rest = observed[0].sum(axis=0) - observed[0, j]
        return f"not {names[j]}", float(rate(rest, metric)[0])
    return "overall", float(rate(observed[0].sum(axis=0), metric)[0])


def _gaps(rule, observed, boot, r_obs, r_boot, metric):
    """Observed gaps (1, J), observed comparison info, bootstrap gaps (B, J)."""
    if rule == "max":
        g_obs, i_obs = max_gap(r_obs)
        g_boot, _ = max_gap(r_boot)
        return g_obs, i_obs, g_boot
    if rule == "one-vs-rest":
        rest_obs = observed.sum(axis=1, keepdims=True) - observed
        rest_boot = boot.sum(axis=1, keepdims=True) - boot
        return r_obs - rate(rest_obs, metric)[0], None, r_boot - rate(rest_boot, metric)[0]
    if rule == "to-overall":
        all_obs = rate(observed.sum(axis=1), metric)[0][:, None]
        all_boot = rate(boot.sum(axis=1), metric)[0][:, None]
        return r_obs - all_obs, None, r_boot - all_boot
    # between: the highest and lowest groups are fixed on the observed data; the gap stays signed
    valid = ~np.isnan(r_obs[0])
    if valid.sum() < 2:
        return np.full((1, 1), np.nan), (0, 0), np.full((boot.shape[0], 1), np.nan)
    hi = int(np.nanargmax(r_obs[0]))
    lo = int(np.nanargmin(r_obs[0]))
    return (r_obs[:, hi] - r_obs[:, lo])[:, None], (hi, lo), (r_boot[:, hi] - r_boot[:, lo])[:, None]


def _audit_continuous(task, attr, x, y, yhat, patients, cluster, tau, plan, rng, records, bin_rows, warnings):
    for n_req in plan.bins:
        base = {"task": task, "attribute": attr, "group": f"N={n_req}", "metric": "delta_eo", "n": int(len(y)),
                "numerator": None, "denominator": None, "rate": None, "comparison": None, "comparison_rate": None,
                "q_value": None, "significant_bh": None, "favours": None, "threshold": tau,
                "test": "bootstrap percentile CI; permutation p (errors independent of bins within each class)"}
        if len(y) == 0 or len(np.unique(y)) < 2:
            records.append({**base, "reason": "both classes are needed to compute error rates", "gap": None,
                            "ci_low": None, "ci_high": None, "p_value": None, "significant": None,
                            "n_boot_valid": 0, "bins": None})
            continue
        edges = equal_frequency_bins(x, y, int(n_req))
        k = len(edges) - 1
        if k < n_req:
            warnings.append(f"Task '{task}', {attr}: {n_req} bins requested, {k} used so that every bin holds both "
                            "classes.")
        b = assign_bins(x, edges)
        cells = 4 * b + 2 * y + yhat
        observed = np.bincount(cells, minlength=4 * k).reshape(k, 4)
        value = float(delta_eo(observed))
        boot = _resample_counts(cells, y, patients, 4 * k, plan.n_boot, rng, cluster).reshape(plan.n_boot, k, 4)
        d_boot = delta_eo(boot)
        low, high = percentile_ci(d_boot, plan.ci_level)
        if k == 1:
            p = 1.0
        elif cluster:  # rows of one patient are not exchangeable: null from the whole-patient bootstrap instead
            p = centred_bootstrap_p_delta_eo(observed, boot, value)
        else:
            p = permutation_p_delta_eo(observed, value, plan.n_permutations, rng)
        if cluster:
            base["test"] = "whole-patient bootstrap percentile CI; centred whole-patient bootstrap p"
        records.append({**base, "reason": None, "gap": value, "ci_low": float(low), "ci_high": float(high),
                        "p_value": p, "significant": bool(p <= plan.alpha),
                        "n_boot_valid": int((~np.isnan(d_boot)).sum()), "bins": k})
        tn, fp, fn, tp = observed.T
        for i in range(k):
            bin_rows.append({"task": task, "attribute": attr, "bins_requested": int(n_req), "bins_used": k, "bin": i,
                             "lower": float(edges[i]), "upper": float(edges[i + 1]), "n": int(observed[i].sum()),
                             "n_positive": int(fn[i] + tp[i]), "fpr": float(fp[i] / (fp[i] + tn[i])),
                             "fnr": float(fn[i] / (fn[i] + tp[i]))})


def permutation_p_delta_eo(observed: np.ndarray, value: float, n_perm: int, rng: np.random.Generator) -> float:
    """Exact-permutation p for Δ_eo: within each class, predicted positives are spread over bins at random.

    Under "errors do not depend on the attribute", the number of predicted positives in each bin among the rows of
    class y is multivariate hypergeometric (bin sizes within class y, predicted positives of class y).
    p = (b + 1) / (B + 1) with b the permutations whose Δ is at least the observed one.
    """
    k = observed.shape[0]
    neg_sizes = observed[:, 0] + observed[:, 1]
    pos_sizes = observed[:, 2] + observed[:, 3]
    fp_perm = rng.multivariate_hypergeometric(neg_sizes, int(observed[:, 1].sum()), size=n_perm)
    tp_perm = rng.multivariate_hypergeometric(pos_sizes, int(observed[:, 3].sum()), size=n_perm)
    perm = np.empty((n_perm, k, 4))
    perm[..., 0] = neg_sizes - fp_perm
    perm[..., 1] = fp_perm
    perm[..., 2] = pos_sizes - tp_perm
    perm[..., 3] = tp_perm
    d = delta_eo(perm)
    return float((np.sum(d >= value - 1e-12) + 1) / (n_perm + 1))


def permutation_p_range(counts: np.ndarray, metric: str, n_perm: int, rng: np.random.Generator) -> float:
    """Permutation p for the range (max − min over groups) of a rate, counts of shape (G, 4).

    Null: predictions do not depend on the group — across all rows for parity, within each class for recall
    (positives) and specificity (negatives). The permuted per-group counts are multivariate hypergeometric.
    """
    obs = rate(counts, metric)[0]
    valid = ~np.isnan(obs)
    observed_range = np.nanmax(obs) - np.nanmin(obs)
    if metric == "parity":
        sizes = counts.sum(axis=1)
        pos = rng.multivariate_hypergeometric(sizes, int(counts[:, [1, 3]].sum()), size=n_perm)
        with np.errstate(invalid="ignore", divide="ignore"):
            perm = pos / sizes
    else:
        cols = (2, 3) if metric == "recall" else (0, 1)
        sizes = counts[:, cols[0]] + counts[:, cols[1]]
        hits = rng.multivariate_hypergeometric(sizes, int(counts[:, cols[1] if metric == "recall" else cols[0]].sum()),
                                               size=n_perm)
        with np.errstate(invalid="ignore", divide="ignore"):
            perm = hits / sizes
    perm = perm[:, valid]
    ranges = perm.max(axis=1) - perm.min(axis=1)
    return float((np.sum(ranges >= observed_range - 1e-12) + 1) / (n_perm + 1))


def centred_bootstrap_p_range(r_obs: np.ndarray, r_boot: np.ndarray) -> float:
    """p for "all group rates equal" from the bootstrap of the range, centred on the observed rates.

    Under the null the spread of the estimates around the common rate is approximated by the bootstrap spread
    ``r* − r̂``; p = (b + 1) / (B + 1), b the replicates whose centred range is at least the observed range. Used
    when whole patients are resampled, since a row permutation would ignore the patients.
    """
    valid = ~np.isnan(r_obs)
    centred = r_boot[:, valid] - r_obs[valid]
    centred = centred[~np.isnan(centred).any(axis=1)]
    if centred.shape[0] == 0:
        return float("nan")
    ranges = centred.max(axis=1) - centred.min(axis=1)
    observed_range = r_obs[valid].max() - r_obs[valid].min()
    return float((np.sum(ranges >= observed_range - 1e-12) + 1) / (centred.shape[0] + 1))


def centred_bootstrap_p_delta_eo(observed: np.ndarray, boot: np.ndarray, value: float) -> float:
    """p for "error rates do not depend on the bins" from the centred bootstrap: Δ_eo of ``rate* − ratê``."""
    def rates(c):
        with np.errstate(invalid="ignore", divide="ignore"):
            return c[..., 1] / (c[..., 0] + c[..., 1]), c[..., 2] / (c[..., 2] + c[..., 3])

    fpr, fnr = rates(observed.astype(float))
    fpr_b, fnr_b = rates(boot.astype(float))
    cf, cn = fpr_b - fpr, fnr_b - fnr
    ok = ~(np.isnan(cf).any(axis=1) | np.isnan(cn).any(axis=1))
    if not ok.any():
        return float("nan")
    cf, cn = cf[ok], cn[ok]
    d = (np.abs(cf - cf.mean(axis=1, keepdims=True)).sum(axis=1)
         + np.abs(cn - cn.mean(axis=1, keepdims=True)).sum(axis=1))
    return float((np.sum(d >= value - 1e-12) + 1) / (ok.sum() + 1))


def summarise(rec: pd.DataFrame) -> pd.DataFrame:
    """001 Table 4: per attribute × group × metric, tasks with a significant gap and the share favouring the group."""
    rows = []
    gaps = rec[rec["metric"] != "delta_eo"] if not rec.empty else rec
    for (attr, group, metric), sub in gaps.groupby(["attribute", "group", "metric"], sort=False):
        tested = sub[sub["gap"].notna()]
        row = {"attribute": attr, "group": group, "metric": metric, "n_tasks": int(len(tested))}
        for col, suffix in (("significant", ""), ("significant_bh", "_bh")):
            sig = tested[tested[col] == True]  # noqa: E712 (object column with None)
            row[f"n_significant{suffix}"] = int(len(sig))
            row[f"share_favouring{suffix}"] = (float((sig["favours"] == group).mean()) if len(sig) else None)
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=_COLUMNS["summary"])
