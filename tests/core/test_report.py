"""Report model, figure data and PDF rendering of a group audit (fairdesk.core.reports)."""
from __future__ import annotations

import dataclasses
import io
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fairdesk.core import numbers
from fairdesk.core.audits.groups import RULE_TEXT, GroupAuditPlan, GroupAuditResult, run_group_audit
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.reports import figures as F
from fairdesk.core.reports import groups as G
from fairdesk.core.reports import pdf as P
from fairdesk.core.reports.document import Paragraph, suppress_text
from fairdesk.core.reports.groups import build_group_report

TASKS = ("sepsis", "mortality", "aki")
PLANTED_SHIFT = 0.12  # Black patients with sepsis get scores lowered by this much -> lower recall in sepsis


def make_table(seed: int = 0, n: int = 1200, planted: float = PLANTED_SHIFT) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for task, prevalence in zip(TASKS, (0.3, 0.2, 0.25)):
        sex = rng.choice(["F", "M"], n)
        ethnicity = rng.choice(["White", "Black", "Asian", "Other"], n, p=[0.6, 0.25, 0.135, 0.015])
        age = rng.uniform(18, 90, n)
        y = (rng.random(n) < prevalence).astype(int)
        s = np.clip(np.where(y == 1, rng.normal(0.7, 0.15, n), rng.normal(0.3, 0.15, n)), 0, 1)
        if task == "sepsis":
            s = np.where((ethnicity == "Black") & (y == 1), np.clip(s - planted, 0, 1), s)
        parts.append(pd.DataFrame({"label": y, "score": s, "task": task, "sex": sex, "ethnicity": ethnicity,
                                   "age": age}))
    return pd.concat(parts, ignore_index=True)


ROLES = ColumnRoles(label="label", score="score", task="task", attributes=("sex", "ethnicity"),
                    continuous_attributes=("age",))


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return make_table()


@pytest.fixture(scope="module")
def audit(table) -> GroupAuditResult:
    plan = GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=200, n_permutations=200, intersections=(("sex", "ethnicity"),))
    return run_group_audit(table, plan)


@pytest.fixture(scope="module")
def report(audit):
    return build_group_report(audit, dataset_name="Synthetic ICU cohort", model_description="the test model")


@pytest.fixture(scope="module")
def pdf_file(report, tmp_path_factory):
    return P.write_pdf(report, tmp_path_factory.mktemp("pdf") / "report.pdf")


def _pdftotext(path, *args) -> str:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    return subprocess.run(["pdftotext", "-layout", *args, str(path), "-"], check=True, capture_output=True,
                          text=True).stdout


def _record(audit, task, attribute, group, metric):
    rec = audit.records
    row = rec[(rec.task == task) & (rec.attribute == attribute) & (rec.group == group) & (rec.metric == metric)]
    assert len(row) == 1
    return row.iloc[0]


# --------------------------------------------------------------------------------------------------------------
# figure data

def test_forest_data_row_and_tooltip_match_a_hand_computed_record(audit, table):
    data = F.forest_data(audit, "ethnicity", "recall")
    # stable order: tasks as in the result, groups as in the result; y counts rows from the top
    assert list(data["y"]) == list(range(len(data)))
    assert list(dict.fromkeys(data["task"])) == sorted(TASKS)
    # each test drawn once (issue 24): a pair shown in two rows keeps the row of the group with the lower rate
    rec = audit.records[(audit.records.attribute == "ethnicity") & (audit.records.metric == "recall")]
    twice = rec["test_id"].notna() & rec["test_id"].duplicated(keep=False)
    assert data["group"].tolist() == [g for t in sorted(TASKS) for g in
                                      rec[(rec.task == t) & ~(twice & (rec.gap > 0))]["group"]]
    assert len(data) < len(rec) and data["label"].map(lambda s: frozenset(s.split(" · ")[-1].split(" vs "))
                                                     ).groupby(data["task"]).apply(lambda x: x.is_unique).all()

    row = data[(data.task == "sepsis") & (data.group == "Black")].iloc[0]
    sub = table[(table.task == "sepsis")]
    def recall_counts(group):
        g = sub[(sub.ethnicity == group) & (sub.label == 1)]
        return int((g.score >= 0.5).sum()), len(g)
    tp, pos = recall_counts("Black")
    assert (row.numerator, row.denominator) == (tp, pos)
    assert row.rate == pytest.approx(tp / pos)
    comp = row.comparison
    assert comp in {"Asian", "White"}  # the max-gap partner of the group with the planted low recall
    ctp, cpos = recall_counts(comp)
    assert (row.comparison_numerator, row.comparison_denominator) == (ctp, cpos)
    assert row.gap == pytest.approx(tp / pos - ctp / cpos)
    assert row.gap < 0 and row.ci_high < 0 and row.status == "differs" and row.verdict == "differs"
    assert row.significant and row.significant_bh and row.favours == comp
    assert row.label == f"sepsis · Black vs {comp}"
    rec = _record(audit, "sepsis", "ethnicity", "Black", "recall")
    assert row.p_value == rec.p_value and row.q_value == rec.q_value
    tip = row.tooltip
    assert f"rate {tp / pos:.3f} = {tp}/{pos}" in tip
    assert f"group n = {int(rec.n):,}" in tip
    assert f"vs {comp}: {ctp / cpos:.3f} = {ctp}/{cpos}" in tip
    assert F.fmt_signed(row.gap) in tip and f"adjusted CI {F.fmt_ci(rec.ci_low, rec.ci_high)}" in tip
    assert f"{numbers.p_equals(rec.p_value)}, {numbers.p_equals(rec.q_value, 'q')} · differs" in tip

    one = F.forest_data(audit, "ethnicity", "recall", task="sepsis")
    assert set(one.task) == {"sepsis"} and one.label.iloc[0].startswith(one.group.iloc[0])  # no task prefix


def test_tooltips_suppress_small_counts(audit):
    data = F.forest_data(audit, "sex × ethnicity", "recall", suppress_k=20)
    tips = "\n".join(data.tooltip)
    assert "<20" in tips
    fractions = re.findall(r"= ([<\d,]+)/([<\d,]+)", tips)
    assert len(fractions) == 2 * len(data)  # the group's and the comparison's counts
    for a, b in fractions:
        for count in (a, b):
            assert count == "<20" or int(count.replace(",", "")) >= 20
    assert all(re.search(r"group n = (<20|[\d,]+)\)", t) for t in data.tooltip)
    raw = F.forest_data(audit, "sex × ethnicity", "recall")
    assert "<20" not in "\n".join(raw.tooltip)  # the GUI shows the user's own data unsuppressed


def test_delta_eo_and_bins_data(audit):
    d = F.delta_eo_data(audit, "age")
    assert len(d) == len(TASKS) * 2 and list(d.bins_requested) == [2, 5] * len(TASKS)
    rec = audit.records[audit.records.metric == "delta_eo"]
    assert sorted(d.value) == pytest.approx(sorted(rec.gap))
    assert (d.value >= 0).all() and (d.ci_low <= d.ci_high).all()
    assert all("Δ_eo" in t and "permutation p" in t for t in d.tooltip)
    b = F.delta_bins_data(audit, "age", 5)
    assert set(b.bins_requested) == {5} and len(b) == int(b.groupby("task").bins_used.first().sum())
    assert ((b.fpr >= 0) & (b.fpr <= 1) & (b.fnr >= 0) & (b.fnr <= 1)).all()


def test_renderers_write_png(audit):
    for render, data in ((F.render_forest_png, F.forest_data(audit, "sex", "parity")),
                         (F.render_delta_png, F.delta_eo_data(audit, "age")),
                         (F.render_bins_png, F.delta_bins_data(audit, "age", 2))):
        buf = io.BytesIO()
        render(data, buf, "title")
        assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figures_module_imports_no_plotting_library():
    code = ("import sys, fairdesk.core.reports, fairdesk.core.reports.figures; "
            "bad = [m for m in ('matplotlib', 'reportlab', 'PySide6', 'scipy', 'sklearn', 'torch') "
            "if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------------------------------
# report model

def test_summary_names_the_planted_gap(report, audit):
    summary = report.section("summary")
    findings = [b.text for b in summary.blocks if isinstance(b, Paragraph) and b.style == "finding"]
    hit = [f for f in findings if f.startswith("Recall for ethnicity = Black is ") and "in task sepsis" in f]
    assert hit, findings
    rec = _record(audit, "sepsis", "ethnicity", "Black", "recall")
    assert f"{abs(rec.gap):.2f} lower than for {rec.comparison}" in hit[0]
    assert "adjusted CI" in hit[0] and "misses more true cases" in hit[0] and "Caution" not in hit[0]
    # findings whose rates rest on fewer cases than the minimum group size come last, with a caution
    fragile = [i for i, f in enumerate(findings) if "Caution: few cases behind the rate" in f]
    assert fragile == list(range(len(findings) - len(fragile), len(findings)))
    for f in findings:
        for count in re.findall(r"\((<?[\d,]+) patients with", f):
            assert count == "<11" or 11 <= int(count.replace(",", "")) < 30
    text = "\n".join(b.text for b in summary.blocks if isinstance(b, Paragraph))
    assert "Differences found between groups (verdict “differs”)" in text
    assert "each pair of groups counted once" in text
    for word in ("sepsis", "mortality", "aki", "sex", "ethnicity", "age", "at least 0.5", "How to read this",
                 "Synthetic ICU cohort", "the test model"):
        assert word in text
    assert summary.one_page and summary.new_page  # page 2: page 1 is the board's (section "board")


def test_summary_says_when_nothing_is_significant(audit):
    rec = audit.records.copy()
    rec["significant_bh"] = rec["significant_bh"].map(lambda v: None if v is None else False)
    rec["verdict"] = rec["verdict"].map(lambda v: None if v is None else "inconclusive")
    cal = audit.calibration.copy()  # calibration tests count as comparisons too (issue 14)
    cal["verdict"] = cal["verdict"].map(lambda v: None if v is None else "inconclusive")
    disc = audit.discrimination.copy()  # and the AUROC/AUPRC gaps (issue 14)
    disc["verdict"] = disc["verdict"].map(lambda v: None if v is None else "inconclusive")
    tests = audit.tests.copy()  # and every pair test, those shown in no row included (issue 24)
    tests["verdict"] = tests["verdict"].map(lambda v: None if v is None else "inconclusive")
    quiet = dataclasses.replace(audit, records=rec, calibration=cal, discrimination=disc, tests=tests)
    quiet_report = build_group_report(quiet)
    text = quiet_report.text()
    assert "No comparison differs after the correction" in text
    assert "not proof that the model is fair" in text and " 0 differ, " in text
    summary = quiet_report.section("summary")
    assert not [b for b in summary.blocks if isinstance(b, Paragraph) and b.style == "finding"]


def test_report_order_and_contents(report, audit):
    assert [s.key for s in report.sections] == ["board", "summary", "methods", "figures", "tables", "calibration",
                                              "dropped", "provenance"]
    methods = "\n".join(b.text for b in report.section("methods").blocks)
    assert RULE_TEXT["max"] in methods and "not limited to 1/(B + 1)" in methods and "Benjamini–Hochberg" in methods
    # issue 9: the methods name the test, the family and what it means, the margin and the interval
    assert "score test" in methods and "hierarchical false-discovery-rate procedure" in methods and "Yekutieli" in methods and "±0.05" in methods
    assert "Agresti–Caffo" in methods and "null band" in methods
    assert "200 replicates" in methods and "not estimable" in methods and "never as 0" in methods
    figs = report.figures()
    kinds = [(f.kind, f.title) for f in figs]
    for attr in ("sex", "ethnicity", "sex × ethnicity"):
        for m in ("Recall", "Specificity", "Positive prediction rate"):
            assert ("forest", f"{m} gaps by {attr}") in kinds
    assert any(k == "delta" for k, _ in kinds) and any(k == "bins" for k, _ in kinds)
    titles = [t.title for t in report.tables()]
    for t in ("Gap results: ethnicity", "Summary of verdicts", "Per-group performance: sex",
              "Δ_eo estimates", "Bins behind Δ_eo", "Groups not tested", "Audit provenance", "Software versions"):
        assert t in titles
    prov = report.text()
    assert audit.provenance["data_sha256"] in prov and report.date.startswith(audit.provenance["created_utc"][:10])
    assert "reportlab" in prov and "Seed" in prov


COUNT_HEADERS = {"n", "Positives", "TN", "FP", "FN", "TP"}


def test_every_count_below_k_is_suppressed_in_the_model(report, audit):
    seen_suppressed = False
    for t in report.tables():
        for j, h in enumerate(t.header):
            for row in t.rows:
                cell = row[j]
                if h in COUNT_HEADERS and t.title != "Audit provenance":
                    assert cell in ("<11", "–") or int(cell.replace(",", "")) >= 11, (t.title, h, cell)
                    seen_suppressed |= cell == "<11"
                if h == "Rate (num/den)" and "/" in cell:
                    for count in re.search(r"\(([^/]+)/([^)]+)\)", cell).groups():
                        assert count == "<11" or int(count.replace(",", "")) >= 11, cell
    assert seen_suppressed
    # a hand-checked dropped group: the smallest one must read "<11"
    d = audit.dropped.sort_values("n").iloc[0]
    assert d.n < 11
    dropped = next(t for t in report.tables() if t.title == "Groups not tested")
    row = next(r for r in dropped.rows if r[:3] == [d.task, d.attribute, d.group])
    assert row[3] == "<11"


def test_suppression_k_is_configurable(audit):
    text = build_group_report(audit, suppress_k=5).text()
    assert "<5" in text and "<11" not in text
    assert suppress_text("only 7 rows (< 30); all 12 rows are positive", 11) == \
        "only <11 rows (< 30); all 12 rows are positive"


def test_not_estimable_rates_are_never_zero():
    t = make_table(seed=1, planted=0.0)
    t.loc[(t.task == "aki") & (t.ethnicity == "Asian"), "label"] = 0  # no positives: recall undefined
    res = run_group_audit(t, GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, n_permutations=100, metrics=("recall",),
                                            bins=(2,)))
    rep = build_group_report(res)
    table = next(x for x in rep.tables() if x.title == "Gap results: ethnicity")
    row = next(r for r in table.rows if r[0] == "aki" and r[1] == "Asian")
    assert row[4] == "not estimable (no positive cases in the group)" and row[6] == "not estimable"
    fd = F.forest_data(res, "ethnicity", "recall")
    r = fd[(fd.task == "aki") & (fd.group == "Asian")].iloc[0]
    assert r.status == "not_estimable" and np.isnan(r.gap) and "not estimable" in r.tooltip
    buf = io.BytesIO()
    F.render_forest_png(fd, buf, "with a not-estimable row")
    assert buf.getvalue()[:4] == b"\x89PNG"


def test_report_from_stored_json_is_the_same(report, audit):
    again = GroupAuditResult.from_json(audit.to_json())
    rebuilt = build_group_report(again, dataset_name="Synthetic ICU cohort", model_description="the test model")
    assert rebuilt.text() == report.text()
    assert [t.rows for t in rebuilt.tables()] == [t.rows for t in report.tables()]


# --------------------------------------------------------------------------------------------------------------
# PDF

def _sex_only(audit: GroupAuditResult) -> GroupAuditResult:
    keep = audit.records.attribute.isin(["sex", "age"])
    return dataclasses.replace(audit, records=audit.records[keep].reset_index(drop=True),
                               groups=audit.groups[audit.groups.attribute == "sex"].reset_index(drop=True),
                               summary=audit.summary[audit.summary.attribute == "sex"].reset_index(drop=True))


def test_pdf_is_well_formed(pdf_file):
    data = pdf_file.read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert len(re.findall(rb"/Type /Page\b", data)) >= 6
    assert oct(pdf_file.stat().st_mode & 0o777) == oct(0o644)


def test_same_result_gives_identical_pdf_bytes(audit, tmp_path):
    small = _sex_only(audit)
    path = G.report_to_pdf(small, tmp_path / "sub" / "sex.pdf", title="Sex only", suppress_k=5)
    first = path.read_bytes()
    assert first.startswith(b"%PDF-")
    # rebuilt from the result as stored in a project (JSON): the same bytes again
    stored = GroupAuditResult.from_json(small.to_json())
    assert P.render_bytes(build_group_report(stored, title="Sex only", suppress_k=5)) == first
    text = _pdftotext(path)
    assert "Sex only" in text and "Gap results: sex" in text and "Gap results: ethnicity" not in text


def test_pdf_text_summary_page_and_suppression(pdf_file, audit):
    first = _pdftotext(pdf_file, "-f", "1", "-l", "1")
    assert "For the board" in first and "What to check next" in first  # fits one page
    assert len([w for w in first.split() if re.search(r"\w", w)]) <= 350
    assert re.search(r"Recall for ethnicity = Black is \d\.\d\d lower than for", first)
    second = _pdftotext(pdf_file, "-f", "2", "-l", "2")
    assert "Summary for the governance board" in second and "How to read this" in second
    assert re.search(r"page 1 of \d+", first)
    text = _pdftotext(pdf_file)
    assert "Methods" in text and "Groups not tested" in text and "Provenance" in text
    assert audit.provenance["data_sha256"] in text
    assert "<11" in text
    # the dropped-groups table: every size is either suppressed or at least 11
    for line in text.splitlines():
        m = re.search(r"\s(<11|[\d,]+)\s+fewer than 30 rows", line)
        if m:
            assert m.group(1) == "<11" or int(m.group(1).replace(",", "")) >= 11, line
    tiny = audit.dropped.sort_values("n").iloc[0]
    assert not re.search(rf"{re.escape(tiny.group)}\s+{int(tiny.n)}\s+fewer", text)


def test_atomic_write_keeps_the_previous_report(report, tmp_path, monkeypatch):
    target = tmp_path / "report.pdf"
    target.write_bytes(b"%PDF-previous report")

    def broken(_report):
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(P, "_render", broken)
    with pytest.raises(RuntimeError, match="renderer crashed"):
        P.write_pdf(report, target)
    assert target.read_bytes() == b"%PDF-previous report"
    assert os.listdir(tmp_path) == ["report.pdf"]

    # a failure while moving the finished file into place leaves no temporary file behind either
    monkeypatch.setattr(P, "_render", lambda _r: b"%PDF-new")

    def no_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(P.os, "replace", no_replace)
    with pytest.raises(OSError, match="disk full"):
        P.write_pdf(report, target)
    assert target.read_bytes() == b"%PDF-previous report"
    assert os.listdir(tmp_path) == ["report.pdf"]
    monkeypatch.undo()
    P.write_pdf(dataclasses.replace(report, sections=report.sections[:2]), target)
    assert target.read_bytes().startswith(b"%PDF-") and os.listdir(tmp_path) == ["report.pdf"]
