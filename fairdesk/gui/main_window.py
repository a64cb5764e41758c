"""The main window: Dataset, Model and Audit tabs, a jobs dock, a log dock, menus and the project.

Long work never runs here: every action builds a job from a function of :mod:`fairdesk.jobs` (the same
functions the CLI calls) and hands it to the :class:`~fairdesk.jobs.qt_bridge.JobRunner`, whose single worker
thread runs it. Heavy libraries (torch, scikit-learn, scipy, matplotlib, reportlab) are imported inside those
functions, so they load in the worker thread and the window appears quickly.
"""
from __future__ import annotations

import fairdesk._bootstrap  # noqa: F401  (offline environment first)

import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QApplication, QComboBox, QDialog, QDialogButtonBox, QDockWidget, QFileDialog,
                               QFormLayout, QGroupBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMainWindow, QMessageBox, QPlainTextEdit,
                               QProgressBar, QPushButton, QSpinBox, QTabWidget, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from fairdesk import paths
from fairdesk.core.escape import html_text
from fairdesk.core.errors import FairDeskError
from fairdesk.core.project import SUFFIX, Project
from fairdesk.gui.settings import Settings
from fairdesk.gui.widgets.panel_parts import gate_tab_repaints
from fairdesk.core.progress import Foreground, set_yield_hook
from fairdesk.jobs.engine import Job, JobState
from fairdesk.jobs.qt_bridge import JobRunner

log = logging.getLogger("fairdesk.gui")

APP_NAME = "FairDesk"

LICENCES = [
    ("FairDesk", "Apache-2.0"),
    ("Qt for Python (PySide6-Essentials)", "LGPL-3.0 (Qt and PySide6)"),
    ("pyqtgraph", "MIT"),
    ("NumPy", "BSD-3-Clause"),
    ("pandas", "BSD-3-Clause"),
    ("PyArrow", "Apache-2.0"),
    ("SciPy", "BSD-3-Clause"),
    ("scikit-learn", "BSD-3-Clause"),
    ("PyTorch", "BSD-3-Clause"),
    ("Matplotlib", "Matplotlib licence (PSF-based, BSD-compatible)"),
    ("ReportLab (open-source toolkit)", "BSD-3-Clause"),
]

STATE_COLOURS = {JobState.FAILED: "#B00020", JobState.CANCELLED: "#8a6d00", JobState.DONE: "#1b6e20"}


def warm_up_readers(progress=None, cancel=None) -> None:
    """Import what showing a stored audit needs (a job of the window's view runner: never on the Qt thread)."""
    import importlib

    from fairdesk.core.kinds import AUDIT_KINDS, schema_digest, schema_problems

    schema_problems({}, {"type": "object"})  # jsonschema's first import compiles grammars: seconds
    for name, kind in AUDIT_KINDS.items():  # kept per kind; the first read of a kind's audit made it (~35 ms)
        if kind.schema is not None:
            schema_digest(name)
    # what opening a project imported besides (about 150 ms of imports, each holding the interpreter lock while its
    # module ran, in the middle of the pages filling): the image audit's reader and report, the image data pages'
    # jobs module, Parquet and PIL
    for name in ("pyqtgraph", "fairdesk.core.audits.groups", "fairdesk.core.reports.groups",
                 "fairdesk.core.reports.figures", "fairdesk.core.reports.calibration_figures",
                 "fairdesk.core.audits.cit_images", "fairdesk.core.reports.cit_images", "fairdesk.core.reports.pdf",
                 "fairdesk.jobs.images", "fairdesk.jobs.text", "pyarrow.parquet", "pyarrow.dataset", "PIL.Image",
                 "PIL.PngImagePlugin"):
        importlib.import_module(name)
    freeze_long_lived_objects()


def freeze_long_lived_objects() -> None:
    """Move every object the garbage collector tracks now (the modules, classes and functions imported so far: they
    live as long as the process) out of its reach (``gc.freeze``). A full collection scans every tracked object
    while it holds the interpreter lock, in whichever thread triggers it: with pandas, scipy, pyqtgraph and the
    audit modules loaded that took 250–300 ms, and when a view thread's allocations triggered it the Qt thread
    waited that long with its own CPU idle (the heartbeat benchmark: select max 301–402 ms wall, 60–84 ms CPU).
    Frozen objects are still freed by reference counting; only cyclic garbage among them would be kept."""
    import gc

    gc.freeze()


# ----------------------------------------------------------------------------------------------------------------
# Log dock: a logging handler that forwards records to the GUI thread through a queued signal

#: Sub-pages showing no audit kind, after the first page of their tab: (tab, page title, "module:Class", window
#: attribute). The pages of the audit kinds come from the kind registry (fairdesk.core.kinds, each row's ``page``):
#: each such class says its tab, title and window attribute (fairdesk.gui.tabs.base.AuditPage). Every page class
#: takes the window; its module must be cheap to import (heavy libraries load inside the jobs it starts).
EXTRA_PAGES: list[tuple] = [  # (tab, title, "module:Class", window attribute[, the title of the page it follows])
    ("dataset", "Images", "fairdesk.gui.tabs.image_data:ImageDataPanel", "image_data_panel"),
    ("model", "Language models", "fairdesk.gui.tabs.text_model:LanguageModelPanel", "language_model_panel"),
    ("model", "Images", "fairdesk.gui.tabs.image_model:ImageModelPanel", "image_model_panel"),
    ("model", "Text classifiers", "fairdesk.gui.tabs.text_classifier:TextClassifierPage", "text_classifier_panel",
     "Note classifiers"),
]


class _LogEmitter(QObject):
    message = Signal(str)


class QtLogHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.emitter = _LogEmitter()
        self.setFormatter(logging.Formatter("%(asctime)s  %(levelname)-7s %(message)s", "%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.emitter.message.emit(self.format(record))
        except RuntimeError:  # the window is gone
            pass


# ----------------------------------------------------------------------------------------------------------------
# Jobs dock

class JobsPanel(QWidget):
    """Every job of this session: name, state, progress bar, message or error, a cancel button, details."""

    COLUMNS = ("Job", "State", "Progress", "Message", "")

    def __init__(self, runner: JobRunner, parent=None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.tree = QTreeWidget(self)
        self.tree.setColumnCount(len(self.COLUMNS))
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        header.setStretchLastSection(False)
        self.tree.setColumnWidth(0, 230)
        self.tree.setColumnWidth(1, 80)
        self.tree.setColumnWidth(2, 130)
        self.tree.setColumnWidth(4, 160)
        self.tree.setMinimumHeight(48)
        self.tree.itemDoubleClicked.connect(lambda item, col: self.show_details(item.data(0, Qt.ItemDataRole.UserRole)))
        self.clear_button = QPushButton("Clear finished", self)
        self.clear_button.clicked.connect(self.clear_finished)
        self.cancel_all_button = QPushButton("Cancel all", self)
        self.cancel_all_button.clicked.connect(self.runner.cancel_all)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_all_button)
        buttons.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.tree, 1)
        layout.addLayout(buttons)
        self.items: dict[int, QTreeWidgetItem] = {}
        self.bars: dict[int, QProgressBar] = {}
        self.cancel_buttons: dict[int, QPushButton] = {}
        self.details_buttons: dict[int, QPushButton] = {}
        self._t0: dict[int, float] = {}
        runner.started.connect(self.on_started)
        runner.progress.connect(self.on_progress)
        runner.finished.connect(self.on_finished)

    def add_job(self, job: Job) -> None:
        item = QTreeWidgetItem([job.name, job.state.value, "", "waiting for the previous job" if
                                not self.runner.idle else "", ""])
        item.setData(0, Qt.ItemDataRole.UserRole, job.id)
        item.setToolTip(0, job.name)
        self.tree.insertTopLevelItem(0, item)
        bar = QProgressBar(self.tree)
        bar.setRange(0, 1000)
        bar.setValue(0)
        bar.setTextVisible(True)
        bar.setFormat("%p%")
        bar.setMaximumHeight(18)
        self.tree.setItemWidget(item, 2, bar)
        cell = QWidget(self.tree)
        row = QHBoxLayout(cell)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        cancel = QPushButton("Cancel", cell)
        cancel.setToolTip("Stop this job at its next safe point; results stored earlier are kept.")
        cancel.clicked.connect(lambda _=False, jid=job.id: self.runner.cancel(jid))
        details = QPushButton("Details…", cell)
        details.setToolTip("Show the full technical details (traceback) of this error.")
        details.setVisible(False)
        details.clicked.connect(lambda _=False, jid=job.id: self.show_details(jid))
        row.addWidget(cancel)
        row.addWidget(details)
        row.addStretch(1)
        self.tree.setItemWidget(item, 4, cell)
        self.items[job.id], self.bars[job.id] = item, bar
        self.cancel_buttons[job.id], self.details_buttons[job.id] = cancel, details

    def on_started(self, job: Job) -> None:
        self._t0[job.id] = time.monotonic()
        item = self.items.get(job.id)
        if item is not None:
            item.setText(1, "running")
            item.setText(3, "")

    def on_progress(self, job_id: int, fraction: float, message: str) -> None:
        if job_id in self.bars:
            self.bars[job_id].setValue(int(round(fraction * 1000)))
            self.items[job_id].setText(3, message)
            self.items[job_id].setToolTip(3, message)

    def on_finished(self, job: Job) -> None:
        item = self.items.get(job.id)
        if item is None:
            return
        item.setText(1, job.state.value)
        colour = STATE_COLOURS.get(job.state)
        if colour:
            from PySide6.QtGui import QBrush, QColor

            item.setForeground(1, QBrush(QColor(colour)))
            if job.state == JobState.FAILED:
                item.setForeground(3, QBrush(QColor(colour)))
        if job.state == JobState.DONE:
            text = "Done" + (f" in {self._elapsed(job):.1f} s" if job.id in self._t0 else "")
        else:
            text = job.error or job.message or job.state.value
        item.setText(3, " ".join(str(text).split()))
        item.setToolTip(3, str(text))
        if job.state == JobState.DONE:
            self.bars[job.id].setValue(1000)
        else:  # a failed or cancelled job's bar does not stay where it stopped (e.g. at 10%)
            self.bars[job.id].setValue(0)
            self.bars[job.id].setFormat(job.state.value)
        self.cancel_buttons[job.id].setEnabled(False)
        self.details_buttons[job.id].setVisible(bool(job.details) or job.state == JobState.FAILED)

    def _elapsed(self, job: Job) -> float:
        return time.monotonic() - self._t0.get(job.id, time.monotonic())

    def state_text(self, job_id: int) -> str:
        item = self.items.get(job_id)
        return item.text(1) if item is not None else ""

    def message_text(self, job_id: int) -> str:
        item = self.items.get(job_id)
        return item.text(3) if item is not None else ""

    def show_details(self, job_id) -> None:
        job = self.runner.job(int(job_id)) if job_id is not None else None
        if job is None:
            return
        box = QMessageBox(self)
        box.setWindowTitle(f"Job: {job.name}")
        box.setIcon(QMessageBox.Icon.Critical if job.state == JobState.FAILED else QMessageBox.Icon.Information)
        box.setText(job.error or job.message or job.state.value)
        if job.details:
            box.setDetailedText(job.details)
        box.open()

    def clear_finished(self) -> None:
        for job_id, item in list(self.items.items()):
            job = self.runner.job(job_id)
            if job is not None and job.state.finished:
                self.tree.takeTopLevelItem(self.tree.indexOfTopLevelItem(item))
                for d in (self.items, self.bars, self.cancel_buttons, self.details_buttons):
                    d.pop(job_id, None)


# ----------------------------------------------------------------------------------------------------------------
# Settings dialog

class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("FairDesk settings")
        self.settings = settings
        form = QFormLayout(self)
        self.threads = QSpinBox(self)
        self.threads.setRange(1, max(1, os.cpu_count() or 1) * 2)
        self.threads.setValue(settings.threads)
        self.threads.setToolTip("Threads used by torch and scikit-learn while training (1 keeps the computer "
                                "responsive).")
        self.n_boot = QSpinBox(self)
        self.n_boot.setRange(100, 100000)
        self.n_boot.setSingleStep(100)
        self.n_boot.setValue(settings.n_boot)
        self.n_boot.setToolTip("Bootstrap replicates of a new audit (1,000 is the default).")
        self.suppress_k = QSpinBox(self)
        self.suppress_k.setRange(1, 1000)
        self.suppress_k.setValue(settings.suppress_k)
        self.suppress_k.setToolTip("In PDF reports, counts below k are printed as '<k' (small-cell suppression).")
        form.addRow("Training threads", self.threads)
        form.addRow("Bootstrap replicates (default)", self.n_boot)
        form.addRow("Small-cell threshold k (reports)", self.suppress_k)
        form.addRow(self._executor_box(settings))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _executor_box(self, settings: Settings) -> QGroupBox:
        """Settings › Executor: where audits run their tasks — this process, or a Dask cluster at an
        address (or local:N); "Test connection" asks the cluster and says how many workers it sees."""
        box = QGroupBox("Executor", self)
        lay = QFormLayout(box)
        self.executor_kind = QComboBox(box)
        self.executor_kind.addItem("Local (this process)", "local")
        self.executor_kind.addItem("Dask cluster", "dask")
        self.executor_kind.setCurrentIndex(max(0, self.executor_kind.findData(settings.executor)))
        self.scheduler = QLineEdit(settings.scheduler, box)
        self.scheduler.setPlaceholderText("tcp://HOST:8786 or local:4")
        self.scheduler.setToolTip("The Dask scheduler's address, or local:N for N worker processes on this "
                                  "computer. The results are the same on any executor.")
        self.test_connection = QPushButton("Test connection", box)
        self.test_connection.clicked.connect(self.probe_executor)
        self.workers_seen = QLabel("Workers seen: –", box)
        self.workers_seen.setWordWrap(True)
        self.workers_seen.setMinimumWidth(320)
        lay.addRow("Run tasks on", self.executor_kind)
        lay.addRow("Scheduler", self.scheduler)
        lay.addRow(self.test_connection, self.workers_seen)
        self.executor_kind.currentIndexChanged.connect(self._executor_changed)
        self._executor_changed()
        self._probe_timer = QTimer(self, interval=100, timeout=self._probe_poll)
        self._probe_result: list = []
        return box

    def _executor_changed(self) -> None:
        dask = self.executor_kind.currentData() == "dask"
        self.scheduler.setEnabled(dask)
        self.test_connection.setEnabled(dask)

    def executor_spec(self):
        from fairdesk.core.executor import ExecutorSpec

        kind = self.executor_kind.currentData()
        return ExecutorSpec(kind, self.scheduler.text() if kind == "dask" else None)

    def probe_executor(self) -> None:
        """Test the connection in a thread (a cluster can take seconds to answer); the label shows what it saw."""
        import threading

        try:
            spec = self.executor_spec()
        except FairDeskError as err:
            self.workers_seen.setText(str(err))
            return
        self.test_connection.setEnabled(False)
        self.workers_seen.setText(f"Asking {spec.scheduler}…")
        self._probe_result = []

        def ask() -> None:
            from fairdesk.core.executor import probe

            try:
                self._probe_result.append(probe(spec))
            except Exception as err:  # noqa: BLE001 — one sentence to the user, whatever failed
                self._probe_result.append(err)

        threading.Thread(target=ask, daemon=True).start()
        self._probe_timer.start()

    def _probe_poll(self) -> None:
        if not self._probe_result:
            return
        self._probe_timer.stop()
        self.test_connection.setEnabled(True)
        got = self._probe_result[0]
        if isinstance(got, Exception):
            self.workers_seen.setText(f"No connection: {got}")
        else:
            self.workers_seen.setText(f"Workers seen: {got['workers']} ({got['threads']} threads) at "
                                      f"{got['scheduler']}, answered in {got['seconds']:g} s")

    def accept(self) -> None:
        try:
            spec = self.executor_spec()
        except FairDeskError as err:
            self.workers_seen.setText(str(err))
            return
        self.settings.executor, self.settings.scheduler = spec.kind, spec.scheduler or self.scheduler.text()
        self.settings.threads = self.threads.value()
        self.settings.n_boot = self.n_boot.value()
        self.settings.suppress_k = self.suppress_k.value()
        super().accept()


# ----------------------------------------------------------------------------------------------------------------

class MainWindow(QMainWindow):
    """The FairDesk main window."""

    project_changed = Signal()  # a project was opened, or something was stored in it

    SHUTDOWN_TIMEOUT_MS = 15000
    WARM_UP_MS = 1000  # after start-up: the window paints first
    SWITCH_INTERVAL_S = 0.001

    def __init__(self, project: str | Path | None = None, settings: Settings | None = None) -> None:
        super().__init__()
        self.setWindowTitle(APP_NAME)
        self.settings = settings or Settings()
        self.project: Project | None = None
        #: audits deleted from the open project (File › Manage audits…), restorable until another project opens
        self.deleted_audits: list = []
        # the job and view threads run Python too: let the Qt thread take the interpreter back within 1 ms instead
        # of CPython's 5 ms, each time it returns from Qt (a repaint makes hundreds of such returns)
        sys.setswitchinterval(min(sys.getswitchinterval(), self.SWITCH_INTERVAL_S))
        self.runner = JobRunner(self)
        #: a second runner of the same kind for reading stored results: the pages read, check and parse an audit's
        #: document and prepare their views' data there, so showing an audit never waits for a running job (and the
        #: Qt thread only fills widgets); its jobs do not appear in the Jobs dock
        #: the Qt thread's work goes first: while it fills a page (``foreground.busy()``: a refresh, a slice of a
        #: results view, a form's fill, opening a project) the view thread's reads wait at their next
        #: ``yield_point`` (each member of a document decoded, each table parsed, each step of a read) instead of
        #: making it wait for the interpreter lock at every return from Qt
        self.foreground = Foreground()
        self.views = JobRunner(self, log_level=logging.DEBUG,
                               thread_init=lambda: set_yield_hook(self.foreground.wait))
        self._callbacks: dict[int, tuple[Callable | None, Callable | None]] = {}
        #: the pages' refreshes on a project change (see refresh_on_project), those still to run, and the pages'
        #: reads in the view runner (``ViewRead``): ``refreshing`` is true while any of these is pending
        self._refreshes: list[tuple[QWidget, Callable]] = []
        self._pending_refreshes: list[tuple[QWidget, Callable]] = []
        self.reads: list = []
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(0)
        self._refresh_timer.timeout.connect(self._refresh_next)
        self.project_changed.connect(self._project_changed)
        self._closed = False
        self._compacted = False
        self._to_polish: list[QWidget] = []  # pages not polished yet (see _polish_next)
        self._readers_job: Job | None = None  # loading the readers after start-up (see _warm_up)
        self._prebuild = None  # the pages' plots still to build after start-up (see _readers_loaded)
        self._warming = True  # until the pages' plots are built (or cannot be: see warming_up)
        try:
            self._build(project)
        except BaseException:
            self.runner.shutdown(2000)  # never leave a running QThread behind a half-built window
            self.views.shutdown(2000)
            raise

    def _build(self, project) -> None:
        from fairdesk.core.kinds import resolve
        from fairdesk.gui.tabs.base import audit_pages
        from fairdesk.gui.tabs.dataset import DatasetTab
        from fairdesk.gui.tabs.model import ModelTab

        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.dataset_tab = DatasetTab(self)
        self.model_tab = ModelTab(self)
        self.pages: dict[str, QTabWidget] = {}
        for key, title, first, first_title in (("dataset", "Dataset", self.dataset_tab, "Tables"),
                                               ("model", "Model", self.model_tab, "Tabular"),
                                               ("audit", "Audit", None, None)):
            pages = QTabWidget(self)
            pages.setObjectName(f"{key}_pages")
            pages.currentChanged.connect(self._refresh_visible)
            if first is not None:
                pages.addTab(first, first_title)
            self.pages[key] = pages
            self.tabs.addTab(pages, title)
        placed_later = []  # pages placed after an audit kind's page: added once those are there
        for key, title, ref, attr, *after in EXTRA_PAGES:
            if after:
                placed_later.append((key, title, ref, attr, after[0]))
            else:
                self._add_page(key, title, resolve(ref)(self), attr)
        # one page per audit kind, in the registry's order: the group audit's page ("Group gaps") comes first
        for cls in audit_pages():
            self._add_page(cls.TAB, cls.TITLE, cls(self), cls.ATTR, after=cls.AFTER)
        for key, title, ref, attr, after in placed_later:
            self._add_page(key, title, resolve(ref)(self), attr, after=after)
        self.setCentralWidget(self.tabs)
        self.tabs.currentChanged.connect(self._refresh_visible)
        # a layout request that changes nothing of a tab widget's own no longer repaints all it holds
        self.tab_gate = gate_tab_repaints(self)

        self.jobs_panel = JobsPanel(self.runner, self)
        self.jobs_dock = QDockWidget("Jobs", self)
        self.jobs_dock.setObjectName("jobs_dock")
        self.jobs_dock.setWidget(self.jobs_panel)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.jobs_dock)
        self.log_view = QPlainTextEdit(self)
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(5000)
        self.log_dock = QDockWidget("Log", self)
        self.log_dock.setObjectName("log_dock")
        self.log_dock.setWidget(self.log_view)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        self.tabifyDockWidget(self.jobs_dock, self.log_dock)
        self.jobs_dock.raise_()
        self.resizeDocks([self.jobs_dock], [self.dock_height()], Qt.Orientation.Vertical)
        self._log_handler = QtLogHandler()
        self._log_handler.emitter.message.connect(self.log_view.appendPlainText)
        for name in ("fairdesk",):
            logger = logging.getLogger(name)
            logger.addHandler(self._log_handler)
            if logger.level == logging.NOTSET or logger.level > logging.INFO:
                logger.setLevel(logging.INFO)

        self.status_progress = QProgressBar(self)
        self.status_progress.setRange(0, 1000)
        self.status_progress.setMaximumWidth(220)
        self.status_progress.setVisible(False)
        self.statusBar().addPermanentWidget(self.status_progress)
        self.project_label = QLabel("No project open", self)
        self.statusBar().addPermanentWidget(self.project_label)

        self.runner.started.connect(self._on_job_started)
        self.runner.progress.connect(self._on_job_progress)
        self.runner.finished.connect(self._on_job_finished)

        self._build_menus()
        # once the window is up, the view thread loads what reading and drawing stored results needs (the schema
        # validator, the audit and report modules, pyqtgraph), so the Qt thread never waits for those imports
        QTimer.singleShot(self.WARM_UP_MS, self._warm_up)
        geometry = self.settings.geometry()
        if geometry is not None:
            self.restoreGeometry(geometry)
        self.fit_to_screen(restored=geometry is not None)
        self.statusBar().showMessage("Create or open a project (File menu), then load a dataset.", 8000)
        if project is not None:
            self.open_project(project)
        else:
            self._update_project_state()

    def _warm_up(self) -> None:
        if not self.views.closing:
            # the job is known and the slot connected before it is queued: the worker may finish it (the readers
            # already imported, e.g. a second window in one process) before submit returns, and a signal emitted
            # with no receiver yet is lost (the window then stayed "warming up" for ever)
            self._readers_job = Job("Load the readers of results", warm_up_readers)
            self.views.finished.connect(self._readers_loaded)
            self.views.submit(self._readers_job)
        else:
            self._warming = False
        self._to_polish = [pages.widget(i) for pages in self.pages.values() for i in range(pages.count())]
        QTimer.singleShot(0, self._polish_next)

    def _readers_loaded(self, job) -> None:
        """The readers are loaded (pyqtgraph imported): build the pages' plot widgets ahead of their first audit, one
        per turn of the event loop (``AuditPage.prebuild_steps``), so that opening a project does not (a plot widget
        costs the Qt thread 15–40 ms; the Group gaps page has five)."""
        if self._readers_job is None or job.id != self._readers_job.id:
            return
        self.views.finished.disconnect(self._readers_loaded)
        self._readers_job = None
        if job.state != JobState.DONE or self._closed:
            self._warming = False
            return
        from fairdesk.gui.tabs.base import AuditPage

        pages = [page for pages in self.pages.values() for i in range(pages.count())
                 if isinstance(page := pages.widget(i), AuditPage)]
        self._prebuild = (step for page in pages for step in page.prebuild_steps())
        QTimer.singleShot(0, self._prebuild_next)

    def _prebuild_next(self) -> None:
        if self._prebuild is None or self._closed:
            self._warming = False
            return
        try:
            next(self._prebuild)
        except StopIteration:
            self._prebuild, self._warming = None, False
            return
        except Exception:  # noqa: BLE001 - a plot not built ahead is built when first shown
            log.exception("building the pages' plots ahead failed")
            self._prebuild, self._warming = None, False
            return
        QTimer.singleShot(0, self._prebuild_next)

    @property
    def warming_up(self) -> bool:
        """True until the work after start-up is done: the readers loaded, every page polished and its plots built
        (the heartbeat benchmark starts measuring after it)."""
        return self._warming or bool(self._to_polish)

    def _polish_next(self) -> None:
        """Apply the style to every widget of one page per turn of the event loop (``ensurePolished``), so that
        showing a page the first time does not (on the Audit tab, a fifth of its first show's 140 ms of CPU)."""
        if self._to_polish and not self._closed:
            for widget in self._to_polish.pop(0).findChildren(QWidget):
                widget.ensurePolished()
            QTimer.singleShot(0, self._polish_next)

    def _add_page(self, tab: str, title: str, widget: QWidget, attr: str, after: str | None = None) -> None:
        """Put ``widget`` on ``tab`` (after the page titled ``after``, else last) as ``self.<attr>``."""
        setattr(self, attr, widget)
        pages = self.pages[tab]
        titles = [pages.tabText(i) for i in range(pages.count())]
        if after in titles:
            pages.insertTab(titles.index(after) + 1, widget, title)
        else:
            pages.addTab(widget, title)

    # ---- menus ---------------------------------------------------------------------------------------------
    def _build_menus(self) -> None:
        menu = self.menuBar().addMenu("&File")
        self.action_new = QAction("&New project…", self, shortcut=QKeySequence.StandardKey.New,
                                  triggered=lambda: self.new_project())
        self.action_open = QAction("&Open project…", self, shortcut=QKeySequence.StandardKey.Open,
                                   triggered=lambda: self.open_project())
        self.recent_menu = menu.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        self.action_open_data = QAction("Open &dataset (CSV/Parquet)…", self,
                                        triggered=lambda: (self.show_page(self.dataset_tab),
                                                           self.dataset_tab.open_file()))
        self.action_export = QAction("&Export report (PDF)…", self, shortcut="Ctrl+E",
                                     triggered=lambda: self.export_report())
        self.action_export_html = QAction("Export report (&HTML)…", self, triggered=lambda: self.export_report("html"))
        self.action_demo = QAction("Open the &demo project", self, triggered=lambda: self.open_demo())
        self.action_quit = QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit, triggered=self.close)
        menu.insertAction(self.recent_menu.menuAction(), self.action_new)
        menu.insertAction(self.recent_menu.menuAction(), self.action_open)
        menu.addSeparator()
        menu.addAction(self.action_open_data)
        menu.addAction(self.action_export)
        menu.addAction(self.action_export_html)
        self.action_manage = QAction("&Manage audits (rename, delete, compare)…", self,
                                     triggered=lambda: self.manage_audits())
        menu.addAction(self.action_manage)
        menu.addAction(self.action_demo)
        menu.addSeparator()
        menu.addAction(self.action_quit)
        settings_menu = self.menuBar().addMenu("&Settings")
        self.action_settings = QAction("&Preferences…", self, triggered=self.edit_settings)
        settings_menu.addAction(self.action_settings)
        view = self.menuBar().addMenu("&View")
        view.addAction(self.jobs_dock.toggleViewAction())
        view.addAction(self.log_dock.toggleViewAction())
        help_menu = self.menuBar().addMenu("&Help")
        self.action_guide = QAction("&User guide", self, shortcut=QKeySequence.StandardKey.HelpContents,
                                    triggered=lambda: self.show_guide())
        help_menu.addAction(self.action_guide)
        self.action_about = QAction("&About FairDesk", self, triggered=self.show_about)
        help_menu.addAction(self.action_about)

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = [p for p in self.settings.recent_projects() if Path(p).exists()]
        for path in recent:
            self.recent_menu.addAction(QAction(path, self.recent_menu, triggered=lambda _=False, p=path:
                                               self.open_project(p)))
        if not recent:
            action = self.recent_menu.addAction("(none)")
            action.setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction(QAction("Clear list", self.recent_menu,
                                               triggered=self.settings.clear_recent_projects))

    def export_report(self, fmt: str = "pdf"):
        """Export the report (PDF, or HTML with ``fmt="html"``) of the audit shown on the page in front (an audit
        kind's page), else of the Group gaps page."""
        from fairdesk.gui.tabs.base import AuditPage

        page = self.current_page()
        return (page if isinstance(page, AuditPage) else self.audit_tab).export_file(fmt)

    def edit_settings(self) -> None:
        dialog = SettingsDialog(self.settings, self)
        if dialog.exec():
            self.audit_tab.apply_settings()
            self.statusBar().showMessage("Settings saved.", 4000)

    def about_text(self) -> str:
        from importlib import metadata

        from fairdesk.core.text.madlibs import MADLIBS_ATTRIBUTION

        try:
            version = metadata.version("fairdesk")
        except metadata.PackageNotFoundError:
            version = "development"
        rows = "".join(f"<tr><td>{html_text(n)}</td><td>&nbsp;&nbsp;{html_text(lic)}</td></tr>"
                       for n, lic in LICENCES)
        return (f"<h3>FairDesk {html_text(version)}</h3><p>Offline fairness audits of medical machine-learning "
                "models. Nothing leaves this computer: FairDesk opens no network connection.</p>"
                f"<p><b>Licences</b></p><table>{rows}</table>"
                "<p>The demo cohort is generated from a seed; it contains no patient data.</p>"
                f"<p><b>Attribution</b><br>{html_text(MADLIBS_ATTRIBUTION)}</p>")

    def show_about(self) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("About FairDesk")
        box.setTextFormat(Qt.TextFormat.RichText)
        box.setText(self.about_text())
        box.open()

    def show_guide(self):
        """Help › User guide: the guide shipped with the app, offline."""
        from fairdesk.gui.widgets.guide import GuideDialog

        dialog = GuideDialog(self)
        dialog.open()
        return dialog

    def manage_audits(self):
        """File › Manage audits…: rename, delete (undo until the project closes) and compare stored audits."""
        from fairdesk.gui.widgets.audits_dialog import ManageAuditsDialog

        if self.require_project() is None:
            return None
        dialog = ManageAuditsDialog(self)
        dialog.open()
        return dialog

    #: the window's size when the screen has room for it
    PREFERRED_SIZE = (1360, 880)
    #: room kept for the window manager's title bar and frame, which Qt only knows once the window is shown
    FRAME_ALLOWANCE = (6, 40)

    def fit_to_screen(self, restored: bool = False) -> None:
        """Open inside the screen's available area (task bars and docks excluded): the preferred size or less, so
        the status bar is on screen at 1366×768; a restored geometry from a larger screen is brought inside too."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            self.resize(*self.PREFERRED_SIZE)
            return
        area = screen.availableGeometry()
        fw, fh = self.FRAME_ALLOWANCE
        width = min(self.width() if restored else self.PREFERRED_SIZE[0], area.width() - fw)
        height = min(self.height() if restored else self.PREFERRED_SIZE[1], area.height() - fh)
        self.resize(max(width, 640), max(height, 480))
        x = min(max(self.x(), area.left()), area.right() - self.width() - fw) if restored else \
            area.left() + (area.width() - self.width() - fw) // 2
        y = min(max(self.y(), area.top()), area.bottom() - self.height() - fh) if restored else \
            area.top() + (area.height() - self.height() - fh) // 2
        self.move(max(x, area.left()), max(y, area.top()))

    # ---- projects ------------------------------------------------------------------------------------------
    def new_project(self, path: str | Path | None = None) -> Project | None:
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "New FairDesk project",
                                                  str(Path(self.settings.last_dir()) / f"audit{SUFFIX}"),
                                                  f"FairDesk projects (*{SUFFIX})")
            if not path:
                return None
        path = Path(path)
        if path.suffix != SUFFIX:
            path = path.with_name(path.name + SUFFIX)
        return self.open_project(path, create=True)

    def open_project(self, path: str | Path | None = None, *, create: bool = False) -> Project | None:
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Open FairDesk project", self.settings.last_dir(),
                                                  f"FairDesk projects (*{SUFFIX});;All files (*)")
            if not path:
                return None
        try:
            project = Project(path, create=create)
        except FairDeskError as err:
            self.show_error("Could not open the project", str(err))
            return None
        with self.foreground.busy():
            if self.project is None or self.project.path != project.path:
                self.deleted_audits = []  # the project they belonged to is closed: their undo ends here
            self.project = project
            self.settings.add_recent_project(project.path)
            self.settings.set_last_dir(project.path)
            log.info("opened project %s", project.path)
            self.statusBar().showMessage(f"Opened project {project.path}", 6000)
            self._update_project_state()
            self.project_changed.emit()
        return project

    def _update_project_state(self) -> None:
        if self.project is None:
            self.setWindowTitle(APP_NAME)
            self.project_label.setText("No project open")
        else:
            self.setWindowTitle(f"{self.project.name} — {APP_NAME}")
            self.project_label.setText(f"Project: {self.project.path}")
        self.action_export.setEnabled(self.project is not None)
        self.action_manage.setEnabled(self.project is not None)
        self.action_export_html.setEnabled(self.project is not None)

    def require_project(self) -> Project | None:
        """The open project; asks the user to create one when none is open."""
        if self.project is not None:
            return self.project
        answer = QMessageBox.question(self, "No project open",
                                      "Results are kept in a project file. Create a new project now?")
        if answer == QMessageBox.StandardButton.Yes:
            return self.new_project()
        return None

    def notify_project_changed(self, page: QWidget | None = None) -> None:
        """Something was stored in the project: the pages refresh (see :meth:`refresh_on_project`); ``page`` (the
        one that stored it, going on with its refreshed form) at once, even when it is not on screen."""
        self.project_changed.emit()
        for entry in [e for e in self._pending_refreshes if e[0] is page]:
            self._pending_refreshes.remove(entry)
            entry[1]()

    # ---- refreshing the pages when the project changes ------------------------------------------------------
    def refresh_on_project(self, widget: QWidget, refresh: Callable[[], None]) -> None:
        """Run ``refresh()`` (``widget``'s refill from the project) whenever the project changes: at once while
        ``widget`` is on screen, else queued, one page per turn of the event loop (a page brought to the front
        first) — so opening a project or storing something never refreshes every page in one stretch of the Qt
        thread."""
        self._refreshes.append((widget, refresh))

    @property
    def refreshing(self) -> bool:
        """True while a page's refresh after a project change, or a page's read in the view runner, is pending."""
        return bool(self._pending_refreshes) or any(read.busy for read in self.reads)

    def _project_changed(self) -> None:
        self._pending_refreshes = list(self._refreshes)
        self._refresh_visible()
        if self._pending_refreshes:
            self._refresh_timer.start()

    def _refresh_visible(self, *args) -> None:
        for entry in [e for e in self._pending_refreshes if e[0].isVisible()]:
            if entry in self._pending_refreshes:  # (a refresh may change the project again)
                self._pending_refreshes.remove(entry)
                with self.foreground.busy():
                    entry[1]()

    def _refresh_next(self) -> None:
        if not self._pending_refreshes:
            return
        try:
            with self.foreground.busy():
                self._pending_refreshes.pop(0)[1]()
        finally:
            if self._pending_refreshes:
                self._refresh_timer.start()

    def show_page(self, widget: QWidget) -> None:
        """Bring ``widget`` (a sub-page of the Dataset, Model or Audit tab) to the front."""
        for pages in self.pages.values():
            index = pages.indexOf(widget)
            if index >= 0:
                self.tabs.setCurrentWidget(pages)
                pages.setCurrentIndex(index)
                return
        raise ValueError("not a page of this window")

    def current_page(self) -> QWidget | None:
        """The sub-page in front (e.g. ``window.audit_tab``)."""
        pages = self.tabs.currentWidget()
        return pages.currentWidget() if isinstance(pages, QTabWidget) else pages

    # ---- demo ----------------------------------------------------------------------------------------------
    def open_demo(self, out_dir: str | Path | None = None, *, n_boot: int = 1000, n_stays: int = 8000,
                  seed: int = 0) -> Job | None:
        """Open the bundled demo project; build it first (as a job) unless it already exists."""
        from fairdesk.jobs.demo import DEMO_PROJECT

        out = Path(out_dir) if out_dir else paths.data_dir() / "demo"
        project_file = out / DEMO_PROJECT
        if project_file.exists():
            self.open_project(project_file)
            self.show_page(self.audit_tab)
            return None
        staging = out.with_name(f"{out.name}.building-{os.getpid()}-{int(time.time())}")

        def build(progress, cancel):
            from fairdesk.jobs.demo import run_demo

            try:
                result = run_demo(staging, n_boot=n_boot, seed=seed, n_stays=n_stays, progress=progress,
                                  cancel=cancel)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)  # only the staging folder this job created
                raise
            staging.rename(out)  # the demo appears whole or not at all
            return {k: (out / Path(v).name if isinstance(v, Path) else v) for k, v in result.items()}

        def done(job: Job) -> None:
            self.open_project(project_file)
            self.show_page(self.audit_tab)
            self.statusBar().showMessage("Demo project ready: choose an audit on the Audit tab.", 8000)

        return self.run_job("Build the demo project", build, on_done=done)

    # ---- jobs ----------------------------------------------------------------------------------------------
    def run_job(self, name: str, fn: Callable, *, on_done: Callable[[Job], None] | None = None,
                on_fail: Callable[[Job], None] | None = None) -> Job:
        """Queue ``fn(progress, cancel)`` on the worker thread; ``on_done``/``on_fail`` run in the GUI thread."""
        job = Job(name, fn)
        self._callbacks[job.id] = (on_done, on_fail)
        self.jobs_panel.add_job(job)
        self.runner.submit(job)
        log.info("queued job %d: %s", job.id, name)
        return job

    def _on_job_started(self, job: Job) -> None:
        self.status_progress.setVisible(True)
        self.status_progress.setValue(0)
        self.statusBar().showMessage(f"Running: {job.name}")

    def _on_job_progress(self, job_id: int, fraction: float, message: str) -> None:
        self.status_progress.setValue(int(round(fraction * 1000)))
        if message:
            job = self.runner.job(job_id)
            self.statusBar().showMessage(f"{job.name if job else 'Job'}: {message}")

    def _on_job_finished(self, job: Job) -> None:
        on_done, on_fail = self._callbacks.pop(job.id, (None, None))
        if self.runner.idle:
            self.status_progress.setVisible(False)
        if job.state == JobState.DONE:
            self.statusBar().showMessage(f"Done: {job.name}", 6000)
        elif job.state == JobState.CANCELLED:
            self.statusBar().showMessage(f"Cancelled: {job.name}. Earlier results are kept.", 10000)
        else:
            self.statusBar().showMessage(f"Failed: {job.name} — {' '.join(str(job.error).split())}", 20000)
            log.warning("job %d '%s' failed: %s", job.id, job.name, job.error)
            self.jobs_dock.show()
            self.jobs_dock.raise_()
        self.resizeDocks([self.jobs_dock], [self.dock_height()], Qt.Orientation.Vertical)
        if self._closed:
            return
        try:
            if job.state == JobState.DONE and on_done is not None:
                on_done(job)
            elif job.state != JobState.DONE and on_fail is not None:
                on_fail(job)
        except Exception as err:  # noqa: BLE001 - a slot must not take the app down
            log.exception("showing the result of '%s' failed", job.name)
            self.statusBar().showMessage(f"Could not show the result of {job.name}: {err}", 20000)

    def dock_height(self) -> int:
        """The Jobs dock's height: smaller on a small screen (a 768-pixel-high window keeps room for the pages)."""
        return 170 if self.height() >= 900 else 105

    #: below this window height the Jobs and Log docks start hidden (View menu; a failed job shows the Jobs dock;
    #: the status bar shows a running job's progress), so a 768-pixel screen keeps its height for the pages
    COMPACT_HEIGHT = 850

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if event.oldSize().height() <= 0 or (event.oldSize().height() >= 900) != (self.height() >= 900):
            self.resizeDocks([self.jobs_dock], [self.dock_height()], Qt.Orientation.Vertical)
        if self.height() < self.COMPACT_HEIGHT and not self._compacted:
            self._compacted = True  # once: docks the user shows again stay shown
            self.jobs_dock.hide()
            self.log_dock.hide()

    def show_error(self, title: str, message: str) -> None:
        log.warning("%s: %s", title, message)
        self.statusBar().showMessage(f"{title}: {' '.join(message.split())}", 20000)
        box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok, self)
        box.open()

    # ---- closing -------------------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if not self._closed:
            self._closed = True
            busy = not self.runner.idle
            if busy:
                self.statusBar().showMessage("Cancelling the running job before closing…")
                QApplication.processEvents()
            self.settings.set_geometry(self.saveGeometry(), self.saveState())
            stopped = self.runner.shutdown(self.SHUTDOWN_TIMEOUT_MS)
            self.views.shutdown(self.SHUTDOWN_TIMEOUT_MS)
            if not stopped:
                log.warning("a job did not stop in time; FairDesk closes anyway (stored results are intact)")
            logging.getLogger("fairdesk").removeHandler(self._log_handler)
        event.accept()

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Cancel jobs and stop the workers without closing the window (test teardown)."""
        views = self.views.shutdown(timeout_ms)
        return self.runner.shutdown(timeout_ms) and views
