"""Audit tab — Images: the counterfactual-invariance audit of an image classifier (METHODS §6, 004 Tables 12–13).

Set-up: image dataset, classifier under audit, counterfactual generator, optional negative-control classifier (one
known to ignore the attribute: its shift through the same generator is the band inside which shifts are called
"inconclusive"), attribute, label column per output, split, equivalence margin → a job
(:func:`fairdesk.jobs.images.audit_cit`). Results of a stored ``cit_images`` audit:

* the tests per output (default conditional-invariance test p / q, published CIT-LR t / p / q, DP and EO p), the
  oriented shift per direction with its CI, flip rates, the flip baseline and the verdict — "inconclusive" is
  explained (inside the control band, or neither shift nor equivalence shown) and the control band is stated;
* counterfactual quality (composition, effectiveness, Fréchet distance in a locally fitted feature space);
* the scatter of predictions original/reconstruction vs counterfactual with the flip column;
* the diff viewer over the stored example units;
* export of the PDF report as a job (:func:`fairdesk.jobs.reports.export_report`, the same bytes as the CLI's).

A "Synthetic benchmark" page runs the 004 Fig. 2 study (:func:`fairdesk.core.synthetic.cit_benchmark.run_cit_benchmark`)
on a few classifiers as a job and plots log10 p against ECA per test, with Spearman ρ. A "Validity" page runs the
null and planted simulations of each audit family (:func:`fairdesk.core.validity.run_validity`, the same code as
``fairdesk-cli bench validity``) as a job and shows the rejection rates with binomial 95% CIs, saying in words what
each row means.

pyqtgraph widgets are created when first shown; this module is cheap to import.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QPushButton, QSpinBox, QSplitter, QTabWidget, QTextBrowser, QVBoxLayout, QWidget)

from fairdesk.core import numbers
from fairdesk.core.escape import html_text
from fairdesk.core.errors import DataError
from fairdesk.gui.tabs.base import AuditPage, AuditRun, JobPage
from fairdesk.gui.tabs.image_data import (CLASSIFIER_KIND, GENERATOR_KIND, fill_combo, image_datasets, models_of,
                                          TableRead)
from fairdesk.gui.widgets.panel_parts import hrow, load_pyqtgraph
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

NONE = "(none)"
SPLITS = {"test": "test (default)", "val": "validation", "train": "train", "all": "all images"}
TEST_NAMES = {"wgcm": "weighted GCM", "gcm": "GCM", "cit_lr_crossfit": "CIT-LR (cross-fitted)",
              "cit_lr_split": "CIT-LR (split)"}
VERDICT_COLOURS = {"differs": "#B00020", "equivalent within margin": "#1b6e20", "inconclusive": "#8a6d00"}
#: the invariance audit stores "dependent" where the other families say "differs": the GUI says "differs" throughout
VERDICT_WORDS = {"dependent": "differs"}
BENCH_TESTS = ("cit_p", "wgcm_p", "dp_p", "eo_p")


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return f


def verdict_word(verdict) -> str:
    """A stored verdict as the GUI words it ("dependent" reads "differs", as in every other audit family)."""
    return VERDICT_WORDS.get(str(verdict), str(verdict)) if verdict is not None else ""


def _dir_label(key: str, values: list[str]) -> str:
    try:
        s, t = (int(x) for x in key.split("->"))
        return f"{values[s]}→{values[t]}"
    except (ValueError, IndexError):
        return key.replace("->", "→")


def results_table(doc: dict) -> pd.DataFrame:
    """One row per output, in the layout of 004 Tables 12–13 plus FairDesk's oriented shifts and verdict."""
    values = list((doc.get("attribute") or {}).get("values") or ["0", "1"])
    rows = []
    for r in doc.get("table", []):
        test = TEST_NAMES.get(r.get("test"), r.get("test"))
        row = {"output": r.get("output"), "n": r.get("n"), f"{test} p": _num(r.get("p")),
               f"{test} corrected p": _num(r.get("q")), "CIT-LR t": _num(r.get("cit_lr_t")),
               "CIT-LR p": _num(r.get("cit_lr_p")), "CIT-LR corrected p": _num(r.get("cit_lr_q")), "DP p": _num(r.get("dp_p")), "EO p": _num(r.get("eo_p"))}
        for key in ("0->1", "1->0"):
            if f"shift_{key}" in r:
                lab = _dir_label(key, values)
                ci = r.get(f"shift_{key}_ci") or [None, None]
                row[f"shift {lab}"] = _num(r[f"shift_{key}"])
                row[f"95% CI {lab}"] = (f"[{_num(ci[0]):+.4f}, {_num(ci[1]):+.4f}]" if None not in ci else "—")
                row[f"flip rate {lab}"] = _num(r.get(f"flip_rate_{key}"))
                row[f"TOST p {lab}"] = _num(r.get(f"p_tost_{key}"))
        if "flip_mean_abs_shift" in r:
            row["flip baseline mean |Δ|"] = _num(r["flip_mean_abs_shift"])
        row["verdict"] = verdict_word(r.get("verdict"))
        rows.append(row)
    return pd.DataFrame(rows)


def verdict_html(doc: dict) -> str:
    """The verdicts in words: why "inconclusive", the control band, the notes."""
    esc = html_text
    values = list((doc.get("attribute") or {}).get("values") or ["0", "1"])
    column = (doc.get("attribute") or {}).get("column", "the attribute")
    settings = doc.get("settings") or {}
    margin = settings.get("margin")
    band = doc.get("control_band")
    parts = [f"<p>Attribute <b>{esc(str(column))}</b> ({esc(' vs '.join(map(str, values)))}); shifts measured "
             f"against the <b>{esc(str(settings.get('shift_reference', 'original')))}</b>; equivalence margin "
             f"±{_num(margin):g}.</p>"]
    if band is not None:
        ctrl = doc.get("control_effect") or {}
        parts.append(f"<p><b>Negative-control band ±{numbers.fixed(band, 3)}</b>: the upper bound of the mean |shift| of "
                     f"'{esc(str(ctrl.get('name', 'the control classifier')))}', a classifier known to ignore the "
                     "attribute, through the same generator. A shift inside it is reported as inconclusive, never "
                     "as 'differs'.</p>")
    else:
        parts.append("<p><b>No negative control</b> was given: with a learned generator, part of a shift may be a "
                     "generator artefact, so a 'differs' verdict is provisional.</p>"
                     if settings.get("generator") == "learned" else "")
    for name, eff in (doc.get("effects") or {}).items():
        verdict = verdict_word(eff.get("verdict", ""))
        colour = VERDICT_COLOURS.get(verdict, "#222222")
        lines = []
        for d in eff.get("directions", []):
            lab = _dir_label(f"{d.get('source')}->{d.get('target')}", values)
            lines.append(f"{esc(lab)}: shift {_num(d.get('mean_shift')):+.4f} "
                         f"[{_num(d.get('ci_low')):+.4f}, {_num(d.get('ci_high')):+.4f}], flip rate "
                         f"{_num(d.get('flip_rate')):.3f} — <i>{esc(verdict_word(d.get('verdict')))}</i>: "
                         f"{esc(str(d.get('reason', '')))}")
        why = ""
        if verdict == "inconclusive":
            inside = any("control band" in str(d.get("reason", "")) for d in eff.get("directions", []))
            why = (" — the shift is no larger than what a classifier that ignores the attribute shows through this "
                   "generator, so it cannot be told apart from generator artefacts" if inside else
                   " — the data show neither a shift nor equivalence within the margin (more images or a wider "
                   "margin may decide)")
        parts.append(f"<p><b>{esc(str(name))}</b>: <span style='color:{colour}'><b>{esc(verdict)}</b></span>"
                     f"{esc(why)}<br>" + "<br>".join(lines) + "</p>")
    notes = doc.get("notes") or []
    if notes:
        words = [str(n).replace("'dependent'", "'differs'") for n in notes]  # the core's notes, in the GUI's words
        parts.append("<p><b>Notes</b></p><ul>" + "".join(f"<li>{esc(n)}</li>" for n in words) + "</ul>")
    return "".join(parts)


def quality_html(doc: dict) -> str:
    esc = html_text
    q = doc.get("quality") or {}
    s = doc.get("settings") or {}
    d = doc.get("dataset") or {}
    rows = [("Composition: L1 of the null reconstruction vs the original (1 cycle)", q.get("composition_l1_1")),
            ("Effectiveness: attribute probe's accuracy on the counterfactuals (w.r.t. the target)",
             q.get("effectiveness")),
            ("…the same probe's accuracy on real images", q.get("attribute_accuracy_real")),
            ("Fréchet distance real vs counterfactual", q.get("frechet_cf")),
            ("Fréchet distance real vs null reconstruction", q.get("frechet_null")),
            ("Mean |counterfactual − null reconstruction| per pixel", q.get("mean_abs_change_cf_vs_null"))]
    body = "".join(f"<tr><td>{esc(k)}</td><td align='right'>&nbsp;&nbsp;{_fmt(v)}</td></tr>" for k, v in rows
                   if v is not None)
    named = [("Effectiveness probe", q.get("effectiveness_classifier")),
             ("Feature extractor of the Fréchet distance", q.get("frechet_feature_extractor")),
             ("Representation Z", s.get("z")), ("DDIM steps", s.get("steps")), ("strength", s.get("strength")),
             ("Invariance test", TEST_NAMES.get(s.get("method"), s.get("method"))),
             ("Regressor", s.get("regressor")), ("Split audited", d.get("split")),
             ("Images audited", d.get("n_audited")), ("Per group", d.get("n_per_group")),
             ("Images without the attribute (left out)", d.get("n_missing_attribute")),
             ("Unreadable files (left out)", len(doc.get("unreadable") or [])),
             ("Seed", (doc.get("provenance") or {}).get("seed"))]
    body2 = "".join(f"<tr><td>{esc(k)}</td><td>&nbsp;&nbsp;{esc(str(v))}</td></tr>" for k, v in named
                    if v is not None)
    hashes = (doc.get("provenance") or {}).get("model_hashes") or {}
    body3 = "".join(f"<tr><td>{esc(k)}</td><td>&nbsp;&nbsp;<code>{esc(str(v)[:16])}…</code></td></tr>"
                    for k, v in hashes.items())
    return (f"<h4>Counterfactual quality</h4><table>{body or '<tr><td>not computed</td></tr>'}</table>"
            f"<h4>Settings</h4><table>{body2}</table><h4>Model hashes (SHA-256)</h4><table>{body3}</table>")


def _fmt(v) -> str:
    if isinstance(v, float):
        return "—" if not math.isfinite(v) else f"{v:.4g}"
    return str(v)


def diff_examples(doc: dict, arrays: dict) -> list:
    """The stored example units as :class:`~fairdesk.gui.widgets.image_diff.DiffExample` (imports pyqtgraph)."""
    from fairdesk.gui.widgets.image_diff import DiffExample

    items = (doc.get("examples") or {}).get("items") or []
    column = (doc.get("attribute") or {}).get("column", "a")
    out = []
    for j, it in enumerate(items):
        if "original" not in arrays or j >= len(arrays["original"]):
            break
        target = f"{column} = {it.get('target_label', it.get('target'))}"
        preds = {o: {"original": p.get("original"), "reference": p.get("null"), "cf": {target: p.get("cf")}}
                 for o, p in (it.get("predictions") or {}).items()}
        out.append(DiffExample(original=arrays["original"][j], counterfactuals={target: arrays["cf"][j]},
                               reference=arrays["null"][j] if "null" in arrays else None, predictions=preds,
                               title=f"image {it.get('index')}" + (" (random)" if it.get("selected") == "random"
                                                                   else ""),
                               observed=f"{column} = {it.get('observed_label', it.get('observed'))}"))
    return out


# ================================================================================================================

class ImageAuditPanel(AuditPage):
    """The "Images" page of the Audit tab (audit kind ``cit_images``)."""

    TITLE, ATTR = "Images (counterfactual)", "image_audit_panel"
    STORED_TITLE = "Stored counterfactual audits"
    SPLIT = (470, 900)

    def __init__(self, window) -> None:
        self.arrays: dict = {}
        self.scatter = None
        self.diff_viewer = None
        self._panel_steps = iter(())  # the diff viewer's panels still to build
        self._label_combos: dict[str, QComboBox] = {}
        self._table: pd.DataFrame | None = None
        self._roles: dict = {}
        self._filled: set[str] = set()
        self.table_read = TableRead(window, lambda: self.dataset_combo.currentData(), self._show_table,
                                    lambda message: self.form_data_failed(message))
        super().__init__(window)

    # ---- set-up --------------------------------------------------------------------------------------------
    def build_form(self) -> QWidget:
        self.dataset_combo = QComboBox(self)
        self.dataset_combo.setPlaceholderText("Import images on the Dataset tab first")
        self.dataset_combo.currentIndexChanged.connect(self._dataset_changed)
        self.classifier_combo = QComboBox(self)
        self.classifier_combo.setPlaceholderText("Import or train a classifier on the Model tab")
        self.classifier_combo.currentIndexChanged.connect(self._classifier_changed)
        self.generator_combo = QComboBox(self)
        self.generator_combo.setPlaceholderText("Train a generator on the Model tab")
        self.generator_combo.currentIndexChanged.connect(self._generator_changed)
        self.control_combo = QComboBox(self)
        self.control_combo.setToolTip("A classifier known to ignore the attribute: its shift through the same "
                                      "generator sets the negative-control band.")
        self.attribute_combo = QComboBox(self)
        self.positive_combo = QComboBox(self)
        self.labels_form = QFormLayout()
        self.split_combo = QComboBox(self)
        for key, text in SPLITS.items():
            self.split_combo.addItem(text, key)
        self.margin_spin = QDoubleSpinBox(self)
        self.margin_spin.setRange(0.0, 1.0)
        self.margin_spin.setDecimals(3)
        self.margin_spin.setSingleStep(0.005)
        self.margin_spin.setValue(0.02)
        self.margin_spin.setToolTip("Equivalence margin: a shift smaller than this is clinically irrelevant.")
        self.alpha_spin = QDoubleSpinBox(self)
        self.alpha_spin.setRange(0.001, 0.2)
        self.alpha_spin.setDecimals(3)
        self.alpha_spin.setValue(0.05)
        self.steps_spin = QSpinBox(self)
        self.steps_spin.setRange(0, 1000)
        self.steps_spin.setSpecialValueText("generator default")
        self.max_images = QSpinBox(self)
        self.max_images.setRange(0, 10**7)
        self.max_images.setSpecialValueText("all")
        self.examples_spin = QSpinBox(self)
        self.examples_spin.setRange(0, 200)
        self.examples_spin.setValue(16)
        self.seed_spin = QSpinBox(self)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.quality_check = QCheckBox("Measure counterfactual quality", self)
        self.quality_check.setChecked(True)

        box = QGroupBox("Counterfactual invariance of an image classifier", self)
        form = QFormLayout(box)
        form.addRow("Image dataset", self.dataset_combo)
        form.addRow("Classifier under audit", self.classifier_combo)
        form.addRow("Generator", self.generator_combo)
        form.addRow("Negative control\n(ignores the attribute)", self.control_combo)
        form.addRow("Attribute", self.attribute_combo)
        form.addRow("Group 1", self.positive_combo)
        labels_box = QGroupBox("True label per output (for equal opportunity)", box)
        labels_box.setLayout(self.labels_form)
        form.addRow(labels_box)
        form.addRow("Split", self.split_combo)
        form.addRow("Equivalence margin", self.margin_spin)
        form.addRow("α", self.alpha_spin)
        form.addRow("DDIM steps", self.steps_spin)
        form.addRow("At most (images)", self.max_images)
        form.addRow("Examples kept", self.examples_spin)
        form.addRow("Seed", self.seed_spin)
        form.addRow(self.quality_check)
        inner = QWidget(self)
        iv = QVBoxLayout(inner)
        iv.addWidget(box)
        iv.addStretch(1)
        return inner

    def build_results(self) -> QWidget:
        panel = QWidget(self)
        rv = QVBoxLayout(panel)
        rv.setContentsMargins(0, 0, 0, 0)
        self.stored_audits(rv, max_height=110)
        self.verdict_view = QTextBrowser(self)
        self.table_view = DataFrameView(self, filterable=False, placeholder="Run an audit, or choose one above.")
        tests_page = QSplitter(Qt.Orientation.Vertical, self)
        tests_page.addWidget(self.table_view)
        tests_page.addWidget(self.verdict_view)
        tests_page.setSizes([220, 320])
        self.quality_view = QTextBrowser(self)
        self.scatter_host = QWidget(self)
        QVBoxLayout(self.scatter_host).setContentsMargins(0, 0, 0, 0)
        self.examples_host = QWidget(self)
        QVBoxLayout(self.examples_host).setContentsMargins(0, 0, 0, 0)
        self.benchmark = SyntheticBenchmarkView(self.window_, self)
        self.validity = ValidityView(self.window_, self)
        self.result_tabs = QTabWidget(self)
        self.result_tabs.addTab(tests_page, "Tests and verdicts")
        self.result_tabs.addTab(self.quality_view, "Quality and provenance")
        self.result_tabs.addTab(self.scatter_host, "Scatter")
        self.result_tabs.addTab(self.examples_host, "Examples")
        self.result_tabs.addTab(self.benchmark, "Synthetic benchmark")
        self.result_tabs.addTab(self.validity, "Validity")
        self.result_tabs.currentChanged.connect(lambda *_: self._page_changed())
        rv.addWidget(self.result_tabs, 1)
        return panel

    # ---- project -------------------------------------------------------------------------------------------
    def refresh_form(self) -> None:
        project = self.window_.project
        fill_combo(self.dataset_combo, [(f"{d.name}  (#{d.id}, {d.n_rows:,} images)", d.id)
                                        for d in image_datasets(project)])
        classifiers = models_of(project, CLASSIFIER_KIND)
        fill_combo(self.classifier_combo, [(f"{m.name}  (#{m.id})", m.id) for m in classifiers],
                   default=classifiers[0].id if classifiers else None)
        fill_combo(self.control_combo, [(NONE, None)] + [(f"{m.name}  (#{m.id})", m.id) for m in classifiers])
        generators = models_of(project, GENERATOR_KIND)
        fill_combo(self.generator_combo, [(f"{m.name}  (#{m.id})", m.id) for m in generators],
                   default=generators[-1].id if generators else None)
        self._dataset_changed()

    def _model(self, model_id):
        project = self.window_.project
        if project is None or model_id is None:
            return None
        return next((m for m in project.models() if m.id == model_id), None)

    def _dataset_changed(self, *args) -> None:
        self.table_read.choose(self.window_.project)

    def _show_table(self, table) -> None:
        """Fill the attribute and label choices from the chosen image table (None: not read yet, or none)."""
        project, dataset_id = self.window_.project, self.dataset_combo.currentData()
        self._table = table
        self._roles = project.dataset(dataset_id).roles or {} if table is not None else {}
        cols = [c for c in (self._table.columns if self._table is not None else []) if not str(c).startswith("_")
                and c != "split"]
        attrs = list(self._roles.get("attributes") or [])
        fill_combo(self.attribute_combo, [(c, c) for c in attrs + [c for c in cols if c not in attrs]],
                   default=attrs[0] if attrs else None)
        self._generator_changed()
        self._classifier_changed()

    def _generator_changed(self, *args) -> None:
        gen = self._model(self.generator_combo.currentData())
        attr = (gen.info.get("attribute") or {}) if gen is not None else {}
        if attr.get("column") and self.attribute_combo.findData(attr["column"]) >= 0:
            self.attribute_combo.setCurrentIndex(self.attribute_combo.findData(attr["column"]))
        col = self.attribute_combo.currentData()
        values = sorted(map(str, self._table[col].dropna().unique())) if self._table is not None and col in \
            self._table else []
        items = ([("(two values: the second is group 1)", None)] if len(values) == 2 else []) + \
            [(f"{v} (vs the rest)", v) for v in values]
        positive = (attr.get("positive") or [None])[0] if attr.get("column") == col else None
        fill_combo(self.positive_combo, items, keep=False, default=positive)
        self.update_buttons()

    def _classifier_changed(self, *args) -> None:
        while self.labels_form.rowCount():
            self.labels_form.removeRow(0)
        self._label_combos = {}
        clf = self._model(self.classifier_combo.currentData())
        outputs = list(clf.info.get("outputs") or []) if clf is not None else []
        cols = [c for c in (self._table.columns if self._table is not None else []) if not str(c).startswith("_")
                and c != "split"]
        labels = list(self._roles.get("labels") or []) if self._table is not None else []
        for o in outputs:
            combo = QComboBox(self)
            default = o if o in cols else (labels[0] if len(outputs) == 1 and labels else None)
            fill_combo(combo, [(NONE, None)] + [(c, c) for c in cols], keep=False, default=default)
            self.labels_form.addRow(o, combo)
            combo.show()   # added to a visible form: show now, not at the next event loop turn
            self._label_combos[o] = combo
        self.update_buttons()

    def label_map(self) -> dict:
        return {o: c.currentData() for o, c in self._label_combos.items() if c.currentData() is not None}

    def form_ready(self) -> bool:
        return self.window_.project is not None and all(
            c.currentData() is not None for c in (self.dataset_combo, self.classifier_combo, self.generator_combo,
                                                  self.attribute_combo))

    # ---- run -----------------------------------------------------------------------------------------------
    def audit_run(self) -> AuditRun:
        if not self.form_ready():
            raise DataError("Choose an image dataset, the classifier under audit, a generator and the attribute.")
        args = (self.dataset_combo.currentData(), self.classifier_combo.currentData(),
                self.generator_combo.currentData(), self.attribute_combo.currentData())
        kw = dict(labels=self.label_map() or None, control=self.control_combo.currentData(),
                  split=self.split_combo.currentData(), max_images=self.max_images.value(),
                  steps=self.steps_spin.value() or None, margin=self.margin_spin.value(),
                  alpha=self.alpha_spin.value(), seed=self.seed_spin.value(), n_examples=self.examples_spin.value(),
                  positive=self.positive_combo.currentData(), quality=self.quality_check.isChecked())
        return AuditRun(f"Counterfactual audit: {self.classifier_combo.currentText()}", args=args, kwargs=kw,
                        running="Generating counterfactuals and testing…",
                        torch_threads=max(1, int(self.window_.settings.threads)))

    def audit_stored(self, audit_id: int) -> None:
        self.window_.notify_project_changed(self)
        super().audit_stored(audit_id)

    # ---- stored audits -------------------------------------------------------------------------------------
    def prepare_results(self, doc, audit_id: int):
        """The small example images of the stored document, decoded (view thread)."""
        from fairdesk.core.audits.cit_images import decode_examples

        return decode_examples(doc)

    def verdict_counts(self, doc: dict) -> dict[str, int]:
        """One verdict per classifier output (the stored "dependent" reads "differs")."""
        from fairdesk.gui.widgets.findings import count_verdicts

        return count_verdicts([{"verdict": e.get("verdict")} for e in (doc.get("effects") or {}).values()
                               if isinstance(e, dict)])

    def show_results(self, doc):
        """Fill the result pages from a stored audit, part by part (the pyqtgraph pages when they are shown)."""
        self.arrays = (self.prepared or {}) if doc is not None else {}
        self._filled = set()
        return self._fill_results(doc)

    def _fill_results(self, doc):
        self.table_view.set_frame(results_table(doc) if doc else None)
        yield
        self.verdict_view.setHtml(verdict_html(doc) if doc else "")
        yield
        self.quality_view.setHtml(quality_html(doc) if doc else "")
        self._fill_lazy()

    def _page_changed(self) -> None:
        # the audit set-up has nothing to do with the synthetic benchmark: give its page the room
        self.setup_panel.setVisible(self.result_tabs.currentWidget() not in (self.benchmark, self.validity))
        self._fill_lazy()

    def _fill_lazy(self) -> None:
        """Build and fill the pyqtgraph pages when they are first shown (or when a new audit is chosen), in slices:
        one plot or panel per turn of the event loop (:meth:`run_in_slices`)."""
        page = self.result_tabs.currentWidget()
        filled = getattr(self, "_filled", set())
        if page is self.scatter_host and "scatter" not in filled:
            filled.add("scatter")
            self.run_in_slices(self._scatter_steps(self.doc or {}))
        elif page is self.examples_host and "examples" not in filled:
            filled.add("examples")
            self.run_in_slices(self._examples_steps(self.doc, self.arrays))
        self._filled = filled

    def _scatter_steps(self, doc: dict):
        self.ensure_scatter()
        learned = (doc.get("settings") or {}).get("shift_reference") == "null reconstruction"
        attr = doc.get("attribute") or {}
        yield
        yield from self.scatter.fill(doc.get("scatter") or {}, band=doc.get("control_band"),
                                     x_label="prediction on the null reconstruction" if learned else None,
                                     attribute=str(attr.get("column", "a")), names=attr.get("values"))

    def _examples_steps(self, doc, arrays: dict):
        if self.diff_viewer is None:
            from fairdesk.gui.widgets.image_diff import DiffViewer

            self.diff_viewer = DiffViewer(self.examples_host, build=False)
            self.examples_host.layout().addWidget(self.diff_viewer)
            self.diff_viewer.show()
            self._panel_steps = self.diff_viewer.panel_steps()
            yield
        # (not ``yield from``: when a newer audit drops these steps, the panels still to build are built next time)
        for _ in self._panel_steps:
            yield
        self.diff_viewer.set_examples(diff_examples(doc, arrays) if doc else [])

    def ensure_scatter(self):
        if self.scatter is None:
            from fairdesk.gui.widgets.scatter import CounterfactualScatter

            self.scatter = CounterfactualScatter(self.scatter_host)
            self.scatter_host.layout().addWidget(self.scatter)
            self.scatter.show()
        return self.scatter

    def show_page(self, name: str) -> None:
        """Switch to a result page: "tests", "quality", "scatter", "examples", "benchmark" or "validity"."""
        pages = {"tests": 0, "quality": 1, "scatter": 2, "examples": 3, "benchmark": 4, "validity": 5}
        self.result_tabs.setCurrentIndex(pages[name])
        self._fill_lazy()
        self.wait_view()


# ================================================================================================================

class SyntheticBenchmarkView(JobPage):
    """The 004 Fig. 2 study on a few classifiers: log10 p against ECA per test, Spearman ρ, power and FPR."""

    def __init__(self, window, parent=None) -> None:
        super().__init__(window, parent)
        self.result: dict | None = None
        self.graphics = None
        self.plots: dict = {}
        self.config_overrides: dict = {}   # extra BenchmarkConfig fields (tests use small samples)
        from fairdesk.core.synthetic.scm import DATASETS

        self.datasets_list = CheckList(self, max_visible_rows=6)
        self.datasets_list.set_items(DATASETS, ["linear"])
        self.n_classifiers = QSpinBox(self)
        self.n_classifiers.setRange(1, 1000)
        self.n_classifiers.setValue(20)
        self.n_classifiers.setToolTip("Base classifiers per dataset (the 10 scikit-learn model types of 004 cycled "
                                      "over seeds; the paper uses 100).")
        self.seed_spin = QSpinBox(self)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.confounded = QCheckBox("Also the confounded variant (A shifts the root features)", self)
        self.confounded.setChecked(True)
        self.run_button = QPushButton("Run benchmark", self)
        self.run_button.clicked.connect(lambda: self.run())
        self.say("Runs on synthetic data with known counterfactuals (blue: base classifiers, orange triangles: "
                 "oracles reading the root features, invariant by construction; red: p = α; p clipped at 1e-30). "
                 "Nothing is stored in the project.")
        self.variant_combo = QComboBox(self)
        self.variant_combo.currentIndexChanged.connect(lambda *_: self.draw())
        self.dataset_combo = QComboBox(self)
        self.dataset_combo.currentIndexChanged.connect(lambda *_: self.draw())
        self.summary_view = DataFrameView(self, filterable=False, placeholder="Spearman ρ, power and false-positive "
                                                                              "rate per test appear here.")
        self.plot_host = QVBoxLayout()
        self.datasets_list.setMaximumHeight(4 * 20 + 8)
        box = QGroupBox("Synthetic benchmark: does a test's log10 p track the expected "
                        "counterfactual accuracy?", self)
        grid = QHBoxLayout(box)
        grid.addWidget(QLabel("Datasets", box))
        grid.addWidget(self.datasets_list, 1)
        form = QFormLayout()
        form.addRow("Classifiers per dataset", self.n_classifiers)
        form.addRow("Seed", self.seed_spin)
        form.addRow(self.confounded)
        grid.addLayout(form)
        buttons = QVBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        grid.addLayout(buttons)
        top = hrow(self, "Variant", self.variant_combo, "Dataset", self.dataset_combo, stretch=True)
        plots = QWidget(self)
        pv = QVBoxLayout(plots)
        pv.setContentsMargins(0, 0, 0, 0)
        pv.addLayout(top)
        pv.addLayout(self.plot_host, 1)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(plots)
        split.addWidget(self.summary_view)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(box)
        layout.addWidget(self.status)
        layout.addWidget(self.progress)
        layout.addWidget(split, 1)

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        self.run_button.setEnabled(not self.busy)

    def config(self):
        from fairdesk.core.synthetic.cit_benchmark import BenchmarkConfig

        n = self.n_classifiers.value()
        kw = dict(datasets=tuple(self.datasets_list.checked()), n_classifiers=n, seed=self.seed_spin.value(),
                  confounded=self.confounded.isChecked(), n_confounded_classifiers=min(n, 10))
        kw.update(self.config_overrides)
        return BenchmarkConfig(**kw)

    def run(self):
        if not self.datasets_list.checked() or self.busy:
            return None
        try:
            cfg = self.config()
        except Exception as err:  # noqa: BLE001 - a DataError from the configuration, shown to the user
            self.status.setText(str(err))
            return None

        def work(progress, cancel):
            from fairdesk.core.synthetic.cit_benchmark import run_cit_benchmark

            return run_cit_benchmark(cfg, progress=progress, cancel=cancel).to_dict()

        def done(job) -> None:
            self.set_result(job.result)
            res = job.result
            self.status.setText(f"{len(res['classifiers'])} classifiers in {res['elapsed_s']:.1f} s.")

        return self.start_job("Synthetic CIT benchmark", work, running="Running the benchmark…", on_done=done)

    def set_result(self, result: dict) -> None:
        self.result = result
        recs = result.get("classifiers", [])
        fill_combo(self.variant_combo, [(v, v) for v in dict.fromkeys(r["variant"] for r in recs)])
        fill_combo(self.dataset_combo, [(d, d) for d in dict.fromkeys(r["dataset"] for r in recs)])
        rows = []
        labels = result.get("tests", {})
        for s in result.get("summary", []):
            for test in BENCH_TESTS:
                rows.append({"dataset": s["dataset"], "variant": s["variant"], "test": labels.get(test, test),
                             "Spearman ρ (log p, ECA)": (s.get("spearman_eca") or {}).get(test),
                             "power (ECA < threshold)": (s.get("power_low_eca") or {}).get(test),
                             "n low ECA": s.get("n_low_eca"),
                             "FPR on oracles": (s.get("fpr_oracles") or {}).get(test),
                             "n oracles": s.get("n_oracles")})
        self.summary_view.set_frame(pd.DataFrame(rows) if rows else None)
        self.draw()

    def _ensure_plots(self) -> None:
        if self.graphics is not None:
            return
        pg = load_pyqtgraph()
        self.graphics = pg.GraphicsLayoutWidget(self)
        self.graphics.setMinimumHeight(360)
        self.plot_host.addWidget(self.graphics)
        self.graphics.show()

    def draw(self) -> None:
        if self.result is None:
            return
        self._ensure_plots()
        import pyqtgraph as pg

        self.graphics.clear()
        self.plots = {}
        variant, dataset = self.variant_combo.currentData(), self.dataset_combo.currentData()
        recs = [r for r in self.result.get("classifiers", []) if r["variant"] == variant and r["dataset"] == dataset]
        summ = next((s for s in self.result.get("summary", []) if s["variant"] == variant and
                     s["dataset"] == dataset), {})
        alpha = (self.result.get("config") or {}).get("alpha", 0.05)
        labels = self.result.get("tests", {})
        finite = [r for r in recs if any(r.get(t) is not None and math.isfinite(r[t]) for t in BENCH_TESTS)]
        x_lo = min([r["eca"] for r in finite] + [0.9]) - 0.02
        logs = [max(math.log10(max(r[t], 1e-300)), -30.0) for r in finite for t in BENCH_TESTS
                if r.get(t) is not None and math.isfinite(r[t])]
        y_lo = min(logs + [math.log10(alpha)]) - 0.5
        for k, test in enumerate(BENCH_TESTS):
            rho = (summ.get("spearman_eca") or {}).get(test)
            plot = self.graphics.addPlot(row=k // 2, col=k % 2, enableMenu=False)
            plot.setTitle(f"{labels.get(test, test)}: ρ = {'—' if rho is None else f'{rho:.2f}'}", size="8pt")
            plot.setLabel("bottom", "ECA")
            plot.setLabel("left", "log10 p")
            for axis in ("left", "bottom"):
                plot.getAxis(axis).enableAutoSIPrefix(False)
            plot.showGrid(x=True, y=True, alpha=0.2)
            plot.setMenuEnabled(False)
            plot.addItem(pg.InfiniteLine(pos=math.log10(alpha), angle=0, movable=False,
                                         pen=pg.mkPen("#d62728", style=Qt.PenStyle.DashLine)))
            points = 0
            for role, symbol, colour in (("base", "o", "#1f77b4"), ("oracle", "t", "#ff7f0e")):
                sel = [r for r in recs if r["role"] == role and r.get(test) is not None and math.isfinite(r[test])]
                if sel:
                    xs = np.array([r["eca"] for r in sel])
                    ys = np.array([max(math.log10(max(r[test], 1e-300)), -30.0) for r in sel])
                    tips = [f"{r['model_type']} seed {r['seed']} ({role}): ECA {r['eca']:.3f}, p {r[test]:.3g}"
                            for r in sel]
                    plot.addItem(pg.ScatterPlotItem(x=xs, y=ys, symbol=symbol, size=7, pen=pg.mkPen(None),
                                                    brush=pg.mkBrush(colour), data=tips, hoverable=True,
                                                    tip=lambda x=None, y=None, data=None: str(data)))
                    points += len(xs)
            plot.setRange(xRange=(x_lo, 1.02), yRange=(y_lo, 0.3), padding=0)
            self.plots[test] = (plot, points)

    def point_count(self, test: str) -> int:
        return self.plots.get(test, (None, 0))[1]


# ================================================================================================================

VALIDITY_VERDICTS = {"meets": "yes", "misses": "NO", "unclear": "unclear: run more", "no target": "—"}


def validity_frame(result: dict) -> pd.DataFrame | None:
    rows = []
    for r in result.get("rows", []):
        rows.append({"family": r["family"], "design": r["design"], "null / planted": r["kind"], "runs": r["runs"],
                     "rejection rate": r["rate"], "95% CI": f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
                     "target": r["target"], "meets target": VALIDITY_VERDICTS.get(r.get("verdict"), "—"),
                     "per-test rate": r.get("per_test_rate")})
    return pd.DataFrame(rows) if rows else None


def validity_html(result: dict) -> str:
    """One sentence per row: what was simulated, what the rate means, and whether it meets its target."""
    parts = ["<p><b>What each row means.</b> Each row simulated <i>runs</i> audits (or tests) with a known truth "
             "and counts how many the product's default method called 'differs'. On a <b>null</b> row "
             "nothing is there to find, so the rate is the false-alarm rate of a whole audit after its correction; "
             "it should be near α = 0.05 (target: at most α + 0.02). On a <b>planted</b> row an effect was put in, "
             "so the rate is the power to find it. The 95% interval (Clopper–Pearson) shows how much the rate "
             "could move with more runs.</p><ul>"]
    for r in result.get("rows", []):
        pct = f"{100 * r['rate']:.1f}% ({r['rejections']} of {r['runs']}; 95% CI {100 * r['ci_low']:.1f}–" \
              f"{100 * r['ci_high']:.1f}%)"
        verdict = {"meets": " — <span style='color:#1b6e20'>meets its target</span>",
                   "misses": " — <span style='color:#B00020'><b>misses its target</b> (the whole interval is "
                             "beyond it)</span>",
                   "unclear": " — <span style='color:#8a6d00'>the estimate misses its target but the interval "
                              "reaches it: run more to decide</span>"}.get(r.get("verdict"), "")
        per_test = (f" Per test: {100 * r['per_test_rate']:.2f}% of {r['n_tests']} tests."
                    if r.get("per_test_rate") is not None else "")
        parts.append(f"<li><b>{html_text(r['family'])} · {html_text(r['kind'])} · "
                     f"{html_text(r['design'])}</b>: {pct} — {html_text(r['meaning'])} "
                     f"(target {html_text(r['target'])}){verdict}.{per_test}</li>")
    parts.append("</ul>")
    for note in result.get("notes", []):
        parts.append(f"<p style='color:#555'>Note: {html_text(note)}</p>")
    return "".join(parts)


class ValidityView(JobPage):
    """Null and planted simulations of each audit family: rejection rates with binomial 95% CIs, as a job."""

    def __init__(self, window, parent=None) -> None:
        super().__init__(window, parent)
        self.result: dict | None = None
        self.family_combo = QComboBox(self)
        for label, code in (("counterfactual invariance (cit)", "cit"), ("group gaps (groups)", "groups"),
                            ("masked-LM probe (mlm)", "mlm"), ("learners over CV folds (age)", "age"),
                            ("all families", "all")):
            self.family_combo.addItem(label, code)
        self.runs_spin = QSpinBox(self)
        self.runs_spin.setRange(1, 10000)
        self.runs_spin.setValue(50)
        self.runs_spin.setToolTip("Simulated audits per design. More runs give narrower intervals and take longer "
                                  "(whole group audits are the slowest).")
        self.n_spin = QSpinBox(self)
        self.n_spin.setRange(100, 100000)
        self.n_spin.setSingleStep(500)
        self.n_spin.setValue(1000)
        self.n_spin.setToolTip("Sample size of each simulated invariance test (the power target applies at 4,000).")
        self.seed_spin = QSpinBox(self)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.run_button = QPushButton("Run simulations", self)
        self.run_button.clicked.connect(lambda: self.run())
        self.say("Measures how often each audit raises a false alarm when nothing is there, and how often it finds a "
                 "planted effect. Nothing is stored in the project.")
        self.table_view = DataFrameView(self, filterable=False, placeholder="Rejection rates with 95% intervals "
                                                                            "appear here.")
        self.explain = QTextBrowser(self)
        box = QGroupBox("Validity: null and planted simulations through the product's own audit code", self)
        row = QHBoxLayout(box)
        form = QFormLayout()
        form.addRow("Audit family", self.family_combo)
        form.addRow("Runs per design", self.runs_spin)
        form.addRow("Test sample size (cit)", self.n_spin)
        form.addRow("Seed", self.seed_spin)
        row.addLayout(form, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        row.addLayout(buttons)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.table_view)
        split.addWidget(self.explain)
        split.setSizes([260, 260])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(box)
        layout.addWidget(self.status)
        layout.addWidget(self.progress)
        layout.addWidget(split, 1)

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        self.run_button.setEnabled(not self.busy)

    def run(self):
        if self.busy:
            return None
        family, runs, n, seed = (self.family_combo.currentData(), self.runs_spin.value(), self.n_spin.value(),
                                 self.seed_spin.value())

        def work(progress, cancel):
            from fairdesk.core.validity import run_validity

            return run_validity(family, runs=runs, seed=seed, n=n, progress=progress, cancel=cancel).to_dict()

        def done(job) -> None:
            self.set_result(job.result)
            res = job.result
            counts = {v: sum(1 for r in res["rows"] if r.get("verdict") == v) for v in ("misses", "unclear")}
            self.status.setText(f"{len(res['rows'])} designs in {res['elapsed_s']:.1f} s: "
                                f"{counts['misses']} target(s) missed, {counts['unclear']} unclear (too few runs to "
                                f"decide) — each row is explained below.")

        return self.start_job("Validity simulations", work, running="Running the simulations…", on_done=done)

    def set_result(self, result: dict) -> None:
        self.result = result
        self.table_view.set_frame(validity_frame(result))
        self.explain.setHtml(validity_html(result))
