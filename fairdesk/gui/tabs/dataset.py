"""Dataset tab: open a CSV/Parquet file, preview it, map columns to roles, validate, add to the project."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QSplitter, QTextBrowser, QVBoxLayout, QWidget)

from fairdesk.core.escape import html_text
from fairdesk.core.data.roles import attribute_candidates, guess_roles
from fairdesk.core.data.schema import ColumnRoles, ValidationReport
from fairdesk.core.kinds import DATASET_KINDS
from fairdesk.gui.widgets.panel_parts import scroll_area, size_combos
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

NONE = "(none)"
NO_PROJECT_HINT = "Open or create a project to add this table (File menu, or Create project… here)."
# dataset kinds from the registry (fairdesk.core.kinds is import-light)
PREDICTIONS, FEATURES = DATASET_KINDS["predictions"].name, DATASET_KINDS["features"].name
KINDS = {PREDICTIONS: "Predictions (label + score per row)", FEATURES: "Features (to train a model on)"}

class DatasetTab(QWidget):
    """Load → preview → map roles → validate → add to the project."""

    ROLE_FIELDS = (("label", "Label (true outcome, 0/1)"), ("score", "Score (probability in [0, 1])"),
                   ("task", "Task (long format)"), ("patient_id", "Patient id"), ("sample_id", "Sample id"),
                   ("split", "Split (train/val/test)"))

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window_ = window
        self.df: pd.DataFrame | None = None
        self.path: Path | None = None
        self.report: ValidationReport | None = None
        self.load_job = None
        self.add_job = None
        self._validate_timer = QTimer(self)
        self._validate_timer.setSingleShot(True)
        self._validate_timer.setInterval(250)
        self._validate_timer.timeout.connect(self.validate_now)

        # top bar: file, kind, name
        self.open_button = QPushButton("Open CSV or Parquet…", self)
        self.open_button.clicked.connect(lambda: self.open_file())
        self.path_label = QLabel("No file loaded.", self)
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.kind_combo = QComboBox(self)
        for key, text in KINDS.items():
            self.kind_combo.addItem(text, key)
        self.kind_combo.currentIndexChanged.connect(self._kind_changed)
        self.name_edit = QLineEdit(self)
        self.name_edit.setPlaceholderText("Name in the project")
        top = QHBoxLayout()
        top.addWidget(self.open_button)
        top.addWidget(self.path_label, 1)
        top.addWidget(QLabel("Kind:", self))
        top.addWidget(self.kind_combo)

        # roles
        self.roles_box = QGroupBox("Column roles", self)
        form = QFormLayout(self.roles_box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.role_combos: dict[str, QComboBox] = {}
        for key, text in self.ROLE_FIELDS:
            combo = QComboBox(self.roles_box)
            size_combos(combo, chars=14, on_change=self._roles_changed)
            self.role_combos[key] = combo
            form.addRow(text, combo)
        self.label_combo = self.role_combos["label"]
        self.score_combo = self.role_combos["score"]
        self.task_combo = self.role_combos["task"]
        self.attributes_list = CheckList(self.roles_box, max_visible_rows=4)
        self.attributes_list.changed.connect(self._roles_changed)
        self.continuous_list = CheckList(self.roles_box, max_visible_rows=3)
        self.continuous_list.changed.connect(self._roles_changed)
        form.addRow("Protected attributes\n(categorical)", self.attributes_list)
        form.addRow("Protected attributes\n(continuous, e.g. age)", self.continuous_list)

        self.validation = QTextBrowser(self)
        self.validation.setOpenLinks(False)
        self.validation.setMinimumHeight(120)
        valid_box = QGroupBox("Validation report", self)
        vl = QVBoxLayout(valid_box)
        vl.addWidget(self.validation)

        self.add_button = QPushButton("Add to project", self)
        self.add_button.setEnabled(False)
        self.add_button.setDefault(True)
        self.add_button.clicked.connect(lambda: self.add_to_project())
        add_row = QHBoxLayout()
        add_row.addWidget(QLabel("Name:", self))
        add_row.addWidget(self.name_edit, 1)
        add_row.addWidget(self.add_button)
        # with no project open: say in place why "Add to project" is disabled, and offer to create one
        self.no_project_label = QLabel(NO_PROJECT_HINT, self)
        self.no_project_label.setWordWrap(True)
        self.no_project_label.setStyleSheet("color: #8a5a00;")
        self.create_project_button = QPushButton("Create project…", self)
        self.create_project_button.setToolTip("Create a new project file; the table can then be added to it.")
        self.create_project_button.clicked.connect(lambda: self.create_project())
        hint_row = QHBoxLayout()
        hint_row.addWidget(self.no_project_label, 1)
        hint_row.addWidget(self.create_project_button, 0, Qt.AlignmentFlag.AlignTop)

        left = QWidget(self)
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.roles_box)
        ll.addWidget(valid_box, 1)

        # preview + project datasets
        self.preview = DataFrameView(self, lazy=True, placeholder="Open a CSV or Parquet file to see its first rows.")
        self.preview_info = QLabel("", self)
        preview_box = QGroupBox("Preview", self)
        pl = QVBoxLayout(preview_box)
        pl.addWidget(self.preview_info)
        pl.addWidget(self.preview, 1)
        self.datasets_view = DataFrameView(self, filterable=False,
                                           placeholder="Datasets added to the project appear here.")
        datasets_box = QGroupBox("Datasets in the project", self)
        dl = QVBoxLayout(datasets_box)
        dl.addWidget(self.datasets_view)
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(preview_box)
        right.addWidget(datasets_box)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 1)

        split = QSplitter(Qt.Orientation.Horizontal, self)
        # the roles form scrolls (vertically only) rather than force the window taller than a 768-pixel screen;
        # "Add to project" and the no-project hint stay in view below it
        left_column = QWidget(self)
        lc = QVBoxLayout(left_column)
        lc.setContentsMargins(0, 0, 0, 0)
        lc.addWidget(scroll_area(self, left), 1)
        lc.addLayout(add_row)
        lc.addLayout(hint_row)
        split.addWidget(left_column)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([480, 800])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        self._set_message("Open a CSV or Parquet file of predictions (one row per sample and task, with the true "
                          "label, the model's score and the protected attributes) or of features to train on.")
        window.refresh_on_project(self, self.refresh_project)
        self._kind_changed()
        self.update_add_button()

    # ---- loading -------------------------------------------------------------------------------------------
    def open_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a table", self.window_.settings.last_dir(),
                                              "Tables (*.csv *.tsv *.txt *.parquet *.pq);;All files (*)")
        if path:
            self.window_.settings.set_last_dir(path)
            self.load_file(path)

    def load_file(self, path: str | Path):
        """Read the file in a job; the preview and roles fill when it is done."""
        path = Path(path)
        self.reset_form()
        self.path_label.setText(f"Loading {path.name}…")

        def load(progress, cancel):
            from fairdesk.core.data.loaders import load_table

            progress(0.1, f"Reading {path.name}")
            df = load_table(path)
            cancel.check()
            return df

        self.load_job = self.window_.run_job(f"Load {path.name}", load,
                                             on_done=lambda job: self.set_table(job.result, path),
                                             on_fail=lambda job: self._load_failed(job, path))
        return self.load_job

    def reset_form(self) -> None:
        """Forget the table shown: no preview, no roles, no validation (a new file starts from a clean form)."""
        self._validate_timer.stop()
        self.df, self.path, self.report = None, None, None
        self.preview.set_frame(None)
        self.preview_info.setText("")
        self.path_label.setText("No file loaded.")
        self.name_edit.clear()
        for combo in self.role_combos.values():
            combo.blockSignals(True)
            combo.clear()
            combo.blockSignals(False)
        self.attributes_list.set_items([])
        self.continuous_list.set_items([])
        self._set_message("")
        self.update_add_button()

    def _load_failed(self, job, path: Path) -> None:
        self.reset_form()
        self.path_label.setText(f"{path.name}: could not be loaded.")
        if job.state.value == "cancelled":
            self._set_message("Loading was cancelled.", level="info")
        else:
            self._set_message(job.error or "The file could not be loaded.", level="error")

    def set_table(self, df: pd.DataFrame, path: str | Path | None = None) -> None:
        """Show a loaded table: preview, guessed roles, validation."""
        self.df = df
        self.path = Path(path) if path else None
        self.path_label.setText(str(self.path) if self.path else "(table)")
        self.name_edit.setText(self.path.name if self.path else "table")
        self.preview.set_frame(df)
        self.preview_info.setText(f"{len(df):,} rows × {df.shape[1]} columns (scroll to load more rows)")
        guess = guess_roles(df)
        features_like = guess["score"] is None and any(str(c).startswith("y_") for c in df.columns)
        cols = [str(c) for c in df.columns]
        for key, combo in self.role_combos.items():
            combo.blockSignals(True)
            combo.clear()
            if key not in ("label", "score"):
                combo.addItem(NONE, None)
            for c in cols:
                combo.addItem(c, c)
            value = guess.get(key)
            if value is not None:
                combo.setCurrentIndex(combo.findData(value))
            elif key in ("label", "score"):
                combo.setCurrentIndex(-1)
            combo.blockSignals(False)
        exclude = {v for k, v in guess.items() if k not in ("attributes", "continuous_attributes") and v}
        cat, cont = attribute_candidates(df, exclude)
        self.attributes_list.set_items(list(dict.fromkeys(cat + guess["attributes"])), guess["attributes"])
        self.continuous_list.set_items(list(dict.fromkeys(cont + guess["continuous_attributes"])),
                                       guess["continuous_attributes"])
        self.kind_combo.setCurrentIndex(self.kind_combo.findData(FEATURES if features_like else PREDICTIONS))
        self.validate_now()

    # ---- roles and validation ------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.kind_combo.currentData()

    def set_role(self, role: str, column: str | None) -> None:
        combo = self.role_combos[role]
        combo.setCurrentIndex(combo.findData(column) if column else combo.findData(None))

    def roles(self) -> ColumnRoles | None:
        label = self.label_combo.currentData()
        score = self.score_combo.currentData()
        if not label or not score:
            return None
        return ColumnRoles(label=label, score=score, task=self.task_combo.currentData(),
                           attributes=tuple(self.attributes_list.checked()),
                           continuous_attributes=tuple(self.continuous_list.checked()),
                           patient_id=self.role_combos["patient_id"].currentData(),
                           sample_id=self.role_combos["sample_id"].currentData(),
                           split=self.role_combos["split"].currentData())

    def _kind_changed(self, *args) -> None:
        self.roles_box.setEnabled(self.kind == PREDICTIONS)
        self._roles_changed()

    def _roles_changed(self, *args) -> None:
        self._validate_timer.start()

    def validate_now(self) -> ValidationReport | None:
        """Check the table against the chosen roles and list every problem in the panel."""
        self._validate_timer.stop()
        self.report = None
        if self.df is None:
            self.update_add_button(False)
            return None
        df = self.df
        if self.kind == FEATURES:
            feats = [c for c in df.columns if str(c).startswith("f_")]
            labels = [c for c in df.columns if str(c).startswith("y_")]
            items = [("info", f"Features table: {len(df):,} rows, {len(feats)} feature columns (f_*) and "
                              f"{len(labels)} label columns (y_*). Train models on it in the Model tab.")]
            if not labels:
                items.append(("warning", "No label columns named y_<task> were found; choose the label columns "
                                         "by hand in the Model tab."))
            self._show_items(items)
            self.update_add_button(True)
            return None
        roles = self.roles()
        if roles is None:
            self._show_items([("error", "Choose the label column (the true outcome, 0/1) and the score column "
                                        "(the model's probability).")])
            self.update_add_button(False)
            return None
        from fairdesk.core.data.schema import validate

        report = validate(df, roles, self.window_.settings.min_group_size)
        if not roles.attributes and not roles.continuous_attributes:
            report.add("warning", "No protected attribute is checked yet; an audit needs at least one.")
        self.report = report
        items = [(i.level, i.message) for i in report.issues]
        if report.ok:
            items.insert(0, ("ok", f"Ready: {len(df):,} rows can be audited"
                                   + (f" ({len(report.warnings)} warning(s) below)." if report.warnings else ".")))
        self._show_items(items)
        self.update_add_button(report.ok)
        return report

    def update_add_button(self, table_ok: bool | None = None) -> None:
        """Enable "Add to project" for a valid table in an open project; with no project, say so in place (a
        tooltip and a visible line with "Create project…") when the table itself is fine."""
        if table_ok is None:
            table_ok = self.df is not None and (self.kind == FEATURES or (self.report is not None and self.report.ok))
        has_project = self.window_.project is not None
        self.add_button.setEnabled(bool(table_ok) and has_project)
        blocked = bool(table_ok) and not has_project
        self.add_button.setToolTip(NO_PROJECT_HINT if blocked else
                                   "Store the table in the project (it is copied in; the file is not needed after).")
        self.no_project_label.setVisible(blocked)
        self.create_project_button.setVisible(blocked)

    def create_project(self):
        """Create a project (the window's New project dialog); the table shown can be added to it at once."""
        project = self.window_.new_project()
        self.update_add_button()
        return project

    def _show_items(self, items: list[tuple[str, str]]) -> None:
        colours = {"error": "#B00020", "warning": "#8a5a00", "ok": "#1b6e20", "info": "#333333"}
        names = {"error": "Problem", "warning": "Warning", "ok": "OK", "info": "Note"}
        parts = []
        for level, message in items:
            text = html_text(message).replace("\n", "<br>")
            parts.append(f"<li style='margin-bottom:6px'><b style='color:{colours[level]}'>{names[level]}:</b> "
                         f"{text}</li>")
        self.validation.setHtml(f"<ul style='margin-left:-20px'>{''.join(parts)}</ul>")
        self._items = items

    def _set_message(self, message: str, level: str = "info") -> None:
        self._show_items([(level, message)] if message else [])

    def validation_text(self) -> str:
        return self.validation.toPlainText()

    # ---- project -------------------------------------------------------------------------------------------
    def add_to_project(self):
        """Store the file in the project (a job: re-read, validate, hash, write in one transaction)."""
        if self.df is None or self.path is None:
            return None
        project = self.window_.require_project()
        if project is None:
            return None
        kind = self.kind
        roles = self.roles() if kind == PREDICTIONS else None
        if kind == PREDICTIONS and (roles is None or (self.report is not None and not self.report.ok)):
            return None
        name = self.name_edit.text().strip() or self.path.name
        path, project_path = self.path, project.path

        def store(progress, cancel):
            from fairdesk.core.data.tables import import_table

            return import_table(project_path, path, kind=kind, roles=roles, name=name, progress=progress,
                                cancel=cancel)

        def done(job) -> None:
            self.window_.statusBar().showMessage(f"Added '{name}' to the project (dataset {job.result}).", 8000)
            self.window_.notify_project_changed(self)

        def failed(job) -> None:
            self._set_message(job.error or "The dataset could not be added.", level="error")

        self.add_job = self.window_.run_job(f"Add {name} to the project", store, on_done=done, on_fail=failed)
        return self.add_job

    def refresh_project(self) -> None:
        project = self.window_.project
        if project is None:
            self.datasets_view.set_frame(None)
            self.update_add_button()
            return
        rows = [{"id": d.id, "name": d.name, "kind": d.kind, "rows": d.n_rows, "columns": len(d.columns),
                 "added": d.created.replace("T", " ")[:16],
                 "origin": ("model " + str(d.origin.get("model_kind", "")) if d.origin else "imported")}
                for d in project.datasets()]
        self.datasets_view.set_frame(pd.DataFrame(rows) if rows else None)
        if self.df is not None:
            self.validate_now()
        else:
            self.update_add_button()
