"""``findings()`` reads whole columns (issue 24: it iterated Arrow-backed pandas rows, a dozen times for every
screen and report, in the GUI's view thread). The rows it gives are exactly those of the row-by-row implementation
it replaced, kept below as the reference (``old_findings``): on the real stored document, on the demo-like audit of
``tests/core/test_comparison_counts.py`` and on generated audits of every gap rule, with and without calibration,
intersections and continuous attributes, both as computed and as read back from their stored JSON."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairdesk.core.audits import groups as G
from fairdesk.core.audits.groups import (DISCRIMINATION_MEASURES, METRICS, RULES, GroupAuditPlan, GroupAuditResult,
                                         findings, run_group_audit)
from fairdesk.core.data.schema import ColumnRoles

DOCUMENTS = Path(__file__).resolve().parents[1] / "data" / "documents"
_COLUMNS = G._COLUMNS


# ---- the reference: the row-by-row implementation before issue 24's view-thread work ---------------------------
def old_findings(result: GroupAuditResult) -> pd.DataFrame:
    """The comparisons of the audit, each once: one row per test of the correction families (``result.tests``),
    shaped like ``records``. This is the one definition of a "comparison": :func:`comparison_counts`, every
    sentence, header and caption count these rows.

    A test shown in a record (max rule: a group's largest-gap pair, shown from both sides as "A vs B" and
    "B vs A") keeps that record, from the side of the group with the lower rate (gap ≤ 0); a pair test shown in no
    record (max rule: pairs that are no group's largest gap) gets a row of its own, from the lower group's side,
    with both groups' rates from their records. Order: rate gaps and error spreads, AUROC / AUPRC gaps (``metric``
    "auroc" / "auprc"), calibration tests (``metric`` "calibration", no ``gap``). An audit stored without its
    ``tests`` table counts the records with a test.
    """
    rec = result.records
    if "test_id" not in rec:
        return rec.iloc[0:0]
    sel = old_lower_side(rec[rec["test_id"].notna()])
    disc = old_discrimination_findings(result)
    tests = result.tests
    tests = tests[tests["p_value"].notna()] if not tests.empty else tests
    unshown = tests[~tests["test_id"].isin(set(sel["test_id"]) | set(disc["test_id"]))
                    & (tests["metric"] != "calibration")] if not tests.empty else tests
    extra_rate = old_unshown_rows(result, unshown[unshown["metric"].isin(METRICS)], rec, "rate")
    d = getattr(result, "discrimination", None)
    if d is None or d.empty:  # stored without its AUROC / AUPRC table: those tests cannot be shown, nor counted
        d = pd.DataFrame(columns=_COLUMNS["discrimination"])
        unshown = unshown[~unshown["metric"].isin(DISCRIMINATION_MEASURES)] if not unshown.empty else unshown
    extra_disc = old_unshown_rows(result, unshown[unshown["metric"].isin(DISCRIMINATION_MEASURES)], d, "value")
    parts = [p for p in (sel, extra_rate, disc, extra_disc, old_calibration_findings(result)) if not p.empty]
    out = (parts[0] if parts else sel) if len(parts) <= 1 else pd.concat(parts, ignore_index=True)
    tst = getattr(result, "tests", None)
    if tst is not None and "outside_region" in tst and not out.empty:  # every finding's region note, by test
        out = out.assign(outside_region=out["test_id"].map(tst.set_index("test_id")["outside_region"]))
    if tst is not None and "family" in tst and not out.empty:  # and its family, by test
        out = out.assign(family=out["test_id"].map(tst.set_index("test_id")["family"]))
    return out


def old_lower_side(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with one row per ``test_id``: the one with gap ≤ 0 when a test is shown from both sides."""
    rows = rows.assign(_up=(rows["gap"].astype(float) > 0).astype(int), _i=np.arange(len(rows)))
    rows = rows.sort_values(["_up", "_i"], kind="stable").drop_duplicates("test_id").sort_values("_i")
    return rows.drop(columns=["_up", "_i"])


def old_unshown_rows(result: GroupAuditResult, tests: pd.DataFrame, values: pd.DataFrame, col: str) -> pd.DataFrame:
    """Pair tests shown in no record as rows shaped like ``records``, from the side of the group with the lower
    value; each group's value (and n, numerator, denominator for rates) from ``values`` (its ``col``)."""
    cols = _COLUMNS["records"]
    if tests.empty:
        return pd.DataFrame(columns=cols)
    look = {(str(r["task"]), str(r["attribute"]), str(r["group"]), str(r["metric"])): r
            for r in values.to_dict(orient="records")}
    alpha = result.plan.alpha
    rows = []
    for t in tests.to_dict(orient="records"):
        gap, lo, hi = t["gap"], t["ci_low"], t["ci_high"]
        group, comp = str(t["group"]), str(t["comparison"])
        if gap is not None and gap > 0:  # told from the lower group's side
            group, comp, gap = comp, group, -gap
            lo, hi = (None if hi is None else -hi), (None if lo is None else -lo)
        key = (str(t["task"]), str(t["attribute"]))
        own, other = look.get(key + (group, str(t["metric"])), {}), look.get(key + (comp, str(t["metric"])), {})
        row = dict.fromkeys(cols)
        row.update({k: t[k] for k in ("task", "attribute", "metric", "p_value", "q_value", "verdict", "test_id",
                                      "p_equivalence", "q_equivalence", "n_boot_valid")})
        row.update(group=group, comparison=comp, gap=gap, ci_low=lo, ci_high=hi, rate=own.get(col),
                   comparison_rate=other.get(col), n=own.get("n"), numerator=own.get("numerator"),
                   denominator=own.get("denominator"), threshold=own.get("threshold"), test=own.get("test"),
                   significant=bool(t["p_value"] <= alpha), significant_bh=t["verdict"] == "differs",
                   favours=None if not gap else comp)
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=cols)


def old_discrimination_findings(result: GroupAuditResult) -> pd.DataFrame:
    """The AUROC / AUPRC pair tests as rows shaped like ``records`` (``rate`` = the group's value), each pair once,
    told from the group with the lower value."""
    disc = getattr(result, "discrimination", None)
    cols = _COLUMNS["records"]
    if disc is None or disc.empty:
        return pd.DataFrame(columns=cols)
    d = old_lower_side(disc[disc["test_id"].notna()])
    alpha = result.plan.alpha
    rows = []
    for r in d.to_dict(orient="records"):
        row = dict.fromkeys(cols)
        gap = r["gap"]
        row.update({k: r[k] for k in ("task", "attribute", "group", "metric", "n", "comparison", "gap", "ci_low",
                                      "ci_high", "p_value", "q_value", "verdict", "test_id", "p_equivalence",
                                      "q_equivalence", "test", "reason")})
        row.update(rate=r["value"], comparison_rate=r["comparison_value"],
                   significant=None if r["p_value"] is None else bool(r["p_value"] <= alpha),
                   significant_bh=r["verdict"] == "differs",
                   favours=None if not gap else (r["group"] if gap > 0 else r["comparison"]))
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=cols)


def old_calibration_findings(result: GroupAuditResult) -> pd.DataFrame:
    """The calibration tests as rows shaped like ``records`` (metric "calibration"; gap, rates and CI empty)."""
    cal = getattr(result, "calibration", None)
    cols = _COLUMNS["records"]
    if cal is None or cal.empty:
        return pd.DataFrame(columns=cols)
    cal = cal[cal["test_id"].notna()]
    rows = []
    alpha = result.plan.alpha
    for r in cal.to_dict(orient="records"):
        row = dict.fromkeys(cols)
        p = r["p_value"]
        row.update(task=r["task"], attribute=r["attribute"], group=r["group"], metric="calibration", n=r["n"],
                   p_value=p, q_value=r["q_value"], significant=None if p is None else bool(p <= alpha),
                   significant_bh=r["verdict"] == "differs", verdict=r["verdict"], test_id=r["test_id"],
                   p_equivalence=r["p_equivalence"], q_equivalence=r["q_equivalence"],
                   test=r.get("test") or CALIBRATION_TEST_TEXT, reason=r["reason"])
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=cols)


# ---- the comparison ----------------------------------------------------------------------------------------------
def same_findings(result: GroupAuditResult) -> int:
    new, old = findings(result), old_findings(result)
    pd.testing.assert_frame_equal(new, old)
    stored = GroupAuditResult.from_dict(json.loads(result.to_json()))  # as the GUI and the reports read it
    pd.testing.assert_frame_equal(findings(stored), old_findings(stored))
    return len(new)


def _table(seed: int, n_a: int, effect: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 60 * n_a
    a = rng.choice([f"A{i}" for i in range(n_a)], n)
    b = rng.choice(["B0", "B1"], n)
    y = rng.random(n) < 0.4
    s = 1 / (1 + np.exp(-(2.0 * (y - 0.4) + rng.normal(0, 1, n) - effect * (a == "A0"))))
    return pd.DataFrame({"y": y.astype(int), "s": s, "a": a, "b": b, "age": rng.uniform(20, 90, n)})


def test_the_stored_document_gives_the_same_findings():
    result = GroupAuditResult.from_dict(json.loads((DOCUMENTS / "groups.json").read_text(encoding="utf-8")))
    assert same_findings(result) > 0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_a=st.integers(2, 4), effect=st.sampled_from([0.0, 2.5]),
       rule=st.sampled_from(RULES), calibration=st.booleans(), intersect=st.booleans(), continuous=st.booleans())
def test_generated_audits_give_the_same_findings(seed, n_a, effect, rule, calibration, intersect, continuous):
    roles = ColumnRoles(label="y", score="s", attributes=("a", "b"),
                        continuous_attributes=("age",) if continuous else ())
    plan = GroupAuditPlan(roles=roles, threshold=0.5, n_boot=100, n_permutations=100, bins=(3,), min_group_size=20,
                          intersections=(("a", "b"),) if intersect else (), gap_rule=rule, calibration=calibration,
                          seed=seed)
    result = run_group_audit(_table(seed, n_a, effect), plan)
    n = same_findings(result)
    assert n == int(result.tests["p_value"].notna().sum())  # each test once


def test_a_max_rule_audit_with_pairs_in_no_record_gives_the_same_findings():
    """Four groups under the max rule: pairs that are no group's largest gap get rows of their own (the rows the
    old code built one by one), with AUROC / AUPRC and calibration tests."""
    roles = ColumnRoles(label="y", score="s", attributes=("a",))
    result = run_group_audit(_table(7, 4, 2.5), GroupAuditPlan(roles=roles, threshold=0.5, n_boot=100,
                                                                n_permutations=100, min_group_size=20, seed=7))
    f = findings(result)
    unshown = ~f["test_id"].isin(set(result.records["test_id"].dropna()))
    assert (unshown & f["metric"].isin(METRICS)).any() and f["metric"].isin(DISCRIMINATION_MEASURES).any()
    assert (f["metric"] == "calibration").any()
    same_findings(result)


def test_the_board_summary_alone_is_the_reports_first_section():
    """The GUI's findings header builds only the summary section (``board_summary``): the same section the full
    report tree holds, for every small-cell k."""
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.groups import board_summary, report_tree

    doc = json.loads((DOCUMENTS / "groups.json").read_text(encoding="utf-8"))
    for k in (1, 11, 1000):
        full = report_tree(doc, ReportSettings(k)).section("board")
        assert board_summary(GroupAuditResult.from_dict(doc), k) == full


def test_findings_are_computed_once_per_result_and_each_caller_gets_its_own_copy(monkeypatch):
    result = GroupAuditResult.from_dict(json.loads((DOCUMENTS / "groups.json").read_text(encoding="utf-8")))
    calls = []
    from fairdesk.core.audits import group_records  # where findings() finds _findings

    real = group_records._findings
    monkeypatch.setattr(group_records, "_findings", lambda r: calls.append(1) or real(r))
    first = findings(result)
    first["gap"] = 99.0  # a caller changing its copy changes nobody else's
    G.comparison_counts(result)
    again = findings(result)
    assert len(calls) == 1 and not (again["gap"] == 99.0).any()
    pd.testing.assert_frame_equal(again, old_findings(result))
    result.records = result.records.iloc[:3]  # another table: computed anew
    pd.testing.assert_frame_equal(findings(result), old_findings(result))
    assert len(calls) == 2
