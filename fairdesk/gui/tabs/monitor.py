"""Watch a deployed model (audit kind ``monitor``): add a predictions table with a period column to the project's
stream, run the monitor as a job, and read its alarms in words, what changed since the previous period, and every
comparison's gap with its confidence sequence."""
from __future__ import annotations

import pandas as pd
from PySide6.QtWidgets import (QCheckBox, QDoubleSpinBox, QFormLayout, QGroupBox, QListWidget, QTabWidget,
                               QVBoxLayout, QWidget)

from fairdesk.core.errors import FairDeskError
from fairdesk.gui.tabs.base import AuditRun
from fairdesk.gui.tabs.predictions import PredictionsPage
from fairdesk.gui.widgets.panel_parts import note_label, predictions_box
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

METRIC_LABELS = {"recall": "Recall (true positive rate)", "specificity": "Specificity (true negative rate)",
                 "parity": "Positive prediction rate"}
TABLE_COLUMNS = ["task", "attribute", "group", "metric", "period", "n", "rate", "rest_rate", "period_gap", "gap",
                 "cs_low", "cs_high", "since", "alarm", "within_margin"]
TABLE_HEADERS = {"rest_rate": "rest", "period_gap": "gap (this period)", "gap": "gap (monitor)",
                 "cs_low": "sequence low", "cs_high": "sequence high", "within_margin": "within ±margin"}
PERIOD_WORDS = ("period", "month", "week", "quarter", "year", "date")


class MonitorPage(PredictionsPage):
    """Fairness over time: the Monitor page of the Audit tab (audit kind ``monitor``)."""

    TITLE, ATTR = "Monitor", "monitor_page"
    FORM_WIDTH, SPLIT = 440, (470, 880)

    # ---- form --------------------------------------------------------------------------------------------
    def build_form(self) -> QWidget:
        w = QWidget(self)
        v = QVBoxLayout(w)
        data_box, form, self.dataset_combo, self.role_combos = predictions_box(
            w, (("label", "Label"), ("score", "Score"), ("period", "Period"), ("task", "Task"),
                ("patient_id", "Patient id")), self.dataset_changed)
        v.addWidget(data_box)
        attr_box = QGroupBox("Attributes to watch (each group against the rest)", w)
        af = QFormLayout(attr_box)
        self.attributes_list = CheckList(attr_box, max_visible_rows=6)
        self.continuous_list = CheckList(attr_box, max_visible_rows=2)  # (the shared form fills it; not watched)
        self.continuous_list.hide()
        af.addRow("Attributes", self.attributes_list)
        v.addWidget(attr_box)
        box = QGroupBox("Monitor", w)
        f = QFormLayout(box)
        self.threshold_spin = QDoubleSpinBox(box)
        self.threshold_spin.setRange(0.0, 0.999)
        self.threshold_spin.setDecimals(3)
        self.threshold_spin.setSingleStep(0.01)
        self.threshold_spin.setSpecialValueText("choose")
        self.threshold_spin.setToolTip("The score at which the deployed model flags a patient.")
        f.addRow("Threshold", self.threshold_spin)
        self.metric_checks = {}
        for m, text in METRIC_LABELS.items():
            check = QCheckBox(text, box)
            check.setChecked(m in ("recall", "specificity"))
            self.metric_checks[m] = check
            f.addRow("" if len(self.metric_checks) > 1 else "Rates", check)
        self.alpha_spin = self._double(box, 0.001, 0.5, 0.05, "The chance of any false alarm of the whole monitor, "
                                                              "over any number of periods.")
        self.margin_spin = self._double(box, 0.001, 0.999, 0.05, "A gap within ±margin does not matter.")
        f.addRow("α (whole monitor)", self.alpha_spin)
        f.addRow("Margin", self.margin_spin)
        v.addWidget(box)
        v.addWidget(note_label("Each run adds the dataset's periods to this project's stream for the same settings "
                               "(a stored period may only get labels that were missing) and recomputes every "
                               "period.", w))
        v.addStretch(1)
        return w

    @staticmethod
    def _double(parent, low, high, value, tip) -> QDoubleSpinBox:
        spin = QDoubleSpinBox(parent)
        spin.setDecimals(3)
        spin.setRange(low, high)
        spin.setSingleStep(0.01)
        spin.setValue(value)
        spin.setToolTip(tip)
        return spin

    def columns_shown(self, read) -> None:
        combo = self.role_combos["period"]
        if read is None or combo.currentData():
            return
        for c in read.columns:
            if any(word in c.lower() for word in PERIOD_WORDS):
                combo.setCurrentIndex(combo.findData(c))
                break

    def plan(self):
        from fairdesk.core.audits.monitor import MonitorPlan

        roles = {k: c.currentData() for k, c in self.role_combos.items()}
        if not roles["label"] or not roles["score"] or not roles["period"]:
            raise FairDeskError("Choose the label, the score and the period columns.")
        if self.threshold_spin.value() <= 0.0:
            raise FairDeskError("Choose the threshold at which the deployed model flags a patient.")
        metrics = tuple(m for m, c in self.metric_checks.items() if c.isChecked())
        if not metrics:
            raise FairDeskError("Choose at least one rate to watch.")
        return MonitorPlan(label=roles["label"], score=roles["score"], period=roles["period"], task=roles["task"],
                           patient_id=roles["patient_id"], attributes=tuple(self.attributes_list.checked()),
                           threshold=round(float(self.threshold_spin.value()), 6), metrics=metrics,
                           alpha=round(float(self.alpha_spin.value()), 6),
                           margin=round(float(self.margin_spin.value()), 6),
                           suppress_k=int(self.window_.settings.suppress_k))

    def audit_run(self) -> AuditRun:
        dataset_id = self.dataset_combo.currentData()
        if dataset_id is None:
            raise FairDeskError("Add a predictions dataset with a period column to the project first (Dataset tab).")
        plan = self.plan()
        return AuditRun(f"Monitor: {', '.join(plan.attributes)} by {plan.period}", args=(dataset_id, plan),
                        running="Adding the periods to the stream and recomputing the confidence sequences…")

    # ---- results -----------------------------------------------------------------------------------------
    def build_results(self) -> QWidget:
        panel, v = self.results_column()
        tabs = QTabWidget(panel)
        words = QWidget(panel)
        wv = QVBoxLayout(words)
        wv.setContentsMargins(4, 4, 4, 4)
        self.alarm_list = QListWidget(words)
        self.alarm_list.setWordWrap(True)
        wv.addWidget(self.alarm_list, 1)
        wv.addWidget(note_label("An alarm: the gap's anytime-valid confidence sequence excludes 0. However often the "
                                "monitor is read, the chance of any false alarm is at most α for the whole monitor.",
                                words))
        tabs.addTab(words, "Alarms and changes")
        self.table_view = DataFrameView(panel, headers=TABLE_HEADERS, placeholder="No monitor yet.")
        tabs.addTab(self.table_view, "Every period")
        v.addWidget(tabs, 1)
        return panel

    def verdict_counts(self, doc: dict):  # noqa: ARG002 (alarms, not verdicts: said in the findings header)
        return None

    def show_results(self, doc) -> None:
        from fairdesk.core.reports.monitor import alarm_sentences, change_sentences

        self.alarm_list.clear()
        if doc is None:
            self.clear_header("No monitor yet: set one up on the left and press Run audit.", "No monitor selected.")
            self.table_view.set_frame(None)
            return
        k = int(self.window_.settings.suppress_k)
        periods = doc.get("periods") or []
        alarms = doc.get("alarms") or []
        self.result_header.setText(
            f"<b>{len(periods)} periods</b> · {doc.get('comparisons')} comparisons · "
            f"<b>{len(alarms)} alarm{'s' if len(alarms) != 1 else ''}</b> · α = "
            f"{(doc.get('plan') or {}).get('alpha')} for the whole monitor")
        for text in alarm_sentences(doc, k, limit=50) or ["No alarm in any period."]:
            self.alarm_list.addItem(text)
        for text in change_sentences(doc, k):
            self.alarm_list.addItem(text)
        rows = pd.DataFrame.from_records(doc.get("monitor") or [])
        if not rows.empty:
            small = pd.to_numeric(rows["n"], errors="coerce").fillna(0) < k
            rows["n"] = [f"<{k}" if s else str(int(n)) for s, n in zip(small, rows["n"])]
            rows.loc[small, "rate"] = None
        self.table_view.set_frame(rows[[c for c in TABLE_COLUMNS if c in rows.columns]] if not rows.empty else None)
