"""The base pages: what every page that runs jobs shares, written once.

:class:`JobPage` owns one *job slot*: a page runs at most one job at a time (``self.job``), shows its progress in
``self.progress`` and its messages in ``self.status``, and stops it with ``self.cancel_button``.

:class:`AuditPage` is a :class:`JobPage` showing one audit kind of :mod:`fairdesk.core.kinds`. It also owns the Run
button, the list of the project's stored audits *of its kind* (the kind is the registry row whose ``page`` names the
class), loading the chosen one, and the PDF export (through :func:`fairdesk.jobs.reports.export_report`, the one PDF
route, with the user's small-cell k from Settings). A page only builds its form and shows its results:

.. code-block:: python

    class MyAuditPage(AuditPage):
        TITLE, ATTR = "My audit", "my_audit_panel"  # tab title; window attribute (window.my_audit_panel)

        def build_form(self) -> QWidget:            # the set-up inputs (scrolls; Run, Cancel, progress below it)
            ...
        def build_results(self) -> QWidget:         # call self.stored_audits(layout, title) somewhere in it
            ...
        def audit_run(self) -> AuditRun:            # the kind's job inputs from the form; raise FairDeskError to refuse
            return AuditRun("My audit: x", args=(dataset_id,), kwargs={"margin": m})
        def show_results(self, doc) -> None:        # the stored document (parsed by the kind's parser); None: clear
            ...

and the registry row names it: ``page="fairdesk.gui.tabs.my_audit:MyAuditPage"``. The main window places every
kind's page (:func:`audit_pages`). The module of a page must stay cheap to import: heavy libraries load inside the
job (the kind's job function runs in the worker thread) or when a plot is first shown.
"""
from __future__ import annotations

import datetime as dt
import itertools
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QHBoxLayout, QLabel, QListWidget, QVBoxLayout, QWidget

from fairdesk.core.progress import Eta, yield_point
from fairdesk.core.errors import FairDeskError
from fairdesk.core.kinds import (AUDIT_KINDS, AuditKind, ReportSettings, parse_document, resolve,
                                 without_ignored_keys)
from fairdesk.gui.widgets.findings import FindingsPanel, count_verdicts, section_html
from fairdesk.jobs.engine import Job
from fairdesk.gui.widgets.panel_parts import (PROGRESS_STEPS, ask_pdf_path, created_text, export_report_job,
                                              fill_list, job_running, list_data, progress_bar, push_button, run_row,
                                              scroll_area, setup_column, split_page, wrapped_label)

log = logging.getLogger(__name__)

ERROR_STYLE = "color: #B00020;"
CANCELLED = "Cancelled; nothing was stored."
NO_PROJECT = "Create or open a project (File menu) first: audits are run on its data and stored in it."


class JobPage(QWidget):
    """A widget with one job slot: ``start_job`` runs ``work(progress, cancel)`` on the window's runner; the page's
    ``progress`` bar and ``status`` line follow it, ``cancel_button`` stops it. Subclasses extend ``update_buttons``
    (call ``super().update_buttons()``)."""

    #: lines the status line keeps room for
    STATUS_LINES = 2
    #: when set, a failed job also opens a message box with this title (the status line always says why)
    FAIL_TITLE: str | None = None

    def __init__(self, window, parent: QWidget | None = None) -> None:
        super().__init__(parent if parent is not None else window)
        self.window_ = window
        self.job = None
        self._eta: Eta | None = None  # the running job's time-left estimate
        self._own_jobs: set[int] = set()
        self.progress = progress_bar(self)
        self.status = wrapped_label("", self)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.status.setMinimumHeight(self.status.fontMetrics().lineSpacing() * self.STATUS_LINES + 4)
        self.cancel_button = push_button("Cancel", self, self.cancel,
                                         "Stop the running job at its next safe point; nothing half-done is stored.")
        self.cancel_button.setEnabled(False)
        window.runner.progress.connect(self._job_progress)
        window.runner.finished.connect(self._job_finished)

    # ---- the job slot --------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """True while this page's job is waiting or running."""
        return job_running(self.job)

    def job_project(self):
        """The open project when this page may start a job now; None while its job runs, or when no project is open
        (the window then asks the user to open or create one)."""
        return None if self.busy else self.window_.require_project()

    def start_job(self, title: str, work, *, running: str = "Running…", on_done=None, on_fail=None):
        """Queue ``work(progress, cancel)`` as this page's job (None when one is running). ``on_done(job)`` runs in
        the GUI thread after success, ``on_fail(job)`` after a failure or cancel (the status line already says which).
        """
        if self.busy:
            return None

        def done(job) -> None:
            self.progress.setValue(PROGRESS_STEPS)
            if on_done is not None:
                on_done(job)

        def failed(job) -> None:
            self.progress.setValue(0)
            if job.state.value == "cancelled":
                self.say(CANCELLED)
            else:
                self.say(job.error or "The job did not finish.", error=True)
                if self.FAIL_TITLE:
                    self.window_.show_error(self.FAIL_TITLE, job.error or "The job did not finish.")
            if on_fail is not None:
                on_fail(job)

        self.progress.setValue(0)
        self.say(running)
        self._eta = Eta()
        self.job = self.track(self.window_.run_job(title, work, on_done=done, on_fail=failed))
        self.update_buttons()
        return self.job

    def track(self, job):
        """Have ``update_buttons`` called when ``job`` (any job this page started) finishes; returns it."""
        self._own_jobs.add(job.id)
        return job

    def cancel(self) -> None:
        if self.job is not None:
            self.window_.runner.cancel(self.job.id)

    def say(self, text: str, error: bool = False) -> None:
        """Put ``text`` on the status line (an error in red, and on the window's status bar too)."""
        self.status.setStyleSheet(ERROR_STYLE if error else "")
        self.status.setText(text)
        if error:
            self.window_.statusBar().showMessage(" ".join(str(text).split()), 15000)

    def update_buttons(self, *args) -> None:
        self.cancel_button.setEnabled(self.busy)

    def _job_progress(self, job_id: int, fraction: float, message: str) -> None:
        if self.job is not None and job_id == self.job.id:
            self.progress.setValue(int(round(fraction * PROGRESS_STEPS)))
            eta = self._eta.text(fraction) if self._eta is not None else ""
            if message or eta:
                self.say(f"{message} — {eta}" if message and eta else message or eta)

    def _job_finished(self, job) -> None:
        if job.id in self._own_jobs:
            self._own_jobs.discard(job.id)
            self.update_buttons()


class ViewRead:
    """A page's read of what its form offers (a dataset's columns, guessed roles) in the window's view runner
    (``window.views``), never on the Qt thread: :meth:`start` runs ``work()`` there, a newer start cancelling an
    older read; ``on_done(result)`` or ``on_fail(message)`` then run on the Qt thread."""

    def __init__(self, window, on_done, on_fail) -> None:
        self.window, self.on_done, self.on_fail = window, on_done, on_fail
        self.job = None
        window.views.finished.connect(self._finished)
        window.reads.append(self)  # window.refreshing waits for it

    @property
    def busy(self) -> bool:
        return self.job is not None

    def cancel(self) -> None:
        if self.job is not None:
            self.window.views.cancel(self.job.id)
            self.job = None

    def start(self, title: str, work) -> None:
        self.cancel()
        if not self.window.views.closing:
            self.job = self.window.views.submit(Job(title, lambda progress, cancel: work()))

    def _finished(self, job) -> None:
        if self.job is None or job.id != self.job.id:
            return
        self.job = None
        with self.window.foreground.busy():  # (the view thread's reads wait meanwhile)
            if job.state.value == "done":
                self.on_done(job.result)
            elif job.state.value == "failed":
                self.on_fail(job.error or "It could not be read.")


@dataclass
class AuditRun:
    """What a page's form asks of its kind's job: ``job(project_path, *args, **kwargs, progress=, cancel=)``."""

    title: str  # the job's name in the Jobs dock
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    running: str = "Running the audit…"  # the status line while it runs
    torch_threads: int | None = None  # set torch's threads in the worker first (pages whose job runs torch)


def report_tree_of(kind: AuditKind, doc: dict, suppress_k: int):
    """The report tree (:class:`fairdesk.core.reports.document.Report`) of a stored document of ``kind``: the one the
    PDF and the HTML report render (:func:`fairdesk.core.kinds.report_tree`; no PDF, no reportlab)."""
    from fairdesk.core.kinds import report_tree

    return report_tree(kind.name, doc, ReportSettings(int(suppress_k)))


def safe_file_part(text: str, limit: int = 60) -> str:
    """``text`` as part of a file name: letters, digits, ``.``, ``_`` and ``-`` only."""
    out = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-._")
    return out[:limit].rstrip("-._") or "audit"


def page_kind(cls) -> AuditKind:
    """The registry row whose ``page`` names ``cls``."""
    ref = f"{cls.__module__}:{cls.__qualname__}"
    for kind in AUDIT_KINDS.values():
        if kind.page == ref:
            return kind
    raise LookupError(f"No audit kind in fairdesk.core.kinds names the page {ref}.")


def audit_pages() -> list[type]:
    """The page class of every audit kind, in the registry's order (imports the pages' modules, which are light)."""
    return [resolve(kind.page) for kind in AUDIT_KINDS.values()]


class AuditPage(JobPage):
    """A page showing one audit kind: form and Run on the left, stored audits and results on the right.

    Subclasses set the class attributes below, then implement :meth:`build_form`, :meth:`build_results`,
    :meth:`audit_run` and :meth:`show_results`; optionally :meth:`refresh_form` (the project changed),
    :meth:`form_ready` (may Run be pressed?), :meth:`parse_document` and :meth:`prepare_results` (both in the view
    thread). Attributes a subclass needs in its
    ``build_*`` methods are set before ``super().__init__(window)``."""

    TAB = "audit"  # the window's tab holding the page: "dataset", "model" or "audit"
    TITLE = ""  # its title there
    ATTR = ""  # the window attribute naming it
    AFTER: str | None = None  # the title of the page it follows in its tab (None: after the others)
    RUN_TEXT = "Run audit"
    STORED_TITLE = "Stored audits"
    #: show the findings header (the report's plain-language summary) above the results; see :meth:`findings_of`
    SHOW_FINDINGS = True
    FORM_WIDTH = 440  # minimum width of the set-up column
    SPLIT = (470, 880)  # initial widths of the set-up column and the results

    def __init__(self, window) -> None:
        super().__init__(window)
        self.doc = None  # the shown audit's document (parsed by the kind's parser)
        self.audit_id: int | None = None
        self.export_job = None
        self.run_button = push_button(self.RUN_TEXT, self, self.run_audit)
        self.export_button = push_button("Export PDF…", self, self.export_pdf,
                                         "Write the PDF report of the chosen audit as a job (counts below the small-"
                                         "cell threshold k of Settings print as '<k').")
        self.html_button = push_button("Export HTML…", self, self.export_html,
                                       "Write the HTML report of the chosen audit as a job: one file that opens in any "
                                       "browser offline, with the PDF's words, numbers, figures and small-cell "
                                       "suppression, readable by a screen reader.")
        self.card_button = push_button("Model card…", self, self.export_model_card,
                                       "Write the fairness part of a model card of the chosen audit (JSON that "
                                       "validates against the schema FairDesk ships, and Markdown), with the intended "
                                       "use you enter; small cells suppressed as in the PDF.")
        self.card_job = None
        self.audit_list = QListWidget(self)
        self._list_height = 80
        self.audit_list.currentItemChanged.connect(self._audit_selected)
        self.findings = FindingsPanel(self)
        self.prepared = None  # prepare_results of the shown audit
        self._view_job = self._findings_job = None  # the view runner's jobs reading the chosen audit, its findings
        self._view_audit: int | None = None
        #: the form's read of its dataset (see :class:`ViewRead`): :meth:`form_data` gets the result
        self.form_read = ViewRead(window, lambda result: self.form_data(result),
                                  lambda message: self.form_data_failed(message))
        self._slices = None  # the steps of show_results still to run
        self._slice_timer = QTimer(self)
        self._slice_timer.setSingleShot(True)
        self._slice_timer.setInterval(0)
        self._slice_timer.timeout.connect(self._next_slice)
        window.views.finished.connect(self._view_finished)
        window.views.finished.connect(self._findings_finished)
        self.findings.setVisible(False)  # placed by stored_audits (or place_findings) when SHOW_FINDINGS
        form = self.build_form()
        results = self.build_results()
        scroll = scroll_area(self, form)
        # wide enough for the form's own minimum, so no field hides under the scroll bar (it never scrolls sideways)
        width = max(self.FORM_WIDTH, form.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width()
                    + 2 * scroll.frameWidth())
        self.setup_panel = setup_column(self, scroll,
                                        run_row(*self.run_buttons(), self.cancel_button, progress=self.progress),
                                        self.status, min_width=width)
        self.results_panel = results
        split_page(self, self.setup_panel, results, list(self.SPLIT))
        window.refresh_on_project(self, self.refresh_project)
        self.refresh_project()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        # on a small screen the summary and the list of stored audits give room to the statistics below them
        height = self.height()
        self.findings.text.setMaximumHeight(max(90, min(230, height // 5)))
        self.audit_list.setMaximumHeight(max(self.audit_list.minimumHeight(), min(self._list_height, height // 12)))

    @classmethod
    def kind(cls) -> AuditKind:
        """This page's row of the kind registry."""
        return page_kind(cls)

    # ---- what a page writes ------------------------------------------------------------------------------
    def build_form(self) -> QWidget:
        """The set-up inputs (a widget; it scrolls)."""
        raise NotImplementedError

    def build_results(self) -> QWidget:
        """The results side; it must place the stored-audits block with :meth:`stored_audits`."""
        raise NotImplementedError

    def audit_run(self) -> AuditRun:
        """The kind's job inputs from the form; raise :class:`FairDeskError` saying what to fix."""
        raise NotImplementedError

    def show_results(self, doc):
        """Show a stored audit's document (None: clear the results); what takes time to compute belongs in
        :meth:`prepare_results` (``self.prepared``). A page with much to fill may ``yield`` between its parts: each
        part then runs in its own turn of the event loop, so no single stretch of the Qt thread is long."""
        raise NotImplementedError

    def refresh_form(self) -> None:
        """The project changed: refill the form's choices (datasets, models)."""

    def prebuild_steps(self):
        """Build what showing the first audit would build (plot widgets), one part per step (a generator): the window
        runs the steps after start-up, one per turn of the event loop, once pyqtgraph is loaded. Default: nothing."""
        return iter(())

    def form_ready(self) -> bool:
        """May Run be pressed (besides no job running)?"""
        return self.window_.project is not None

    def form_data(self, result) -> None:
        """What ``self.form_read.start(title, work)`` read (``work()`` in the view runner): fill the form from it."""

    def form_data_failed(self, message: str) -> None:
        """The form's read failed: say why."""
        self.say(f"The dataset could not be read: {message}", error=True)
        self.update_buttons()

    def run_buttons(self) -> tuple:
        """The buttons left of Cancel in the Run row."""
        return (self.run_button,)

    def findings_of(self, doc: dict, suppress_k: int, parsed=None) -> tuple[str, dict[str, int] | None]:
        """The findings header of a stored document: ``(html, verdict counts)``. Runs in a worker thread (never touch
        a widget here). ``parsed``: :meth:`parse_document` of ``doc`` when the caller has it (:meth:`read_view`), so
        that a page whose header needs the typed result does not parse the document again. Default: the first
        section of the kind's report tree — page 1 for the board, as the PDF prints it — and
        :meth:`verdict_counts`. A page overrides it (or sets ``SHOW_FINDINGS = False``)."""
        report = report_tree_of(self.kind(), doc, suppress_k)
        return section_html(report.sections[0]), self.verdict_counts(doc)

    def verdict_counts(self, doc: dict) -> dict[str, int] | None:
        """Counts of "differs", "equivalent" and "inconclusive" in a stored document (worker thread). Default: every
        ``verdict`` value in it; a page whose document repeats comparisons counts its own."""
        return count_verdicts(doc)

    # ---- building blocks ---------------------------------------------------------------------------------
    def stored_audits(self, layout: QVBoxLayout, title: str | None = None, max_height: int = 80) -> None:
        """Add the stored-audits block to ``layout``: a title row with Export PDF…, the list of audits, then the
        findings header of the chosen audit (unless ``SHOW_FINDINGS`` is off)."""
        top = QHBoxLayout()
        top.addWidget(QLabel(f"<b>{title or self.STORED_TITLE}</b>", self))
        top.addStretch(1)
        top.addWidget(self.card_button)
        top.addWidget(self.export_button)
        top.addWidget(self.html_button)
        layout.addLayout(top)
        self._list_height = max_height
        self.audit_list.setMaximumHeight(max_height)
        self.audit_list.setMinimumHeight(min(max_height, 2 * self.audit_list.fontMetrics().lineSpacing() + 10))
        layout.addWidget(self.audit_list)
        self.place_findings(layout)

    def results_column(self, max_height: int = 80, header_lines: int = 1) -> tuple[QWidget, QVBoxLayout]:
        """The results side's panel and its layout, holding the stored-audits block (:meth:`stored_audits`, the list
        at most ``max_height`` px high) and below it ``self.result_header``: the shown audit in one line (room kept
        for ``header_lines`` lines). A page adds its result tabs to the layout and returns the panel."""
        panel = QWidget(self)
        layout = QVBoxLayout(panel)
        layout.setContentsMargins(0, 0, 0, 0)
        self.stored_audits(layout, max_height=max_height)
        self.result_header = wrapped_label("", panel)
        if header_lines > 1:
            self.result_header.setMinimumHeight(header_lines * self.result_header.fontMetrics().lineSpacing() + 4)
        layout.addWidget(self.result_header)
        return panel, layout

    def clear_header(self, none_yet: str, none_chosen: str = "No audit selected.") -> None:
        """No audit shown: the header says ``none_chosen`` when the list has audits, else ``none_yet`` (how to run
        the first)."""
        self.result_header.setText(none_chosen if self.audit_list.count() else none_yet)

    def place_findings(self, layout: QVBoxLayout) -> None:
        """Put the findings header in ``layout`` (done by :meth:`stored_audits`)."""
        if self.SHOW_FINDINGS and self.findings.parent() is self and layout.indexOf(self.findings) < 0:
            layout.addWidget(self.findings)
            self.findings.setVisible(True)

    # ---- project and stored audits -----------------------------------------------------------------------
    def refresh_project(self) -> None:
        if self.window_.project is None:
            self.say(NO_PROJECT)
        elif self.status.text() == NO_PROJECT:
            self.say("")
        self.refresh_form()
        self.refresh_audits()

    def refresh_audits(self, select: int | None = None) -> None:
        """List the project's audits of this kind; show ``select`` (else the one shown, else the newest)."""
        project = self.window_.project
        name = self.kind().name
        audits = [a for a in project.audits() if a.kind == name] if project is not None else []
        ids = fill_list(self.audit_list, [(f"#{a.id}  {a.name}  ·  {created_text(a.created)}", a.id) for a in audits])
        keep = select if select is not None else self.audit_id
        target = keep if keep in ids else (ids[-1] if ids else None)
        if target is not None:
            self.audit_list.blockSignals(True)
            self.audit_list.setCurrentRow(ids.index(target))
            self.audit_list.blockSignals(False)
        if target is None or target != self.audit_id or select is not None or self.doc is None:
            self.show_audit(target)
        self.update_buttons()

    def audit_ids(self) -> list[int]:
        return list_data(self.audit_list)

    def _audit_selected(self, item, previous=None) -> None:
        if item is not None:
            self.show_audit(item.data(Qt.ItemDataRole.UserRole))

    # ---- showing a stored audit: read and prepared in the view thread, shown in slices --------------------------
    def show_audit(self, audit_id: int | None) -> None:
        """Show stored audit ``audit_id`` (None: clear). Its document is read, checked against its schema, parsed
        (:meth:`parse_document`), prepared for the views (:meth:`prepare_results`) and summed up
        (:meth:`findings_of`) in a job of the window's view runner (``window.views``, never the Qt thread); the page
        then fills its widgets (:meth:`show_results`, in slices when it yields). A newer choice cancels an older
        one that has not been shown yet."""
        self._cancel_view()
        project = self.window_.project
        if audit_id is None or project is None:
            self.show_document(None, None)
            return
        if self.window_.views.closing:  # the window is closing
            return
        k = int(self.window_.settings.suppress_k)
        if self.SHOW_FINDINGS:
            self.findings.pending()
        self._view_job = self.window_.views.submit(Job(
            f"Read audit #{audit_id}", lambda progress, cancel: self.read_view(project, audit_id, k, cancel.check)))
        self._view_audit = audit_id

    def read_view(self, project, audit_id: int, suppress_k: int, check=lambda: None) -> tuple:
        """Everything :meth:`show_results` needs of stored audit ``audit_id``: ``(doc, prepared, findings)`` — read
        and checked (:meth:`Project.audit_document`), parsed, prepared and summed up. Runs in the view runner (never
        touch a widget here); ``check()`` raises when the read was cancelled (``benchmarks/bench_heartbeat.py``
        measures what these steps cost the window)."""
        raw = project.audit_document(audit_id)  # checked against the kind's schema
        raw = without_ignored_keys(self.kind().name, raw)[0]  # a newer version's document: what reports read
        check()
        yield_point()  # (the Qt thread's work goes first: core.progress.Foreground)
        doc = self.parse_document(raw, audit_id)
        check()
        yield_point()
        prepared = self.prepare_results(doc, audit_id)
        check()
        yield_point()
        if not self.SHOW_FINDINGS:
            return doc, prepared, None
        try:
            summary = self.findings_of(raw, suppress_k, parsed=doc)  # the document parsed once
        except Exception as err:  # noqa: BLE001 - the statistics still show; the header says what failed
            summary = err
        return doc, prepared, summary

    def _view_finished(self, job) -> None:
        if self._view_job is None or job.id != self._view_job.id:
            return
        self._view_job, audit_id = None, self._view_audit
        if job.state.value == "done":
            doc, prepared, findings = job.result
            with self.window_.foreground.busy():  # (the view thread's reads wait meanwhile)
                self.show_document(doc, audit_id, prepared=prepared, findings=findings)
        elif job.state.value == "failed":
            self.show_document(None, None)
            self.say(f"Audit #{audit_id} could not be read: {job.error}", error=True)

    def _cancel_view(self) -> None:
        """Forget an audit being read or shown (a newer one was chosen)."""
        if self._view_job is not None:
            self.window_.views.cancel(self._view_job.id)
            self._view_job = None
        self._slices = None
        self._slice_timer.stop()

    def parse_document(self, raw: dict, audit_id: int):
        """The checked document of ``audit_id`` as :meth:`show_results` takes it (view thread; default: parsed by the
        kind's parser)."""
        return parse_document(self.kind().name, raw)

    def prepare_results(self, doc, audit_id: int):
        """What :meth:`show_results` needs that takes time to compute (tables, figure data), computed from the
        parsed document in the view thread (never touch a widget here); :meth:`show_results` finds it in
        ``self.prepared``. Default: nothing."""
        return None

    def show_document(self, doc, audit_id: int | None, *, prepared=None, findings=None) -> None:
        """Show ``doc`` (the document of stored audit ``audit_id``; ``prepared``: :meth:`prepare_results` of it;
        ``findings``: ``(html, counts)`` of the findings header, built from the project when not given)."""
        self._slices = None
        self._slice_timer.stop()
        self.doc, self.audit_id, self.prepared = doc, audit_id, prepared
        steps = self.show_results(doc)
        if isinstance(findings, Exception):
            self.findings.clear(f"The plain-language summary could not be built: {findings}")
        elif findings is not None:
            self.findings.show_summary(*findings)
        else:
            self.update_findings()
        self.update_buttons()
        if steps is not None:
            self.run_in_slices(steps)

    def run_in_slices(self, steps) -> None:
        """Run the generator ``steps`` one step per turn of the event loop (after the steps still queued), so that
        the window keeps painting and answering between them; a newer audit chosen drops what is left."""
        self._slices = iter(steps) if self._slices is None else itertools.chain(self._slices, steps)
        self._slice_timer.start()

    def _next_slice(self) -> None:
        steps = self._slices
        if steps is None:
            return
        try:
            with self.window_.foreground.busy():  # (the view thread's reads wait meanwhile)
                next(steps)
        except StopIteration:
            if self._slices is steps:
                self._slices = None
            else:  # the last step queued more (run_in_slices): go on with those
                self._slice_timer.start()
            return
        except Exception as err:  # noqa: BLE001 - a view that cannot be drawn must not take the app down
            self._slices = None
            log.exception("showing audit #%s failed", self.audit_id)
            self.say(f"Audit #{self.audit_id} could not be shown in full: {err}", error=True)
            return
        self._slice_timer.start()

    @property
    def view_ready(self) -> bool:
        """True when no stored audit is being read or filled in, nor the form's dataset, and no page of the window
        waits for its refresh after a project change or for its read (``window.refreshing``)."""
        return (self._view_job is None and self._slices is None and self._findings_job is None
                and not self.window_.refreshing)

    def wait_view(self, timeout: float = 60.0) -> None:
        """Let the event loop run until the chosen audit is shown in full (tests, the layout walk)."""
        deadline = time.monotonic() + timeout
        app = QApplication.instance()
        while not self.view_ready:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{type(self).__name__}: audit #{self._view_audit} not shown in {timeout:g} s")
            app.processEvents()
            time.sleep(0.002)

    def update_findings(self) -> None:
        """Rebuild the findings header of the shown audit (in the view thread)."""
        if not self.SHOW_FINDINGS:
            return
        project = self.window_.project
        if self._findings_job is not None:
            self.window_.views.cancel(self._findings_job.id)
            self._findings_job = None
        if self.audit_id is None or project is None:
            self.findings.clear()
            return
        if self.window_.views.closing:
            return
        audit_id, k = self.audit_id, int(self.window_.settings.suppress_k)
        self.findings.pending()
        self._findings_job = self.window_.views.submit(Job(
            f"Findings of audit #{audit_id}", lambda progress, cancel: self.findings_of(project.audit_document(audit_id),
                                                                                       k)))

    def _findings_finished(self, job) -> None:
        if self._findings_job is None or job.id != self._findings_job.id:
            return
        self._findings_job = None
        if job.state.value == "done":
            self.findings.show_summary(*job.result)
        elif job.state.value == "failed":
            self.findings.clear(f"The findings could not be read: {job.error}")

    # ---- running -----------------------------------------------------------------------------------------
    def run_audit(self):
        """Run the kind's job with the form's inputs; returns the job, or None (the reason on the status line)."""
        project = self.job_project()
        if project is None:
            return None
        try:
            run = self.audit_run()
        except FairDeskError as err:
            self.say(str(err), error=True)
            return None
        ref, project_path = self.kind().job, project.path

        def work(progress, cancel):
            if run.torch_threads:
                import torch

                torch.set_num_threads(int(run.torch_threads))
            return resolve(ref)(project_path, *run.args, progress=progress, cancel=cancel, **run.kwargs)

        return self.start_job(run.title, work, running=run.running, on_done=lambda job: self.audit_stored(job.result))

    def audit_stored(self, audit_id: int) -> None:
        """The job stored audit ``audit_id``: say so and show it."""
        self.say(f"Audit #{audit_id} stored.")
        self.refresh_audits(select=audit_id)

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        self.run_button.setEnabled(not self.busy and self.form_ready())
        # a disabled Run says why (a status message would vanish)
        self.run_button.setToolTip(NO_PROJECT if self.window_.project is None else
                                   "" if self.run_button.isEnabled() or self.busy else
                                   "Complete the set-up on the left first (the status line below says what is "
                                   "missing when Run is pressed).")
        self.export_button.setEnabled(self.audit_id is not None and self.window_.project is not None
                                      and not job_running(self.export_job))
        self.html_button.setEnabled(self.audit_id is not None and self.window_.project is not None
                                    and not job_running(self.export_job))
        self.card_button.setEnabled(self.audit_id is not None and self.window_.project is not None
                                    and not job_running(self.card_job))

    # ---- export ------------------------------------------------------------------------------------------
    def report_file_name(self, audit_id: int) -> str:
        """The suggested PDF name: ``<dataset>-<audit kind>-<date>.pdf`` (the audit's own date)."""
        project = self.window_.project
        dataset, date = project.name, dt.date.today().isoformat()
        try:
            info = next((a for a in project.audits() if a.id == audit_id), None)
            if info is not None and info.created:
                date = str(info.created)[:10]
            named = next((d.name for d in project.datasets() if info is not None and d.id == info.dataset_id), None)
            if not named:
                doc = project.audit_document(audit_id)
                named = ((doc.get("provenance") or {}).get("dataset") if isinstance(doc, dict) else None)
            if isinstance(named, str) and named.strip():
                dataset = named
        except (FairDeskError, ValueError, TypeError, AttributeError):
            pass
        return f"{safe_file_part(dataset)}-{self.kind().name.replace('_', '-')}-{date}.pdf"

    def export_model_card(self, path: str | Path | None = None, intended_use: str | None = None,
                          audit_id: int | None = None):
        """Write the model card (fairness part) of the shown (or given) audit as a job: ``path`` (.json) and the
        same card as Markdown beside it (.md), through :func:`fairdesk.jobs.reports.export_model_card`."""
        from PySide6.QtWidgets import QFileDialog, QInputDialog

        project = self.window_.project
        audit_id = audit_id if audit_id is not None else self.audit_id
        if project is None or audit_id is None:
            self.window_.statusBar().showMessage("Choose a stored audit first.", 8000)
            return None
        if path is None:
            suggested = Path(project.path).parent / self.report_file_name(audit_id).replace(".pdf", "-model-card.json")
            path, _ = QFileDialog.getSaveFileName(self, "Export the model card", str(suggested), "JSON (*.json)")
            if not path:
                return None
        if intended_use is None:
            intended_use, ok = QInputDialog.getMultiLineText(
                self, "Intended use", "What is the model used for, by whom, for which patients? (written into the "
                "card as you enter it; leave empty to say it was not given)")
            if not ok:
                return None
        path = Path(path)
        if path.suffix.lower() != ".json":
            path = path.with_name(path.name + ".json")
        k, text = self.window_.settings.suppress_k, intended_use.strip() or None

        def work(progress, cancel):
            from fairdesk.jobs.reports import export_model_card

            return export_model_card(project.path, audit_id, path, intended_use=text, suppress_k=k,
                                     out_markdown=path.with_suffix(".md"), progress=progress, cancel=cancel)

        def done(job) -> None:
            self.say(f"Model card written to {job.result} (and {path.with_suffix('.md').name})")

        def failed(job) -> None:
            self.say(job.error or "The model card was not written.", error=job.state.value == "failed")

        self.card_job = self.track(self.window_.run_job(f"Model card of audit #{audit_id}", work, on_done=done,
                                                        on_fail=failed))
        self.update_buttons()
        return self.card_job

    def export_pdf(self, path: str | Path | None = None, audit_id: int | None = None):
        """Write the PDF report of the shown (or given) stored audit as a job, with the user's small-cell k."""
        return self.export_file("pdf", path, audit_id)

    def export_html(self, path: str | Path | None = None, audit_id: int | None = None):
        """Write the self-contained HTML report of the shown (or given) stored audit as a job (the PDF's report
        tree, the same small-cell k)."""
        return self.export_file("html", path, audit_id)

    def export_file(self, fmt: str, path: str | Path | None = None, audit_id: int | None = None):
        """The report as ``fmt`` ("pdf" or "html") through the one report route (:mod:`fairdesk.jobs.reports`)."""
        project = self.window_.project
        audit_id = audit_id if audit_id is not None else self.audit_id
        if project is None or audit_id is None:
            self.window_.statusBar().showMessage("Choose a stored audit first.", 8000)
            return None
        suffix = f".{fmt}"
        if path is None:
            suggested = Path(project.path).parent / self.report_file_name(audit_id).replace(".pdf", suffix)
            path = ask_pdf_path(self, self.window_, "Export the audit report", str(suggested),
                                kind="HTML (*.html)" if fmt == "html" else "PDF (*.pdf)")
            if path is None:
                return None
        path = Path(path)
        if path.suffix.lower() != suffix:
            path = path.with_name(path.name + suffix)

        def done(job) -> None:
            self.say(f"Report written to {job.result}")
            self.window_.statusBar().showMessage(f"Report written to {job.result}", 10000)

        def failed(job) -> None:
            self.say(job.error or "The report was not written.", error=job.state.value == "failed")

        self.export_job = self.track(export_report_job(
            self.window_, f"Export {fmt.upper()} report of audit #{audit_id}", project.path, audit_id, path,
            on_done=done, on_fail=failed, suppress_k=self.window_.settings.suppress_k, fmt=fmt))
        self.update_buttons()
        return self.export_job
