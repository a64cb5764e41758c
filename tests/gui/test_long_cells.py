"""A stored text of thousands of words in a result table or the slice list: one bounded row, a bounded tooltip."""
from __future__ import annotations

import pandas as pd
from PySide6.QtCore import Qt

from fairdesk.core.escape import SHORTENED_MARK

LONG = " ".join(f"word{i}" for i in range(3000))
WORD = "x" * 5000


def test_a_table_of_long_texts_keeps_one_line_rows_and_short_tooltips(qtbot):
    from fairdesk.gui.widgets.tables import CELL_CHARS, TIP_CHARS, TIP_WIDTH, DataFrameView

    view = DataFrameView()
    qtbot.addWidget(view)
    view.set_frame(pd.DataFrame({"group": [LONG, WORD, "F"], "n": [1, 2, 3]}))
    view.resize(600, 300)
    view.show()
    model = view.model
    for row in range(3):
        shown = model.data(model.index(row, 0), Qt.ItemDataRole.DisplayRole)
        tip = model.data(model.index(row, 0), Qt.ItemDataRole.ToolTipRole)
        assert len(shown) <= CELL_CHARS + len(SHORTENED_MARK) + 1
        assert all(len(line) <= TIP_WIDTH for line in tip.split("\n"))
        assert len(tip) <= TIP_CHARS + len(SHORTENED_MARK) + TIP_CHARS // 10
        assert view.view.rowHeight(row) <= 30
    assert SHORTENED_MARK in model.data(model.index(0, 0), Qt.ItemDataRole.DisplayRole)
    assert model.data(model.index(2, 0), Qt.ItemDataRole.DisplayRole) == "F"
    assert view.view.columnWidth(0) <= view.MAX_WIDTH
    assert view.frame()["group"][0] == LONG  # the frame (and so copy and export) keeps the whole text
