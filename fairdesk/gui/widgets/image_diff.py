"""Image diff viewer for counterfactual audits: original | counterfactual | signed difference, linked zoom and pan.

* three pyqtgraph ``ImageItem`` panels (row-major, so ``image[row, col]`` is drawn at x = col, y = row) whose
  ViewBoxes are linked with ``setXLink``/``setYLink``: zooming or panning one moves all three;
* the difference panel shows ``counterfactual − reference`` (the original, or the null-intervention reconstruction
  for a learned generator) with a diverging colour map centred at 0: symmetric levels ±max|diff| and a colour bar;
* a pixel read-out on hover (row, column and the value in every panel);
* flicker mode: a ``QTimer`` alternates the first panel between the original and the counterfactual;
* examples browsed in order of the largest prediction change (a list plus previous / next), with the classifier's
  predictions of the shown example.

The module imports pyqtgraph; panels import it lazily (inside a function) so the window starts quickly.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6.QtCore import QPointF, Qt, QTimer, Signal  # noqa: E402
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,  # noqa: E402
                               QPushButton, QSpinBox, QSplitter, QVBoxLayout, QWidget)

from fairdesk.core import numbers  # noqa: E402

DIFF_COLORMAP = "CET-D1"   # blue – white – red, perceptually uniform diverging map (shipped with pyqtgraph)
ORIGINAL = "original"
REFERENCE = "reference"


@dataclass
class DiffExample:
    """One unit: its original image, counterfactuals per target label, optional null reconstruction, predictions.

    ``predictions``: output name → ``{"original": p, "reference": p (optional), "cf": {target: p}}``.
    """

    original: np.ndarray
    counterfactuals: dict[str, np.ndarray]
    reference: np.ndarray | None = None
    predictions: dict[str, dict] = field(default_factory=dict)
    title: str = ""
    observed: str = ""

    def baseline(self, output: str) -> float | None:
        p = self.predictions.get(output, {})
        value = p.get("reference", p.get("original"))
        return None if value is None else float(value)

    def change(self, output: str | None = None, target: str | None = None) -> float:
        """|p(counterfactual) − p(reference)| for an output and target; the largest over those left as None."""
        best = 0.0
        for name, p in self.predictions.items():
            if output is not None and name != output:
                continue
            base = self.baseline(name)
            for t, v in (p.get("cf") or {}).items():
                if (target is None or t == target) and base is not None and v is not None and math.isfinite(v):
                    best = max(best, abs(float(v) - base))
        return best


def _fmt(v) -> str:
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{float(v):.3f}"


def symmetric_levels(diff: np.ndarray) -> tuple[float, float]:
    """(−m, m) with m = max |diff| (at least 1e-6, so a zero difference still draws)."""
    finite = np.abs(diff[np.isfinite(diff)])
    m = float(finite.max()) if finite.size else 0.0
    m = max(m, 1e-6)
    return -m, m


class DiffViewer(QWidget):
    """Browse counterfactual examples: ``set_examples(list[DiffExample], outputs=None)``."""

    example_changed = Signal(int)

    PANELS = ("original", "counterfactual", "difference")

    def __init__(self, parent=None, *, build: bool = True) -> None:
        """``build=False``: the image panels are built later, by running :meth:`panel_steps` (before
        :meth:`set_examples`)."""
        super().__init__(parent)
        pg.setConfigOptions(antialias=True, background="w", foreground="#222222")
        self.examples: list[DiffExample] = []
        self.order: list[int] = []
        self.current: int | None = None
        self._images: dict[str, np.ndarray | None] = {k: None for k in self.PANELS}
        self.flicker_showing = ORIGINAL

        # ---- controls
        self.output_combo = QComboBox(self)
        self.output_combo.setToolTip("Examples are sorted by the change of this output's prediction.")
        self.output_combo.currentIndexChanged.connect(self._resort)
        self.target_combo = QComboBox(self)
        self.target_combo.setToolTip("Which counterfactual (target attribute value a') to show.")
        self.target_combo.currentIndexChanged.connect(self._refresh_images)
        self.reference_combo = QComboBox(self)
        self.reference_combo.setToolTip("The difference is the counterfactual minus this image. With a learned "
                                        "generator, the null-intervention reconstruction (a' = a) removes the "
                                        "generator's own artefacts from the comparison.")
        self.reference_combo.currentIndexChanged.connect(self._refresh_images)
        for combo in (self.output_combo, self.target_combo, self.reference_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.prev_button = QPushButton("◀ Previous", self)
        self.next_button = QPushButton("Next ▶", self)
        self.prev_button.clicked.connect(lambda: self.step(-1))
        self.next_button.clicked.connect(lambda: self.step(1))
        self.flicker_button = QPushButton("Flicker", self)
        self.flicker_button.setCheckable(True)
        self.flicker_button.setToolTip("Alternate the first panel between the original and the counterfactual.")
        self.flicker_button.toggled.connect(self._flicker_toggled)
        self.flicker_ms = QSpinBox(self)
        self.flicker_ms.setRange(100, 3000)
        self.flicker_ms.setSingleStep(100)
        self.flicker_ms.setValue(500)
        self.flicker_ms.setSuffix(" ms")
        self.flicker_ms.valueChanged.connect(lambda v: self.flicker_timer.setInterval(int(v)))
        self.reset_button = QPushButton("Reset zoom", self)
        self.reset_button.clicked.connect(self.reset_zoom)
        self.flicker_timer = QTimer(self)
        self.flicker_timer.setInterval(self.flicker_ms.value())
        self.flicker_timer.timeout.connect(self._flicker_tick)

        self.example_list = QListWidget(self)
        self.example_list.setMinimumWidth(230)
        self.example_list.setToolTip("Examples, largest prediction change first.")
        self.example_list.currentRowChanged.connect(self._row_changed)

        # ---- plots: one GraphicsLayoutWidget per panel in an equal-stretch row (a single graphics layout would
        # size its columns by their titles), the colour bar in a narrow one of its own; built by panel_steps
        self.graphics = QWidget(self)
        self.graphics.setMinimumSize(420, 200)
        self._panel_row = QHBoxLayout(self.graphics)
        self._panel_row.setContentsMargins(0, 0, 0, 0)
        self._panel_row.setSpacing(2)
        self.panel_widgets: list = []
        self.plots: list = []
        self.views: list = []
        self.items: dict[str, pg.ImageItem] = {}
        self.colorbar = None
        self._auto_fit = True   # fit the image to the panels until the user zooms or pans

        self.caption = QLabel("", self)
        self.caption.setWordWrap(True)
        self.readout = QLabel("Point at a pixel to read its values.", self)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setStyleSheet("font-family: monospace;")
        self.predictions_label = QLabel("", self)
        self.predictions_label.setWordWrap(True)
        self.predictions_label.setTextFormat(Qt.TextFormat.RichText)
        self.empty_label = QLabel("No examples to show.", self)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setStyleSheet("color: palette(mid); padding: 12px;")

        top = QHBoxLayout()
        for label, w in (("Output", self.output_combo), ("Target", self.target_combo),
                         ("Difference against", self.reference_combo)):
            top.addWidget(QLabel(label, self))
            top.addWidget(w)
        top.addStretch(1)
        top.addWidget(self.flicker_button)
        top.addWidget(self.flicker_ms)
        top.addWidget(self.reset_button)
        nav = QHBoxLayout()
        nav.addWidget(self.prev_button)
        nav.addWidget(self.next_button)
        left = QWidget(self)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(QLabel("Examples (largest change first)", left))
        lv.addWidget(self.example_list, 1)
        lv.addLayout(nav)
        right = QWidget(self)
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(self.caption)
        rv.addWidget(self.graphics, 1)
        rv.addWidget(self.readout)
        rv.addWidget(self.predictions_label)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(1, 1)
        split.setSizes([240, 700])
        self.split = split
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.empty_label)
        layout.addWidget(split, 1)
        self._update_enabled()
        if build:
            for _ in self.panel_steps():
                pass

    def panel_steps(self):
        """Build the image panels and the colour bar, one per step (a generator: a page runs it one step per turn
        of the event loop, so that building the viewer never holds the Qt thread for long; about 20 ms each)."""
        row = self._panel_row
        for name in self.PANELS:
            gw = pg.GraphicsLayoutWidget(self.graphics)
            gw.ci.setContentsMargins(2, 2, 2, 2)
            plot = gw.addPlot(row=0, col=0, title=name, enableMenu=False)
            plot.hideAxis("left")
            plot.hideAxis("bottom")
            plot.setMenuEnabled(False)
            plot.hideButtons()
            vb = plot.getViewBox()
            vb.setAspectLocked(True)
            vb.invertY(True)
            item = pg.ImageItem(axisOrder="row-major")
            plot.addItem(item)
            gw.scene().sigMouseMoved.connect(lambda pos, v=vb: self._mouse_moved(pos, v))
            gw.setMinimumWidth(60)
            row.addWidget(gw, 1)
            policy = gw.sizePolicy()  # hidden, keeping its place, until all are built (see CounterfactualScatter)
            policy.setRetainSizeWhenHidden(True)
            gw.setSizePolicy(policy)
            gw.hide()
            self.panel_widgets.append(gw)
            self.plots.append(plot)
            self.views.append(vb)
            self.items[name] = item
            vb.sigRangeChangedManually.connect(self._user_zoomed)
            if len(self.views) > 1:
                vb.setXLink(self.views[0])
                vb.setYLink(self.views[0])
            yield
        self.colormap = pg.colormap.get(DIFF_COLORMAP)
        self.diff_item.setColorMap(self.colormap)
        self.colorbar = pg.ColorBarItem(values=(-1, 1), colorMap=self.colormap, interactive=False, width=14,
                                        colorMapMenu=False)
        self.colorbar.axis.enableAutoSIPrefix(False)
        self.colorbar.setImageItem(self.diff_item)
        bar = pg.GraphicsLayoutWidget(self.graphics)
        bar.addItem(self.colorbar, row=0, col=0)
        bar.setFixedWidth(86)
        row.addWidget(bar, 0)
        for gw in self.panel_widgets:  # one first paint per step
            yield
            gw.show()
        self.colorbar_widget = bar
        yield

    # ---- accessors -----------------------------------------------------------------------------------------
    @property
    def original_item(self) -> pg.ImageItem:
        return self.items["original"]

    @property
    def cf_item(self) -> pg.ImageItem:
        return self.items["counterfactual"]

    @property
    def diff_item(self) -> pg.ImageItem:
        return self.items["difference"]

    def image(self, panel: str) -> np.ndarray | None:
        """The array shown in a panel (the original's, even while flickering)."""
        return self._images[panel]

    def diff_levels(self) -> tuple[float, float]:
        lo, hi = self.diff_item.getLevels()
        return float(lo), float(hi)

    def ordered_titles(self) -> list[str]:
        return [self.examples[i].title for i in self.order]

    # ---- data ----------------------------------------------------------------------------------------------
    def set_examples(self, examples: list[DiffExample], outputs: list[str] | None = None) -> None:
        self.stop_flicker()
        self.examples = list(examples)
        names = list(outputs or [])
        for ex in self.examples:
            for name in ex.predictions:
                if name not in names:
                    names.append(name)
        targets: list[str] = []
        for ex in self.examples:
            for t in ex.counterfactuals:
                if t not in targets:
                    targets.append(t)
        has_ref = any(ex.reference is not None for ex in self.examples)
        for combo, items in ((self.output_combo, [("largest over outputs", None)] + [(n, n) for n in names]),
                             (self.target_combo, [(t, t) for t in targets]),
                             (self.reference_combo, ([("null reconstruction (a' = a)", REFERENCE)] if has_ref
                                                     else []) + [("original", ORIGINAL)])):
            combo.blockSignals(True)
            combo.clear()
            for text, data in items:
                combo.addItem(text, data)
            combo.setCurrentIndex(0 if items else -1)
            combo.blockSignals(False)
        self.current = None
        self._resort()
        self._update_enabled()
        if self.examples:
            self.reset_zoom()

    def clear(self) -> None:
        self.set_examples([])

    def _resort(self, *args) -> None:
        output = self.output_combo.currentData()
        keep = self.current
        self.order = sorted(range(len(self.examples)), key=lambda i: (-self.examples[i].change(output), i))
        self.example_list.blockSignals(True)
        self.example_list.clear()
        for rank, i in enumerate(self.order):
            ex = self.examples[i]
            item = QListWidgetItem(f"{rank + 1}. {ex.title or f'example {i}'}   Δ {ex.change(output):.3f}")
            item.setData(Qt.ItemDataRole.UserRole, i)
            self.example_list.addItem(item)
        self.example_list.blockSignals(False)
        if self.order:
            self.show_example(keep if keep in self.order else self.order[0])
        else:
            self._clear_images()

    def show_example(self, index: int) -> None:
        """Show ``examples[index]`` (its position in the list follows the sort order)."""
        if not (0 <= index < len(self.examples)):
            return
        self.current = index
        row = self.order.index(index)
        if self.example_list.currentRow() != row:
            self.example_list.blockSignals(True)
            self.example_list.setCurrentRow(row)
            self.example_list.blockSignals(False)
        self._refresh_images()
        self.example_changed.emit(index)

    def step(self, delta: int) -> None:
        if not self.order:
            return
        row = self.order.index(self.current) if self.current in self.order else 0
        row = min(max(row + delta, 0), len(self.order) - 1)
        self.show_example(self.order[row])

    def _row_changed(self, row: int) -> None:
        if 0 <= row < len(self.order):
            self.show_example(self.order[row])

    def _update_enabled(self) -> None:
        has = bool(self.examples)
        self.empty_label.setVisible(not has)
        self.split.setVisible(has)
        for w in (self.prev_button, self.next_button, self.flicker_button, self.reset_button, self.output_combo,
                  self.target_combo, self.reference_combo):
            w.setEnabled(has)

    def _clear_images(self) -> None:
        for name, item in self.items.items():
            item.clear()
            self._images[name] = None
        self.predictions_label.setText("")

    def _refresh_images(self, *args) -> None:
        if self.current is None:
            return
        ex = self.examples[self.current]
        target = self._sync_targets(ex)
        cf = ex.counterfactuals.get(target)
        use_ref = self.reference_combo.currentData() == REFERENCE and ex.reference is not None
        ref = ex.reference if use_ref else ex.original
        orig = np.asarray(ex.original, dtype=np.float32)
        cf = np.asarray(cf if cf is not None else orig, dtype=np.float32)
        ref = np.asarray(ref, dtype=np.float32)
        diff = cf - ref
        self._images = {"original": orig, "counterfactual": cf, "difference": diff}
        stack = np.concatenate([orig.ravel(), cf.ravel()])
        lo, hi = float(np.nanmin(stack)), float(np.nanmax(stack))
        self._grey_levels = (lo, hi if hi > lo else lo + 1e-6)
        self.original_item.setImage(orig if self.flicker_showing == ORIGINAL else cf, levels=self._grey_levels,
                                    autoLevels=False)
        self.cf_item.setImage(cf, levels=self._grey_levels, autoLevels=False)
        levels = symmetric_levels(diff)
        self.diff_item.setImage(diff, autoLevels=False)
        self.colorbar.setLevels(levels)   # also sets the image's levels (the bar drives the image)
        self.diff_item.setLevels(levels)
        ref_name = "null reconstruction" if use_ref else "original"
        self.plots[0].setTitle("original" if self.flicker_showing == ORIGINAL else "counterfactual")
        self.plots[1].setTitle("counterfactual")
        self.plots[2].setTitle("difference")
        self.caption.setText(f"Counterfactual: do({target}).  Difference = counterfactual − {ref_name} "
                             f"(blue: darker, red: brighter; ±{numbers.short(levels[1], 3)}).")
        self.colorbar.axis.setLabel(f"difference (±{numbers.short(levels[1], 3)})")
        self._current_target = target
        self.predictions_label.setText(self._predictions_html(ex, target))

    def _sync_targets(self, ex: DiffExample):
        """Offer the targets this example has; keep the chosen one when it has it."""
        wanted = self.target_combo.currentData()
        targets = list(ex.counterfactuals)
        if [self.target_combo.itemData(i) for i in range(self.target_combo.count())] != targets:
            self.target_combo.blockSignals(True)
            self.target_combo.clear()
            for t in targets:
                self.target_combo.addItem(str(t), t)
            self.target_combo.blockSignals(False)
        idx = self.target_combo.findData(wanted)
        self.target_combo.blockSignals(True)
        self.target_combo.setCurrentIndex(idx if idx >= 0 else (0 if targets else -1))
        self.target_combo.blockSignals(False)
        return self.target_combo.currentData()

    def _predictions_html(self, ex: DiffExample, target: str) -> str:
        rows = []
        for name, p in ex.predictions.items():
            base = ex.baseline(name)
            v = (p.get("cf") or {}).get(target)
            delta = None if v is None or base is None else float(v) - base
            extra = f", null reconstruction {_fmt(p['reference'])}" if p.get("reference") is not None else ""
            rows.append(f"<b>{name}</b>: original {_fmt(p.get('original'))}{extra} → counterfactual {target} "
                        f"{_fmt(v)} (Δ {'—' if delta is None else f'{delta:+.3f}'})")
        head = f"<b>{ex.title}</b>" + (f" (observed {ex.observed})" if ex.observed else "")
        return head + ("<br>" + "<br>".join(rows) if rows else "")

    # ---- zoom, read-out ------------------------------------------------------------------------------------
    def reset_zoom(self) -> None:
        """Fit the image to the panels (and keep fitting it when the widget is resized)."""
        img = self._images.get("original")
        self._auto_fit = True
        if img is None:
            return
        h, w = img.shape[:2]
        if self.views:
            self.views[0].setRange(xRange=(0, w), yRange=(0, h), padding=0.02)

    def _user_zoomed(self, *args) -> None:
        self._auto_fit = False

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if self._auto_fit:
            QTimer.singleShot(0, self._refit)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self._auto_fit:
            QTimer.singleShot(0, self._refit)

    def _refit(self) -> None:
        if self._auto_fit:
            self.reset_zoom()

    def readout_at(self, row: int, col: int) -> str:
        img = self._images.get("original")
        if img is None or not (0 <= row < img.shape[0] and 0 <= col < img.shape[1]):
            return ""
        vals = {k: float(v[row, col]) for k, v in self._images.items() if v is not None}
        return (f"row {row}, col {col}:  original {vals['original']:.4f}   counterfactual "
                f"{vals['counterfactual']:.4f}   difference {vals['difference']:+.4f}")

    def _mouse_moved(self, pos: QPointF, view=None) -> None:
        """``pos`` in the scene of ``view`` (each panel has its own scene)."""
        for vb in ([view] if view is not None else self.views):
            if vb.sceneBoundingRect().contains(pos):
                p = vb.mapSceneToView(pos)
                text = self.readout_at(int(math.floor(p.y())), int(math.floor(p.x())))
                if text:
                    self.readout.setText(text)
                return

    # ---- flicker -------------------------------------------------------------------------------------------
    def _flicker_toggled(self, on: bool) -> None:
        if on:
            self.flicker_timer.start()
        else:
            self.flicker_timer.stop()
            self.flicker_showing = ORIGINAL
            self._refresh_images()

    def start_flicker(self) -> None:
        self.flicker_button.setChecked(True)

    def stop_flicker(self) -> None:
        self.flicker_button.setChecked(False)

    @property
    def flickering(self) -> bool:
        return self.flicker_timer.isActive()

    def _flicker_tick(self) -> None:
        if self.current is None:
            return
        self.flicker_showing = "counterfactual" if self.flicker_showing == ORIGINAL else ORIGINAL
        img = self._images["original"] if self.flicker_showing == ORIGINAL else self._images["counterfactual"]
        self.original_item.setImage(img, levels=self._grey_levels, autoLevels=False)
        self.plots[0].setTitle("original" if self.flicker_showing == ORIGINAL else "counterfactual")

    def shown_first_panel(self) -> np.ndarray | None:
        """What the first panel draws right now (the original, or the counterfactual during flicker)."""
        return self.original_item.image

    def hideEvent(self, event) -> None:  # noqa: N802 - Qt override
        self.stop_flicker()
        super().hideEvent(event)
