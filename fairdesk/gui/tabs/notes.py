"""Note classifiers (Model tab sub-page): note-level downstream classifiers on a frozen encoder's features, and the
baseline-vs-debiased encoder comparison (001 §4.1, Tables 5, A2 and D4).

The form reads only the notes file's header (and, for CSV, its first rows) to offer columns with sensible guesses;
everything else runs as jobs through ``window.run_job`` with the job functions the CLI calls too
(:func:`fairdesk.jobs.notes.train_note_classifiers` and :func:`~fairdesk.jobs.notes.compare_encoders_job`).
Training stores a predictions dataset with column roles (ready for the Audit tab) and a model record of kind
``note_mlp``; the comparison stores an audit of kind ``note_classifiers``, whose PDF is written by
:func:`fairdesk.jobs.reports.export_report` (the same bytes as ``fairdesk-cli audit encoders --pdf``).
Encoders are the project's language models (model records of kind ``masked_lm``) or folders chosen here.
torch, transformers and sklearn load inside the jobs only.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QSpinBox, QSplitter, QTabWidget, QTextBrowser, QVBoxLayout, QWidget)

from fairdesk.core.compute import set_torch_threads as _threads
from fairdesk.core.errors import DataError, FairDeskError, ModelError
from fairdesk.core.data.roles import guess_note_roles
from fairdesk.core.kinds import MODEL_KINDS
from fairdesk.gui.tabs.base import AuditPage, AuditRun
from fairdesk.gui.tabs.dataset import NONE
from fairdesk.gui.widgets.panel_parts import fill_combo, note_label, push_button, size_combos
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

LM_KIND = MODEL_KINDS["masked_lm"].name
NOTE_MODEL_KIND = MODEL_KINDS["note_mlp"].name
NOTE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")  # what fairdesk.core.data.loaders reads
MEASURES = ("parity", "recall", "specificity")
MEASURE_TITLE = {"parity": "Parity gap", "recall": "Recall gap", "specificity": "Specificity gap"}
GAPS_NOTE = ("Each cell, over the tasks where the measure could be tested (enough notes in every group): how many "
             "gaps differ (significant after Benjamini–Hochberg), how many are equivalent within the audit's margin, "
             "how many are inconclusive — neither shown, which is not evidence of fairness — then the count "
             "significant before correction.")


# ================================================================================================================
# Reading the notes file's header (GUI thread: cheap)


def _suffix(path: Path) -> str:
    return path.suffix.lower()


def _read_head(path: Path, n: int) -> pd.DataFrame:
    """The first ``n`` rows, read as the job will read the file (:func:`fairdesk.core.data.loaders.load_table`:
    delimiter sniffed, column names stripped); Parquet through its first row batch only."""
    if _suffix(path) in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
            batch = next(pf.iter_batches(batch_size=n), None)
            df = batch.to_pandas() if batch is not None else pd.DataFrame(columns=pf.schema_arrow.names)
        except Exception as err:  # noqa: BLE001 - any reader error becomes one clear message
            raise DataError(f"{path.name} could not be read as Parquet ({str(err).splitlines()[0]}). Save it again "
                            "as Parquet or CSV.") from err
        df.columns = [str(c).strip() for c in df.columns]
        return df
    from fairdesk.core.data.loaders import load_table

    return load_table(path, nrows=n)


def notes_header(path: str | Path) -> list[str]:
    """The column names of a CSV/TSV/Parquet notes file (reading at most its first row). Raises
    :class:`DataError` saying what is wrong and how to fix it."""
    return list(notes_sample(path, 1).columns)


def notes_sample(path: str | Path, n: int = 200) -> pd.DataFrame:
    """The first ``n`` rows of the notes file (to guess column roles). Raises :class:`DataError`."""
    if not str(path).strip():
        raise DataError("Choose the notes file: a CSV or Parquet table with a text column, 0/1 task label columns, "
                        "a patient id and the protected attributes.")
    p = Path(path).expanduser()
    if not p.is_file():
        raise DataError(f"The notes file {p} does not exist. Choose a CSV or Parquet file.")
    if _suffix(p) not in NOTE_SUFFIXES:
        raise DataError(f"{p.name} is not a CSV or Parquet file. Save the notes as a table (.csv, .tsv or .parquet) "
                        "with one note per row and a header row.")
    df = _read_head(p, n)
    cols = [str(c) for c in df.columns]
    if len(cols) < 3:
        raise DataError(f"{p.name} has only {len(cols)} column(s) ({', '.join(cols) or 'none'}); a notes table needs "
                        "at least a text column, a 0/1 label column and a patient id.")
    return df


# ================================================================================================================
# Result tables (pure functions of the stored records, so tests can check them)


def _num(value) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def mlp_text(params: dict | None) -> str:
    """``hidden 64–32, α 0.0001`` for an MLP configuration."""
    if not params:
        return "–"
    hidden = params.get("hidden_layer_sizes")
    hidden = "–".join(str(h) for h in hidden) if isinstance(hidden, (list, tuple)) else str(hidden)
    out = f"hidden {hidden}"
    if params.get("alpha") is not None:
        out += f", α {float(params['alpha']):g}"
    return out + "".join(f", {k} {v}" for k, v in params.items() if k not in ("hidden_layer_sizes", "alpha"))


def training_table(metrics: list[dict]) -> pd.DataFrame:
    """One row per task: test and validation AUROC/AUPRC, the chosen c, MLP and threshold, sizes."""
    rows = []
    for m in metrics:
        rows.append({"task": m.get("task"), "test AUROC": _num(m.get("test_auroc")),
                     "test AUPRC": _num(m.get("test_auprc")), "val AUROC": _num(m.get("val_auroc")),
                     "val AUPRC": _num(m.get("val_auprc")), "c": _num(m.get("c")), "MLP": mlp_text(m.get("mlp")),
                     "threshold": _num(m.get("threshold")), "test F1": _num(m.get("test_f1")),
                     "test prevalence": _num(m.get("prevalence_test")),
                     "notes train/val/test": f"{m.get('n_train')}/{m.get('n_val')}/{m.get('n_test')}",
                     "features": m.get("n_features"), "label column": m.get("label_column")})
    return pd.DataFrame(rows)


def encoder_text(enc: dict) -> str:
    """One line about the encoder and the windows."""
    if not enc:
        return ""
    return (f"Encoder {Path(str(enc.get('path', ''))).name} ({enc.get('model_type')}, {enc.get('num_hidden_layers')} "
            f"layers, {enc.get('layers_concatenated')} [CLS] layers concatenated = {enc.get('feature_dim')} features; "
            f"fingerprint {str(enc.get('fingerprint') or '')[:12]}). Windows of {enc.get('max_length')} tokens every "
            f"{enc.get('stride')}: {enc.get('n_windows', 0):,} windows for {enc.get('n_notes', 0):,} notes; "
            f"{enc.get('truncated_notes', 0):,} note(s) longer than {enc.get('max_windows')} windows were truncated "
            f"({enc.get('truncated_tokens', 0):,} word pieces left out); {enc.get('notes_per_second', 0):g} notes/s.")


def comparison_summary(doc: dict) -> pd.DataFrame:
    """One row per encoder: mean test AUROC/AUPRC, gap verdicts (differs = significant after BH, equivalent,
    inconclusive; and the unadjusted significant count), attribute probe."""
    from fairdesk.core.reports.encoders import gap_verdict_counts

    rows = []
    for name in doc.get("encoders") or {}:
        res = [r for r in doc.get("results") or [] if r.get("encoder") == name]
        au = [v for v in (_num(r.get("test_auroc")) for r in res) if v is not None]
        ap = [v for v in (_num(r.get("test_auprc")) for r in res) if v is not None]
        gaps = [g for g in doc.get("gaps") or [] if g.get("encoder") == name]
        probe = (doc.get("probe") or {}).get(name) or {}
        counts = gap_verdict_counts(doc, name) if gaps else None
        n_bh = sum(int(g.get("n_significant_bh") or 0) for g in gaps)
        n_tested = sum(int(g.get("n_tasks") or 0) for g in gaps)
        rows.append({"encoder": name, "tasks": len(res),
                     "AUROC": sum(au) / len(au) if au else None, "AUPRC": sum(ap) / len(ap) if ap else None,
                     "gaps differ": counts["differs"] if counts else n_bh,
                     "gaps equivalent": counts["equivalent"] if counts else 0,
                     "gaps inconclusive": counts["inconclusive"] if counts else n_tested - n_bh,
                     "gaps (unadjusted)": sum(int(g.get("n_significant") or 0) for g in gaps),
                     "probe accuracy": _num(probe.get("accuracy")), "majority": _num(probe.get("majority")),
                     "probe AUROC": _num(probe.get("auroc"))})
    return pd.DataFrame(rows)


def comparison_performance(doc: dict) -> pd.DataFrame:
    """Task by encoder (encoders next to each other per task): test/validation AUROC and AUPRC, c, MLP, threshold."""
    order = {n: i for i, n in enumerate(doc.get("encoders") or {})}
    tasks = {t: i for i, t in enumerate(doc.get("tasks") or [])}
    res = sorted(doc.get("results") or [], key=lambda r: (tasks.get(r.get("task"), 99), order.get(r.get("encoder"),
                                                                                                    99)))
    rows = [{"task": r.get("task"), "encoder": r.get("encoder"), "test AUROC": _num(r.get("test_auroc")),
             "test AUPRC": _num(r.get("test_auprc")), "val AUROC": _num(r.get("val_auroc")),
             "val AUPRC": _num(r.get("val_auprc")), "c": _num(r.get("c")), "MLP": mlp_text(r.get("mlp")),
             "threshold": _num(r.get("threshold")), "test F1": _num(r.get("test_f1")), "test notes": r.get("n_test")}
            for r in res]
    return pd.DataFrame(rows)


def comparison_gaps(doc: dict) -> pd.DataFrame:
    """001 Table 5 layout: per encoder and group and measure, the gap verdicts over the tasks tested — differs
    (significant after BH, with the share favouring the group), equivalent, inconclusive — and the unadjusted
    count (:func:`fairdesk.core.reports.encoders.gap_cell`, the PDF's cell)."""
    from fairdesk.core.reports.encoders import gap_cell

    gaps = doc.get("gaps") or []
    groups = list(dict.fromkeys(str(g.get("group")) for g in gaps))
    rows = []
    for name in doc.get("encoders") or {}:
        for group in groups:
            row = {"encoder": name, "group": group}
            for m in MEASURES:
                g = next((x for x in gaps if x.get("encoder") == name and str(x.get("group")) == group
                          and x.get("metric") == m), None)
                row[MEASURE_TITLE[m]] = "–" if g is None else gap_cell(doc, name, group, m, g)
            rows.append(row)
    return pd.DataFrame(rows)


def comparison_probe(doc: dict) -> pd.DataFrame:
    """001 Table D4: how well the attribute is recovered from each encoder's features (measures × encoders)."""
    probe = doc.get("probe") or {}
    names = list(doc.get("encoders") or {})
    if not probe:
        return pd.DataFrame()
    measures = [("accuracy", "accuracy"), ("balanced accuracy", "balanced_accuracy"), ("AUROC", "auroc"),
                ("log loss", "log_loss"), ("majority-class rate", "majority"), ("notes probed", "n"),
                ("folds", "n_folds")]
    rows = [{"measure": label, **{n: (probe.get(n) or {}).get(key) for n in names}} for label, key in measures]
    return pd.DataFrame(rows)


def dropped_groups_text(doc: dict) -> str:
    dropped = [f"{name}: {d.get('task')} / {d.get('group')} (n = {d.get('n')})"
               for name, audit in (doc.get("audits") or {}).items() for d in audit.get("dropped") or []]
    if not dropped:
        return ""
    shown = "; ".join(dropped[:6]) + (" …" if len(dropped) > 6 else "")
    return f"Not tested (group smaller than the minimum on the test notes): {shown}."


def parse_mlp_grid(hidden: str, alpha: str) -> tuple[dict, ...]:
    """``"64, 64-32"`` × ``"1e-4, 1e-2"`` → the MLP grid; empty fields take the default grid's values."""
    from fairdesk.core.models.note_classifier import DEFAULT_MLP_GRID

    h_items = [x.strip() for x in hidden.replace(";", ",").split(",") if x.strip()]
    a_items = [x.strip() for x in alpha.replace(";", ",").split(",") if x.strip()]
    try:
        sizes = [tuple(int(h) for h in s.replace("–", "-").split("-")) for s in h_items] or sorted(
            {g["hidden_layer_sizes"] for g in DEFAULT_MLP_GRID})
    except ValueError as err:
        raise DataError(f"MLP hidden sizes: '{hidden}' is not understood. Give layer widths joined by '-' and "
                        "separated by commas, e.g. 64, 64-32.") from err
    try:
        alphas = [float(a) for a in a_items] or sorted({g["alpha"] for g in DEFAULT_MLP_GRID})
    except ValueError as err:
        raise DataError(f"MLP L2 penalties: '{alpha}' is not understood. Give numbers separated by commas, e.g. "
                        "1e-4, 1e-2.") from err
    if any(h < 1 for s in sizes for h in s):
        raise DataError("MLP hidden layer widths must be positive whole numbers.")
    if any(not (a >= 0 and math.isfinite(a)) for a in alphas):
        raise DataError("MLP L2 penalties must be zero or positive numbers.")
    return tuple({"hidden_layer_sizes": s, "alpha": a} for s in sizes for a in alphas)


# ================================================================================================================


class NoteClassifierPanel(AuditPage):
    """Form on the left (notes file, columns, encoder, settings, two actions); results on the right. The page of the
    ``note_classifiers`` audit kind (the encoder comparison), on the Model tab."""

    TAB, TITLE, ATTR, AFTER = "model", "Note classifiers", "notes_panel", "Language models"
    RUN_TEXT = "Compare encoders"
    STORED_TITLE = "Stored encoder comparisons"
    FAIL_TITLE = "Note classifiers"
    STATUS_LINES = 4
    FORM_WIDTH, SPLIT = 450, (480, 860)

    def __init__(self, window) -> None:
        self.notes_path: Path | None = None
        self._columns: list[str] = []
        self._folders: list[str] = []  # encoder folders chosen here (not registered in the project)
        self._models: dict = {}
        self.last_predictions_id: int | None = None
        super().__init__(window)

    # ---- form ----------------------------------------------------------------------------------------------
    def build_form(self) -> QWidget:
        inner = QWidget(self)
        iv = QVBoxLayout(inner)

        notes_box = QGroupBox("Notes", inner)
        form = QFormLayout(notes_box)
        self.notes_edit = QLineEdit(notes_box)
        self.notes_edit.setPlaceholderText("CSV/Parquet: one note per row")
        self.notes_edit.editingFinished.connect(self._notes_edited)
        self.notes_button = QPushButton("Browse…", notes_box)
        self.notes_button.clicked.connect(self.choose_notes_file)
        row = QHBoxLayout()
        row.addWidget(self.notes_edit, 1)
        row.addWidget(self.notes_button)
        form.addRow("Notes file", row)
        self.text_combo = QComboBox(notes_box)
        self.text_combo.currentIndexChanged.connect(self.update_buttons)
        form.addRow("Text column", self.text_combo)
        self.tasks_list = CheckList(notes_box, max_visible_rows=4)
        self.tasks_list.setToolTip("0/1 outcome columns; one classifier is trained per task.")
        self.tasks_list.changed.connect(self.update_buttons)
        form.addRow("Tasks (0/1 labels)", self.tasks_list)
        self.patient_combo = QComboBox(notes_box)
        self.patient_combo.setToolTip("Notes of one patient stay in one split (train, validation or test).")
        form.addRow("Patient id", self.patient_combo)
        self.attributes_list = CheckList(notes_box, max_visible_rows=4)
        self.attributes_list.setToolTip("Protected attributes carried into the predictions for the group audit.")
        self.attributes_list.changed.connect(self._attributes_changed)
        form.addRow("Protected attributes", self.attributes_list)
        self.continuous_list = CheckList(notes_box, max_visible_rows=3)
        self.continuous_list.setToolTip("Continuous attributes (e.g. age) carried into the predictions.")
        form.addRow("Continuous attributes", self.continuous_list)
        self.numeric_list = CheckList(notes_box, max_visible_rows=3)
        self.numeric_list.setToolTip("Numeric columns appended to the encoder features (e.g. acuity scores), "
                                     "standardised on the training notes. Missing values are not allowed.")
        form.addRow("Numeric features", self.numeric_list)
        iv.addWidget(notes_box)

        settings_box = QGroupBox("Classifier settings", inner)
        sf = QFormLayout(settings_box)
        self.seed_spin = QSpinBox(settings_box)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(self.window_.settings.seed)
        sf.addRow("Seed", self.seed_spin)
        self.length_spin = QSpinBox(settings_box)
        self.length_spin.setRange(0, 8192)
        self.length_spin.setSpecialValueText("the model's maximum")
        self.length_spin.setToolTip("Window length in tokens, [CLS] and [SEP] included.")
        sf.addRow("Window length", self.length_spin)
        self.stride_spin = QSpinBox(settings_box)
        self.stride_spin.setRange(0, 8192)
        self.stride_spin.setSpecialValueText("no overlap")
        self.stride_spin.setToolTip("Tokens between window starts; smaller than the window means overlapping "
                                    "windows.")
        sf.addRow("Window stride", self.stride_spin)
        self.windows_spin = QSpinBox(settings_box)
        self.windows_spin.setRange(1, 1000)
        self.windows_spin.setValue(10)
        self.windows_spin.setToolTip("At most this many windows per note (001: 10); the rest is truncated and "
                                     "counted.")
        sf.addRow("Windows per note (max)", self.windows_spin)
        self.hidden_edit = QLineEdit("64, 64-32", settings_box)
        self.hidden_edit.setToolTip("MLP architectures to try: layer widths joined by '-', separated by commas.")
        sf.addRow("MLP hidden sizes", self.hidden_edit)
        self.alpha_edit = QLineEdit("1e-4, 1e-2", settings_box)
        self.alpha_edit.setToolTip("L2 penalties to try; every architecture is tried with every penalty.")
        sf.addRow("MLP L2 penalties", self.alpha_edit)
        self.max_iter_spin = QSpinBox(settings_box)
        self.max_iter_spin.setRange(10, 10000)
        self.max_iter_spin.setValue(200)
        sf.addRow("MLP epochs (max)", self.max_iter_spin)
        note = note_label("Splits 60/15/25 % train/validation/test, patient-disjoint. MLP and merge constant c chosen "
                          "by validation AUPRC, threshold by best validation F1.", settings_box)
        sf.addRow(note)
        iv.addWidget(settings_box)

        train_box = QGroupBox("Train classifiers", inner)
        tf = QFormLayout(train_box)
        self.encoder_combo = QComboBox(train_box)
        self.encoder_combo.setPlaceholderText("Open a language model or choose a folder")
        size_combos(self.encoder_combo, chars=18, on_change=self.update_buttons)
        self.folder_button = QPushButton("Folder…", train_box)
        self.folder_button.setToolTip("Use a local masked-LM folder (config.json, weights, tokenizer) directly.")
        self.folder_button.clicked.connect(lambda: self.choose_encoder_folder())
        row = QHBoxLayout()
        row.addWidget(self.encoder_combo, 1)
        row.addWidget(self.folder_button)
        tf.addRow("Encoder", row)
        hint = note_label("Train classifiers: one per task on this encoder's features; the predictions go into the "
                          "project for the Audit tab.", train_box)
        tf.addRow(hint)
        iv.addWidget(train_box)

        cmp_box = QGroupBox("Compare encoders (baseline vs debiased)", inner)
        cf = QFormLayout(cmp_box)
        self.baseline_combo = QComboBox(cmp_box)
        self.debiased_combo = QComboBox(cmp_box)
        size_combos(self.baseline_combo, self.debiased_combo, chars=18, on_change=self.update_buttons)
        cf.addRow("Baseline encoder", self.baseline_combo)
        cf.addRow("Debiased encoder", self.debiased_combo)
        self.attribute_combo = QComboBox(cmp_box)
        self.attribute_combo.setToolTip("Gaps are audited across this attribute, and the probe tries to recover it "
                                        "from the features.")
        self.attribute_combo.currentIndexChanged.connect(self.update_buttons)
        cf.addRow("Attribute", self.attribute_combo)
        self.nboot_spin = QSpinBox(cmp_box)
        self.nboot_spin.setRange(100, 100_000)
        self.nboot_spin.setSingleStep(100)
        self.nboot_spin.setValue(max(100, self.window_.settings.n_boot))
        cf.addRow("Bootstrap replicates", self.nboot_spin)
        self.min_group_spin = QSpinBox(cmp_box)
        self.min_group_spin.setRange(1, 100_000)
        self.min_group_spin.setValue(self.window_.settings.min_group_size)
        self.min_group_spin.setToolTip("Smaller groups (on the test notes) are listed, not tested.")
        cf.addRow("Minimum group size", self.min_group_spin)
        iv.addWidget(cmp_box)
        iv.addStretch(1)

        self.train_button = push_button("Train classifiers", self, self.train,
                                        "Train one classifier per task on the encoder's frozen features (a job).")
        self.compare_button = self.run_button
        self.compare_button.setToolTip("Baseline vs debiased: classifiers, group gaps and attribute probe per "
                                       "encoder, stored as one audit (a job).")
        return inner

    def run_buttons(self) -> tuple:
        return (self.train_button, self.run_button)

    def build_results(self) -> QWidget:
        self.result_tabs = QTabWidget(self)

        # classifiers page
        page = QWidget(self)
        pv = QVBoxLayout(page)
        top = QHBoxLayout()
        top.addWidget(QLabel("Note classifiers in the project", page))
        self.model_combo = QComboBox(page)
        self.model_combo.setPlaceholderText("none yet: train classifiers on the left")
        self.model_combo.currentIndexChanged.connect(lambda *_: self.show_model(self.model_combo.currentData()))
        top.addWidget(self.model_combo, 1)
        pv.addLayout(top)
        self.metrics_view = DataFrameView(page, filterable=False, placeholder="Per task: test and validation AUROC "
                                                                              "and AUPRC, the chosen merge constant c, "
                                                                              "MLP and threshold appear here.")
        pv.addWidget(self.metrics_view, 1)
        self.model_info = QTextBrowser(page)
        self.model_info.setMaximumHeight(self.model_info.fontMetrics().lineSpacing() * 5 + 12)
        self.model_info.setFrameShape(QTextBrowser.Shape.NoFrame)
        self.model_info.setStyleSheet("background: transparent;")
        pv.addWidget(self.model_info)
        hint_row = QHBoxLayout()
        self.audit_hint = QLabel("", page)
        self.audit_hint.setWordWrap(True)
        hint_row.addWidget(self.audit_hint, 1)
        self.audit_button = QPushButton("Audit these predictions…", page)
        self.audit_button.setToolTip("Open the Audit tab with this predictions dataset chosen.")
        self.audit_button.clicked.connect(self.open_in_audit_tab)
        hint_row.addWidget(self.audit_button, 0, Qt.AlignmentFlag.AlignTop)
        pv.addLayout(hint_row)
        self.result_tabs.addTab(page, "Classifiers")

        # comparison page
        page = QWidget(self)
        cv = QVBoxLayout(page)
        self.stored_audits(cv, max_height=74)
        self.summary_view = DataFrameView(page, filterable=False, placeholder="Compare a baseline and a debiased "
                                                                              "encoder, or choose a stored "
                                                                              "comparison above.")
        self.performance_view = DataFrameView(page, filterable=False)
        self.gaps_view = DataFrameView(page, filterable=False)
        self.probe_view = DataFrameView(page, filterable=False)
        self.gaps_note = note_label("", page)
        split = QSplitter(Qt.Orientation.Vertical, page)
        for title, view, extra in (("Summary per encoder: mean test AUROC/AUPRC over the tasks, gap verdicts "
                                    "(differ after correction / equivalent / inconclusive), probe", self.summary_view, None),
                                   ("Per task", self.performance_view, None),
                                   ("Gap verdicts per group and measure", self.gaps_view,
                                    self.gaps_note),
                                   ("Attribute probe on the features", self.probe_view, None)):
            box = QGroupBox(title, split)
            bl = QVBoxLayout(box)
            bl.setContentsMargins(4, 4, 4, 4)
            bl.addWidget(view, 1)
            if extra is not None:
                bl.addWidget(extra)
            split.addWidget(box)
        split.setSizes([120, 170, 180, 210])
        cv.addWidget(split, 1)
        self.result_tabs.addTab(page, "Encoder comparison")
        return self.result_tabs

    # ---- project -------------------------------------------------------------------------------------------
    def language_models(self) -> list:
        """The project's masked-LM records."""
        project = self.window_.project
        if project is None:
            return []
        try:
            from fairdesk.jobs.text import language_models
        except ImportError:  # pragma: no cover - text_tasks ships with FairDesk
            return [m for m in project.models() if m.kind == LM_KIND]
        return language_models(project)

    def encoder_items(self) -> list[tuple[str, str]]:
        """``(label, folder)`` of every encoder on offer: project language models, then folders chosen here."""
        items, seen = [], set()
        for m in self.language_models():
            path = m.info.get("path")
            if path and path not in seen:
                seen.add(path)
                items.append((f"{m.name}  (language model #{m.id})", path))
        for path in self._folders:
            if path not in seen:
                seen.add(path)
                items.append((f"{Path(path).name}  (folder)", path))
        return items

    def refresh_form(self) -> None:
        items = self.encoder_items()
        fill_combo(self.encoder_combo, items, default=items[0][1] if items else None)
        fill_combo(self.baseline_combo, items, default=items[0][1] if items else None)
        fill_combo(self.debiased_combo, [(NONE, None)] + items, default=items[1][1] if len(items) > 1 else None)
        self.refresh_models()

    def refresh_models(self, select: int | None = None) -> None:
        project = self.window_.project
        models = [m for m in project.models() if m.kind == NOTE_MODEL_KIND] if project is not None else []
        self._models = {m.id: m for m in models}
        current = select if select is not None else self.model_combo.currentData()
        fill_combo(self.model_combo,
                   [(f"#{m.id}  {m.name}  ({m.created.replace('T', ' ')[:16]})", m.id) for m in models],
                   keep=False, default=current if current in self._models else (models[-1].id if models else None))
        self.show_model(self.model_combo.currentData())

    def show_model(self, model_id) -> None:
        m = getattr(self, "_models", {}).get(model_id)
        if m is None:
            self.metrics_view.set_frame(None)
            self.model_info.setPlainText("")
            self.audit_hint.setText("")
            self.audit_button.setEnabled(False)
            return
        self.metrics_view.set_frame(training_table(m.info.get("metrics") or []))
        text = encoder_text(m.info.get("encoder") or {})
        spec = m.info.get("spec") or {}
        text += f" Seed {m.info.get('seed')}; data SHA-256 {str(m.info.get('data_sha256') or '')[:12]}."
        if spec.get("numeric_columns"):
            text += f" Numeric features: {', '.join(spec['numeric_columns'])}."
        notes = m.info.get("notes") or []
        self.model_info.setPlainText(text + ("" if not notes else " " + " ".join(notes)))
        pred = m.predictions_id
        self.audit_hint.setText(f"The predictions are dataset #{pred} in the project, with column roles set: audit "
                                "them for group gaps on the Audit tab." if pred is not None else "")
        self.audit_button.setEnabled(pred is not None and hasattr(self.window_, "audit_tab"))

    def open_in_audit_tab(self) -> None:
        m = getattr(self, "_models", {}).get(self.model_combo.currentData())
        tab = getattr(self.window_, "audit_tab", None)
        if m is None or tab is None:
            return
        self.window_.show_page(tab)
        combo = getattr(tab, "dataset_combo", None)
        if combo is not None and combo.findData(m.predictions_id) >= 0:
            combo.setCurrentIndex(combo.findData(m.predictions_id))

    # ---- notes file --------------------------------------------------------------------------------------------
    def choose_notes_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose the notes table", self.window_.settings.last_dir(),
                                              "Tables (*.csv *.tsv *.parquet *.pq);;All files (*)")
        if path:
            self.window_.settings.set_last_dir(path)
            self.set_notes_file(path)

    def set_notes_file(self, path: str | Path) -> bool:
        """Read the file's header (and first rows), fill the column choices with guesses; False (and an error on
        the status line) when it is not a usable notes table."""
        text = str(path).strip()
        if self.notes_edit.text() != text:
            self.notes_edit.setText(text)
        try:
            sample = notes_sample(text)
        except DataError as err:
            self.notes_path = None
            self._fill_columns([], {})
            self.say(str(err), error=True)
            return False
        guess = guess_note_roles(sample)
        self.notes_path = Path(text).expanduser()
        self._fill_columns([str(c) for c in sample.columns], guess)
        if guess["text"] is None:
            self.say(f"No column of {self.notes_path.name} looks like note text (columns: "
                     f"{', '.join(self._columns)}). Choose the text column, or name it 'text'.", error=True)
            return False
        self.say(f"{self.notes_path.name}: {len(self._columns)} columns. Check the guessed columns, then train or "
                 "compare.")
        return True

    def _notes_edited(self) -> None:
        text = self.notes_edit.text().strip()
        if self.notes_path is None or Path(text).expanduser() != self.notes_path:  # keep the choices made
            self.set_notes_file(text)

    def _fill_columns(self, cols: list[str], guess: dict) -> None:
        self._columns = cols
        text = guess.get("text")
        fill_combo(self.text_combo, [(c, c) for c in cols], keep=False, default=text)
        if text is None:
            self.text_combo.setCurrentIndex(-1)
        patient = guess.get("patient_id")
        fill_combo(self.patient_combo, [(f"{NONE} (every note a different patient)", None)] + [(c, c) for c in cols],
                   keep=False, default=patient)
        others = [c for c in cols if c not in (text, patient)]
        tasks = guess.get("tasks") or []
        self.tasks_list.set_items([c for c in others if c in tasks] + [c for c in others if c not in tasks], tasks)
        attrs = guess.get("attributes") or []
        self.attributes_list.set_items(attrs + [c for c in others if c not in attrs and c not in tasks], attrs)
        candidates = guess.get("numeric_candidates", others)
        cont = guess.get("continuous_attributes") or []
        self.continuous_list.set_items(cont + [c for c in candidates if c not in cont], cont)
        numeric = guess.get("numeric_columns") or []
        self.numeric_list.set_items(numeric + [c for c in candidates if c not in numeric], numeric)
        self._attributes_changed()

    def _attributes_changed(self, *args) -> None:
        attrs = self.attributes_list.checked() or [c for c in self.attributes_list.items()]
        fill_combo(self.attribute_combo, [(c, c) for c in attrs], default=attrs[0] if attrs else None)
        self.update_buttons()

    # ---- encoders ----------------------------------------------------------------------------------------------
    def choose_encoder_folder(self, path: str | Path | None = None, target: QComboBox | None = None) -> str | None:
        """Offer a local masked-LM folder as an encoder (checked, not loaded); it becomes the current encoder of
        ``target`` (default: the training encoder)."""
        if path is None:
            path = QFileDialog.getExistingDirectory(self, "Choose a masked language model folder",
                                                    self.window_.settings.last_dir())
            if not path:
                return None
            self.window_.settings.set_last_dir(path)
        from fairdesk.core.models.mlm import check_model_folder

        try:
            folder = str(check_model_folder(path).resolve())
        except FairDeskError as err:
            self.say(str(err), error=True)
            return None
        if folder not in self._folders:
            self._folders.append(folder)
        self.refresh_project()
        combo = target or self.encoder_combo
        combo.setCurrentIndex(combo.findData(folder))
        self.say(f"Encoder folder {Path(folder).name} added. Register it on the Language models page to keep it "
                   "in the project.")
        return folder

    def _encoder_path(self, combo: QComboBox, role: str) -> str:
        path = combo.currentData()
        if not path:
            raise ModelError(f"Choose the {role}: a language model of the project (Language models page) or a local "
                             "masked-LM folder (Folder…).")
        from fairdesk.core.models.mlm import check_model_folder

        return str(check_model_folder(path))

    # ---- specification -----------------------------------------------------------------------------------------
    def spec(self, *, attribute: str | None = None):
        """The :class:`NoteClassifierSpec` of the form, after checking the notes file's header again (it may have
        changed on disk). Raises :class:`FairDeskError` saying what to fix."""
        from fairdesk.core.models.note_classifier import RESERVED, NoteClassifierSpec

        if self.notes_path is None:
            raise DataError("Choose a notes file first (CSV or Parquet, one note per row).")
        cols = notes_header(self.notes_path)
        text = self.text_combo.currentData()
        tasks = self.tasks_list.checked()
        patient = self.patient_combo.currentData()
        attrs = [c for c in self.attributes_list.checked() if c != patient]
        if attribute and attribute not in attrs:
            attrs.append(attribute)
        cont = [c for c in self.continuous_list.checked() if c not in attrs and c != patient]
        numeric = self.numeric_list.checked()
        if not text:
            raise DataError("Choose the text column (the column that holds the notes).")
        if not tasks:
            raise DataError("Tick at least one task: a 0/1 label column of the notes.")
        if text in tasks:
            raise DataError(f"The text column '{text}' cannot also be a task.")
        overlap = sorted(set(tasks) & (set(attrs) | set(cont) | ({patient} if patient else set())))
        if overlap:
            raise DataError(f"{', '.join(overlap)} cannot be both a task and an attribute or the patient id.")
        need = [("text", text)] + [("task", t) for t in tasks] + ([("patient id", patient)] if patient else [])
        need += [("attribute", a) for a in attrs] + [("continuous attribute", c) for c in cont]
        need += [("numeric feature", c) for c in numeric]
        missing = [f"{kind} '{c}'" for kind, c in need if c not in cols]
        if missing:
            raise DataError(f"These columns are not in {self.notes_path.name}: {'; '.join(missing)} (it has "
                            f"{', '.join(cols[:12])}{' …' if len(cols) > 12 else ''}). Choose the file again or "
                            "other columns.")
        clash = sorted(set(RESERVED) & (set(attrs) | set(cont)))
        if clash:
            raise DataError(f"Attribute column(s) {', '.join(clash)} have names the predictions table uses itself "
                            f"({', '.join(RESERVED)}); rename them in the notes file.")
        length, stride = self.length_spin.value() or None, self.stride_spin.value() or None
        if length is not None and length < 8:
            raise DataError("The window length must be at least 8 tokens (or the model's maximum).")
        if length is not None and stride is not None and stride > length - 2:
            raise DataError(f"The stride ({stride}) is longer than a window ({length - 2} tokens after [CLS] and "
                            "[SEP]): text between windows would be skipped. Choose a smaller stride.")
        return NoteClassifierSpec(tasks=tasks, text_column=text, patient_id=patient, attributes=attrs,
                                  continuous_attributes=cont, numeric_columns=numeric, max_length=length,
                                  stride=stride, max_windows=self.windows_spin.value(),
                                  mlp_grid=parse_mlp_grid(self.hidden_edit.text(), self.alpha_edit.text()),
                                  max_iter=self.max_iter_spin.value(), seed=self.seed_spin.value())

    # ---- actions -----------------------------------------------------------------------------------------------
    def train(self):
        """Start the training job; returns it, or None (with the reason on the status line)."""
        project = self.job_project()
        if project is None:
            return None
        try:
            spec = self.spec()
            encoder = self._encoder_path(self.encoder_combo, "encoder")
        except FairDeskError as err:
            self.say(str(err), error=True)
            return None
        project_path, notes, threads = project.path, self.notes_path, self.window_.settings.threads
        name = Path(encoder).name

        def work(progress, cancel):
            _threads(threads)
            from fairdesk.jobs.notes import train_note_classifiers

            return train_note_classifiers(project_path, notes, encoder, spec, progress=progress, cancel=cancel)

        def done(job) -> None:
            model_id, pred_id = job.result
            self.last_predictions_id = pred_id
            self.say(f"Trained {len(spec.tasks)} note classifier(s) on {name} (model #{model_id}). The predictions "
                     f"are dataset #{pred_id} in the project: audit them on the Audit tab.")
            self.window_.notify_project_changed(self)
            self.refresh_models(select=model_id)
            self.result_tabs.setCurrentIndex(0)

        return self.start_job(f"Train note classifiers on {name}", work, on_done=done,
                              running=f"Training note classifiers on {name}…")

    def compare(self):
        """Start the encoder comparison job; returns it, or None (with the reason on the status line)."""
        return self.run_audit()

    def audit_run(self) -> AuditRun:
        attribute = self.attribute_combo.currentData()
        if not attribute:
            raise DataError("Choose the protected attribute to compare the encoders on (tick one under "
                            "Protected attributes).")
        spec = self.spec(attribute=attribute)
        encoders = {"baseline": self._encoder_path(self.baseline_combo, "baseline encoder")}
        if self.debiased_combo.currentData():
            encoders["debiased"] = self._encoder_path(self.debiased_combo, "debiased encoder")
            if Path(encoders["debiased"]).resolve() == Path(encoders["baseline"]).resolve():
                raise ModelError("The baseline and the debiased encoder are the same folder; choose two "
                                 "different encoders (or (none) for the debiased one).")
        title = " vs ".join(Path(p).name for p in encoders.values())
        return AuditRun(f"Compare encoders {title}",
                        args=(self.notes_path, encoders, list(spec.tasks), attribute, spec),
                        kwargs=dict(n_boot=self.nboot_spin.value(), min_group_size=self.min_group_spin.value(),
                                    name=f"Encoders {title}: {attribute}"),
                        running=f"Comparing encoders {title} on {attribute}…",
                        torch_threads=self.window_.settings.threads)

    def audit_stored(self, audit_id: int) -> None:
        self.say(f"Comparison stored as audit #{audit_id}. Export PDF… writes its report.")
        self.window_.notify_project_changed(self)
        self.refresh_audits(select=audit_id)
        self.result_tabs.setCurrentIndex(1)

    def _ready(self) -> bool:
        has_notes = self.notes_path is not None and bool(self._columns)
        return has_notes and self.text_combo.currentData() is not None and bool(self.tasks_list.checked())

    def form_ready(self) -> bool:
        return (self._ready() and self.baseline_combo.currentData() is not None
                and self.attribute_combo.currentData() is not None)

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        self.train_button.setEnabled(self._ready() and not self.busy and self.encoder_combo.currentData() is not None)

    # ---- stored comparisons ------------------------------------------------------------------------------------
    def verdict_counts(self, doc: dict) -> dict[str, int]:
        """Unique group-gap comparisons by verdict, summed over the encoders compared (each encoder's group audit
        counted as the PDF counts it)."""
        from fairdesk.core.audits.groups import GroupAuditResult, verdict_counts

        out = {"differs": 0, "equivalent": 0, "inconclusive": 0}
        for audit in (doc.get("audits") or {}).values():
            counts = verdict_counts(GroupAuditResult.from_dict(audit))
            for key in out:
                out[key] += int(counts.get(key, 0))
        return out

    def show_results(self, doc) -> None:
        """Fill the comparison tables from a stored ``note_classifiers`` audit."""
        self.summary_view.set_frame(comparison_summary(doc) if doc else None)
        self.performance_view.set_frame(comparison_performance(doc) if doc else None)
        self.gaps_view.set_frame(comparison_gaps(doc) if doc else None)
        self.probe_view.set_frame(comparison_probe(doc) if doc else None)
        self.gaps_note.setText(" ".join(t for t in (GAPS_NOTE, dropped_groups_text(doc)) if t) if doc else "")
        self.gaps_note.setVisible(bool(doc))
