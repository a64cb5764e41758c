"""Counterfactual scatter plots: a classifier's prediction on the original (x) against the counterfactual (y).

One column per direction (observed a → target a′) and a last column for the horizontal flip of the original (the
null baseline: an attribute-irrelevant change), for the output chosen in a combo box. Every panel has the identity
line y = x (no change), optionally the negative-control band y = x ± band (dashed), linked axes, and a hover
read-out (unit index, both predictions, the change). The data are the ``scatter`` part of a stored image audit
(:class:`fairdesk.core.audits.cit_images.ImageAuditResult`): ``{output: {"0->1": {"x", "y", "index"}, …,
"flip": {"0->1": {…}, …}}}``.
"""
from __future__ import annotations

import math
import os
from functools import partial

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6.QtCore import QPointF, Qt  # noqa: E402
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget  # noqa: E402

from fairdesk.core import numbers  # noqa: E402

FLIP = "flip"
DIRECTION_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
FLIP_COLOUR = "#7f7f7f"


def _direction_label(key: str, attribute: str = "a", names=None) -> str:
    """"0->1" → "sex = 0 → 1", or with value names "sex: F → M"."""
    if "->" in key:
        s, t = key.split("->", 1)
        if names is not None and s.isdigit() and t.isdigit() and max(int(s), int(t)) < len(names):
            return f"{attribute}: {names[int(s)]} → {names[int(t)]}"
        return f"{attribute} = {s} → {t}"
    return key


def _tip_text(source: str, x=None, y=None, data=None) -> str:
    """A dot's hover text: its unit (``data``, the unit's index), the direction ``source``, both predictions and
    the change. Written when the pointer is over the dot, not for every dot when the plot is drawn."""
    if data is None or x is None or y is None:
        return ""
    return f"unit {int(data)}{(' (' + source + ')') if source else ''}: x {x:.3f}, y {y:.3f}, Δ {y - x:+.3f}"


def _point_text(item, point) -> str:
    """The hover text of ``point`` of the scatter ``item``."""
    return item.opts["tip"](x=point.pos().x(), y=point.pos().y(), data=point.data())


def _flip_parts(entry) -> dict:
    """The flip entry is either ``{"x", "y"}`` or per observed value ``{"0->1": {"x", "y"}, …}``."""
    if not isinstance(entry, dict):
        return {}
    if "x" in entry and "y" in entry:
        return {"all": entry}
    return {k: v for k, v in entry.items() if isinstance(v, dict) and "x" in v}


class CounterfactualScatter(QWidget):
    """``set_data(scatter, band=None, x_label=..., attribute=...)``; choose the output in ``output_combo``."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        pg.setConfigOptions(antialias=True, background="w", foreground="#222222")
        self.data: dict = {}
        self.band: float | None = None
        self.x_label = "prediction on the original"
        self.attribute = "a"
        self.names: list[str] | None = None
        self.plots: dict[str, pg.PlotItem] = {}
        self.scatters: dict[str, list] = {}
        self.output_combo = QComboBox(self)
        self.output_combo.currentIndexChanged.connect(self._draw)
        # one PlotWidget per column in an equal-stretch row (a single graphics layout sizes columns by their titles)
        self.graphics = QWidget(self)
        self.graphics.setMinimumHeight(260)
        self._row = QHBoxLayout(self.graphics)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._widgets: list = []
        self.readout = QLabel("Point at a dot to read the unit and its two predictions.", self)
        self.readout.setStyleSheet("font-family: monospace;")
        self.note = QLabel("", self)
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: palette(mid);")
        self.empty_label = QLabel("Run or choose an audit to see its scatter plots.", self)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setStyleSheet("color: palette(mid); padding: 12px;")
        top = QHBoxLayout()
        top.addWidget(QLabel("Output", self))
        top.addWidget(self.output_combo)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.readout)
        layout.addWidget(self.note)
        self.set_data({})

    # ---- API -----------------------------------------------------------------------------------------------
    def set_data(self, scatter: dict, *, band: float | None = None, x_label: str | None = None,
                 attribute: str = "a", names: list[str] | None = None) -> None:
        """``names``: the attribute's value labels [group 0, group 1] for the column titles."""
        for _ in self.fill(scatter, band=band, x_label=x_label, attribute=attribute, names=names):
            pass

    def fill(self, scatter: dict, *, band: float | None = None, x_label: str | None = None,
             attribute: str = "a", names: list[str] | None = None):
        """:meth:`set_data` in parts: a generator drawing one column per step (a page runs it one step per turn
        of the event loop, so that drawing never holds the Qt thread for long)."""
        self.names = list(names) if names else None
        self.data = dict(scatter or {})
        self.band = band if band is not None and math.isfinite(band) else None
        self.x_label = x_label or "prediction on the original"
        self.attribute = attribute or "a"
        current = self.output_combo.currentData()
        self.output_combo.blockSignals(True)
        self.output_combo.clear()
        for name in self.data:
            self.output_combo.addItem(str(name), name)
        idx = self.output_combo.findData(current)
        self.output_combo.setCurrentIndex(idx if idx >= 0 else (0 if self.data else -1))
        self.output_combo.blockSignals(False)
        has = bool(self.data)
        self.empty_label.setVisible(not has)
        self.graphics.setVisible(has)
        self.readout.setVisible(has)
        self.output_combo.setEnabled(has)
        yield from self._draw_steps()

    def columns(self) -> list[str]:
        return list(self.plots)

    def point_count(self, column: str) -> int:
        return sum(len(s.points()) for s in self.scatters.get(column, []))

    def tooltip_at(self, column: str, x: float, y: float) -> str:
        for s in self.scatters.get(column, []):
            pts = s.pointsAt(QPointF(x, y))
            if len(pts):
                return "\n".join(_point_text(s, p) for p in pts)
        return ""

    # ---- drawing -------------------------------------------------------------------------------------------
    def _draw(self, *args) -> None:
        for _ in self._draw_steps():
            pass

    def _draw_steps(self):
        for w in self._widgets:
            self._row.removeWidget(w)
            w.deleteLater()
        self._widgets = []
        self.plots.clear()
        self.scatters.clear()
        name = self.output_combo.currentData()
        entry = self.data.get(name) if name is not None else None
        if not entry:
            self.note.setText("")
            return
        yield
        directions = [k for k in entry if k != FLIP]
        columns = [(k, {k: entry[k]}) for k in directions]
        flip = _flip_parts(entry.get(FLIP))
        if flip:
            columns.append((FLIP, flip))
        xs_all, ys_all = [], []
        for _, parts in columns:
            for part in parts.values():
                xs_all.extend(part.get("x", []))
                ys_all.extend(part.get("y", []))
        vals = np.asarray(xs_all + ys_all, dtype=float)
        vals = vals[np.isfinite(vals)]
        lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
        if 0.0 <= lo and hi <= 1.0:   # probabilities: show the whole [0, 1] square
            lo, hi = 0.0, 1.0
        pad = max(hi - lo, 1e-6) * 0.04
        for col, (key, parts) in enumerate(columns):
            is_flip = key == FLIP
            n = sum(len(p.get("x", [])) for p in parts.values())
            shift = [np.asarray(p["y"], float) - np.asarray(p["x"], float) for p in parts.values() if p.get("x")]
            d = np.concatenate(shift) if shift else np.array([])
            stat = f"mean Δ {d.mean():+.3f}, mean |Δ| {np.abs(d).mean():.3f}" if d.size else "no units"
            title = ("horizontal flip (null baseline)" if is_flip else
                     _direction_label(key, self.attribute, self.names))
            widget = pg.PlotWidget(self.graphics, enableMenu=False)
            widget.setMinimumWidth(120)
            widget.scene().sigMouseMoved.connect(lambda pos, k=key: self._mouse_moved(pos, k))
            self._row.addWidget(widget, 1)
            # hidden until every column is drawn, keeping its place: the layout is settled once, and showing the
            # columns one per step paints one plot per step (adding shown columns one by one resized and repainted
            # every column already there in each step)
            policy = widget.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            widget.setSizePolicy(policy)
            widget.hide()
            self._widgets.append(widget)
            plot = widget.getPlotItem()
            plot.setTitle(f"{title}<br><span style='font-size:8pt'>n = {n}; {stat}</span>", size="9pt")
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.showGrid(x=True, y=True, alpha=0.2)
            plot.setLabel("bottom", "prediction on the original" if is_flip else self.x_label)
            plot.setLabel("left", "prediction on the flipped image" if is_flip else "prediction on the counterfactual")
            for axis in ("left", "bottom"):
                plot.getAxis(axis).enableAutoSIPrefix(False)
            plot.setRange(xRange=(lo - pad, hi + pad), yRange=(lo - pad, hi + pad), padding=0)
            plot.addItem(pg.InfiniteLine(pos=QPointF(0, 0), angle=45, movable=False,
                                         pen=pg.mkPen("#444444", width=1)))
            if self.band is not None and not is_flip:
                for sign in (-1, 1):
                    plot.addItem(pg.InfiniteLine(pos=QPointF(0, sign * self.band), angle=45, movable=False,
                                                 pen=pg.mkPen("#b8860b", width=1, style=Qt.PenStyle.DashLine)))
            items = []
            for j, (pkey, part) in enumerate(parts.items()):
                x = np.asarray(part.get("x", []), dtype=float)
                y = np.asarray(part.get("y", []), dtype=float)
                index = part.get("index") or list(range(len(x)))
                colour = FLIP_COLOUR if is_flip and pkey == "all" else DIRECTION_COLOURS[
                    (directions.index(pkey) if pkey in directions else j) % len(DIRECTION_COLOURS)]
                src = _direction_label(pkey, self.attribute, self.names) if pkey != "all" else ""
                c = pg.mkColor(colour)
                s = pg.ScatterPlotItem(x=x, y=y, data=np.asarray(index, dtype=np.int64), size=6, pen=pg.mkPen(None),
                                       brush=pg.mkBrush(c.red(), c.green(), c.blue(), 150), hoverable=True,
                                       tip=partial(_tip_text, src), hoverSize=9, hoverPen=pg.mkPen("#000000"))
                plot.addItem(s)
                items.append(s)
            self.plots[key] = plot
            self.scatters[key] = items
            yield
        notes = ["Dots on the diagonal: the prediction did not change."]
        if self.band is not None:
            notes.append(f"Dashed: the negative-control band ±{numbers.fixed(self.band, 3)} (shifts a classifier known to ignore "
                         "the attribute shows through the same generator).")
        if flip:
            notes.append("Flip column: the same classifier on the horizontally flipped original — how much an "
                         "attribute-irrelevant change moves the output.")
        self.note.setText(" ".join(notes))
        for widget in self._widgets:
            yield
            widget.show()
        yield
        plots = list(self.plots.values())
        for plot in plots[1:]:  # linked once all are shown (their ranges are equal already): zoom one, zoom all
            plot.setXLink(plots[0])
            plot.setYLink(plots[0])

    def _mouse_moved(self, pos: QPointF, column: str | None = None) -> None:
        """``pos`` in the scene of ``column``'s plot (each column has its own scene)."""
        for key, plot in self.plots.items():
            if column is not None and key != column:
                continue
            vb = plot.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                for s in self.scatters.get(key, []):
                    pts = s.pointsAt(s.mapFromScene(pos))
                    if len(pts):
                        self.readout.setText(_point_text(s, pts[0]))
                        return
                return
