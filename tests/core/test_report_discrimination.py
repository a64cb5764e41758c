"""AUROC / AUPRC by group in the group report (issue 14, METHODS §8): section 5's discrimination table (interval,
largest gap with its interval, q and verdict, operating point), the board summary's sentence per AUROC/AUPRC gap
that differs (AUPRC with the prevalence caveat), the PDF's text, no "None"/"nan" anywhere, and audits stored before
the tests existed."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.core.audits.groups import GroupAuditPlan, GroupAuditResult, findings, run_group_audit
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.reports.document import Paragraph
from fairdesk.core.reports.groups import (DISCRIMINATION_HEADER, Finding, _summary_findings, build_group_report,
                                          report_to_pdf)

ROLES = ColumnRoles(label="y", score="s", attributes=("ethnicity",))
NONE_NAN = re.compile(r"\b(None|nan|NaN)\b")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(limits=1):
        yield


def weak_ranking(seed: int = 4, n: int = 1200) -> pd.DataFrame:
    """Same prevalence everywhere; Asian's scores barely rank its cases (AUROC near 0.6, the others near 0.9)."""
    rng = np.random.default_rng(seed)
    g = rng.choice(["White", "Black", "Asian"], n, p=[0.5, 0.3, 0.2])
    y = (rng.random(n) < 0.35).astype(int)
    l = rng.normal(-1.0, 1.0, n) + np.where(g == "Asian", 0.35, 2.0) * y
    return pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-l)), "ethnicity": g})


def prevalence_only(seed: int = 6, n: int = 1600) -> pd.DataFrame:
    """The same score mechanism in both groups (equal AUROC), prevalence 0.5 in A and 0.1 in B: AUPRC differs."""
    rng = np.random.default_rng(seed)
    g = np.where(rng.random(n) < 0.5, "A", "B")
    y = (rng.random(n) < np.where(g == "A", 0.5, 0.1)).astype(int)
    l = rng.normal(-1.0, 1.0, n) + 1.5 * y
    return pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-l)), "ethnicity": g})


@pytest.fixture(scope="module")
def weak() -> GroupAuditResult:
    return run_group_audit(weak_ranking(), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100))


def _finding_texts(report) -> list[str]:
    return [b.text for b in report.section("summary").blocks if isinstance(b, Paragraph) and b.style == "finding"]


def test_section_5_table_holds_intervals_gaps_and_verdicts(weak):
    disc = weak.discrimination.set_index(["group", "metric"])
    asian = disc.loc[("Asian", "auroc")]
    assert asian["verdict"] == "differs" and asian["gap"] < -0.2  # the planted gap is found
    report = build_group_report(weak)
    sec = report.section("calibration")
    table = next(t for t in sec.blocks if getattr(t, "title", "") == "Discrimination by group: ethnicity")
    assert table.header == DISCRIMINATION_HEADER
    assert table.header[4:8] == ["AUROC (95% CI)", "AUROC gap vs group (adjusted CI)", "q", "Verdict"]
    assert table.header[-3:] == ["TPR", "FPR", "PPV"]  # the operating point is still there
    rows = {r[1]: r for r in table.rows}
    assert set(rows) == {"White", "Black", "Asian"}
    row = rows["Asian"]
    assert row[4] == f"{asian['value']:.3f} ({asian['value_ci_low']:.3f} to {asian['value_ci_high']:.3f})"
    lo, hi = asian["ci_low"], asian["ci_high"]
    assert row[5] == (f"−{-asian['gap']:.3f} vs {asian['comparison']} "
                      f"(−{-lo:.3f}\u00a0to\u00a0−{-hi:.3f})")
    assert row[7] == "differs"
    assert row[6] == ("< 0.001" if asian["q_value"] < 0.001 else f"{asian['q_value']:.3f}")
    for r in table.rows:  # every verdict cell holds one of the three verdicts (every group was testable)
        assert r[7] in ("differs", "inconclusive", "equivalent within ±0.05")
        assert r[11] in ("differs", "inconclusive", "equivalent within ±0.05")
    g = weak.groups.set_index("group").loc["Asian"]
    assert row[12] == f"{g['tp'] / (g['tp'] + g['fn']):.3f}"  # TPR at the threshold
    text = report.text()
    assert "point estimates" not in text
    assert "DeLong" in text and "logit scale" in text and "corrected together with the rate gaps" in text
    assert "AUPRC moves with prevalence" in text


def test_board_summary_tells_the_auroc_gap_in_words(weak):
    found = _finding_texts(build_group_report(weak))
    sentence = next(f for f in found if f.startswith("AUROC for ethnicity = Asian is "))
    shown = findings(weak)
    pairs = shown[(shown["metric"] == "auroc") & (shown["verdict"] == "differs")]
    assert len(pairs) >= 1
    first = pairs.assign(mag=pairs["gap"].abs()).sort_values("mag", ascending=False).iloc[0]
    other = first["comparison"] if first["group"] == "Asian" else first["group"]
    lo, hi = sorted((abs(first["ci_low"]), abs(first["ci_high"])))
    assert f"is {abs(first['gap']):.2f} lower than for {other} (" in sentence
    assert f"adjusted CI {lo:.2f} to {hi:.2f}" in sentence
    assert "Meaning: the score ranks patients with the condition above those without less well" in sentence
    assert "in task" not in sentence  # one task: no "(all)" in the sentence
    assert not any(NONE_NAN.search(f) for f in found)


def test_auprc_gap_of_prevalence_alone_carries_the_caveat():
    res = run_group_audit(prevalence_only(), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100))
    disc = res.discrimination.set_index(["group", "metric"])
    assert disc.loc[("B", "auprc"), "verdict"] == "differs"  # AUPRC moves with prevalence ...
    assert disc.loc[("B", "auroc"), "verdict"] != "differs"  # ... while the ranking is the same
    found = _finding_texts(build_group_report(res))
    sentence = next(f for f in found if f.startswith("AUPRC for ethnicity = B is "))
    prev = res.groups.set_index("group")["prevalence"]
    assert "part of an AUPRC gap can come from a difference in prevalence alone" in sentence
    assert f"(prevalence B {prev['B']:.2f} and A {prev['A']:.2f})" in sentence
    assert not any(f.startswith("AUROC for") for f in found)


def test_report_has_no_none_or_nan_with_auroc_findings(weak):
    report = build_group_report(weak)
    text = report.text(include_tooltips=True)
    hits = NONE_NAN.findall(text)
    for t in report.tables():
        hits += [c for r in t.rows for c in r if NONE_NAN.search(str(c))]
    assert not hits
    # "What was found" counts the AUROC/AUPRC comparisons apart from the rates
    text = "\n".join(b.text for b in report.section("summary").blocks if isinstance(b, Paragraph))
    assert "of AUROC or AUPRC" in text and "AUROC and AUPRC — how well the risk score ranks" in text


def test_summary_keeps_one_discrimination_finding_among_many_rate_gaps():
    rate = [Finding(f"rate {i}", 0.5 - i / 100, (0, "a", "recall", str(i))) for i in range(10)]
    disc = [Finding("auroc", 0.05, (0, "a", "auroc", "x"), kind=2)]
    spread = [Finding("spread", 0.3, (0, "b", "delta_eo", ""), kind=1)]
    shown = _summary_findings(rate + disc + spread, 6)
    assert len(shown) == 6 and [f.kind for f in shown] == [0, 0, 0, 0, 2, 1]
    assert [f.sentence for f in shown[:4]] == ["rate 0", "rate 1", "rate 2", "rate 3"]


def test_audit_stored_before_the_tests_shows_point_estimates_and_says_so(weak):
    doc = json.loads(weak.to_json())
    doc.pop("discrimination")
    old = GroupAuditResult.from_dict(doc)
    report = build_group_report(old)
    text = report.text()
    assert "stored before FairDesk tested AUROC and AUPRC" in text
    table = next(t for t in report.section("calibration").blocks
                 if getattr(t, "title", "") == "Discrimination by group: ethnicity")
    assert table.header == ["Task", "Group", "n", "AUROC", "AUPRC", "TPR", "FPR", "PPV"]
    assert not any(f.startswith(("AUROC for", "AUPRC for")) for f in _finding_texts(report))


def test_pdf_prints_the_interval_the_verdict_and_the_caveat(weak, tmp_path):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    path = report_to_pdf(weak, tmp_path / "r.pdf")
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout.replace("\u00a0", " ")
    asian = weak.discrimination.set_index(["group", "metric"]).loc[("Asian", "auroc")]
    assert f"{asian['value']:.3f} ({asian['value_ci_low']:.3f} to {asian['value_ci_high']:.3f})" in text
    assert "Discrimination by group: ethnicity" in text
    line = next(ln for ln in text.splitlines() if f"{asian['value']:.3f} (" in ln and "Asian" in ln)
    assert "differs" in line  # the verdict on the group's own row
    flat = " ".join(text.split())
    assert "AUROC for ethnicity = Asian is" in flat
    assert "AUPRC moves with prevalence" in flat
    assert not NONE_NAN.search(re.sub(r"Warnings recorded during the audit\s+None\.", "", text))
