"""ROC and precision–recall curves per group, side by side, each group's operating point at the audit's threshold
marked (hover: the group, the threshold and the point's rates). Draws the rows of
:func:`fairdesk.core.reports.calibration_figures.curve_data`, like the PDF's figure; pyqtgraph is imported on first
use.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout

from fairdesk.gui.widgets.panel_parts import load_pyqtgraph
from fairdesk.gui.widgets.reliability_plot import CurvePanel, column, curve_groups, legend_html, new_plot, tip


class RocPlot(CurvePanel):
    """``set_data(curve_data rows)``: ROC on the left, precision–recall on the right; ``clear(message)``."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.roc_widget = self.roc = self.pr_widget = self.pr = None
        self.operating: dict[tuple[str, str], object] = {}  # (curve, group) -> scatter of the operating point
        self.clear("No curves to show.")

    def ensure_plot(self) -> None:
        """Create the two plot widgets (about 15–30 ms each of the Qt thread)."""
        for _ in self.ensure_plot_steps():
            pass

    def ensure_plot_steps(self):
        """:meth:`ensure_plot` one plot widget per step (a generator: a page creates them in turns of their own; a
        build dropped after its first step resumes with the widget it made). The plots are laid out, and used, once
        both are made."""
        if self.roc_widget is None:
            self.roc_widget, self.roc = new_plot(self, "ROC", "false positive rate", "true positive rate (recall)")
            yield
        if self.pr_widget is not None:
            return
        self.pr_widget, self.pr = new_plot(self, "Precision–recall", "recall", "precision (PPV)")
        row = QHBoxLayout()
        row.addWidget(self.roc_widget, 1)
        row.addWidget(self.pr_widget, 1)
        self._layout.addLayout(row, 1)
        self._layout.addWidget(self.legend)

    def clear(self, message: str = "") -> None:
        self.data = pd.DataFrame()
        self.operating.clear()
        self.empty_label.setText(message)
        self.empty_label.setVisible(bool(message))
        self.legend.setVisible(False)
        for widget, plot in ((self.roc_widget, self.roc), (self.pr_widget, self.pr)):
            if self.pr is not None:  # (both plots made and laid out)
                plot.clear()
                widget.setVisible(not message)

    def set_data(self, data: pd.DataFrame) -> None:
        for _ in self.set_data_steps(data):
            pass

    def set_data_steps(self, data: pd.DataFrame):
        """Draw ``data`` one group per step (a generator: a page fills it in slices, one group per turn)."""
        if data is None or data.empty or not (data["curve"] == "roc").any():
            self.clear("No ROC curve for this choice (a group needs both classes).")
            return
        self.ensure_plot()
        self.clear("")
        pg = load_pyqtgraph()
        self.data = data
        groups = curve_groups(data)
        xs, ys = column(data, "x"), column(data, "y")
        tooltips = np.array(data["tooltip"].astype(str).tolist(), dtype=object)
        self.roc.addItem(pg.PlotDataItem([0, 1], [0, 1], pen=pg.mkPen("#888888", width=1, style=Qt.PenStyle.DotLine)))
        for group, colour, _, rows in groups:
            for plot, curve in ((self.roc, "roc"), (self.pr, "pr")):
                line = rows.get(curve)
                if line is not None:
                    plot.addItem(pg.PlotDataItem(xs[line], ys[line], pen=pg.mkPen(colour, width=1.6)))
                op = rows.get(f"operating_{curve}")
                if op is not None:
                    scatter = pg.ScatterPlotItem(x=xs[op], y=ys[op], data=list(tooltips[op]), size=11,
                                                 brush=pg.mkBrush(colour), pen=pg.mkPen("#000000", width=1.5),
                                                 hoverable=True, tip=tip, hoverSize=14)
                    scatter.setZValue(10)
                    plot.addItem(scatter)
                    self.operating[(curve, group)] = scatter
            yield
        self._show_legend(legend_html(groups, "black-edged dot: operating point at the audit's threshold"))
