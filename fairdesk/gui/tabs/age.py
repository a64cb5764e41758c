"""Model › Representation learners: the page of the ``age_independence`` audit kind.

Form: a features dataset of the project, its label, protected continuous attribute (numeric columns only) and
participant-id columns (first guesses from :mod:`fairdesk.core.data.roles`), the methods (the DNN baseline always
runs: every t-test compares against it; fairlearn's reference row when fairlearn is installed), folds, repeats, λ,
the test against the DNN (corrected resampled t by default), the adversary steps K, the seed and an optional list of λ values for the accuracy–fairness frontier. Run calls
:func:`fairdesk.jobs.age.train_age_independent` (progress per fold and method; Cancel stores nothing).

Results: the summary in words, Tables 1–2 (000 layout), the leakage table and the held-out folds — all taken from
the report tree of :mod:`fairdesk.core.reports.age_independence` with the user's small-cell k, so the page and the
PDF say the same — and the frontier plot (:class:`fairdesk.gui.widgets.frontier_plot.FrontierPlot`) drawn from the
report's ``frontier_data``. The out-of-fold predictions the job stores appear in the Dataset tab's list; the page
names that dataset and opens it on the group audit's page (Δ_eo with bins by age runs on it).

Imports only Qt, pandas and numpy at the top: torch, scikit-learn and the report module load later.
"""
from __future__ import annotations

import importlib.util
import re
from dataclasses import replace

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QListWidgetItem, QSpinBox, QSplitter, QTabWidget, QTextBrowser, QVBoxLayout,
                               QWidget)

from fairdesk.core.escape import html_text
from fairdesk.core.data.roles import PATIENT_NAMES, first_named, guess_roles, is_binary, is_id_name, is_numeric
from fairdesk.core.errors import DataError
from fairdesk.core.kinds import DATASET_KINDS, ReportSettings
from fairdesk.core.models.age_independent import LEARNERS, METHOD_LABELS, METHODS, LearnerSettings
from fairdesk.gui.tabs.base import AuditPage, AuditRun
from fairdesk.gui.widgets.frontier_plot import FrontierPlot
from fairdesk.gui.widgets.panel_parts import fill_combo, note_label, push_button, size_combos, wrapped_label
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

FEATURES = DATASET_KINDS["features"].name
BASELINE = "dnn"
NO_COLUMN = "(choose)"
METHOD_WIDTH = 210  # widest the method column of a result table starts
DEFAULT_K: int = LearnerSettings.k_adv  # the class attribute is the dataclass field's default: one source for K
LEAKAGE_TARGET = 0.05  # age_independence.LEAKAGE_TARGET (the audit module loads scikit-learn's helpers lazily)


def fairlearn_installed() -> bool:
    """True when fairlearn can be imported (found, not imported: it loads scikit-learn)."""
    return importlib.util.find_spec("fairlearn") is not None


def parse_lambdas(text: str) -> tuple[float, ...]:
    """The frontier's λ values from "0, 0.5, 1 2" (commas, semicolons or spaces); empty text: none."""
    parts = [p for p in re.split(r"[,;\s]+", text.strip()) if p]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise DataError("Give the frontier's λ values as numbers separated by commas, e.g. 0, 0.5, 1, 2.") from None
    if any(v < 0 or v != v for v in values):
        raise DataError("The frontier's λ values must be numbers ≥ 0.")
    return values


def table_frame(table) -> pd.DataFrame:
    """A report table (header + rows of strings) as a DataFrame for a :class:`DataFrameView`."""
    return pd.DataFrame([list(r) for r in table.rows], columns=list(table.header))


def features_columns(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """``(df, guess)``: the form's first choice of label, attribute and participant id in a features table, and its
    numeric columns (the view thread: pandas only)."""
    cols = [str(c) for c in df.columns]
    guess = guess_roles(df)
    label = guess.get("label")
    if label is None:  # a 0/1 column that is not an id or attribute
        label = next((c for c in cols if is_binary(df[c]) and not is_id_name(c)), None)
    group = guess.get("patient_id") or first_named(cols, PATIENT_NAMES) or next(
        (c for c in cols if is_id_name(c)), None)
    return df, {"label": label, "attribute": next(iter(guess.get("continuous_attributes") or []), None),
                "group": group, "numeric": [c for c in cols if is_numeric(df[c])]}


class AgeLearnersPage(AuditPage):
    """Train and compare the baselines and the age-independent learners (participant-disjoint CV); show a run."""

    TAB, TITLE, ATTR, AFTER = "model", "Representation learners", "age_panel", "Tabular"
    RUN_TEXT = "Train and compare"
    STORED_TITLE = "Stored comparisons"
    STATUS_LINES = 3
    FORM_WIDTH, SPLIT = 430, (450, 900)

    def __init__(self, window) -> None:
        self._read: tuple | None = None  # ((project path, dataset id), table, guessed columns): the last read
        self.table: pd.DataFrame | None = None
        self._shown = None  # (project path, dataset id) whose columns the form offers
        #: the learners' training settings besides λ and K (a LearnerSettings; None: the defaults). Tests set tiny
        #: networks here; the form's λ and K are applied on top.
        self.learner_base = None
        self.predictions_id: int | None = None
        self._notes: dict[str, QLabel] = {}  # the titles and notes above and below the result tables
        super().__init__(window)

    # ---- form ----------------------------------------------------------------------------------------------
    def build_form(self) -> QWidget:
        inner = QWidget(self)
        iv = QVBoxLayout(inner)

        data_box = QGroupBox("Data", inner)
        form = QFormLayout(data_box)
        self.dataset_combo = QComboBox(data_box)
        self.dataset_combo.setPlaceholderText("Add a features table on the Dataset tab first")
        size_combos(self.dataset_combo, chars=16, on_change=self._dataset_changed)
        form.addRow("Features dataset", self.dataset_combo)
        self.label_combo = QComboBox(data_box)
        self.label_combo.setToolTip("The 0/1 outcome the classifiers predict (e.g. the diagnosis).")
        self.attribute_combo = QComboBox(data_box)
        self.attribute_combo.setToolTip("The protected continuous attribute the learners remove from the "
                                        "representation (numeric columns only, e.g. age).")
        self.group_combo = QComboBox(data_box)
        self.group_combo.setToolTip("Rows of one participant stay in one fold (no participant in two folds).")
        size_combos(self.label_combo, self.attribute_combo, self.group_combo, chars=14,
                    on_change=self._columns_changed)
        form.addRow("Label (0/1)", self.label_combo)
        form.addRow("Protected attribute", self.attribute_combo)
        form.addRow("Participant id", self.group_combo)
        self.features_note = note_label("", data_box)
        form.addRow(self.features_note)
        iv.addWidget(data_box)

        methods_box = QGroupBox("Methods", inner)
        mv = QVBoxLayout(methods_box)
        self.methods_list = CheckList(methods_box)
        for m in METHODS:
            item = QListWidgetItem(f"{m} — {METHOD_LABELS[m]}", self.methods_list)
            item.setData(Qt.ItemDataRole.UserRole, m)
            if m == BASELINE:  # every t-test compares against it: always on
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsUserCheckable & ~Qt.ItemFlag.ItemIsEnabled)
                item.setText(item.text() + ", always on")
                item.setToolTip("The DNN baseline always runs: every method is compared against it.")
            else:
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setToolTip("A 000 learner (PyTorch; λ and K apply)" if m in LEARNERS else
                                "A baseline (scikit-learn)")
            item.setCheckState(Qt.CheckState.Checked)
        rows = len(METHODS)
        self.methods_list.setFixedHeight(self.methods_list.sizeHintForRow(0) * rows
                                         + 2 * self.methods_list.frameWidth() + 4)
        mv.addWidget(self.methods_list)
        self.reference_check = QCheckBox("fairlearn AdversarialFairnessClassifier (external reference row)",
                                         methods_box)
        if fairlearn_installed():
            self.reference_check.setChecked(True)
            self.reference_check.setToolTip("Runs beside the learners on the same folds, marked as an external "
                                            "reference (not one of 000's learners).")
        else:
            self.reference_check.setEnabled(False)
            self.reference_check.setToolTip("fairlearn is not installed; install it to add this reference row.")
        mv.addWidget(self.reference_check)
        iv.addWidget(methods_box)

        settings_box = QGroupBox("Protocol and learners", inner)
        sf = QFormLayout(settings_box)
        self.folds_spin = QSpinBox(settings_box)
        self.folds_spin.setRange(2, 20)
        self.folds_spin.setValue(5)
        self.folds_spin.setToolTip("k of the participant-disjoint k-fold cross-validation (000: 5).")
        sf.addRow("Folds (k)", self.folds_spin)
        self.repeats_spin = QSpinBox(settings_box)
        self.repeats_spin.setRange(1, 20)
        self.repeats_spin.setValue(1)
        self.repeats_spin.setToolTip("Repeats of the cross-validation with new fold assignments.")
        sf.addRow("Repeats", self.repeats_spin)
        self.test_combo = QComboBox(settings_box)
        self.test_combo.addItem("corrected resampled t (Nadeau–Bengio)", "corrected")
        self.test_combo.addItem("plain paired t (anti-conservative)", "plain")
        self.test_combo.setToolTip("Test of each method against the DNN over the folds. The folds share training "
                                   "rows, so the plain paired t-test overstates the evidence (more so with "
                                   "repeats); the corrected resampled t-test holds its size.")
        sf.addRow("Test against the DNN", self.test_combo)
        self.lambda_spin = QDoubleSpinBox(settings_box)
        self.lambda_spin.setRange(0.0, 100.0)
        self.lambda_spin.setDecimals(3)
        self.lambda_spin.setSingleStep(0.25)
        self.lambda_spin.setValue(1.0)
        self.lambda_spin.setToolTip("A fixed adversary strength λ (000's algorithms: λ = 1; 0 = no adversarial "
                                    "pressure), used when λ is not chosen per fold.")
        self.auto_lambda_check = QCheckBox("Choose λ per learner and fold", settings_box)
        self.auto_lambda_check.setChecked(True)
        self.auto_lambda_check.setToolTip("Nested participant-disjoint validation on each fold's training "
                                          "participants: the least λ of 0.3, 1, 3 whose representation keeps "
                                          "a probe's R² for the age beyond the label under the target, among "
                                          "those within one standard error of the best accuracy (each learner is "
                                          "trained four times per fold).")
        self.auto_lambda_check.toggled.connect(self._lambda_mode_changed)
        sf.addRow(self.auto_lambda_check)
        self.target_spin = QDoubleSpinBox(settings_box)
        self.target_spin.setRange(-0.5, 0.9)
        self.target_spin.setDecimals(2)
        self.target_spin.setSingleStep(0.05)
        self.target_spin.setValue(LEAKAGE_TARGET)
        self.target_spin.setToolTip("The R² a fresh probe may reach for the age beyond the label (age minus the "
                                    "label's mean age) from a learner's representation on held-out participants "
                                    "for it to count as age-independent.")
        sf.addRow("Leakage target (R² of age beyond the label ≤)", self.target_spin)
        sf.addRow("Adversary strength λ", self.lambda_spin)
        self._lambda_mode_changed()
        self.k_spin = QSpinBox(settings_box)
        self.k_spin.setRange(1, 100)
        self.k_spin.setValue(DEFAULT_K)
        self.k_spin.setToolTip("Adversary steps K per minibatch, after the interpreter's one step.")
        sf.addRow("Adversary steps K", self.k_spin)
        self.seed_spin = QSpinBox(settings_box)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(self.window_.settings.seed)
        sf.addRow("Seed", self.seed_spin)
        self.frontier_edit = QLineEdit(settings_box)
        self.frontier_edit.setPlaceholderText("optional, e.g. 0, 0.5, 1, 2")
        self.frontier_edit.setToolTip("λ values for the accuracy–fairness frontier: each learner is trained again "
                                      "on the same folds at each λ (takes that many times longer).")
        sf.addRow("Frontier λ values", self.frontier_edit)
        sf.addRow(note_label("Each method is trained once per fold; learners on the GPU when one is present. "
                             "Progress shows per fold and method; Cancel stores nothing.", settings_box))
        iv.addWidget(settings_box)
        iv.addStretch(1)
        return inner

    def _lambda_mode_changed(self, *args) -> None:
        auto = self.auto_lambda_check.isChecked()
        self.lambda_spin.setEnabled(not auto)
        self.target_spin.setEnabled(auto)

    def refresh_form(self) -> None:
        project = self.window_.project
        infos = [d for d in project.datasets() if d.kind == FEATURES] if project is not None else []
        fill_combo(self.dataset_combo, [(f"{d.name}  (#{d.id}, {d.n_rows:,} rows)", d.id) for d in infos],
                   default=infos[-1].id if infos else None)
        self._dataset_changed()

    def _dataset_changed(self, *args) -> None:
        project = self.window_.project
        dataset_id = self.dataset_combo.currentData()
        shown = (str(project.path), dataset_id) if project is not None else None
        if shown == self._shown and self.table is not None:  # the same table (something else was stored): keep
            self._columns_changed()                           # the user's column choices
            return
        self._shown = shown
        self.form_read.cancel()
        if project is None or dataset_id is None:
            self.form_data((shown, None, {}))
        elif self._read is not None and self._read[0] == shown:
            self.form_data(self._read)
        else:  # read, and its columns guessed, in the view runner
            self.table = None
            self._columns_changed()
            self.form_read.start(f"Read dataset #{dataset_id}",
                                 lambda: (shown, *features_columns(project.load_dataset(dataset_id))))

    def form_data(self, read) -> None:
        df, guess = read[1], read[2]
        if df is not None:
            self._read = read  # keep one table in memory
        self.table = df
        cols = [str(c) for c in df.columns] if df is not None else []
        fill_combo(self.label_combo, [(NO_COLUMN, None)] + [(c, c) for c in cols], keep=False,
                   default=guess.get("label"))
        fill_combo(self.attribute_combo, [(NO_COLUMN, None)] + [(c, c) for c in guess.get("numeric", [])],
                   keep=False, default=guess.get("attribute"))
        fill_combo(self.group_combo, [(NO_COLUMN, None)] + [(c, c) for c in cols], keep=False,
                   default=guess.get("group"))
        self._columns_changed()

    def form_data_failed(self, message: str) -> None:
        self.form_data((None, None, {}))  # offer nothing
        self._shown = None
        super().form_data_failed(message)

    def _columns_changed(self, *args) -> None:
        self.features_note.setText(self._features_text())
        self.update_buttons()

    def feature_columns(self) -> tuple[list[str], list[str]]:
        """The numeric columns besides label, attribute and participant id (the features), and the others left
        out because they are not numeric."""
        if self.table is None:
            return [], []
        used = {self.label_combo.currentData(), self.attribute_combo.currentData(), self.group_combo.currentData()}
        rest = [c for c in map(str, self.table.columns) if c not in used]
        feats = [c for c in rest if is_numeric(self.table[c])]
        return feats, [c for c in rest if c not in feats]

    def _features_text(self) -> str:
        if self.table is None:
            return "Features: every numeric column besides the three above."
        feats, dropped = self.feature_columns()
        text = f"Features: the {len(feats)} other numeric columns"
        if dropped:
            shown = ", ".join(dropped[:4]) + (" …" if len(dropped) > 4 else "")
            text += f" ({len(dropped)} non-numeric left out: {shown})"
        return text + "."

    def methods(self) -> tuple[str, ...]:
        """The checked methods, the DNN first."""
        items = [self.methods_list.item(i) for i in range(self.methods_list.count())]
        return tuple(i.data(Qt.ItemDataRole.UserRole) for i in items
                     if i.checkState() == Qt.CheckState.Checked or i.data(Qt.ItemDataRole.UserRole) == BASELINE)

    def set_methods(self, methods) -> None:
        """Check exactly ``methods`` (the DNN stays on)."""
        wanted = set(methods) | {BASELINE}
        for i in range(self.methods_list.count()):
            item = self.methods_list.item(i)
            on = item.data(Qt.ItemDataRole.UserRole) in wanted
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)

    def form_ready(self) -> bool:
        return self.window_.project is not None and self.table is not None

    def audit_run(self) -> AuditRun:
        dataset_id = self.dataset_combo.currentData()
        if dataset_id is None or self.table is None:
            raise DataError("Choose a features dataset (add one on the Dataset tab first).")
        label, attribute = self.label_combo.currentData(), self.attribute_combo.currentData()
        group = self.group_combo.currentData()
        if label is None:
            raise DataError("Choose the label column: the 0/1 outcome the classifiers predict.")
        if attribute is None:
            raise DataError("Choose the protected attribute: a numeric column such as age.")
        if group is None:
            raise DataError("Choose the participant id column, so that no participant is in two folds.")
        if len({label, attribute, group}) < 3:
            raise DataError("The label, the protected attribute and the participant id must be three different "
                            "columns.")
        if not is_binary(self.table[label]) or self.table[label].isna().any():
            raise DataError(f"The label column '{label}' must hold 0/1 values only; choose another column.")
        feats, dropped = self.feature_columns()
        if not feats:
            raise DataError("No numeric feature columns are left besides the label, attribute and participant id.")
        methods = self.methods()
        lambdas = parse_lambdas(self.frontier_edit.text())
        if lambdas and not any(m in LEARNERS for m in methods):
            raise DataError("The frontier varies λ, which only the learners have: check at least one learner.")
        learner = replace(self.learner_base or LearnerSettings(), k_adv=self.k_spin.value())
        kwargs = dict(methods=methods, folds=self.folds_spin.value(), repeats=self.repeats_spin.value(),
                      lam=None if self.auto_lambda_check.isChecked() else self.lambda_spin.value(),
                      leakage_target=self.target_spin.value() if self.auto_lambda_check.isChecked() else None,
                      seed=self.seed_spin.value(), learner=learner,
                      features=feats if dropped else None, reference=self.reference_check.isChecked(),
                      frontier_lambdas=lambdas, test=self.test_combo.currentData())
        return AuditRun(f"Representation learners: {label} with {attribute}",
                        args=(dataset_id, label, attribute, group), kwargs=kwargs, running="Training the methods…",
                        torch_threads=max(1, int(self.window_.settings.threads)))

    def audit_stored(self, audit_id: int) -> None:
        self.window_.notify_project_changed(self)  # the predictions dataset joins the Dataset tab's list
        super().audit_stored(audit_id)

    # ---- results -------------------------------------------------------------------------------------------
    def build_results(self) -> QWidget:
        panel = QWidget(self)
        v = QVBoxLayout(panel)
        v.setContentsMargins(0, 0, 0, 0)
        self.stored_audits(v, max_height=46)
        self.predictions_label = wrapped_label("", panel)
        self.predictions_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.group_audit_button = push_button("Open in Group gaps", panel, self.open_group_audit,
                                              "Choose these predictions on Audit › Group gaps (Δ_eo with bins by "
                                              "the attribute, gaps by band).")
        row = QHBoxLayout()
        row.addWidget(self.predictions_label, 1)
        row.addWidget(self.group_audit_button, 0, Qt.AlignmentFlag.AlignTop)
        v.addLayout(row)

        split = QSplitter(Qt.Orientation.Vertical, panel)
        self.summary_view = QTextBrowser(split)
        self.summary_view.setOpenLinks(False)
        self.summary_view.setMinimumHeight(60)
        split.addWidget(self.summary_view)

        self.result_tabs = QTabWidget(split)
        self.table1_view = DataFrameView(self.result_tabs, filterable=False,
                                         placeholder="Accuracy, Δ_eo^(2) and Δ_eo^(5), mean ± SD over folds.")
        self.table2_view = DataFrameView(self.result_tabs, filterable=False,
                                         placeholder="Paired t-tests against the DNN with their verdicts.")
        self.result_tabs.addTab(self._titled(self.table1_view, "table1"), "Table 1")
        self.result_tabs.addTab(self._titled(self.table2_view, "table2"), "Table 2: tests vs DNN")
        self.leakage_view = DataFrameView(self.result_tabs, filterable=False,
                                          placeholder="How much age a fresh probe recovers from each representation.")
        self.result_tabs.addTab(self._titled(self.leakage_view, "leakage"), "Leakage")
        self.frontier = FrontierPlot(self.result_tabs)
        self.result_tabs.addTab(self.frontier, "Frontier")
        self.folds_view = DataFrameView(self.result_tabs, filterable=False,
                                        placeholder="Held-out rows, participants and label-1 rows per fold.")
        self.result_tabs.addTab(self._titled(self.folds_view, "folds"), "Folds")
        split.addWidget(self.result_tabs)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)
        split.setChildrenCollapsible(False)
        split.setSizes([180, 320])
        v.addWidget(split, 1)
        self.show_results(None)
        return panel

    def _titled(self, view: QWidget, key: str) -> QWidget:
        """``view`` with a bold title above and a note below (both set with the results)."""
        box = QWidget(self)
        bv = QVBoxLayout(box)
        bv.setContentsMargins(0, 4, 0, 0)
        title, note = QLabel("", box), note_label("", box)
        title.setWordWrap(True)
        bv.addWidget(title)
        bv.addWidget(view, 1)
        bv.addWidget(note)
        self._notes[key] = note
        self._notes[key + ":title"] = title
        return box

    def _set_table(self, key: str, view: DataFrameView, table) -> None:
        self._notes[key + ":title"].setText(f"<b>{html_text(table.title)}</b>" if table is not None else "")
        self._notes[key].setText(table.note if table is not None else "")
        self._notes[key].setVisible(bool(table is not None and table.note))
        view.set_frame(table_frame(table) if table is not None else None)
        if table is not None and table.rows:  # long method names elide (the tooltip has them): verdicts stay in view
            header = view.view.horizontalHeader()
            header.resizeSection(0, min(header.sectionSize(0), METHOD_WIDTH))

    def show_results(self, doc) -> None:
        self.predictions_id = None
        if doc is None:
            self.summary_view.setHtml("<p style='color:#777'>Train and compare the methods (left), or choose a "
                                      "stored comparison, to see the summary, Tables 1–2, leakage and the "
                                      "accuracy–fairness frontier.</p>")
            for key, view in (("table1", self.table1_view), ("table2", self.table2_view),
                              ("leakage", self.leakage_view), ("folds", self.folds_view)):
                self._set_table(key, view, None)
            self.frontier.clear("Run the learners, or choose a stored run, to see the frontier.")
            self.predictions_label.setText("")
            self.group_audit_button.setVisible(False)
            return
        from fairdesk.core.reports import age_independence as age_report
        from fairdesk.core.reports.document import Paragraph, Table

        report = age_report.report_tree(doc, ReportSettings(suppress_k=int(self.window_.settings.suppress_k)))
        self.summary_view.setHtml(self._summary_html(report.section("summary").blocks))
        tables = [b for b in report.section("tables").blocks if isinstance(b, Table)]
        for key, view, start in (("table1", self.table1_view, "Table 1"), ("table2", self.table2_view, "Table 2")):
            self._set_table(key, view, next((t for t in tables if t.title.startswith(start)), None))
        self._set_table("folds", self.folds_view, next((t for t in tables if not t.title.startswith("Table")), None))
        leakage = report.section("leakage").blocks
        leak_table = next((b for b in leakage if isinstance(b, Table)), None)
        self._set_table("leakage", self.leakage_view, leak_table)
        words = " ".join(b.text for b in leakage if isinstance(b, Paragraph))
        self._notes["leakage"].setText(" ".join(filter(None, [words, leak_table.note if leak_table else ""])))
        self._notes["leakage"].setVisible(True)
        self.frontier.set_data(age_report.frontier_data(doc), age_report.COLORS)
        self._show_predictions()

    @staticmethod
    def _summary_html(blocks) -> str:
        out, bullets = [], []

        def flush() -> None:
            if bullets:
                out.append("<ul style='margin-top:0'>" + "".join(f"<li>{b}</li>" for b in bullets) + "</ul>")
                bullets.clear()

        # the PDF's order, except that notes (the verdict rule) come after the findings in this small view
        blocks = [b for b in blocks if b.style != "note"] + [b for b in blocks if b.style == "note"]
        for b in blocks:
            text = html_text(getattr(b, "text", ""))
            style = getattr(b, "style", "body")
            if style == "bullet":
                bullets.append(text)
                continue
            flush()
            if style == "note":
                out.append(f"<p style='color:#555'><small>{text}</small></p>")
            elif style == "lead":
                out.append(f"<p><b>Summary.</b> {text}</p>")
            else:
                out.append(f"<p>{text}</p>")
        flush()
        return "".join(out)

    def _show_predictions(self) -> None:
        project, audit_id = self.window_.project, self.audit_id
        pred = None
        if project is not None and audit_id is not None:
            from fairdesk.core.errors import ProjectError
            from fairdesk.jobs.age import predictions_dataset_of

            try:
                pred = predictions_dataset_of(project.path, audit_id)
            except ProjectError:
                pred = None
        self.predictions_id = pred
        if pred is None:
            self.predictions_label.setText("This run's out-of-fold predictions are not in the project.")
            self.group_audit_button.setVisible(False)
            return
        name = project.dataset(pred).name
        self.predictions_label.setText(f"Out-of-fold predictions of every method: dataset #{pred} (Dataset tab). "
                                       "The group audit (Δ_eo with bins of the attribute) runs on it directly.")
        self.predictions_label.setToolTip(f"“{name}”: one row per input row, method and repeat; on Audit › Group "
                                          "gaps choose it to see Δ_eo with bins and the gaps by band.")
        self.group_audit_button.setVisible(True)

    def open_group_audit(self) -> None:
        """Show Audit › Group gaps with this run's predictions chosen."""
        tab = getattr(self.window_, "audit_tab", None)
        if tab is None or self.predictions_id is None:
            return
        self.window_.show_page(tab)
        combo = getattr(tab, "dataset_combo", None)
        if combo is not None:
            idx = combo.findData(self.predictions_id)
            if idx >= 0:
                combo.setCurrentIndex(idx)
