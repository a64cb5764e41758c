"""Interactive reliability diagram: per group, the binned observed share against the mean predicted risk with its
95% interval, and the isotonic (smoothed) recalibration curve; the diagonal is perfect calibration.

It draws the rows of :func:`fairdesk.core.reports.calibration_figures.curve_data` — the same rows the PDF's figure
is drawn from — with pyqtgraph (imported when the first plot is drawn). Hovering a dot shows the bin's n (below the
small-cell threshold k as "<k") and its observed and predicted values.
"""
from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget  # noqa: E402

from fairdesk.gui.widgets.panel_parts import load_pyqtgraph  # noqa: E402


def tip(x=None, y=None, data=None) -> str:  # noqa: ARG001 - pyqtgraph passes x, y and data
    return str(data) if data is not None else ""


def curve_groups(data: pd.DataFrame) -> list[tuple[str, str, str, dict[str, np.ndarray]]]:
    """The rows of ``data`` (:func:`curve_data`) by group, in the data's order: ``(group, colour, label, {curve:
    row positions})``. Split once with plain arrays: selecting a group's and a curve's rows with pandas (Arrow-backed
    text compared row by row, a frame taken per selection) cost the Qt thread tens of ms per plot."""
    groups = data["group"].astype(str).tolist()
    curves = data["curve"].astype(str).tolist()
    colours, labels = data["colour"].astype(str).tolist(), data["label"].astype(str).tolist()
    out: dict[str, tuple[str, str, dict[str, list[int]]]] = {}
    for i, (group, curve) in enumerate(zip(groups, curves)):
        if group not in out:
            out[group] = (colours[i], labels[i], {})
        out[group][2].setdefault(curve, []).append(i)
    return [(group, colour, label, {c: np.asarray(rows) for c, rows in parts.items()})
            for group, (colour, label, parts) in out.items()]


def column(data: pd.DataFrame, name: str) -> np.ndarray:
    """Column ``name`` of ``data`` as floats (missing values NaN)."""
    return pd.to_numeric(data[name], errors="coerce").to_numpy(float)


def legend_html(groups: list, extra: str = "") -> str:
    """The legend under a curve plot: a dot in each group's colour and its label (``groups`` from
    :func:`curve_groups`)."""
    parts = [f"<span style='color:{colour}'>\u25CF</span>&nbsp;{label}" for _, colour, label, _ in groups]
    return "&nbsp;&nbsp;&nbsp;".join(parts + ([extra] if extra else []))


def new_plot(parent: QWidget, title: str, xlabel: str, ylabel: str):
    """A square-ish pyqtgraph plot over [0, 1] × [0, 1] with labelled axes."""
    pg = load_pyqtgraph()
    widget = pg.PlotWidget(parent, enableMenu=False)
    widget.setMinimumSize(260, 240)
    plot = widget.getPlotItem()
    plot.setMenuEnabled(False)
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.setTitle(title, size="10pt")
    plot.setLabel("bottom", xlabel)
    plot.setLabel("left", ylabel)
    plot.setXRange(0, 1, padding=0.03)
    plot.setYRange(0, 1, padding=0.03)
    plot.getViewBox().setLimits(xMin=-0.05, xMax=1.05, yMin=-0.05, yMax=1.05)
    return widget, plot


PLOT_MIN_HEIGHT = 240  # px: a curve plot's axes and labels stay readable; its legend's height comes on top


class CurvePanel(QWidget):
    """Curve plots with a legend label under them. The panel's minimum height is the plots' plus the legend's at
    the current width, so that a splitter never squeezes the legend over the axis labels (a fixed minimum did)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(PLOT_MIN_HEIGHT)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.data = pd.DataFrame()
        self.empty_label = QLabel(self)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self._layout.addWidget(self.empty_label)
        self.legend = QLabel(self)  # laid out under the plots when they are made
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.legend.setAlignment(Qt.AlignmentFlag.AlignCenter)

    def _show_legend(self, html: str) -> None:
        self.legend.setText(html)
        self.legend.setVisible(True)
        self._fit_minimum()

    def _fit_minimum(self) -> None:
        room = 0 if self.legend.isHidden() else (self.legend.heightForWidth(max(self.width(), 200))
                                                 + self._layout.spacing())
        if self.minimumHeight() != PLOT_MIN_HEIGHT + room:
            self.setMinimumHeight(PLOT_MIN_HEIGHT + room)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_minimum()  # a narrower panel wraps the legend onto more lines


class ReliabilityPlot(CurvePanel):
    """``set_data(curve_data rows)``: one colour per group; ``clear(message)``."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.plot_widget = self.plot = None
        self.scatters: dict[str, object] = {}
        self.legend.setToolTip("Dots: observed share per score bin with its 95% interval (hover for n); lines: the "
                               "smoothed (isotonic) curve per group; dotted diagonal: perfect calibration.")
        self.clear("No calibration to show.")

    def ensure_plot(self) -> None:
        """Create the plot widget (about 15–30 ms of the Qt thread; a page may do it in a turn of its own)."""
        if self.plot_widget is None:
            self.plot_widget, self.plot = new_plot(self, "Reliability", "predicted risk (mean score in the bin)",
                                                   "observed share with the outcome")
            self._layout.addWidget(self.plot_widget, 1)
            self._layout.addWidget(self.legend)

    def clear(self, message: str = "") -> None:
        self.data = pd.DataFrame()
        self.scatters.clear()
        self.empty_label.setText(message)
        self.empty_label.setVisible(bool(message))
        self.legend.setVisible(False)
        if self.plot is not None:
            self.plot.clear()
            self.plot_widget.setVisible(not message)

    def set_data(self, data: pd.DataFrame) -> None:
        for _ in self.set_data_steps(data):
            pass

    def set_data_steps(self, data: pd.DataFrame):
        """Draw ``data`` one group per step (a generator: a page fills it in slices, one group per turn)."""
        if data is None or data.empty or not (data["curve"] == "reliability").any():
            self.clear("No reliability points for this choice.")
            return
        self.ensure_plot()
        self.clear("")
        pg = load_pyqtgraph()
        self.data = data
        groups = curve_groups(data)
        xs, ys, lows, highs = (column(data, c) for c in ("x", "y", "ci_low", "ci_high"))
        tooltips = np.array(data["tooltip"].astype(str).tolist(), dtype=object)
        self.plot.addItem(pg.PlotDataItem([0, 1], [0, 1], pen=pg.mkPen("#888888", width=1, style=Qt.PenStyle.DotLine)))
        for group, colour, _, rows in groups:
            sm = rows.get("smoothed")
            if sm is not None:
                self.plot.addItem(pg.PlotDataItem(xs[sm], ys[sm], pen=pg.mkPen(colour, width=1.5)))
            pts = rows.get("reliability")
            if pts is None:
                continue
            x, y, lo, hi = xs[pts], ys[pts], lows[pts], highs[pts]
            ok = ~(np.isnan(lo) | np.isnan(hi))
            if ok.any():
                self.plot.addItem(pg.ErrorBarItem(x=x[ok], y=y[ok], bottom=(y - lo)[ok], top=(hi - y)[ok], beam=0.01,
                                                  pen=pg.mkPen(colour, width=1)))
            scatter = pg.ScatterPlotItem(x=x, y=y, data=list(tooltips[pts]), size=8,
                                         brush=pg.mkBrush(colour), pen=pg.mkPen("#FFFFFF", width=0.8),
                                         hoverable=True, tip=tip, hoverSize=12,
                                         hoverPen=pg.mkPen("#000000", width=1.5))
            scatter.setZValue(10)
            self.plot.addItem(scatter)
            self.scatters[group] = scatter
            yield
        self._show_legend(legend_html(groups, "<span style='color:#888888'>\u2504</span>&nbsp;perfect calibration"))
