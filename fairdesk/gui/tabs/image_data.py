"""Dataset tab — Images: a folder of images plus a CSV (CheXpert / MIMIC-CXR style or mapped by hand).

Open the CSV (its header is read here; CheXpert and MIMIC-CXR columns are recognised and pre-mapped), choose the
image folder, map the roles (path, disease labels, sensitive attributes, patient id), and import as a job
(:func:`fairdesk.jobs.images.import_image_dataset`: every image is opened once, unreadable files are listed
and left out, patient-disjoint train/validation/test splits). A stored image dataset is re-opened as a job and
shown as a lazy thumbnail grid with its split counts and the unreadable files.

This module is cheap to import (no pyqtgraph, no torch): heavy work happens in jobs.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QTabWidget, QVBoxLayout, QWidget)

from fairdesk.core.kinds import DATASET_KINDS, MODEL_KINDS
from fairdesk.gui.tabs.base import ViewRead
from fairdesk.gui.widgets.panel_parts import (fill_combo, hrow, progress_bar, push_button, run_row, scroll_area,
                                              show_progress, split_page, wrapped_label)
from fairdesk.gui.widgets.tables import CheckList, DataFrameView
from fairdesk.gui.widgets.thumbnails import ThumbnailGrid

NONE = "(none)"
FROM_PATH = "(from the path: patientNNNNN)"
STYLE_TEXT = {"chexpert": "CheXpert style recognised: paths, findings and attributes are mapped.",
              "mimic-cxr": "MIMIC-CXR style recognised: paths are built from subject / study / dicom ids.",
              "custom": "Map the columns by hand."}
# kind strings from the registry (fairdesk.core.kinds is import-light)
IMAGES_KIND = DATASET_KINDS["images"].name
CLASSIFIER_KIND = MODEL_KINDS["image_classifier"].name
GENERATOR_KIND = MODEL_KINDS["image_generator"].name


# ---- helpers shared by the three image panels ------------------------------------------------------------------


def model_folder(project_path: str | Path, kind: str) -> Path:
    """A new folder for a model trained in the GUI, next to the project: ``<project>-models/<kind>-<time>``."""
    project_path = Path(project_path)
    base = project_path.with_name(project_path.stem + "-models")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = base / f"{kind}-{stamp}"
    i = 1
    while folder.exists():
        i += 1
        folder = base / f"{kind}-{stamp}-{i}"
    return folder


def image_datasets(project) -> list:
    return [d for d in project.datasets() if d.kind == IMAGES_KIND] if project is not None else []


def models_of(project, kind: str) -> list:
    return [m for m in project.models() if m.kind == kind] if project is not None else []


_TABLES: dict = {}


def _table_key(project, dataset_id: int) -> tuple:
    return str(project.path), int(dataset_id), project.dataset(dataset_id).sha256


def stored_table(project, dataset_id: int) -> pd.DataFrame:
    """A stored image table, cached by (project, id, hash): the pages refresh on every project change, and a
    stored dataset never changes."""
    key = _table_key(project, dataset_id)
    if key not in _TABLES:
        if len(_TABLES) >= 4:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = project.load_dataset(dataset_id)
    return _TABLES[key]


class TableRead(ViewRead):
    """A page's read of the image table it has chosen (``dataset()``: its id), never on the Qt thread: :meth:`choose`
    calls ``show(table)`` at once when that table was read before (the cache of :func:`stored_table`), else
    ``show(None)`` now and ``show(table)`` once the view runner has read it, if it is still the one chosen."""

    def __init__(self, window, dataset, show, on_fail) -> None:
        super().__init__(window, self._read, on_fail)
        self.dataset, self.show = dataset, show

    def choose(self, project) -> None:
        self.cancel()
        dataset_id, table = self.dataset(), None
        if project is not None and dataset_id is not None:
            table = _TABLES.get(_table_key(project, dataset_id))
            if table is None:
                self.start(f"Read image dataset #{dataset_id}",
                           lambda: (dataset_id, stored_table(project, dataset_id)))
        self.show(table)

    def _read(self, result) -> None:
        dataset_id, table = result
        if dataset_id == self.dataset():
            self.show(table)


def split_counts(table: pd.DataFrame, roles: dict) -> pd.DataFrame:
    """Per split: images, patients, positives per label and counts per attribute value."""
    rows = []
    splits = [s for s in ("train", "val", "test") if "split" in table and (table["split"] == s).any()]
    for s in splits + ["all"]:
        part = table if s == "all" else table[table["split"] == s]
        row = {"split": s, "images": int(len(part)),
               "patients": int(part["_patient"].nunique()) if "_patient" in part else None}
        for c in roles.get("labels") or ():
            if c in part:
                v = pd.to_numeric(part[c], errors="coerce")
                row[f"{c} = 1"] = int((v == 1).sum())
        for c in roles.get("attributes") or ():
            if c in part:
                for value, n in part[c].astype(str).value_counts().sort_index().items():
                    row[f"{c} = {value}"] = int(n)
        rows.append(row)
    return pd.DataFrame(rows)


class ImageDataPanel(QWidget):
    """The "Images" page of the Dataset tab."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window_ = window
        self.header: pd.DataFrame | None = None
        self.style = "custom"
        self.import_job = None
        self.open_job = None
        self.dataset = None          # the ImageDataset shown

        # ---- import form
        self.csv_edit = QLineEdit(self)
        self.csv_edit.setPlaceholderText("CSV, one row per image")
        self.csv_edit.setToolTip("The CSV describing the images (one row per image).")
        self.csv_edit.editingFinished.connect(lambda: self.read_header(self.csv_edit.text()))
        self.csv_button = QPushButton("Browse…", self)
        self.csv_button.clicked.connect(self.choose_csv)
        self.dir_edit = QLineEdit(self)
        self.dir_edit.setPlaceholderText("Folder the image paths are relative to")
        self.dir_edit.textChanged.connect(self._update_buttons)
        self.dir_button = QPushButton("Browse…", self)
        self.dir_button.clicked.connect(self.choose_folder)
        self.style_label = QLabel("", self)
        self.style_label.setWordWrap(True)
        self.path_combo = QComboBox(self)
        self.path_combo.currentIndexChanged.connect(self._update_buttons)
        self.labels_list = CheckList(self, max_visible_rows=6)
        self.attributes_list = CheckList(self, max_visible_rows=5)
        self.patient_combo = QComboBox(self)
        self.patient_combo.setToolTip("The patient id column; without one, FairDesk parses it from each image's path "
                                      "(patientNNNNN or pNNNNNNNN).")
        self.name_edit = QLineEdit(self)
        self.name_edit.setPlaceholderText("Name in the project")
        self.seed_spin = QSpinBox(self)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setToolTip("Seed of the patient-disjoint split")
        self.val_spin = QDoubleSpinBox(self)
        self.test_spin = QDoubleSpinBox(self)
        for spin, value in ((self.val_spin, 0.15), (self.test_spin, 0.25)):
            spin.setRange(0.0, 0.8)
            spin.setSingleStep(0.05)
            spin.setDecimals(2)
            spin.setValue(value)
        self.import_button = push_button("Import images", self, self.import_dataset,
                                         "Open every image once (unreadable ones are listed, not fatal), split by "
                                         "patient, and store the table in the project.")
        self.progress = progress_bar(self)
        self.status = wrapped_label("", self)

        box = QGroupBox("Import an image folder", self)
        form = QFormLayout(box)
        row = QHBoxLayout()
        row.addWidget(self.csv_edit, 1)
        row.addWidget(self.csv_button)
        form.addRow("Table (CSV)", row)
        row = QHBoxLayout()
        row.addWidget(self.dir_edit, 1)
        row.addWidget(self.dir_button)
        form.addRow("Image folder", row)
        form.addRow(self.style_label)
        form.addRow("Image path column", self.path_combo)
        form.addRow("Disease labels (0/1)", self.labels_list)
        form.addRow("Sensitive attributes", self.attributes_list)
        form.addRow("Patient id\n(splits keep patients apart)", self.patient_combo)
        form.addRow("Split shares", hrow(box, "val", self.val_spin, "test", self.test_spin, "seed", self.seed_spin))
        form.addRow("Name", self.name_edit)
        form.addRow(run_row(self.import_button, progress=self.progress))
        form.addRow(self.status)
        inner = QWidget(self)
        iv = QVBoxLayout(inner)
        iv.addWidget(box)
        iv.addStretch(1)
        scroll = scroll_area(self, inner, min_width=520)

        # ---- stored datasets
        self.dataset_combo = QComboBox(self)
        self.dataset_combo.setPlaceholderText("Import an image folder first")
        self.dataset_combo.currentIndexChanged.connect(lambda *_: self.show_dataset())
        self.info_label = wrapped_label("", self)
        self.thumbnails = ThumbnailGrid(self, thumb_size=96, max_items=240)
        self.counts_view = DataFrameView(self, filterable=False, placeholder="Split counts appear here.")
        self.unreadable_view = DataFrameView(self, placeholder="No unreadable files.")
        self.views = QTabWidget(self)
        self.views.addTab(self.thumbnails, "Thumbnails")
        self.views.addTab(self.counts_view, "Splits")
        self.views.addTab(self.unreadable_view, "Unreadable files")
        right = QWidget(self)
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(QLabel("Image dataset", right))
        top.addWidget(self.dataset_combo, 1)
        rv.addLayout(top)
        rv.addWidget(self.info_label)
        rv.addWidget(self.views, 1)

        split_page(self, scroll, right, [560, 700])
        self._open_pending = False  # the chosen dataset waits for the page to be shown (_open_when_shown)
        window.refresh_on_project(self, self.refresh_project)
        window.runner.progress.connect(self._on_progress)
        self._set_header(None)
        self.refresh_project()

    # ---- the CSV -------------------------------------------------------------------------------------------
    def choose_csv(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Image table", self.window_.settings.last_dir(),
                                              "CSV tables (*.csv *.tsv *.txt);;All files (*)")
        if path:
            self.window_.settings.set_last_dir(path)
            self.read_header(path)

    def choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Image folder", self.dir_edit.text() or
                                                self.window_.settings.last_dir())
        if path:
            self.dir_edit.setText(path)

    def read_header(self, path: str | Path) -> None:
        """Read the first rows of the CSV (enough to map the columns; the whole table is read by the import)."""
        path = Path(str(path)) if str(path).strip() else None
        if path is None:
            self._set_header(None)
            return
        self.csv_edit.setText(str(path))
        from fairdesk.core.data.loaders import load_table
        from fairdesk.core.errors import DataError

        try:
            df = load_table(path, nrows=2000)  # as the import reads it: BOM, quoted headers, duplicate names
        except DataError as err:
            self._set_header(None)
            self.status.setText(str(err))
            return
        if not self.dir_edit.text():
            self.dir_edit.setText(str(path.parent))
        if not self.name_edit.text():
            self.name_edit.setText(f"Images: {path.name}")
        self._set_header(df)

    def _set_header(self, df: pd.DataFrame | None) -> None:
        from fairdesk.core.data.images import default_roles, detect_style

        self.header = df
        cols = [str(c) for c in df.columns] if df is not None else []
        roles = default_roles(df) if df is not None else None
        self.style = detect_style(df) if df is not None else "custom"
        self.style_label.setText(STYLE_TEXT[self.style] if df is not None else "Choose the CSV table first.")
        path_items = [(c, c) for c in cols]
        if self.style == "mimic-cxr" and (roles is None or roles.path is None):
            path_items.insert(0, ("(built from subject_id / study_id / dicom_id)", None))
        fill_combo(self.path_combo, path_items, keep=False, default=roles.path if roles else None)
        binary = [c for c in cols if df is not None and _binary_like(df[c])]
        label_default = list(roles.labels) if roles and roles.labels else []
        self.labels_list.set_items(binary + [c for c in cols if c not in binary], label_default)
        few = [c for c in cols if df is not None and 1 < df[c].nunique(dropna=True) <= 20 and c not in label_default]
        self.attributes_list.set_items(few + [c for c in cols if c not in few and c not in label_default],
                                       list(roles.attributes) if roles else [])
        fill_combo(self.patient_combo, [(FROM_PATH, None)] + [(c, c) for c in cols], keep=False,
                   default=roles.patient_id if roles else None)
        self._update_buttons()

    def roles(self):
        from fairdesk.core.data.images import ImageRoles

        return ImageRoles(path=self.path_combo.currentData(), labels=tuple(self.labels_list.checked()),
                          attributes=tuple(self.attributes_list.checked()),
                          patient_id=self.patient_combo.currentData())

    def _update_buttons(self, *args) -> None:
        busy = self.import_job is not None and not self.import_job.state.finished
        ok = self.header is not None and bool(self.dir_edit.text().strip()) and (
            self.path_combo.currentData() is not None or self.style == "mimic-cxr")
        self.import_button.setEnabled(ok and not busy)

    # ---- import --------------------------------------------------------------------------------------------
    def import_dataset(self):
        if self.header is None:
            return None
        project = self.window_.require_project()
        if project is None:
            return None
        csv, folder = Path(self.csv_edit.text()), Path(self.dir_edit.text())
        roles = self.roles()
        name = self.name_edit.text().strip() or None
        seed, val, test = self.seed_spin.value(), self.val_spin.value(), self.test_spin.value()
        project_path = project.path

        def work(progress, cancel):
            from fairdesk.jobs.images import import_image_dataset

            return import_image_dataset(project_path, csv, folder, roles, name, split_seed=seed, val_size=val,
                                        test_size=test, progress=progress, cancel=cancel)

        def done(job) -> None:
            self.progress.setValue(1000)
            self.status.setText(f"Imported as dataset #{job.result}.")
            self.window_.notify_project_changed(self)
            idx = self.dataset_combo.findData(job.result)
            if idx >= 0:
                self.dataset_combo.setCurrentIndex(idx)

        def failed(job) -> None:
            self.status.setText(job.error or "The import did not finish.")

        self.progress.setValue(0)
        self.status.setText(f"Importing {csv.name}…")
        self.import_job = self.window_.run_job(f"Import images: {csv.name}", work, on_done=done, on_fail=failed)
        self._update_buttons()
        return self.import_job

    def _on_progress(self, job_id: int, fraction: float, message: str) -> None:
        show_progress(self.import_job, job_id, fraction, message, self.progress, self.status.setText)

    # ---- stored datasets -----------------------------------------------------------------------------------
    def refresh_project(self) -> None:
        items = [(f"{d.name}  (#{d.id}, {d.n_rows:,} images)", d.id) for d in image_datasets(self.window_.project)]
        before = self.dataset_combo.currentData()
        fill_combo(self.dataset_combo, items, keep=True, default=items[-1][1] if items else None)
        self._update_buttons()
        if self.dataset_combo.currentData() != before or (items and self.dataset is None):
            self._open_when_shown()
        elif not items:
            self._open_pending = False
            self._show(None)

    def _open_when_shown(self) -> None:
        """Open the chosen dataset now if the page is on screen, else the next time it is shown: opening resolves
        every file (a job) and reads 240 thumbnails in a thread, and done while a project opened behind another page
        it competed with that page's reads for the interpreter lock and filled this page's tables on the Qt thread
        (the open phase's longest gap in ``benchmarks/bench_heartbeat.py``)."""
        self._open_pending = not self.isVisible()
        if not self._open_pending:
            self.show_dataset()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self._open_pending:
            self._open_pending = False
            self.show_dataset()

    def show_dataset(self, dataset_id: int | None = None):
        """Re-open a stored image dataset (a job: it resolves every file) and show thumbnails and counts."""
        project = self.window_.project
        dataset_id = dataset_id if dataset_id is not None else self.dataset_combo.currentData()
        if project is None or dataset_id is None:
            self._show(None)
            return None
        project_path, max_items = project.path, self.thumbnails.max_items

        def work(progress, cancel):  # the dataset and what the page shows of it (captions, counts: pandas)
            from fairdesk.jobs.images import image_dataset

            ds = image_dataset(project_path, dataset_id, progress=progress, cancel=cancel)
            info = project.dataset(dataset_id)
            return ds, dataset_view(ds, info.roles if info is not None and info.roles else ds.roles.to_dict(),
                                    max_items)

        self.info_label.setText("Opening the image dataset…")
        self.open_job = self.window_.run_job(f"Open image dataset #{dataset_id}", work,
                                             on_done=lambda job: self._show(*job.result),
                                             on_fail=lambda job: self._open_failed(job))
        return self.open_job

    def _open_failed(self, job) -> None:
        self._show(None)
        self.info_label.setText(job.error or "The image dataset could not be opened.")

    def _show(self, ds, view: dict | None = None) -> None:
        """Show image dataset ``ds`` (None: clear) with ``view``, its :func:`dataset_view` (made in the job)."""
        self.dataset = ds
        if ds is None:
            self.thumbnails.set_files([])
            self.counts_view.set_frame(None)
            self.unreadable_view.set_frame(None)
            self.info_label.setText("")
            return
        table = ds.table
        self.thumbnails.set_files(list(table["_file"]), captions=view["captions"],
                                  unreadable=[{"path": u.get("path"), "reason": u.get("reason")}
                                              for u in ds.unreadable])
        self.counts_view.set_frame(view["counts"])
        self.unreadable_view.set_frame(pd.DataFrame(ds.unreadable) if ds.unreadable else None)
        self.info_label.setText(view["text"])


def dataset_view(ds, roles: dict, max_items: int) -> dict:
    """What the page shows of image dataset ``ds`` besides its thumbnails: a caption per image (the first
    ``max_items``), the counts per split and the summary line (in the job: pandas work kept off the Qt thread)."""
    table = ds.table
    attribute = next((c for c in (roles.get("attributes") or ())[:1] if c in table), None)
    head = table.head(max_items)
    splits = head["split"].astype(str).tolist() if "split" in head else [""] * len(head)
    values = head[attribute].tolist() if attribute is not None else [None] * len(head)
    captions = [" ".join(b for b in (s, f"{attribute}={v}" if attribute is not None else "") if b)
                for s, v in zip(splits, values)]
    labels = ", ".join(roles.get("labels") or ()) or "none"
    attrs = ", ".join(roles.get("attributes") or ()) or "none"
    text = (f"{len(table):,} readable images from {table['_patient'].nunique():,} patients ({ds.style} style), "
            f"{len(ds.unreadable)} unreadable. Labels: {labels}. Attributes: {attrs}. Folder: {ds.root}")
    return {"captions": captions + [""] * (len(table) - len(captions)), "counts": split_counts(table, roles),
            "text": text}


def _binary_like(values: pd.Series) -> bool:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return len(v) > 0 and set(v.unique().tolist()) <= {-1.0, 0.0, 1.0}
