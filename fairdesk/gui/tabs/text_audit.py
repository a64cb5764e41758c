"""Language-model bias (Audit tab sub-page): the log-probability bias probe of a masked LM (METHODS §4), optionally
compared with a second model and with the sentence-completion probe, run as a job; stored results are explored
here (per-category table, per-category score distribution, comparison, completion) and exported as PDF.

The job function is :func:`fairdesk.jobs.text.audit_mlm_bias`; the stored document is the one of
:func:`fairdesk.core.audits.mlm_bias.mlm_audit_document` (project audit kind ``"mlm_bias"``), and the plots draw the
rows of :mod:`fairdesk.core.reports.mlm_bias` (``category_distribution_data``, ``category_summary_data``) — the same
tables the PDF report's figures are drawn from. torch loads inside the job; pyqtgraph when a plot is first shown.
"""
from __future__ import annotations

import json
import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QBrush, QColor  # noqa: E402
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox,  # noqa: E402
                               QHBoxLayout, QLineEdit, QPushButton, QSpinBox, QTabWidget, QTextBrowser, QVBoxLayout,
                               QWidget)

from fairdesk.core import numbers
from fairdesk.core.escape import html_text
from fairdesk.core.errors import FairDeskError  # noqa: E402
from fairdesk.core.kinds import MODEL_KINDS  # noqa: E402
from fairdesk.gui.tabs.base import AuditPage, AuditRun  # noqa: E402
from fairdesk.gui.widgets.panel_parts import (fill_combo, hrow, load_pyqtgraph, note_label,  # noqa: E402
                                              placeholder_label, size_combos)
from fairdesk.gui.widgets.tables import CheckList, DataFrameView, PandasTableModel  # noqa: E402

NONE = "(none)"
LM_KIND = MODEL_KINDS["masked_lm"].name
PRIOR_LABELS = {"pieces": "Every word piece masked (FairDesk)",
                "words": "One mask per word (authors' release)"}
PRIOR_TIPS = {"pieces": "Mask every word piece of the attribute phrase (FairDesk's rule).",
              "words": "One mask per word of the attribute phrase (the authors' released code)."}
TEST_LABELS = {"template": "Test over templates",
               "wilcoxon": "Signed-rank per sentence (paper)",
               "ranksum": "Rank-sum per sentence (release)"}
TEST_TIP = ("Test over templates (default): each template's mean male − female difference is one observation — "
            "the template is the unit of inference; an exact sign-flip test, backed by the t-test and its "
            "skewness-corrected form.\nSigned-rank / rank-sum per sentence: the paper's and a "
            "release's tests; they treat the scores of one template as independent (pseudo-replication) and flag "
            "template noise far more often than α.")
TABLE_HEADERS = {"verdict_text": "verdict", "mean_difference": "difference (nats)", "ci_low": "95% CI low",
                 "ci_high": "95% CI high", "effect_size": "effect r", "d_z": "d_z",
                 "p_value": "p", "q_value": "corrected p-value", "probability_ratio": "probability ratio",
                 "n_templates": "templates", "n_attributes": "attributes", "q_equivalence": "q equivalence",
                 "p_equivalence": "p equivalence"}
FLAG_BACKGROUND = "#FBE3D6"
INCONCLUSIVE_FOREGROUND = "#6B6B6B"   # inconclusive rows: grey italics (neither a finding nor a clearance)
GROUP_COLORS = ("#2F6F9F", "#C98A00")  # as fairdesk.core.reports.mlm_bias.GROUP_COLORS (not imported at start-up)


class FlaggedTableModel(PandasTableModel):
    """A table model that shades the rows of flagged categories (verdict "differs": a ``flagged`` column, or
    ``"<model>: flagged"`` columns of the comparison table: any of them) and sets the rows whose verdict is
    inconclusive (every ``verdict`` / ``"<model>: verdict"`` column) in grey italics, so that they read neither as
    a finding nor as equivalent. Equivalent rows stay plain."""

    def set_frame(self, df, tooltips=None) -> None:
        flags = incon = None
        if df is not None and not df.empty:
            cols = [c for c in df.columns if str(c) == "flagged" or str(c).endswith(": flagged")]
            if cols:
                flags = df[cols].fillna(False).astype(bool).any(axis=1).to_numpy()
            vcols = [c for c in df.columns if str(c) == "verdict" or str(c).endswith(": verdict")]
            if vcols:
                incon = (df[vcols].astype(str) == "inconclusive").all(axis=1).to_numpy()
                if flags is not None:
                    incon = incon & ~flags
        self._flags, self._incon = flags, incon
        super().set_frame(df, tooltips)

    def flagged_rows(self) -> list[int]:
        flags = getattr(self, "_flags", None)
        return [] if flags is None else [int(i) for i in np.flatnonzero(flags)]

    def inconclusive_rows(self) -> list[int]:
        incon = getattr(self, "_incon", None)
        return [] if incon is None else [int(i) for i in np.flatnonzero(incon)]

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.BackgroundRole and index.isValid():
            flags = getattr(self, "_flags", None)
            if flags is not None and index.row() < len(flags) and flags[index.row()]:
                return QBrush(QColor(FLAG_BACKGROUND))
            return None
        incon = getattr(self, "_incon", None)
        if (role in (Qt.ItemDataRole.ForegroundRole, Qt.ItemDataRole.FontRole) and index.isValid()
                and incon is not None and index.row() < len(incon) and incon[index.row()]):
            if role == Qt.ItemDataRole.ForegroundRole:
                return QBrush(QColor(INCONCLUSIVE_FOREGROUND))
            from PySide6.QtGui import QFont

            font = QFont()
            font.setItalic(True)
            return font
        return super().data(index, role)


def _flag_view(parent, **kwargs) -> DataFrameView:
    view = DataFrameView(parent, **kwargs)
    model = FlaggedTableModel(headers=kwargs.get("headers"), parent=view)
    view.model = model
    view.proxy.setSourceModel(model)
    view.set_frame(None)
    return view


class ScoreDistributionPlot(QWidget):
    """Per-sentence scores of one category, one column per word group: the points (jittered, hover text = the
    sentence), a box (quartiles, median, Tukey whiskers) and the mean (diamond); a dashed line at 0."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.plot_widget = None
        self.plot = None
        self.items: list = []
        self.scatters: list = []
        self.empty_label = placeholder_label("", self)
        self._layout.addWidget(self.empty_label)
        self.clear("Run an audit, or choose one from the list, to see the scores of a category.")

    def _ensure(self) -> None:
        if self.plot_widget is not None:
            return
        pg = load_pyqtgraph()
        self.plot_widget = pg.PlotWidget(self, enableMenu=False)
        self.plot_widget.setMinimumHeight(240)
        self.plot = self.plot_widget.getPlotItem()
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        self.plot.setMenuEnabled(False)
        self.plot.getViewBox().setMouseEnabled(x=False, y=True)
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.setLabel("left", "score ln(p_target / p_prior) (nats)", **{"font-size": "9pt"})
        self._layout.addWidget(self.plot_widget, 1)

    def clear(self, message: str = "") -> None:
        self.empty_label.setText(message)
        self.empty_label.setVisible(bool(message))
        if self.plot_widget is None:
            return
        for item in self.items:
            self.plot.removeItem(item)
        self.items, self.scatters = [], []
        self.plot_widget.setVisible(not message)

    def set_data(self, points: pd.DataFrame, summary: pd.DataFrame, title: str = "") -> None:
        """``points``: rows of ``category_distribution_data`` for one model and category; ``summary``: the two rows
        of ``category_summary_data`` (one per group)."""
        if points is None or points.empty:
            self.clear("This category has no per-sentence scores in the stored audit.")
            return
        self._ensure()
        self.clear("")
        import pyqtgraph as pg

        groups = list(summary.sort_values("group_index")["group"]) if not summary.empty else sorted(
            points["group"].unique())
        zero = pg.InfiniteLine(pos=0.0, angle=0, movable=False,
                               pen=pg.mkPen("#444444", width=1, style=Qt.PenStyle.DashLine))
        self.plot.addItem(zero)
        self.items.append(zero)
        for gi, g in enumerate(groups):
            colour = QColor(GROUP_COLORS[gi % len(GROUP_COLORS)])
            row = summary[summary["group"] == g]
            if not row.empty and np.isfinite(row["q1"].iloc[0]):
                r = row.iloc[0]
                fill = QColor(colour)
                fill.setAlpha(50)
                box = pg.BarGraphItem(x=[gi], y0=[r["q1"]], height=[r["q3"] - r["q1"]], width=0.6,
                                      brush=pg.mkBrush(fill), pen=pg.mkPen(colour, width=1.5))
                median = pg.PlotDataItem([gi - 0.3, gi + 0.3], [r["median"], r["median"]],
                                         pen=pg.mkPen(colour, width=2.5))
                whiskers = pg.PlotDataItem([gi, gi, np.nan, gi, gi],
                                           [r["whisker_low"], r["q1"], np.nan, r["q3"], r["whisker_high"]],
                                           pen=pg.mkPen(colour, width=1.2), connect="finite")
                mean = pg.ScatterPlotItem(x=[gi], y=[r["mean"]], symbol="d", size=12, pen=pg.mkPen("#000000"),
                                          brush=pg.mkBrush(colour), hoverable=True, tip=_tip,
                                          data=[str(r.get("tooltip", ""))])
                for item in (box, median, whiskers, mean):
                    self.plot.addItem(item)
                    self.items.append(item)
                mean.setZValue(20)
            sub = points[points["group"] == g]
            x = sub["x"].to_numpy(float) * 0.8 + gi * 0.2 if "x" in sub.columns else np.full(len(sub), gi)
            ok = np.isfinite(sub["score"].to_numpy(float))
            pts_colour = QColor(colour)
            pts_colour.setAlpha(150)
            scatter = pg.ScatterPlotItem(x=x[ok], y=sub["score"].to_numpy(float)[ok],
                                         data=list(sub["tooltip"].astype(str).to_numpy()[ok]), size=5,
                                         pen=pg.mkPen(None), brush=pg.mkBrush(pts_colour), hoverable=True, tip=_tip,
                                         hoverSize=9, hoverPen=pg.mkPen("#000000", width=1.2))
            scatter.setZValue(10)
            self.plot.addItem(scatter)
            self.items.append(scatter)
            self.scatters.append(scatter)
        self.plot.getAxis("bottom").setTicks([[(float(i), f"{g} words") for i, g in enumerate(groups)], []])
        self.plot.setXRange(-0.6, len(groups) - 0.4, padding=0)
        self.plot.setTitle(html_text(title), size="10pt")
        self.plot.enableAutoRange(axis="y")

    def n_points(self) -> int:
        return int(sum(len(s.points()) for s in self.scatters))

    def tooltips(self) -> list[str]:
        return [str(p.data()) for s in self.scatters for p in s.points()]


def _tip(x=None, y=None, data=None) -> str:  # noqa: ARG001 - pyqtgraph passes x, y and data
    return str(data) if data is not None else ""


class MLMAuditPanel(AuditPage):
    """Set up and run the masked-LM bias probe; explore and export stored ``mlm_bias`` audits."""

    TITLE, ATTR = "Language-model bias", "mlm_audit_panel"
    STORED_TITLE = "Stored language-model audits"
    FAIL_TITLE = "The language-model audit did not finish"

    def __init__(self, window) -> None:
        self.templates = None  # the BiasTemplates of the chosen file
        self._completion: pd.DataFrame | None = None
        self._models: dict[int, object] = {}
        super().__init__(window)
        self.load_templates(None)

    @property
    def result_id(self) -> int | None:
        return self.audit_id

    @property
    def audits_list(self):
        return self.audit_list

    # =====================================================================================================
    # Setup
    def build_form(self) -> QWidget:
        w = QWidget(self)
        v = QVBoxLayout(w)
        models_box = QGroupBox("Language models", w)
        form = QFormLayout(models_box)
        self.model_combo = QComboBox(models_box)
        self.model_combo.setPlaceholderText("Open or train a language model on the Model tab")
        self.compare_combo = QComboBox(models_box)
        size_combos(self.model_combo, self.compare_combo, chars=16, on_change=self.update_buttons)
        self.compare_combo.setToolTip("A second model scored with the same templates, shown side by side (e.g. "
                                      "base vs further-pretrained, baseline vs debiased).")
        form.addRow("Model", self.model_combo)
        form.addRow("Compare with", self.compare_combo)
        v.addWidget(models_box)

        tpl_box = QGroupBox("Templates", w)
        form = QFormLayout(tpl_box)
        self.templates_edit = QLineEdit(tpl_box)
        self.templates_edit.setReadOnly(True)
        self.templates_edit.setPlaceholderText("shipped templates")
        self.templates_edit.setToolTip("Empty: the shipped template file mlm_bias_templates.json (001's eight "
                                       "clinical categories).")
        self.templates_browse = QPushButton("Open…", tpl_box)
        self.templates_browse.clicked.connect(self.choose_templates)
        self.templates_default = QPushButton("Shipped", tpl_box)
        self.templates_default.setToolTip("Use the shipped template file (001's eight clinical categories).")
        self.templates_default.clicked.connect(lambda: self.load_templates(None))
        row = QHBoxLayout()
        row.addWidget(self.templates_edit, 1)
        row.addWidget(self.templates_browse)
        row.addWidget(self.templates_default)
        form.addRow("File", row)
        self.edit_templates_button = QPushButton("Edit templates…", tpl_box)
        self.edit_templates_button.setToolTip("Add categories, templates, attribute phrases or word groups and save "
                                              "them as a new file.")
        self.edit_templates_button.clicked.connect(lambda: self.edit_templates())
        self.templates_info = note_label("", tpl_box)
        form.addRow(self.templates_info)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.edit_templates_button)
        form.addRow(row)
        self.categories_list = CheckList(tpl_box, max_visible_rows=8)
        self.categories_list.changed.connect(self.update_buttons)
        form.addRow("Categories", self.categories_list)
        self.group_a = QComboBox(tpl_box)
        self.group_b = QComboBox(tpl_box)
        form.addRow("Word groups", hrow(tpl_box, (self.group_a, 1), "vs", (self.group_b, 1)))
        v.addWidget(tpl_box)

        stats_box = QGroupBox("Score and test", w)
        form = QFormLayout(stats_box)
        self.prior_combo = QComboBox(stats_box)
        for key, text in PRIOR_LABELS.items():
            self.prior_combo.addItem(text, key)
            self.prior_combo.setItemData(self.prior_combo.count() - 1, PRIOR_TIPS[key], Qt.ItemDataRole.ToolTipRole)
        self.test_combo = QComboBox(stats_box)
        for key, text in TEST_LABELS.items():
            self.test_combo.addItem(text, key)
        size_combos(self.prior_combo, self.test_combo, self.group_a, self.group_b, chars=10)
        self.test_combo.setToolTip(TEST_TIP)
        form.addRow("Prior rule", self.prior_combo)
        form.addRow("Test", self.test_combo)
        self.alpha_spin = QDoubleSpinBox(stats_box)
        self.alpha_spin.setRange(0.0001, 0.5)
        self.alpha_spin.setDecimals(4)
        self.alpha_spin.setSingleStep(0.01)
        self.alpha_spin.setValue(0.05)
        self.alpha_spin.setToolTip("A category differs when its p-value, corrected for the number of categories "
                                   "tested (Benjamini–Hochberg), is at most α.")
        form.addRow("α (corrected p at most)", self.alpha_spin)
        self.min_effect_spin = QDoubleSpinBox(stats_box)
        self.min_effect_spin.setRange(0.0, 1.0)
        self.min_effect_spin.setSingleStep(0.05)
        self.min_effect_spin.setValue(0.3)
        self.min_effect_spin.setToolTip("|rank-biserial r| a category needs to be flagged.")
        form.addRow("Flag: |effect r| ≥", self.min_effect_spin)
        self.min_log_ratio_spin = QDoubleSpinBox(stats_box)
        self.min_log_ratio_spin.setRange(0.0, 10.0)
        self.min_log_ratio_spin.setSingleStep(0.05)
        self.min_log_ratio_spin.setValue(0.25)
        self.min_log_ratio_spin.setToolTip("|mean difference| in nats a category needs to be flagged "
                                           "(0.25 nats: a probability ratio of about 1.28).")
        form.addRow("Flag: |difference| ≥ (nats)", self.min_log_ratio_spin)
        self.margin_spin = QDoubleSpinBox(stats_box)
        self.margin_spin.setRange(0.01, 10.0)
        self.margin_spin.setSingleStep(0.05)
        self.margin_spin.setValue(0.25)
        self.margin_spin.setToolTip("A category is 'equivalent' when the TOST over its templates shows its mean "
                                    "difference inside ±this many nats (default: the flag threshold, 0.25).")
        form.addRow("Equivalent within ± (nats)", self.margin_spin)
        self.min_templates_spin = QSpinBox(stats_box)
        self.min_templates_spin.setRange(2, 1000)
        self.min_templates_spin.setValue(6)
        self.min_templates_spin.setToolTip("A category with fewer templates is 'inconclusive: N templates' (with 5 "
                                           "or fewer even an exact test over templates cannot reach p < 0.05).")
        form.addRow("Minimum templates", self.min_templates_spin)
        self.seed_spin = QSpinBox(stats_box)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(self.window_.settings.seed)
        form.addRow("Seed", self.seed_spin)
        self.batch_spin = QSpinBox(stats_box)
        self.batch_spin.setRange(1, 4096)
        self.batch_spin.setValue(64)
        form.addRow("Batch size", self.batch_spin)
        self.completion_check = QCheckBox("Also run the sentence-completion probe (first model)", stats_box)
        self.top_k_spin = QSpinBox(stats_box)
        self.top_k_spin.setRange(1, 50)
        self.top_k_spin.setValue(5)
        form.addRow(hrow(stats_box, (self.completion_check, 1), "top-k", self.top_k_spin))
        v.addWidget(stats_box)
        v.addStretch(1)

        return w

    # =====================================================================================================
    # Results
    def build_results(self) -> QWidget:
        panel, v = self.results_column(header_lines=2)  # two lines: the method, then the verdict counts

        self.results_tabs = QTabWidget(panel)
        page = QWidget(panel)
        pv = QVBoxLayout(page)
        pv.setContentsMargins(4, 4, 4, 4)
        self.table_model_combo = QComboBox(page)
        size_combos(self.table_model_combo, on_change=self.update_table)
        pv.addLayout(hrow(page, "Model", self.table_model_combo, stretch=True))
        self.table_view = _flag_view(page, headers=TABLE_HEADERS, placeholder="No results yet.")
        pv.addWidget(self.table_view, 1)
        note = note_label("Verdicts: shaded rows differ (flagged: significant after the Benjamini–Hochberg correction "
                          "for many tests, and large); plain rows are equivalent within the margin (TOST over templates); grey italic "
                          "rows are inconclusive — neither shown, or too few templates — which is not evidence of "
                          "fairness.",
                          page)
        pv.addWidget(note)
        self.results_tabs.addTab(page, "Categories")

        page = QWidget(panel)
        pv = QVBoxLayout(page)
        pv.setContentsMargins(4, 4, 4, 4)
        self.plot_model_combo = QComboBox(page)
        self.plot_category_combo = QComboBox(page)
        size_combos(self.plot_model_combo, self.plot_category_combo, on_change=self.update_plot)
        pv.addLayout(hrow(page, "Model", self.plot_model_combo, "Category", self.plot_category_combo, stretch=True))
        self.distribution_plot = ScoreDistributionPlot(page)
        pv.addWidget(self.distribution_plot, 1)
        note = note_label("One point per scored sentence (hover for the sentence); box: quartiles and median, whiskers "
                          "1.5 IQR, diamond: mean. Above 0 the template raises the word's probability over its prior.",
                          page)
        pv.addWidget(note)
        self.results_tabs.addTab(page, "Distribution")

        self.comparison_view = _flag_view(panel, placeholder="Run the audit with a second model ('Compare with') "
                                                             "to see the two side by side.")
        self.results_tabs.addTab(self.comparison_view, "Comparison")
        page = QWidget(panel)
        pv = QVBoxLayout(page)
        pv.setContentsMargins(4, 4, 4, 4)
        self.completion_template_combo = QComboBox(page)
        size_combos(self.completion_template_combo, chars=40, on_change=self.update_completion)
        pv.addLayout(hrow(page, "Template", (self.completion_template_combo, 1)))
        self.completion_view = DataFrameView(page, placeholder="Tick 'Also run the sentence-completion probe' to "
                                                               "see each race term's top fillers side by side.")
        pv.addWidget(self.completion_view, 1)
        note = note_label("Each [MASK] is filled greedily (the most confident first, then the model is asked again); "
                          "a cell lists that mask's top-k fillers with their probabilities when it was filled.", page)
        pv.addWidget(note)
        self.results_tabs.addTab(page, "Sentence completion")
        self.details_view = QTextBrowser(panel)
        self.results_tabs.addTab(self.details_view, "Method && provenance")
        v.addWidget(self.results_tabs, 1)
        return panel

    # =====================================================================================================
    # Project, models and templates
    def refresh_form(self) -> None:
        project = self.window_.project
        models = [m for m in project.models() if m.kind == LM_KIND] if project is not None else []
        self._models = {m.id: m for m in models}
        items = [(f"{m.name}  (#{m.id})", m.id) for m in models]
        fill_combo(self.model_combo, items)
        if self.model_combo.currentData() is None and items:
            self.model_combo.setCurrentIndex(len(items) - 1)
        fill_combo(self.compare_combo, [(NONE, None)] + items)

    def load_templates(self, path: str | Path | None) -> bool:
        """Use the bias template file ``path`` (None: the shipped one). Shows the loader's error when it is bad."""
        from fairdesk.core.text.templates import load_bias_templates

        try:
            tpl = load_bias_templates(path)
        except FairDeskError as err:
            self.say(str(err), error=True)
            self.window_.show_error("Cannot use this template file", str(err))
            return False
        self.templates = tpl
        self.templates_edit.setText("" if path is None else str(path))
        self.templates_edit.setToolTip(tpl.path or "")
        counts = tpl.counts()
        self.templates_info.setText(f"{len(tpl.categories)} categories, {sum(counts.values())} (template, "
                                    f"attribute) pairs; slot [{tpl.slot}], groups {', '.join(tpl.groups)}.")
        self.categories_list.set_items([f"{c.code} — {c.name}" for c in tpl.categories],
                                       [f"{c.code} — {c.name}" for c in tpl.categories])
        groups = [(g, g) for g in tpl.groups]
        fill_combo(self.group_a, groups, keep=False)
        fill_combo(self.group_b, groups, keep=False)
        if len(groups) > 1:
            self.group_b.setCurrentIndex(1)
        self.update_buttons()
        return True

    def choose_templates(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a bias template file", self.window_.settings.last_dir(),
                                              "Template lists (*.json);;All files (*)")
        if path:
            self.window_.settings.set_last_dir(path)
            self.load_templates(path)

    def edit_templates(self):
        """Open the template editor on the current file; a saved copy becomes the current file."""
        from fairdesk.gui.widgets.template_editor import TemplateEditorDialog

        try:
            dialog = TemplateEditorDialog(self.templates_edit.text() or None, self,
                                          last_dir=self.window_.settings.last_dir())
        except FairDeskError as err:
            self.window_.show_error("Cannot edit this template file", str(err))
            return None
        dialog.saved.connect(lambda p: self.load_templates(p))
        dialog.open()
        return dialog

    def categories(self) -> tuple[str, ...] | None:
        checked = [c.split(" — ")[0] for c in self.categories_list.checked()]
        return None if len(checked) == self.categories_list.count() else tuple(checked)

    # =====================================================================================================
    # Running
    def options(self):
        """The probe options of the form; raises :class:`FairDeskError` with what to fix."""
        from fairdesk.core.audits.mlm_bias import ProbeOptions

        cats = self.categories()
        if cats is not None and not cats:
            raise FairDeskError("Choose at least one category.")
        a, b = self.group_a.currentData(), self.group_b.currentData()
        if not a or not b or a == b:
            raise FairDeskError("Choose two different word groups to compare.")
        return ProbeOptions(prior=self.prior_combo.currentData(), test=self.test_combo.currentData(), groups=(a, b),
                            categories=cats, batch_size=self.batch_spin.value(), alpha=self.alpha_spin.value(),
                            min_effect=self.min_effect_spin.value(), min_log_ratio=self.min_log_ratio_spin.value(),
                            margin=self.margin_spin.value(), min_templates=self.min_templates_spin.value(),
                            seed=self.seed_spin.value()).check()

    def audit_run(self) -> AuditRun:
        main_id = self.model_combo.currentData()
        if main_id is None:
            raise FairDeskError("Open or train a language model on the Model tab first.")
        ids = [main_id]
        other = self.compare_combo.currentData()
        if other is not None:
            if other == main_id:
                raise FairDeskError("Choose a different model to compare with, or (none).")
            ids.append(other)
        opts = self.options()
        records = [self._models[i] for i in ids]
        names = [m.name for m in records]
        return AuditRun("Language-model bias: " + " vs ".join(names),
                        args=([m.info.get("path") for m in records], self.templates_edit.text() or None, opts,
                              self.completion_check.isChecked()),
                        kwargs=dict(names=names, expected_fingerprints=[m.info.get("fingerprint") for m in records],
                                    top_k=self.top_k_spin.value(), threads=self.window_.settings.threads),
                        running="Scoring sentences…")

    def form_ready(self) -> bool:
        return (self.window_.project is not None and self.model_combo.currentData() is not None
                and bool(self.categories_list.checked()))

    def model_names(self) -> list[str]:
        if not self.doc:
            return []
        return [str(self.doc.get("model_name") or "model")] + [str(o.get("model_name")) for o in
                                                               self.doc.get("compared", []) or []]

    def _model_part(self, name: str | None) -> dict | None:
        if not self.doc:
            return None
        if name is None or name == (self.doc.get("model_name") or "model"):
            return self.doc
        return next((o for o in self.doc.get("compared", []) or [] if o.get("model_name") == name), None)

    def verdict_counts(self, doc: dict) -> dict[str, int]:
        """One verdict per model and category (the compared models' records, else the one model's)."""
        from fairdesk.gui.widgets.findings import count_verdicts

        compared = doc.get("compared") or []
        return count_verdicts([m.get("records") or [] for m in compared] if compared else doc.get("records") or [])

    def show_results(self, doc: dict | None) -> None:
        if doc is None:
            self.clear_header("No language-model audit yet: choose a model on the left and press Run audit.")
            for view in (self.table_view, self.comparison_view, self.completion_view):
                view.set_frame(None)
            self._completion = None
            fill_combo(self.completion_template_combo, [], keep=False)
            fill_combo(self.table_model_combo, [], keep=False)
            fill_combo(self.plot_model_combo, [], keep=False)
            fill_combo(self.plot_category_combo, [], keep=False)
            self.distribution_plot.clear("Run an audit, or choose one from the list, to see the scores of a "
                                         "category.")
            self.details_view.clear()
            return
        names = self.model_names()
        method = doc.get("method") or {}
        from fairdesk.core.reports.mlm_bias import verdict_of, verdict_text

        records = doc.get("records", [])
        flagged = [r["category"] for r in records if r.get("flagged")]
        groups = list((method.get("groups") or {}).keys())
        n_eq = sum(verdict_of(r) == "equivalent" for r in records)
        n_in = sum(verdict_of(r) == "inconclusive" for r in records)
        margin = method.get("margin")
        from fairdesk.core.audits.mlm_bias import TESTS_SHORT

        test = TESTS_SHORT.get(str(method.get("test_code")), str(method.get("test", "")).split(" (")[0])
        self.result_header.setText(
            f"<b>{html_text(' vs '.join(names))}</b> · {html_text(test)} · "
            f"unit: {html_text(str(method.get('unit', 'sentence pair')))} · "
            f"prior: {html_text(str(method.get('prior_rule', '')))} · groups {html_text(' vs '.join(groups))}<br>"
            f"<b>{len(flagged)}</b> of {len(records)} categories flagged"
            + (f" ({html_text(', '.join(flagged))})" if flagged else "") + f" for {html_text(names[0])}"
            + f" · {n_eq} equivalent" + (f" within ±{margin:g} nats" if isinstance(margin, (int, float)) else "")
            + f", {n_in} inconclusive")
        model_items = [(n, n) for n in names]
        fill_combo(self.table_model_combo, model_items)
        fill_combo(self.plot_model_combo, model_items)
        cats = [(f"{r['category']} — {r.get('name', r['category'])}"
                 + ("  (flagged)" if r.get("flagged") else f"  ({verdict_text(r)})"),
                 str(r["category"])) for r in records]
        fill_combo(self.plot_category_combo, cats)
        self.update_table()
        self.update_plot()
        comparison = doc.get("comparison")
        self.comparison_view.set_frame(pd.DataFrame(comparison) if comparison else None)
        self._completion = self._completion_frame(doc.get("completion"))
        templates = [] if self._completion is None else list(dict.fromkeys(self._completion["template"]))
        fill_combo(self.completion_template_combo, [(t, t) for t in templates] + (
            [("(all templates)", "")] if len(templates) > 1 else []))
        self.update_completion()
        self.details_view.setHtml(self._details_html(doc))

    def update_table(self, *args) -> None:
        part = self._model_part(self.table_model_combo.currentData())
        if part is None or not part.get("records"):
            self.table_view.set_frame(None)
            return
        rows = [{k: v for k, v in r.items() if k not in ("scores", "groups", "test", "effect_size_name")}
                for r in part["records"]]
        from fairdesk.core.reports.mlm_bias import verdict_of, verdict_text

        df = pd.DataFrame(rows)
        # a document stored before verdicts: derived from the flag, never "equivalent"
        df["verdict"] = [verdict_of(r) for r in part["records"]]
        df["verdict_text"] = [verdict_text(r) for r in part["records"]]
        first = ["category", "name", "verdict_text"] + [c for c in df.columns if c.startswith("mean_")
                                                         and c != "mean_difference"]
        order = first + ["mean_difference", "ci_low", "ci_high", "n_templates", "effect_size", "d_z", "statistic",
                         "p_value", "q_value", "n", "flagged", "verdict", "significant", "direction",
                         "p_equivalence", "q_equivalence", "probability_ratio", "n_attributes", "test_code", "unit"]
        cols = [c for c in order if c in df.columns] + [c for c in df.columns if c not in order]
        df = df[cols].rename(columns={c: c.replace("_", " ", 1) for c in first if c.startswith("mean_")})
        self.table_view.set_frame(df)

    def update_plot(self, *args) -> None:
        model, category = self.plot_model_combo.currentData(), self.plot_category_combo.currentData()
        if self.doc is None or model is None or category is None:
            self.distribution_plot.clear("Run an audit, or choose one from the list, to see the scores of a "
                                         "category.")
            return
        from fairdesk.core.reports.mlm_bias import category_distribution_data, category_summary_data, verdict_text

        points = category_distribution_data(self.doc, model)
        summary = category_summary_data(self.doc, model)
        points = points[points["category"] == category]
        summary = summary[summary["category"] == category]
        part = self._model_part(model) or {}
        rec = next((r for r in part.get("records", []) if str(r["category"]) == category), {})
        title = f"{model} · {rec.get('name', category)} ({category})"
        if rec:
            q, r, d = rec.get("q_value"), rec.get("effect_size"), rec.get("mean_difference")
            title += ((f" · difference {numbers.signed(d, 3)} nats" if d is not None else "")
                      + (f", {numbers.p_equals(q, 'q')}" if q is not None else "")
                      + (f", r = {numbers.signed(r, 2)}" if r is not None else "")
                      + f" · {verdict_text(rec)}")
        self.distribution_plot.set_data(points, summary, title)

    def update_completion(self, *args) -> None:
        """The completion rows of the chosen template side by side (one row per race term), or all of them."""
        frame = getattr(self, "_completion", None)
        template = self.completion_template_combo.currentData()
        if frame is None:
            self.completion_view.set_frame(None)
            return
        if template:
            frame = frame[frame["template"] == template].drop(columns=["template"])
        self.completion_view.set_frame(frame.dropna(axis=1, how="all"))

    @staticmethod
    def _completion_frame(completion: dict | None) -> pd.DataFrame | None:
        if not completion or not completion.get("rows"):
            return None
        rows = []
        for r in completion["rows"]:
            row = {"template": r["template"], "term": r["term"], "completed": r["completed"]}
            for f in sorted(r.get("fills", []), key=lambda f: f["mask"]):
                row[f"mask {f['mask'] + 1}"] = ", ".join(f"{t} ({p:.2f})" for t, p in f["top_k"])
            rows.append(row)
        return pd.DataFrame(rows)

    @staticmethod
    def _details_html(doc: dict) -> str:
        def esc(x) -> str:
            return html_text(str(x))

        method = dict(doc.get("method") or {})
        parts = ["<h3>Method</h3><table>"]
        for key in ("name", "score", "prior_rule_text", "unit_text", "test", "effect_size", "multiple_testing",
                    "flag_rule", "equivalence", "min_templates_rule", "verdict_rule", "multi_piece_rule", "alignment"):
            if method.get(key):
                parts.append(f"<tr><td valign='top'><b>{esc(key.replace('_', ' '))}</b></td>"
                             f"<td>&nbsp;&nbsp;{esc(method[key])}</td></tr>")
        parts.append("</table>")
        if method.get("multi_piece_words"):
            parts.append("<p><b>Words split into several pieces:</b> " + esc(", ".join(
                f"{w} → {' '.join(p)}" for w, p in method["multi_piece_words"].items())) + "</p>")
        if method.get("notes"):
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in method["notes"]) + "</ul>")
        parts.append("<h3>Templates</h3><pre>" + esc(json.dumps(method.get("templates", {}), indent=1)) + "</pre>")
        parts.append("<h3>Provenance</h3><pre>" + esc(json.dumps(doc.get("provenance", {}), indent=1, default=str))
                     + "</pre>")
        for other in doc.get("compared", []) or []:
            parts.append(f"<h3>Provenance of {esc(other.get('model_name'))}</h3><pre>"
                         + esc(json.dumps(other.get("provenance", {}), indent=1, default=str)) + "</pre>")
        return "".join(parts)
