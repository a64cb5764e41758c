"""Issue 24, "the Qt thread only paints": what showing a stored audit computes runs in the view thread, and the
pyqtgraph pages are built one plot or panel per turn of the event loop. Behaviour, not timing: these tests fail when
the data work goes back onto the Qt thread or a page builds all its plots in one stretch (the stretches themselves
are measured by ``python -m benchmarks.bench_heartbeat``)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from fairdesk.core.audits.groups import GroupAuditPlan
from fairdesk.core.data.schema import ColumnRoles


def _record_threads(monkeypatch, module, names: list[str], calls: dict) -> None:
    """Replace ``module.<name>`` by a wrapper noting the thread of every call in ``calls[name]``."""
    for name in names:
        original = getattr(module, name)

        def wrapper(*args, __name=name, __original=original, **kwargs):
            calls.setdefault(__name, []).append(threading.current_thread() is threading.main_thread())
            return __original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)


def _group_audit_project(tmp_path):
    """A project holding one group audit with a continuous attribute and calibration tests."""
    from conftest import make_predictions
    from fairdesk.core.data.tables import import_table
    from fairdesk.jobs.groups import audit_groups

    roles = ColumnRoles(label="label", score="score", task="task", attributes=("sex",), continuous_attributes=("age",),
                        patient_id="patient_id", sample_id="sample_id", split="split")
    csv = tmp_path / "p.csv"
    make_predictions(n=240).to_csv(csv, index=False)
    project = tmp_path / "p.fairdesk"
    dataset_id = import_table(project, csv, roles=roles)
    audit_groups(project, dataset_id, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100))
    return project


def test_group_audit_figure_data_is_computed_in_the_view_thread(make_window, tmp_path, monkeypatch):
    """Opening a project that holds a group audit with a continuous attribute and calibration tests: the gap plot's
    rows, the error-spread rows and bins, the calibration curves and the discrimination table of the first choice
    are all computed in the view runner — none on the Qt thread (before, the error spread, the curves (twice) and
    the discrimination table were computed while the page was filled)."""
    from fairdesk.core.reports import calibration_figures, figures
    from fairdesk.gui.widgets import calibration_views

    project = _group_audit_project(tmp_path)

    calls: dict[str, list[bool]] = {}
    _record_threads(monkeypatch, figures, ["forest_data", "delta_eo_data", "delta_bins_data"], calls)
    _record_threads(monkeypatch, calibration_figures, ["curve_data"], calls)
    _record_threads(monkeypatch, calibration_views, ["discrimination_frame"], calls)
    window = make_window()
    window.show_page(window.audit_tab)
    window.open_project(project)  # (the fixture's wrapper waits until every page shows its audit in full)
    tab = window.audit_tab
    assert tab.result is not None and tab.delta_view.row_count() > 0
    assert tab.calibration_views.disc_view.row_count() > 0 and tab.calibration_views.reliability.scatters
    for name in ("forest_data", "delta_eo_data", "delta_bins_data", "curve_data", "discrimination_frame"):
        assert calls.get(name), f"{name} was not called"
        assert not any(calls[name]), f"{name} ran on the Qt thread"


def test_selecting_a_group_audit_parses_its_document_once(make_window, tmp_path, monkeypatch):
    """Selecting a stored group audit parses its document once and computes its findings once: the tables, the
    header and the board summary all come from the result :meth:`AuditPage.read_view` parsed (before, the findings
    header parsed the document a second time and computed every finding again: a third of the view thread's work,
    all of it holding the interpreter lock the Qt thread waits for)."""
    from fairdesk.core.audits import groups

    project = _group_audit_project(tmp_path)
    window = make_window()
    window.show_page(window.audit_tab)
    window.open_project(project)
    tab = window.audit_tab
    calls = {"from_dict": 0, "findings": 0}
    from fairdesk.core.audits import group_records  # where findings() finds _findings

    from_dict, findings = groups.GroupAuditResult.__dict__["from_dict"].__func__, group_records._findings

    def counted_from_dict(cls, doc):
        calls["from_dict"] += 1
        return from_dict(cls, doc)

    def counted_findings(result):
        calls["findings"] += 1
        return findings(result)

    monkeypatch.setattr(groups.GroupAuditResult, "from_dict", classmethod(counted_from_dict))
    monkeypatch.setattr(group_records, "_findings", counted_findings)
    for _ in range(2):
        tab.audit_list.setCurrentRow(-1)
        tab.audit_list.setCurrentRow(0)
        tab.wait_view()
    assert tab.result is not None and tab.findings.text.toPlainText().strip()
    assert calls == {"from_dict": 2, "findings": 2}


def _scatter_doc(n: int = 40) -> dict:
    rng = np.random.default_rng(1)
    x0, x1 = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    part = {"0->1": {"x": x0.tolist(), "y": (0.8 * x0).tolist(), "index": list(range(n))},
            "1->0": {"x": x1.tolist(), "y": x1.tolist(), "index": list(range(n, 2 * n))}}
    return {"scatter": {"disease": {**part, "flip": part}}, "control_band": 0.05,
            "attribute": {"column": "sex", "values": ["F", "M"]}, "settings": {},
            "examples": {"items": [{"index": i, "target": 1 - i % 2, "observed": i % 2,
                                    "predictions": {"disease": {"original": 0.4, "null": 0.41, "cf": 0.3 + 0.1 * i}}}
                                   for i in range(3)]}}


@pytest.fixture
def image_page(window, qtbot):
    from fairdesk.gui.tabs.image_audit import ImageAuditPanel

    panel = ImageAuditPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1300, 760)
    panel.show()
    panel.wait_view()  # (its first, empty, view)
    return panel


def _turns(page, monkeypatch, measure) -> list:
    """``measure()`` after every slice the page runs (one per turn of the event loop)."""
    seen: list = []
    run = type(page)._next_slice

    def next_slice(self):
        run(self)
        seen.append(measure())

    monkeypatch.setattr(type(page), "_next_slice", next_slice)
    return seen


def test_image_audit_scatter_page_builds_one_plot_per_turn(image_page, monkeypatch):
    """Bringing the Scatter page to the front draws nothing at once; its three plot columns then appear one per
    turn of the event loop (before, all three plots and a tip string per dot were built in one slot: 190–270 ms of
    the Qt thread's CPU on the demo)."""
    panel = image_page
    panel.doc = _scatter_doc()
    panel._filled = set()
    seen = _turns(panel, monkeypatch, lambda: len(panel.scatter.plots) if panel.scatter is not None else 0)
    panel.result_tabs.setCurrentWidget(panel.scatter_host)
    assert panel.scatter is None or not panel.scatter.plots  # nothing drawn in the slot that switched the page
    assert not panel.view_ready
    panel.wait_view()
    assert panel.scatter.columns() == ["0->1", "1->0", "flip"]
    assert max(np.diff([0] + seen)) == 1 and seen[-1] == 3, seen
    assert panel.scatter.point_count("flip") == 80
    tip = panel.scatter.tooltip_at("0->1", *(lambda x: (x, 0.8 * x))(panel.doc["scatter"]["disease"]["0->1"]["x"][5]))
    assert tip.startswith("unit 5 (sex: F → M)") and "Δ -" in tip  # written on hover from the unit's index
    # another audit shown while the page is in front: its scatter is drawn after the tables (steps queued by the
    # last step of show_results are not dropped)
    before = dict(panel.scatter.plots)
    panel.show_document(_scatter_doc(n=10), None)
    panel.wait_view()
    assert panel.scatter.plots["flip"] is not before["flip"] and panel.scatter.point_count("flip") == 20


def test_image_audit_examples_page_builds_one_panel_per_turn(image_page, monkeypatch):
    """The diff viewer's three image panels and its colour bar are built one per turn of the event loop, then the
    examples are shown; when a newer audit drops the steps half-way, the next fill finishes the same viewer."""
    from fairdesk.gui.widgets.image_diff import DiffViewer

    panel = image_page
    panel.doc = _scatter_doc()
    panel.arrays = {k: np.random.default_rng(0).random((3, 8, 8)).astype(np.float32)
                    for k in ("original", "cf", "null")}
    panel._filled = set()
    seen = _turns(panel, monkeypatch, lambda: len(panel.diff_viewer.panel_widgets)
                  + (panel.diff_viewer.colorbar is not None) if panel.diff_viewer is not None else 0)
    panel.result_tabs.setCurrentWidget(panel.examples_host)
    assert panel.diff_viewer is None or not panel.diff_viewer.panel_widgets
    panel._next_slice()  # the viewer's controls
    panel._next_slice()  # its first panel
    assert seen == [0, 1]
    panel._cancel_view()  # a newer audit chosen: the steps left are dropped
    built = panel.diff_viewer
    panel._filled = set()
    panel.result_tabs.setCurrentWidget(panel.scatter_host)
    panel.result_tabs.setCurrentWidget(panel.examples_host)
    panel.wait_view()
    assert panel.diff_viewer is built and len(built.panel_widgets) == 3 and built.colorbar is not None
    assert len(panel.examples_host.findChildren(DiffViewer)) == 1
    steps = [b for a, b in zip(seen, seen[1:]) if b != a]
    assert steps == [1, 2, 3, 4], seen  # one panel (then the colour bar) per turn
    assert len(built.examples) == 3 and built.image("difference") is not None


def test_warm_up_moves_the_imported_modules_out_of_the_collectors_reach():
    """The readers' warm-up ends with ``gc.freeze()``: a full collection over every imported module's objects took
    250–300 ms with the interpreter lock held, in whichever thread triggered it (the Qt thread then waited)."""
    import gc

    from fairdesk.gui.main_window import warm_up_readers

    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        warm_up_readers()
        frozen = gc.get_freeze_count()
        assert frozen > 100_000, frozen  # pandas, pyqtgraph, jsonschema and the audit modules
        young = [object() for _ in range(10)]
        assert gc.get_freeze_count() == frozen and len(young) == 10  # objects made later stay collectable
    finally:
        gc.unfreeze()


def test_warm_up_computes_every_kinds_schema_digest(monkeypatch):
    """The digest of each kind's schema (compared with the one stored beside each checked audit) is computed once
    per process: by the readers' warm-up, not by the first read of a kind's audit while a project opens (reading and
    hashing the group audit's schema held the interpreter lock ~35 ms in the view thread there)."""
    import gc

    from fairdesk.core import kinds
    from fairdesk.gui.main_window import warm_up_readers

    kinds.schema_digest.cache_clear()
    try:
        warm_up_readers()
    finally:
        gc.unfreeze()
    read: list = []
    real = kinds.document_schema
    monkeypatch.setattr(kinds, "document_schema", lambda name: read.append(name) or real(name))
    with_schema = [name for name, kind in kinds.AUDIT_KINDS.items() if kind.schema is not None]
    assert "groups" in with_schema
    digests = {name: kinds.schema_digest(name) for name in with_schema}
    assert read == [] and all(len(d) == 64 for d in digests.values())


def test_plot_widgets_are_built_after_start_up_not_when_a_project_opens(make_window, tmp_path, monkeypatch):
    """After start-up (the readers loaded) the window builds the Group gaps page's five plot widgets ahead, one per
    turn of the event loop, hidden; opening a project with a group audit then builds none (each cost the Qt thread
    15–40 ms while the project opened: the largest stretches of that phase)."""
    import time

    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    project = _group_audit_project(tmp_path)
    window = make_window()
    tab = window.audit_tab
    built: list[int] = []
    init = pg.PlotWidget.__init__

    def counted(self, *args, **kwargs):
        built.append(len(built))
        init(self, *args, **kwargs)

    monkeypatch.setattr(pg.PlotWidget, "__init__", counted)
    turns: list[int] = []
    deadline = time.monotonic() + 120
    while window.warming_up:
        assert time.monotonic() < deadline, "the window's warm-up did not end"
        QApplication.processEvents()
        turns.append(len(built))
        time.sleep(0.002)
    assert len(built) == 5 and max(b - a for a, b in zip([0] + turns, turns)) <= 1  # one widget per turn
    plots = [tab.gap_plot.plot_widget, tab.delta_plot.plot_widget, tab.calibration_views.reliability.plot_widget,
             tab.calibration_views.roc.roc_widget, tab.calibration_views.roc.pr_widget]
    assert all(p is not None and not p.isVisibleTo(tab) for p in plots)  # built, and hidden until an audit fills them
    window.show_page(tab)
    window.open_project(project)
    assert len(built) == 5  # none built while the project opened
    assert tab.gap_plot.scatters and tab.calibration_views.reliability.scatters
    assert [tab.gap_plot.plot_widget, tab.delta_plot.plot_widget, tab.calibration_views.reliability.plot_widget,
            tab.calibration_views.roc.roc_widget, tab.calibration_views.roc.pr_widget] == plots


def test_plots_are_drawn_in_steps_and_the_gap_plot_repainted_once(make_window, tmp_path):
    """The reliability and ROC plots draw one group per step, and the gap plot keeps its repaints off while its
    parts are drawn (also when a newer audit drops the steps half-way), so that a shown plot is repainted once per
    audit, not once per part."""
    from fairdesk.core.reports.calibration_figures import curve_data
    from fairdesk.core.reports.figures import forest_data

    project = _group_audit_project(tmp_path)
    window = make_window()
    window.show_page(window.audit_tab)
    window.open_project(project)
    tab = window.audit_tab
    result, views = tab.result, tab.calibration_views
    cal = result.calibration
    data = curve_data(result, str(cal["task"].iloc[0]), str(cal["attribute"].iloc[0]))
    groups = data["group"].nunique()
    assert groups >= 2
    for plot in (views.reliability, views.roc):
        steps = plot.set_data_steps(data)
        counts = []
        for _ in steps:
            counts.append(len(plot.scatters) if plot is views.reliability else len(plot.operating) // 2)
        assert counts == list(range(1, groups + 1))  # one group per step
    rows = forest_data(result, tab.plot_attribute.currentData(), tab.plot_metric.currentData())
    assert not rows.empty
    gap = tab.gap_plot
    steps = gap.set_data_steps(rows, title="t")
    next(steps)
    assert not gap.plot_widget.updatesEnabled()
    for _ in steps:
        assert not gap.plot_widget.updatesEnabled()
    assert gap.plot_widget.updatesEnabled() and gap.scatters
    steps = gap.set_data_steps(rows, title="t")
    next(steps)
    steps.close()  # dropped half-way
    assert gap.plot_widget.updatesEnabled()


def test_the_shown_gap_plot_is_repainted_only_once_its_audit_is_filled_in(make_window, tmp_path):
    """Choosing a stored group audit while its gap plot is in front: the plot is not repainted while the audit is
    read and the page filled in (the findings header, the result header and the legend settling around it resized it,
    and each resize repainted the whole pyqtgraph plot: 2–20 ms of the Qt thread each, four to six per audit shown),
    and it is repainted once the page is filled."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    project = _group_audit_project(tmp_path)
    window = make_window()
    window.resize(1366, 768)
    window.show_page(window.audit_tab)
    window.open_project(project)
    tab = window.audit_tab
    tab.results_tabs.setCurrentIndex(0)  # the gap plot in front
    viewport = tab.gap_plot.plot_widget.viewport()
    paints: list[bool] = []  # per paint of the plot: whether the page was still reading or filling in the audit

    class Paints(QObject):
        def eventFilter(self, obj, event):  # noqa: N802 - Qt override
            if obj is viewport and event.type() == QEvent.Type.Paint:
                paints.append(not tab.view_ready)
            return False

    watcher = Paints()
    viewport.installEventFilter(watcher)
    for _ in range(2):
        tab.audit_list.setCurrentRow(-1)
        QApplication.processEvents()
        paints.clear()
        tab.audit_list.setCurrentRow(0)
        tab.wait_view()
        for _ in range(5):
            QApplication.processEvents()
        assert tab.gap_plot.scatters and tab.gap_plot.plot_widget.isVisible()
        assert paints and not any(paints), paints  # painted, and only once the page was filled in
    viewport.removeEventFilter(watcher)


def test_warm_up_ends_when_the_readers_load_before_submit_returns(make_window, monkeypatch):
    """A window made when the readers are already imported (a second window in one process, every GUI test after
    the first) finishes its warm-up job at once; the worker may then emit its end before the Qt thread, still inside
    ``submit``, has connected the slot — a signal with no receiver yet is lost, and the window stayed "warming up"
    for ever (seen as a flaky "the window's warm-up did not end" under load). Forced here: submit returns only once
    the worker has finished the job."""
    import time

    from PySide6.QtWidgets import QApplication

    from fairdesk.jobs.qt_bridge import JobRunner

    submit = JobRunner.submit

    def finished_before_return(self, job_or_name, fn=None):
        job = submit(self, job_or_name, fn)
        if job.name == "Load the readers of results":
            assert self.wait_idle(60000)
        return job

    monkeypatch.setattr(JobRunner, "submit", finished_before_return)
    window = make_window()
    deadline = time.monotonic() + 60
    while window.warming_up:
        assert time.monotonic() < deadline, "the window's warm-up did not end"
        QApplication.processEvents()
        time.sleep(0.002)


def test_column_sizing_reads_a_sample_of_rows_not_every_cell(qtbot):
    """Sizing a table's columns reads only the sampled rows (one row selection of the frame): no whole column is
    turned into Python objects or formatted until the table paints it; the widths still hold the header and the
    widest sampled text."""
    import pandas as pd
    from PySide6.QtGui import QFontMetrics

    from fairdesk.gui.widgets.tables import DataFrameView, format_value

    n = 3000
    df = pd.DataFrame({"group": pd.array([f"g{i % 7}" for i in range(n)], dtype="string[pyarrow]"),
                       "a rather long column header": np.linspace(0, 1, n),
                       "note": ["short"] * (n - 1) + ["a much longer note in the last row of the table"]})
    view = DataFrameView(None)
    qtbot.addWidget(view)
    view.set_frame(df)  # not shown: nothing painted
    model = view.model
    assert model._columns == {} and model._texts == {}
    header = view.view.horizontalHeader()
    titles = header.fontMetrics()
    for c, name in enumerate(df.columns):
        assert header.sectionSize(c) >= titles.horizontalAdvance(name) + 16  # the header and its sort arrow
    cells = QFontMetrics(view.view.font())
    longest = format_value(df["note"].iloc[-1])  # the last row is always in the sample
    assert header.sectionSize(2) >= min(cells.horizontalAdvance(longest), DataFrameView.MAX_WIDTH)


def test_the_view_threads_read_waits_while_the_qt_thread_fills_a_slice(make_window):
    """While a page fills a slice of its results on the Qt thread, the view thread's read (here the decoding of a
    long stored document, in pieces) waits at its next yield point instead of running Python beside it: before,
    the two shared the interpreter lock and a 14 ms slice took 50 ms of wall time while the view thread read
    (``bench_heartbeat --stalls``). Asserted on the view thread's own CPU time during a 150 ms slice."""
    import json
    import time

    from fairdesk.core.jsonable import loads_in_pieces
    from fairdesk.jobs.engine import Job

    window = make_window()
    page = window.audit_tab
    text = json.dumps({"rows": [{"a": i, "b": "x" * 20, "c": [i, i + 1]} for i in range(300_000)]})
    started, reader = threading.Event(), {}

    def read(progress, cancel):
        reader["ident"] = threading.get_ident()
        started.set()
        return len(loads_in_pieces(text)["rows"])

    job = window.views.submit(Job("read a long document", read))
    assert started.wait(10)
    clock = time.pthread_getcpuclockid(reader["ident"])
    measured = {}

    def busy_slice():
        before = time.clock_gettime(clock)
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:  # the Qt thread's own work (Python and calls into Qt)
            page.status.text()
        measured["view_cpu"] = time.clock_gettime(clock) - before
        measured["still_reading"] = not job.state.finished
        yield

    page.run_in_slices(busy_slice())
    deadline = time.monotonic() + 30
    while "view_cpu" not in measured or not job.state.finished:
        assert time.monotonic() < deadline
        window.views.wait_idle(50)
        from PySide6.QtWidgets import QApplication

        QApplication.processEvents()
    assert measured["still_reading"], "the read ended before the slice: make the document longer"
    assert measured["view_cpu"] < 0.03, f"the view thread ran {measured['view_cpu'] * 1000:.0f} ms beside the slice"
    assert job.result == 300_000


def _pooled_threads() -> list[str]:
    """The process's threads that Qt's thread pools started (Linux names them ``Thread (pooled)``)."""
    from pathlib import Path

    names = []
    for task in Path("/proc/self/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # (a thread that ended meanwhile)
            pass
    return [n for n in names if n.startswith("Thread (pooled")]


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/task"), reason="reads the threads from Linux's /proc")
def test_painting_the_window_hands_no_fill_to_a_thread_pool(make_window):
    """Round 15: Qt's raster engine splits every fill of 96 or more pixel rows (a tab frame, a scroll bar's groove,
    a page's background) over its GUI thread pool and blocks the Qt thread until the pool's threads ran — on two
    CPUs shared with other work the Qt thread waited for them. The GUI keeps fills on the Qt thread: painting the
    window at 1920×1080, every page shown, starts no pooled thread (before: two, at the window's first paint)."""
    from PySide6.QtWidgets import QApplication, QTabWidget

    window = make_window()
    window.resize(1920, 1080)
    for ti in range(window.tabs.count()):
        window.tabs.setCurrentIndex(ti)
        pages = window.tabs.widget(ti)
        for pi in range(pages.count() if isinstance(pages, QTabWidget) else 1):
            if isinstance(pages, QTabWidget):
                pages.setCurrentIndex(pi)
            window.repaint()
            QApplication.processEvents()
    assert _pooled_threads() == []


def test_a_page_brought_back_to_the_front_repaints_the_tabs_around_it_once(make_window):
    """Round 15: Qt's ``QTabWidget`` repaints everything it holds at every layout request, and the layout requests
    of a page brought to the front climb to the window, so the main tabs and the Audit tab were painted in full in
    three or four passes each time the Group gaps page came back (its whole form and results once more each time).
    With the window's ``TabRepaintGate`` the tab widgets still place their tab bars and pages and pass their size
    hints up, but repaint only when those places changed: each is painted in the page's first pass only."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    window = make_window()
    window.resize(1366, 768)
    tab, other = window.audit_tab, window.slices_page if hasattr(window, "slices_page") else None
    pages = window.pages["audit"]
    other = other or next(pages.widget(i) for i in range(pages.count()) if pages.widget(i) is not tab)

    def settle():
        for _ in range(30):
            QApplication.processEvents()

    window.show_page(other)
    settle()
    painted = {"main": 0, "audit": 0}

    class Count(QObject):
        def eventFilter(self, obj, event):  # noqa: N802 - Qt override
            if event.type() == QEvent.Type.Paint:
                painted["main" if obj is window.tabs else "audit"] += 1
            return False

    counter = Count()
    window.tabs.installEventFilter(counter)
    pages.installEventFilter(counter)
    window.show_page(tab)
    settle()
    assert painted == {"main": 1, "audit": 1}
