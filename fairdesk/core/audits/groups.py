"""Group performance gaps (METHODS §1), error spread over a continuous attribute, Δ_eo^(N) (METHODS §2), and
calibration and discrimination by group (METHODS §8: table ``calibration``, whose tests join the correction family,
and table ``curves``; the numbers are in :mod:`fairdesk.core.stats.calibration`).

Entry point: :func:`run_group_audit` ``(table, plan, progress, cancel) -> GroupAuditResult``. This module runs the
audit, one (task, attribute) unit at a time (:func:`audit_unit`); the pieces it is built from are its siblings —
:mod:`.group_plan` (the plan and the correction), :mod:`.group_counts` (groups, cell counts, rates),
:mod:`.group_tests` (the tests and their intervals) and :mod:`.group_records` (the document and its findings) —
whose public names are importable from here too, as stored documents and callers name them.

Every statistic is a function of confusion-cell counts, so the bootstrap draws those counts directly
(see :mod:`fairdesk.core.stats.bootstrap`). Cell layout per group: ``[TN, FP, FN, TP]`` = index ``2*y + yhat``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fairdesk.core import provenance as _prov
from fairdesk.core.audits import group_counts, group_records, group_tests
from fairdesk.core.audits.group_counts import (BOUNDARY_PSEUDO, MISSING_GROUP, assign_bins, delta_eo,  # noqa: F401
                                               equal_frequency_bins, group_labels, max_gap, rate, task_column)
from fairdesk.core.audits.group_plan import (CALIBRATION_MEASURES, CALIBRATION_TEST_TEXT, CORRECTIONS,  # noqa: F401
                                             CURVES, DISCRIMINATION_MEASURES, DISCRIMINATION_TEST_TEXT, FAMILIES,
                                             FAMILY_TEXT, GAP_RULES, MAX_BINS, MEASURE_WORDS, METRIC_TEXT, METRICS,
                                             PLAN_LIMITS, PLAN_SUMMARY_KEYS, PRIMARY_CHOICES, PRIMARY_ERROR_RATE,
                                             PROCEDURES, RULE_TEXT, RULES, SECONDARY_FAMILIES, TEST_TEXT,
                                             THRESHOLD_REQUIRED, TO_OVERALL_NOTE, TREE_PARENT, VERDICTS,
                                             GroupAuditPlan, check_plan_inputs, correct, plan_summary, procedure_of)
from fairdesk.core.audits.group_records import (BOOTSTRAP_INTERVALS_WARNING, COMPARISON_FAMILIES,  # noqa: F401
                                                TABLES, GroupAuditResult, calibration_findings, comparison_counts,
                                                discrimination_findings, findings, kept_findings, summarise,
                                                tests_text, verdict_counts)
from fairdesk.core.audits.group_tests import (FLAT_PREFIX, TOO_FEW_CASES, agreeing_intervals, band,  # noqa: F401
                                              centred_bootstrap_null_delta_eo, centred_bootstrap_p_delta_eo,
                                              flat_reason, flat_threshold_warning, group_calibration, no_variation,
                                              permutation_null_delta_eo, permutation_p_delta_eo, rate_gap_test,
                                              tail_p, too_few_cases)
from fairdesk.core.data.loaders import table_sha256
from fairdesk.core.data.schema import INTERSECTION_SEP, as_group_labels, prepare, validate
from fairdesk.core.errors import DataError
from fairdesk.core.executor import Executor, ExecutorSpec, open_executor, task_rng
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.stats import discrimination as D
from fairdesk.core.stats.thresholds import best_f1_threshold
from fairdesk.core.stats.verified_region import annotate as annotate_region

# the siblings' module-private helpers this module's code calls by name (one module until it was split)
_COLUMNS = group_records._COLUMNS
_resample_counts = group_counts._resample_counts
_finite = group_tests._finite


def run_group_audit(table: pd.DataFrame, plan: GroupAuditPlan, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None, data_sha256: str | None = None,
                    model_hashes: dict[str, str] | None = None,
                    executor: ExecutorSpec | Executor | None = None) -> GroupAuditResult:
    """Run the group audit. Raises :class:`DataError` for unusable input, ``Cancelled`` on cancel. ``executor``:
    where the (task, attribute) units run (:mod:`fairdesk.core.executor`; None: in this process)."""
    rep = Reporter(progress, cancel)
    roles = plan.roles
    if not roles.attributes and not roles.continuous_attributes and not plan.intersections:
        raise DataError("Choose at least one protected attribute to audit.")
    report = validate(table, roles, plan.min_group_size)
    report.raise_if_errors()
    if roles.continuous_attributes and max(plan.bins, default=0) > len(table):
        raise DataError(f"--bins {max(plan.bins)} is more than the table's {len(table):,} rows; choose at most "
                        f"{len(table):,} bins (2 to 10 is usual).")
    for combo in plan.intersections:
        missing = [c for c in combo if c not in table.columns]
        if missing:
            raise DataError(f"Intersection column(s) {missing} are not in the table.")
    extra_cols = [c for combo in plan.intersections for c in combo if c not in roles.all_columns()]
    df = prepare(table, roles)
    for c in dict.fromkeys(extra_cols):
        df[c] = as_group_labels(table[c])
    data_sha256 = data_sha256 or table_sha256(table)

    task_col = task_column(df, roles)
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
    if getattr(plan, "_folded_to_overall", False):
        warnings.append(TO_OVERALL_NOTE)

    thresholds: dict[str, float] = {}
    boot_mode: dict[str, str] = {}
    # The work of each (task, attribute) is one task of the executor: the gap bootstrap and tests with
    # the calibration and discrimination of a categorical attribute, or the error spread over every requested bin
    # count of a continuous one. Each draws from its own stream keyed by (seed, task, attribute), so the result
    # does not depend on which executor ran it, on how many workers, or in which order they finished.
    units: list[dict] = []
    task_warnings: dict[str, list[str]] = {}
    for t_no, task in enumerate(tasks, start=1):
        where = f"Task {t_no} of {len(tasks)} ({task})"
        said = task_warnings.setdefault(task, [])
        sub = eval_df[eval_df[task_col] == task]
        if sub.empty:
            said.append(f"Task '{task}' has no '{plan.eval_split}' rows; it is left out.")
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
        flat = flat_threshold_warning(task, yhat, s, tau)
        if flat:
            said.append(flat)
        cluster = bool(roles.patient_id) and sub[roles.patient_id].duplicated().any()
        boot_mode[task] = ("whole-patient (cluster) resampling" if cluster
                           else "row resampling within groups")
        patients = sub[roles.patient_id].astype(str).to_numpy() if roles.patient_id else None
        common = {"task": task, "where": where, "cluster": cluster, "tau": tau}
        for attr in attributes:
            units.append({**common, "attribute": attr, "continuous": False, "y": y, "s": s, "yhat": yhat,
                          "labels": group_labels(sub, attr, intersections).to_numpy(dtype=object),
                          "patients": patients})
        for attr in roles.continuous_attributes:
            x = sub[attr].to_numpy(float)
            ok = ~np.isnan(x)
            units.append({**common, "attribute": attr, "continuous": True, "x": x[ok], "y": y[ok], "yhat": yhat[ok],
                          "patients": None if patients is None else patients[ok]})

    def describe(unit: dict) -> str:
        if unit["continuous"]:
            return f"{unit['where']}: {unit['attribute']}: error spread over {plan.bins[0]} bins"
        return f"{unit['where']}: {unit['attribute']}: bootstrap of {plan.n_boot:,} replicates and tests"

    with open_executor(executor) as ex:
        done = ex.map(audit_unit, units, rep.sub(0.0, 0.95), describe, shared=plan,
                      weights=[max(1, len(plan.bins)) if u["continuous"] else 1 for u in units])
        executor_record = ex.provenance()
    parts = {k: [] for k in UNIT_PARTS}
    by_task: dict[str, list[dict]] = {}
    for unit, out in zip(units, done):
        by_task.setdefault(unit["task"], []).append(out)
    for task in tasks:
        warnings += task_warnings.get(task, [])
        for out in by_task.get(task, []):
            for k in UNIT_PARTS:
                parts[k] += out[k]
    warnings += parts.pop("warnings")
    records, tests, group_rows, dropped, bin_rows = (parts[k] for k in ("records", "tests", "groups", "dropped",
                                                                          "delta_bins"))
    cal_rows, disc_rows, curve_rows = parts["calibration"], parts["discrimination"], parts["curves"]

    rep(0.95, "Correcting for multiple testing")
    rec = pd.DataFrame.from_records(records, columns=_COLUMNS["records"])
    tst = correct(pd.DataFrame.from_records(tests, columns=_COLUMNS["tests"] + ["_dual"]), plan)
    groups_table = pd.DataFrame.from_records(group_rows, columns=_COLUMNS["groups"])
    if not tst.empty:  # a test outside the design-space region where its size and coverage were verified
        tst["outside_region"] = annotate_region(tst, groups_table,
                                                {t for t, m in boot_mode.items() if m.startswith("whole-patient")})
    if not rec.empty:
        rec = _with_verdicts(rec, tst, ("outside_region",))
        has = rec["test_id"].notna()
        rec["significant_bh"] = np.where(has, rec["verdict"] == "differs", None).astype(object)
        rec["verdict"] = rec["verdict"].astype(object).where(has, None)
    cal = _with_verdicts(pd.DataFrame.from_records(cal_rows, columns=_COLUMNS["calibration"]), tst)
    disc = _with_verdicts(pd.DataFrame.from_records(disc_rows, columns=_COLUMNS["discrimination"]), tst)
    summary = summarise(rec)
    prov = _prov.make(plan.seed, data_sha256, model_hashes, n_boot=plan.n_boot, bootstrap=boot_mode,
                      n_rows=int(len(table)), n_eval_rows=int(len(eval_df)), executor=executor_record)
    return GroupAuditResult(plan=plan, records=rec, tests=tst, calibration=cal, discrimination=disc,
                            curves=pd.DataFrame.from_records(curve_rows, columns=_COLUMNS["curves"]),
                            groups=groups_table,
                            summary=summary,
                            dropped=pd.DataFrame.from_records(dropped, columns=_COLUMNS["dropped"]),
                            delta_bins=pd.DataFrame.from_records(bin_rows, columns=_COLUMNS["delta_bins"]),
                            thresholds=thresholds, provenance=prov, warnings=warnings)


#: what one unit of :func:`audit_unit` returns: rows of each table, and warnings
UNIT_PARTS = ("records", "tests", "groups", "dropped", "delta_bins", "calibration", "discrimination", "curves",
              "warnings")


def audit_unit(unit: dict, plan: GroupAuditPlan, rep: Reporter) -> dict:
    """One task of the group audit: one (task, attribute) of :func:`run_group_audit` with its own random stream
    (:func:`~fairdesk.core.executor.task_rng` of the plan's seed, the task and the attribute). Returns the rows it
    adds to each table (:data:`UNIT_PARTS`)."""
    out: dict[str, list] = {k: [] for k in UNIT_PARTS}
    task, attr, tau, cluster = unit["task"], unit["attribute"], unit["tau"], unit["cluster"]
    rng = task_rng(plan.seed, "groups", task, attr)
    y, yhat, patients = unit["y"], unit["yhat"], unit["patients"]
    if unit["continuous"]:
        def block_done(i: int) -> None:
            nxt = plan.bins[i + 1] if i + 1 < len(plan.bins) else None
            rep((i + 1) / len(plan.bins), f"{unit['where']}: {attr}: error spread over {nxt} bins" if nxt
                else f"{unit['where']}: {attr}: error spread done")

        _audit_continuous(task, attr, unit["x"], y, yhat, patients, cluster, tau, plan, rng, out["records"],
                          out["delta_bins"], out["warnings"], out["tests"], on_block=block_done)
        return out
    labels, s = unit["labels"], unit["s"]
    ranks = _audit_attribute(task, attr, labels, y, s, yhat, patients, cluster, tau, plan, rng, out["records"],
                             out["groups"], out["dropped"], sub_patients=patients, tests=out["tests"])
    if plan.calibration:
        tested = [r["group"] for r in out["groups"] if r["tested"]]
        _audit_calibration(task, attr, labels, tested, ranks, s, patients, cluster, tau, plan, out["calibration"],
                           out["curves"], out["tests"], out["discrimination"])
    return out


def _with_verdicts(table: pd.DataFrame, tst: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """``table``'s q_value, q_equivalence, verdict, family (and ``extra`` columns) from the corrected tests, by
    ``test_id``; where the table has an interval, the adjusted one (told from the row's side: a row whose group is
    the test's comparison shows it mirrored) with the row's own kept as ``ci_low_unadjusted`` /
    ``ci_high_unadjusted``."""
    if table.empty:
        return table
    by_id = tst.set_index("test_id") if not tst.empty else None
    has = table["test_id"].notna()
    for col in ("q_value", "q_equivalence", "verdict", "family") + extra:
        table[col] = None
        if by_id is not None and has.any() and col in by_id:
            table.loc[has, col] = table.loc[has, "test_id"].map(by_id[col]).to_numpy()
    table["q_value"] = table["q_value"].astype(float)
    table["q_equivalence"] = table["q_equivalence"].astype(float)
    if "ci_low_unadjusted" in table and by_id is not None and "ci_low_unadjusted" in by_id:
        table["ci_low_unadjusted"], table["ci_high_unadjusted"] = table["ci_low"], table["ci_high"]
        if has.any():
            ids = table.loc[has, "test_id"]
            lo = ids.map(by_id["ci_low"]).astype(float).to_numpy()
            hi = ids.map(by_id["ci_high"]).astype(float).to_numpy()
            mirrored = (table.loc[has, "group"].astype(str).to_numpy()
                        != ids.map(by_id["group"]).astype(str).to_numpy())
            lo, hi = np.where(mirrored, -hi, lo), np.where(mirrored, -lo, hi)
            table["ci_low"] = table["ci_low"].astype(object)
            table["ci_high"] = table["ci_high"].astype(object)
            table.loc[has, "ci_low"] = [None if math.isnan(v) else float(v) for v in lo]
            table.loc[has, "ci_high"] = [None if math.isnan(v) else float(v) for v in hi]
    return table


def _audit_attribute(task, attr, labels, y, s, yhat, patients, cluster, tau, plan, rng,
                     records, group_rows, dropped, sub_patients, tests) -> dict:
    """The gap audit of one attribute. Returns each group's sort (:func:`..stats.discrimination.ranked` with the
    row cells) and its AUROC/AUPRC (:func:`..stats.discrimination.summary`), which the calibration audit of the
    same groups reuses."""
    excluded = set(plan.drop_groups.get(attr, []))
    names, inverse = np.unique(labels, return_inverse=True)
    sizes = np.bincount(inverse, minlength=len(names))
    tested: list[int] = []
    ranks: dict = {}
    for k, name in enumerate(names):
        in_g = inverse == k
        cnt = np.bincount(2 * y[in_g] + yhat[in_g], minlength=4)
        values, pos, neg, cell = D.ranked(y[in_g], s[in_g], return_cell=True)
        disc = D.summary(pos, neg)
        ranks[name] = (values, pos, neg, cell, disc)
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
                           "auroc": disc["auroc"], "auprc": disc["auprc"], "tn": int(cnt[0]), "fp": int(cnt[1]),
                           "fn": int(cnt[2]), "tp": int(cnt[3]), "tested": reason is None, "reason": reason})
    if len(tested) < 2:
        dropped.append({"task": task, "attribute": attr, "group": "(all groups)", "n": int(len(y)),
                        "reason": "fewer than two groups large enough to compare"})
        return ranks
    remap = np.full(len(names), -1)
    remap[tested] = np.arange(len(tested))
    gidx = remap[inverse]
    keep = gidx >= 0
    g = len(tested)
    tnames = names[tested]
    cells = 4 * gidx[keep] + 2 * y[keep] + yhat[keep]
    observed = np.bincount(cells, minlength=4 * g).reshape(1, g, 4)
    boot = _resample_counts(cells, gidx[keep], None if patients is None else patients[keep], 4 * g,
                            plan.n_boot, rng, cluster).reshape(plan.n_boot, g, 4)
    # whole patients: each group's rows per patient in the denominator of each measure (all rows, positives,
    # negatives) for the small-sample factor and the t reference's degrees of freedom
    per_patient = None
    if cluster and patients is not None:
        _, pcode = np.unique(patients[keep], return_inverse=True)
        gk, yk = gidx[keep], y[keep]
        hk = yhat[keep] == 1
        per_patient = {m: [np.bincount(pcode[(gk == j) & sel], minlength=pcode.max() + 1) for j in range(g)]
                       for m, sel in (("parity", np.ones(yk.size, bool)), ("recall", yk == 1),
                                      ("specificity", yk == 0))}
        # and each patient's rows in the numerator (flagged / flagged positives / unflagged negatives)
        per_patient_hits = {m: [np.bincount(pcode[(gk == j) & sel], minlength=pcode.max() + 1) for j in range(g)]
                            for m, sel in (("parity", hk), ("recall", (yk == 1) & hk),
                                           ("specificity", (yk == 0) & ~hk))}

    for metric in plan.metrics:
        r_shown, num, den = rate(observed, metric)
        r_boot, _, _ = rate(boot, metric)
        # A rate on a handful of cases (recall 18/18) is shown but not compared (plan.min_denominator).
        thin = (den[0] > 0) & (den[0] < plan.min_denominator)
        r_obs = np.where(thin[None], np.nan, r_shown)
        r_boot = np.where(thin[None], np.nan, r_boot)
        x, n = num[0], den[0]
        testable = np.flatnonzero(~np.isnan(r_obs[0]))
        base_test = {"task": task, "attribute": attr, "metric": metric}
        # ---- the tested units: every pair of testable groups (max, between) or each group vs the rest
        unit: dict[tuple[int, int], dict] = {}
        # with two testable groups "A vs rest" and "B vs rest" are the pair A vs B: one test, not two
        if plan.gap_rule == "one-vs-rest" and testable.size > 2:
            rest_obs = observed.sum(axis=1, keepdims=True) - observed
            rest_boot = boot.sum(axis=1, keepdims=True) - boot
            _, x_rest, n_rest = rate(rest_obs, metric)
            r_rest_boot = rate(rest_boot, metric)[0]
            for j in testable:
                if n_rest[0, j] < 1:
                    continue
                rows_pp = hits_pp = None
                if per_patient is not None:
                    rows_pp, hits_pp = ((pp[metric][j], sum(pp[metric][k] for k in testable if k != j))
                                        for pp in (per_patient, per_patient_hits))
                unit[(j, -1)] = rate_gap_test(x[j], n[j], x_rest[0, j], n_rest[0, j],
                                           r_boot[:, j] - r_rest_boot[:, j], plan, rows_pp, hits_pp)
                unit[(j, -1)].update(base_test, test_id=f"{task}|{attr}|{metric}|{tnames[j]}|rest",
                                     kind="one-vs-rest", group=str(tnames[j]), comparison=f"not {tnames[j]}")
        else:
            for a_pos, i in enumerate(testable):
                for j in testable[a_pos + 1:]:
                    rows_pp = None if per_patient is None else (per_patient[metric][i], per_patient[metric][j])
                    hits_pp = None if per_patient is None else (per_patient_hits[metric][i],
                                                                per_patient_hits[metric][j])
                    t = rate_gap_test(x[i], n[i], x[j], n[j], r_boot[:, i] - r_boot[:, j], plan, rows_pp, hits_pp)
                    t.update(base_test, test_id=f"{task}|{attr}|{metric}|{tnames[i]}|{tnames[j]}", kind="pair",
                             group=str(tnames[i]), comparison=str(tnames[j]))
                    unit[(i, j)] = t
        tests.extend(unit.values())

        # ---- the records shown: one per group (max, one-vs-rest) or the extreme pair (between)
        if plan.gap_rule == "between":
            if testable.size >= 2:
                hi = int(testable[np.argmax(r_obs[0, testable])])
                lo = int(testable[np.argmin(r_obs[0, testable])])
                if hi == lo:  # all equal: any pair is the extreme one
                    hi, lo = int(testable[0]), int(testable[1])
                shown = [(hi, lo)]
            else:
                shown = [(int(testable[0]) if testable.size else 0, None)]
        elif plan.gap_rule == "max":
            _, idx = max_gap(r_obs)
            shown = [(j, int(idx[0, j]) if idx[0, j] >= 0 else None) for j in range(g)]
        elif testable.size > 2:
            shown = [(j, -1 if (j, -1) in unit else None) for j in range(g)]
        else:  # one-vs-rest with two testable groups: each is compared with the other
            shown = [(j, int(testable[testable != j][0]) if j in testable and testable.size == 2 else None)
                     for j in range(g)]
        for j, k in shown:
            t = None
            if k is not None:
                t = unit.get((j, k)) or unit.get((k, j))
            mirrored = t is not None and k is not None and k >= 0 and (j, k) not in unit
            rate_j, thin_j, denom = r_shown[0, j], thin[j], den[0, j]
            reason = None
            if math.isnan(rate_j):
                reason = ("no positive cases in the group" if metric == "recall"
                          else "no negative cases in the group" if metric == "specificity" else "empty group")
            elif thin_j:
                unit_txt = {"recall": "positive cases", "specificity": "negative cases"}.get(metric, "rows")
                reason = f"only {int(denom)} {unit_txt} (fewer than {plan.min_denominator}): too few to test"
            elif t is None:
                reason = "no other group has a rate that can be tested"
            elif t.get("flat"):
                reason = flat_reason(task, tau, yhat, metric, rate_j)
            elif t["n_boot_valid"] < plan.n_boot:
                reason = f"estimable in {int(t['n_boot_valid'])} of {plan.n_boot} bootstrap replicates"
            comp_name, comp_rate = None, None
            if plan.gap_rule == "one-vs-rest":
                rest = observed[0].sum(axis=0) - observed[0, j]
                comp_name, comp_rate = f"not {tnames[j]}", float(rate(rest, metric)[0])
            elif k is not None and k >= 0:
                comp_name, comp_rate = str(tnames[k]), float(r_obs[0, k])
            gap = lo_j = hi_j = None
            if t is not None:
                gap, lo_j, hi_j = t["gap"], t["ci_low"], t["ci_high"]
                if mirrored:
                    gap, lo_j, hi_j = -gap, -hi_j, -lo_j
            favours = None
            if gap is not None and gap != 0:
                favours = str(tnames[j]) if gap > 0 else comp_name
            records.append({
                "task": task, "attribute": attr, "group": str(tnames[j]), "metric": metric,
                "n": int(observed[0, j].sum()), "numerator": float(x[j]), "denominator": float(denom),
                "rate": None if math.isnan(rate_j) else float(rate_j), "reason": reason,
                "comparison": comp_name,
                "comparison_rate": None if comp_rate is None or math.isnan(comp_rate) else comp_rate,
                "gap": gap, "ci_low": lo_j, "ci_high": hi_j,
                "p_value": None if t is None else t["p_value"], "q_value": None,
                "significant": None if t is None else bool(t["p_value"] <= plan.alpha),
                "significant_bh": None, "favours": favours,
                "n_boot_valid": 0 if t is None else int(t["n_boot_valid"]), "threshold": tau, "bins": None,
                "test": TEST_TEXT[plan.gap_rule] + ("; whole-patient sandwich design effect" if cluster else ""),
                "verdict": None, "test_id": None if t is None else t["test_id"],
                "p_equivalence": None if t is None else t["p_equivalence"], "q_equivalence": None})
    return ranks


def _audit_calibration(task, attr, labels, tested, ranks, s, patients, cluster, tau, plan, cal_rows, curve_rows,
                       tests, disc_rows):
    """Calibration by group (METHODS §8) for the tested groups of one attribute (:func:`group_calibration`, from
    the group's one sort ``ranks`` of the gap audit; the slope bootstrap from the plan's seed, the task and the
    attribute); its joint tests join ``tests``."""
    from fairdesk.core.stats import calibration as C

    C.check_probabilities(s)
    slope_rng = task_rng(plan.seed, "calibration slope", task, attr)
    discrimination: list[dict] = []
    for name in tested:
        values, pos, neg, cell, disc = ranks[name]
        patients_g = patients[labels == name] if cluster and patients is not None else None
        g = group_calibration(values, pos, neg, cell, disc, patients_g, plan, slope_rng)
        row = {"task": task, "attribute": attr, "group": str(name), **g["row"]}
        if g["test"] is not None:
            p, p_eq, stat, test_kind, deff = g["test"]
            test_id = f"{task}|{attr}|calibration|{name}"
            row.update(lr_stat=_finite(stat), p_value=p, p_equivalence=_finite(p_eq), design_effect=deff,
                       test_id=test_id, test=test_kind)
            tests.append({"test_id": test_id, "task": task, "attribute": attr, "metric": "calibration",
                          "kind": "calibration", "group": str(name), "comparison": None, "gap": None,
                          "ci_low": None, "ci_high": None, "p_value": p, "p_equivalence": _finite(p_eq),
                          "design_effect": deff, "n_boot_valid": None})
        cal_rows.append(row)
        pt = g["point"]
        discrimination.append({"group": str(name), "n": pt["n"], "n_positive": pt["n_positive"], "point": pt,
                               "var": g["var"], "var_cl": g["var_cl"], "rows_per_patient": g["rows_per_patient"],
                               "too_few": g["too_few"]})
        _curve_rows(task, attr, str(name), values, pos, neg, tau, plan, curve_rows)
    _audit_discrimination(task, attr, discrimination, cluster, plan, disc_rows, tests)


def _audit_discrimination(task, attr, groups: list[dict], cluster: bool, plan, disc_rows, tests):
    """AUROC and AUPRC of each tested group with an interval, and their pairwise gaps tested in the gaps' family
    (METHODS §8). ``groups``: per group its name, n, n_positive, ``point`` (:func:`..calibration.point_from_ranked`)
    and ``var`` / ``var_cl`` (:func:`..calibration.variances` of independent rows / of whole patients; the same
    when patients do not repeat).

    Test of a pair (the groups are disjoint rows: independent), two-sided; interval of the gap
    v_a − v_b ± q·√(se_a² + se_b²); TOST at ±``plan.margin`` on that scale. AUROC: se² = max(DeLong, Hanley–McNeil)
    variance (× its whole-patient design effect, floored at 1), tested by a score-type z on the cube-root scale of
    1 − AUROC at the pooled AUROC Ā (:func:`..stats.discrimination.auroc_pair_z`); AUPRC: z = (logit v_a −
    logit v_b) / √(lse_a² + lse_b²) with lse the influence SE of logit AP, while the intervals and the TOST use
    :func:`..stats.calibration.auprc_logit_se` (at least the binomial AP(1 − AP)/n₁) and the gap's interval is
    MOVER (:func:`..stats.gaps.mover`) from the two groups' intervals. Each group's interval is
    ``expit(logit v ± q·lse)``. q and the p-values are normal with independent rows, Student's t with
    :func:`..stats.gaps.cluster_df` degrees of freedom when patients repeat (whose variances carry G/(G − 1)).
    A group is compared only with at least ``plan.min_denominator`` positive and negative rows — patients among them
    when patients repeat — (fewer: "inconclusive: too few cases", :func:`too_few_cases`, with no interval and not
    tested). Every pair is one test; each group's row shows its largest-gap pair, as the max
    rule does for rates.
    """
    from scipy.special import expit, logit

    from fairdesk.core.stats import calibration as C
    from fairdesk.core.stats import gaps as G

    for metric in DISCRIMINATION_MEASURES:
        info = []
        for g in groups:
            value = _finite(g["point"][metric])
            lo = hi = None
            se, deff, lse, lse_test = math.nan, None, math.nan, math.nan
            if value is not None and metric == "auroc":
                var, deff = g["point"]["auroc_var"], 1.0
                if cluster and g["var"].get("auroc", 0) > 0:
                    deff = max(1.0, g["var_cl"]["auroc"] / g["var"]["auroc"])
                if value < 1:  # DeLong's variance collapses with few cases or near 1: Hanley–McNeil's as a floor
                    var = max(var, D.hanley_mcneil_variance(value, g["n_positive"], g["n"] - g["n_positive"]))
                se = math.sqrt(var * deff) if var > 0 else math.nan
            elif value is not None:
                v_cl = g["var_cl"].get("auprc", math.nan)
                lse = C.auprc_logit_se(value, v_cl, g["var"].get("auprc", math.nan), g["n_positive"])
                se = lse * value * (1 - value)  # NaN when AP is 0 or 1 (no logit)
                # the pair test keeps the influence variance: its size was right (0.045–0.065), and with the
                # binomial floor it rejected none of 200 null pairs at AUROC 0.99 and lost half its power near 1
                lse_test = math.sqrt(v_cl) / (value * (1 - value)) if 0 < value < 1 and v_cl > 0 else math.nan
            rows_pp = g.get("rows_per_patient")
            df = G.cluster_df(rows_pp) if rows_pp is not None else math.inf
            if value is not None and 0 < value < 1 and se > 0:
                lse = se / (value * (1 - value))
                lo, hi = (float(v) for v in expit(logit(value) + np.array([-1, 1]) * G.quantile(plan.ci_level, df)
                                                  * lse))
            n_neg = g["n"] - g["n_positive"]
            reason = None
            if value is None:
                reason = "both classes are needed" if metric == "auroc" else "no positive cases in the group"
            elif g["too_few"]:
                reason, lo, hi = g["too_few"], None, None
            elif not (se > 0 and lse > 0):
                reason = (f"{metric.upper()} of {value:g}: no variance to test with" if value in (0.0, 1.0)
                          else "no variance to test with")
            info.append({**g, "value": value, "ci": (lo, hi), "se": se, "deff": deff, "lse": lse, "df": df,
                         "lse_test": lse_test, "reason": reason})
        testable = [i for i, g in enumerate(info) if g["reason"] is None]
        unit: dict[tuple[int, int], dict] = {}
        for pos, i in enumerate(testable):
            for j in testable[pos + 1:]:
                a, b = info[i], info[j]
                d = a["value"] - b["value"]
                va, vb = a["se"] ** 2, b["se"] ** 2
                df = (G.cluster_df(a["rows_per_patient"], b["rows_per_patient"], va, vb)
                      if a.get("rows_per_patient") is not None and b.get("rows_per_patient") is not None
                      else math.inf)
                test_id = f"{task}|{attr}|{metric}|{a['group']}|{b['group']}"
                deff = None if metric != "auroc" else (va + vb) / (va / a["deff"] + vb / b["deff"])
                if metric == "auroc":
                    # score-type, cube-root scale of 1 − AUROC, floored variances (why:
                    # :func:`..stats.discrimination.auroc_pair_z`)
                    lz = D.auroc_pair_z(a["value"], b["value"], a["point"]["auroc_var"], b["point"]["auroc_var"],
                                        (a["n_positive"], a["n"] - a["n_positive"]),
                                        (b["n_positive"], b["n"] - b["n_positive"]), a["deff"], b["deff"])
                else:
                    # logit-scale z test on the influence variances: on the AP scale the z test was liberal in
                    # small groups (8.6% of null pairs of ~50 rows; 5.5% on the logit scale, docs/methods.md §8)
                    dl = math.log(a["value"] / (1 - a["value"])) - math.log(b["value"] / (1 - b["value"]))
                    lz = dl / math.sqrt(a["lse_test"] ** 2 + b["lse_test"] ** 2)
                p = float(2 * G.tail(-abs(lz), df))
                se = math.sqrt(va + vb)
                q = float(G.quantile(plan.ci_level, df))
                # AUPRC: the gap's interval from the groups' own (logit-scale) intervals, MOVER; the value-scale
                # d ± q·se covered 0.78–0.89 near AP = 1 and with whole patients
                ci = ((d - q * se, d + q * se) if metric == "auroc"
                      else G.mover(a["value"], a["ci"], b["value"], b["ci"]))
                dual = ({"kind": "normal", "centre": d, "se": se, "df": df} if metric == "auroc" else
                        {"kind": "mover", "centre": d, "se": se, "df": df, "a": a["value"], "lse_a": a["lse"],
                         "df_a": a["df"], "b": b["value"], "lse_b": b["lse"], "df_b": b["df"]})
                unit[(i, j)] = {"_dual": dual, "test_id": test_id, "task": task, "attribute": attr, "metric": metric,
                                "kind": "pair", "group": a["group"], "comparison": b["group"], "gap": d,
                                "ci_low": ci[0], "ci_high": ci[1], "p_value": p,
                                "p_equivalence": float(G.tost_p(d, se, plan.margin, df)), "design_effect": deff,
                                "n_boot_valid": None}
        tests.extend(unit.values())
        for i, g in enumerate(info):
            row = {"task": task, "attribute": attr, "group": g["group"], "metric": metric, "n": g["n"],
                   "n_positive": g["n_positive"], "value": g["value"], "value_ci_low": g["ci"][0],
                   "value_ci_high": g["ci"][1], "comparison": None, "comparison_value": None, "gap": None,
                   "ci_low": None, "ci_high": None, "p_value": None, "p_equivalence": None, "design_effect": None,
                   "q_value": None, "q_equivalence": None, "verdict": None,
                   "test_id": None, "test": DISCRIMINATION_TEST_TEXT[metric], "reason": g["reason"]}
            partners = [k for k in testable if k != i]
            if g["reason"] is None and not partners:
                row["reason"] = "no other group has a value that can be tested"
            if g["reason"] is None and partners:
                k = max(partners, key=lambda k: abs(g["value"] - info[k]["value"]))
                t = unit.get((i, k)) or unit[(k, i)]
                sign = 1.0 if (i, k) in unit else -1.0
                lo_, hi_ = (t["ci_low"], t["ci_high"]) if sign > 0 else (-t["ci_high"], -t["ci_low"])
                row.update(comparison=info[k]["group"], comparison_value=info[k]["value"], gap=sign * t["gap"],
                           ci_low=lo_, ci_high=hi_, p_value=t["p_value"], p_equivalence=t["p_equivalence"],
                           design_effect=t["design_effect"], test_id=t["test_id"])
            disc_rows.append(row)


CURVE_DIGITS = 5  # curve points are stored rounded (they are drawn, not computed with); operating points exact


def _points(values, digits: int | None = CURVE_DIGITS) -> list:
    """A JSON-ready list: floats rounded to ``digits`` decimals, None for NaN / ±inf."""
    if not isinstance(values, np.ndarray):  # a few values (reliability bins, one operating point): no numpy needed
        return [None if not math.isfinite(v) else (float(v) if digits is None else round(float(v), digits))
                for v in values]
    a = values.astype(float)
    finite = np.isfinite(a)
    if digits is not None:
        a = np.round(a, digits)
    out = a.tolist()
    if not finite.all():
        out = [v if ok else None for v, ok in zip(out, finite.tolist())]
    return out


def _curve_rows(task, attr, group, values, pos, neg, tau, plan, out):
    """One row per (task, attribute, group, curve); the points are lists (x, y and, where they apply, threshold,
    n and the interval), so that a 57-task audit's curves stay a few MB of JSON."""
    from fairdesk.core.stats import calibration as C

    base = {"task": task, "attribute": attr, "group": group, "threshold": None, "n": None, "ci_low": None,
            "ci_high": None}
    bins = C.reliability_bins(values, pos, neg, plan.ci_level)
    out.append({**base, "curve": "reliability", "x": _points(b["predicted"] for b in bins),
                "y": _points(b["observed"] for b in bins), "n": [int(b["n"]) for b in bins],
                "ci_low": _points(b["ci_low"] for b in bins), "ci_high": _points(b["ci_high"] for b in bins)})
    xs, fit = C.smoothed_curve(values, pos, neg)
    out.append({**base, "curve": "smoothed", "x": _points(xs), "y": _points(fit)})
    d = C.roc_pr(values, pos, neg, tau)
    if d is None:
        return
    for curve in ("roc", "pr"):
        x, v, thr = d[curve]
        out.append({**base, "curve": curve, "x": _points(x), "y": _points(v), "threshold": _points(thr)})
    op = d["operating"]
    out.append({**base, "curve": "operating_roc", "x": _points([op["fpr"]], None), "y": _points([op["tpr"]], None),
                "threshold": [tau]})
    out.append({**base, "curve": "operating_pr", "x": _points([op["recall"]], None),
                "y": _points([op["precision"]], None), "threshold": [tau]})


def _audit_continuous(task, attr, x, y, yhat, patients, cluster, tau, plan, rng, records, bin_rows, warnings,
                      tests, on_block=None):
    for i_req, n_req in enumerate(plan.bins):
        if i_req and on_block is not None:
            on_block(i_req - 1)  # progress: the previous bin count's null is done
        base = {"task": task, "attribute": attr, "group": f"N={n_req}", "metric": "delta_eo", "n": int(len(y)),
                "numerator": None, "denominator": None, "rate": None, "comparison": None, "comparison_rate": None,
                "q_value": None, "significant_bh": None, "favours": None, "threshold": tau,
                "test": ("permutation p with a gamma tail (errors independent of the bins within each class); "
                         f"interval: {plan.ci_level:.0%} permutation null band"),
                "verdict": None, "test_id": None, "p_equivalence": None, "q_equivalence": None}
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
        if k == 1:
            null = np.zeros(1)
            n_valid = plan.n_boot
        elif cluster:  # rows of one patient are not exchangeable: null from the whole-patient bootstrap instead
            boot = _resample_counts(cells, y, patients, 4 * k, plan.n_boot, rng, cluster).reshape(plan.n_boot, k, 4)
            null = centred_bootstrap_null_delta_eo(observed, boot)
            n_valid = int(null.size)
            base["test"] = ("centred whole-patient bootstrap p with a gamma tail; interval: "
                            f"{plan.ci_level:.0%} null band of the centred bootstrap")
        else:
            null = permutation_null_delta_eo(observed, plan.n_permutations, rng)
            n_valid = int(null.size)
        p = 1.0 if k == 1 else tail_p(null, value)
        # The interval shown is the null band: where Δ_eo falls in (ci_level) of data sets whose error rates do
        # not depend on the bins. Δ above the band <=> p < 1 − ci_level, so band and test cannot contradict (an
        # unsigned Δ has a percentile CI that excludes 0 even when nothing differs; METHODS §2).
        band = float(np.quantile(null, plan.ci_level)) if null.size else float("nan")
        test_id = f"{task}|{attr}|delta_eo|N={n_req}"
        records.append({**base, "reason": None, "gap": value, "ci_low": 0.0, "ci_high": band,
                        "p_value": p, "significant": bool(p <= plan.alpha), "n_boot_valid": n_valid, "bins": k,
                        "test_id": test_id})
        tests.append({"_dual": {"kind": "band", "null": null}, "test_id": test_id, "task": task, "attribute": attr,
                      "metric": "delta_eo", "kind": "delta_eo",
                      "group": f"N={n_req}", "comparison": None, "gap": value, "ci_low": 0.0, "ci_high": band,
                      "p_value": p, "p_equivalence": None, "design_effect": None, "n_boot_valid": n_valid})
        tn, fp, fn, tp = observed.T
        for i in range(k):
            bin_rows.append({"task": task, "attribute": attr, "bins_requested": int(n_req), "bins_used": k, "bin": i,
                             "lower": float(edges[i]), "upper": float(edges[i + 1]), "n": int(observed[i].sum()),
                             "n_positive": int(fn[i] + tp[i]), "fpr": float(fp[i] / (fp[i] + tn[i])),
                             "fnr": float(fn[i] / (fn[i] + tp[i]))})

