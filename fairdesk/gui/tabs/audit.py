"""Audit tab: set up a group-gap audit, run it as a job, and explore stored results (plot, tables, export)."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QListWidget, QListWidgetItem, QPushButton, QSpinBox, QSplitter, QTabWidget,
                               QTextBrowser, QVBoxLayout, QWidget)

from fairdesk.core.escape import html_text
from fairdesk.core.audits.groups import CORRECTIONS, FAMILIES, METRICS, PRIMARY_CHOICES, RULES, GroupAuditPlan
from fairdesk.core.data.schema import INTERSECTION_SEP, ColumnRoles
from fairdesk.core.errors import FairDeskError
from fairdesk.core.progress import yield_point
from fairdesk.gui.tabs.base import NO_PROJECT, AuditRun
from fairdesk.gui.tabs.predictions import PredictionsPage
from fairdesk.gui.widgets.calibration_views import CalibrationViews
from fairdesk.gui.widgets.findings import section_html
from fairdesk.gui.widgets.gap_plot import GapPlot
from fairdesk.gui.widgets.panel_parts import (fill_combo, hrow, note_label, predictions_box, size_combos,
                                              threshold_choice)
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

ALL_TASKS = "(all tasks)"
RULE_LABELS = {"max": "Max gap (all pairs tested; each group vs the most different group)",
               "one-vs-rest": "One vs rest (group vs all other groups; = to overall)",
               "between": "Between groups (all pairs tested; highest − lowest shown)"}
FAMILY_LABELS = {"audit": "Whole audit (every test; default)", "task": "Each task separately",
                 "attribute-group-measure": "Each attribute, group and measure across tasks (as Hurtful Words did)"}
CORRECTION_LABELS = {"bh": "Benjamini–Hochberg (false discovery rate)", "holm": "Holm (family-wise error)"}
METRIC_LABELS = {"parity": "Parity (positive prediction rate)", "recall": "Recall (true positive rate)",
                 "specificity": "Specificity (true negative rate)"}
RECORD_COLUMNS = ["task", "attribute", "group", "metric", "n", "rate", "comparison", "comparison_rate", "gap",
                  "ci_low", "ci_high", "p_value", "q_value", "verdict", "significant", "favours", "reason",
                  "numerator", "denominator", "threshold", "bins", "family", "ci_low_unadjusted",
                  "ci_high_unadjusted"]
RECORD_HEADERS = {"ci_low": "adjusted CI low", "ci_high": "adjusted CI high", "p_value": "p-value",
                  "ci_low_unadjusted": "95% CI low (unadjusted)", "ci_high_unadjusted": "95% CI high (unadjusted)",
                  "q_value": "corrected p-value", "significant": "p ≤ α before correction",
                  "significant_bh": "differs", "verdict": "verdict", "comparison_rate": "comparison rate",
                  "n": "n (rows)"}
#: what a column of the results tables means, shown when hovering over its header
HEADER_TIPS = {"p_value": "p: the chance of a gap at least this large if the groups truly did not differ.",
               "q_value": "q: the p-value corrected for the number of tests made (Benjamini–Hochberg or Holm, as "
                          "chosen); a gap 'differs' when it is at most α.",
               "significant": "p at most α before any correction for multiple tests (as reported in paper 001); "
                              "with many tests some are expected by chance.",
               "verdict": "differs / equivalent within the margin / inconclusive (the data cannot tell either way).",
               "ci_low": "Lower end of the gap's interval adjusted for the multiple tests (false coverage rate): it "
                         "excludes 0 exactly when the gap 'differs' and lies inside ±margin when 'equivalent'.",
               "ci_high": "Upper end of the gap's interval adjusted for the multiple tests (see the lower end).",
               "ci_low_unadjusted": "Lower end of the gap's 95% interval, not adjusted for the multiple tests.",
               "ci_high_unadjusted": "Upper end of the gap's 95% interval, not adjusted for the multiple tests.",
               "family": "The family of tests this gap was corrected in (primary or a secondary family).",
               "favours": "Which side the gap favours (the group, or what it is compared with).",
               "share_favouring": "Of the gaps with p ≤ α before correction, the share in which this group fares "
                                  "better (1 = always better, 0 = always worse).",
               "share_favouring_bh": "Of the gaps that differ after correction, the share in which this group fares "
                                     "better (1 = always better, 0 = always worse).",
               "n_significant_bh": "Tasks in which the gap differs after the correction for multiple tests.",
               "n_significant": "Tasks in which p ≤ α before any correction (paper 001's count).",
               "n_equivalent": "Tasks in which the gap is shown to lie within ±margin.",
               "n_inconclusive": "Tasks in which the data cannot tell either way (not evidence of fairness).",
               "auroc": "Area under the ROC curve in the group (1 = perfect ranking, 0.5 = chance).",
               "auprc": "Area under the precision–recall curve in the group."}
GROUP_COLUMNS = ["task", "attribute", "group", "n", "n_patients", "n_positive", "prevalence", "auroc", "auprc",
                 "tn", "fp", "fn", "tp", "tested", "reason"]
SUMMARY_HEADERS = {"n_tasks": "tasks tested", "n_significant": "p ≤ α before correction",
                   "share_favouring": "group better off (share, before correction)",
                   "n_significant_bh": "differs", "share_favouring_bh": "group better off (share of differs)",
                   "n_differs": "differs (again)", "n_equivalent": "equivalent", "n_inconclusive": "inconclusive"}
SUMMARY_COLUMNS = ["attribute", "group", "metric", "n_tasks", "n_significant_bh", "share_favouring_bh",
                   "n_equivalent", "n_inconclusive", "n_significant", "share_favouring"]


def _combo_set(combo: QComboBox, items: list, keep: bool = True, data: list | None = None) -> None:
    fill_combo(combo, [(str(item), data[i] if data is not None else item) for i, item in enumerate(items)], keep)


class AuditTab(PredictionsPage):
    """Group gaps: the first page of the Audit tab (audit kind ``groups``)."""

    TITLE, ATTR = "Group gaps", "audit_tab"
    FORM_WIDTH, SPLIT = 480, (500, 850)

    def __init__(self, window) -> None:
        self._form_plan = None  # (dataset id, plan) to fill the form from once that dataset's columns are shown
        self._queued_run: AuditRun | None = None  # set by audit_at_threshold for the one run_audit it calls
        self._forest: dict = {}  # the first plot's rows, from prepare_results
        self._delta: dict = {}  # the first continuous attribute's error-spread rows and bins, from prepare_results
        self._rerun_note = ""  # what the page's running job re-runs ("audit #1 at threshold 0.300"), for its message
        super().__init__(window)

    @property
    def result(self):
        """The shown audit (a GroupAuditResult)."""
        return self.doc

    @property
    def result_id(self) -> int | None:
        return self.audit_id

    # =====================================================================================================
    # Setup panel
    def build_form(self) -> QWidget:
        w = QWidget(self)
        v = QVBoxLayout(w)
        data_box, form, self.dataset_combo, self.role_combos = predictions_box(
            w, (("label", "Label"), ("score", "Score"), ("task", "Task"), ("patient_id", "Patient id"),
                ("split", "Split")), self.dataset_changed)
        self.role_combos["task"].currentIndexChanged.connect(self._fill_tasks)
        self.role_combos["split"].currentIndexChanged.connect(self.update_buttons)
        self.tasks_list = CheckList(data_box, max_visible_rows=5)
        form.addRow("Tasks", self.tasks_list)
        v.addWidget(data_box)

        attr_box = QGroupBox("Protected attributes", w)
        form = QFormLayout(attr_box)
        self.attributes_list = CheckList(attr_box, max_visible_rows=5)
        self.continuous_list = CheckList(attr_box, max_visible_rows=3)
        self.bins_edit = QLineEdit("2, 5", attr_box)
        self.bins_edit.setToolTip("Numbers of equal-frequency bins N for the error spread Δ_eo^(N).")
        form.addRow("Categorical", self.attributes_list)
        form.addRow("Continuous", self.continuous_list)
        form.addRow("Bins for the error spread", self.bins_edit)
        self.cross_a = QComboBox(attr_box)
        self.cross_b = QComboBox(attr_box)
        size_combos(self.cross_a, self.cross_b, chars=6)
        self.cross_add = QPushButton("Add", attr_box)
        self.cross_add.clicked.connect(self.add_intersection)
        cross_row = QHBoxLayout()
        cross_row.addWidget(self.cross_a, 1)
        cross_row.addWidget(QLabel("×", attr_box))
        cross_row.addWidget(self.cross_b, 1)
        cross_row.addWidget(self.cross_add)
        form.addRow("Intersect", cross_row)
        self.intersections_list = QListWidget(attr_box)
        self.intersections_list.setMaximumHeight(58)
        self.cross_remove = QPushButton("Remove", attr_box)
        self.cross_remove.clicked.connect(lambda: [self.intersections_list.takeItem(self.intersections_list.row(i))
                                                   for i in self.intersections_list.selectedItems()])
        ir = QHBoxLayout()
        ir.addWidget(self.intersections_list, 1)
        ir.addWidget(self.cross_remove, 0, Qt.AlignmentFlag.AlignTop)
        form.addRow("Crossed", ir)
        v.addWidget(attr_box)

        gaps_box = QGroupBox("Gaps and statistics", w)
        form = QFormLayout(gaps_box)
        gaps_row = QHBoxLayout()
        self.metric_checks: dict[str, QCheckBox] = {}
        for m in METRICS:
            cb = QCheckBox(m, gaps_box)
            cb.setChecked(True)
            cb.setToolTip(METRIC_LABELS[m])
            cb.toggled.connect(self.update_buttons)
            self.metric_checks[m] = cb
            gaps_row.addWidget(cb)
        form.addRow("Gaps", gaps_row)
        self.rule_combo = QComboBox(gaps_box)
        for r in RULES:
            self.rule_combo.addItem(RULE_LABELS[r], r)
        form.addRow("Multi-group rule", self.rule_combo)
        self.procedure_combo = QComboBox(gaps_box)
        self.procedure_combo.addItem("Hierarchical: primary gaps first, secondary apart", "hierarchical")
        self.procedure_combo.addItem("Flat: one correction family (below)", "flat")
        self.procedure_combo.setToolTip(
            "Hierarchical: the primary gaps are tested task × attribute first (is there any gap among these "
            "groups?), then pair by pair within the ones found (hierarchical false discovery rate); AUROC, AUPRC, "
            "error spread, calibration and any rate not primary are secondary, each a family of its own. Flat: "
            "every test in the correction family chosen below.")
        form.addRow("Testing plan", self.procedure_combo)
        primary_row = QHBoxLayout()
        self.primary_checks: dict[str, QCheckBox] = {}
        for m in PRIMARY_CHOICES:
            cb = QCheckBox(m, gaps_box)
            cb.setChecked(m in METRICS)
            cb.setToolTip(f"Make {m} gaps primary in the hierarchical plan")
            self.primary_checks[m] = cb
            primary_row.addWidget(cb)
        form.addRow("Primary measures", primary_row)
        self.procedure_combo.currentIndexChanged.connect(self._procedure_changed)
        self.family_combo = QComboBox(gaps_box)
        for f in FAMILIES:
            self.family_combo.addItem(FAMILY_LABELS[f], f)
        self.family_combo.setToolTip("Which tests are corrected together. The whole audit keeps false alarms near "
                                     "α per audit; narrower families raise more false alarms.")
        form.addRow("Correction family", self.family_combo)
        self.correction_combo = QComboBox(gaps_box)
        for c in CORRECTIONS:
            self.correction_combo.addItem(CORRECTION_LABELS[c], c)
        form.addRow("Correction", self.correction_combo)
        self._procedure_changed()
        self.margin_spin = QDoubleSpinBox(gaps_box)
        self.margin_spin.setRange(0.005, 0.5)
        self.margin_spin.setDecimals(3)
        self.margin_spin.setSingleStep(0.01)
        self.margin_spin.setValue(0.05)
        self.margin_spin.setToolTip("A gap shown to lie within ±margin (two one-sided tests, corrected) is "
                                    "'equivalent'; 0.05 = 5 percentage points.")
        form.addRow("Equivalence margin ±", self.margin_spin)
        # no threshold is chosen until the user chooses one (no silent 0.5)
        self.fixed_radio, self.best_f1_radio, self.threshold_spin, self._threshold_group, th = threshold_choice(
            self, gaps_box, "Best F1 on validation split",
            "The score at which the model flags a patient, as it is used in practice.")
        form.addRow("Threshold", th)
        self.n_boot_spin = QSpinBox(gaps_box)
        self.n_boot_spin.setRange(100, 100000)
        self.n_boot_spin.setSingleStep(100)
        self.n_boot_spin.setValue(self.window_.settings.n_boot)
        self.seed_spin = QSpinBox(gaps_box)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(self.window_.settings.seed)
        self.min_group_spin = QSpinBox(gaps_box)
        self.min_group_spin.setRange(1, 10**6)
        self.min_group_spin.setValue(self.window_.settings.min_group_size)
        self.min_group_spin.setToolTip("Smaller groups are listed with their size but not tested.")
        form.addRow("Bootstrap replicates", self.n_boot_spin)
        form.addRow("Seed", self.seed_spin)
        form.addRow("Minimum group size", self.min_group_spin)
        v.addWidget(gaps_box)

        v.addStretch(1)
        return w

    # =====================================================================================================
    # Results panel
    def build_results(self) -> QWidget:
        panel, v = self.results_column()
        self.results_tabs = QTabWidget(panel)
        # gap plot
        plot_page = QWidget(panel)
        pv = QVBoxLayout(plot_page)
        pv.setContentsMargins(4, 4, 4, 4)
        self.plot_attribute = QComboBox(plot_page)
        self.plot_metric = QComboBox(plot_page)
        self.plot_task = QComboBox(plot_page)
        size_combos(self.plot_attribute, self.plot_task, chars=12, on_change=self.update_plot)  # names from the data
        size_combos(self.plot_metric, on_change=self.update_plot)
        pv.addLayout(hrow(plot_page, "Attribute", self.plot_attribute, "Gap", self.plot_metric, "Task", self.plot_task,
                          stretch=True))
        self.gap_plot = GapPlot(plot_page)
        pv.addWidget(self.gap_plot, 1)
        self.plot_note = note_label("Hover over a point for its n, counts, rates, adjusted CI, p-value, corrected "
                                    "p-value (q) and verdict. A pair "
                                    "shown in two rows is one test with one verdict. Inconclusive is not fair: "
                                    "the data cannot tell either way.", plot_page)
        pv.addWidget(self.plot_note)
        self.results_tabs.addTab(plot_page, "Gap plot")

        self.records_view = DataFrameView(panel, headers=RECORD_HEADERS, header_tips=HEADER_TIPS,
                                          placeholder="No results yet.")
        self.results_tabs.addTab(self.records_view, "All results")
        self.summary_view = DataFrameView(panel, headers=SUMMARY_HEADERS, header_tips=HEADER_TIPS,
                                          placeholder="No summary yet.")
        summary_page = QWidget(panel)
        sv = QVBoxLayout(summary_page)
        sv.setContentsMargins(0, 0, 0, 0)
        note = QLabel("Per attribute, group and gap, counted over the tasks: how many differ after the correction "
                      "for multiple tests and in how many of those the group is better off; how many are "
                      "equivalent within the margin and how many inconclusive; and (as in Table 4 of paper 001) "
                      "how many had p ≤ α before correction. Hover over a column title for its meaning.",
                      summary_page)
        note.setWordWrap(True)
        sv.addWidget(note)
        sv.addWidget(self.summary_view, 1)
        self.results_tabs.addTab(summary_page, "Counts")
        self.results_tabs.setTabToolTip(self.results_tabs.count() - 1, "Verdicts counted over the tasks per group "
                                        "(Table 4 of paper 001)")
        self.groups_view = DataFrameView(panel, headers={"auroc": "AUROC", "auprc": "AUPRC"}, header_tips=HEADER_TIPS,
                                         placeholder="No groups yet.")
        self.results_tabs.addTab(self.groups_view, "Performance")
        self.results_tabs.setTabToolTip(self.results_tabs.count() - 1, "Per-group performance: size, prevalence, "
                                        "AUROC, AUPRC and the confusion counts")

        delta_page = QWidget(panel)
        dv = QVBoxLayout(delta_page)
        dv.setContentsMargins(4, 4, 4, 4)
        self.delta_attribute = QComboBox(delta_page)
        size_combos(self.delta_attribute, chars=16, on_change=self.update_delta)
        dv.addLayout(hrow(delta_page, "Continuous attribute", self.delta_attribute, stretch=True))
        dsplit = QSplitter(Qt.Orientation.Vertical, delta_page)
        self.delta_plot = GapPlot(delta_page)
        self.delta_view = DataFrameView(delta_page, filterable=False, placeholder="No Δ_eo estimates.",
                                        headers={"ci_low": "null band low", "ci_high": "null band high (95%)",
                                                 "p_value": "p-value", "q_value": "corrected p-value",
                                                 "bins_requested": "bins asked for", "bins_used": "bins used",
                                                 "value": "error spread Δ_eo"},
                                        header_tips=HEADER_TIPS)
        self.bins_view = DataFrameView(delta_page, placeholder="No bins.",
                                       headers={"bins_requested": "bins asked for", "bins_used": "bins used",
                                                "n": "n (rows)", "n_positive": "with the condition",
                                                "fpr": "false positive rate", "fnr": "false negative rate"})
        dsplit.addWidget(self.delta_plot)
        dsplit.addWidget(self.delta_view)
        dsplit.addWidget(self.bins_view)
        dsplit.setSizes([230, 150, 150])  # the plot keeps its x-axis; the tables keep four rows each
        dv.addWidget(dsplit, 1)
        self.results_tabs.addTab(delta_page, "Error spread")
        self.results_tabs.setTabToolTip(self.results_tabs.count() - 1, "Δ_eo: how much the error rates vary over "
                                        "bins of a continuous attribute such as age")
        calibration_tabs = QTabWidget(panel)  # reliability, ROC & PR and the threshold explorer under one tab
        calibration_tabs.setDocumentMode(True)
        self.results_tabs.addTab(calibration_tabs, "Calibration")
        self.results_tabs.setTabToolTip(self.results_tabs.count() - 1, "Calibration by group, ROC and precision–"
                                        "recall curves, and the threshold explorer")
        self.calibration_views = CalibrationViews(panel, calibration_tabs, self.window_.settings.suppress_k)
        self.calibration_views.audit_requested.connect(self.audit_at_threshold)

        self.dropped_view = DataFrameView(panel, filterable=False, placeholder="No group was left out.")
        self.results_tabs.addTab(self.dropped_view, "Not tested")
        self.results_tabs.setTabToolTip(self.results_tabs.count() - 1, "Groups left out (too small, missing "
                                        "values), with their sizes")
        self.details_view = QTextBrowser(panel)
        self.results_tabs.addTab(self.details_view, "Settings")
        self.results_tabs.setTabToolTip(self.results_tabs.count() - 1, "Thresholds, warnings, the audit plan and "
                                        "provenance")
        v.addWidget(self.results_tabs, 1)
        return panel

    # =====================================================================================================
    # Project and dataset
    def apply_settings(self) -> None:
        self.n_boot_spin.setValue(self.window_.settings.n_boot)
        self.calibration_views.set_suppress_k(self.window_.settings.suppress_k)

    def columns_shown(self, read) -> None:
        cat = read.categorical if read is not None else []
        _combo_set(self.cross_a, cat, keep=False)
        _combo_set(self.cross_b, cat, keep=False)
        if len(cat) > 1:
            self.cross_b.setCurrentIndex(1)
        self.intersections_list.clear()
        if read is None:
            self.tasks_list.set_items([])
            return
        self._fill_tasks()
        if self._form_plan is not None:
            dataset_id, plan = self._form_plan
            self._form_plan = None
            if dataset_id == read.dataset_id:
                self.apply_plan(plan)

    def _fill_tasks(self, *args) -> None:
        task_col = self.role_combos["task"].currentData()
        if self.df is None:
            return
        if task_col and task_col in self.df.columns:
            tasks = sorted(map(str, pd.unique(self.df[task_col].dropna())))
            self.tasks_list.set_items(tasks, tasks)
            self.tasks_list.setEnabled(True)
        else:
            self.tasks_list.set_items(["(single task)"], ["(single task)"])
            self.tasks_list.setEnabled(False)

    def fill_form(self, dataset_id: int, plan: GroupAuditPlan) -> None:
        """Choose ``dataset_id`` in the form and, once its columns are shown (read in the view runner unless it was
        the last dataset read; ``wait_view`` waits for it), set every input from ``plan`` (the settings of a stored
        audit). Values outside an input's range are clamped by it; settings the form does not show are not kept
        here."""
        self._form_plan = (dataset_id, plan)
        self.dataset_combo.blockSignals(True)
        self.dataset_combo.setCurrentIndex(self.dataset_combo.findData(dataset_id))
        self.dataset_combo.blockSignals(False)
        self.dataset_changed()  # that dataset's columns (also when it was already chosen: resets the form)

    def apply_plan(self, plan: GroupAuditPlan) -> None:
        """Set every input from ``plan`` (its dataset's columns are shown)."""
        roles = plan.roles
        for key, combo in self.role_combos.items():  # the task combo refills (and checks) the tasks
            value = getattr(roles, key)
            combo.setCurrentIndex(combo.findData(value) if value else (-1 if key in ("label", "score") else 0))
        if plan.tasks and self.tasks_list.isEnabled():
            self.tasks_list.set_checked(plan.tasks)
        for lst, names in ((self.attributes_list, roles.attributes), (self.continuous_list,
                                                                       roles.continuous_attributes)):
            lst.set_items(list(dict.fromkeys(lst.items() + [str(n) for n in names])), names)
        self.intersections_list.clear()
        for cols in plan.intersections:
            item = QListWidgetItem(INTERSECTION_SEP.join(cols), self.intersections_list)
            item.setData(Qt.ItemDataRole.UserRole, tuple(cols))
        self.bins_edit.setText(", ".join(str(b) for b in plan.bins))
        for m, cb in self.metric_checks.items():
            cb.setChecked(m in plan.metrics)
        for m, cb in self.primary_checks.items():
            cb.setChecked(m in getattr(plan, "primary", METRICS))
        for combo, value in ((self.rule_combo, plan.gap_rule), (self.family_combo, plan.family),
                             (self.correction_combo, plan.correction),
                             (self.procedure_combo, getattr(plan, "procedure", None) or "flat")):
            combo.setCurrentIndex(max(combo.findData(value), 0))
        for spin, value in ((self.margin_spin, plan.margin), (self.n_boot_spin, plan.n_boot),
                            (self.seed_spin, plan.seed), (self.min_group_spin, plan.min_group_size)):
            spin.setValue(value)
        self.update_buttons()  # Best F1 needs a split column
        if plan.threshold == "best_f1" and self.best_f1_radio.isEnabled():
            self.best_f1_radio.setChecked(True)
        else:
            self.fixed_radio.setChecked(True)
            if not isinstance(plan.threshold, str):
                self.threshold_spin.setValue(float(plan.threshold))

    def add_intersection(self) -> None:
        a, b = self.cross_a.currentData(), self.cross_b.currentData()
        if not a or not b or a == b:
            self.status.setText("Choose two different attributes to cross.")
            return
        text = f"{a}{INTERSECTION_SEP}{b}"
        if not self.intersections_list.findItems(text, Qt.MatchFlag.MatchExactly):
            item = QListWidgetItem(text, self.intersections_list)
            item.setData(Qt.ItemDataRole.UserRole, (a, b))

    def intersections(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(self.intersections_list.item(i).data(Qt.ItemDataRole.UserRole))
                     for i in range(self.intersections_list.count()))

    # =====================================================================================================
    # Running
    def plan(self) -> GroupAuditPlan:
        """The audit plan from the form; raises FairDeskError with a message the user can act on."""
        label, score = self.role_combos["label"].currentData(), self.role_combos["score"].currentData()
        if not label or not score:
            raise FairDeskError("Choose the label and the score columns.")
        roles = ColumnRoles(label=label, score=score, task=self.role_combos["task"].currentData(),
                            attributes=tuple(self.attributes_list.checked()),
                            continuous_attributes=tuple(self.continuous_list.checked()),
                            patient_id=self.role_combos["patient_id"].currentData(),
                            split=self.role_combos["split"].currentData())
        metrics = tuple(m for m in METRICS if self.metric_checks[m].isChecked())
        if not metrics and not roles.continuous_attributes:
            raise FairDeskError("Choose at least one gap (parity, recall or specificity).")
        try:
            bins = tuple(int(b) for b in self.bins_edit.text().replace(";", ",").split(",") if b.strip())
        except ValueError:
            raise FairDeskError("Bins must be whole numbers separated by commas, e.g. 2, 5.") from None
        if not (self.best_f1_radio.isChecked() or self.fixed_radio.isChecked()):
            raise FairDeskError("Choose the threshold at which the model flags a patient: Fixed (the score the model "
                                "is used at) or Best F1 on the validation split.")
        threshold: float | str = "best_f1" if self.best_f1_radio.isChecked() else float(self.threshold_spin.value())
        if threshold == "best_f1" and not roles.split:
            raise FairDeskError("Best-F1 thresholds are chosen on the validation split: choose the split column, "
                                "or use a fixed threshold.")
        tasks = None
        if roles.task and self.tasks_list.isEnabled():
            tasks = tuple(self.tasks_list.checked())
            if not tasks:
                raise FairDeskError("Choose at least one task.")
            if len(tasks) == self.tasks_list.count():
                tasks = None
        return GroupAuditPlan(roles=roles, metrics=metrics or METRICS, gap_rule=self.rule_combo.currentData(),
                              threshold=threshold, bins=bins or (2, 5), intersections=self.intersections(),
                              tasks=tasks, n_boot=self.n_boot_spin.value(), seed=self.seed_spin.value(),
                              min_group_size=self.min_group_spin.value(),
                              family=self.family_combo.currentData(), correction=self.correction_combo.currentData(),
                              margin=float(self.margin_spin.value()), procedure=self.procedure_combo.currentData(),
                              primary=tuple(m for m, cb in self.primary_checks.items() if cb.isChecked()))

    def _procedure_changed(self) -> None:
        """The primary measures belong to the hierarchical plan, the correction family to the flat one."""
        hierarchical = self.procedure_combo.currentData() == "hierarchical"
        for cb in self.primary_checks.values():
            cb.setEnabled(hierarchical)
        self.family_combo.setEnabled(not hierarchical)

    def audit_run(self) -> AuditRun:
        if self._queued_run is not None:  # "Audit at this threshold": the stored plan, not re-read from the form
            return self._with_executor(self._queued_run)
        self._rerun_note = ""
        dataset_id = self.dataset_combo.currentData()
        if dataset_id is None:
            raise FairDeskError("Add a predictions dataset to the project first (Dataset or Model tab).")
        return self._with_executor(self._run_of(dataset_id, self.plan()))

    def _with_executor(self, run: AuditRun) -> AuditRun:
        """The run on the executor of Settings › Executor (the job's ``executor``, as the CLI's --executor)."""
        run.kwargs["executor"] = self.window_.settings.executor_spec()
        return run

    @staticmethod
    def _run_of(dataset_id: int, plan: GroupAuditPlan, note: str = "") -> AuditRun:
        attrs = list(plan.roles.attributes) + list(plan.roles.continuous_attributes) + [
            INTERSECTION_SEP.join(c) for c in plan.intersections]
        name = f"Group gaps: {', '.join(attrs)} ({plan.gap_rule}, B={plan.n_boot}{note})"
        return AuditRun(f"Audit: {', '.join(attrs)}", args=(dataset_id, plan), kwargs={"name": name})

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        has_split = bool(self.role_combos["split"].currentData()) if "split" in self.role_combos else False
        self.best_f1_radio.setEnabled(has_split)
        if not has_split and self.best_f1_radio.isChecked():  # no threshold chosen: the user picks one
            self._threshold_group.setExclusive(False)
            self.best_f1_radio.setChecked(False)
            self._threshold_group.setExclusive(True)

    # =====================================================================================================
    # Results
    def audit_at_threshold(self, value: float):
        """The threshold explorer's "Audit at this threshold" (one click): the shown audit again at the fixed
        threshold ``value`` — its dataset chosen and the form filled from its plan (so the form shows what runs),
        then the audit started with that plan, only the threshold changed (settings the form does not show, such
        as α or the evaluation split, are kept too). Returns the job; None, saying why on the status line and
        changing nothing, when there is no project, a job is running or the audit's dataset is not in the project.
        """
        value = round(float(value), 3)  # the precision of the explorer's and the form's threshold fields
        project, plan, audit_id = self.window_.project, getattr(self.result, "plan", None), self.audit_id
        if project is None:
            self.say(NO_PROJECT, error=True)
            return None
        if self.busy:
            self.say("An audit is running on this page: wait for it to finish (or cancel it), then press “Audit at "
                     "this threshold” again.")
            return None
        if plan is None or audit_id is None:
            self.say("Choose a stored audit first: “Audit at this threshold” runs it again at the chosen threshold.")
            return None
        try:
            info = next((a for a in project.audits() if a.id == audit_id), None)
        except FairDeskError as err:
            self.say(str(err), error=True)
            return None
        dataset_id = info.dataset_id if info is not None else None
        if dataset_id is None or self.dataset_combo.findData(dataset_id) < 0:
            self.say(f"Audit #{audit_id} was run on a dataset not in this project: add its predictions file again "
                     f"to audit it at {value:.3f}.", error=True)
            return None
        return self.run_plan(dataset_id, replace(plan, threshold=value), f", threshold {value:g}",
                             running=f"Auditing {self._infos[dataset_id].name} at threshold {value:.3f} with the "
                                     f"settings of audit #{audit_id}…",
                             stored_note=f"audit #{audit_id} at threshold {value:.3f}")

    def run_plan(self, dataset_id: int, plan: GroupAuditPlan, note: str = "", *, running: str | None = None,
                 stored_note: str = ""):
        """Run ``plan`` on ``dataset_id`` as it is (settings the form does not show kept too), the form filled from
        it meanwhile so that it shows what runs (:meth:`fill_form`; the dataset is read in the view runner, the
        audit job reads it again itself and says so when it cannot). Returns the job, or None (the status line
        says why)."""
        self.fill_form(dataset_id, plan)
        run = self._run_of(dataset_id, plan, note)
        if running:
            run.running = running
        self._queued_run, self._rerun_note = run, stored_note
        try:
            return self.run_audit()
        finally:
            self._queued_run = None

    def audit_stored(self, audit_id: int) -> None:
        super().audit_stored(audit_id)
        if self._rerun_note:
            self.say(f"Audit #{audit_id} stored: {self._rerun_note}.")
            self._rerun_note = ""

    def prebuild_steps(self):
        """The gap and error-spread plots, then the calibration views' plots, one widget per step (each is kept
        hidden until an audit fills it)."""
        for plot in (self.gap_plot, self.delta_plot):
            if plot.plot_widget is None:
                plot.ensure_plot()
                plot.clear(plot.empty_label.text())
                yield
        yield from self.calibration_views.prebuild_steps()

    def prepare_results(self, result, audit_id: int):
        """The header, the tables and the details of a stored audit, computed in the view thread."""
        from fairdesk.core.audits.groups import comparison_counts, plan_summary, tests_text

        rec, plan = result.records, result.plan
        c = comparison_counts(result)  # the comparisons (tests) the findings and the PDF count
        threshold = (plan.threshold if isinstance(plan.threshold, str) else f"{float(plan.threshold):g}")
        header = (
            f"<b>{html_text(str(result.provenance.get('dataset', '')))}</b> · rule <b>{plan.gap_rule}</b> · "
            f"threshold {threshold} · {plan.n_boot:,} bootstrap replicates · seed {plan.seed} · "
            f"{c['total']:,} comparisons, one test each ({html_text(tests_text(c))}) · "
            f"{html_text(plan_summary(result)['description'])} · "
            f"{c['rows']:,} result rows")
        gap_rec = rec[rec["metric"] != "delta_eo"] if not rec.empty else rec
        summ, groups = result.summary, result.groups
        from fairdesk.core.reports import figures

        attrs = list(dict.fromkeys(gap_rec["attribute"].astype(str))) if not gap_rec.empty else []
        metrics = [m for m in METRICS if not gap_rec.empty and m in set(gap_rec["metric"])]
        # the first plot's rows (the plot's first choices), so that drawing it is all the Qt thread does
        forest = {(attrs[0], metrics[0], None): figures.forest_data(result, attrs[0], metrics[0])} \
            if attrs and metrics else {}
        yield_point()  # (the Qt thread's work goes first: core.progress.Foreground)
        continuous = list(dict.fromkeys(rec.loc[rec["metric"] == "delta_eo", "attribute"].astype(str))) \
            if not rec.empty else []
        # the error-spread plot and tables of the first continuous attribute (its selector's first choice)
        delta = {continuous[0]: (figures.delta_eo_data(result, continuous[0]),
                                 figures.delta_bins_data(result, continuous[0]))} if continuous else {}
        yield_point()
        calibration = self.calibration_views.prepare(result, self.window_.project, audit_id)
        yield_point()
        return {
            "forest": forest,
            "delta": delta,
            "header": header,
            "attrs": attrs,
            "metrics": metrics,
            "tasks": list(dict.fromkeys(rec["task"].astype(str))) if not rec.empty else [],
            "records": rec[[c for c in RECORD_COLUMNS if c in rec.columns]] if not rec.empty else None,
            "summary": summ[[c for c in SUMMARY_COLUMNS if c in summ.columns]] if not summ.empty else None,
            "groups": groups[[c for c in GROUP_COLUMNS if c in groups.columns]] if not groups.empty else None,
            "dropped": result.dropped if not result.dropped.empty else None,
            "continuous": continuous,
            "details": self._details_html(result),
            "calibration": calibration,
        }

    def show_results(self, result):
        prepared = self.prepared
        if result is None or prepared is None:
            self.calibration_views.set_result(None)
            self.clear_header("No audit yet: set one up on the left and press Run audit.")
            self.gap_plot.clear("Run an audit, or choose one from the list, to see its gaps.")
            self.delta_plot.clear("No continuous attribute in this audit.")
            for view in (self.records_view, self.summary_view, self.groups_view, self.delta_view, self.bins_view,
                         self.dropped_view):
                view.set_frame(None)
            self.details_view.clear()
            return None
        return self._fill_results(result, prepared)

    def show_audit(self, audit_id: int | None) -> None:
        """The gap plot's repaints are held off while the chosen audit is read (the findings header above it says
        so and shrinks), shown and filled in (:meth:`show_document`), so that the page settling around the shown
        plot repaints it once."""
        super().show_audit(audit_id)
        if self._view_job is not None:  # being read (the layout and the repaints it asks for come later)
            self.gap_plot.hold_repaints(True)

    def show_document(self, doc, audit_id: int | None, *, prepared=None, findings=None) -> None:
        """The gap plot's repaints are held off from here (the findings header set above it) to the fill's last
        step (:meth:`_fill_results`)."""
        self._slices = None  # a fill under way ends first (its end releases the plot)
        self.gap_plot.hold_repaints(True)
        try:
            super().show_document(doc, audit_id, prepared=prepared, findings=findings)
        finally:
            if self._slices is None:  # nothing to fill in steps (no audit, or it failed)
                self.gap_plot.hold_repaints(False)

    def _fill_results(self, result, prepared):
        """Fill the result tabs part by part (each ``yield`` lets the window paint; the gap plot is repainted once,
        at the end, see :meth:`show_document`)."""
        try:
            yield from self._fill_steps(result, prepared)
        finally:  # (also when a newer audit drops the steps)
            self.gap_plot.hold_repaints(False)

    def _fill_steps(self, result, prepared):
        from fairdesk.core.reports.figures import STATUS_STYLE

        self.result_header.setText(prepared["header"])
        self.result_header.setToolTip(f"Colours: {', '.join(STATUS_STYLE[v]['label'] for v in STATUS_STYLE)}.")
        _combo_set(self.plot_attribute, prepared["attrs"])
        _combo_set(self.plot_metric, [METRIC_LABELS[m] for m in prepared["metrics"]], data=prepared["metrics"])
        _combo_set(self.plot_task, [ALL_TASKS] + prepared["tasks"], data=[None] + prepared["tasks"])
        yield
        self.gap_plot.ensure_plot()  # (each plot widget created in a turn of its own)
        yield
        self._forest = prepared["forest"]
        yield from self._plot_parts()
        yield
        for view, key in ((self.records_view, "records"), (self.summary_view, "summary"),
                          (self.groups_view, "groups"), (self.dropped_view, "dropped")):
            view.set_frame(prepared[key])
            yield
        _combo_set(self.delta_attribute, prepared["continuous"])
        self._delta = prepared["delta"]
        if prepared["continuous"]:
            self.delta_plot.ensure_plot()
            yield
        yield from self._delta_parts()
        yield
        self.details_view.setHtml(prepared["details"])
        yield
        yield from self.calibration_views.show_prepared(result, prepared["calibration"])

    def findings_of(self, doc: dict, suppress_k: int, parsed=None) -> tuple[str, dict[str, int]]:
        """The board summary alone (``reports.groups.board_summary``: the report's first section, without building
        the rest of the report) and the comparisons by verdict, from one parse of the document (view thread):
        ``parsed``, the result :meth:`read_view` parsed and prepared the tables from (its findings, kept on it, are
        then computed once for the header and the tables), else parsed here."""
        from fairdesk.core.audits.groups import GroupAuditResult, verdict_counts
        from fairdesk.core.reports.groups import board_summary, plan_description

        result = parsed if parsed is not None else GroupAuditResult.from_dict(doc)
        return section_html(board_summary(result, suppress_k, plan_description(doc))), verdict_counts(result)

    def verdict_counts(self, doc: dict) -> dict[str, int]:
        """The comparisons by verdict, counted as the PDF counts them (``comparison_counts``: each test once)."""
        from fairdesk.core.audits.groups import GroupAuditResult, verdict_counts

        return verdict_counts(GroupAuditResult.from_dict(doc))

    def update_plot(self, *args) -> None:
        for _ in self._plot_parts():
            pass

    def _plot_parts(self):
        """The gap plot of the selectors' choice in parts (:meth:`GapPlot.set_data_steps`)."""
        result = self.result
        attr = self.plot_attribute.currentData()
        metric = self.plot_metric.currentData()
        if result is None or attr is None or metric is None:
            self.gap_plot.clear("This audit has no group gaps to plot." if result is not None else
                                "Run an audit, or choose one from the list, to see its gaps.")
            return
        from fairdesk.core.reports import figures

        task = self.plot_task.currentData()
        data = self._forest.pop((attr, metric, task), None)
        if data is None:
            data = figures.forest_data(result, attr, metric, task=task)
        rule = result.plan.gap_rule
        comparison = {"max": "the most different group", "one-vs-rest": "the other groups",
                      "between": "lowest group"}.get(rule, "all groups")
        what = METRIC_LABELS.get(metric, metric).split(" (")[0].lower()
        xlabel = (f"gap in {what}: highest − lowest group" if rule == "between"
                  else f"gap in {what}: group − {comparison} (positive favours the group)")
        yield from self.gap_plot.set_data_steps(data, value_col="gap", title=f"{attr} · {what}", xlabel=xlabel,
                                                empty_message="No estimate for this choice.")

    def update_delta(self, *args) -> None:
        for _ in self._delta_parts():
            pass

    def _delta_parts(self):
        """The error-spread tab in two parts (the plot; its two tables), a ``yield`` between them."""
        result, attr = self.result, self.delta_attribute.currentData()
        if result is None or attr is None:
            self.delta_plot.clear("No continuous attribute in this audit.")
            self.delta_view.set_frame(None)
            self.bins_view.set_frame(None)
            return
        from fairdesk.core.reports import figures

        data, bins = self._delta.pop(attr, None) or (figures.delta_eo_data(result, attr),
                                                     figures.delta_bins_data(result, attr))
        yield from self.delta_plot.set_data_steps(data, value_col="value", title=f"Error spread Δ_eo over {attr}",
                                                  xlabel="Δ_eo (0 = equal error rates); grey bar: 95% null band",
                                                  band=True)  # (the caption on one line)
        yield
        cols = ["task", "bins_requested", "bins_used", "value", "ci_low", "ci_high", "p_value", "q_value",
                "verdict", "reason"]
        self.delta_view.set_frame(data[[c for c in cols if c in data.columns]] if not data.empty else None)
        bcols = ["task", "bins_requested", "bins_used", "bin", "label", "n", "n_positive", "fpr", "fnr"]
        self.bins_view.set_frame(bins[[c for c in bcols if c in bins.columns]] if not bins.empty else None)

    @staticmethod
    def _details_html(result) -> str:
        def esc(x) -> str:
            return html_text(str(x))

        parts = ["<h3>Thresholds</h3><table>"]
        for task, tau in result.thresholds.items():
            value = f"{tau:.4f}" if isinstance(tau, (int, float)) and not math.isnan(tau) else esc(tau)
            parts.append(f"<tr><td>{esc(task)}</td><td>&nbsp;&nbsp;{value}</td></tr>")
        parts.append("</table>")
        if result.warnings:
            parts.append("<h3>Warnings</h3><ul>" + "".join(f"<li>{esc(w)}</li>" for w in result.warnings) + "</ul>")
        parts.append("<h3>Plan</h3><pre>" + esc(json.dumps(result.plan.to_dict(), indent=1, default=str)) + "</pre>")
        parts.append("<h3>Provenance</h3><pre>" + esc(json.dumps(result.provenance, indent=1, default=str))
                     + "</pre>")
        return "".join(parts)
