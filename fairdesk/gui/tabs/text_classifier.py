"""Model tab — Text classifiers: train the small CNN text classifier of 002 with a counterfactual remedy, watch its loss per epoch, cancel, resume, and see the project's stored text classifiers.

The training runs as a job through :func:`fairdesk.jobs.ctf.train_text_classifier_job` — the function
``fairdesk-cli train text-classifier`` calls. The job's ``on_epoch`` hook runs in the worker thread and only appends
the epoch's record to a thread-safe queue; the page drains that queue in the Qt thread when the runner's progress
signal (which the job sends right after each epoch) or its finished signal arrives, so no widget is touched from the
worker. A cancelled run keeps a checkpoint of its finished epochs in ``<output folder>/checkpoints`` and stores
nothing in the project; "Resume" (enabled when the folder holds a checkpoint) continues it.

pyqtgraph is imported when the loss plot is first needed; torch and sklearn load inside the job. This module is cheap
to import (``tests/gui/test_startup.py``).
"""
from __future__ import annotations

import collections
import math
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from fairdesk.core.errors import DataError, FairDeskError
from fairdesk.core.kinds import DATASET_KINDS, MODEL_KINDS
from fairdesk.gui.tabs.base import JobPage
from fairdesk.gui.tabs.image_data import model_folder
from fairdesk.gui.widgets.panel_parts import (fill_combo, note_label, placeholder_label, push_button, run_row,
                                              scroll_area, setup_column, size_combos, split_page)

MODEL_KIND = MODEL_KINDS["text_classifier"].name
TEXT_KIND = DATASET_KINDS["text"].name
TEXT_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")
METHODS = (("baseline", "Baseline (cross-entropy)"), ("blindness", "Blindness (terms → one token)"),
           ("augmentation", "Counterfactual augmentation"), ("clp", "Counterfactual logit pairing (CLP)"),
           ("clp_nontox", "CLP on label-0 texts only (CLP_nontox)"))
PAIRING = ("clp", "clp_nontox")
LAMBDA_PRESETS = (0.05, 1.0, 5.0)  # 002's values
TERM_SETS = (("dixon_train", "Dixon et al., 35 train terms"), ("dixon", "Dixon et al., all 50 terms"),
             ("gender", "Clinical gender terms"), ("race", "Race and ethnicity terms"))
FILE = "__file__"
MODEL_COLUMNS = ("#", "Name", "Method", "λ", "Epochs", "Validation AUROC", "Resumed")


def _select_data(combo: QComboBox, data) -> None:
    idx = combo.findData(data)
    if idx >= 0:
        combo.setCurrentIndex(idx)


class TextClassifierPage(JobPage):
    """Model › Text classifiers: the form (data, columns, method, λ, pairing loss, terms, epochs, seed, output
    folder), Train / Resume / Cancel, the live loss curve and the stored text classifiers."""

    FAIL_TITLE = None

    def __init__(self, window) -> None:
        super().__init__(window)
        self.epochs_queue: collections.deque = collections.deque()  # filled by the worker, drained in the Qt thread
        self.loss_points: list[tuple[int, float]] = []
        self.pair_points: list[tuple[int, float]] = []
        self.restored_points = 0
        self.plot = None
        self._columns_source = None
        self.train_button = push_button("Train", self, lambda: self.train(resume=False),
                                        "Train a new model in the output folder (a checkpoint after every epoch).")
        self.resume_button = push_button("Resume", self, lambda: self.train(resume=True),
                                         "Continue from the checkpoint in the output folder (left by a cancelled or "
                                         "failed run with the same data and settings; more epochs allowed).")
        form = self._build_form()
        scroll = scroll_area(self, form)
        width = max(440, form.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width() + 4)
        left = setup_column(self, scroll, run_row(self.train_button, self.resume_button, self.cancel_button,
                                                  progress=self.progress), self.status, min_width=width)
        split_page(self, left, self._build_results(), [470, 880])
        window.runner.progress.connect(self._drain_epochs)
        window.refresh_on_project(self, self.refresh_project)
        self.refresh_project()

    # ---- form --------------------------------------------------------------------------------------------------
    def _build_form(self) -> QWidget:
        w = QWidget(self)
        f = QFormLayout(w)
        self.source_combo = QComboBox(w)
        size_combos(self.source_combo, chars=28, on_change=self._source_changed)
        f.addRow("Texts", self.source_combo)
        self.file_edit = QLineEdit(w)
        self.file_edit.setPlaceholderText("CSV/Parquet: text, 0/1 label")
        self.file_edit.setToolTip("A CSV or Parquet file with a text column and a 0/1 label column")
        self.file_edit.editingFinished.connect(self._source_changed)
        self.browse_button = push_button("Browse…", w, self._browse_file)
        row = QHBoxLayout()
        row.addWidget(self.file_edit, 1)
        row.addWidget(self.browse_button)
        self.file_row = QWidget(w)
        self.file_row.setLayout(row)
        row.setContentsMargins(0, 0, 0, 0)
        f.addRow("File", self.file_row)
        self.text_combo, self.label_combo = QComboBox(w), QComboBox(w)
        size_combos(self.text_combo, self.label_combo, chars=20)
        f.addRow("Text column", self.text_combo)
        f.addRow("Label column (0/1)", self.label_combo)
        self.method_combo = QComboBox(w)
        fill_combo(self.method_combo, [(text, key) for key, text in METHODS])
        size_combos(self.method_combo, chars=28, on_change=self._method_changed)
        f.addRow("Method", self.method_combo)
        self.lambda_combo = QComboBox(w)
        fill_combo(self.lambda_combo, [(f"{v:g}", v) for v in LAMBDA_PRESETS] + [("typed value", None)], default=1.0)
        self.lambda_combo.currentIndexChanged.connect(self._lambda_preset)
        self.lambda_spin = QDoubleSpinBox(w)
        self.lambda_spin.setRange(0.0, 1000.0)
        self.lambda_spin.setDecimals(3)
        self.lambda_spin.setSingleStep(0.05)
        self.lambda_spin.setValue(1.0)
        self.lambda_spin.valueChanged.connect(self._lambda_typed)
        self.lambda_spin.setToolTip("λ, the weight of the pairing term (002 used 0.05, 1 and 5)")
        lrow = QHBoxLayout()
        lrow.setContentsMargins(0, 0, 0, 0)
        lrow.addWidget(self.lambda_combo)
        lrow.addWidget(self.lambda_spin, 1)
        self.lambda_row = QWidget(w)
        self.lambda_row.setLayout(lrow)
        self.lambda_label = QLabel("λ (pairing weight)", w)
        f.addRow(self.lambda_label, self.lambda_row)
        self.pair_combo = QComboBox(w)
        fill_combo(self.pair_combo, [("mean squared difference (MSE)", "mse"), ("mean absolute difference", "abs"),
                                     ("cosine distance", "cosine")])
        self.pair_label = QLabel("Pairing loss", w)
        f.addRow(self.pair_label, self.pair_combo)
        self.terms_combo = QComboBox(w)
        fill_combo(self.terms_combo, [(text, key) for key, text in TERM_SETS] + [("Term file…", FILE)])
        size_combos(self.terms_combo, chars=24, on_change=self._terms_changed)
        f.addRow("Identity terms", self.terms_combo)
        self.terms_edit = QLineEdit(w)
        self.terms_edit.setPlaceholderText("a text file with one term per line")
        self.terms_edit.setVisible(False)
        f.addRow("", self.terms_edit)
        self.epochs_spin = QSpinBox(w)
        self.epochs_spin.setRange(1, 200)
        self.epochs_spin.setValue(5)
        f.addRow("Epochs", self.epochs_spin)
        self.seed_spin = QSpinBox(w)
        self.seed_spin.setRange(0, 2_000_000_000)
        f.addRow("Seed", self.seed_spin)
        self.validation_spin = QDoubleSpinBox(w)
        self.validation_spin.setRange(0.0, 0.5)
        self.validation_spin.setSingleStep(0.05)
        self.validation_spin.setValue(0.2)
        self.validation_spin.setToolTip("share of the rows held out (stratified, seeded) for the validation AUROC; "
                                        "0: train on every row")
        f.addRow("Validation share", self.validation_spin)
        self.out_edit = QLineEdit(w)
        self.out_edit.setPlaceholderText("a new folder next to the project")
        self.out_edit.editingFinished.connect(self.offer_resume)
        self.out_edit.textChanged.connect(self.update_buttons)
        self.out_button = push_button("Choose…", w, self._browse_out)
        orow = QHBoxLayout()
        orow.setContentsMargins(0, 0, 0, 0)
        orow.addWidget(self.out_edit, 1)
        orow.addWidget(self.out_button)
        f.addRow("Output folder", orow)
        f.addRow(note_label("The model is saved in the output folder (config.json + model.safetensors) and stored "
                            "in the project. A checkpoint is written after every epoch; Cancel keeps the finished "
                            "epochs, and Resume continues them.", w))
        self._method_changed()
        return w

    def _build_results(self) -> QWidget:
        w = QWidget(self)
        v = QVBoxLayout(w)
        v.addWidget(QLabel("<b>Training loss per epoch</b>", w))
        self.plot_box = QVBoxLayout()
        self.plot_placeholder = placeholder_label("The loss curve appears here while a model trains.", w)
        self.plot_box.addWidget(self.plot_placeholder)
        v.addLayout(self.plot_box, 3)
        self.loss_label = QLabel("", w)
        v.addWidget(self.loss_label)
        v.addWidget(QLabel("<b>Text classifiers in the project</b>", w))
        self.models_table = QTableWidget(0, len(MODEL_COLUMNS), w)
        self.models_table.setHorizontalHeaderLabels(list(MODEL_COLUMNS))
        self.models_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.models_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.models_table.verticalHeader().setVisible(False)
        header = self.models_table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        v.addWidget(self.models_table, 2)
        return w

    # ---- form behaviour ----------------------------------------------------------------------------------------
    def _method_changed(self, *args) -> None:
        pairing = self.method_combo.currentData() in PAIRING
        for widget in (self.lambda_label, self.lambda_row, self.pair_label, self.pair_combo):
            widget.setVisible(pairing)

    def _lambda_preset(self, *args) -> None:
        value = self.lambda_combo.currentData()
        if value is not None:
            self.lambda_spin.blockSignals(True)
            self.lambda_spin.setValue(float(value))
            self.lambda_spin.blockSignals(False)

    def _lambda_typed(self, value: float) -> None:
        idx = next((i for i, v in enumerate(LAMBDA_PRESETS) if math.isclose(v, value)), len(LAMBDA_PRESETS))
        self.lambda_combo.blockSignals(True)
        self.lambda_combo.setCurrentIndex(idx)
        self.lambda_combo.blockSignals(False)

    def _terms_changed(self, *args) -> None:
        self.terms_edit.setVisible(self.terms_combo.currentData() == FILE)

    def _browse_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Texts to train on", "", "Tables (*.csv *.tsv *.parquet *.pq)")
        if path:
            self.file_edit.setText(path)
            self._source_changed()

    def _browse_out(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Output folder of the model")
        if path:
            self.out_edit.setText(path)

    def _source_changed(self, *args) -> None:
        source = self.source_combo.currentData()
        self.file_row.setEnabled(source == FILE)
        columns, roles = [], {}
        try:
            if source == FILE:
                path = self.file_edit.text().strip()
                if path:
                    columns = self._file_columns(Path(path))
            elif source is not None and self.window_.project is not None:
                info = self.window_.project.dataset(source)
                columns, roles = list(info.columns), dict(info.roles or {})
        except FairDeskError as err:
            self.say(str(err), error=True)
        text_guess = roles.get("text") or next((c for c in columns if c.lower() in ("text", "note", "comment")), None)
        label_guess = roles.get("label") or next((c for c in columns if c.lower() in ("label", "y", "toxic")), None)
        fill_combo(self.text_combo, [(c, c) for c in columns], keep=False, default=text_guess)
        fill_combo(self.label_combo, [(c, c) for c in columns], keep=False, default=label_guess)
        self.update_buttons()

    @staticmethod
    def _file_columns(path: Path) -> list[str]:
        if path.suffix.lower() not in TEXT_SUFFIXES:
            raise DataError(f"{path.name} is not a CSV, TSV or Parquet file.")
        if not path.is_file():
            raise DataError(f"{path} does not exist; choose the file again.")
        if path.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return list(pq.ParquetFile(path).schema_arrow.names)
        from fairdesk.core.data.loaders import load_table

        return [str(c) for c in load_table(path, nrows=5).columns]

    # ---- project -----------------------------------------------------------------------------------------------
    def refresh_project(self) -> None:
        project = self.window_.project
        items = []
        if project is not None:
            items = [(f"#{d.id} {d.name} ({d.n_rows:,} rows)", d.id) for d in project.datasets() if d.kind == TEXT_KIND]
        # keep the user's choice; an untouched "file" choice gives way to the first stored text dataset
        untouched = self.source_combo.currentData() in (None, FILE) and not self.file_edit.text().strip()
        fill_combo(self.source_combo, items + [("CSV or Parquet file…", FILE)], keep=not untouched,
                   default=items[0][1] if items else FILE)
        self._source_changed()
        self.refresh_models()

    def stored_models(self) -> list:
        project = self.window_.project
        return [m for m in project.models() if m.kind == MODEL_KIND] if project is not None else []

    def refresh_models(self) -> None:
        models = self.stored_models()
        self.models_table.setRowCount(len(models))
        for r, m in enumerate(models):
            info = m.info or {}
            lam = info.get("lambda")
            val = info.get("validation") or {}
            auroc = val.get("auroc")
            cells = (str(m.id), m.name, str(info.get("method", "–")),
                     f"{lam:g}" if info.get("method") in PAIRING and lam is not None else "–",
                     str(info.get("epochs_done", info.get("epochs", "–"))),
                     f"{auroc:.3f} (n = {val.get('n')})" if auroc is not None else "not recorded",
                     f"after epoch {info.get('resumed_from_epoch')}" if info.get("resume") else "no")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c in (0, 3, 4):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.models_table.setItem(r, c, item)

    # ---- running -----------------------------------------------------------------------------------------------
    def output_folder(self) -> Path | None:
        text = self.out_edit.text().strip()
        return Path(text) if text else None

    def checkpoint(self) -> dict | None:
        """The newest checkpoint in the output folder (None: none)."""
        folder = self.output_folder()
        if folder is None:
            return None
        from fairdesk.core.models.text_classifier import checkpoint_info
        from fairdesk.jobs.ctf import CHECKPOINT_SUBDIR

        return checkpoint_info(folder / CHECKPOINT_SUBDIR)

    def offer_resume(self) -> None:
        """The output folder holds a checkpoint: set the form to its run (method, λ, pairing loss, seed, epochs) and
        say that Resume continues it."""
        ck = self.checkpoint()
        if ck is None or self.busy:
            self.update_buttons()
            return
        _select_data(self.method_combo, ck.get("method"))
        self._method_changed()
        if ck.get("method") in PAIRING and ck.get("lam") is not None:
            self.lambda_spin.setValue(float(ck["lam"]))
        _select_data(self.pair_combo, ck.get("pair_loss"))
        if ck.get("seed") is not None:
            self.seed_spin.setValue(int(ck["seed"]))
        self.epochs_spin.setValue(max(self.epochs_spin.value(), int(ck["epochs"])))
        self.say(f"This folder holds a checkpoint after epoch {ck['epoch']} of {ck['epochs']} ({ck.get('method')}); "
                 "the form now shows its run: press Resume to continue it (same data and terms).")
        self.update_buttons()

    def form_inputs(self) -> dict:
        """The job's inputs from the form; raises :class:`FairDeskError` saying what to fix."""
        source = self.source_combo.currentData()
        if source == FILE:
            data = self.file_edit.text().strip()
            if not data:
                raise DataError("Choose the file of texts to train on (CSV or Parquet), or a stored text dataset.")
        elif source is None:
            raise DataError("Choose the texts to train on.")
        else:
            data = int(source)
        text_col, label_col = self.text_combo.currentData(), self.label_combo.currentData()
        if not text_col or not label_col:
            raise DataError("Choose the text column and the 0/1 label column.")
        if text_col == label_col:
            raise DataError("The text column and the label column must differ.")
        terms = self.terms_combo.currentData()
        if terms == FILE:
            terms = self.terms_edit.text().strip()
            if not terms:
                raise DataError("Give the term file (one term per line), or choose a shipped term set.")
        method = self.method_combo.currentData()
        return {"data": data, "text_col": text_col, "label_col": label_col, "method": method,
                "lam": float(self.lambda_spin.value()) if method in PAIRING else 1.0,
                "pair_loss": self.pair_combo.currentData() or "mse", "terms": terms,
                "epochs": int(self.epochs_spin.value()), "seed": int(self.seed_spin.value()),
                "validation": float(self.validation_spin.value())}

    def train(self, resume: bool = False):
        """Start the training job (``resume``: from the output folder's checkpoint); returns the job or None."""
        project = self.job_project()
        if project is None:
            return None
        try:
            kw = self.form_inputs()
        except FairDeskError as err:
            self.say(str(err), error=True)
            return None
        out = self.output_folder()
        if out is None:
            if resume:
                self.say("Resume needs the output folder of the cancelled run.", error=True)
                return None
            out = model_folder(project.path, f"text-cnn-{kw['method']}")
            self.out_edit.setText(str(out))
        elif not resume and self.checkpoint() is not None:
            self.say(f"{out} holds a checkpoint of an earlier run: press Resume to continue it, or choose another "
                     "output folder.", error=True)
            return None
        self.clear_curve()
        project_path, data = project.path, kw.pop("data")
        text_col, label_col = kw.pop("text_col"), kw.pop("label_col")
        threads = max(1, int(getattr(self.window_.settings, "threads", 1) or 1))
        queue = self.epochs_queue

        def work(progress, cancel):
            from fairdesk.jobs.ctf import train_text_classifier_job

            return train_text_classifier_job(project_path, data, text_col, label_col, out, threads=threads,
                                             resume=resume, on_epoch=queue.append, progress=progress, cancel=cancel,
                                             **kw)

        title = f"Train text CNN ({kw['method']}" + (f", λ = {kw['lam']:g}" if kw["method"] in PAIRING else "") + ")"
        return self.start_job(title + (" — resume" if resume else ""), work,
                              running="Resuming…" if resume else "Training…", on_done=self._trained,
                              on_fail=self._not_trained)

    def _trained(self, job) -> None:
        self._drain_epochs(job.id)
        self.say(f"Model #{job.result} stored; saved in {self.output_folder()}.")
        self.window_.notify_project_changed(self)
        self.refresh_models()

    def _not_trained(self, job) -> None:
        self._drain_epochs(job.id)
        ck = self.checkpoint()
        if ck is not None:
            kept = f"{ck['epoch']} finished epoch(s) are kept in a checkpoint: press Resume to continue."
            if job.state.value == "cancelled":
                self.say(f"Cancelled; nothing was stored. {kept}")
            else:  # keep the reason of the failure first
                self.say(f"{job.error or 'The job did not finish.'} Nothing was stored; {kept}", error=True)
        self.update_buttons()

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        ready = self.window_.project is not None and not self.busy
        self.train_button.setEnabled(ready)
        self.resume_button.setEnabled(ready and self.checkpoint() is not None)

    # ---- the loss curve ----------------------------------------------------------------------------------------
    def clear_curve(self) -> None:
        self.epochs_queue.clear()
        self.loss_points, self.pair_points, self.restored_points = [], [], 0
        self.loss_label.setText("")
        if self.plot is not None:
            self._redraw()

    def _drain_epochs(self, job_id: int, *args) -> None:
        """Move the worker's epoch records to the curve (Qt thread; on the runner's progress of this page's job)."""
        if self.job is None or job_id != self.job.id or not self.epochs_queue:
            return
        while self.epochs_queue:
            rec = self.epochs_queue.popleft()
            loss = rec.get("loss")
            if loss is None or not math.isfinite(loss):
                continue
            self.loss_points.append((int(rec["epoch"]), float(loss)))
            if rec.get("pair_loss") is not None:
                self.pair_points.append((int(rec["epoch"]), float(rec["pair_loss"])))
            if rec.get("restored"):
                self.restored_points += 1
            self.loss_label.setText(f"epoch {rec['epoch']}/{rec.get('epochs', '?')}: loss {loss:.4f}"
                                    + (f" (pairing {rec['pair_loss']:.4f})" if rec.get("pair_loss") is not None
                                       else "")
                                    + (f"; epochs 1–{self.restored_points} read from the checkpoint"
                                       if self.restored_points else ""))
        self._ensure_plot()
        self._redraw()

    def _ensure_plot(self) -> None:
        if self.plot is not None:
            return
        from fairdesk.gui.widgets.panel_parts import load_pyqtgraph

        pg = load_pyqtgraph()
        self.plot = pg.PlotWidget(self)
        self.plot.setLabel("bottom", "epoch")
        self.plot.setLabel("left", "training loss")
        self.plot.getAxis("left").enableAutoSIPrefix(False)  # a loss of 0.5 reads 0.5, not 500 (×0.001)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.addLegend(offset=(-10, 10))
        self.loss_curve = self.plot.plot([], [], pen=pg.mkPen("#1f5fa8", width=2), symbol="o", symbolSize=7,
                                         symbolBrush="#1f5fa8", name="loss (BCE + λ·pairing)")
        self.pair_curve = self.plot.plot([], [], pen=pg.mkPen("#c2571a", width=2, style=Qt.PenStyle.DashLine),
                                         symbol="t", symbolSize=7, symbolBrush="#c2571a", name="pairing term")
        self.plot_placeholder.setVisible(False)
        self.plot_box.addWidget(self.plot)

    def _redraw(self) -> None:
        xs, ys = zip(*self.loss_points) if self.loss_points else ((), ())
        self.loss_curve.setData(list(xs), list(ys))
        px, py = zip(*self.pair_points) if self.pair_points else ((), ())
        self.pair_curve.setData(list(px), list(py))

    def curve_points(self) -> int:
        """The number of epochs on the loss curve (tests)."""
        return len(self.loss_curve.getData()[0] if self.plot is not None and self.loss_curve.getData()[0] is not None
                   else [])
