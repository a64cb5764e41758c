"""Interactive forest (gap) plot: one row per gap estimate, 95% CI whiskers, the verdict drawn distinctly.

It draws the rows of :func:`fairdesk.core.reports.figures.forest_data` (or ``delta_eo_data``) — the same table
the PDF report's static figure is drawn from — with pyqtgraph:

* ``ScatterPlotItem(hoverable=True, tip=...)`` per significance status for the estimates; the hover tooltip is the
  row's ``tooltip`` text (n, numerators/denominators, rates, gap, CI, p and q);
* ``ErrorBarItem`` for the confidence intervals (its ``left``/``right`` are lengths from the point, not bounds);
* an ``InfiniteLine`` at 0 (no gap) and categorical row labels via ``AxisItem.setTicks``.
"""
from __future__ import annotations

import os
import textwrap

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QColor, QFont, QFontMetrics  # noqa: E402
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget  # noqa: E402
from fairdesk.core.escape import html_text  # noqa: E402
from fairdesk.gui.widgets.panel_parts import FitLabel  # noqa: E402
from fairdesk.core.reports.figures import NULL_BAND_STYLE, STATUS_ORDER, gap_status  # noqa: E402
from fairdesk.core.reports.figures import STATUS_STYLE as _FIGURE_STYLE  # noqa: E402

pg = None  # pyqtgraph, imported when the first plot is drawn (keeps the window's start-up fast)


def _pg():
    global pg
    if pg is None:
        import pyqtgraph

        pyqtgraph.setConfigOptions(antialias=True, background="w", foreground="#222222")
        pg = pyqtgraph
    return pg

# the same look as the report's figures: matplotlib markers mapped to pyqtgraph symbols, sizes in pixels
_SYMBOLS = {"o": "o", "D": "d", "x": "x", "s": "s"}
STATUS_STYLE = {status: {**style, "symbol": _SYMBOLS[style["marker"]], "size": round(style["size"] * 1.5) + 1}
                for status, style in _FIGURE_STYLE.items()}


def _tip(x=None, y=None, data=None) -> str:  # noqa: ARG001 - pyqtgraph passes x, y and data
    return str(data) if data is not None else ""


def wrapped(text: str, width: int) -> str:
    """``text`` as HTML lines of at most ``width`` characters: a plot's title and axis caption set the plot's minimum
    width, so a long attribute name or caption on one line made the plot wider than its view (cut on the right)."""
    return "<br>".join(html_text(line) for line in textwrap.wrap(str(text), width)) if text else ""


def _status(row) -> str:
    status = row.get("status") if hasattr(row, "get") else None
    if isinstance(status, str) and status in STATUS_STYLE:
        return status
    value = row.get("gap", row.get("value"))
    estimable = not (value is None or (isinstance(value, float) and np.isnan(value)))
    return gap_status(row.get("verdict"), estimable)


STRIPE_REACH = 1e6  # the task bands' half-width in data units: wider than any gap the plot may be panned to


class GapPlot(QWidget):
    """A horizontal forest plot. ``set_data(df, value_col="gap")`` with columns label, y, gap (or value),
    ci_low, ci_high, status (or verdict) and tooltip. ``band=True``: the interval is a null band (Δ_eo), drawn
    as a light bar behind the estimate rather than as whiskers."""

    MAX_LABEL_WIDTH = 320  # px of a row label on the left axis

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        font = QFont()
        font.setPointSizeF(9.0)
        self._font = font
        self.plot_widget = None
        self.plot = None
        # the legend sits below the plot (inside it, it would hide points)
        self.legend = FitLabel("", self)  # a long legend wraps (it never widens the results column) and keeps its lines
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.legend.setVisible(False)
        self.zero_line = None
        self.scatters: dict = {}
        self.error_bars: dict = {}
        self.bands: list = []
        self.empty_label = QLabel(self)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.empty_label.setStyleSheet("color: palette(mid); padding: 16px;")
        self._layout.addWidget(self.empty_label)
        self.data = pd.DataFrame()
        self.held = False  # repaints held off by the page (:meth:`hold_repaints`)
        self.clear("Run an audit, or choose one from the list, to see its gaps.")

    def ensure_plot(self) -> None:
        """Create the plot widget (about 15–30 ms of the Qt thread; a page may do it in a turn of its own)."""
        if self.plot_widget is not None:
            return
        pg = _pg()
        self.plot_widget = pg.PlotWidget(self, enableMenu=False)
        self.plot_widget.setMinimumHeight(200)
        self.plot = self.plot_widget.getPlotItem()
        self.plot.showGrid(x=True, y=False, alpha=0.25)
        self.plot.invertY(True)
        self.plot.setMenuEnabled(False)
        self.plot.getViewBox().setMouseEnabled(x=True, y=False)
        for name in ("left", "bottom", "top"):
            axis = self.plot.getAxis(name)
            axis.setTickFont(self._font)
            axis.setTextPen(pg.mkPen("#222222"))
            axis.setPen(pg.mkPen("#888888"))
            axis.enableAutoSIPrefix(False)
        self.zero_line = pg.InfiniteLine(pos=0.0, angle=90, movable=False,
                                         pen=pg.mkPen("#444444", width=1, style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.zero_line)
        from PySide6.QtWidgets import QScrollArea

        # many rows scroll (each keeps a readable height); the legend stays below, outside the scrolling part
        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # rows scroll, never sideways
        self.scroll.setWidget(self.plot_widget)
        self._layout.addWidget(self.scroll, 1)
        self._layout.addWidget(self.legend)

    # ---- API -----------------------------------------------------------------------------------------------
    def hold_repaints(self, held: bool) -> None:
        """Hold the plot's repaints off (``True``) while the page around it is filled, and repaint it once when
        released: each resize of a shown pyqtgraph plot (the header, the summary and the tables above and beside it
        settling) repainted it in full, axes laid out anew, 2–20 ms of the Qt thread each, several per audit shown."""
        self.held = held
        if self.plot_widget is not None:
            self.plot_widget.setUpdatesEnabled(not held)

    def clear(self, message: str = "") -> None:
        self.data = pd.DataFrame()
        self.empty_label.setText(message)
        self.empty_label.setVisible(bool(message))
        if message:  # (a plot being redrawn keeps its legend until the new one is set: no resize in between)
            self.legend.setVisible(False)
            self.legend.setText("")
        if self.plot_widget is None:
            return
        for item in [*self.scatters.values(), *self.error_bars.values(), *self.bands]:
            self.plot.removeItem(item)
        self.scatters.clear()
        self.error_bars.clear()
        self.bands.clear()
        self.plot.getAxis("left").setTicks([[]])
        self.scroll.setVisible(not message)

    def set_data(self, df: pd.DataFrame, **kwargs) -> None:
        """Draw ``df`` at once (see :meth:`set_data_steps` for the arguments)."""
        for _ in self.set_data_steps(df, **kwargs):
            pass

    def set_data_steps(self, df: pd.DataFrame, *, value_col: str = "gap", title: str = "", xlabel: str = "",
                       empty_message: str = "Nothing to plot for this choice.", band: bool = False):
        """Draw ``df`` in parts (a generator: a page fills it in slices): the rows' bands and intervals, the
        estimates, then the axes, legend and ranges. The plot is repainted once, when all is drawn (each repaint of
        a shown plot costs the Qt thread 10–40 ms: a repaint per part tripled that)."""
        if df is None or df.empty:
            self.clear(empty_message)
            return
        self.ensure_plot()
        self.plot_widget.setUpdatesEnabled(False)
        try:
            yield from self._draw_steps(df, value_col, title, xlabel, band)
        finally:  # (also when a newer audit drops the steps)
            self.plot_widget.setUpdatesEnabled(not self.held)

    def _draw_steps(self, df: pd.DataFrame, value_col: str, title: str, xlabel: str, band: bool):
        self.clear("")
        pg = _pg()
        df = df.reset_index(drop=True).copy()
        if "y" not in df.columns:
            df["y"] = np.arange(len(df))
        if "tooltip" not in df.columns:
            df["tooltip"] = df["label"].astype(str)
        # one status per row, compared as a NumPy array (the same comparison on an Arrow-backed column costs ms each)
        statuses = np.array([_status(r) for r in df.to_dict(orient="records")], dtype=object)
        df["_status"] = statuses
        self.data = df
        ys = df["y"].to_numpy(float)
        values = pd.to_numeric(df[value_col], errors="coerce").to_numpy(float)
        lows = pd.to_numeric(df["ci_low"], errors="coerce").to_numpy(float)
        highs = pd.to_numeric(df["ci_high"], errors="coerce").to_numpy(float)

        # alternating bands behind the rows of each task, so that long plots stay readable: one bar item for all of
        # them (a LinearRegionItem per band was three interactive items whose bounds pyqtgraph recomputed in Python
        # at every resize and repaint of the plot: tens of ms of the Qt thread each time the page was shown)
        if "task" in df.columns and df["task"].nunique() > 1:
            spans = [(part["y"].min() - 0.5, part["y"].max() + 0.5)
                     for i, (_, part) in enumerate(df.groupby("task", sort=False)) if i % 2 == 0]
            lows_y = np.array([lo for lo, _ in spans], dtype=float)
            stripe = pg.BarGraphItem(x0=-STRIPE_REACH, x1=STRIPE_REACH, y0=lows_y,
                                     height=np.array([hi - lo for lo, hi in spans], dtype=float),
                                     brush=pg.mkBrush("#EEF2F6"), pen=pg.mkPen(None))
            stripe.setZValue(-10)
            self.plot.addItem(stripe, ignoreBounds=True)
            self.bands.append(stripe)

        if band:  # the null band of each row: a light bar from ci_low to ci_high
            ok = ~(np.isnan(lows) | np.isnan(highs))
            if ok.any():
                bars = pg.ErrorBarItem(x=lows[ok], y=ys[ok], left=np.zeros(ok.sum()), right=highs[ok] - lows[ok],
                                       beam=0.0, pen=pg.mkPen(NULL_BAND_STYLE["color"], width=9))
                bars.setZValue(1)
                self.plot.addItem(bars)
                self.error_bars["null_band"] = bars
        tooltips = np.array(df["tooltip"].astype(str).tolist(), dtype=object)
        yield
        for status in STATUS_ORDER:
            mask = statuses == status
            if not mask.any():
                continue
            st = STATUS_STYLE[status]
            color = QColor(st["color"])
            x = np.where(np.isnan(values[mask]), 0.0, values[mask]) if status == "not_estimable" else values[mask]
            has_ci = ~(np.isnan(lows[mask]) | np.isnan(highs[mask]) | np.isnan(x))
            if has_ci.any() and not band:
                xe, ye = x[has_ci], ys[mask][has_ci]
                bars = pg.ErrorBarItem(x=xe, y=ye, left=xe - lows[mask][has_ci], right=highs[mask][has_ci] - xe,
                                       beam=0.25, pen=pg.mkPen(color, width=2.0 if st["filled"] else 1.2))
                self.plot.addItem(bars)
                self.error_bars[status] = bars
            brush = pg.mkBrush(color) if st["filled"] else pg.mkBrush(255, 255, 255, 255)
            scatter = pg.ScatterPlotItem(x=x, y=ys[mask], data=list(tooltips[mask]),
                                         symbol=st["symbol"], size=st["size"], pen=pg.mkPen(color, width=1.6),
                                         brush=brush, hoverable=True, tip=_tip, name=st["label"],
                                         hoverSize=st["size"] + 4, hoverPen=pg.mkPen("#000000", width=1.5))
            scatter.setZValue(10)
            self.plot.addItem(scatter)
            self.scatters[status] = scatter
        yield

        glyphs = {"o": "\u25CF", "d": "\u25C6", "x": "\u2715", "s": "\u25A0"}
        parts = []
        if band:
            parts.append(f"<span style='color:{NULL_BAND_STYLE['color']}; font-size:13pt'>\u25AC</span>&nbsp;"
                         f"{NULL_BAND_STYLE['label']}")
        for status in STATUS_ORDER:
            n = int((statuses == status).sum())
            if n:
                st = STATUS_STYLE[status]
                glyph = glyphs[st["symbol"]] if st["filled"] or st["symbol"] == "x" else "\u25CB"
                # each test is drawn once (forest_data), so a verdict's count is a count of tests
                unit = ("group" if status == "not_estimable" else "test") + ("" if n == 1 else "s")
                parts.append(f"<span style='color:{st['color']}; font-size:13pt'>{glyph}</span>&nbsp;"
                             f"{st['label']} ({n} {unit})")
        self.legend.setText("&nbsp;&nbsp;&nbsp;&nbsp;".join(parts))
        self.legend.setVisible(True)
        axis = self.plot.getAxis("left")
        # long row labels are shortened in the middle (the hover text names the row in full): pyqtgraph drops a
        # tick label wider than its axis, and a wider axis leaves no room for the gaps
        metrics = QFontMetrics(self._font)
        labels = [metrics.elidedText(str(s), Qt.TextElideMode.ElideMiddle, self.MAX_LABEL_WIDTH) for s in df["label"]]
        axis.setTicks([[(float(y), lab) for y, lab in zip(ys, labels)], []])
        axis.setWidth(max(metrics.horizontalAdvance(lab) for lab in labels) + 16)
        self.plot.setLabel("bottom", wrapped(xlabel or ("gap" if value_col == "gap" else value_col), 56),
                           **{"font-size": "9pt"})
        heading = wrapped(title, 48)
        self.plot.setTitle(heading or None, size="10pt")
        if heading.count("<br>"):  # pyqtgraph keeps 30 px for a title: room for every line
            font = QFont(self._font)
            font.setPointSizeF(10.0)
            room = QFontMetrics(font).lineSpacing() * (heading.count("<br>") + 1) + 8
            self.plot.titleLabel.setMaximumHeight(room)
            self.plot.layout.setRowFixedHeight(0, room)
        finite = np.concatenate([values[~np.isnan(values)], lows[~np.isnan(lows)], highs[~np.isnan(highs)], [0.0]])
        lo, hi = float(finite.min()), float(finite.max())
        pad = max((hi - lo) * 0.08, 0.02)
        self.plot.setXRange(lo - pad, hi + pad, padding=0)
        self.plot.setYRange(-0.7, len(df) - 0.3, padding=0)
        self.plot.getViewBox().setLimits(yMin=-2, yMax=len(df) + 1)
        # the plot needs room for its rows: let a surrounding scroll area scroll instead of squeezing them
        need = int(min(max(90 + 19 * len(df), 200), 4000))
        self.plot_widget.setMinimumHeight(need)
        # a plot of a few rows never scrolls inside (its x-axis and its label stay in view); a long one scrolls,
        # with the x-axis repeated at the top so that a scale is always in view
        self.scroll.setMinimumHeight(min(need, 240))
        self.plot.showAxis("top", need > 240)

    def tooltips(self) -> list[str]:
        """Every spot's hover text (for tests and accessibility)."""
        out: list[str] = []
        for scatter in self.scatters.values():
            out.extend(str(p.data()) for p in scatter.points())
        return out

    def tooltip_at(self, x: float, y: float) -> str:
        """The tooltip text pyqtgraph shows when the pointer is over (x, y) in data coordinates."""
        from PySide6.QtCore import QPointF

        for scatter in self.scatters.values():
            points = scatter.pointsAt(QPointF(x, y))
            if len(points):
                tip = scatter.opts["tip"]
                return "\n\n".join(tip(x=p.pos().x(), y=p.pos().y(), data=p.data()) for p in points)
        return ""
