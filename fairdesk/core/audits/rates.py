"""Per-group rates with their intervals (:mod:`fairdesk.core.stats.rates`): recall, specificity and positive
prediction rate of every group the group audit saw, on the rows and at the thresholds the audit used.

The group audit stores gaps with intervals; a notebook user (fairlearn's ``MetricFrame.by_group``) looks first for
each group's own rate and how sure it is. :func:`group_rates` recomputes the confusion counts from the table the
way :func:`fairdesk.core.audits.groups.run_group_audit` does (the same prepared columns, evaluation rows, thresholds
and group names) and checks them against the audit's stored counts, so the two never tell different numbers.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairdesk.core.audits.groups import GroupAuditPlan, group_labels, task_column
from fairdesk.core.data.schema import INTERSECTION_SEP, as_group_labels, prepare
from fairdesk.core.errors import DataError
from fairdesk.core.stats.rates import rate_interval

RATE_COLUMNS = ["task", "attribute", "group", "metric", "n", "numerator", "rate", "ci_low", "ci_high",
                "design_effect", "interval"]


def _hits_rows(y: np.ndarray, yhat: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "parity":
        return yhat == 1, np.ones_like(y, dtype=bool)
    if metric == "recall":
        return yhat == 1, y == 1
    if metric == "specificity":
        return yhat == 0, y == 0
    raise DataError(f"No per-group rate for the metric '{metric}'.")


def group_rates(table: pd.DataFrame, plan: GroupAuditPlan, thresholds: dict[str, float],
                stored_groups: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (task, attribute or intersection, group, metric of ``plan.metrics``): ``n`` (the rate's
    denominator rows), ``numerator``, ``rate``, its ``plan.ci_level`` interval, the design effect and the name of the
    interval. Continuous attributes have no groups (their audit is the error spread over bins) and are left out.
    ``stored_groups``: the audit's ``groups`` table; the confusion counts must agree with it (else DataError)."""
    roles = plan.roles
    df = prepare(table, roles)
    combos = {INTERSECTION_SEP.join(c): tuple(c) for c in plan.intersections}
    for c in dict.fromkeys(c for combo in plan.intersections for c in combo):
        if c not in df.columns:
            df[c] = as_group_labels(table[c])
    task_col = task_column(df, roles)
    if roles.split:
        df = df[df[roles.split].astype(str) == plan.eval_split]
    rows = []
    for task, tau in thresholds.items():
        sub = df[df[task_col] == task]
        y = sub[roles.label].to_numpy(int)
        yhat = (sub[roles.score].to_numpy(float) >= float(tau)).astype(int)
        patients = sub[roles.patient_id].astype(str).to_numpy() if roles.patient_id else None
        for attr in list(roles.attributes) + list(combos):
            labels = group_labels(sub, attr, combos).to_numpy(dtype=object)
            for group in sorted(set(labels)):
                in_g = labels == group
                for metric in plan.metrics:
                    hits, den = _hits_rows(y[in_g], yhat[in_g], metric)
                    r = rate_interval(hits, den, None if patients is None else patients[in_g], plan.ci_level)
                    rows.append({"task": task, "attribute": attr, "group": group, "metric": metric,
                                 **{k: r[k] for k in RATE_COLUMNS[4:]}})
    out = pd.DataFrame.from_records(rows, columns=RATE_COLUMNS)
    if stored_groups is not None and not stored_groups.empty:
        _check_counts(out, stored_groups)
    return out


def _check_counts(rates: pd.DataFrame, groups: pd.DataFrame) -> None:
    """The parity denominator is the group's rows; its numerator TP + FP: they must equal the stored counts."""
    mine = rates[rates["metric"] == "parity"].set_index(["task", "attribute", "group"])
    for g in groups.itertuples(index=False):
        key = (str(g.task), str(g.attribute), str(g.group))
        if key in mine.index:
            row = mine.loc[key]
            if int(row["n"]) != int(g.n) or int(row["numerator"]) != int(g.tp) + int(g.fp):
                raise DataError(f"The per-group rates of {key} do not match the stored audit's counts; the table "
                                "is not the one this audit was run on.")


TWO_VALUED_SCORES = (
    "The scores take only two values ({values}): they look like 0/1 predictions, not probabilities. The rates and "
    "gaps at the threshold stand, but AUROC, AUPRC and calibration are not meaningful for them (a ranking of two "
    "values, and no probability to calibrate); pass the model's probabilities as the score to read those.")


def two_valued_scores_warning(scores) -> str | None:
    """The warning for a score column with at most two distinct values (hard predictions passed as scores), or
    None."""
    values = pd.unique(pd.to_numeric(pd.Series(scores), errors="coerce").dropna())
    if len(values) > 2:
        return None
    return TWO_VALUED_SCORES.format(values=" and ".join(f"{v:g}" for v in sorted(values)) or "none")


def slice_rates(table: pd.DataFrame, document: dict) -> pd.DataFrame:
    """Each confirmed slice's rate on the confirmation rows of a slice audit ``document`` with its interval
    (:func:`fairdesk.core.stats.rates.rate_interval`: whole patients when the patient id repeats there). The
    confirmation rows are drawn again with the audit's own split (:func:`fairdesk.core.audits.slices.split_rows`,
    same seed and fraction) and each slice's rows found from its stored definition (continuous attributes by the
    stored bin edges); the counts must equal the stored ones (else DataError)."""
    from fairdesk.core.audits.groups import assign_bins
    from fairdesk.core.audits.slices import SliceAuditPlan, bin_names, split_rows

    plan = SliceAuditPlan(**{**document["plan"], "roles": _roles_of(document["plan"]["roles"])})
    roles = plan.roles
    df = prepare(table, roles)
    task_col = task_column(df, roles)
    edges_of = {t["task"]: t.get("bins") or {} for t in document.get("tasks") or []}
    level = float(plan.ci_level)
    rows = []
    by_task: dict[str, list[dict]] = {}
    for s in document.get("slices") or []:
        by_task.setdefault(str(s["task"]), []).append(s)
    for task, slices in by_task.items():
        sub = df[df[task_col] == task].reset_index(drop=True)
        y = sub[roles.label].to_numpy(int)
        patients = sub[roles.patient_id].astype(str).to_numpy() if roles.patient_id else None
        conf = ~split_rows(y, patients, plan.discovery_fraction, plan.seed)
        yhat = (sub[roles.score].to_numpy(float) >= float(document["thresholds"][task])).astype(int)
        for s in slices:
            in_slice = conf.copy()
            for col, value in (s.get("definition") or {}).items():
                if col in roles.continuous_attributes:
                    edges = np.asarray(edges_of[task][col], float)
                    v = pd.to_numeric(sub[col], errors="coerce").to_numpy(float)
                    names = np.asarray(bin_names(edges), dtype=object)[assign_bins(np.nan_to_num(v, nan=edges[0]),
                                                                                 edges)]
                    in_slice &= ~np.isnan(v) & (names == value)
                else:
                    in_slice &= (sub[col].astype("string") == value).fillna(False).to_numpy(bool)
            metric = s["metric"]
            if metric == "error":
                hits, den = yhat != y, np.ones_like(y, dtype=bool)
            else:
                hits, den = _hits_rows(y, yhat, metric)
            r = rate_interval(hits[in_slice], den[in_slice], None if patients is None else patients[in_slice],
                              level)
            if s.get("cases") is not None and r["n"] != int(s["cases"]):
                raise DataError(f"The rate of slice '{s.get('description')}' does not match the stored audit's "
                                "counts; the table is not the one this audit was run on.")
            rows.append({"task": task, "attribute": "slice", "group": s.get("description"), "metric": metric,
                         **{k: r[k] for k in RATE_COLUMNS[4:]}})
    return pd.DataFrame.from_records(rows, columns=RATE_COLUMNS)


def _roles_of(d: dict):
    from fairdesk.core.data.schema import ColumnRoles

    return ColumnRoles(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})
