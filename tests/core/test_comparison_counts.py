"""Issue 24 item 2: one count of "comparisons" everywhere. The board summary (PDF report tree, the screen's findings
text) and the JSON summary of group audits with intersections, continuous attributes, calibration and AUROC/AUPRC
tests and dropped groups add up: comparisons = differ + equivalent + inconclusive = the tests listed per kind = the
tests of the JSON's ``tests`` table; and "largest gaps first" is sorted by the absolute gap."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairdesk.core.audits.groups import (COMPARISON_FAMILIES, RULES, GroupAuditPlan, GroupAuditResult,
                                         comparison_counts, run_group_audit, verdict_counts)
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.reports.groups import build_group_report
from fairdesk.gui.widgets.findings import counts_html, section_html

WORD = {"one": 1, "no": 0}


def _n(text: str) -> int:
    return WORD.get(text, None) if text in WORD else int(text.replace(",", ""))


def _table(seed: int, n_a: int, n_b: int, tasks: int, tiny: bool, effect: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for t in range(tasks):
        n = 70 * n_a
        a = rng.choice([f"A{i}" for i in range(n_a)], n)
        b = rng.choice([f"B{i}" for i in range(n_b)], n)
        age = rng.uniform(20, 90, n)
        y = rng.random(n) < 0.4
        shift = effect * (a == "A0")
        s = 1 / (1 + np.exp(-(2.0 * (y - 0.4) + rng.normal(0, 1, n) - shift)))
        parts.append(pd.DataFrame({"y": y.astype(int), "s": s, "a": a, "b": b, "age": age, "task": f"T{t}"}))
        if tiny:  # a group too small to test: dropped, listed in the report
            parts.append(pd.DataFrame({"y": [0, 1, 1], "s": [0.3, 0.7, 0.6], "a": "tiny", "b": "B0",
                                       "age": [30.0, 40.0, 50.0], "task": f"T{t}"}))
    return pd.concat(parts, ignore_index=True)


def _tests_per_kind(result: GroupAuditResult) -> dict[str, int]:
    """The tests of the JSON's ``tests`` table by kind, counted straight from the table."""
    t = result.tests[result.tests["p_value"].notna()]
    return {key: int(t["metric"].isin(metrics).sum()) for key, (metrics, *_) in COMPARISON_FAMILIES.items()}


def _check_board(result: GroupAuditResult) -> None:
    doc = result.to_dict()
    per_kind = _tests_per_kind(result)
    n_tests = sum(per_kind.values())
    summary = build_group_report(result).section("summary")
    text = " ".join(b.text for b in summary.blocks if type(b).__name__ == "Paragraph")
    m = re.search(r"Of ([\d,]+|one) comparisons? made .*?, ([\d,]+) differs?, ([\d,]+) (?:is|are) equivalent "
                  r"within ±[\d.]+ and ([\d,]+) (?:is|are) inconclusive", text)
    assert m, text
    total, differs, equivalent, inconclusive = (_n(g) for g in m.groups())
    assert total == differs + equivalent + inconclusive
    assert total == n_tests, (total, per_kind)  # a comparison is a test of the JSON's tests table
    # the tests per kind, each named
    listed = re.search(r"Each comparison is one test: (.*?)\.(?: |$)", text)
    assert listed, text
    numbers = [int(x.replace(",", "")) for x in re.findall(r"(?:^|, | and )([\d,]+) ", listed.group(1))]
    assert sum(numbers) == total
    assert sorted(numbers) == sorted(v for v in per_kind.values() if v)
    for key, (_, one, many) in COMPARISON_FAMILIES.items():
        if per_kind[key]:
            assert f"{per_kind[key]:,} {one if per_kind[key] == 1 else many}" in listed.group(1)
    # gaps and calibration said apart: they add up too
    split = re.search(r"These are ([\d,]+|one) comparisons? between groups \((.*?)\) and ([\d,]+|one) calibration "
                      r"checks? of the risk score, one per group \(([\d,]+) miscalibrated, ([\d,]+) calibrated "
                      r"within the margins, ([\d,]+) inconclusive", text)
    if per_kind["calibration"]:
        assert split, text
        n_gaps, inner, n_cal = _n(split.group(1)), split.group(2), _n(split.group(3))
        assert n_gaps + n_cal == total and n_cal == per_kind["calibration"]
        assert sum(int(x) for x in split.groups()[3:]) == n_cal
        verdicts = re.search(r"([\d,]+) differs?, ([\d,]+) equivalent, ([\d,]+) inconclusive$", inner)
        assert verdicts and sum(int(x) for x in verdicts.groups()) == n_gaps, inner
        kinds = re.match(r"([\d,]+) of rates at the threshold(?:, ([\d,]+) of AUROC or AUPRC)?(?:, ([\d,]+) of the "
                         r"error spread)?;", inner)
        if kinds:
            assert sum(int(x) for x in kinds.groups() if x) == n_gaps
            assert int(kinds.group(1)) == per_kind["rate_gaps"]
    # the JSON summary and the screen tell the same numbers
    assert {k: doc["comparisons"][k] for k in ("total", "differs", "equivalent", "inconclusive")} == \
        {"total": total, "differs": differs, "equivalent": equivalent, "inconclusive": inconclusive}
    assert doc["comparisons"]["rows"] == len(result.records)
    assert {k: v["tests"] for k, v in doc["comparisons"]["families"].items()} == \
        {k: v for k, v in per_kind.items() if v}
    screen_counts = verdict_counts(GroupAuditResult.from_dict(doc))
    head = re.sub(r"<[^>]+>", "", counts_html(screen_counts))
    assert head.startswith(f"Of {total:,} comparison" if total != 1 else "Of 1 comparison"), head
    screen = re.sub(r"<[^>]+>", " ", section_html(summary))
    assert m.group(0).split(" made")[0] in screen
    # "largest gaps first": the listed differences are sorted by their absolute gap (error spreads, on another
    # scale, and fragile findings after them)
    sentences = [b.text for b in summary.blocks if type(b).__name__ == "Paragraph" and b.style == "finding"
                 and " is " in b.text and "Caution: few cases" not in b.text and "error rates" not in b.text
                 and not b.text.startswith("Calibration")]
    gaps = [float(re.search(r" is (\d+\.\d+) (?:lower|higher)", s).group(1)) for s in sentences
            if re.search(r" is (\d+\.\d+) (?:lower|higher)", s)]
    assert gaps == sorted(gaps, reverse=True), gaps


plans = st.fixed_dictionaries({
    "seed": st.integers(0, 10_000), "n_a": st.integers(2, 4), "n_b": st.integers(2, 3), "tasks": st.integers(1, 2),
    "tiny": st.booleans(), "effect": st.sampled_from([0.0, 1.5, 3.0]), "intersect": st.booleans(),
    "continuous": st.booleans(), "calibration": st.booleans(), "rule": st.sampled_from(RULES),
    "own": st.booleans(), "family": st.sampled_from(["audit", "task"]),
})


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans)
def test_board_summary_counts_add_up(p):
    df = _table(p["seed"], p["n_a"], p["n_b"], p["tasks"], p["tiny"], p["effect"])
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("a", "b"),
                        continuous_attributes=("age",) if p["continuous"] else ())
    plan = GroupAuditPlan(roles=roles, threshold=0.5, n_boot=100, n_permutations=100, bins=(3,), min_group_size=20,
                          intersections=(("a", "b"),) if p["intersect"] else (), gap_rule=p["rule"],
                          calibration=p["calibration"], calibration_own_family=p["own"], family=p["family"],
                          seed=p["seed"])
    result = run_group_audit(df, plan)
    _check_board(result)


def test_reviewer_audit_adds_up():
    """The reviewer's case, fixed: three groups (the max rule shows only each group's largest pair), a continuous
    attribute, calibration and AUROC tests, a dropped group."""
    df = _table(3, 3, 2, 1, True, 3.0)
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("a", "b"), continuous_attributes=("age",))
    result = run_group_audit(df, GroupAuditPlan(roles=roles, threshold=0.5, n_boot=100, n_permutations=100, bins=(3,),
                                                min_group_size=20, intersections=(("a", "b"),)))
    assert not result.dropped.empty and (result.tests["metric"] == "calibration").any()
    assert result.tests["metric"].isin(["auroc", "auprc"]).any() and (result.tests["metric"] == "delta_eo").any()
    _check_board(result)
    c = comparison_counts(result)
    assert c["total"] == sum(f["tests"] for f in c["families"].values())


def _counts_table(counts: dict[str, tuple[int, int, int, int]]) -> pd.DataFrame:
    """Rows realising confusion counts {group: (TN, FP, FN, TP)} (score 0.8 for ŷ = 1, 0.2 for ŷ = 0)."""
    parts = []
    for group, (tn, fp, fn, tp) in counts.items():
        parts.append(pd.DataFrame({"y": [0] * (tn + fp) + [1] * (fn + tp),
                                   "s": [0.2] * tn + [0.8] * fp + [0.2] * fn + [0.8] * tp, "a": group}))
    return pd.concat(parts, ignore_index=True)


def test_gap_plot_draws_each_pair_once_and_says_not_tested():
    """Max rule, three groups: "F vs M" and "M vs F" are one test, drawn once (the mirror in the tooltip); a recall
    on 6 positives (fewer than min_denominator) is "not tested: …", a recall on no positive case "not estimable"."""
    from fairdesk.core.reports.figures import forest_data

    df = _counts_table({"F": (60, 10, 30, 20), "M": (60, 10, 5, 45), "X": (60, 10, 20, 30), "few": (60, 10, 2, 4),
                        "none": (60, 10, 0, 0)})
    result = run_group_audit(df, GroupAuditPlan(roles=ColumnRoles(label="y", score="s", attributes=("a",)), threshold=0.5,
                                                n_boot=100, min_group_size=20, calibration=False))
    fd = forest_data(result, "a", "recall")
    drawn = fd[fd["estimable"]]
    pairs = [frozenset(label.split(" vs ")) for label in drawn["label"]]
    assert len(pairs) == len(set(pairs))  # each pair once
    n_tests = int(((result.tests["metric"] == "recall") & result.tests["test_id"].isin(
        result.records.loc[result.records["metric"] == "recall", "test_id"])).sum())
    assert len(drawn) == n_tests
    assert drawn["tooltip"].str.contains("the same test as").any()
    tip = dict(zip(fd["group"], fd["tooltip"]))
    assert "not tested: only 6 positive cases (fewer than 10)" in tip["few"] and "not estimable" not in tip["few"]
    assert "gap not estimable (no positive cases in the group)" in tip["none"]
    tables = [b for s in build_group_report(result).sections for b in s.blocks if type(b).__name__ == "Table"
              and b.title == "Gap results: a"]
    cells = [row[6] for row in tables[0].rows if row[1] in ("few", "none") and row[2] == "Recall"]
    assert cells and any(c.startswith("not tested") for c in cells) and any(c.startswith("not estimable")
                                                                          for c in cells), cells
