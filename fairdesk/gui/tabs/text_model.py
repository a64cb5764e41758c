"""Language models (Model tab sub-page): the project's masked LMs, "Open model folder…", and training a masked LM
from local notes as a job with a live loss curve, checkpoints, cancel and resume (METHODS §7).

The job functions are :mod:`fairdesk.jobs.text` (``register_language_model``, ``train_language_model``).
The training loop calls ``on_log(record)`` on the worker thread; the record is handed to the GUI thread by a Qt
signal of a QObject living in the GUI thread (a queued connection), so no widget is touched from the worker.
torch and transformers load inside the jobs; pyqtgraph when the loss curve is first shown.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pandas as pd  # noqa: E402
from PySide6.QtCore import QObject, Qt, Signal  # noqa: E402
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox,  # noqa: E402
                               QHBoxLayout, QLineEdit, QPushButton, QSpinBox, QSplitter, QVBoxLayout, QWidget)

from fairdesk.core.escape import html_text
from fairdesk.core.errors import FairDeskError  # noqa: E402
from fairdesk.core.kinds import MODEL_KINDS  # noqa: E402
from fairdesk.gui.widgets.panel_parts import (cancel_job, job_running, load_pyqtgraph, note_label,  # noqa: E402
                                              placeholder_label, progress_bar, push_button, run_row, scroll_area,
                                              setup_column, show_progress, size_combos, split_page, wrapped_label)
from fairdesk.gui.widgets.tables import DataFrameView  # noqa: E402

NONE = "(none)"
#: Size presets of fairdesk.core.models.mlm.SIZES, described for the form (kept here: no core import at start-up)
SIZE_LABELS = {
    "tiny": "Tiny (CPU: minutes)",
    "mini": "Mini (CPU: an hour or more)",
    "small": "Small (GPU advised)",
    "base": "Base (GPU)",
}
SIZE_TIPS = {"tiny": "Hidden size 96, 2 layers.", "mini": "Hidden size 256, 4 layers.",
             "small": "Hidden size 512, 4 layers.", "base": "Hidden size 768, 12 layers."}
DEVICES = {"cpu": "CPU", "auto": "GPU when present, else CPU"}
_TABLE_SUFFIXES = (".csv", ".tsv", ".txt.gz", ".csv.gz", ".parquet", ".pq")

MLM_COLOUR = "#1f5fa8"
ADV_LOSS_COLOUR = "#b5651d"
ADV_ACC_COLOUR = "#B00020"


def table_columns(path: str | Path) -> list[str]:
    """The column names of a CSV/TSV/Parquet file, read without loading the rows ([] for text corpora)."""
    p = Path(path).expanduser()
    if not p.is_file():
        return []
    name = p.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            return [str(c) for c in pq.read_schema(p).names]
        if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
            sep = "\t" if ".tsv" in name else ","
            return [str(c).strip() for c in pd.read_csv(p, nrows=0, sep=sep, encoding="utf-8-sig").columns]
    except Exception:  # noqa: BLE001 - an unreadable file is reported by the training job with a fix
        return []
    return []


def checkpoint_history(out_dir: str | Path) -> list[dict]:
    """The logged history of the newest complete checkpoint in ``out_dir/checkpoints`` ([] when there is none)."""
    ck = Path(out_dir).expanduser() / "checkpoints"
    if not ck.is_dir():
        return []
    done = sorted(d for d in ck.iterdir() if d.is_dir() and d.name.startswith("checkpoint-")
                  and (d / "trainer_state.json").is_file())
    if not done:
        return []
    try:
        return list(json.loads((done[-1] / "trainer_state.json").read_text(encoding="utf-8")).get("history", []))
    except (OSError, ValueError):
        return []


class _LogBridge(QObject):
    """Lives in the GUI thread; ``record`` emitted from the worker is delivered here through the event queue."""

    record = Signal(int, object)  # run number, history record


class LossCurve(QWidget):
    """Live training curves: the MLM loss (and the adversary's loss) on top, the adversary's accuracy below."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.widget = None
        self.loss_plot = self.acc_plot = None
        self.curves: dict = {}
        self.data: dict[str, tuple[list[float], list[float]]] = {}
        self.adversarial = False
        self.placeholder = placeholder_label("The loss curve of a training run appears here, point by point.", self)
        self._layout.addWidget(self.placeholder)

    def _ensure(self) -> None:
        if self.widget is not None:
            return
        pg = load_pyqtgraph()
        self.widget = pg.GraphicsLayoutWidget(self)
        self.widget.setMinimumHeight(220)
        self.loss_plot = self.widget.addPlot(row=0, col=0)
        self.acc_plot = self.widget.addPlot(row=1, col=0)
        self.acc_plot.setXLink(self.loss_plot)
        for plot, ylabel in ((self.loss_plot, "loss"), (self.acc_plot, "adversary accuracy")):
            plot.showGrid(x=True, y=True, alpha=0.2)
            plot.setMenuEnabled(False)
            plot.setLabel("left", ylabel, **{"font-size": "9pt"})
            plot.getAxis("left").enableAutoSIPrefix(False)
            plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.acc_plot.setLabel("bottom", "training step", **{"font-size": "9pt"})
        self.acc_plot.setYRange(0.0, 1.0, padding=0.02)
        pen = {"mlm": pg.mkPen(MLM_COLOUR, width=2), "adv_loss": pg.mkPen(ADV_LOSS_COLOUR, width=1.5),
               "adv_accuracy": pg.mkPen(ADV_ACC_COLOUR, width=2)}
        self.curves["mlm"] = self.loss_plot.plot([], [], pen=pen["mlm"], symbol="o", symbolSize=4,
                                                 symbolBrush=MLM_COLOUR, symbolPen=None)
        self.curves["adv_loss"] = self.loss_plot.plot([], [], pen=pen["adv_loss"])
        self.curves["adv_accuracy"] = self.acc_plot.plot([], [], pen=pen["adv_accuracy"], symbol="o", symbolSize=4,
                                                         symbolBrush=ADV_ACC_COLOUR, symbolPen=None)
        self._layout.addWidget(self.widget, 1)

    def reset(self, adversarial: bool, history: list[dict] | None = None, title: str = "") -> None:
        self._ensure()
        self.adversarial = adversarial
        self.data = {k: ([], []) for k in ("mlm", "adv_loss", "adv_accuracy")}
        self.placeholder.setVisible(False)
        self.widget.setVisible(True)
        self.acc_plot.setVisible(adversarial)
        self.curves["adv_loss"].setVisible(adversarial)
        key = f"<span style='color:{MLM_COLOUR}'>&#9679; MLM loss</span>"
        if adversarial:
            key += (f"&nbsp;&nbsp;<span style='color:{ADV_LOSS_COLOUR}'>&#9644; adversary loss</span>"
                    f"&nbsp;&nbsp;<span style='color:{ADV_ACC_COLOUR}'>&#9679; adversary accuracy (below)</span>")
        self.loss_plot.setTitle(f"{html_text(title)}<br><span style='font-size:9pt'>{key}</span>"
                                if title else key, size="10pt")
        for rec in history or []:
            self._append(rec)
        self._redraw()

    def _append(self, rec: dict) -> None:
        step = float(rec.get("step", 0))
        for key, field in (("mlm", "mlm_loss"), ("adv_loss", "adv_loss"), ("adv_accuracy", "adv_accuracy")):
            value = rec.get(field)
            if value is not None:
                self.data[key][0].append(step)
                self.data[key][1].append(float(value))

    def add(self, rec: dict) -> None:
        if self.widget is None or not self.data:
            self.reset(rec.get("adv_loss") is not None)
        self._append(rec)
        self._redraw()

    def _redraw(self) -> None:
        for key, curve in self.curves.items():
            xs, ys = self.data.get(key, ([], []))
            curve.setData(xs, ys)

    def points(self, key: str = "mlm") -> list[tuple[float, float]]:
        """The plotted (step, value) points of a curve (``mlm``, ``adv_loss``, ``adv_accuracy``)."""
        curve = self.curves.get(key)
        if curve is None:
            return []
        xs, ys = curve.getData()
        return [] if xs is None else list(zip(map(float, xs), map(float, ys)))


class LanguageModelPanel(QWidget):
    """The project's masked language models, opening a local folder, and training one (live loss curve)."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window_ = window
        self.train_job = None
        self.open_job = None
        self._run = 0
        self._last_step = 0
        self.bridge = _LogBridge(self)
        self.bridge.record.connect(self._on_record)
        self._build()
        window.refresh_on_project(self, self.refresh_project)
        window.runner.progress.connect(self._on_progress)
        window.runner.finished.connect(self._on_job_finished)
        self.refresh_project()

    # =====================================================================================================
    def _build(self) -> None:
        form_inner = QWidget(self)
        fv = QVBoxLayout(form_inner)
        box = QGroupBox("Train a masked language model on local notes", form_inner)
        form = QFormLayout(box)
        self.corpus_edit = QLineEdit(box)
        self.corpus_edit.setPlaceholderText("table, .txt file or folder")
        self.corpus_edit.setToolTip("A CSV/Parquet file with a text column, a .txt file or a folder of .txt files.")
        self.corpus_edit.editingFinished.connect(self._corpus_changed)
        self.corpus_file_button = QPushButton("File…", box)
        self.corpus_file_button.clicked.connect(self.choose_corpus_file)
        self.corpus_dir_button = QPushButton("Folder…", box)
        self.corpus_dir_button.clicked.connect(self.choose_corpus_folder)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.corpus_file_button)
        row.addWidget(self.corpus_dir_button)
        form.addRow("Corpus", self.corpus_edit)  # the path gets the full width; the buttons go below it
        form.addRow("", row)
        self.text_column = QComboBox(box)
        self.text_column.setEditable(True)
        self.text_column.setEditText("text")
        self.text_column.setToolTip("The column of the table that holds the notes (not used for .txt corpora).")
        form.addRow("Text column", self.text_column)
        self.attribute_combo = QComboBox(box)
        self.attribute_combo.addItem(NONE, None)
        self.attribute_combo.setToolTip("A per-note protected attribute (e.g. gender): adversarial debiasing of "
                                        "[CLS] with gradient reversal. Leave (none) for plain pretraining.")
        self.attribute_combo.currentIndexChanged.connect(self._update_buttons)
        form.addRow("Adversary attribute", self.attribute_combo)
        self.size_combo = QComboBox(box)
        for key, text in SIZE_LABELS.items():
            self.size_combo.addItem(text, key)
            self.size_combo.setItemData(self.size_combo.count() - 1, SIZE_TIPS[key], Qt.ItemDataRole.ToolTipRole)
        form.addRow("Model size", self.size_combo)
        self.steps_spin = QSpinBox(box)
        self.steps_spin.setRange(1, 10_000_000)
        self.steps_spin.setValue(1000)
        self.steps_spin.setSingleStep(100)
        form.addRow("Steps", self.steps_spin)
        self.batch_spin = QSpinBox(box)
        self.batch_spin.setRange(1, 4096)
        self.batch_spin.setValue(32)
        form.addRow("Batch size", self.batch_spin)
        self.lr_spin = QDoubleSpinBox(box)
        self.lr_spin.setDecimals(6)
        self.lr_spin.setRange(0.000001, 1.0)
        self.lr_spin.setSingleStep(0.0001)
        self.lr_spin.setValue(0.0005)
        form.addRow("Learning rate", self.lr_spin)
        self.seed_spin = QSpinBox(box)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(self.window_.settings.seed)
        form.addRow("Seed", self.seed_spin)
        self.vocab_spin = QSpinBox(box)
        self.vocab_spin.setRange(100, 200_000)
        self.vocab_spin.setSingleStep(1000)
        self.vocab_spin.setValue(8000)
        self.vocab_spin.setToolTip("Size of the WordPiece vocabulary trained on the corpus.")
        form.addRow("Vocabulary size", self.vocab_spin)
        self.log_every_spin = QSpinBox(box)
        self.log_every_spin.setRange(1, 100_000)
        self.log_every_spin.setValue(10)
        self.log_every_spin.setToolTip("A point of the loss curve every this many steps (the mean over them).")
        form.addRow("Log every (steps)", self.log_every_spin)
        self.save_every_spin = QSpinBox(box)
        self.save_every_spin.setRange(1, 10_000_000)
        self.save_every_spin.setValue(500)
        self.save_every_spin.setToolTip("A checkpoint every this many steps; cancel also writes one.")
        form.addRow("Checkpoint every (steps)", self.save_every_spin)
        self.device_combo = QComboBox(box)
        for key, text in DEVICES.items():
            self.device_combo.addItem(text, key)
        form.addRow("Device", self.device_combo)
        size_combos(self.text_column, self.attribute_combo, self.size_combo, self.device_combo, chars=12)
        self.out_edit = QLineEdit(box)
        self.out_edit.setPlaceholderText("an empty folder")
        self.out_edit.setToolTip("An empty folder; the finished model is saved in it.")
        self.out_button = QPushButton("Browse…", box)
        self.out_button.clicked.connect(self.choose_output)
        row = QHBoxLayout()
        row.addWidget(self.out_edit, 1)
        row.addWidget(self.out_button)
        form.addRow("Output folder", row)
        self.name_edit = QLineEdit(box)
        self.name_edit.setPlaceholderText("(the output folder's name)")
        form.addRow("Name in the project", self.name_edit)
        self.resume_check = QCheckBox("Resume from the newest checkpoint", box)
        self.resume_check.setToolTip("Continue a cancelled or interrupted run in the output folder, with the same "
                                     "corpus and settings.")
        form.addRow("", self.resume_check)
        self.threads_note = note_label(f"CPU threads: {self.window_.settings.threads} (Settings → Preferences).", box)
        form.addRow(self.threads_note)
        fv.addWidget(box)
        fv.addStretch(1)
        scroll = scroll_area(self, form_inner)

        self.train_button = push_button("Train", self, self.train)
        self.cancel_button = push_button("Cancel", self, self.cancel,
                                         "Stop at the next step; a checkpoint of the finished steps is kept.")
        self.progress = progress_bar(self)
        self.status = wrapped_label("", self)
        left = setup_column(self, scroll, run_row(self.train_button, self.cancel_button, progress=self.progress),
                            self.status, min_width=440)

        models_box = QGroupBox("Language models in the project", self)
        mv = QVBoxLayout(models_box)
        top = QHBoxLayout()
        note = note_label("Local Hugging Face masked-LM folders (config.json, weights, tokenizer). FairDesk never "
                          "downloads a model.", models_box)
        top.addWidget(note, 1)
        self.open_button = QPushButton("Open model folder…", models_box)
        self.open_button.clicked.connect(lambda: self.open_folder())
        top.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignTop)
        mv.addLayout(top)
        self.models_view = DataFrameView(models_box, placeholder="No language model yet: open a local model folder "
                                                                  "or train one.")
        mv.addWidget(self.models_view, 1)
        curve_box = QGroupBox("Training curve", self)
        cv = QVBoxLayout(curve_box)
        self.loss_curve = LossCurve(curve_box)
        cv.addWidget(self.loss_curve, 1)
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(models_box)
        right.addWidget(curve_box)
        right.setSizes([260, 420])
        split_page(self, left, right, [480, 820])

    # =====================================================================================================
    # Project
    def refresh_project(self) -> None:
        project = self.window_.project
        rows = []
        if project is not None:
            for m in project.models():
                if m.kind != MODEL_KINDS["masked_lm"].name:
                    continue
                info, t = m.info, m.info.get("training") or {}
                rows.append({"id": m.id, "name": m.name, "source": info.get("source"),
                             "architecture": info.get("architecture"), "hidden": info.get("hidden_size"),
                             "layers": info.get("num_layers"), "parameters": info.get("n_parameters"),
                             "steps": t.get("steps"), "final MLM loss": t.get("final_mlm_loss"),
                             "adversary": t.get("attribute_column"),
                             "fingerprint": (info.get("fingerprint") or "")[:12], "folder": info.get("path"),
                             "added": m.created.replace("T", " ")[:16]})
        self.models_view.set_frame(pd.DataFrame(rows) if rows else None)
        self._update_buttons()

    def model_ids(self) -> list[int]:
        frame = self.models_view.frame()
        return [] if frame.empty else [int(i) for i in frame["id"]]

    # =====================================================================================================
    # Opening a folder
    def open_folder(self, path: str | Path | None = None):
        """Register a local masked-LM folder in the project, as a job (it is loaded once to check it)."""
        if path is None:
            path = QFileDialog.getExistingDirectory(self, "Open a masked language model folder",
                                                    self.window_.settings.last_dir())
            if not path:
                return None
            self.window_.settings.set_last_dir(path)
        project = self.window_.require_project()
        if project is None:
            return None
        from fairdesk.core.models.mlm import check_model_folder

        try:
            folder = check_model_folder(path)
        except FairDeskError as err:
            self.status.setText(str(err))
            self.window_.show_error("Not a masked language model folder", str(err))
            return None
        project_path = project.path

        def work(progress, cancel):
            from fairdesk.jobs.text import register_language_model

            return register_language_model(project_path, folder, progress=progress, cancel=cancel)

        def done(job) -> None:
            self.status.setText(f"{folder.name} is in the project as language model #{job.result}.")
            self.window_.notify_project_changed(self)

        def failed(job) -> None:
            self.status.setText(job.error or "The folder could not be opened.")
            if job.state.value == "failed":
                self.window_.show_error("Not a usable masked language model", job.error or "")

        self.open_job = self.window_.run_job(f"Open language model {folder.name}", work, on_done=done,
                                             on_fail=failed)
        self._update_buttons()
        return self.open_job

    # =====================================================================================================
    # Training form
    def choose_corpus_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose the corpus of notes", self.window_.settings.last_dir(),
                                              "Notes (*.csv *.tsv *.parquet *.txt);;All files (*)")
        if path:
            self.window_.settings.set_last_dir(path)
            self.set_corpus(path)

    def choose_corpus_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose a folder of .txt notes", self.window_.settings.last_dir())
        if path:
            self.window_.settings.set_last_dir(path)
            self.set_corpus(path)

    def choose_output(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose the output folder", self.window_.settings.last_dir())
        if path:
            self.out_edit.setText(path)
            self._output_changed()

    def set_corpus(self, path: str | Path) -> None:
        self.corpus_edit.setText(str(path))
        self._corpus_changed()

    def _corpus_changed(self) -> None:
        cols = table_columns(self.corpus_edit.text().strip())
        text_now = self.text_column.currentText()
        attr_now = self.attribute_combo.currentData()
        self.text_column.clear()
        self.text_column.addItems(cols)
        guess = text_now if text_now in cols else next(
            (c for c in cols if c.lower() in ("text", "note", "notes", "note_text", "report")), cols[0] if cols
            else (text_now or "text"))
        self.text_column.setEditText(guess)
        corpus = Path(self.corpus_edit.text().strip()).expanduser()
        self.text_column.setEnabled(not (corpus.is_dir() or corpus.suffix.lower() == ".txt"))
        self.attribute_combo.blockSignals(True)
        self.attribute_combo.clear()
        self.attribute_combo.addItem(NONE, None)
        for c in cols:
            if c != guess:
                self.attribute_combo.addItem(c, c)
        idx = self.attribute_combo.findData(attr_now)
        self.attribute_combo.setCurrentIndex(max(idx, 0))
        self.attribute_combo.blockSignals(False)
        self._update_buttons()

    def _output_changed(self) -> None:
        if checkpoint_history(self.out_edit.text().strip()) and not (
                Path(self.out_edit.text().strip()) / "config.json").exists():
            self.resume_check.setChecked(True)

    def config(self):
        """The training configuration of the form; raises :class:`FairDeskError` with what to fix."""
        from fairdesk.core.models.mlm import MLMTrainConfig

        text_column = self.text_column.currentText().strip() or "text"
        cfg = MLMTrainConfig(text_column=text_column, attribute_column=self.attribute_combo.currentData(),
                             size=self.size_combo.currentData(), vocab_size=self.vocab_spin.value(),
                             batch_size=self.batch_spin.value(), max_steps=self.steps_spin.value(),
                             learning_rate=float(self.lr_spin.value()), seed=self.seed_spin.value(),
                             log_every=self.log_every_spin.value(), save_every=self.save_every_spin.value(),
                             warmup_steps=min(100, max(self.steps_spin.value() // 10, 0)),
                             device=self.device_combo.currentData())
        cfg.resolved()
        return cfg

    def train(self):
        """Start the training job; returns it (or None when the form is incomplete)."""
        project = self.window_.require_project()
        if project is None:
            return None
        corpus = self.corpus_edit.text().strip()
        out = self.out_edit.text().strip()
        try:
            if not corpus:
                raise FairDeskError("Choose the corpus of notes: a CSV/Parquet file with a text column, a .txt file "
                                    "or a folder of .txt files.")
            if not out:
                raise FairDeskError("Choose an output folder for the model (an empty folder, or the folder of a "
                                    "run to resume).")
            cfg = self.config()
        except FairDeskError as err:
            self.status.setText(str(err))
            self.window_.statusBar().showMessage(str(err), 10000)
            return None
        resume = self.resume_check.isChecked()
        project_path, threads = project.path, self.window_.settings.threads
        name = self.name_edit.text().strip() or None
        self._run += 1
        run, bridge = self._run, self.bridge

        def on_log(record: dict) -> None:  # worker thread: only emit
            bridge.record.emit(run, dict(record))

        def work(progress, cancel):
            from fairdesk.jobs.text import train_language_model

            return train_language_model(project_path, corpus, out, cfg, resume, name=name, on_log=on_log,
                                        threads=threads, progress=progress, cancel=cancel)

        def done(job) -> None:
            self.status.setText(f"Trained {self._last_step} steps; the model is in {out} and in the project as "
                                f"language model #{job.result}.")
            self.resume_check.setChecked(False)
            self.window_.notify_project_changed(self)

        def failed(job) -> None:
            if job.state.value == "cancelled":
                kept = checkpoint_history(out)
                step = kept[-1]["step"] if kept else 0
                self.status.setText(f"Cancelled. The checkpoint of step {step} is kept in "
                                    f"{Path(out) / 'checkpoints'}; tick Resume and press Train to continue."
                                    if kept else "Cancelled before the first checkpoint.")
                if kept:
                    self.resume_check.setChecked(True)
            else:
                self.status.setText(job.error or "Training did not finish.")
                self.window_.show_error("Training did not finish", job.error or "")

        history = checkpoint_history(out) if resume else []
        self._last_step = history[-1]["step"] if history else 0
        adversarial = bool(cfg.attribute_column)
        self.loss_curve.reset(adversarial, history, title=f"{Path(out).name}: {cfg.size} model"
                              + (f", adversary on {cfg.attribute_column}" if adversarial else ""))
        self.progress.setValue(0)
        self.status.setText("Resuming training…" if resume else "Training…")
        self.train_job = self.window_.run_job(f"Train language model {Path(out).name}", work, on_done=done,
                                              on_fail=failed)
        self._update_buttons()
        return self.train_job

    def cancel(self) -> None:
        cancel_job(self.window_, self.train_job)

    # ---- job feedback (GUI thread) ----------------------------------------------------------------------
    def _on_record(self, run: int, record: dict) -> None:
        if run != self._run:
            return  # a record of an earlier run, delivered late
        self._last_step = int(record.get("step", self._last_step))
        self.loss_curve.add(record)

    def _on_progress(self, job_id: int, fraction: float, message: str) -> None:
        show_progress(self.train_job, job_id, fraction, message, self.progress, self.status.setText)

    def _on_job_finished(self, job) -> None:
        if self.train_job is not None and job.id == self.train_job.id and job.state.value == "done":
            self.progress.setValue(1000)
        self._update_buttons()

    def _update_buttons(self, *args) -> None:
        training, opening = job_running(self.train_job), job_running(self.open_job)
        self.train_button.setEnabled(not training)
        self.cancel_button.setEnabled(training)
        self.open_button.setEnabled(not opening)
        self.threads_note.setText(f"CPU threads: {self.window_.settings.threads} (Settings → Preferences).")
