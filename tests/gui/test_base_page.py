"""The base audit page (fairdesk.gui.tabs.base): a page written by the recipe of docs/architecture.md — a form, a
results view, one registry row — is placed by the window and gets the job slot, the stored audits of its kind and
the PDF export (with the user's small-cell k) without writing any of them."""
from __future__ import annotations

import json

import pytest
from PySide6.QtWidgets import QLabel, QSpinBox, QVBoxLayout, QWidget

from fairdesk.core.errors import DataError
from fairdesk.core.kinds import AUDIT_KINDS, AuditKind
from fairdesk.gui.tabs.base import AuditPage, AuditRun, page_kind


def toy_job(project_path, value, name=None, progress=None, cancel=None):
    """The toy kind's job: stores {"value": value}; refuses negative values."""
    from fairdesk.core.project import Project

    if value < 0:
        raise DataError("The value must not be negative.")
    if progress is not None:
        progress(0.5, "half way")
    return Project(project_path).add_audit(name or "toy", "toy", json.dumps({"value": value}))


class ToyPage(AuditPage):
    TITLE, ATTR = "Toy", "toy_page"

    def build_form(self) -> QWidget:
        form = QWidget(self)
        self.value = QSpinBox(form)
        self.value.setRange(-5, 5)
        QVBoxLayout(form).addWidget(self.value)
        return form

    def build_results(self) -> QWidget:
        panel = QWidget(self)
        v = QVBoxLayout(panel)
        self.stored_audits(v)
        self.shown = QLabel(panel)
        v.addWidget(self.shown)
        return panel

    def audit_run(self) -> AuditRun:
        return AuditRun("Toy audit", args=(self.value.value(),), kwargs={"name": f"toy {self.value.value()}"})

    def show_results(self, doc) -> None:
        self.shown.setText("" if doc is None else str(doc["value"]))


@pytest.fixture
def toy_window(monkeypatch, make_window):
    """A window built while the registry has a "toy" kind whose page is ToyPage."""
    monkeypatch.setitem(AUDIT_KINDS, "toy", AuditKind("toy", "Toy", job=f"{__name__}:toy_job",
                                                      report="fairdesk.core.reports.pdf:build_group_report",
                                                      page=f"{__name__}:ToyPage"))
    return make_window()


def test_every_audit_kind_has_its_page_in_the_window(window):
    assert window.pages["audit"].widget(0) is window.audit_tab and page_kind(type(window.audit_tab)).name == "groups"
    for kind in AUDIT_KINDS.values():
        pages = [p for p in vars(window).values() if isinstance(p, AuditPage) and p.kind() == kind]
        assert len(pages) == 1, kind.name
        page = pages[0]
        tab = window.pages[page.TAB]
        assert tab.tabText(tab.indexOf(page)) == page.TITLE and getattr(window, page.ATTR) is page


def test_a_registered_page_runs_lists_and_exports_its_kind(toy_window, project_path, run_and_wait, monkeypatch,
                                                           tmp_path):
    window = toy_window
    page = window.toy_page
    pages = window.pages["audit"]
    assert pages.tabText(pages.indexOf(page)) == "Toy" and not page.run_button.isEnabled()
    window.open_project(project_path, create=True)
    assert page.run_button.isEnabled() and not page.export_button.isEnabled()

    page.value.setValue(3)
    job = run_and_wait(window, page.run_audit)
    assert job.state.value == "done", job.error
    assert page.audit_ids() == [job.result] and page.audit_id == job.result and page.doc == {"value": 3}
    assert page.shown.text() == "3" and page.status.text() == f"Audit #{job.result} stored."
    assert page.progress.value() == page.progress.maximum() and page.export_button.isEnabled()
    assert window.audit_tab.audit_ids() == []  # other pages list only their own kind

    page.value.setValue(-1)  # the job refuses: the reason is on the status line, nothing is stored
    failed = run_and_wait(window, page.run_audit)
    assert failed.state.value == "failed" and "must not be negative" in page.status.text()
    assert page.audit_ids() == [job.result] and page.shown.text() == "3"

    page.value.setValue(4)
    second = run_and_wait(window, page.run_audit)
    assert page.audit_ids() == [job.result, second.result] and page.shown.text() == "4"
    page.audit_list.setCurrentRow(0)
    page.wait_view()
    assert page.audit_id == job.result and page.shown.text() == "3"

    # export: the one PDF route, with the user's small-cell k (pages used to drop it for some kinds)
    calls = {}

    def fake_export(win, name, project, audit_id, path, on_done=None, on_fail=None, **options):
        calls.update(audit_id=audit_id, path=path, **options)
        return win.run_job(name, lambda progress, cancel: path, on_done=on_done, on_fail=on_fail)

    monkeypatch.setattr("fairdesk.gui.tabs.base.export_report_job", fake_export)
    window.settings.suppress_k = 7
    export = run_and_wait(window, lambda: page.export_pdf(tmp_path / "toy"))
    assert export.state.value == "done"
    assert calls == {"audit_id": job.result, "path": tmp_path / "toy.pdf", "suppress_k": 7, "fmt": "pdf"}
    assert str(tmp_path / "toy.pdf") in page.status.text()
    # Export HTML…: the same route and k, the HTML format
    assert page.html_button.isEnabled() and page.html_button.text() == "Export HTML…"
    export = run_and_wait(window, lambda: page.export_html(tmp_path / "toy"))
    assert export.state.value == "done"
    assert calls == {"audit_id": job.result, "path": tmp_path / "toy.html", "suppress_k": 7, "fmt": "html"}
    assert window.action_export_html.isEnabled()


def test_job_panel_shows_time_left_from_the_measured_rate(toy_window, project_path, monkeypatch):
    """Issue 24 item 5: the page's status line adds the time left once the job has run a few seconds (fake clock)."""
    from fairdesk.core.progress import Eta

    page = toy_window.toy_page
    clock = [0.0]
    page._eta = Eta(lambda: clock[0])
    page.job = type("Job", (), {"id": 7})()
    page._job_progress(7, 0.1, "fitting")
    assert page.status.text() == "fitting"
    clock[0] = 30.0
    page._job_progress(7, 0.2, "fitting")
    assert page.status.text() == "fitting — about 2 min left"
    page.job = None


def test_a_damaged_stored_audit_is_a_message_on_the_page_never_an_exception(window, project_path):
    """Issue 20: a stored document of the wrong shape is refused before the page sees it; the status line names the
    audit and says the others are usable; the project's good audit still shows."""
    from pathlib import Path

    from fairdesk.core.project import Project

    good_doc = (Path(__file__).resolve().parents[1] / "data" / "documents" / "groups.json").read_text()
    project = Project(project_path)
    good = project.add_audit("good", "groups", good_doc)
    bad = project.add_audit("bad", "groups", json.dumps({"plan": [], "records": "x", "thresholds": {}}))
    window.open_project(project_path)
    page = window.audit_tab
    page.show_audit(bad)
    page.wait_view()
    assert page.doc is None and f"Audit {bad} ('bad'" in page.status.text() and "damaged" in page.status.text()
    assert "other audits are unaffected" in page.status.text()
    page.show_audit(good)
    page.wait_view()
    assert page.doc is not None and page.audit_id == good
