"""The Monitor page (audit kind ``monitor``): on the Audit tab, refuses a form without a threshold in place, runs the
job on a stream with a planted gap, says the alarms in words, and a second run with the next periods continues the
same stream."""
from __future__ import annotations

from fairdesk.core.kinds import AUDIT_KINDS, resolve
from fairdesk.core.synthetic.monitor_sim import simulate_stream
from fairdesk.gui.tabs.base import AuditPage


def _choose(page, qtbot, dataset_id):
    page.dataset_combo.setCurrentIndex(page.dataset_combo.findData(dataset_id))
    qtbot.waitUntil(lambda: page.df is not None and page._df_id == dataset_id, timeout=30000)  # read in the view runner
    for key, col in (("label", "y"), ("score", "p"), ("period", "month"), ("patient_id", "pid")):
        combo = page.role_combos[key]
        combo.setCurrentIndex(combo.findData(col))
    page.attributes_list.set_checked(["eth"])


def test_monitor_page_runs_and_says_alarms_in_words(window, project_path, tmp_path, run_and_wait, qtbot):
    from fairdesk.core.data.tables import import_table

    df = simulate_stream(11, months=6, per_month=300, gap=0.4, onset=2)
    (tmp_path / "a.csv").write_text(df[df["month"] <= "2025-04"].to_csv(index=False))
    (tmp_path / "b.csv").write_text(df[df["month"] > "2025-04"].to_csv(index=False))
    first = import_table(project_path, tmp_path / "a.csv")
    window.open_project(project_path)
    page = window.monitor_page
    assert type(page) is resolve(AUDIT_KINDS["monitor"].page) and isinstance(page, AuditPage)
    tabs = window.pages["audit"]
    assert tabs.tabText(tabs.indexOf(page)) == "Monitor"
    window.show_page(page)
    _choose(page, qtbot, first)
    assert page.run_audit() is None and "threshold" in page.status.text()  # no silent default
    page.threshold_spin.setValue(0.3)
    run_and_wait(window, page.run_audit)
    assert page.audit_id is not None and page.doc is not None, page.status.text()
    doc = window.project.audit_document(page.audit_id)
    assert doc["kind"] == "monitor" and len(doc["periods"]) == 4
    texts = [page.alarm_list.item(i).text() for i in range(page.alarm_list.count())]
    assert any(t.startswith("Since 2025-") and "recall for eth A is lower by" in t for t in texts), texts
    assert f"{len(doc['alarms'])} alarm" in page.result_header.text()
    # the next periods: the same plan continues the stream
    second = import_table(window.project.path, tmp_path / "b.csv")
    page.refresh_form()
    _choose(page, qtbot, second)
    page.threshold_spin.setValue(0.3)
    run_and_wait(window, page.run_audit)
    doc2 = window.project.audit_document(page.audit_id)
    assert len(doc2["periods"]) == 6 and doc2["stream"]["added"] == ["2025-05", "2025-06"]
