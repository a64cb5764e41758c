"""ROC and precision–recall curves per group, side by side, each group's operating point at the audit's threshold
marked (hover: the group, the threshold and the point's rates). Draws the rows of
:func:`fairdesk.core.reports.calibration_figures.curve_data`, like the PDF's figure; pyqtgraph is imported on first
use.
"""
from __future__ import annotations

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout

from fairdesk.gui.widgets.panel_parts import load_pyqtgraph
from fairdesk.gui.widgets.reliability_plot import CurvePanel, legend_html, new_plot, tip


class RocPlot(CurvePanel):
    """``set_data(curve_data rows)``: ROC on the left, precision–recall on the right; ``clear(message)``."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.roc_widget = self.roc = self.pr_widget = self.pr = None
        self.operating: dict[tuple[str, str], object] = {}  # (curve, group) -> scatter of the operating point
        self.clear("No curves to show.")

    def ensure_plot(self) -> None:
        """Create the two plot widgets (about 15–30 ms each of the Qt thread; a page may do it in a turn of its own)."""
        if self.roc_widget is not None:
            return
        self.roc_widget, self.roc = new_plot(self, "ROC", "false positive rate", "true positive rate (recall)")
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
            if plot is not None:
                plot.clear()
                widget.setVisible(not message)

    def set_data(self, data: pd.DataFrame) -> None:
        if data is None or data.empty or not (data["curve"] == "roc").any():
            self.clear("No ROC curve for this choice (a group needs both classes).")
            return
        self.ensure_plot()
        self.clear("")
        pg = load_pyqtgraph()
        self.data = data
        self.roc.addItem(pg.PlotDataItem([0, 1], [0, 1], pen=pg.mkPen("#888888", width=1, style=Qt.PenStyle.DotLine)))
        for group, part in data.groupby("group", sort=False):
            colour = str(part["colour"].iloc[0])
            for plot, curve in ((self.roc, "roc"), (self.pr, "pr")):
                line = part[part["curve"] == curve]
                if not line.empty:
                    plot.addItem(pg.PlotDataItem(line["x"].to_numpy(float), line["y"].to_numpy(float),
                                                 pen=pg.mkPen(colour, width=1.6)))
                op = part[part["curve"] == f"operating_{curve}"]
                if not op.empty:
                    scatter = pg.ScatterPlotItem(x=op["x"].to_numpy(float), y=op["y"].to_numpy(float),
                                                 data=list(op["tooltip"].astype(str)), size=11,
                                                 brush=pg.mkBrush(colour), pen=pg.mkPen("#000000", width=1.5),
                                                 hoverable=True, tip=tip, hoverSize=14)
                    scatter.setZValue(10)
                    plot.addItem(scatter)
                    self.operating[(curve, str(group))] = scatter
        self._show_legend(legend_html(data, "black-edged dot: operating point at the audit's threshold"))
