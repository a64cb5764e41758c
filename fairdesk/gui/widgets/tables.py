"""Table widgets over pandas: a lazy table model, a sortable + filterable view, and a checkable list."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QListWidget,
                               QListWidgetItem, QTableView, QVBoxLayout, QWidget)

from fairdesk.core import numbers
from fairdesk.core.escape import shortened

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
#: right-aligned numbers (``AlignRight | AlignVCenter`` builds a new flag through Python's enum machinery each time:
#: ~20 µs a cell when Qt paints a table)
ALIGN_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_DISPLAY, _TOOLTIP, _ALIGN = (int(r) for r in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole,
                                                  Qt.ItemDataRole.TextAlignmentRole))
_HORIZONTAL = Qt.Orientation.Horizontal


#: the most characters a cell shows (a row is one line: Qt elides what does not fit the column) and a tooltip shows
#: (in lines of TIP_WIDTH characters): a stored text of thousands of words gives neither a huge tooltip nor a slow
#: measure of a column
CELL_CHARS, TIP_CHARS, TIP_WIDTH = 300, 1200, 100


def format_value(value, column: str = "") -> str:
    """How a cell is shown (:func:`fairdesk.core.numbers.cell`, as the reports print it): p-values as "< 0.001",
    other floats with fixed decimals and never in scientific notation, missing as a dash, booleans as yes/no; a
    text longer than ``CELL_CHARS`` keeps its beginning and says it was shortened."""
    if value is pd.NaT:
        return "–"
    return shortened(numbers.cell(value, column), CELL_CHARS)


def tip_text(text) -> str | None:
    """A tooltip of at most ``TIP_CHARS`` characters in lines of at most ``TIP_WIDTH`` (a plain-text tooltip is one
    line per line of its text, however long)."""
    if text is None:
        return None
    text = str(text)
    if len(text) <= TIP_WIDTH and "\n" not in text:
        return text
    import textwrap

    return "\n".join(line for part in shortened(text, TIP_CHARS).split("\n")
                     for line in (textwrap.wrap(part, TIP_WIDTH) or [""]))


def _sort_keys(column: pd.Series) -> list:
    """One key per row that Qt can compare without Python: floats (missing last) or strings."""
    numeric = pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype)
    if numeric:
        values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        return [math.inf if math.isnan(v) else float(v) for v in values]
    coerced = pd.to_numeric(column, errors="coerce")
    if column.notna().any() and coerced.notna().sum() == column.notna().sum() and not column.map(
            lambda v: isinstance(v, (bool, np.bool_))).any():
        values = coerced.to_numpy(dtype=float, na_value=np.nan)
        return [math.inf if math.isnan(v) else float(v) for v in values]
    return ["\uffff" if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else format_value(v)
            for v in column.tolist()]


class PandasTableModel(QAbstractTableModel):
    """Read-only model of a DataFrame. With ``lazy=True`` rows are fetched in chunks as the view scrolls."""

    CHUNK = 200

    def __init__(self, df: pd.DataFrame | None = None, *, lazy: bool = False, headers: dict[str, str] | None = None,
                 header_tips: dict[str, str] | None = None, parent=None) -> None:
        super().__init__(parent)
        self._df = pd.DataFrame()
        self._lazy = lazy
        self._loaded = 0
        self._headers = dict(headers or {})
        self._header_tips = dict(header_tips or {})
        self._keys: dict[int, list] = {}
        self._columns: dict[int, list] = {}  # a column's values as Python objects, listed when first shown
        self._texts: dict[int, list] = {}  # their shown text, formatted when a cell is first shown
        self._names: list[str] = []
        self._n_columns = 0
        self._tooltips: list[str] | None = None
        if df is not None:
            self.set_frame(df)

    # ---- data ----------------------------------------------------------------------------------------------
    def set_frame(self, df: pd.DataFrame | None, tooltips: list[str] | None = None) -> None:
        self.beginResetModel()
        self._df = (df if df is not None else pd.DataFrame()).reset_index(drop=True)
        self._loaded = min(len(self._df), self.CHUNK) if self._lazy else len(self._df)
        self._keys, self._columns, self._texts, self._n_columns = {}, {}, {}, self._df.shape[1]
        self._names = [str(c) for c in self._df.columns]
        self._tooltips = tooltips
        self.endResetModel()

    def frame(self) -> pd.DataFrame:
        return self._df

    def column_name(self, column: int) -> str:
        return self._names[column]

    def value(self, row: int, column: int):
        """The cell's value (Qt asks for several roles of each cell it draws or sizes: ``iat`` on an Arrow-backed
        column costs tens of microseconds each time, a list index nothing)."""
        values = self._columns.get(column)
        if values is None:
            values = self._columns[column] = self._df.iloc[:, column].tolist()
        return values[row]

    def display_text(self, row: int, column: int) -> str:
        """The cell as shown, formatted once (Qt asks again at every paint of the cell)."""
        texts = self._texts.get(column)
        if texts is None:
            texts = self._texts[column] = [None] * len(self._df)
        text = texts[row]
        if text is None:
            text = texts[row] = format_value(self.value(row, column), str(self._df.columns[column]))
        return text

    def sample_texts(self, rows: list[int]) -> list[list[str]]:
        """The shown text of ``rows`` in every column, taken from the frame in one row selection. ``value`` turns
        a whole column into a list the first time a cell of it is asked for: sizing a results table's columns from
        40 rows that way converted every cell of every column (20–35 ms of the Qt thread for each table of an audit
        while a project opened, though the table was on a page not shown; painting converts only the columns it
        draws, when it draws them)."""
        part = self._df.iloc[rows]
        return [[format_value(v, str(self._df.columns[c])) for v in part.iloc[:, c].tolist()]
                for c in range(self._n_columns)]

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 - Qt signature
        return 0 if parent.isValid() else self._loaded

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self._n_columns

    def canFetchMore(self, parent: QModelIndex) -> bool:
        return not parent.isValid() and self._loaded < len(self._df)

    def fetchMore(self, parent: QModelIndex) -> None:
        if parent.isValid():
            return
        extra = min(self.CHUNK, len(self._df) - self._loaded)
        if extra <= 0:
            return
        self.beginInsertRows(QModelIndex(), self._loaded, self._loaded + extra - 1)
        self._loaded += extra
        self.endInsertRows()

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        # Qt asks for about eight roles of every cell it paints; the ones answered here are tested first and the
        # values they need are cached per cell, so repainting a full-screen table stays a few ms
        if role == _DISPLAY:
            return self.display_text(index.row(), index.column()) if index.isValid() else None
        if role == _ALIGN:
            if not index.isValid():
                return None
            value = self.value(index.row(), index.column())
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
                return ALIGN_RIGHT
            return None
        if role == SORT_ROLE and index.isValid():
            c = index.column()
            keys = self._keys.get(c)
            if keys is None:
                keys = self._keys[c] = _sort_keys(self._df.iloc[:, c])
            return keys[index.row()]
        if role == _TOOLTIP and index.isValid():
            if self._tooltips is not None:
                return tip_text(self._tooltips[index.row()])
            return tip_text(self.value(index.row(), index.column()))
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if role == _DISPLAY:
            if orientation != _HORIZONTAL:
                return str(section + 1)
            if section < self._n_columns:
                name = self._names[section]
                return self._headers.get(name, name)
            return None
        if role == _TOOLTIP and orientation == _HORIZONTAL and section < self._n_columns:
            return self._header_tips.get(self._names[section])
        return None


class DataFrameView(QWidget):
    """A sortable table with a filter box (QSortFilterProxyModel over :class:`PandasTableModel`)."""

    #: rows a table keeps room for (header included), so no table shrinks to a row and a half
    MIN_ROWS = 4
    SIZE_ROWS = 40  # rows (spread over the table) the column widths are fitted to
    MIN_WIDTH, MAX_WIDTH = 60, 320  # a column's width in pixels, at first

    def __init__(self, parent=None, *, filterable: bool = True, lazy: bool = False, placeholder: str = "",
                 headers: dict[str, str] | None = None, header_tips: dict[str, str] | None = None) -> None:
        super().__init__(parent)
        self.model = PandasTableModel(lazy=lazy, headers=headers, header_tips=header_tips, parent=self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(not lazy)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(False)
        self.view.verticalHeader().setDefaultSectionSize(22)
        self.view.setMinimumHeight(22 * (self.MIN_ROWS + 1) + 2 * self.view.frameWidth()
                                   + self.view.horizontalScrollBar().sizeHint().height())
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.horizontalHeader().setStretchLastSection(True)
        self.view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter rows (any column)…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.count_label = QLabel(self)
        self.count_label.setStyleSheet("color: palette(mid);")
        top = QHBoxLayout()
        top.addWidget(self.filter, 1)
        top.addWidget(self.count_label)
        self._filterable = filterable
        if filterable:
            layout.addLayout(top)
        else:
            self.filter.hide()
            self.count_label.hide()
        self.placeholder = QLabel(placeholder, self)
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setStyleSheet("color: palette(mid); padding: 12px;")
        layout.addWidget(self.placeholder, 1)
        layout.addWidget(self.view, 1)
        self.proxy.rowsInserted.connect(self._update_count)
        self.proxy.rowsRemoved.connect(self._update_count)
        self.proxy.modelReset.connect(self._update_count)
        self.proxy.layoutChanged.connect(self._update_count)
        from fairdesk.gui.widgets.table_export import install

        install(self)  # every result table: copy, export CSV and Excel (small-cell rule applied)
        self.set_frame(None)

    def set_frame(self, df: pd.DataFrame | None, tooltips: list[str] | None = None) -> None:
        self.model.set_frame(df, tooltips)
        empty = df is None or df.empty
        show_placeholder = empty and bool(self.placeholder.text())
        self.placeholder.setVisible(show_placeholder)
        self.view.setVisible(not show_placeholder)
        if self._filterable:
            self.filter.setVisible(not show_placeholder)
            self.count_label.setVisible(not show_placeholder)
        if not empty:
            self.fit_columns()
        self._update_count()

    def fit_columns(self) -> None:
        """Size each column to its header and to the text of ``SIZE_ROWS`` rows spread over the table, measured
        with the font metrics. ``resizeColumnsToContents`` asks the model for eight roles of every cell of up to
        1,000 rows through the sort proxy (0.2–0.7 s for a 21-column table, most of the freeze when an audit was
        shown) and the header's precision setting does not limit it (the vertical header's does)."""
        model, header = self.model, self.view.horizontalHeader()
        n = model.rowCount()
        rows = sorted({int(r) for r in np.linspace(0, n - 1, min(n, self.SIZE_ROWS))}) if n else []
        bold = self.view.font()
        bold.setBold(True)  # a page's model may set some cells in bold (verdicts); bold text is the wider
        cells, titles = QFontMetrics(bold), header.fontMetrics()
        pad = 2 * (self.view.style().pixelMetric(self.view.style().PixelMetric.PM_FocusFrameHMargin) + 1) + 6
        for c, texts in enumerate(model.sample_texts(rows)):
            title = model.headerData(c, Qt.Orientation.Horizontal) or ""
            width = titles.horizontalAdvance(str(title)) + pad + 16  # room for the sort arrow
            for text in set(texts):
                width = max(width, cells.horizontalAdvance(text) + pad)
            header.resizeSection(c, min(max(width, self.MIN_WIDTH), self.MAX_WIDTH))

    def frame(self) -> pd.DataFrame:
        return self.model.frame()

    def row_count(self) -> int:
        return self.proxy.rowCount()

    def _update_count(self, *args) -> None:
        total = len(self.model.frame())
        shown = self.proxy.rowCount()
        if self.filter.text():
            self.count_label.setText(f"{shown} of {total} rows")
        else:
            self.count_label.setText(f"{total} rows")


class CheckList(QListWidget):
    """A list of checkable strings. ``checked()`` gives the checked ones, in list order."""

    changed = Signal()

    def __init__(self, parent=None, *, max_visible_rows: int | None = None) -> None:
        super().__init__(parent)
        self.itemChanged.connect(lambda *_: self.changed.emit())
        self.setUniformItemSizes(True)
        if max_visible_rows:
            self.setMaximumHeight(max_visible_rows * 20 + 8)

    def set_items(self, items, checked=()) -> None:
        checked = set(map(str, checked))
        self.blockSignals(True)
        self.clear()
        for name in items:
            item = QListWidgetItem(str(name), self)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if str(name) in checked else Qt.CheckState.Unchecked)
        self.blockSignals(False)
        self.changed.emit()

    def items(self) -> list[str]:
        return [self.item(i).text() for i in range(self.count())]

    def checked(self) -> list[str]:
        return [self.item(i).text() for i in range(self.count())
                if self.item(i).checkState() == Qt.CheckState.Checked]

    def set_checked(self, names, exclusive: bool = True) -> None:
        names = set(map(str, names))
        self.blockSignals(True)
        for i in range(self.count()):
            item = self.item(i)
            if item.text() in names:
                item.setCheckState(Qt.CheckState.Checked)
            elif exclusive:
                item.setCheckState(Qt.CheckState.Unchecked)
        self.blockSignals(False)
        self.changed.emit()
