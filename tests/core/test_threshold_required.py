"""Issue 21, item 2: no silent threshold, and a comparison that is 0 vs 0 (or 1 vs 1) by construction is never
"equivalent".

Reproduces the reviewer's cohort (highest score 0.43, the old default threshold 0.5: the model flagged nobody, no
warning, and parity and specificity were called "equivalent"), then proves the rule over random score ranges and
thresholds (Hypothesis).
"""
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.core.audits.groups import FLAT_PREFIX, GroupAuditPlan, findings, run_group_audit
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.errors import DataError
from fairdesk.core.reports.groups import build_group_report

ROLES = ColumnRoles(label="y", score="p", attributes=("sex",))


def _cohort(n=600, hi=0.43, seed=3, task=None):
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    y = rng.binomial(1, 0.2, n)
    p = np.clip(rng.beta(2, 6, n) * hi / 0.75 + 0.05 * y, 0.001, hi)
    df = pd.DataFrame({"y": y, "p": p, "sex": sex})
    if task:
        df["task"] = task
    return df


def test_a_plan_without_threshold_is_refused_in_one_sentence():
    with pytest.raises(DataError) as err:
        GroupAuditPlan(ROLES)
    msg = str(err.value)
    assert "threshold" in msg and "best_f1" in msg and msg.replace("e.g. ", "").count(". ") == 0 and "\n" not in msg


def test_cli_without_threshold_exits_2_naming_the_option(tmp_path, capsys):
    from fairdesk.cli import main

    data = tmp_path / "d.csv"
    _cohort().to_csv(data, index=False)
    code = main(["audit", "groups", str(data), "--label", "y", "--score", "p", "--attribute", "sex",
                 "--json", str(tmp_path / "a.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--threshold" in err[0]
    assert not (tmp_path / "a.json").exists()


def test_reviewer_cohort_flags_nobody_is_said_everywhere_and_never_equivalent(tmp_path, capsys):
    """Highest score 0.43, threshold 0.5: before issue 21 parity and specificity (0 vs 0, 1 vs 1) were
    "equivalent" and no warning appeared."""
    from fairdesk.cli import main

    df = _cohort(task="sepsis")
    res = run_group_audit(df, GroupAuditPlan(ColumnRoles(label="y", score="p", task="task", attributes=("sex",)),
                                             threshold=0.5, n_boot=200, calibration=False))
    flat = [w for w in res.warnings if w.startswith(FLAT_PREFIX)]
    assert len(flat) == 1 and "nobody" in flat[0] and "sepsis" in flat[0] and "0.43" in flat[0]
    rates = findings(res)
    rates = rates[rates["metric"].isin(["parity", "recall", "specificity"])]
    assert len(rates) == 3 and (rates["verdict"] == "inconclusive").all()
    assert (rates["reason"] == "inconclusive: the model flags nobody in sepsis at threshold 0.5").all()
    # page 1 of the PDF (and the screen's findings, built from the same section)
    for key in ("board", "summary"):
        text = " ".join(getattr(b, "text", "") for b in build_group_report(res).section(key).blocks)
        assert " ".join(flat[0].split()) in text
    # the terminal and the JSON
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    out = tmp_path / "a.json"
    code = main(["audit", "groups", str(data), "--label", "y", "--score", "p", "--task", "task", "--attribute",
                 "sex", "--threshold", "0.5", "--n-boot", "100", "--no-calibration", "--quiet", "--json", str(out)])
    assert code == 0
    err = capsys.readouterr().err
    assert "flags nobody in task 'sepsis' at threshold 0.5" in err
    doc = json.loads(out.read_text())
    assert any(w.startswith(FLAT_PREFIX + "nobody") for w in doc["warnings"])
    assert not any(r["verdict"] == "equivalent" for r in doc["records"])


def test_everybody_flagged_is_inconclusive_too():
    df = _cohort(hi=0.43)
    res = run_group_audit(df, GroupAuditPlan(ROLES, threshold=0.001, n_boot=100, calibration=False))
    assert any("everybody" in w for w in res.warnings)
    rates = findings(res)
    assert len(rates) and not (rates["verdict"] == "equivalent").any()


@settings(max_examples=25, deadline=None)
@given(hi=st.floats(0.05, 0.99), tau=st.floats(0.02, 0.98), n=st.integers(120, 400),
       prev=st.floats(0.02, 0.6), seed=st.integers(0, 10**6))
def test_no_comparison_without_variation_is_ever_equivalent(hi, tau, n, prev, seed):
    rng = np.random.default_rng(seed)
    y = rng.binomial(1, prev, n)
    p = np.clip(rng.uniform(0, hi, n) + 0.1 * hi * y, 1e-3, hi)
    df = pd.DataFrame({"y": y, "p": p, "sex": rng.choice(["F", "M", "X"], n, p=[0.45, 0.45, 0.1])})
    res = run_group_audit(df, GroupAuditPlan(ROLES, threshold=round(tau, 3), n_boot=100, calibration=False,
                                             min_group_size=10, min_denominator=1))
    rec = res.records[res.records["verdict"].notna()]
    flat = rec["rate"].isin([0.0, 1.0]) & (rec["rate"] == rec["comparison_rate"])
    assert not (rec.loc[flat, "verdict"] == "equivalent").any()
    assert rec.loc[flat, "reason"].str.startswith("inconclusive: ").all()
    flagged = (p >= round(tau, 3)).sum()
    said = [w for w in res.warnings if w.startswith(FLAT_PREFIX)]
    assert bool(said) == (flagged in (0, n))
    if said:
        assert not (rec["verdict"] == "equivalent").any()
