"""The group audit's calibration result tabs (issue 14): "Calibration" (the findings in words, the reliability
diagram and the table), "ROC & PR" (curves per group with the operating point) and "Threshold explorer".

:class:`CalibrationViews` adds the three tabs to a results ``QTabWidget`` and shows a stored
:class:`~fairdesk.core.audits.groups.GroupAuditResult`; the page only calls :meth:`CalibrationViews.set_result`
and connects :attr:`CalibrationViews.audit_requested` (the explorer's chosen threshold) to its re-run.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QSplitter, QTabWidget, QVBoxLayout, QWidget

from fairdesk.core.errors import FairDeskError
from fairdesk.gui.widgets.panel_parts import fill_combo, hrow, size_combos
from fairdesk.gui.widgets.reliability_plot import ReliabilityPlot
from fairdesk.gui.widgets.roc_plot import RocPlot
from fairdesk.gui.widgets.tables import DataFrameView
from fairdesk.gui.widgets.threshold_explorer import ThresholdExplorer

CAL_COLUMNS = ["task", "attribute", "group", "n", "n_positive", "oe_ratio", "oe_ratio_ci_low", "oe_ratio_ci_high",
               "calibration_intercept", "calibration_intercept_ci_low", "calibration_intercept_ci_high",
               "calibration_slope", "calibration_slope_ci_low", "calibration_slope_ci_high", "brier", "ece",
               "p_value", "q_value", "verdict", "reason"]
CAL_HEADERS = {"n_positive": "positives", "oe_ratio": "O/E", "oe_ratio_ci_low": "O/E CI low",
               "oe_ratio_ci_high": "O/E CI high", "calibration_intercept": "intercept",
               "calibration_intercept_ci_low": "intercept CI low", "calibration_intercept_ci_high": "intercept CI high",
               "calibration_slope": "slope", "calibration_slope_ci_low": "slope CI low",
               "calibration_slope_ci_high": "slope CI high", "brier": "Brier", "ece": "ECE", "p_value": "p",
               "q_value": "q (corrected)"}


class _Selector:
    """Task and attribute combos of one tab."""

    def __init__(self, page: QWidget, layout: QVBoxLayout, on_change) -> None:
        self.task, self.attribute = QComboBox(page), QComboBox(page)
        size_combos(self.task, self.attribute, on_change=on_change)
        layout.addLayout(hrow(page, "Task", self.task, "Attribute", self.attribute, stretch=True))

    def fill(self, tasks: list[str], attrs: list[str]) -> None:
        for combo, items in ((self.task, tasks), (self.attribute, attrs)):
            combo.blockSignals(True)
            fill_combo(combo, [(t, t) for t in items])
            combo.blockSignals(False)

    def value(self) -> tuple[str | None, str | None]:
        return self.task.currentData(), self.attribute.currentData()


def _page(parent: QWidget) -> tuple[QWidget, QVBoxLayout]:
    page = QWidget(parent)
    v = QVBoxLayout(page)
    v.setContentsMargins(4, 4, 4, 4)
    return page, v


class CalibrationViews(QObject):
    audit_requested = Signal(float)

    def __init__(self, parent: QWidget, tabs: QTabWidget, suppress_k: int = 11) -> None:
        super().__init__(parent)
        self.k = int(suppress_k)
        self.result = None
        self.project = None
        self.audit_id: int | None = None
        self._rows_cache: dict = {}
        # Calibration: findings in words, reliability diagram, table
        page, v = _page(parent)
        self.cal_select = _Selector(page, v, self.update_calibration)
        self.findings_label = QLabel("", page)
        self.findings_label.setWordWrap(True)
        self.findings_label.setTextFormat(Qt.TextFormat.RichText)
        v.addWidget(self.findings_label)
        split = QSplitter(Qt.Orientation.Vertical, page)
        self.reliability = ReliabilityPlot(page)
        self.cal_view = DataFrameView(page, filterable=False, headers=CAL_HEADERS, placeholder="No calibration.")
        split.addWidget(self.reliability)
        split.addWidget(self.cal_view)
        split.setSizes([420, 160])
        v.addWidget(split, 1)
        tabs.addTab(page, "Reliability")
        # ROC & PR
        page, v = _page(parent)
        self.roc_select = _Selector(page, v, self.update_curves)
        self.roc = RocPlot(page)
        v.addWidget(self.roc, 1)
        self.auc_label = QLabel("", page)
        self.auc_label.setWordWrap(True)
        v.addWidget(self.auc_label)
        tabs.addTab(page, "ROC && PR")
        # Threshold explorer
        page, v = _page(parent)
        self.explorer_select = _Selector(page, v, self.update_explorer)
        self.explorer = ThresholdExplorer(page, suppress_k=self.k)
        self.explorer.audit_requested.connect(self.audit_requested)
        v.addWidget(self.explorer, 1)
        tabs.addTab(page, "Threshold explorer")

    def set_suppress_k(self, k: int) -> None:
        """The user's small-cell k (hover n and table counts below k show as "<k"); redraws the shown audit."""
        self.k = self.explorer.k = int(k)
        if self.result is not None:
            self.set_result(self.result, self.project, self.audit_id)

    # ---- showing a result ----------------------------------------------------------------------------------
    def set_result(self, result, project=None, audit_id: int | None = None) -> None:
        self.result, self.project, self.audit_id = result, project, audit_id
        cal = result.calibration if result is not None else pd.DataFrame()
        if result is None or cal.empty:
            from fairdesk.core.reports.groups import calibration_status

            msg = "No audit shown." if result is None else (calibration_status(result) or "No calibration.")
            for sel in (self.cal_select, self.roc_select, self.explorer_select):
                sel.fill([], [])
            self.findings_label.setText(html.escape(msg))
            self.reliability.clear(msg)
            self.cal_view.set_frame(None)
            self.roc.clear(msg)
            self.auc_label.setText("")
            self.explorer.clear(msg)
            return
        tasks = list(dict.fromkeys(cal["task"].astype(str)))
        attrs = list(dict.fromkeys(cal["attribute"].astype(str)))
        for sel in (self.cal_select, self.roc_select, self.explorer_select):
            sel.fill(tasks, attrs)
        from fairdesk.core.reports.groups import calibration_findings_text

        sentences = calibration_findings_text(result)
        n = len(cal[cal["verdict"].notna()])
        head = (f"<b>{len(sentences)} of {n} groups miscalibrated</b> (verdict “differs” after the correction)"
                if sentences else f"<b>No group's calibration differs</b> after the correction ({n} groups tested; "
                                  "inconclusive is not “calibrated”).")
        self.findings_label.setText(head + "".join(f"<br>• {html.escape(s)}" for s in sentences[:4]))
        self.update_calibration()
        self.update_curves()
        self.update_explorer()

    def _data(self, selector: _Selector) -> pd.DataFrame | None:
        task, attr = selector.value()
        if self.result is None or task is None or attr is None:
            return None
        from fairdesk.core.reports.calibration_figures import curve_data

        return curve_data(self.result, task, attr, suppress_k=self.k)

    def update_calibration(self, *args) -> None:
        data = self._data(self.cal_select)
        if data is None:
            return
        self.reliability.set_data(data)
        task, attr = self.cal_select.value()
        cal = self.result.calibration
        sub = cal[(cal["task"].astype(str) == task) & (cal["attribute"].astype(str) == attr)]
        self.cal_view.set_frame(sub[[c for c in CAL_COLUMNS if c in sub.columns]])

    def update_curves(self, *args) -> None:
        data = self._data(self.roc_select)
        if data is None:
            return
        self.roc.set_data(data)
        task, attr = self.roc_select.value()
        g = self.result.groups
        sub = g[(g["task"].astype(str) == task) & (g["attribute"].astype(str) == attr) & g["tested"].astype(bool)]
        parts = [f"{r.group}: AUROC {r.auroc:.3f}, AUPRC {r.auprc:.3f}" for r in sub.itertuples(index=False)
                 if r.auroc is not None and not pd.isna(r.auroc)]
        self.auc_label.setText("; ".join(parts) + (". Point estimates: this audit computes no interval or test for "
                                                   "AUROC and AUPRC." if parts else ""))

    # ---- threshold explorer --------------------------------------------------------------------------------
    def audited_rows(self, task: str, attr: str):
        """(y, s, group) of the audited rows of ``task`` and ``attr`` (tested groups only) from the dataset stored
        with the audit; None when the project does not hold it."""
        if self.project is None or self.audit_id is None:
            return None
        key = (str(getattr(self.project, "path", "")), self.audit_id)
        if key not in self._rows_cache:
            df = None
            try:
                info = next((a for a in self.project.audits() if a.id == self.audit_id), None)
                if info is not None and info.dataset_id is not None:
                    df = self.project.load_dataset(info.dataset_id)
            except FairDeskError:
                df = None
            self._rows_cache = {key: df}  # one dataset kept
        df = self._rows_cache[key]
        plan = self.result.plan
        roles = plan.roles
        if df is None or roles.label not in df or roles.score not in df:
            return None
        from fairdesk.core.data.schema import INTERSECTION_SEP, as_group_labels, coerce_binary_label

        sub = df
        if roles.split and roles.split in sub:
            sub = sub[sub[roles.split].astype(str) == plan.eval_split]
        if roles.task and roles.task in sub:
            sub = sub[sub[roles.task].astype(str) == task]
        if attr in sub:
            labels = as_group_labels(sub[attr])
        else:
            cols = attr.split(INTERSECTION_SEP)
            if not all(c in sub for c in cols):
                return None
            labels = as_group_labels(sub[cols[0]])
            for c in cols[1:]:
                labels = labels + " & " + as_group_labels(sub[c])
        labels = labels.fillna("(missing)").astype(str)
        g = self.result.groups
        tested = set(g[(g["task"].astype(str) == task) & (g["attribute"].astype(str) == attr)
                       & g["tested"].astype(bool)]["group"].astype(str))
        keep = labels.isin(tested).to_numpy()
        y = coerce_binary_label(sub[roles.label]).to_numpy(float)[keep]
        s = pd.to_numeric(sub[roles.score], errors="coerce").to_numpy(float)[keep]
        ok = ~(np.isnan(y) | np.isnan(s))
        return y[ok].astype(int), s[ok], labels.to_numpy()[keep][ok]

    def update_explorer(self, *args) -> None:
        task, attr = self.explorer_select.value()
        if self.result is None or task is None or attr is None:
            return
        rows = self.audited_rows(task, attr)
        threshold = self.result.thresholds.get(task)
        if rows is not None:
            self.explorer.set_rows(*rows)
        else:
            self.explorer.set_curves(self.result.curves, self.result.groups, task, attr)
        if isinstance(threshold, (int, float)):
            self.explorer.set_threshold(float(threshold))
