"""The group report's calibration section and board summary (issue 14): the section, its table and figure, the plain
sentence per miscalibrated group, small cells suppressed, "not assessed" said with its reason, and a summary that
never says "no comparison differs" while a calibration test differs."""
from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.core.audits.groups import GroupAuditPlan, GroupAuditResult, run_group_audit, verdict_counts
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.reports.document import Paragraph
from fairdesk.core.reports.groups import build_group_report

ROLES = ColumnRoles(label="y", score="s", attributes=("ethnicity",))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(limits=1):
        yield


def planted(seed: int = 3, n: int = 1500, sizes=(0.5, 0.25, 0.15, 0.1)) -> pd.DataFrame:
    """Calibrated scores except for Black, whose outcomes are 0.9 lower on the logit scale (the score over-predicts)."""
    rng = np.random.default_rng(seed)
    g = rng.choice(["White", "Black", "Asian", "Other"], n, p=list(sizes))
    l = rng.normal(-1.0, 1.2, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-np.where(g == "Black", l - 0.9, l)))).astype(int)
    return pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-l)), "ethnicity": g})


@pytest.fixture(scope="module")
def audit() -> GroupAuditResult:
    return run_group_audit(planted(), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100))


def _quiet_gaps(result: GroupAuditResult) -> GroupAuditResult:
    """The same audit with every gap inconclusive (calibration untouched)."""
    rec = result.records.copy()
    rec["significant_bh"] = rec["significant_bh"].map(lambda v: None if v is None else False)
    rec["verdict"] = rec["verdict"].map(lambda v: None if v is None else "inconclusive")
    return dataclasses.replace(result, records=rec)


def _summary(report) -> tuple[str, list[str]]:
    blocks = [b for b in report.section("summary").blocks if isinstance(b, Paragraph)]
    return "\n".join(b.text for b in blocks), [b.text for b in blocks if b.style == "finding"]


def test_section_holds_the_table_with_intervals_and_verdicts_and_the_figure(audit):
    report = build_group_report(audit)
    sec = report.section("calibration")
    assert sec.title.startswith("5  Calibration") and sec.landscape
    assert [s.key for s in report.sections].index("calibration") == 5
    table = next(t for t in sec.blocks if getattr(t, "title", "") == "Calibration by group: ethnicity")
    assert table.header[:5] == ["Task", "Group", "n", "Positives", "O/E (95% CI)"] and table.header[-1] == "Verdict"
    rows = {r[1]: r for r in table.rows}
    assert set(rows) == {"White", "Black", "Asian", "Other"}
    cal = audit.calibration.set_index("group")
    black = cal.loc["Black"]
    assert black["verdict"] == "differs"
    assert rows["Black"][-1] == "miscalibrated (differs)"
    assert rows["Black"][4] == (f"{black['oe_ratio']:.2f} ({black['oe_ratio_ci_low']:.2f} to "
                                f"{black['oe_ratio_ci_high']:.2f})")
    for g, r in rows.items():
        expected = {"differs": "miscalibrated (differs)", "equivalent": "calibrated within the margins (equivalent)",
                    "inconclusive": "inconclusive"}[cal.loc[g, "verdict"]]
        assert r[-1] == expected
    # one figure for the (task, attribute): reliability, smoothed, ROC, PR and operating points of every group
    figs = [b for b in sec.blocks if getattr(b, "kind", None) == "calibration"]
    assert len(figs) == 1
    data = figs[0].data
    assert set(data["curve"]) == {"reliability", "smoothed", "roc", "pr", "operating_roc", "operating_pr"}
    assert set(data["group"]) == set(rows) and data.groupby("group")["colour"].nunique().eq(1).all()
    op = data[(data["curve"] == "operating_roc") & (data["group"] == "Black")].iloc[0]
    g = audit.groups.set_index("group").loc["Black"]
    assert op["x"] == pytest.approx(g["fp"] / (g["fp"] + g["tn"]))
    assert op["y"] == pytest.approx(g["tp"] / (g["tp"] + g["fn"]))
    from fairdesk.core.reports.calibration_figures import render_calibration_png

    buf = io.BytesIO()
    render_calibration_png(data, buf, "t")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    # discrimination: AUROC/AUPRC with intervals, their largest gaps with verdicts, and the operating point
    # (more in tests/core/test_report_discrimination.py)
    text = report.text()
    assert "point estimates" not in text and "AUPRC moves with prevalence" in text
    disc = next(t for t in sec.blocks if getattr(t, "title", "") == "Discrimination by group: ethnicity")
    assert disc.header[:5] == ["Task", "Group", "n", "Positives", "AUROC (95% CI)"]
    assert disc.header[-3:] == ["TPR", "FPR", "PPV"] and len(disc.rows) == 4


def test_summary_says_the_miscalibration_in_plain_words(audit):
    text, found = _summary(build_group_report(audit))
    black = audit.calibration.set_index("group").loc["Black"]
    sentence = next(f for f in found if "miscalibrated" in f)
    assert sentence.startswith("The risk score is miscalibrated for ethnicity = Black: it over-predicts risk "
                               f"(observed/expected {black['oe_ratio']:.2f}, 95% CI")
    assert black["oe_ratio_ci_high"] < 1
    # the counts are told apart: comparisons between groups and calibration checks
    cal = verdict_counts(audit, "calibration")
    assert f"{cal['total']} calibration checks of the risk score, one per group ({cal['differs']} miscalibrated" in text


def test_only_calibration_differs_is_not_summarised_as_nothing_differs(audit):
    quiet = _quiet_gaps(audit)
    counts, cal = verdict_counts(quiet), verdict_counts(quiet, "calibration")
    assert counts["differs"] == cal["differs"] == 1  # the contradiction's set-up: only a calibration test differs
    text, found = _summary(build_group_report(quiet))
    assert "No comparison differs" not in text
    assert "No gap between groups differs after the correction" in text
    assert "The risk score's calibration does differ" in text
    assert len(found) == 1 and "miscalibrated for ethnicity = Black" in found[0]
    assert f"Of {counts['total']} comparisons made (each pair of groups counted once), 1 differs" in text
    # and when nothing differs at all, both are said
    c = quiet.calibration.copy()
    c["verdict"] = c["verdict"].map(lambda v: None if v is None else "inconclusive")
    text, found = _summary(build_group_report(dataclasses.replace(quiet, calibration=c)))
    assert "No comparison differs after the correction" in text and "No group's calibration differs" in text
    assert not found


def test_small_cells_are_suppressed_in_the_table_figure_labels_and_tooltips():
    df = planted(seed=5, n=400, sizes=(0.6, 0.25, 0.13, 0.02))  # Other: about 8 rows
    res = run_group_audit(df, GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, min_group_size=5))
    n_other = int(res.calibration.set_index("group").loc["Other", "n"])
    assert n_other < 11
    shown, hidden = build_group_report(res, suppress_k=1), build_group_report(res, suppress_k=11)
    for report, visible in ((shown, True), (hidden, False)):
        sec = report.section("calibration")
        table = next(t for t in sec.blocks if getattr(t, "title", "") == "Calibration by group: ethnicity")
        row = next(r for r in table.rows if r[1] == "Other")
        assert row[2] == (str(n_other) if visible else "<11")
        fig = next(b for b in sec.blocks if getattr(b, "kind", None) == "calibration")
        labels = set(fig.data[fig.data["group"] == "Other"]["label"])
        assert labels == {f"Other (n = {n_other if visible else '<11'})"}
        tips = " ".join(fig.data["tooltip"])
        small_bins = [int(v) for v in re.findall(r"\bn = (\d+)\b", tips) if int(v) < 11]
        assert bool(small_bins) == visible
        if not visible:
            assert "n = <11" in tips


def test_not_assessed_is_said_with_its_reason(audit):
    off = run_group_audit(planted(n=400), GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=100, calibration=False))
    report = build_group_report(off)
    sec_text = "\n".join(getattr(b, "text", "") for b in report.section("calibration").blocks)
    assert "Calibration by group was not assessed: it was switched off for this audit" in sec_text
    assert "not assessed" in _summary(report)[0]
    assert not [b for b in report.section("calibration").blocks if getattr(b, "kind", None)]
    # scores that are not probabilities: the audit left the tables empty with a warning; the report says why
    bad = dataclasses.replace(audit, calibration=audit.calibration.iloc[0:0], curves=audit.curves.iloc[0:0],
                              warnings=["Scores are not probabilities: calibration is not defined (3 of 400 scores "
                                        "lie outside [0, 1] or are not numbers)."])
    text = build_group_report(bad).text()
    assert "Calibration by group was not assessed: the scores are not probabilities" in text
    # an audit stored before calibration existed
    doc = json.loads(audit.to_json())
    for key in ("calibration", "curves"):
        doc.pop(key)
    text = build_group_report(GroupAuditResult.from_dict(doc)).text()
    assert "stored before FairDesk assessed calibration" in text


def test_pdf_prints_the_section(audit, tmp_path):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    from fairdesk.core.reports.groups import report_to_pdf

    path = report_to_pdf(audit, tmp_path / "r.pdf")
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    assert "5 Calibration and discrimination by group" in text and "miscalibrated (differs)" in text
    assert "Left, reliability: dots are the observed share" in text  # the figure's caption
    assert "6 Groups not tested" in text and "7 Provenance" in text
