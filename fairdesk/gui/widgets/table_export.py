"""Copy a result table, or export it to CSV or Excel, from its right-click menu (and Ctrl+C): the rows as shown
(filtered and sorted), every column, with the small-cell rule at the k of Settings applied first
(:func:`fairdesk.core.table_export.released`); the status bar says what the rule did."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QFileDialog, QWidget


def shown_frame(view) -> pd.DataFrame:
    """The rows of a :class:`~fairdesk.gui.widgets.tables.DataFrameView` in the order and filter shown; the
    selected rows only when more than one is selected."""
    frame = view.model.frame()
    proxy = view.proxy
    rows = [proxy.mapToSource(proxy.index(r, 0)).row() for r in range(proxy.rowCount())]
    selected = {i.row() for i in view.view.selectionModel().selectedRows()} if view.view.selectionModel() else set()
    if len(selected) > 1:
        rows = [proxy.mapToSource(proxy.index(r, 0)).row() for r in sorted(selected)]
    return frame.iloc[rows].reset_index(drop=True) if len(frame) else frame


def _k(widget: QWidget) -> int:
    window = widget.window()
    settings = getattr(window, "settings", None)
    return int(getattr(settings, "suppress_k", 11) or 11)


def _say(widget: QWidget, text: str) -> None:
    window = widget.window()
    if hasattr(window, "statusBar"):
        window.statusBar().showMessage(text, 10000)


def copy_table(view) -> str:
    from fairdesk.core.table_export import clipboard_text, released

    table, sentence = released(shown_frame(view), _k(view))
    text = clipboard_text(table)
    QGuiApplication.clipboard().setText(text)
    _say(view, f"Copied {len(table)} rows. {sentence}")
    return text


def export_table(view, path: str | Path | None = None, kind: str = "csv") -> Path | None:
    """Write the table shown to ``path`` (asked for when None) as CSV or Excel. Returns the path written."""
    from fairdesk.core.errors import FairDeskError
    from fairdesk.core.table_export import released, write_csv, write_xlsx

    suffix = ".xlsx" if kind == "xlsx" else ".csv"
    if path is None:
        what = "Excel workbook (*.xlsx)" if kind == "xlsx" else "CSV table (*.csv)"
        path, _ = QFileDialog.getSaveFileName(view, "Export table", f"table{suffix}", what)
        if not path:
            return None
    path = Path(path)
    if path.suffix.lower() != suffix:
        path = path.with_name(path.name + suffix)
    table, sentence = released(shown_frame(view), _k(view))
    try:
        written = (write_xlsx if kind == "xlsx" else write_csv)(table, path)
    except (OSError, FairDeskError) as err:
        _say(view, f"Could not export the table: {' '.join(str(err).split())}")
        return None
    _say(view, f"Exported {len(table)} rows to {written}. {sentence}")
    return written


def install(view) -> None:
    """Add Copy, Export CSV… and Export Excel… to a DataFrameView's table (right-click menu; Ctrl+C copies)."""
    table = view.view
    table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
    copy = QAction("Copy table", table, shortcut=QKeySequence.StandardKey.Copy,
                   triggered=lambda: copy_table(view))
    copy.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
    csv = QAction("Export CSV…", table, triggered=lambda: export_table(view, kind="csv"))
    xlsx = QAction("Export Excel…", table, triggered=lambda: export_table(view, kind="xlsx"))
    for action in (copy, csv, xlsx):
        table.addAction(action)
    view.export_actions = (copy, csv, xlsx)
