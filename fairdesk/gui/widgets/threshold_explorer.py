"""Threshold explorer: a slider and a typed value over thresholds showing, live, each group's TPR, FPR and PPV and
the gaps between groups.

The counts come from :class:`fairdesk.core.stats.operating.GroupRates` built once from the audited rows (label,
score and group of the dataset stored with the audit): one ``searchsorted`` per update, fast enough for every
slider step. Without the dataset, the stored ROC points give an approximation (said on screen). Equal-opportunity
and equalised-odds thresholds per group are shown for information only; "Audit at this threshold" emits
:attr:`ThresholdExplorer.audit_requested` so that the page runs the shown audit again at that threshold.
"""
from __future__ import annotations

import math

import pandas as pd
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QDoubleSpinBox, QHBoxLayout, QHeaderView, QLabel, QPushButton, QSlider, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from fairdesk.core.reports.figures import fmt_count
from fairdesk.core.stats.operating import GroupRates, rates_from_curves

STEPS = 1000  # slider positions: thresholds 0.001 … 0.999
RATE_COLUMNS = ("Group", "n", "Positives", "TPR\n(recall)", "FPR", "PPV\n(precision)", "Equal-opportunity\nthreshold",
                "Equalised-odds\nthreshold")


def _f(value, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


class ThresholdExplorer(QWidget):
    audit_requested = Signal(float)

    def __init__(self, parent=None, suppress_k: int = 1) -> None:
        super().__init__(parent)
        self.k = int(suppress_k)
        self.rates_source: GroupRates | None = None
        self._fallback: tuple | None = None  # (curves, groups, task, attribute) when the dataset is not there
        self.current: pd.DataFrame = pd.DataFrame()
        v = QVBoxLayout(self)
        v.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        row.addWidget(QLabel("Threshold", self))
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(1, STEPS - 1)
        self.slider.setValue(STEPS // 2)
        self.spin = QDoubleSpinBox(self)
        self.spin.setRange(0.001, 0.999)
        self.spin.setDecimals(3)
        self.spin.setSingleStep(0.01)
        self.spin.setValue(0.5)
        self.audit_button = QPushButton("Audit at this threshold", self)
        self.audit_button.setToolTip("Runs the shown audit again at this threshold: same dataset and settings, "
                                     "fixed threshold (the form on the left shows them); the new audit joins the "
                                     "list when done.")
        row.addWidget(self.slider, 1)
        row.addWidget(self.spin)
        row.addWidget(self.audit_button)
        v.addLayout(row)
        self.source_label = QLabel("", self)
        self.source_label.setWordWrap(True)
        v.addWidget(self.source_label)
        self.table = QTableWidget(0, len(RATE_COLUMNS), self)
        self.table.setHorizontalHeaderLabels(list(RATE_COLUMNS))
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        v.addWidget(self.table, 1)
        self.gaps_label = QLabel("", self)
        self.gaps_label.setWordWrap(True)
        self.gaps_label.setTextFormat(Qt.TextFormat.RichText)
        v.addWidget(self.gaps_label)
        note = QLabel("Equal-opportunity threshold: the group's threshold that would give it the overall true positive "
                      "rate at the chosen threshold; equalised-odds threshold: the group's threshold closest to the "
                      "overall true and false positive rates. Shown for information only: FairDesk audits a model, "
                      "it does not change its thresholds.", self)
        note.setWordWrap(True)
        note.setStyleSheet("color: palette(mid);")
        v.addWidget(note)
        self.slider.valueChanged.connect(lambda pos: self.set_threshold(pos / STEPS))
        self.spin.valueChanged.connect(self.set_threshold)
        self.audit_button.clicked.connect(lambda: self.audit_requested.emit(self.threshold()))
        self.clear("No audit shown.")

    # ---- sources -------------------------------------------------------------------------------------------
    def clear(self, message: str) -> None:
        self.rates_source, self._fallback = None, None
        self.current = pd.DataFrame()
        self.table.setRowCount(0)
        self.source_label.setText(message)
        self.gaps_label.setText("")
        self.audit_button.setEnabled(False)

    def set_rows(self, y, s, groups, what: str = "") -> None:
        """Rows of the audited task and attribute (labels 0/1, scores, group names), sorted once."""
        self.rates_source, self._fallback = GroupRates(y, s, groups), None
        self.source_label.setText(what or f"Computed from {fmt_count(len(y), self.k)} audited rows.")
        self.audit_button.setEnabled(True)
        self.update_view()

    def set_curves(self, curves: pd.DataFrame, groups: pd.DataFrame, task: str, attribute: str) -> None:
        """No dataset: approximate from the stored ROC points (≤ 200 per group)."""
        self.rates_source, self._fallback = None, (curves, groups, task, attribute)
        self.source_label.setText("The audited dataset is not in the project: rates are read off the stored ROC "
                                  "points (at most 200 per group), so they are approximate.")
        self.audit_button.setEnabled(True)
        self.update_view()

    # ---- threshold -----------------------------------------------------------------------------------------
    def threshold(self) -> float:
        return float(self.spin.value())

    def set_threshold(self, value: float) -> None:
        value = min(max(float(value), 0.001), 0.999)
        for widget, v in ((self.spin, value), (self.slider, int(round(value * STEPS)))):
            widget.blockSignals(True)
            widget.setValue(v)
            widget.blockSignals(False)
        self.update_view()

    def update_view(self) -> None:
        t = self.threshold()
        if self.rates_source is not None:
            rates = self.rates_source.rates(t)
            fair = self.rates_source.fair_thresholds(t).set_index("group")
        elif self._fallback is not None:
            rates = rates_from_curves(*self._fallback, t)
            fair = pd.DataFrame(columns=["equal_opportunity", "equalised_odds"])
        else:
            return
        self.current = rates
        self.table.setRowCount(len(rates))
        for i, r in enumerate(rates.itertuples(index=False)):
            eo = fair.loc[r.group, "equal_opportunity"] if r.group in fair.index else math.nan
            eodds = fair.loc[r.group, "equalised_odds"] if r.group in fair.index else math.nan
            cells = (str(r.group), fmt_count(r.n, self.k), fmt_count(r.n_positive, self.k), _f(r.tpr), _f(r.fpr),
                     _f(r.ppv), _f(eo), _f(eodds))
            for j, text in enumerate(cells):
                item = self.table.item(i, j)
                if item is None:
                    item = QTableWidgetItem()
                    if j:
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.table.setItem(i, j, item)
                item.setText(text)
        g = GroupRates.gaps(rates)
        self.gaps_label.setText(
            f"At threshold <b>{t:.3f}</b>, gaps between groups (highest − lowest): TPR <b>{_f(g['tpr'])}</b> · "
            f"FPR <b>{_f(g['fpr'])}</b> · PPV <b>{_f(g['ppv'])}</b> · equalised odds (larger of TPR and FPR gaps) "
            f"<b>{_f(g['equalised_odds'])}</b>. Point estimates, untested: press “Audit at this threshold” for "
            "intervals and verdicts.")
