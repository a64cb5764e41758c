"""The group audit's document: :class:`GroupAuditResult` (its tables, and the stored JSON read back, from
every earlier version), and what the screens and reports read from it — the comparisons, each once
(:func:`findings`), counted once (:func:`comparison_counts`), and the per-group summary (:func:`summarise`)."""
from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core.audits.group_plan import (CALIBRATION_MEASURES, CALIBRATION_TEST_TEXT, DISCRIMINATION_MEASURES,
                                             METRICS, VERDICTS, GroupAuditPlan, plan_summary)
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import yield_point


TABLES = ("records", "groups", "summary", "dropped", "delta_bins", "tests", "calibration", "discrimination",
          "curves")


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
    tests: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["tests"]))
    # every test of the correction family (each pair once), with its family, q-values and verdict
    calibration: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["calibration"]))
    # per (task, attribute, tested group): calibration numbers with their CIs, the joint test and its verdict
    discrimination: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["discrimination"]))
    # per (task, attribute, tested group, measure auroc | auprc): value with its CI, the largest-gap pair, its test
    curves: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["curves"]))
    # per (task, attribute, tested group): ROC, PR, reliability and smoothed points, and the operating point

    def to_dict(self) -> dict:
        out = {"plan": {**self.plan.to_dict(), **plan_summary(self)}, "thresholds": self.thresholds, "provenance": self.provenance,
               "warnings": list(self.warnings)}
        for name in TABLES:
            out[name] = getattr(self, name).to_dict(orient="records")
        out["comparisons"] = comparison_counts(self)  # the counts every screen and report tells (read, never stored back)
        return jsonable(out)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict) -> "GroupAuditResult":
        tables = {}
        for name in TABLES:  # (a GUI reader lets the Qt thread go first between tables)
            tables[name] = pd.DataFrame.from_records(d.get(name) or [], columns=_COLUMNS[name])
            yield_point()
        rec = tables["records"]
        if d.get("records") and "verdict" not in d["records"][0]:
            # stored by an earlier version: no equivalence test was run, so a gap not significant is inconclusive
            rec["verdict"] = rec["significant_bh"].map(
                lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                else ("differs" if bool(v) else "inconclusive"))
            rec["test_id"] = [f"legacy-{i}" if v is not None else None for i, v in enumerate(rec["verdict"])]
        for name in ("records", "tests", "discrimination"):  # stored before intervals were adjusted
            t = tables[name]
            if d.get(name) and "ci_low_unadjusted" not in d[name][0] and "ci_low" in t:
                t["ci_low_unadjusted"], t["ci_high_unadjusted"] = t["ci_low"], t["ci_high"]
        tst = tables["tests"]
        if d.get("tests") and "family" not in d["tests"][0]:
            tst["family"] = tst["family_key"]
        warnings = list(d.get("warnings", []))
        if any("n_boot_valid" in (d.get(t) or [{}])[0] for t in ("calibration", "discrimination")) \
                and BOOTSTRAP_INTERVALS_WARNING not in warnings:
            # stored before 2026-11-25: the §8 intervals came from a bootstrap of each group's rows, which the
            # report must say instead of the closed form it describes now (the numbers are kept as stored)
            warnings.append(BOOTSTRAP_INTERVALS_WARNING)
        plan = GroupAuditPlan.from_dict(d["plan"])
        if plan.ignored:
            warnings.append(f"This audit was stored by a newer FairDesk: its plan holds settings this version does "
                            f"not know ({', '.join(plan.ignored)}), which are kept in the project and ignored here.")
        return cls(plan=plan, thresholds=d["thresholds"], provenance=d["provenance"], warnings=warnings, **tables)

    @classmethod
    def from_json(cls, text: str) -> "GroupAuditResult":
        return cls.from_dict(json.loads(text))


BOOTSTRAP_INTERVALS_WARNING = (
    "Stored by an earlier FairDesk: this audit's calibration and discrimination intervals come from a bootstrap of "
    "each group's rows (percentile intervals; AUPRC tests with bootstrap standard deviations), not from the "
    "closed form used now. Run the audit again for intervals made the current way.")


_COLUMNS = {
    "records": ["task", "attribute", "group", "metric", "n", "numerator", "denominator", "rate", "reason",
                "comparison", "comparison_rate", "gap", "ci_low", "ci_high", "p_value", "q_value", "significant",
                "significant_bh", "favours", "n_boot_valid", "threshold", "bins", "test", "verdict", "test_id",
                "p_equivalence", "q_equivalence", "outside_region", "family", "ci_low_unadjusted",
                "ci_high_unadjusted"],
    "groups": ["task", "attribute", "group", "n", "n_patients", "n_positive", "prevalence", "auroc", "auprc",
               "tn", "fp", "fn", "tp", "tested", "reason"],
    "summary": ["attribute", "group", "metric", "n_tasks", "n_significant", "share_favouring",
                "n_significant_bh", "share_favouring_bh", "n_differs", "n_equivalent", "n_inconclusive"],
    "dropped": ["task", "attribute", "group", "n", "reason"],
    "delta_bins": ["task", "attribute", "bins_requested", "bins_used", "bin", "lower", "upper", "n",
                   "n_positive", "fpr", "fnr"],
    "tests": ["test_id", "task", "attribute", "metric", "kind", "group", "comparison", "gap", "ci_low", "ci_high",
              "p_value", "p_equivalence", "design_effect", "n_boot_valid", "family_key", "q_value",
              "q_equivalence", "verdict", "outside_region", "family", "ci_low_unadjusted", "ci_high_unadjusted"],
    "calibration": ["task", "attribute", "group", "n", "n_positive"]
                   + [f"{m}{suffix}" for m in CALIBRATION_MEASURES for suffix in ("", "_ci_low", "_ci_high")]
                   + ["test", "lr_stat", "p_value", "p_equivalence", "design_effect", "q_value",
                      "q_equivalence", "verdict", "test_id", "reason", "family"],
    "discrimination": ["task", "attribute", "group", "metric", "n", "n_positive", "value", "value_ci_low",
                       "value_ci_high", "comparison", "comparison_value", "gap", "ci_low", "ci_high", "p_value",
                       "p_equivalence", "design_effect", "q_value", "q_equivalence", "verdict", "test_id", "test",
                       "reason", "family", "ci_low_unadjusted", "ci_high_unadjusted"],
    "curves": ["task", "attribute", "group", "curve", "x", "y", "threshold", "n", "ci_low", "ci_high"],
}


def summarise(rec: pd.DataFrame) -> pd.DataFrame:
    """001 Table 4: per attribute × group × measure, the tasks tested, how many have a significant gap before and
    after the audit's correction (``n_significant_bh`` = ``n_differs``) with the share favouring the group, and how
    many are "equivalent" and "inconclusive". Counts are per group row (a pair shown in two rows counts for both
    groups here; :func:`findings` counts unique comparisons)."""
    rows = []
    gaps = rec[rec["metric"] != "delta_eo"] if not rec.empty else rec
    for (attr, group, metric), sub in gaps.groupby(["attribute", "group", "metric"], sort=False):
        tested = sub[sub["verdict"].notna()] if "verdict" in sub else sub[sub["gap"].notna()]
        row = {"attribute": attr, "group": group, "metric": metric, "n_tasks": int(len(tested))}
        for col, suffix in (("significant", ""), ("significant_bh", "_bh")):
            sig = tested[tested[col] == True]  # noqa: E712 (object column with None)
            row[f"n_significant{suffix}"] = int(len(sig))
            row[f"share_favouring{suffix}"] = (float((sig["favours"] == group).mean()) if len(sig) else None)
        for v in VERDICTS:
            row[f"n_{v}"] = int((tested["verdict"] == v).sum()) if "verdict" in tested else 0
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=_COLUMNS["summary"])


def findings(result: GroupAuditResult) -> pd.DataFrame:
    """The comparisons of the audit, each once: one row per test of the correction families (``result.tests``),
    shaped like ``records``. This is the one definition of a "comparison": :func:`comparison_counts`, every
    sentence, header and caption count these rows.

    A test shown in a record (max rule: a group's largest-gap pair, shown from both sides as "A vs B" and
    "B vs A") keeps that record, from the side of the group with the lower rate (gap ≤ 0); a pair test shown in no
    record (max rule: pairs that are no group's largest gap) gets a row of its own, from the lower group's side,
    with both groups' rates from their records. Order: rate gaps and error spreads, AUROC / AUPRC gaps (``metric``
    "auroc" / "auprc"), calibration tests (``metric`` "calibration", no ``gap``). An audit stored without its
    ``tests`` table counts the records with a test.

    Computed once per result and kept on it while the tables it reads (records, tests, discrimination,
    calibration) are the same objects and alpha is the same; each call returns a copy. The report and the screens
    ask for it a dozen times per audit shown (every count and sentence of the board summary), which made it most
    of the GUI's view-thread time. A result's tables are never changed in place once it is made (every result is
    built whole: :func:`run_group_audit`, :meth:`GroupAuditResult.from_dict`, ``dataclasses.replace``).
    """
    return kept_findings(result).copy()


def kept_findings(result: GroupAuditResult) -> pd.DataFrame:
    """:func:`findings` as kept on ``result``, not copied: shared, so read it and never change it (the board
    summary reads it for each kind of sentence)."""
    tables = tuple(getattr(result, name, None) for name in ("records", "tests", "discrimination", "calibration"))
    memo = getattr(result, "__dict__", {}).get("_findings_memo")
    if memo is not None and memo[1] == result.plan.alpha and all(a is b for a, b in zip(memo[0], tables)):
        return memo[2]
    out = _findings(result)
    if hasattr(result, "__dict__"):
        result.__dict__["_findings_memo"] = (tables, result.plan.alpha, out)
    return out


def _findings(result: GroupAuditResult) -> pd.DataFrame:
    rec = result.records
    if "test_id" not in rec:
        return rec.iloc[0:0]
    sel = _lower_side(rec, rec["test_id"].notna().to_numpy())
    disc = discrimination_findings(result)
    d = getattr(result, "discrimination", None)
    if d is None or d.empty:  # stored without its AUROC / AUPRC table: those tests cannot be shown, nor counted
        d = pd.DataFrame(columns=_COLUMNS["discrimination"])
    # the tests shown in no row, each kind's taken once (selections of the tests table in steps, and ``isin`` on
    # its Arrow-backed text, were a fifth of this function's time)
    tests, rate_pos, disc_pos = result.tests, [], []
    if not tests.empty:
        shown = set(sel["test_id"].tolist()) | set(disc["test_id"].tolist())
        kinds = {**dict.fromkeys(METRICS, rate_pos), **dict.fromkeys(DISCRIMINATION_MEASURES if not d.empty else (),
                                                                        disc_pos)}
        for i, (tid, metric, tested) in enumerate(zip(tests["test_id"].tolist(), tests["metric"].tolist(),
                                                      tests["p_value"].notna().to_numpy())):
            if tested and tid not in shown and metric in kinds:
                kinds[metric].append(i)
    extra_rate = _unshown_rows(result, tests.iloc[rate_pos], rec, "rate")
    extra_disc = _unshown_rows(result, tests.iloc[disc_pos], d, "value")
    parts = [p for p in (sel, extra_rate, disc, extra_disc, calibration_findings(result)) if not p.empty]
    out = (parts[0] if parts else sel) if len(parts) <= 1 else pd.concat(parts, ignore_index=True)
    tst = getattr(result, "tests", None)
    if tst is not None and "outside_region" in tst and not out.empty:  # every finding's region note, by test
        out = out.assign(outside_region=out["test_id"].map(tst.set_index("test_id")["outside_region"]))
    if tst is not None and "family" in tst and not out.empty:  # and the family it was corrected in
        out = out.assign(family=out["test_id"].map(tst.set_index("test_id")["family"]))
    return out


def _lower_side(frame: pd.DataFrame, where: np.ndarray) -> pd.DataFrame:
    """The rows of ``frame`` where ``where`` (booleans) is true, one per ``test_id``: the one with gap ≤ 0 when a
    test is shown from both sides (else the first), in the frame's order. The rows to keep are found on two columns
    and taken once (selecting, sorting and de-duplicating the whole wide frame took four copies of it)."""
    pos = np.flatnonzero(where)
    up = (frame["gap"].astype(float) > 0).to_numpy()[pos]
    ids = frame["test_id"].tolist()
    keep: dict = {}  # test_id -> position of its row kept
    for j in np.lexsort((np.arange(len(pos)), up)):  # gap ≤ 0 first, then in the rows' order
        keep.setdefault(ids[pos[j]], int(pos[j]))
    return frame.iloc[sorted(keep.values())]


def _columns(frame: pd.DataFrame, names) -> dict[str, list]:
    """The named columns of ``frame`` as lists of Python values (the values ``to_dict(orient="records")`` gives), read
    a column at a time: reading pandas' Arrow-backed string columns row by row cost tens of µs a cell, and the
    findings of the demo's audit were read that way a dozen times for every screen and report."""
    return {c: frame[c].tolist() for c in names}


def _is_none(values: list) -> np.ndarray:
    """Which of ``values`` are None (a missing value stored as null; NaN is not None, as in the rows it came from)."""
    return np.fromiter((v is None for v in values), dtype=bool, count=len(values))


def _record_frame(columns: dict, n: int) -> pd.DataFrame:
    """Rows shaped like ``records`` from whole columns (lists or arrays of ``n`` values; a column not given is
    empty). Every column is given to pandas as a list of Python values, so each gets the dtype the rows built one
    at a time got (bool, float, text, or object where a value is missing)."""
    cols = _COLUMNS["records"]
    return pd.DataFrame({c: np.asarray(columns[c], dtype=object).tolist() if c in columns else [None] * n
                         for c in cols}, columns=cols)


def _unshown_rows(result: GroupAuditResult, tests: pd.DataFrame, values: pd.DataFrame, col: str) -> pd.DataFrame:
    """Pair tests shown in no record as rows shaped like ``records``, from the side of the group with the lower
    value; each group's value (and n, numerator, denominator for rates) from ``values`` (its ``col``)."""
    if tests.empty:
        return pd.DataFrame(columns=_COLUMNS["records"])
    t = _columns(tests, ("task", "attribute", "metric", "group", "comparison", "p_value", "q_value", "verdict",
                         "test_id", "p_equivalence", "q_equivalence", "n_boot_valid"))
    gap, lo, hi = (tests[c].astype(float).to_numpy() for c in ("gap", "ci_low", "ci_high"))
    no_gap = _is_none(tests["gap"].tolist())
    flip = gap > 0  # told from the lower group's side
    group, comp = (np.array(list(map(str, t[c])), dtype=object) for c in ("group", "comparison"))
    group, comp = np.where(flip, comp, group), np.where(flip, group, comp)
    gap, lo, hi = np.where(flip, -gap, gap), np.where(flip, -hi, lo), np.where(flip, -lo, hi)
    # each group's row of ``values`` by (task, attribute, group, metric) as text, the last row of a key winning
    v = _columns(values, ("task", "attribute", "group", "metric"))
    look = dict(zip(zip(map(str, v["task"]), map(str, v["attribute"]), map(str, v["group"]), map(str, v["metric"])),
                    range(len(values))))
    key = list(zip(map(str, t["task"]), map(str, t["attribute"])))
    metric = list(map(str, t["metric"]))
    own = [look.get(k + (g, m)) for k, g, m in zip(key, group, metric)]
    other = [look.get(k + (c, m)) for k, c, m in zip(key, comp, metric)]
    table = _columns(values, [c for c in (col, "n", "numerator", "denominator", "threshold", "test") if c in values])

    def pick(c: str, rows: list) -> list:  # a group without a row (or a column not there): None
        vals = table.get(c)
        return [None if i is None or vals is None else vals[i] for i in rows]

    n = len(tests)
    out = {k: t[k] for k in ("task", "attribute", "metric", "p_value", "q_value", "verdict", "test_id",
                             "p_equivalence", "q_equivalence", "n_boot_valid")}
    out.update(group=group, comparison=comp, gap=gap, ci_low=lo, ci_high=hi,
               rate=pick(col, own), comparison_rate=pick(col, other),
               significant=(tests["p_value"].astype(float) <= result.plan.alpha).to_numpy(),
               significant_bh=(tests["verdict"] == "differs").fillna(False).to_numpy(dtype=bool),
               favours=np.where((gap == 0) | no_gap, None, comp))
    for c in ("n", "numerator", "denominator", "threshold", "test"):
        out[c] = pick(c, own)
    return _record_frame(out, n)


def discrimination_findings(result: GroupAuditResult) -> pd.DataFrame:
    """The AUROC / AUPRC pair tests as rows shaped like ``records`` (``rate`` = the group's value), each pair once,
    told from the group with the lower value."""
    disc = getattr(result, "discrimination", None)
    if disc is None or disc.empty:
        return pd.DataFrame(columns=_COLUMNS["records"])
    d = _lower_side(disc, disc["test_id"].notna().to_numpy())
    r = _columns(d, ("task", "attribute", "group", "metric", "n", "comparison", "gap", "ci_low", "ci_high",
                     "p_value", "q_value", "verdict", "test_id", "p_equivalence", "q_equivalence", "test", "reason",
                     "value", "comparison_value"))
    gap = d["gap"].astype(float).to_numpy()
    p = d["p_value"].astype(float).to_numpy()
    out = {k: r[k] for k in ("task", "attribute", "group", "metric", "n", "comparison", "gap", "ci_low", "ci_high",
                             "p_value", "q_value", "verdict", "test_id", "p_equivalence", "q_equivalence", "test",
                             "reason")}
    out.update(rate=r["value"], comparison_rate=r["comparison_value"],
               significant=np.where(_is_none(r["p_value"]), None, p <= result.plan.alpha),
               significant_bh=(d["verdict"] == "differs").fillna(False).to_numpy(dtype=bool),
               favours=np.where((gap == 0) | _is_none(r["gap"]), None,
                                np.where(gap > 0, np.array(r["group"], dtype=object),
                                         np.array(r["comparison"], dtype=object))))
    return _record_frame(out, len(d))


def calibration_findings(result: GroupAuditResult) -> pd.DataFrame:
    """The calibration tests as rows shaped like ``records`` (metric "calibration"; gap, rates and CI empty)."""
    cal = getattr(result, "calibration", None)
    if cal is None or cal.empty:
        return pd.DataFrame(columns=_COLUMNS["records"])
    cal = cal[cal["test_id"].notna()]
    r = _columns(cal, ("task", "attribute", "group", "n", "p_value", "q_value", "verdict", "test_id",
                       "p_equivalence", "q_equivalence", "reason"))
    p = cal["p_value"].astype(float).to_numpy()
    n = len(cal)
    out = {k: r[k] for k in r}
    out.update(metric=["calibration"] * n,
               significant=np.where(_is_none(r["p_value"]), None, p <= result.plan.alpha),
               significant_bh=(cal["verdict"] == "differs").fillna(False).to_numpy(dtype=bool),
               test=[x or CALIBRATION_TEST_TEXT for x in (cal["test"].tolist() if "test" in cal else [None] * n)])
    return _record_frame(out, n)


COMPARISON_FAMILIES = {
    # key: (metrics, one test, many tests) — the kinds of comparison of a group audit, in the order they are told
    "rate_gaps": (METRICS, "test of a rate gap between groups", "tests of rate gaps between groups"),
    "discrimination": (DISCRIMINATION_MEASURES, "test of an AUROC or AUPRC gap between groups",
                       "tests of AUROC or AUPRC gaps between groups"),
    "error_spread": (("delta_eo",), "test of the error spread over a continuous attribute",
                     "tests of the error spread over a continuous attribute"),
    "calibration": (("calibration",), "calibration test of one group", "calibration tests, one per group"),
}


def comparison_counts(result: GroupAuditResult) -> dict:
    """What a "comparison" is, counted once for every screen, sentence, table caption and JSON summary: one test of
    the correction families (:func:`findings`, each test once, a pair shown in two rows once, a pair shown in no
    row included). Returns ``differs``, ``equivalent``, ``inconclusive``, ``total`` (their sum), ``rows`` (the
    result rows, ``records``: never comparisons) and ``families``: per kind of comparison (keys of
    :data:`COMPARISON_FAMILIES`, only those with a test) its ``label`` (what the tests are), ``tests`` and the three
    verdict counts, which add up to the totals."""
    f = kept_findings(result)
    memo = getattr(result, "__dict__", {}).get("_counts_memo")
    if memo is not None and memo[0] is f:  # counted once per findings frame (the board summary asks a dozen times)
        return copy.deepcopy(memo[1])
    out = _counts(result, f)
    if hasattr(result, "__dict__"):
        result.__dict__["_counts_memo"] = (f, copy.deepcopy(out))
    return out


def _counts(result: GroupAuditResult, f: pd.DataFrame) -> dict:
    metric = np.array(list(map(str, f["metric"])), dtype=object) if not f.empty else np.array([], dtype=object)
    verdict = {v: (f["verdict"] == v).fillna(False).to_numpy(dtype=bool) if not f.empty
               else np.zeros(0, dtype=bool) for v in VERDICTS}
    out: dict = {v: int(verdict[v].sum()) for v in VERDICTS}
    out["total"] = sum(out[v] for v in VERDICTS)
    out["rows"] = int(len(result.records))
    fams = {}
    for key, (metrics, one, many) in COMPARISON_FAMILIES.items():
        family = np.isin(metric, list(metrics))
        c = {v: int((verdict[v] & family).sum()) for v in VERDICTS}
        c["tests"] = sum(c.values())
        if c["tests"]:
            fams[key] = {"label": one if c["tests"] == 1 else many, **c}
    out["families"] = fams
    return out


def tests_text(counts: dict) -> str:
    """The tests per kind in words, from :func:`comparison_counts`: "20 tests of rate gaps between groups and 2
    tests of the error spread over a continuous attribute"."""
    parts = [f"{c['tests']:,} {c['label']}" for c in counts["families"].values()]
    if not parts:
        return "no test"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def verdict_counts(result: GroupAuditResult, metric: str | None = None) -> dict[str, int]:
    """The comparisons of :func:`comparison_counts` by verdict: ``differs``, ``equivalent``, ``inconclusive``,
    ``total`` and ``tests`` (the same number: a comparison is a test). ``metric``: "gaps" for the rate and
    AUROC/AUPRC gaps, "discrimination" for the AUROC/AUPRC gaps only, "delta_eo" for the error spreads only,
    "calibration" for the calibration tests only, None for all."""
    c = comparison_counts(result)
    keys = {None: tuple(COMPARISON_FAMILIES), "gaps": ("rate_gaps", "discrimination"),
            "discrimination": ("discrimination",), "delta_eo": ("error_spread",),
            "calibration": ("calibration",)}[metric]
    out = {v: sum(c["families"].get(k, {}).get(v, 0) for k in keys) for v in VERDICTS}
    out["total"] = out["tests"] = sum(out.values())
    return out

