"""Small building blocks shared by the GUI pages (Qt only, cheap imports).

The pages have the same shape: a scrolling set-up column with a Run row (buttons, a progress bar) and a status line
below it, beside the results; a job that reports progress and can be cancelled. These helpers build those parts.
The job slot, the stored-audit list and the PDF export of the audit pages are written once, in
:mod:`fairdesk.gui.tabs.base`.
"""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QProgressBar, QPushButton, QScrollArea, QSplitter,
                               QTabWidget, QVBoxLayout, QWidget)

PROGRESS_STEPS = 1000  # the progress bars run 0..1000; job progress comes as a fraction 0..1
NOTE_STYLE = "color: palette(mid);"


# ---- small widgets ---------------------------------------------------------------------------------------------

class FitLabel(QLabel):
    """A word-wrapped label whose minimum height is what its text needs at its width. A plain wrapped label reports
    a line or so as its minimum; a layout short of room then gave it its lines anyway and squeezed the plot or the
    splitter beside it below their minimum (a plot lost its x-axis under a table)."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        hint = super().minimumSizeHint()
        # only once shown and laid out: a label on a hidden tab has no width of its own yet (a narrow default would
        # ask for a very tall minimum, and a tab widget's minimum is that of its tallest page)
        if self.isVisible() and self.width() > 0 and self.text():
            hint.setHeight(max(hint.height(), self.heightForWidth(self.width())))
        return hint

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self.updateGeometry()


def fill_combo(combo: QComboBox, items: list[tuple[str, object]], keep: bool = True, default=None) -> None:
    """Replace a combo's ``(text, data)`` items without emitting signals; keep the current choice when it is still
    there, else choose ``default`` (when given and present), else the first item."""
    current = combo.currentData() if keep else None
    combo.blockSignals(True)
    combo.clear()
    for text, data in items:
        combo.addItem(text, data)
    idx = combo.findData(current) if current is not None else -1
    if idx < 0 and default is not None:
        idx = combo.findData(default)
    combo.setCurrentIndex(idx if idx >= 0 else (0 if items else -1))
    combo.blockSignals(False)
    if combo.sizeAdjustPolicy() == QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon:
        combo.setToolTip(combo.currentText())  # an elided choice is read in full on hover (size_combos)


def predictions_box(parent: QWidget, roles: tuple[tuple[str, str], ...], on_dataset_change):
    """The "Predictions" box of a table audit's form (group gaps, slices): a dataset combo and one combo per column
    role ``(key, label)``. Returns ``(box, its form layout, dataset combo, {key: role combo})``."""
    box = QGroupBox("Predictions", parent)
    form = QFormLayout(box)
    dataset = QComboBox(box)
    dataset.setPlaceholderText("Add a predictions dataset first")
    size_combos(dataset, chars=16, on_change=on_dataset_change)
    form.addRow("Dataset", dataset)
    combos: dict[str, QComboBox] = {}
    for key, text in roles:
        combos[key] = QComboBox(box)
        size_combos(combos[key], chars=12)
        form.addRow(text, combos[key])
    return box, form, dataset, combos


def size_combos(*combos: QComboBox, chars: int | None = None, on_change=None) -> None:
    """Size combos to their contents, or, given ``chars``, let them shrink to about that many characters (longer
    items are elided) rather than grow to their longest item; connect ``on_change`` to ``currentIndexChanged``."""
    for combo in combos:
        if chars is None:
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        else:
            combo.setMinimumContentsLength(chars)
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            # an elided choice is read in full on hover
            combo.currentTextChanged.connect(lambda text, c=combo: c.setToolTip(text))
        if on_change is not None:
            combo.currentIndexChanged.connect(on_change)


def fill_list(widget: QListWidget, items: list[tuple[str, object]]) -> list:
    """Replace a list's ``(text, data)`` items without emitting signals (the data under ``UserRole``); returns the
    data in order."""
    widget.blockSignals(True)
    widget.clear()
    for text, data in items:
        QListWidgetItem(text, widget).setData(Qt.ItemDataRole.UserRole, data)
    widget.blockSignals(False)
    return [data for _, data in items]


def list_data(widget: QListWidget) -> list:
    """The ``UserRole`` data of a list's items, in order."""
    return [widget.item(i).data(Qt.ItemDataRole.UserRole) for i in range(widget.count())]


def created_text(created: str) -> str:
    """A stored record's ISO creation time as ``YYYY-MM-DD HH:MM``."""
    return created.replace("T", " ")[:16]


def wrapped_label(text: str, parent: QWidget | None = None) -> QLabel:
    """A word-wrapping label (status lines, result headers)."""
    label = QLabel(text, parent)
    label.setWordWrap(True)
    return label


def note_label(text: str, parent: QWidget | None = None) -> QLabel:
    """A word-wrapping explanatory note in the palette's muted colour."""
    label = wrapped_label(text, parent)
    label.setStyleSheet(NOTE_STYLE)
    return label


def placeholder_label(text: str, parent: QWidget | None = None, wrap: bool = True) -> QLabel:
    """The centred, muted text that stands in a plot's place until there is something to draw."""
    label = QLabel(text, parent)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    if wrap:
        label.setWordWrap(True)
    label.setStyleSheet(NOTE_STYLE + " padding: 16px;")
    return label


def load_pyqtgraph():
    """pyqtgraph on PySide6 with the pages' plot style; imported on first use (slow to import), never at start-up."""
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True, background="w", foreground="#222222")
    cache_axis_drawings(pg.AxisItem)
    return pg


def cache_axis_drawings(axis_class) -> None:
    """Every pyqtgraph axis keeps its drawing (ticks, labels and the grid it draws across the plot) as a pixmap in
    device coordinates. pyqtgraph replays the axis's recorded drawing at every paint of its view: 20–40 % of a
    results tab's repaint at 1920×1080; Qt redraws the pixmap whenever the axis calls ``update()`` (new
    range, resize, new labels) or the view's transform changes."""
    if getattr(axis_class, "_fairdesk_cached", False):
        return
    from PySide6.QtWidgets import QGraphicsItem

    init = axis_class.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    axis_class.__init__ = __init__
    axis_class._fairdesk_cached = True


def push_button(text: str, parent: QWidget | None, slot, tooltip: str | None = None) -> QPushButton:
    """A button that calls ``slot()`` (without Qt's ``checked`` argument) when clicked."""
    button = QPushButton(text, parent)
    if tooltip:
        button.setToolTip(tooltip)
    button.clicked.connect(lambda: slot())
    return button


def threshold_choice(owner: QWidget, parent: QWidget, best_text: str, fixed_tip: str = ""):
    """The threshold inputs of an audit form: a "Fixed" radio with its spin box (0.001–0.999, enabled only when
    chosen) and a best-F1 radio labelled ``best_text``, exclusive, neither chosen (no silent default).
    Returns ``(fixed_radio, best_radio, spin, button_group, layout)``."""
    from PySide6.QtWidgets import QButtonGroup, QDoubleSpinBox, QGridLayout, QRadioButton

    fixed, best = QRadioButton("Fixed", parent), QRadioButton(best_text, parent)
    if fixed_tip:
        fixed.setToolTip(fixed_tip)
    group = QButtonGroup(owner)
    group.addButton(fixed)
    group.addButton(best)
    spin = QDoubleSpinBox(parent)
    spin.setRange(0.001, 0.999)
    spin.setDecimals(3)
    spin.setSingleStep(0.05)
    spin.setValue(0.5)
    spin.setEnabled(False)
    fixed.toggled.connect(spin.setEnabled)
    grid = QGridLayout()
    grid.addWidget(fixed, 0, 0)
    grid.addWidget(spin, 0, 1)
    grid.addWidget(best, 1, 0, 1, 2)
    return fixed, best, spin, group, grid


def progress_bar(parent: QWidget | None = None) -> QProgressBar:
    bar = QProgressBar(parent)
    bar.setRange(0, PROGRESS_STEPS)
    return bar


# ---- layout ----------------------------------------------------------------------------------------------------

def hrow(parent: QWidget | None, *items, stretch: bool = False) -> QHBoxLayout:
    """A row of widgets: a string stands for a label (``QLabel(text, parent)``), a ``(widget, factor)`` pair is
    added with that stretch factor; ``stretch`` ends the row with a stretch."""
    row = QHBoxLayout()
    for item in items:
        if isinstance(item, str):
            row.addWidget(QLabel(item, parent))
        elif isinstance(item, tuple):
            row.addWidget(*item)
        else:
            row.addWidget(item)
    if stretch:
        row.addStretch(1)
    return row


def run_row(*buttons: QWidget, progress: QProgressBar) -> QHBoxLayout:
    """The Run row: the buttons, then the progress bar taking the rest of the width."""
    row = QHBoxLayout()
    for button in buttons:
        row.addWidget(button)
    row.addWidget(progress, 1)
    return row


class FormScrollArea(QScrollArea):
    """A scroll area that scrolls vertically only and is never narrower than its content's minimum width (so no
    field is cut under the scroll bar on a small screen)."""

    def minimumSizeHint(self):  # noqa: N802 - Qt override
        hint = super().minimumSizeHint()
        inner = self.widget()
        if inner is not None:
            width = (inner.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
                     + 2 * self.frameWidth())
            hint.setWidth(max(hint.width(), width, self.minimumWidth()))
        return hint


def scroll_area(parent: QWidget, inner: QWidget, min_width: int | None = None) -> QScrollArea:
    """A vertical-only scroll area around a set-up form (never narrower than the form's minimum width). A form row
    whose field does not fit beside its label puts the field under the label: a choice with a long text (the group
    audit's multi-group rule) otherwise added the widest label to the form's minimum width, and on a 1366-pixel
    screen the set-up column then left the results too narrow for their tabs."""
    for form in inner.findChildren(QFormLayout):
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    for field in inner.findChildren(QLineEdit):  # so an empty field still shows its hint in full
        if field.placeholderText() and not field.minimumWidth():
            field.setMinimumWidth(field.fontMetrics().horizontalAdvance(field.placeholderText()) + 12)
    scroll = FormScrollArea(parent)
    scroll.setWidgetResizable(True)
    scroll.setWidget(inner)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    if min_width is not None:
        scroll.setMinimumWidth(min_width)
    return scroll


class ResultsScrollArea(QScrollArea):
    """Gives its widget the whole view, or its minimum size when the view is smaller (then it scrolls). A plain
    resizable ``QScrollArea`` sizes a widget holding word-wrapped text to its *preferred* height for the width
    (``heightForWidth``), so a long header or legend made the results scroll and pushed a plot's axis out of view
    while there was room to shrink the plot."""

    def __init__(self, parent: QWidget, inner: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("results_scroll")
        self.setWidgetResizable(False)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setWidget(inner)
        inner.installEventFilter(self)

    def minimum_height(self, width: int) -> int:
        """The results' minimum height at ``width``: their minimum size, plus what each shown word-wrapped label
        needs beyond its own minimum at its width (a tab or a splitter holding wrapped text would report its
        preferred height for the width instead, and the layout squeezes the other parts below their minimum to
        give a wrapped label its lines)."""
        inner = self.widget()
        extra = 0
        for label in inner.findChildren(QLabel):
            if label.wordWrap() and label.isVisibleTo(inner) and label.text():
                extra += max(0, label.heightForWidth(min(label.width() or width, width))
                             - label.minimumSizeHint().height())
        return max(inner.minimumSizeHint().height() + extra, self.laid_out_height(width))

    def laid_out_height(self, width: int) -> int:
        """The height below which the results' own layout squeezes a part under its minimum: a vertical box layout
        gives a part whose height depends on its width (a wrapped label, a panel or tab widget holding one) its
        height for the width as its minimum. The findings panel's lines were missed that way, and at 1366×768 the
        result tabs of Group gaps got 645 px of their 680 and the calibration table covered the reliability
        plot's legend."""
        layout = self.widget().layout()
        if layout is None or not layout.hasHeightForWidth():
            return 0
        margins = layout.contentsMargins()
        inside = width - margins.left() - margins.right()
        need, shown = margins.top() + margins.bottom(), 0
        for i in range(layout.count()):
            item = layout.itemAt(i)
            if item.isEmpty():
                continue
            need += item.heightForWidth(inside) if item.hasHeightForWidth() else item.minimumSize().height()
            shown += 1
        return need + max(0, layout.spacing()) * max(0, shown - 1)

    def fit(self) -> None:
        inner, view = self.widget(), self.viewport().size()
        width = max(view.width(), inner.minimumSizeHint().width())
        size = QSize(width, max(view.height(), self.minimum_height(width)))
        if inner.size() != size:
            inner.resize(size)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.fit()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if obj is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.fit()
        return super().eventFilter(obj, event)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override (as a resizable scroll area: the widget's own hint)
        return self.widget().sizeHint()


def results_scroll(parent: QWidget, inner: QWidget) -> QScrollArea:
    """A frameless scroll area around a results side: it fills the area when there is room and scrolls (either
    way) only below the results' minimum size."""
    return ResultsScrollArea(parent, inner)


def setup_column(parent: QWidget, scroll: QScrollArea, row: QHBoxLayout, status: QLabel,
                 min_width: int | None = None) -> QWidget:
    """The set-up column: the scrolling form, and below it (always in view) the Run row and the status line."""
    column = QWidget(parent)
    v = QVBoxLayout(column)
    v.setContentsMargins(0, 0, 0, 0)
    v.addWidget(scroll, 1)
    v.addLayout(row)
    v.addWidget(status)
    if min_width is not None:  # a floor: never below what the form itself needs
        column.setMinimumWidth(max(min_width, column.minimumSizeHint().width()))
    return column


class AdaptiveSplit(QObject):
    """Keeps a page's splitter side by side while the page is wide enough for the set-up column's minimum beside
    the results' own need — their minimum width and every result tab bar with all its tabs in full — and puts the
    set-up above the results when it is not. Side by side, the results are given at least that need (the set-up
    column gives way first, down to its minimum), without making it a minimum size (the window may still shrink). On a 1366×768 laptop at 150% (a logical 911 px) a 440 px
    form beside the results hid result tabs behind scroll arrows and made the results scroll sideways; with a
    window frame at 100% the group page's tab bar was a few pixels short."""

    def __init__(self, page: QWidget, split: QSplitter, left: QWidget, scroll: QScrollArea,
                 sizes: list[int]) -> None:
        super().__init__(page)
        self.page, self.split, self.left, self.scroll = page, split, left, scroll
        self.share = sizes[0] / max(1, sum(sizes))  # the set-up column's share of the width, side by side
        self._busy = False
        self._placed = False  # the sizes set once the page is first shown
        self._moved = False  # the user moved the handle
        split.splitterMoved.connect(self._handle_moved)
        for watched in (page, split, left):
            watched.installEventFilter(self)
        scroll.widget().installEventFilter(self)

    def results_need(self) -> int:
        """The width the results need: their minimum, and each result tab widget's tabs in full beside its offset
        from the results' edges, plus a vertical scroll bar."""
        inner = self.scroll.widget()
        need = inner.minimumSizeHint().width()
        for tabs in inner.findChildren(QTabWidget):
            if tabs.isHidden() or tabs.count() == 0:
                continue
            corner = sum(c.sizeHint().width() for c in (tabs.cornerWidget(Qt.Corner.TopLeftCorner),
                                                         tabs.cornerWidget(Qt.Corner.TopRightCorner))
                         if c is not None and not c.isHidden())
            offset = tabs.mapTo(inner, tabs.rect().topLeft()).x() if tabs.width() else 0
            need = max(need, tabs.tabBar().sizeHint().width() + corner + 2 * max(offset, 4) + 4)
        return need + self.scroll.verticalScrollBar().sizeHint().width() + 2 * self.scroll.frameWidth()

    def adapt(self) -> None:
        if self._busy or not self.page.isVisible() or self.left.isHidden():
            return  # (a page that hides its set-up for some result tabs gives the results the whole page anyway)
        self._busy = True
        try:
            need = self.results_need()
            room = self.split.width() - self.split.handleWidth()
            wide = room >= self.left.minimumSizeHint().width() + need
            horizontal = Qt.Orientation.Horizontal
            if wide:
                if self.split.orientation() != horizontal or not self._placed:
                    # the set-up column at its preferred width when the results keep their need (its rows then sit
                    # beside their labels), else what is left beside them
                    self.split.setOrientation(horizontal)
                    left = max(self.left.minimumSizeHint().width(),
                               min(max(int(room * self.share), self.left.sizeHint().width()), room - need))
                    self.split.setSizes([left, room - left])
                    self._placed, self._moved = True, False
                elif self.split.sizes()[1] < need:  # (no minimum width: the window may still shrink below it)
                    self.split.setSizes([room - need, need])
            else:
                if self.split.orientation() == horizontal:
                    self.split.setOrientation(Qt.Orientation.Vertical)
                    self._placed = self._moved = False
                if not self._moved:  # two fifths of the height for the set-up until the user moves the handle
                    height = max(1, self.split.height() - self.split.handleWidth())
                    self.split.setSizes([height * 2 // 5, height - height * 2 // 5])
        finally:
            self._busy = False

    def _handle_moved(self, *args) -> None:
        if not self._busy:
            self._moved = True
            self.adapt()  # side by side, the results keep their need

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        kind = event.type()
        if (kind == QEvent.Type.Resize and obj is self.split
                or kind == QEvent.Type.Show and obj in (self.page, self.left)
                or kind == QEvent.Type.LayoutRequest and obj is self.scroll.widget()):
            self.adapt()
        return False


def split_page(page: QWidget, left: QWidget, right: QWidget, sizes: list[int],
               stretch: tuple[int, int] = (0, 1)) -> QSplitter:
    """Lay ``page`` out as a splitter of ``left`` and ``right``, side by side, or one above the other when the page
    is too narrow for both (:class:`AdaptiveSplit`). ``right`` (the results) sits in a scroll area that shows scroll
    bars only when the window is smaller than its minimum (e.g. 1366×768), so a page never forces the window to grow
    nor squeezes a table to a row and a half."""
    split = QSplitter(Qt.Orientation.Horizontal, page)
    split.addWidget(left)
    scroll = results_scroll(page, right)
    split.addWidget(scroll)
    split.setStretchFactor(0, stretch[0])
    split.setStretchFactor(1, stretch[1])
    split.setChildrenCollapsible(False)
    split.setSizes(sizes)
    QVBoxLayout(page).addWidget(split)
    split.adaptive = AdaptiveSplit(page, split, left, scroll, sizes)
    return split


class TabRepaintGate(QObject):
    """Keeps a ``QTabWidget`` from repainting its whole area when a layout request changes nothing of its own.

    Qt's ``QTabWidget`` answers every ``LayoutRequest`` by placing its tab bar and pages again and then repainting
    everything it holds (``setUpLayout`` ends in ``update()``), and ``QLayout::activate`` ends in
    ``updateGeometry()``, so one layout request deep in a page climbs to the window and each tab widget on the way
    (a page's result tabs, the Audit tab, the main tabs) repaints its whole area: a page brought back to the front
    repainted the Audit tab and the main tabs in full three times. The gate lets the tab widget handle the
    request as before — its tab bar and pages placed, its size hints passed up — with its own repaint held, and
    repaints it when the places of its tab bar, its pages or its corner widgets changed (a child that moved or
    changed size repaints itself as before)."""

    def _places(self, tabs: QTabWidget) -> tuple:
        return tuple((w.geometry().getRect(), w.isVisible()) for w in tabs.children() if isinstance(w, QWidget))

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if event.type() != QEvent.Type.LayoutRequest or not isinstance(obj, QTabWidget) or not obj.updatesEnabled():
            return False
        before = self._places(obj)
        obj.setAttribute(Qt.WidgetAttribute.WA_UpdatesDisabled, True)  # (its own update() only; children are not)
        try:
            QTabWidget.event(obj, event)
        finally:
            obj.setAttribute(Qt.WidgetAttribute.WA_UpdatesDisabled, False)
        if self._places(obj) != before:
            obj.update()
        return True


def gate_tab_repaints(root: QWidget) -> TabRepaintGate:
    """Install a :class:`TabRepaintGate` on every ``QTabWidget`` under ``root`` (the main window, once its pages are
    built); returns it."""
    gate = TabRepaintGate(root)
    for tabs in root.findChildren(QTabWidget):
        tabs.installEventFilter(gate)
    return gate


# ---- jobs ------------------------------------------------------------------------------------------------------

def job_running(job) -> bool:
    """True while ``job`` (or None) is pending or running."""
    return job is not None and not job.state.finished


def cancel_job(window, job) -> None:
    """Ask the runner to stop ``job`` (nothing happens when it is None or already finished)."""
    if job is not None:
        window.runner.cancel(job.id)


def show_progress(job, job_id: int, fraction: float, message: str, bar: QProgressBar, say) -> None:
    """A runner ``progress`` signal: when it is about ``job``, move ``bar`` and pass a non-empty message to
    ``say`` (a page's status setter)."""
    if job is not None and job_id == job.id:
        bar.setValue(int(round(fraction * PROGRESS_STEPS)))
        if message:
            say(message)


def ask_pdf_path(parent: QWidget, window, title: str, file_name: str, remember: bool = True,
                 kind: str = "PDF (*.pdf)") -> str | None:
    """A save dialog for a report (``kind``: the file filter, PDF by default), starting in the last folder used;
    None when cancelled."""
    path, _ = QFileDialog.getSaveFileName(parent, title, str(Path(window.settings.last_dir()) / file_name), kind)
    if not path:
        return None
    if remember:
        window.settings.set_last_dir(path)
    return path


def export_report_job(window, name: str, project_path, audit_id: int, path, on_done=None, on_fail=None,
                      fmt: str = "pdf", **options):
    """Write the PDF (``fmt="pdf"``) or HTML (``fmt="html"``) report of a stored audit as a job
    (:func:`fairdesk.jobs.reports.export_report` / :func:`~fairdesk.jobs.reports.export_html`; ``options`` such as
    ``suppress_k`` are passed on). Returns the job."""
    def work(progress, cancel):
        from fairdesk.jobs.reports import export_html, export_report

        export = export_html if fmt == "html" else export_report
        return export(project_path, audit_id, path, progress=progress, cancel=cancel, **options)

    return window.run_job(name, work, on_done=on_done, on_fail=on_fail)
