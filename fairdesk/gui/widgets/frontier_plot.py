"""The accuracy–fairness frontier of an age-independence audit, interactive.

It draws the rows of :func:`fairdesk.core.reports.age_independence.frontier_data` — the same table the PDF's
frontier figure is drawn from — as two pyqtgraph panels side by side: Δ_eo^(5) against accuracy and leakage (age R²
of a fresh probe) against accuracy. Per learner its points are joined in order of λ and labelled with λ; the DNN is
a black star, other baselines grey squares, an external reference a grey diamond (as in the PDF). Pointing at a
point shows its method, λ and values (``ScatterPlotItem(hoverable=True, tip=...)``; :meth:`FrontierPlot.tooltip_at`
gives the same text). pyqtgraph is imported when the first plot is drawn.
"""
from __future__ import annotations

import math

import pandas as pd
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from fairdesk.core.escape import html_text
from fairdesk.gui.widgets.panel_parts import load_pyqtgraph

#: the two panels: (key, y column, axis label, title)
PANELS = (
    ("delta", "delta_eo_5", "Δ<sub>eo</sub><sup>(5)</sup>",
     "Δ<sub>eo</sub><sup>(5)</sup> against accuracy (lower: errors spread more evenly)"),
    ("leakage", "leakage_r2", "age R² (fresh probe)", "Leakage against accuracy (age R² of a fresh probe)"),
)
GREY = "#8a8a8a"


def _tip(x=None, y=None, data=None) -> str:  # noqa: ARG001 - pyqtgraph passes x, y and data
    return str(data) if data is not None else ""


def _fmt(value, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def point_text(row) -> str:
    """The hover text of one frontier point."""
    lam = row["lambda"]
    lam_text = "" if lam is None or (isinstance(lam, float) and math.isnan(lam)) else f"  (λ = {lam:g})"
    return (f"{row['label']}{lam_text}\naccuracy {_fmt(row['accuracy'])}\nΔ_eo^(5) {_fmt(row['delta_eo_5'])}\n"
            f"leakage R² {_fmt(row['leakage_r2'])}")


def _coincident(x, y, lambdas, tol: tuple[float, float]) -> dict:
    """λ values per labelled position: points of one learner closer than ``tol`` (x, y) share one label
    ("λ=0.5, 2", at the first of them) instead of printing over each other."""
    out: dict = {}
    for xi, yi, lam in zip(x, y, lambdas):
        if lam is None or (isinstance(lam, float) and math.isnan(lam)):
            continue
        key = next((k for k in out if abs(k[0] - xi) <= tol[0] and abs(k[1] - yi) <= tol[1]), (xi, yi))
        out.setdefault(key, []).append(float(lam))
    return out


class FrontierPlot(QWidget):
    """``set_data(frontier_data(doc), colors)``; ``clear(message)``."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.data = pd.DataFrame()
        self.hint = ""
        self.plots: dict = {}  # panel key -> PlotItem
        self.scatters: dict[str, list] = {}  # panel key -> ScatterPlotItems
        self.labels: dict[str, list] = {}  # panel key -> TextItems (λ labels)
        self._widgets: dict = {}
        self.graphics = QWidget(self)
        self.graphics.setMinimumHeight(170)
        self._row = QHBoxLayout(self.graphics)
        self._row.setContentsMargins(0, 0, 0, 0)
        self.empty_label = QLabel("", self)
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setStyleSheet("color: palette(mid); padding: 12px;")
        self.legend = QLabel("", self)
        self.legend.setWordWrap(True)
        self.readout = QLabel("", self)
        self.readout.setWordWrap(True)
        self.readout.setStyleSheet("color: #555;")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.legend)
        layout.addWidget(self.readout)
        self.clear("Run the learners, or choose a stored run, to see the frontier.")

    # ---- API -----------------------------------------------------------------------------------------------
    def clear(self, message: str = "") -> None:
        self.data = pd.DataFrame()
        for w in self._widgets.values():
            self._row.removeWidget(w)
            w.deleteLater()
        self._widgets.clear()
        self.plots.clear()
        self.scatters.clear()
        self.labels.clear()
        self.legend.setText("")
        self.empty_label.setText(message)
        self.empty_label.setVisible(bool(message))
        self.graphics.setVisible(False)
        self.legend.setVisible(False)
        self.readout.setVisible(False)

    def set_data(self, data: pd.DataFrame, colors: tuple[str, ...]) -> None:
        """Draw the frontier points (columns method, label, role, lambda, accuracy, delta_eo_5, leakage_r2)."""
        self.clear("")
        ok = data[data["accuracy"].notna()] if len(data) else data
        if ok.empty:
            self.clear("No method has an accuracy to plot.")
            return
        pg = load_pyqtgraph()
        self.data = data
        self.empty_label.setVisible(False)
        self.graphics.setVisible(True)
        self.legend.setVisible(True)
        self.readout.setVisible(True)
        styles = self._styles(data, colors)
        for key, column, axis_label, title in PANELS:
            widget = pg.PlotWidget(self.graphics, enableMenu=False)
            widget.setMinimumWidth(160)
            widget.scene().sigMouseMoved.connect(lambda pos, k=key: self._mouse_moved(pos, k))
            self._row.addWidget(widget, 1)
            widget.show()
            self._widgets[key] = widget
            plot = widget.getPlotItem()
            plot.setTitle(title, size="9pt")
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.showGrid(x=True, y=True, alpha=0.2)
            plot.setLabel("bottom", "accuracy")
            plot.setLabel("left", axis_label)
            for axis in ("left", "bottom"):
                plot.getAxis(axis).enableAutoSIPrefix(False)
            if key == "leakage":
                plot.addItem(pg.InfiniteLine(pos=0.0, angle=0, movable=False,
                                             pen=pg.mkPen("#bbbbbb", width=1, style=Qt.PenStyle.DashLine)))
            self.plots[key], self.scatters[key], self.labels[key] = plot, [], []
            tol = self._tolerance(data, column)
            for method, g in data.groupby("method", sort=False):
                g = g[g["accuracy"].notna() & g[column].notna()].sort_values("lambda", na_position="first")
                if g.empty:
                    continue
                style = styles[method]
                x, y = g["accuracy"].to_numpy(float), g[column].to_numpy(float)
                if style["role"] == "learner" and len(g) > 1:
                    plot.addItem(pg.PlotDataItem(x=x, y=y, pen=pg.mkPen(style["color"], width=1.5)))
                tips = [point_text(r) for _, r in g.iterrows()]
                scatter = pg.ScatterPlotItem(x=x, y=y, data=tips, symbol=style["symbol"], size=style["size"],
                                             pen=pg.mkPen(style["color"]), brush=pg.mkBrush(style["color"]),
                                             hoverable=True, tip=_tip, hoverSize=style["size"] + 4,
                                             hoverPen=pg.mkPen("#000000", width=1.5))
                plot.addItem(scatter)
                self.scatters[key].append(scatter)
                if style["role"] == "learner":
                    # labels alternate above and below their points, so neighbours along the curve do not collide
                    for j, ((xi, yi), lams) in enumerate(_coincident(x, y, g["lambda"], tol).items()):
                        text = pg.TextItem("λ=" + ", ".join(f"{v:g}" for v in lams), color=style["color"],
                                           anchor=(0, 1) if j % 2 == 0 else (0, 0))
                        text.setPos(xi, yi)
                        plot.addItem(text)
                        self.labels[key].append(text)
            plot.autoRange(padding=0.12)
            if key != PANELS[0][0]:  # one accuracy axis for both panels
                plot.setXLink(self.plots[PANELS[0][0]])
        self.legend.setText(self._legend_html(styles))
        self.updateGeometry()  # the plots were hidden when the parents last asked for this widget's minimum
        self.hint = self._hint(data)
        self.readout.setText(self.hint)

    # ---- reading it back (tests, the read-out) -------------------------------------------------------------
    def panels(self) -> list[str]:
        return list(self.plots)

    def point_count(self, panel: str) -> int:
        return sum(len(s.points()) for s in self.scatters.get(panel, []))

    def lambda_labels(self, panel: str) -> list[str]:
        return [t.textItem.toPlainText() for t in self.labels.get(panel, [])]

    def axis_labels(self, panel: str) -> tuple[str, str]:
        plot = self.plots[panel]
        return plot.getAxis("bottom").labelText, plot.getAxis("left").labelText

    def tooltip_at(self, panel: str, x: float, y: float) -> str:
        for s in self.scatters.get(panel, []):
            pts = s.pointsAt(QPointF(x, y))
            if len(pts):
                return str(pts[0].data())
        return ""

    # ---- drawing helpers -----------------------------------------------------------------------------------
    @staticmethod
    def _tolerance(data: pd.DataFrame, column: str) -> tuple[float, float]:
        """How close two points of one learner must be to share a λ label: 7 % of each axis's span (about a
        label's height in a panel of this page)."""
        spans = []
        for c in ("accuracy", column):
            v = pd.to_numeric(data[c], errors="coerce").dropna()
            spans.append(0.07 * max(float(v.max() - v.min()) if len(v) else 0.0, 1e-6))
        return spans[0], spans[1]

    @staticmethod
    def _styles(data: pd.DataFrame, colors: tuple[str, ...]) -> dict:
        styles, i = {}, 0
        for method, g in data.groupby("method", sort=False):
            role = g["role"].iloc[0]
            if role == "dnn":
                style = {"color": "#000000", "symbol": "star", "size": 15}
            elif role == "learner":
                style = {"color": colors[i % len(colors)], "symbol": "o", "size": 9}
                i += 1
            else:
                style = {"color": GREY, "symbol": "s" if role == "baseline" else "d", "size": 9}
            styles[method] = {**style, "role": role, "label": str(g["label"].iloc[0])}
        return styles

    @staticmethod
    def _legend_html(styles: dict) -> str:
        marks = {"star": "★", "o": "●", "s": "■", "d": "◆"}
        return "&nbsp;&nbsp; ".join(f"<span style='color:{s['color']}'>{marks[s['symbol']]}</span>&nbsp;"
                                    f"{html_text(s['label']).replace(' ', '&nbsp;')}" for s in styles.values())

    @staticmethod
    def _hint(data: pd.DataFrame) -> str:
        swept = bool(len(data)) and bool((data[data["role"] == "learner"].groupby("method").size() > 1).any())
        tail = ("learners' points are joined in order of λ" if swept
                else "one point per method at the run's λ (give frontier λ values to sweep it)")
        return f"Lower and further right is better on both panels; {tail}. Point at a point to read its values."

    def _mouse_moved(self, pos, panel: str) -> None:
        plot = self.plots.get(panel)
        if plot is None or not plot.getViewBox().sceneBoundingRect().contains(pos):
            return
        for s in self.scatters.get(panel, []):
            pts = s.pointsAt(s.mapFromScene(pos))
            if len(pts):
                self.readout.setText(" · ".join(str(pts[0].data()).split("\n")))
                return
        self.readout.setText(self.hint)
