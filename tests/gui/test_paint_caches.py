"""What the results views cache to repaint fast (issue 24) gives what an uncached view gives: the table model's
cached answers (a full-screen table repaint asks Python ~8 roles of every cell) equal what the frame says, for any
frame, and never outlive the frame they came from; a cached plot axis draws the same pixels as an uncached one,
after a new range, a resize and in an exported image."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt

from fairdesk.gui.widgets.calibration_views import VerdictTableModel
from fairdesk.gui.widgets.tables import ALIGN_RIGHT, SORT_ROLE, PandasTableModel, format_value

cells = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                  st.floats(allow_nan=True, allow_infinity=False, width=32), st.text(max_size=6))
columns = st.lists(cells, min_size=1, max_size=6)


@st.composite
def frames(draw):
    n_rows = draw(st.integers(1, 6))
    n_cols = draw(st.integers(1, 4))
    data = {f"c{j}" if j else "verdict": draw(st.lists(cells, min_size=n_rows, max_size=n_rows)) for j in range(n_cols)}
    return pd.DataFrame(data)


def _expected_alignment(value):
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    return ALIGN_RIGHT if numeric else None


def _check(model: PandasTableModel, df: pd.DataFrame) -> None:
    assert (model.rowCount(), model.columnCount()) == df.shape
    for r in range(df.shape[0]):
        for c in range(df.shape[1]):
            index = model.index(r, c)
            value = df.iloc[:, c].tolist()[r]
            for _ in range(2):  # the second answer comes from the cache
                assert model.data(index, Qt.ItemDataRole.DisplayRole) == format_value(value)
                assert model.data(index, Qt.ItemDataRole.TextAlignmentRole) == _expected_alignment(value)
                assert model.data(index, Qt.ItemDataRole.ToolTipRole) == (None if value is None else str(value))
            key = model.data(index, SORT_ROLE)
            assert isinstance(key, (float, str))
            assert model.data(index, Qt.ItemDataRole.DecorationRole) is None
    for c, name in enumerate(df.columns):
        assert model.headerData(c, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole) == model._headers.get(name, name)
    assert model.headerData(df.shape[1], Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole) is None
    assert model.headerData(0, Qt.Orientation.Vertical, Qt.ItemDataRole.DisplayRole) == "1"


@settings(max_examples=30)
@given(first=frames(), second=frames())
def test_cached_cells_equal_the_frame_and_a_new_frame_replaces_them(qapp, first, second):
    model = PandasTableModel(headers={"c1": "first column"}, header_tips={"c1": "what it holds"})
    model.set_frame(first)
    _check(model, first)
    model.set_frame(second)  # every cache belongs to the frame it was filled from
    _check(model, second)
    if second.shape[1] > 1:
        assert model.headerData(1, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) == "what it holds"


def test_numbers_sort_as_numbers_with_missing_last(qapp):
    model = PandasTableModel(pd.DataFrame({"x": [10.0, 2.0, math.nan]}))
    keys = [model.data(model.index(r, 0), SORT_ROLE) for r in range(3)]
    assert keys == [10.0, 2.0, math.inf]


def test_verdict_columns_are_coloured_and_differs_is_bold(qapp):
    df = pd.DataFrame({"group": ["F", "M"], "gap": ["0.1 (0.0 to 0.2)", "0.3 (0.2 to 0.4)"],
                       "verdict": ["differs", "inconclusive: too few cases"]})
    model = VerdictTableModel(df)
    font = model.data(model.index(0, 2), Qt.ItemDataRole.FontRole)
    assert font is not None and font.bold()
    assert model.data(model.index(1, 2), Qt.ItemDataRole.FontRole) is None
    assert model.data(model.index(0, 2), Qt.ItemDataRole.ForegroundRole) is not None
    assert model.data(model.index(0, 1), Qt.ItemDataRole.TextAlignmentRole) == ALIGN_RIGHT
    assert model.data(model.index(0, 0), Qt.ItemDataRole.TextAlignmentRole) is None
    assert model.data(model.index(0, 1), Qt.ItemDataRole.DisplayRole) == "0.1 (0.0 to 0.2)"


def test_cached_axes_draw_what_uncached_axes_draw(qapp):
    from PySide6.QtWidgets import QGraphicsItem
    from pyqtgraph.exporters import ImageExporter

    from fairdesk.gui.widgets.panel_parts import load_pyqtgraph

    pg = load_pyqtgraph()
    plots = []
    for cached in (True, False):
        widget = pg.PlotWidget()
        widget.resize(500, 400)
        plot = widget.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.setLabel("bottom", "score")
        plot.plot([0, 1, 2], [0, 2, 1])
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            assert axis.cacheMode() == QGraphicsItem.CacheMode.DeviceCoordinateCache  # every axis FairDesk makes
            if not cached:
                axis.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        widget.show()
        plots.append((widget, plot))

    def images():
        qapp.processEvents()
        return [w.grab().toImage() for w, _ in plots]

    first = images()
    assert first[0] == first[1]
    for _, plot in plots:
        plot.setXRange(5, 50, padding=0)
    moved = images()
    assert moved[0] == moved[1] and moved[0] != first[0]  # the new range is drawn, not the cached old one
    for widget, _ in plots:
        widget.resize(700, 300)
    resized = images()
    assert resized[0] == resized[1]
    exported = []
    for _, plot in plots:
        exporter = ImageExporter(plot)
        exporter.parameters()["width"] = 900
        exported.append(exporter.export(toBytes=True))
    assert exported[0] == exported[1]
