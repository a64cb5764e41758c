"""Model tab — Images: the classifier under audit and the counterfactual generator.

* Import a classifier (a TorchScript file, or a FairDesk classifier folder: config.json + model.safetensors) or
  train a small CNN on an image dataset's training split, as a job.
* Train the counterfactual generator (diffusers AutoencoderKL + class-conditioned latent UNet) as a job with LIVE
  loss curves for both phases and sample previews. The job calls ``on_metrics`` / ``on_preview`` from the worker
  thread; they only append to a lock-protected buffer (:class:`LiveFeed`), which a ``QTimer`` in the Qt thread
  drains — no widget is touched from the worker. Cancel keeps the last checkpoint; "Resume" continues from it.

pyqtgraph is imported when the loss plot is first needed, so this module is cheap to import.
"""
from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pandas as pd
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGridLayout, QGroupBox,
                               QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QTabWidget, QVBoxLayout, QWidget)

from fairdesk.core.data.roles import not_outcomes
from fairdesk.gui.tabs.image_data import (CLASSIFIER_KIND, GENERATOR_KIND, fill_combo, image_datasets,
                                          model_folder, models_of, TableRead)
from fairdesk.gui.widgets.panel_parts import (cancel_job, hrow, job_running, load_pyqtgraph, placeholder_label,
                                              progress_bar, push_button, run_row, scroll_area, setup_column,
                                              show_progress, split_page, wrapped_label)
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

ARCHITECTURES = {"small_cnn": "Small CNN", "small_resnet": "Small ResNet"}
GENERATOR_SIZES = {"tiny": "Tiny (CPU, minutes)", "small": "Small (CPU, longer)", "base": "Base (GPU)"}
TWO_VALUES = "(two values: the second is group 1)"
PHASES = ("autoencoder", "disentangling", "diffusion")   # the middle phase only with the MINE map
PHASE_COLOURS = {"autoencoder": "#1f77b4", "disentangling": "#2ca02c", "diffusion": "#d62728"}
PHASE_NAMES = {"autoencoder": "autoencoder loss", "disentangling": "MINE: DV estimate of I(φ(z); a), nats",
               "diffusion": "diffusion loss"}


class LiveFeed:
    """What the worker thread hands to the Qt thread: metrics rows and the latest preview, behind a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: list[dict] = []
        self._preview = None

    # worker thread
    def metrics(self, row: dict) -> None:
        with self._lock:
            self._metrics.append(dict(row))

    def preview(self, step: int, images, labels) -> None:
        arr = np.array(images, dtype=np.float32, copy=True)
        with self._lock:
            self._preview = (int(step), arr, np.asarray(labels).copy())

    # Qt thread
    def take(self) -> tuple[list[dict], tuple | None]:
        with self._lock:
            rows, self._metrics = self._metrics, []
            preview, self._preview = self._preview, None
        return rows, preview


def _pixmap(img: np.ndarray, size: int) -> QPixmap:
    arr = np.ascontiguousarray(np.round(np.clip(img, 0, 1) * 255).astype(np.uint8))
    h, w = arr.shape
    qimg = QImage(arr.data, w, h, w, QImage.Format.Format_Grayscale8).copy()
    return QPixmap.fromImage(qimg).scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio,
                                          Qt.TransformationMode.FastTransformation)


class ImageModelPanel(QWidget):
    """The "Images" page of the Model tab."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window_ = window
        self.job = None
        self.job_kind = ""
        self.feed: LiveFeed | None = None
        self.losses: dict[str, tuple[list[int], list[float]]] = {p: ([], []) for p in PHASES}
        self.preview_step: int | None = None
        self.plot_widget = None
        self.curves: dict = {}
        self._table: pd.DataFrame | None = None
        self.table_read = TableRead(window, lambda: self.dataset_combo.currentData(), self._show_table,
                                    lambda message: self.status.setText(f"The image dataset could not be read: {message}"))
        self.timer = QTimer(self)
        self.timer.setInterval(100)
        self.timer.timeout.connect(self.drain)

        # ---- dataset shared by both trainings
        self.dataset_combo = QComboBox(self)
        self.dataset_combo.setPlaceholderText("Import images on the Dataset tab first")
        self.dataset_combo.currentIndexChanged.connect(self._dataset_changed)

        # ---- import a classifier
        self.import_path = QLineEdit(self)
        self.import_path.setPlaceholderText(".pt file or folder")
        self.import_path.setToolTip("A TorchScript file (.pt) or a classifier folder.")
        self.import_path.textChanged.connect(self._update_buttons)
        self.import_file_button = QPushButton("File…", self)
        self.import_file_button.clicked.connect(self.choose_classifier_file)
        self.import_dir_button = QPushButton("Folder…", self)
        self.import_dir_button.clicked.connect(self.choose_classifier_folder)
        self.import_size = QSpinBox(self)
        self.import_size.setRange(8, 2048)
        self.import_size.setValue(32)
        self.import_size.setToolTip("Input size of a TorchScript classifier (a folder's config.json gives its own).")
        self.import_outputs = QLineEdit("disease", self)
        self.import_outputs.setToolTip("Names of a TorchScript classifier's outputs, comma-separated, in order.")
        self.import_button = QPushButton("Import classifier", self)
        self.import_button.clicked.connect(lambda: self.import_classifier())
        imp = QGroupBox("Classifier under audit: import", self)
        f = QFormLayout(imp)
        row = QHBoxLayout()
        row.addWidget(self.import_path, 1)
        row.addWidget(self.import_file_button)
        row.addWidget(self.import_dir_button)
        f.addRow("Model", row)
        f.addRow("Input size (TorchScript)", self.import_size)
        f.addRow("Output names (TorchScript)", self.import_outputs)
        f.addRow(self.import_button)

        # ---- train a CNN
        self.labels_list = CheckList(self, max_visible_rows=5)
        self.labels_list.changed.connect(self._update_buttons)
        self.arch_combo = QComboBox(self)
        for key, text in ARCHITECTURES.items():
            self.arch_combo.addItem(text, key)
        self.epochs_spin = QSpinBox(self)
        self.epochs_spin.setRange(1, 500)
        self.epochs_spin.setValue(5)
        self.cnn_size = QSpinBox(self)
        self.cnn_size.setRange(8, 1024)
        self.cnn_size.setValue(32)
        self.cnn_seed = QSpinBox(self)
        self.cnn_seed.setRange(0, 2**31 - 1)
        self.train_cnn_button = QPushButton("Train classifier", self)
        self.train_cnn_button.clicked.connect(lambda: self.train_classifier())
        cnn = QGroupBox("…or train one here (CPU)", self)
        f = QFormLayout(cnn)
        f.addRow("Labels (one output each)", self.labels_list)
        f.addRow("Architecture", self.arch_combo)
        f.addRow("Epochs", self.epochs_spin)
        f.addRow("Image size (px)", self.cnn_size)
        f.addRow("Seed", self.cnn_seed)
        f.addRow(self.train_cnn_button)

        # ---- generator
        self.attribute_combo = QComboBox(self)
        self.attribute_combo.currentIndexChanged.connect(self._attribute_changed)
        self.positive_combo = QComboBox(self)
        self.positive_combo.setToolTip("An attribute with more than two values is audited one value against the "
                                       "rest; choose the value forming group 1.")
        self.size_combo = QComboBox(self)
        for key, text in GENERATOR_SIZES.items():
            self.size_combo.addItem(text, key)
        self.gen_size = QSpinBox(self)
        self.gen_size.setRange(8, 1024)
        self.gen_size.setSingleStep(8)
        self.gen_size.setValue(32)
        self.vae_steps = QSpinBox(self)
        self.vae_steps.setRange(1, 10**6)
        self.vae_steps.setValue(400)
        self.unet_steps = QSpinBox(self)
        self.unet_steps.setRange(1, 10**7)
        self.unet_steps.setValue(1500)
        self.batch_spin = QSpinBox(self)
        self.batch_spin.setRange(2, 4096)
        self.batch_spin.setValue(32)
        self.preview_spin = QSpinBox(self)
        self.preview_spin.setRange(0, 10**6)
        self.preview_spin.setValue(100)
        self.preview_spin.setToolTip("Draw sample images every this many diffusion steps (0: never).")
        self.checkpoint_spin = QSpinBox(self)
        self.checkpoint_spin.setRange(0, 10**6)
        self.checkpoint_spin.setValue(250)
        self.checkpoint_spin.setToolTip("A checkpoint every this many steps; the first one comes after the first "
                                        "minute of training, so a cancel never loses more than that (0: only at "
                                        "the end of each phase).")
        self.gen_seed = QSpinBox(self)
        self.gen_seed.setRange(0, 2**31 - 1)
        self.mine_check = QCheckBox("MINE disentangling map", self)
        self.mine_check.setToolTip("Train φ(z) = z + λ·m(z)/‖m(z)‖ between the autoencoder and the diffusion model so "
                                   "that the latent carries as little information about the attribute as possible "
                                   "(004 §3.3); the diffusion model then works on φ(z).")
        self.mine_lambda = QDoubleSpinBox(self)
        self.mine_lambda.setDecimals(4)
        self.mine_lambda.setRange(0.0001, 100.0)
        self.mine_lambda.setSingleStep(0.001)
        self.mine_lambda.setValue(0.001)
        self.mine_lambda.setToolTip("λ: how far φ moves each latent (ℓ2 norm over the whole latent, whose elements have "
                                    "unit standard deviation). The paper uses 1e-3.")
        self.mine_lambda.setEnabled(False)
        self.mine_check.toggled.connect(self.mine_lambda.setEnabled)
        self.out_edit = QLineEdit(self)
        self.out_edit.setPlaceholderText("(a new folder next to the project)")
        self.out_button = QPushButton("Folder…", self)
        self.out_button.clicked.connect(self.choose_generator_folder)
        self.resume_check = QCheckBox("Resume from the checkpoint in this folder", self)
        self.resume_check.toggled.connect(self._update_buttons)
        self.train_gen_button = QPushButton("Train generator", self)
        self.train_gen_button.clicked.connect(lambda: self.train_generator())
        gen = QGroupBox("Counterfactual generator (latent diffusion)", self)
        f = QFormLayout(gen)
        f.addRow("Attribute", self.attribute_combo)
        f.addRow("Group 1", self.positive_combo)
        f.addRow("Size", self.size_combo)
        f.addRow("Image size (px)", self.gen_size)
        f.addRow("Training steps", hrow(gen, "autoencoder", self.vae_steps, "diffusion", self.unet_steps))
        f.addRow("Batch size", self.batch_spin)
        f.addRow("Preview every", self.preview_spin)
        f.addRow("Checkpoint every", self.checkpoint_spin)
        f.addRow("Seed", self.gen_seed)
        f.addRow("Disentangling", hrow(gen, self.mine_check, "λ", self.mine_lambda, stretch=True))
        row = QHBoxLayout()
        row.addWidget(self.out_edit, 1)
        row.addWidget(self.out_button)
        f.addRow("Folder", row)
        f.addRow(self.resume_check)
        f.addRow(self.train_gen_button)

        self.cancel_button = push_button("Cancel", self, self.cancel)
        self.progress = progress_bar(self)
        self.status = wrapped_label("", self)

        inner = QWidget(self)
        iv = QVBoxLayout(inner)
        top = QFormLayout()
        top.addRow("Image dataset", self.dataset_combo)
        iv.addLayout(top)
        iv.addWidget(imp)
        iv.addWidget(cnn)
        iv.addWidget(gen)
        iv.addStretch(1)
        left = setup_column(self, scroll_area(self, inner, min_width=500),
                            run_row(self.cancel_button, progress=self.progress), self.status)

        # ---- right: training view + models
        self.training_page = QWidget(self)
        tv = QVBoxLayout(self.training_page)
        self.plot_host = QVBoxLayout()
        self.plot_placeholder = placeholder_label("Loss curves of the generator appear here while it trains.", self,
                                                  wrap=False)
        self.plot_host.addWidget(self.plot_placeholder)
        tv.addLayout(self.plot_host, 3)
        self.loss_label = QLabel("", self)
        tv.addWidget(self.loss_label)
        self.preview_box = QGroupBox("Samples during training", self)
        self.preview_grid = QGridLayout(self.preview_box)
        self.preview_labels: list[QLabel] = []
        tv.addWidget(self.preview_box, 1)
        self.models_view = DataFrameView(self, placeholder="Image classifiers and generators of the project "
                                                           "appear here.")
        self.right_tabs = QTabWidget(self)
        self.right_tabs.addTab(self.training_page, "Generator training")
        self.right_tabs.addTab(self.models_view, "Image models")
        split_page(self, left, self.right_tabs, [540, 700])
        window.refresh_on_project(self, self.refresh_project)
        window.runner.progress.connect(self._on_progress)
        window.runner.finished.connect(self._on_finished)
        self.refresh_project()

    # ---- project -------------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return job_running(self.job)

    def refresh_project(self) -> None:
        project = self.window_.project
        items = [(f"{d.name}  (#{d.id}, {d.n_rows:,} images)", d.id) for d in image_datasets(project)]
        fill_combo(self.dataset_combo, items, default=items[-1][1] if items else None)
        self._dataset_changed()
        rows = []
        for m in models_of(project, CLASSIFIER_KIND) + models_of(project, GENERATOR_KIND):
            info = m.info
            attr = info.get("attribute") or {}
            rows.append({"id": m.id, "name": m.name, "kind": m.kind.replace("image_", ""),
                         "outputs / attribute": ", ".join(info.get("outputs") or []) if m.kind == CLASSIFIER_KIND
                         else f"{attr.get('column')}: {' vs '.join(map(str, attr.get('values') or []))}",
                         "image size": info.get("image_size") or (info.get("config") or {}).get("image_size"),
                         "test AUROC": ", ".join(f"{k} {v:.3f}" for k, v in (info.get("test_auc") or {}).items())
                         or None,
                         "steps": info.get("step"), "last loss (diffusion)": info.get("last_unet_loss"),
                         "path": info.get("path"), "created": m.created.replace("T", " ")[:16]})
        self.models_view.set_frame(pd.DataFrame(rows) if rows else None)
        self._update_buttons()

    def _dataset_changed(self, *args) -> None:
        self.table_read.choose(self.window_.project)

    def _show_table(self, table) -> None:
        """Fill the label and attribute choices from the chosen image table (None: not read yet, or none)."""
        project, dataset_id = self.window_.project, self.dataset_combo.currentData()
        self._table = table
        roles = (project.dataset(dataset_id).roles or {}) if table is not None else {}
        cols = [c for c in (self._table.columns if self._table is not None else []) if not str(c).startswith("_")
                and c not in ("split", roles.get("path"))]
        labels = list(roles.get("labels") or [])
        # identifiers and protected attributes (by name, or the patient column's role) are not classifier outputs
        blocked = not_outcomes(cols) | {roles.get("patient_id"), roles.get("patient")}
        self.labels_list.set_items(labels + [c for c in cols if c not in labels and c not in blocked], labels)
        attrs = list(roles.get("attributes") or [])
        fill_combo(self.attribute_combo, [(c, c) for c in attrs + [c for c in cols if c not in attrs]],
                   default=attrs[0] if attrs else None)
        self._attribute_changed()

    def _attribute_changed(self, *args) -> None:
        col = self.attribute_combo.currentData()
        values = []
        if self._table is not None and col in self._table:
            values = sorted(map(str, self._table[col].dropna().unique()))
        items = ([(TWO_VALUES, None)] if len(values) == 2 else []) + [(f"{v} (vs the rest)", v) for v in values]
        fill_combo(self.positive_combo, items, keep=False)
        self._update_buttons()

    def _update_buttons(self, *args) -> None:
        has_project = self.window_.project is not None
        has_data = self.dataset_combo.currentData() is not None
        self.import_button.setEnabled(has_project and bool(self.import_path.text().strip()) and not self.busy)
        self.train_cnn_button.setEnabled(has_data and bool(self.labels_list.checked()) and not self.busy)
        resume_ok = not self.resume_check.isChecked() or bool(self.out_edit.text().strip())
        self.train_gen_button.setEnabled(has_data and self.attribute_combo.currentData() is not None and resume_ok
                                         and not self.busy)
        self.cancel_button.setEnabled(self.busy)

    # ---- choosers ------------------------------------------------------------------------------------------
    def choose_classifier_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "TorchScript classifier", self.window_.settings.last_dir(),
                                              "TorchScript (*.pt *.pth *.ts *.torchscript);;All files (*)")
        if path:
            self.import_path.setText(path)

    def choose_classifier_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Classifier folder (config.json + model.safetensors)",
                                                self.window_.settings.last_dir())
        if path:
            self.import_path.setText(path)

    def choose_generator_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Generator folder", self.window_.settings.last_dir())
        if path:
            self.out_edit.setText(path)

    # ---- jobs ----------------------------------------------------------------------------------------------
    def _start(self, name: str, kind: str, work, done_text) -> object:
        def done(job) -> None:
            self.progress.setValue(1000)
            self.status.setText(done_text(job))
            self.window_.notify_project_changed(self)

        def failed(job) -> None:
            self.status.setText(self._failure_text(job))

        self.progress.setValue(0)
        self.status.setText(f"{name}…")
        self.job_kind = kind
        self.job = self.window_.run_job(name, work, on_done=done, on_fail=failed)
        self._update_buttons()
        return self.job

    def _failure_text(self, job) -> str:
        text = job.error or "The job did not finish."
        if self.job_kind == "generator" and job.state.value == "cancelled":
            folder = getattr(self, "_gen_folder", None)
            text = (f"Cancelled. The last checkpoint in {folder} is kept: tick 'Resume' and train again to "
                    "continue from it." if folder else text)
        return text

    def import_classifier(self):
        project = self.window_.require_project()
        path = self.import_path.text().strip()
        if project is None or not path:
            return None
        project_path, size = project.path, self.import_size.value()
        outputs = [o.strip() for o in self.import_outputs.text().split(",") if o.strip()] or None

        def work(progress, cancel):
            from fairdesk.jobs.images import import_image_classifier

            return import_image_classifier(project_path, path, image_size=size, outputs=outputs, progress=progress,
                                           cancel=cancel)

        return self._start(f"Import classifier {Path(path).name}", "import", work,
                           lambda job: f"Imported the classifier as model #{job.result}.")

    def train_classifier(self):
        project = self.window_.require_project()
        dataset_id = self.dataset_combo.currentData()
        labels = self.labels_list.checked()
        if project is None or dataset_id is None or not labels:
            return None
        project_path = project.path
        out = model_folder(project_path, "classifier")
        arch, epochs, size, seed = (self.arch_combo.currentData(), self.epochs_spin.value(), self.cnn_size.value(),
                                    self.cnn_seed.value())
        threads = max(1, int(self.window_.settings.threads))

        def work(progress, cancel):
            import torch

            from fairdesk.jobs.images import train_image_classifier

            torch.set_num_threads(threads)
            return train_image_classifier(project_path, dataset_id, labels, out, arch=arch, epochs=epochs,
                                          image_size=size, seed=seed, progress=progress, cancel=cancel)

        return self._start(f"Train {ARCHITECTURES[arch]} on {', '.join(labels)}", "classifier", work,
                           lambda job: f"Trained model #{job.result}; saved in {out}.")

    def train_generator(self):
        project = self.window_.require_project()
        dataset_id = self.dataset_combo.currentData()
        attribute = self.attribute_combo.currentData()
        if project is None or dataset_id is None or attribute is None:
            return None
        project_path = project.path
        resume = self.resume_check.isChecked()
        out = Path(self.out_edit.text().strip()) if self.out_edit.text().strip() else model_folder(project_path,
                                                                                                    "generator")
        self.out_edit.setText(str(out))
        self._gen_folder = out
        kw = dict(image_size=self.gen_size.value(), size=self.size_combo.currentData(),
                  vae_steps=self.vae_steps.value(), unet_steps=self.unet_steps.value(),
                  batch_size=self.batch_spin.value(), resume=resume, seed=self.gen_seed.value(),
                  checkpoint_every=self.checkpoint_spin.value(), preview_every=self.preview_spin.value(),
                  positive=self.positive_combo.currentData(),
                  mine_lambda=self.mine_lambda.value() if self.mine_check.isChecked() else 0.0)
        threads = max(1, int(self.window_.settings.threads))
        feed = self.feed = LiveFeed()
        self._reset_curves(out if resume else None)

        def work(progress, cancel):
            import torch

            from fairdesk.jobs.images import train_generator_job

            torch.set_num_threads(threads)
            return train_generator_job(project_path, dataset_id, attribute, out, on_metrics=feed.metrics,
                                       on_preview=feed.preview, progress=progress, cancel=cancel, **kw)

        self.right_tabs.setCurrentWidget(self.training_page)
        job = self._start(f"Train generator for {attribute}", "generator", work,
                          lambda job: f"Generator trained (model #{job.result}); checkpoints in {out}.")
        self.timer.start()
        return job

    def cancel(self) -> None:
        cancel_job(self.window_, self.job)

    def _on_progress(self, job_id: int, fraction: float, message: str) -> None:
        show_progress(self.job, job_id, fraction, message, self.progress, self.status.setText)

    def _on_finished(self, job) -> None:
        if self.job is not None and job.id == self.job.id:
            if self.job_kind == "generator":
                self.drain()
                self.timer.stop()
            self._update_buttons()

    # ---- live curves and previews --------------------------------------------------------------------------
    def _ensure_plot(self) -> None:
        if self.plot_widget is not None:
            return
        pg = load_pyqtgraph()
        self.plot_widget = pg.PlotWidget(self)
        plot = self.plot_widget.getPlotItem()
        plot.setLogMode(y=True)
        plot.showGrid(x=True, y=True, alpha=0.25)
        plot.setLabel("bottom", "training step")
        plot.setLabel("left", "loss (log scale)")
        plot.addLegend(offset=(-10, 10))
        for phase in PHASES:
            self.curves[phase] = plot.plot([], [], pen=pg.mkPen(PHASE_COLOURS[phase], width=1.5),
                                           name=PHASE_NAMES[phase])
        self.plot_placeholder.hide()
        self.plot_host.addWidget(self.plot_widget)
        self.plot_widget.show()

    def _reset_curves(self, resume_from: Path | None) -> None:
        self.losses = {p: ([], []) for p in PHASES}
        self.preview_step = None
        if resume_from is not None:   # show the history of the run being resumed
            meta_file = Path(resume_from) / "fairdesk_generator.json"
            try:
                meta = json.loads(meta_file.read_text())
            except (OSError, ValueError):
                meta = {}
            start = 1
            for phase, key in (("autoencoder", "vae_loss"), ("disentangling", "mine_dv"), ("diffusion", "unet_loss")):
                values = [float(v) for v in meta.get(key) or []]
                self.losses[phase] = (list(range(start, start + len(values))), values)
                start += len(values)
        self._ensure_plot()
        self._redraw()

    def drain(self) -> None:
        """Move what the worker reported into the plot and the preview strip (Qt thread)."""
        if self.feed is None:
            return
        rows, preview = self.feed.take()
        for r in rows:
            phase = r.get("phase")
            if phase in self.losses and r.get("loss") is not None and math.isfinite(r["loss"]):
                xs, ys = self.losses[phase]
                xs.append(int(r.get("step", len(xs) + 1)))
                ys.append(float(r["loss"]))
        if rows:
            self._redraw()
        if preview is not None:
            self.show_preview(*preview)

    def _redraw(self) -> None:
        if self.plot_widget is None:
            return
        parts = []
        for phase in PHASES:
            xs, ys = self.losses[phase]
            ok = [(x, y) for x, y in zip(xs, ys) if y > 0]
            self.curves[phase].setData([x for x, _ in ok], [y for _, y in ok])
            if ys:
                recent = ys[-20:]
                parts.append(f"{phase}: step {xs[-1]}, loss {ys[-1]:.4f} (mean of last {len(recent)}: "
                             f"{float(np.mean(recent)):.4f})")
        self.loss_label.setText("   ".join(parts))

    def show_preview(self, step: int, images, labels) -> None:
        for w in self.preview_labels:
            self.preview_grid.removeWidget(w)
            w.deleteLater()
        self.preview_labels = []
        names = self._group_names()
        for j, (img, lab) in enumerate(zip(images, labels)):
            cell = QLabel(self.preview_box)
            cell.setPixmap(_pixmap(np.asarray(img).reshape(img.shape[-2:]), 96))
            cell.setToolTip(f"sample for group {names.get(int(lab), lab)} at step {step}")
            caption = QLabel(f"{self.attribute_combo.currentText()} = {names.get(int(lab), lab)}", self.preview_box)
            caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
            self.preview_grid.addWidget(cell, 0, j)
            self.preview_grid.addWidget(caption, 1, j)
            cell.show()
            caption.show()
            self.preview_labels += [cell, caption]
        self.preview_step = int(step)
        self.preview_box.setTitle(f"Samples at step {step} (10 DDIM steps, per group)")

    def _group_names(self) -> dict:
        pos = self.positive_combo.currentData()
        col = self.attribute_combo.currentData()
        if self._table is None or col not in self._table:
            return {}
        values = sorted(map(str, self._table[col].dropna().unique()))
        if pos is None and len(values) == 2:
            return {0: values[0], 1: values[1]}
        return {0: f"not {pos}", 1: str(pos)}

    def loss_points(self, phase: str) -> int:
        return len(self.losses[phase][1])
