"""``fairdesk-cli monitor``: the exact contract (options, JSON fields), --project appending periods and refusing a
changed one in one sentence (nothing lost), --html through ``kinds.build_html`` when present, and the report's page
1 saying the alarms in words."""
from __future__ import annotations

import json
import re

import pytest

from fairdesk.cli import main
from fairdesk.core import kinds
from fairdesk.core.project import Project
from fairdesk.core.synthetic.monitor_sim import simulate_stream

RECORD_FIELDS = {"task", "attribute", "group", "comparison", "metric", "period", "n", "rate", "gap", "cs_low",
                 "cs_high", "alarm"}
ALARM_FIELDS = {"task", "attribute", "group", "comparison", "metric", "first_period"}


@pytest.fixture(scope="module")
def stream():
    df = simulate_stream(21, months=6, per_month=500, gap=0.4, onset=2)
    df["task"] = "sepsis"
    df["site"] = ["north" if i % 2 else "south" for i in range(len(df))]
    return df


def _argv(csv, out, *extra):
    return ["monitor", str(csv), "--label", "y", "--score", "p", "--task", "task", "--attribute", "eth",
            "--attribute", "site", "--threshold", "0.3", "--period", "month", "--patient-id", "pid",
            "--json", str(out), "--quiet", *extra]


def test_contract_fields_and_alarm_words(stream, tmp_path, capsys):
    csv = tmp_path / "s.csv"
    stream.to_csv(csv, index=False)
    out, pdf = tmp_path / "m.json", tmp_path / "m.pdf"
    code = main(_argv(csv, out, "--metric", "recall", "parity", "--margin", "0.05", "--alpha", "0.05",
                      "--pdf", str(pdf)))
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert doc["kind"] == "monitor" and doc["plan"]["metrics"] == ["recall", "parity"]
    recs = doc["monitor"]
    assert recs and all(RECORD_FIELDS <= set(r) for r in recs)
    # one record per (task, attribute, group, comparison, metric, period)
    keys = {(r["task"], r["attribute"], r["group"], r["comparison"], r["metric"], r["period"]) for r in recs}
    assert len(keys) == len(recs) == 6 * 2 * (3 + 2)
    assert all(r["alarm"] == (r["cs_low"] > 0 or r["cs_high"] < 0) for r in recs if r["cs_low"] is not None)
    assert doc["comparisons"] == 2 * (3 + 2)
    assert doc["alarms"] and all(ALARM_FIELDS <= set(a) for a in doc["alarms"])
    a = next(a for a in doc["alarms"] if a["group"] == "A" and a["metric"] == "recall")
    first = min(r["period"] for r in recs if r["alarm"] and r["group"] == "A" and r["metric"] == "recall")
    assert a["first_period"] == first
    text = capsys.readouterr().out
    assert re.search(r"Since 2025-\d\d, recall for eth A in sepsis is lower by 0\.\d\d \(0\.\d\d to 0\.\d\d\) than "
                     r"for the rest; first alarmed in 2025-\d\d", text), text


def test_project_appends_periods_and_refuses_a_changed_one(stream, tmp_path, capsys):
    project = tmp_path / "p.fairdesk"
    early, late = stream[stream["month"] <= "2025-03"], stream[stream["month"] > "2025-03"]
    (tmp_path / "a.csv").write_text(early.to_csv(index=False))
    (tmp_path / "b.csv").write_text(late.to_csv(index=False))
    (tmp_path / "all.csv").write_text(stream.to_csv(index=False))
    assert main(_argv(tmp_path / "a.csv", tmp_path / "a.json", "--project", str(project))) == 0
    assert main(_argv(tmp_path / "b.csv", tmp_path / "b.json", "--project", str(project))) == 0
    assert "6 periods watched (3 added)" in capsys.readouterr().out
    assert main(_argv(tmp_path / "all.csv", tmp_path / "all.json")) == 0
    b, once = json.loads((tmp_path / "b.json").read_text()), json.loads((tmp_path / "all.json").read_text())
    assert b["monitor"] == once["monitor"] and b["alarms"] == once["alarms"]
    # a stored period again with other rows: one sentence, exit 2, the project and the earlier --json untouched
    changed = early[early["month"] == "2025-02"].copy()
    changed["p"] = 1.0 - changed["p"]
    (tmp_path / "c.csv").write_text(changed.to_csv(index=False))
    audits = len(Project(project, create=False).audits())
    before = (tmp_path / "b.json").read_bytes()
    capsys.readouterr()
    assert main(_argv(tmp_path / "c.csv", tmp_path / "b.json", "--project", str(project))) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fairdesk-cli: error: Period 2025-02 is already stored with other rows") and \
        err.count("\n") == 0
    assert len(Project(project, create=False).audits()) == audits and (tmp_path / "b.json").read_bytes() == before


def test_metric_spellings_and_an_unknown_metric(stream, tmp_path, capsys):
    from fairdesk.cli import build_parser

    for extra in (["--metric", "recall", "--metric", "parity"], ["--metric", "recall,parity"],
                  ["--metric", "recall", "parity"]):
        args = build_parser().parse_args(_argv("d.csv", "o.json", *extra))
        from fairdesk.cli.args import split_list

        assert split_list(args.metric) == ["recall", "parity"]
    csv = tmp_path / "s.csv"
    stream[stream["month"] <= "2025-02"].to_csv(csv, index=False)
    assert main(_argv(csv, tmp_path / "m.json", "--metric", "error")) == 2
    err = capsys.readouterr().err
    assert "--metric 'error' is not known; choose from recall, specificity, parity." in err and err.count("\n") == 1


def test_html_through_build_html_when_present(stream, tmp_path, capsys, monkeypatch):
    csv = tmp_path / "s.csv"
    stream[stream["month"] <= "2025-02"].to_csv(csv, index=False)
    monkeypatch.delattr(kinds, "build_html", raising=False)
    assert main(_argv(csv, tmp_path / "m.json", "--html", str(tmp_path / "m.html"))) == 2
    assert "HTML reports are not available" in capsys.readouterr().err and not (tmp_path / "m.json").exists()
    calls = []
    monkeypatch.setattr(kinds, "build_html", lambda name, doc, path, settings: calls.append(
        (name, doc["kind"], str(path), settings.suppress_k)), raising=False)
    assert main(_argv(csv, tmp_path / "m.json", "--html", str(tmp_path / "m.html"), "--suppress-k", "5")) == 0
    assert calls == [("monitor", "monitor", str(tmp_path / "m.html"), 5)]


def test_page_one_says_it_in_words_within_350_words(stream):
    from fairdesk.core.audits.monitor import MonitorPlan, run_monitor
    from fairdesk.core.reports.monitor import report_tree

    plan = MonitorPlan(label="y", score="p", task="task", attributes=("eth", "site"), threshold=0.3,
                       period="month", patient_id="pid")
    doc = json.loads(run_monitor(stream, plan).to_json())
    rep = report_tree(doc, kinds.ReportSettings(suppress_k=11))
    board = " ".join(str(getattr(b, "text", "")) for b in rep.section("board").blocks)
    assert "chance of any false alarm in a stream whose gaps are all 0 is at most 0.05" in board
    assert "Does the model still serve every group of eth, site alike?" in board
    page2 = rep.section("summary")
    words = " ".join(b.text for b in page2.blocks)
    assert len(words.split()) <= 350
    # page 2 lists the alarms under page 1's question and promise without repeating them
    assert "chance of any false alarm" not in words and "Does the model still serve" not in words
    assert re.search(r"Since 2025-\d\d, recall for eth A in sepsis is lower by", words)
    assert "What changed since the previous period" in words
    assert [f.kind for f in rep.section("trends").blocks if hasattr(f, "kind")][:1] == ["monitor_trend"]
    assert "(not tested)" in rep.section("context").title
