"""Slices nobody named (audit kind ``slices``): set up a slice search on a predictions dataset, run it as a
job, list the carried slices with their verdicts in words, and open a slice in Group gaps as an intersection."""
from __future__ import annotations

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QListWidget, QListWidgetItem,
                               QSpinBox, QTabWidget, QVBoxLayout, QWidget)

from fairdesk.core import numbers
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.escape import html_text, shortened
from fairdesk.core.errors import FairDeskError
from fairdesk.gui.tabs.base import NO_PROJECT, AuditRun
from fairdesk.gui.tabs.predictions import PredictionsPage
from fairdesk.gui.widgets.panel_parts import (hrow, note_label, predictions_box, push_button,
                                              threshold_choice)
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

METRIC_LABELS = {"recall": "Recall (true positive rate)", "specificity": "Specificity (true negative rate)",
                 "parity": "Positive prediction rate", "error": "Error rate"}
VERDICT_COLOURS = {"differs": "#B00020", "equivalent": "#1b6e20", "inconclusive": "#555555"}
LIST_CHARS = 600  # the most characters of a slice's sentence in the list
TABLE_COLUMNS = ["task", "rank", "description", "n", "cases", "value", "rest_value", "gap", "ci_low", "ci_high",
                 "p_value", "q_value", "verdict", "reason", "discovery_n", "discovery_value", "discovery_gap"]
TABLE_HEADERS = {"description": "slice", "value": "rate", "rest_value": "rest", "ci_low": "adjusted CI low",
                 "ci_high": "adjusted CI high", "p_value": "p-value", "q_value": "corrected p-value",
                 "discovery_value": "rate (discovery)", "discovery_gap": "gap (discovery, not tested)"}
OPEN_TIP = ("Audit this slice in Group gaps as an intersection of its columns (one vs rest, the same metric and "
            "threshold). Group gaps uses every row, also the discovery rows the slice was found on, so its p-value "
            "for this slice is too small; the verdict to trust is the one here.")


class SlicesPage(PredictionsPage):
    """Slices nobody named: the second page of the Audit tab (audit kind ``slices``)."""

    TITLE, ATTR, AFTER = "Slices", "slices_page", "Group gaps"
    FORM_WIDTH, SPLIT = 440, (470, 880)

    # ---- form --------------------------------------------------------------------------------------------
    def build_form(self) -> QWidget:
        w = QWidget(self)
        v = QVBoxLayout(w)
        data_box, form, self.dataset_combo, self.role_combos = predictions_box(
            w, (("label", "Label"), ("score", "Score"), ("task", "Task"), ("patient_id", "Patient id"),
                ("split", "Split (judged on its test rows)")),
            self.dataset_changed)
        v.addWidget(data_box)

        attr_box = QGroupBox("Attributes to search over", w)
        form = QFormLayout(attr_box)
        self.attributes_list = CheckList(attr_box, max_visible_rows=6)
        self.continuous_list = CheckList(attr_box, max_visible_rows=3)
        self.bins_spin = QSpinBox(attr_box)
        self.bins_spin.setRange(2, 100)
        self.bins_spin.setValue(5)
        self.bins_spin.setToolTip("Equal-frequency bins of each continuous attribute (edges from the discovery rows).")
        form.addRow("Categorical", self.attributes_list)
        form.addRow("Continuous", self.continuous_list)
        form.addRow("Bins", self.bins_spin)
        v.addWidget(attr_box)

        box = QGroupBox("Search and test", w)
        form = QFormLayout(box)
        self.metric_combo = QComboBox(box)
        for m, text in METRIC_LABELS.items():
            self.metric_combo.addItem(text, m)
        form.addRow("Rate", self.metric_combo)
        self.fixed_radio, self.best_f1_radio, self.threshold_spin, self._threshold_group, th = threshold_choice(
            self, box, "Best F1 on the discovery rows",
            "The score at which the model flags a patient, as it is used in practice.")
        form.addRow("Threshold", th)
        self.order_spin = self._spin(box, 1, 4, 3, "The most attribute values a slice combines.")
        self.min_size_spin = self._spin(box, 1, 10**6, 50, "Slices with fewer rows (on the discovery part) are not "
                                                            "searched.")
        self.carry_spin = self._spin(box, 1, 1000, 20, "How many of the worst-served slices are tested on the "
                                                       "confirmation rows (fixed before they are looked at).")
        self.fraction_spin = QDoubleSpinBox(box)
        self.fraction_spin.setRange(0.1, 0.9)
        self.fraction_spin.setSingleStep(0.05)
        self.fraction_spin.setValue(0.5)
        self.fraction_spin.setToolTip("Share of the patients the search sees; the others confirm.")
        self.seed_spin = self._spin(box, 0, 2**31 - 1, self.window_.settings.seed, "The seed of the split.")
        form.addRow("Max order", self.order_spin)
        form.addRow("Min size", self.min_size_spin)
        form.addRow("Carried forward", self.carry_spin)
        form.addRow("Discovery share", self.fraction_spin)
        form.addRow("Seed", self.seed_spin)
        v.addWidget(box)
        v.addStretch(1)
        return w

    @staticmethod
    def _spin(parent, low, high, value, tip) -> QSpinBox:
        spin = QSpinBox(parent)
        spin.setRange(low, high)
        spin.setValue(value)
        spin.setToolTip(tip)
        return spin

    def plan(self):
        from fairdesk.core.audits.slices import SliceAuditPlan

        label, score = self.role_combos["label"].currentData(), self.role_combos["score"].currentData()
        if not label or not score:
            raise FairDeskError("Choose the label and the score columns.")
        if not (self.fixed_radio.isChecked() or self.best_f1_radio.isChecked()):
            raise FairDeskError("Choose the threshold at which the model flags a patient: Fixed (the score the model "
                                "is used at) or Best F1 on the discovery rows.")
        roles = ColumnRoles(label=label, score=score, task=self.role_combos["task"].currentData(),
                            attributes=tuple(self.attributes_list.checked()),
                            continuous_attributes=tuple(self.continuous_list.checked()),
                            patient_id=self.role_combos["patient_id"].currentData(),
                            split=self.role_combos["split"].currentData())
        threshold = "best_f1" if self.best_f1_radio.isChecked() else float(self.threshold_spin.value())
        return SliceAuditPlan(roles=roles, threshold=threshold, metric=self.metric_combo.currentData(),
                              bins=self.bins_spin.value(), max_order=self.order_spin.value(),
                              min_size=self.min_size_spin.value(), carry=self.carry_spin.value(),
                              discovery_fraction=round(float(self.fraction_spin.value()), 3),
                              seed=self.seed_spin.value(), n_boot=self.window_.settings.n_boot,
                              suppress_k=int(self.window_.settings.suppress_k))

    def audit_run(self) -> AuditRun:
        dataset_id = self.dataset_combo.currentData()
        if dataset_id is None:
            raise FairDeskError("Add a predictions dataset to the project first (Dataset or Model tab).")
        plan = self.plan()
        attrs = ", ".join(list(plan.roles.attributes) + list(plan.roles.continuous_attributes))
        return AuditRun(f"Slices: {attrs}", args=(dataset_id, plan),
                        running="Searching slices on the discovery rows, then testing them on the others…")

    # ---- results -----------------------------------------------------------------------------------------
    def build_results(self) -> QWidget:
        panel, v = self.results_column()
        tabs = QTabWidget(panel)
        words = QWidget(panel)
        wv = QVBoxLayout(words)
        wv.setContentsMargins(4, 4, 4, 4)
        self.slice_list = QListWidget(words)
        self.slice_list.setWordWrap(True)
        self.slice_list.setAlternatingRowColors(True)
        self.slice_list.currentItemChanged.connect(self.update_buttons)
        wv.addWidget(self.slice_list, 1)
        self.open_button = push_button("Open in Group gaps", words, self.open_in_group_gaps, OPEN_TIP)
        wv.addLayout(hrow(words, self.open_button, stretch=True))
        wv.addWidget(note_label("Each carried slice against the rest of the patients, on the confirmation rows the "
                                "search never saw. Inconclusive is not fair: the data cannot tell either way.", words))
        tabs.addTab(words, "Slices in words")
        self.table_view = DataFrameView(panel, headers=TABLE_HEADERS, placeholder="No slices yet.")
        tabs.addTab(self.table_view, "All numbers")
        v.addWidget(tabs, 1)
        return panel

    def show_results(self, doc) -> None:
        from fairdesk.core.reports.slices import slice_sentence

        self.slice_list.clear()
        if doc is None:
            self.clear_header("No slice audit yet: set one up on the left and press Run audit.",
                              "No slice audit selected.")
            self.table_view.set_frame(None)
            self.update_buttons()
            return
        k = int(self.window_.settings.suppress_k)
        margin = float((doc.get("plan") or {}).get("margin") or 0.05)
        plan, c = doc.get("plan") or {}, doc.get("counts") or {}
        tau = ", ".join(numbers.short(v, 3) for v in (doc.get("thresholds") or {}).values())
        self.result_header.setText(
            f"<b>{METRIC_LABELS.get(plan.get('metric'), plan.get('metric'))}</b> · threshold {tau} · "
            f"{int(doc.get('searched') or 0):,} slices searched · {int(c.get('total') or 0)} carried: "
            f"<b>{int(c.get('differs') or 0)} differ</b>, {int(c.get('equivalent') or 0)} equivalent, "
            f"{int(c.get('inconclusive') or 0)} inconclusive · split seed {plan.get('seed')}, "
            f"{float(plan.get('discovery_fraction') or 0.5):.0%} for discovery"
            + (f" · judged on {html_text(str((doc.get('split') or {}).get('evaluated_on')))}"
               if (doc.get("split") or {}).get("evaluated_on") else ""))
        for r in doc.get("slices") or []:
            text = slice_sentence(r, k, margin)
            text = shortened(text, LIST_CHARS)  # a slice described in thousands of words: a few lines, not pages
            item = QListWidgetItem(text[:1].upper() + text[1:], self.slice_list)
            item.setData(Qt.ItemDataRole.UserRole, r)
            item.setForeground(self.palette().text() if r.get("verdict") != "differs" else
                               _colour(VERDICT_COLOURS["differs"]))
        if self.slice_list.count():
            self.slice_list.setCurrentRow(0)
        rows = pd.DataFrame.from_records(doc.get("slices") or [])
        self.table_view.set_frame(rows[[c for c in TABLE_COLUMNS if c in rows.columns]] if not rows.empty else None)
        self.update_buttons()

    def selected_slice(self) -> dict | None:
        item = self.slice_list.currentItem() if hasattr(self, "slice_list") else None
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def open_reason(self) -> str | None:
        """Why "Open in Group gaps" cannot audit the selected slice (None: it can)."""
        r = self.selected_slice()
        if r is None or self.doc is None:
            return "Choose a slice first."
        continuous = set(((self.doc.get("plan") or {}).get("roles") or {}).get("continuous_attributes") or [])
        binned = [c for c in r.get("definition") or {} if c in continuous]
        if binned:
            return (f"{', '.join(binned)} is cut into bins here; Group gaps audits a continuous attribute by its "
                    "error spread, not as groups, so this slice cannot be opened there.")
        return None

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        if hasattr(self, "open_button"):
            reason = self.open_reason()
            self.open_button.setEnabled(reason is None and self.window_.project is not None)
            self.open_button.setToolTip(OPEN_TIP if reason is None else reason)

    def open_in_group_gaps(self):
        """Audit the selected slice in Group gaps as an intersection of its columns (one vs rest, this audit's
        metric where Group gaps has it, its threshold and task); returns that page's job, or None saying why."""
        from fairdesk.core.audits.groups import METRICS, GroupAuditPlan

        reason = self.open_reason()
        project = self.window_.project
        if project is None:
            self.say(NO_PROJECT, error=True)
            return None
        if reason is not None:
            self.say(reason, error=True)
            return None
        r, doc = self.selected_slice(), self.doc
        info = next((a for a in project.audits() if a.id == self.audit_id), None)
        dataset_id = info.dataset_id if info is not None else None
        tab = self.window_.audit_tab
        if dataset_id is None or tab.dataset_combo.findData(dataset_id) < 0:
            self.say("This slice audit's dataset is not in the project any more: add its predictions file again.",
                     error=True)
            return None
        plan = doc.get("plan") or {}
        roles = ColumnRoles.from_dict(plan.get("roles") or {})
        cols = tuple(r["definition"])
        task = r.get("task")
        tau = float((doc.get("thresholds") or {}).get(str(task), 0.5))
        metric = plan.get("metric")
        group_plan = GroupAuditPlan(
            roles=ColumnRoles(label=roles.label, score=roles.score, task=roles.task,
                              attributes=cols if len(cols) == 1 else (), patient_id=roles.patient_id,
                              split=roles.split),  # the same evaluation rows as the slice audit
            eval_split=str(plan.get("evaluate_on") or "test"),
            metrics=(metric,) if metric in METRICS else METRICS, gap_rule="one-vs-rest", threshold=tau,
            intersections=(cols,) if len(cols) > 1 else (), tasks=(task,) if roles.task else None,
            seed=int(plan.get("seed") or 0), margin=float(plan.get("margin") or 0.05))
        self.window_.show_page(tab)
        job = tab.run_plan(dataset_id, group_plan)
        if job is not None:
            self.say(f"Group gaps is auditing {r.get('description')} as an intersection (threshold {tau:.3f}).")
        return job


def _colour(hex_code: str):
    from PySide6.QtGui import QBrush, QColor

    return QBrush(QColor(hex_code))
