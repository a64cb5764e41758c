"""Layout walk (issue 14): the main window at 1366×768 and at 1920×1080 shows every tab, page and result tab — the
pages the registry and EXTRA_PAGES define at run time, with a stored group audit loaded — and nothing a user could
not read: no elided or cut text (labels, buttons, check boxes, placeholders), no tabs hidden behind scroll arrows,
no visible widget outside its parent, and a window that fits the screen. The findings header of every audit page
shows the report's board summary and the counts of the three verdicts."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel, QTabBar, QWidget

from layout_walk import SIZES, check, elided, states, walk


@pytest.fixture
def audited(window, stored_predictions, project_path):
    """The window with a stored group audit (200 replicates: cheap)."""
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.core.project import Project
    from fairdesk.jobs.groups import import_table  # noqa: F401 - the fixture stored the dataset with it
    from fairdesk.jobs.groups import audit_groups

    info = next(d for d in Project(project_path).datasets() if d.id == stored_predictions)
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in info.roles.items()})
    audit_groups(project_path, stored_predictions, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=200, n_permutations=200),
                 name="walk")
    window.notify_project_changed()
    window.audit_tab.findings.wait()
    return window


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_page_readable(audited, size):
    problems = walk(audited, size)
    assert not problems, "\n".join(problems[:40])


def test_every_page_readable_without_a_project(window, predictions_csv, run_and_wait):
    """The first screens a new user sees: no project, a valid table opened (the in-place hint and Create project…
    on show)."""
    run_and_wait(window, lambda: window.dataset_tab.load_file(predictions_csv))
    window.show_page(window.dataset_tab)
    assert window.dataset_tab.create_project_button.isVisible()
    problems = [p for size in SIZES for p in walk(window, size)]
    assert not problems, "\n".join(problems[:40])


def test_walk_visits_every_page_and_result_tab(audited):
    names = [name for name, _page in states(audited)]
    titles = [audited.pages["audit"].tabText(i) for i in range(audited.pages["audit"].count())]
    for title in titles:
        assert any(n.startswith(f"Audit › {title}") for n in names), title
    # the group page's result tabs are visited one by one
    assert sum(n.startswith("Audit › Group gaps › ") for n in names) == audited.audit_tab.results_tabs.count()


def test_findings_header_says_what_was_found(audited):
    tab = audited.audit_tab
    findings = tab.findings
    assert findings.isVisibleTo(tab) and findings.ready
    counts = findings.counts_label.text()
    assert "comparisons" in counts and "differ" in counts and "inconclusive" in counts
    text = findings.text.toPlainText()
    # the same sentences as the PDF's board page, findings first
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.groups import report_tree

    report = report_tree(__import__("json").loads(audited.project.audit_json(tab.audit_id)),
                         ReportSettings(audited.settings.suppress_k))
    first = [b.text for b in report.section("summary").blocks if getattr(b, "style", "") == "finding"]
    assert first, "the planted recall gap for women is a finding"
    assert all(sentence in text for sentence in first)
    assert text.index("What was found") < text.index("What was audited")
    # statistics one click deeper, in plain words
    tabs = [tab.results_tabs.tabText(i) for i in range(tab.results_tabs.count())]
    assert "Summary (Table 4)" not in tabs and all(len(t) <= 16 for t in tabs)
    headers = [tab.records_view.model.headerData(i, __import__("PySide6.QtCore", fromlist=["Qt"]).Qt.Orientation
                                                 .Horizontal) for i in range(tab.records_view.model.columnCount())]
    assert "q" not in headers and "corrected p-value" in headers
    # folding the summary away keeps the counts
    findings.toggle.click()
    assert not findings.text.isVisible() and findings.counts_label.text() == counts


def test_checks_catch_cut_text(qtbot):
    """The walk's checks fail on what they are meant to find (so a clean walk means something)."""
    host = QWidget()
    qtbot.addWidget(host)
    label = QLabel("A label much longer than the forty pixels it is given", host)
    label.setGeometry(0, 0, 40, 20)
    bar = QTabBar(host)
    for title in ("Thresholds & provenance", "Per-group performance", "Summary (Table 4)"):
        bar.addTab(title)
    bar.setUsesScrollButtons(True)
    bar.setGeometry(0, 30, 120, 30)
    child = QLabel("x", label)
    child.setGeometry(100, 100, 10, 10)
    host.resize(200, 80)
    host.show()
    assert elided(label) and elided(bar)
    problems = check(host, "test")
    assert any("label needs" in p for p in problems) and any("outside its parent" in p for p in problems)


def test_report_name_is_dataset_kind_date_in_the_project_folder(audited, monkeypatch):
    from pathlib import Path

    from PySide6.QtWidgets import QFileDialog

    tab = audited.audit_tab
    created = next(a for a in audited.project.audits() if a.id == tab.audit_id).created[:10]
    assert tab.report_file_name(tab.audit_id) == f"stored-predictions-groups-{created}.pdf"
    asked = {}

    def answer(parent, title, start, filters):
        asked["start"] = start
        return "", ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", answer)
    assert tab.export_pdf() is None  # cancelled
    assert Path(asked["start"]) == Path(audited.project.path).parent / f"stored-predictions-groups-{created}.pdf"


@pytest.mark.parametrize("kind", ["mlm_bias", "note_classifiers"])
def test_findings_header_on_other_audit_pages(window, project_path, kind):
    """A page built later gets the header for free: the kind's own board summary and its verdict counts."""
    import importlib.util
    import json
    from pathlib import Path

    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.kinds import AUDIT_KINDS
    from fairdesk.core.project import Project
    from fairdesk.gui.tabs.base import report_tree_of

    spec = importlib.util.spec_from_file_location(
        "small_cells", Path(__file__).parents[1] / "core" / "test_report_small_cells.py")
    small = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(small)
    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site",))
    group = run_group_audit(small._group_table(), GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, min_group_size=5))
    doc = json.loads(json.dumps(small.DOCUMENTS[kind](group), default=str))
    Project(project_path, create=True).add_audit("stored", kind, json.dumps(doc))
    window.open_project(project_path)
    page = next(p for p in vars(window).values() if hasattr(p, "findings") and p.kind().name == kind)
    window.show_page(page)
    # bring the result tab holding the stored audits to the front (the notes page keeps them on its second tab)
    from PySide6.QtWidgets import QStackedWidget

    child, parent = page.findings, page.findings.parentWidget()
    while parent is not None and parent is not page:
        if isinstance(parent, QStackedWidget):
            parent.setCurrentWidget(child)
        child, parent = parent, parent.parentWidget()
    page.findings.wait()
    assert page.audit_id is not None and page.findings.isVisible()
    report = report_tree_of(AUDIT_KINDS[kind], doc, window.settings.suppress_k)
    lead = [b.text for b in report.section("summary").blocks if type(b).__name__ == "Paragraph"][:3]
    text = page.findings.text.toPlainText()
    assert all(" ".join(t.split())[:60] in " ".join(text.split()) for t in lead)
    counts = page.verdict_counts(doc)
    assert sum(counts.values()) > 0 and f"Of {sum(counts.values())} comparisons" in page.findings.counts_label.text()


def test_small_window_hides_the_docks_until_needed(window, run_and_wait):
    """At 1366×768 the Jobs and Log docks start hidden (the pages keep the height); a failed job shows Jobs."""
    window.resize(1366, 768)
    __import__("layout_walk").settle()
    assert not window.jobs_dock.isVisible() and not window.log_dock.isVisible()

    def fail(progress, cancel):
        raise RuntimeError("planted failure")

    job = run_and_wait(window, lambda: window.run_job("planted", fail))
    assert job.state.value == "failed" and window.jobs_dock.isVisible()
