"""Layout walk (issue 14): the main window at 1366×768 and at 1920×1080 shows every tab, page and result tab — the
pages the registry and EXTRA_PAGES define at run time, with a stored group audit loaded — and nothing a user could
not read: no elided or cut text (labels, buttons, check boxes, placeholders), no tabs hidden behind scroll arrows,
no visible widget outside its parent, and a window that fits the screen. The findings header of every audit page
shows the report's board summary and the counts of the three verdicts."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel, QTabBar, QWidget

from layout_walk import SIZES, check, elided, settle, states, walk


@pytest.fixture
def audited(window, stored_predictions, project_path):
    """The window with a stored group audit (200 replicates: cheap)."""
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.core.project import Project
    from fairdesk.core.data.tables import import_table  # noqa: F401 - the fixture stored the dataset with it
    from fairdesk.jobs.groups import audit_groups

    info = next(d for d in Project(project_path).datasets() if d.id == stored_predictions)
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in info.roles.items()})
    audit_groups(project_path, stored_predictions, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=200, n_permutations=200),
                 name="walk")
    window.notify_project_changed()
    window.audit_tab.wait_view()
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
    assert findings.isVisibleTo(tab) and tab.view_ready
    counts = findings.counts_label.text()
    assert "comparisons" in counts and "differ" in counts and "inconclusive" in counts
    text = findings.text.toPlainText()
    # the same sentences as the PDF's board page, findings first
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.groups import report_tree

    report = report_tree(__import__("json").loads(audited.project.audit_json(tab.audit_id)),
                         ReportSettings(audited.settings.suppress_k))
    first = [b.text for b in report.section("board").blocks if getattr(b, "style", "") == "finding"]
    assert first, "the planted recall gap for women is a finding"
    assert all(sentence in text for sentence in first)
    assert text.index("What differs") < text.index("What to check next")  # page 1 for the board
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
    page.wait_view()
    assert page.audit_id is not None and page.findings.isVisible()
    report = report_tree_of(AUDIT_KINDS[kind], doc, window.settings.suppress_k)
    lead = [b.text for b in report.section("board").blocks if type(b).__name__ == "Paragraph"][:3]
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


# ---- audits run through the GUI with long names, many groups and long legends (issue 24 item 4) ----------------------

LONG_ATTRIBUTE = "self_reported_ethnic_background_at_admission"  # 44 characters
LONG_SECOND = "primary_insurance_payer_category_recorded"


def long_names_table(n: int = 960, seed: int = 1):
    """A predictions table with 8 groups of 40-character names, a second attribute with long names, a continuous
    attribute with a long name and two tasks with long names (a recall gap planted for two groups)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    groups = [f"Group {i} of the long-named categories ".ljust(40, "x") for i in range(8)]
    payers = ["Medicare and other public payers (long)", "Private insurance or self-pay (long name)"]
    g = rng.choice(groups, n)
    payer = rng.choice(payers, n)
    age = np.round(rng.uniform(18, 90, n), 1)
    split = np.where(rng.random(n) < 0.3, "val", "test")
    frames = []
    for k, task in enumerate(("in_hospital_mortality_within_thirty_days", "prolonged_intensive_care_stay")):
        y = rng.binomial(1, 0.35, n)
        penalty = 0.3 * (np.isin(g, groups[:2]) & (y == 1)) if k == 0 else 0.0
        score = np.clip(0.3 + 0.35 * y + rng.normal(0, 0.15, n) - penalty, 0, 1)
        frames.append(pd.DataFrame({"patient_id": np.arange(n), "task": task, "label": y, "score": np.round(score, 4),
                                    LONG_ATTRIBUTE: g, LONG_SECOND: payer,
                                    "age_at_admission_in_completed_years": age, "split": split}))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def gui_audited(window, project_path, tmp_path, run_and_wait):
    """The window after a group audit with long names run through the Group gaps page (its form, its Run)."""
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.data.tables import import_table

    path = tmp_path / "long_names.csv"
    long_names_table().to_csv(path, index=False)
    roles = ColumnRoles(label="label", score="score", task="task", attributes=(LONG_ATTRIBUTE, LONG_SECOND),
                        continuous_attributes=("age_at_admission_in_completed_years",), patient_id="patient_id",
                        split="split")
    dataset_id = import_table(project_path, path, roles=roles, name="a predictions table with a long name " * 2)
    window.open_project(project_path)
    tab = window.audit_tab
    window.show_page(tab)
    plan = GroupAuditPlan(roles=roles, threshold=0.5, intersections=((LONG_ATTRIBUTE, LONG_SECOND),), n_boot=100,
                          n_permutations=100, min_group_size=10, min_denominator=5)
    tab.fill_form(dataset_id, plan)  # the form, as a user fills it
    tab.wait_view()
    job = run_and_wait(window, tab.run_audit)
    assert job.state.value == "done", job.error
    assert tab.audit_id == job.result
    return window


def fully_shown(w) -> str | None:
    """Why the visible widget ``w`` is not fully shown in its window (None when it is): it lies outside the
    window, an ancestor (a scroll area's view, a splitter) clips it, or it is narrower than its text needs."""
    from PySide6.QtCore import QPoint, QRect

    p = w.parentWidget()
    while p is not None:
        rect = QRect(w.mapTo(p, QPoint(0, 0)), w.size())
        if not p.rect().adjusted(-2, -2, 2, 2).contains(rect):
            return f"cut by {type(p).__name__} {p.objectName()!r} ({rect} in {p.rect()})"
        if p.isWindow():
            break
        p = p.parentWidget()
    if w.sizeHint().width() > w.width() + 2:
        return f"needs {w.sizeHint().width()} px, has {w.width()} px"
    return None


def shown_rect(w):
    """The part of ``w`` (in its own coordinates) that its ancestors do not clip."""
    from PySide6.QtCore import QPoint, QRect

    rect, p = w.rect(), w.parentWidget()
    while p is not None:
        rect = rect.intersected(QRect(w.mapFrom(p, QPoint(0, 0)), p.size()))
        if p.isWindow():
            break
        p = p.parentWidget()
    return rect


def plot_problems(window, where: str) -> list[str]:
    """Every visible pyqtgraph plot shows its axes: the left and bottom axes are visible, have a size, and lie in
    the part of the plot that is on screen (not scrolled away or cut by a splitter)."""
    import pyqtgraph as pg
    from PySide6.QtCore import QPoint, QRect

    problems = []
    for view in window.findChildren(pg.GraphicsView):
        if not view.isVisible() or view.window() is not window:
            continue
        results = view.parentWidget()
        while results is not None and results.objectName() != "results_scroll":
            results = results.parentWidget()
        if results is not None:  # the results side scrolls below its minimum size: scroll to the plot, as a user would
            results.ensureWidgetVisible(view, 0, 0)  # its top-left corner: a QGraphicsView's input-method rectangle
            if view.height() <= results.viewport().height():  # is empty; the whole plot when it fits
                corner = view.mapTo(results.widget(), QPoint(0, 0))
                results.ensureVisible(corner.x() + view.width() // 2, corner.y() + view.height() // 2,
                                      view.width() // 2, view.height() // 2)
            settle()
        shown = shown_rect(view)
        items = [i for i in view.scene().items() if isinstance(i, pg.PlotItem) and i.isVisible()]
        for plot in items:
            if not plot.getViewBox().addedItems:
                continue  # an empty plot (nothing drawn yet) needs no axes
            # a plot wider than its view (a long title or axis caption sets its minimum width) is cut on the right
            if plot.geometry().width() > view.viewport().width() + 2:
                problems.append(f"{where}: {type(view.parentWidget()).__name__}: the plot is "
                                f"{plot.geometry().width():.0f} px wide in a {view.viewport().width()} px view "
                                "(cut on the right)")
            # a plot that scrolls its rows shows its x-axis at the top as well (the gap plot)
            x_axis = "top" if plot.getAxis("top").isVisible() else "bottom"
            for name in ("left", x_axis):
                axis = plot.getAxis(name)
                box = view.mapFromScene(plot.mapRectToScene(axis.geometry())).boundingRect()
                if not axis.isVisible() or box.width() <= 0 or box.height() <= 0:
                    problems.append(f"{where}: {type(view.parentWidget()).__name__}: the {name} axis is not drawn")
                elif not shown.intersects(QRect(box)) or (name == "bottom" and box.bottom() > shown.bottom() + 2) or (
                        name == "top" and box.top() < shown.top() - 2):
                    problems.append(f"{where}: {type(view.parentWidget()).__name__}: the {name} axis is off screen "
                                    f"({box} not in the shown {shown})")
    return problems


def test_gap_plot_with_a_long_title_and_caption_keeps_its_width(qtbot):
    """A long attribute name in the title and a long x-axis caption are wrapped into lines: the plot stays as wide as
    its view (on one line they set its minimum width, and at 1366×768 the gap and error-spread plots of an audit with
    long names were cut on the right)."""
    import numpy as np
    import pandas as pd

    from fairdesk.gui.widgets.gap_plot import GapPlot

    plot = GapPlot()
    qtbot.addWidget(plot)
    plot.resize(600, 400)
    plot.show()
    rows = pd.DataFrame({"label": [f"row {i}" for i in range(5)], "gap": np.linspace(-0.3, 0.4, 5),
                         "ci_low": np.linspace(-0.4, 0.3, 5), "ci_high": np.linspace(-0.2, 0.5, 5),
                         "verdict": "differs"})
    title = "self_reported_ethnic_background_at_admission · parity (positive prediction rate) " * 2
    caption = "Δ_eo (0 = equal error rates in every bin); grey bar: 95% null band " * 2
    plot.set_data(rows, title=title, xlabel=caption)
    settle()
    assert plot.plot.geometry().width() <= plot.plot_widget.viewport().width() + 2
    shown = plot.plot.titleLabel.text.replace("<br>", " ") + plot.plot.getAxis("bottom").labelText.replace("<br>", " ")
    assert title.split()[0] in shown and "null band" in shown  # wrapped into lines, not dropped
    assert plot_problems(plot, "gap plot") == []


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_gui_run_audit_with_long_names_is_readable(gui_audited, size, tmp_path):
    """Issue 24 item 4: after an audit run through the page — 8 groups of 40-character names, long attribute and
    task names, an intersection, a continuous attribute, long legends — every page and result tab is readable at
    both sizes, the page's buttons are fully shown and every plot shows its axes."""
    from PySide6.QtWidgets import QPushButton

    window = gui_audited
    tab = window.audit_tab
    shots = tmp_path / "shots"
    problems = walk(window, size, shots=shots)
    assert list(shots.glob("*.png")), "the pages were grabbed"
    window.show_page(tab)
    for name, _page in states(window):
        if not name.startswith("Audit › Group gaps"):
            continue
        for button in window.findChildren(QPushButton):
            if button.isVisible() and button.text() in ("Export PDF…", "Export HTML…", "Hide summary", "Show summary",
                                                        "Audit at this threshold", "Model card…"):
                why = fully_shown(button)
                if why:
                    problems.append(f"{size} {name}: {button.text()!r}: {why}")
        # every plot of the gap and error-spread tabs shows its axes at both sizes
        if name.endswith("Gap plot") or name.endswith("Error spread"):
            problems += plot_problems(window, f"{size} {name}")  # scrolls the results to each plot
        tab.findChild(QWidget, "results_scroll").verticalScrollBar().setValue(0)
    window.show_page(tab)
    tabs = tab.results_tabs
    tabs.setCurrentIndex([tabs.tabText(i) for i in range(tabs.count())].index("Calibration"))
    inner = tabs.currentWidget()
    # the reliability diagram (under the calibration summary in words) shows its axes at both sizes
    inner.setCurrentIndex([inner.tabText(i) for i in range(inner.count())].index("Reliability"))
    settle()
    reliability = tab.calibration_views.reliability
    assert reliability.isVisible() and reliability.plot is not None and reliability.plot.getViewBox().addedItems
    problems += plot_problems(window, f"{size} Calibration › Reliability")
    tab.findChild(QWidget, "results_scroll").verticalScrollBar().setValue(0)
    # the threshold explorer (a tab inside the Calibration tab) and its button
    inner.setCurrentIndex([inner.tabText(i) for i in range(inner.count())].index("Threshold explorer"))
    settle()
    button = tab.calibration_views.explorer.audit_button
    assert button.isVisible()
    why = fully_shown(button)
    if why:
        problems.append(f"{size} threshold explorer: {button.text()!r}: {why}")
    problems += [p for p in check(window, f"{size} threshold explorer")]
    assert not problems, "\n".join(problems[:40])
    # the plots did show something: the gap plot's legend counts tests, the error-spread plot has its bars
    assert "test" in tab.gap_plot.legend.text() and tab.delta_plot.scatters
