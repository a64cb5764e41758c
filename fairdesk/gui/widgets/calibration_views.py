"""The group audit's calibration result tabs: "Calibration" (the findings in words, the reliability
diagram and the table), "ROC & PR" (curves per group with the operating point, and the discrimination table: AUROC
and AUPRC per group with intervals, their largest gaps with q and verdict, the operating point) and "Threshold
explorer".

:class:`CalibrationViews` adds the three tabs to a results ``QTabWidget`` and shows a stored
:class:`~fairdesk.core.audits.groups.GroupAuditResult`; the page only calls :meth:`CalibrationViews.set_result`
and connects :attr:`CalibrationViews.audit_requested` (the explorer's chosen threshold) to its re-run.
"""
from __future__ import annotations


import numpy as np
import pandas as pd
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QComboBox, QLabel, QSplitter, QTabWidget, QVBoxLayout, QWidget

from fairdesk.core.escape import html_text
from fairdesk.core.errors import FairDeskError
from fairdesk.gui.widgets.panel_parts import FitLabel, fill_combo, hrow, size_combos
from fairdesk.gui.widgets.reliability_plot import ReliabilityPlot
from fairdesk.gui.widgets.roc_plot import RocPlot
from fairdesk.gui.widgets.tables import ALIGN_RIGHT, DataFrameView, PandasTableModel
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


#: the discrimination table's columns on screen: the PDF's (core.reports.groups.discrimination_table) without the
#: task, which the tab's selector fixes, and with the q and verdict columns named by their measure
DISC_COLUMNS = ["group", "n", "positives", "auroc", "auroc_gap", "auroc_q", "auroc_verdict", "auprc", "auprc_gap",
                "auprc_q", "auprc_verdict", "tpr", "fpr", "ppv"]
DISC_HEADERS = {"group": "Group", "n": "n", "positives": "Positives", "auroc": "AUROC (95% CI)",
                "auroc_gap": "AUROC gap vs group (adjusted CI)", "auroc_q": "q", "auroc_verdict": "Verdict (AUROC)",
                "auprc": "AUPRC (95% CI)", "auprc_gap": "AUPRC gap vs group (adjusted CI)", "auprc_q": "q",
                "auprc_verdict": "Verdict (AUPRC)", "tpr": "TPR", "fpr": "FPR", "ppv": "PPV"}
TABLE_MIN_HEIGHT = 130  # px: the header and about four rows
DISC_TIPS = {"auroc": "Area under the ROC curve in the group (1 = perfect ranking, 0.5 = chance), with its 95% "
                      "interval (DeLong variance, at least Hanley–McNeil's; logit scale).",
             "auroc_gap": "The group's AUROC minus that of the group it differs from most, with the 95% interval of "
                          "the difference (DeLong variances, at least Hanley–McNeil's).",
             "auprc": "Area under the precision–recall curve (average precision) with its 95% interval. "
                      "A score that ranks at random has an AUPRC equal to the group's prevalence.",
             "auprc_gap": "The group's AUPRC minus that of the group it differs from most (tested on the logit "
                          "scale). Part of an AUPRC gap can come from a difference in prevalence alone.",
             "auroc_q": "q: the p-value corrected together with the rate gaps.",
             "auprc_q": "q: the p-value corrected together with the rate gaps.",
             "auroc_verdict": "differs / equivalent within the margin / inconclusive (the data cannot tell).",
             "auprc_verdict": "differs / equivalent within the margin / inconclusive (the data cannot tell).",
             "tpr": "True positive rate (recall) at the audit's threshold.",
             "fpr": "False positive rate at the audit's threshold.", "ppv": "Precision at the audit's threshold."}


def verdict_colour(text: str) -> str | None:
    """The gap plot's colour of a verdict cell ("differs", "equivalent within ±0.05", "inconclusive", "not
    tested")."""
    from fairdesk.core.reports.figures import STATUS_STYLE

    word = str(text).split(" ")[0]
    status = {"differs": "differs", "equivalent": "equivalent", "inconclusive": "inconclusive",
              "not": "not_estimable"}.get(word)
    return STATUS_STYLE[status]["color"] if status else None


class VerdictTableModel(PandasTableModel):
    """A table model whose verdict columns (named ``*verdict``) are coloured as the gap plot colours its markers,
    "differs" in bold; the numbers (shown as text, e.g. "0.870 (0.829 to 0.912)") are right-aligned."""

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if index.isValid() and role == Qt.ItemDataRole.TextAlignmentRole:
            name = self.column_name(index.column())
            if name != "group" and not name.endswith("verdict"):
                return ALIGN_RIGHT
        if index.isValid() and role in (Qt.ItemDataRole.ForegroundRole, Qt.ItemDataRole.FontRole):
            if not self.column_name(index.column()).endswith("verdict"):
                return None
            text = str(self.value(index.row(), index.column()))
            if role == Qt.ItemDataRole.FontRole:
                if not text.startswith("differs"):
                    return None
                font = QFont()
                font.setBold(True)
                return font
            colour = verdict_colour(text)
            return QBrush(QColor(colour)) if colour else None
        return super().data(index, role)


def _verdict_view(parent: QWidget, **kwargs) -> DataFrameView:
    view = DataFrameView(parent, **kwargs)
    model = VerdictTableModel(headers=kwargs.get("headers"), header_tips=kwargs.get("header_tips"), parent=view)
    view.model = model
    view.proxy.setSourceModel(model)
    view.set_frame(None)
    return view


class _Selector:
    """Task and attribute combos of one tab."""

    def __init__(self, page: QWidget, layout: QVBoxLayout, on_change) -> None:
        self.task, self.attribute = QComboBox(page), QComboBox(page)
        size_combos(self.task, self.attribute, chars=12, on_change=on_change)  # names from the data: elided
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


def _stored_rows(project, audit_id: int) -> pd.DataFrame | None:
    """The dataset stored with audit ``audit_id`` (None when the project does not hold it)."""
    try:
        info = next((a for a in project.audits() if a.id == audit_id), None)
        if info is not None and info.dataset_id is not None:
            return project.load_dataset(info.dataset_id)
    except FairDeskError:
        pass
    return None


def discrimination_frame(result, task: str, attr: str, k: int) -> tuple[pd.DataFrame | None, list[str] | None]:
    """The discrimination table of ``result``'s ``task`` and ``attr`` as the PDF prints it (counts below k as
    "<k"), with a tooltip per row saying why a measure was not tested; for an audit stored before AUROC and AUPRC
    were tested, their point estimates (any thread: no widget)."""
    from fairdesk.core.reports.groups import discrimination_table

    disc = getattr(result, "discrimination", None)
    if disc is None or disc.empty:
        g = result.groups
        sub = g[(g["task"].astype(str) == task) & (g["attribute"].astype(str) == attr)
                & g["tested"].astype(bool)]
        if sub.empty:
            return None, None
        return pd.DataFrame({"group": sub["group"].astype(str), "n": sub["n"], "auroc": sub["auroc"],
                             "auprc": sub["auprc"]}), None
    _, rows, notes = discrimination_table(result, attr, k, task=task)
    if not rows:
        return None, None
    frame = pd.DataFrame([r[1:] for r in rows], columns=DISC_COLUMNS)
    why: dict[str, list[str]] = {}
    for _t, _a, group, measures, reason in notes:
        why.setdefault(group, []).append(f"{measures} not tested: {reason}.")
    tips = [" ".join(why.get(g, [])) or f"{g}: hover over a column title for its meaning."
            for g in frame["group"]]
    return frame, tips


def audited_rows(result, df: pd.DataFrame | None, task: str, attr: str):
    """(y, s, group) of the rows of ``df`` (the dataset stored with ``result``) that the audit tested for ``task``
    and ``attr`` (tested groups only); None when the dataset lacks them (any thread: no widget)."""
    if df is None:
        return None
    plan = result.plan
    roles = plan.roles
    if roles.label not in df or roles.score not in df:
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
    g = result.groups
    tested = set(g[(g["task"].astype(str) == task) & (g["attribute"].astype(str) == attr)
                   & g["tested"].astype(bool)]["group"].astype(str))
    keep = labels.isin(tested).to_numpy()
    y = coerce_binary_label(sub[roles.label]).to_numpy(float)[keep]
    s = pd.to_numeric(sub[roles.score], errors="coerce").to_numpy(float)[keep]
    ok = ~(np.isnan(y) | np.isnan(s))
    return y[ok].astype(int), s[ok], labels.to_numpy()[keep][ok]


class CalibrationViews(QObject):
    audit_requested = Signal(float)

    def __init__(self, parent: QWidget, tabs: QTabWidget, suppress_k: int = 11) -> None:
        super().__init__(parent)
        self.k = int(suppress_k)
        self.result = None
        self.project = None
        self.audit_id: int | None = None
        self._rows_cache: dict = {}
        self._findings = None  # findings(result) of the audit shown, from prepare (the view thread)
        #: the curves and the discrimination table of a (task, attribute, k), prepared in the view thread for the
        #: first choice of the selectors (others are computed when chosen)
        self._prepared_views: dict = {}
        # Calibration: findings in words, reliability diagram, table
        page, v = _page(parent)
        self.cal_select = _Selector(page, v, self.update_calibration)
        self.findings_label = FitLabel("", page)  # keeps its lines: the plot below keeps its axes
        self.findings_label.setTextFormat(Qt.TextFormat.RichText)
        v.addWidget(self.findings_label)
        split = QSplitter(Qt.Orientation.Vertical, page)
        self.reliability = ReliabilityPlot(page)
        self.cal_view = DataFrameView(page, filterable=False, headers=CAL_HEADERS, placeholder="No calibration.")
        split.addWidget(self.reliability)
        split.addWidget(self.cal_view)
        # plots and tables keep a readable height (a plot: its axes, 240 px, plus its legend, from its layout — a
        # fixed minimum let the splitter paint the legend over the axis label); on a small screen the panel scrolls
        self.cal_view.setMinimumHeight(TABLE_MIN_HEIGHT)
        split.setSizes([420, 160])
        split.setChildrenCollapsible(False)  # the diagram keeps its axes on a small screen (the page scrolls)
        v.addWidget(split, 1)
        tabs.addTab(page, "Reliability")
        # ROC & PR
        page, v = _page(parent)
        self.roc_select = _Selector(page, v, self.update_curves)
        self.auc_label = FitLabel("", page)  # keeps its lines: the plot below keeps its axes
        self.auc_label.setTextFormat(Qt.TextFormat.RichText)
        v.addWidget(self.auc_label)
        split = QSplitter(Qt.Orientation.Vertical, page)
        self.roc = RocPlot(page)
        self.disc_view = _verdict_view(page, filterable=False, headers=DISC_HEADERS, header_tips=DISC_TIPS,
                                       placeholder="No AUROC or AUPRC for this choice.")
        split.addWidget(self.roc)
        split.addWidget(self.disc_view)
        self.disc_view.setMinimumHeight(TABLE_MIN_HEIGHT)
        split.setSizes([380, 180])
        split.setChildrenCollapsible(False)
        v.addWidget(split, 1)
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

    def prebuild_steps(self):
        """The reliability, ROC and precision–recall plot widgets, one per step, kept hidden until a result fills them
        (``AuditPage.prebuild_steps``)."""
        if self.reliability.plot_widget is None:
            self.reliability.ensure_plot()
            self.reliability.clear(self.reliability.empty_label.text())
            yield
        if self.roc.pr_widget is None:
            yield from self.roc.ensure_plot_steps()
            self.roc.clear(self.roc.empty_label.text())

    # ---- showing a result ----------------------------------------------------------------------------------
    def set_result(self, result, project=None, audit_id: int | None = None) -> None:
        """Show ``result`` (a GroupAuditResult; None: clear) at once (the explorer reads its rows when it needs them)."""
        prepared = {**self.prepare(result), "project": project, "audit_id": audit_id}
        for _ in self.show_prepared(result, prepared):
            pass

    def prepare(self, result, project=None, audit_id: int | None = None) -> dict:
        """What showing ``result`` needs that takes time (any thread; no widget is touched): the stored dataset's
        rows for the threshold explorer, the calibration findings in words, and the curves and discrimination table
        of the selectors' first task and attribute."""
        prepared = {"project": project, "audit_id": audit_id, "rows": None, "sentences": [], "views": {}}
        if result is None or result.calibration.empty:
            return prepared
        from fairdesk.core.reports.calibration_figures import curve_data
        from fairdesk.core.reports.groups import calibration_findings_text

        prepared["sentences"] = calibration_findings_text(result)
        disc = getattr(result, "discrimination", None)
        if disc is not None and not disc.empty:  # counted by the ROC & PR tab's line (see discrimination_text)
            from fairdesk.core.audits.groups import findings

            prepared["findings"] = findings(result)
        cal, k = result.calibration, self.k
        task, attr = str(cal["task"].iloc[0]), str(cal["attribute"].iloc[0])
        prepared["views"] = {("curves", task, attr, k): curve_data(result, task, attr, suppress_k=k),
                             ("discrimination", task, attr, k): discrimination_frame(result, task, attr, k)}
        if project is not None and audit_id is not None:
            prepared["rows"] = (str(getattr(project, "path", "")), audit_id), _stored_rows(project, audit_id)
            prepared["views"][("explorer", task, attr)] = audited_rows(result, prepared["rows"][1], task, attr)
        return prepared

    def show_prepared(self, result, prepared: dict):
        """Fill the tabs from ``result`` and :meth:`prepare` of it, part by part (a generator: each ``yield`` lets
        the window paint)."""
        self.result, self.project, self.audit_id = result, prepared["project"], prepared["audit_id"]
        self._findings = prepared.get("findings")
        self._prepared_views = dict(prepared.get("views") or {})
        if prepared["rows"] is not None:
            key, df = prepared["rows"]
            self._rows_cache = {key: df}  # one dataset kept
        cal = result.calibration if result is not None else pd.DataFrame()
        if result is None or cal.empty:
            from fairdesk.core.reports.groups import calibration_status

            msg = "No audit shown." if result is None else (calibration_status(result) or "No calibration.")
            for sel in (self.cal_select, self.roc_select, self.explorer_select):
                sel.fill([], [])
            self.findings_label.setText(html_text(msg))
            self.reliability.clear(msg)
            self.cal_view.set_frame(None)
            self.roc.clear(msg)
            self.auc_label.setText("")
            self.disc_view.set_frame(None)
            self.explorer.clear(msg)
            return
        tasks = list(dict.fromkeys(cal["task"].astype(str)))
        attrs = list(dict.fromkeys(cal["attribute"].astype(str)))
        for sel in (self.cal_select, self.roc_select, self.explorer_select):
            sel.fill(tasks, attrs)
        sentences = prepared["sentences"]
        n = len(cal[cal["verdict"].notna()])
        head = (f"<b>{len(sentences)} of {n} groups miscalibrated</b> (verdict “differs” after the correction)"
                if sentences else f"<b>No group's calibration differs</b> after the correction ({n} groups tested; "
                                  "inconclusive is not “calibrated”).")
        self.findings_label.setText(head + "".join(f"<br>• {html_text(s)}" for s in sentences[:4]))
        yield
        self.reliability.ensure_plot()  # (each plot widget created in a turn of its own)
        yield
        yield from self._calibration_parts()
        yield
        yield from self._curves_parts()
        yield
        self.update_explorer()

    def _data(self, selector: _Selector) -> pd.DataFrame | None:
        task, attr = selector.value()
        if self.result is None or task is None or attr is None:
            return None
        ready = self._prepared_views.get(("curves", task, attr, self.k))
        if ready is not None:
            return ready
        from fairdesk.core.reports.calibration_figures import curve_data

        return curve_data(self.result, task, attr, suppress_k=self.k)

    def update_calibration(self, *args) -> None:
        for _ in self._calibration_parts():
            pass

    def _calibration_parts(self):
        """The calibration tab in parts (the plot one group at a time; the table), a ``yield`` between them."""
        data = self._data(self.cal_select)
        if data is None:
            return
        yield from self.reliability.set_data_steps(data)
        yield
        task, attr = self.cal_select.value()
        cal = self.result.calibration
        sub = cal[(cal["task"].astype(str) == task) & (cal["attribute"].astype(str) == attr)]
        self.cal_view.set_frame(sub[[c for c in CAL_COLUMNS if c in sub.columns]])

    def update_curves(self, *args) -> None:
        for _ in self._curves_parts():
            pass

    def _curves_parts(self):
        """The ROC & PR tab in two parts (the curves; the table and its line), a ``yield`` between them."""
        data = self._data(self.roc_select)
        if data is None:
            return
        if self.roc.pr_widget is None:
            for _ in self.roc.ensure_plot_steps():
                yield
            yield
        yield from self.roc.set_data_steps(data)
        yield
        task, attr = self.roc_select.value()
        frame, tips = self.discrimination_frame(task, attr)
        self.disc_view.set_frame(frame, tips)
        self.auc_label.setText(self.discrimination_text(task, attr, frame))
        disc = getattr(self.result, "discrimination", None)
        if disc is not None and not disc.empty:
            from fairdesk.core.reports.groups import bootstrap_intervals, discrimination_method_text

            self.auc_label.setToolTip(discrimination_method_text(self.result.plan, bootstrap_intervals(self.result)))

    def discrimination_frame(self, task: str, attr: str) -> tuple[pd.DataFrame | None, list[str] | None]:
        """:func:`discrimination_frame` of the shown audit (prepared in the view thread for the first choice)."""
        ready = self._prepared_views.get(("discrimination", task, attr, self.k))
        return ready if ready is not None else discrimination_frame(self.result, task, attr, self.k)

    def discrimination_text(self, task: str, attr: str, frame: pd.DataFrame | None) -> str:
        """The line above the ROC & PR tab: what the table shows and how many AUROC / AUPRC comparisons differ."""
        disc = getattr(self.result, "discrimination", None)
        if disc is None or disc.empty:
            return ("AUROC and AUPRC per group as point estimates: this audit was stored before FairDesk tested "
                    "them (re-run it for intervals and verdicts)." if frame is not None else "")
        from fairdesk.core.audits.groups import findings

        f = self._findings if self._findings is not None else findings(self.result)
        f = f[f["metric"].isin(["auroc", "auprc"]) & (f["task"].astype(str) == task)
              & (f["attribute"].astype(str) == attr)] if not f.empty else f
        n = int(f["verdict"].notna().sum()) if not f.empty else 0
        counts = {v: int((f["verdict"] == v).sum()) if not f.empty else 0
                  for v in ("differs", "equivalent", "inconclusive")}
        head = (f"<b>{counts['differs']} of {n} AUROC/AUPRC comparisons differ</b> ({counts['equivalent']} "
                f"equivalent, {counts['inconclusive']} inconclusive)" if n else
                "<b>No AUROC/AUPRC comparison could be tested</b> for this choice (too few cases)")
        return (head + "; each group against the group it differs from most (table below the curves; hover "
                "here for the method). AUPRC moves with prevalence: a score that ranks at random has an AUPRC "
                "equal to it.")

    # ---- threshold explorer --------------------------------------------------------------------------------
    def audited_rows(self, task: str, attr: str):
        """:func:`audited_rows` of the shown audit from the dataset stored with it; None when the project does not
        hold it."""
        if self.project is None or self.audit_id is None:
            return None
        key = (str(getattr(self.project, "path", "")), self.audit_id)
        if key not in self._rows_cache:
            self._rows_cache = {key: _stored_rows(self.project, self.audit_id)}  # one dataset kept
        return audited_rows(self.result, self._rows_cache[key], task, attr)

    def update_explorer(self, *args) -> None:
        task, attr = self.explorer_select.value()
        if self.result is None or task is None or attr is None:
            return
        key = ("explorer", task, attr)
        rows = self._prepared_views.pop(key) if key in self._prepared_views else self.audited_rows(task, attr)
        threshold = self.result.thresholds.get(task)
        if rows is not None:
            self.explorer.set_rows(*rows)
        else:
            self.explorer.set_curves(self.result.curves, self.result.groups, task, attr)
        if isinstance(threshold, (int, float)):
            self.explorer.set_threshold(float(threshold))
