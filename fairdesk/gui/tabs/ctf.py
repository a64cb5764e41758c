"""Counterfactual token fairness (METHODS §5): the Audit-tab page of audit kind ``ctf``.

Would a text classifier's score on a note change if "he" were "she", with nothing else changed? The form chooses a
model (a text classifier stored in the project, or a local folder: a FairDesk text CNN or a Hugging Face
sequence-classification model), the texts (a stored text dataset or a CSV/Parquet file), its columns, the term sets
and the statistics; Run calls :func:`fairdesk.jobs.ctf.audit_ctf` (the job ``fairdesk-cli audit ctf`` runs). Models
FairDesk cannot run: export the pairs (:func:`~fairdesk.jobs.ctf.export_ctf_pairs`), score them elsewhere, import
the scores (:func:`~fairdesk.jobs.ctf.audit_ctf_scores`); both run as the page's job.

Results come from the stored document only: the plain-language summary is the report's own summary section
(:func:`fairdesk.core.reports.ctf.report_tree`, with the user's small-cell k), then the CTF gaps, flip rates per
term pair, TPR/TNR by term, the terms outside the model's vocabulary, the stored example pairs in a diff viewer
and the comparison across the project's stored CTF audits (:func:`fairdesk.core.audits.ctf_compare.ctf_comparison`).
torch and the report modules load inside the jobs or when a result is first shown.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QSpinBox, QSplitter, QTabWidget, QTextBrowser, QVBoxLayout, QWidget)

from fairdesk.core.escape import html_text
from fairdesk.core.data.roles import LABEL_NAMES, TEXT_NAMES, first_named, is_binary
from fairdesk.core.errors import DataError, FairDeskError, ModelError
from fairdesk.core.kinds import DATASET_KINDS, MODEL_KINDS
from fairdesk.gui.tabs.base import AuditPage, AuditRun
from fairdesk.gui.widgets.panel_parts import fill_combo, note_label, push_button, size_combos
from fairdesk.gui.widgets.tables import DataFrameView
from fairdesk.gui.widgets.text_diff import TextDiffViewer

MODEL_KIND = MODEL_KINDS["text_classifier"].name
TEXT_KIND = DATASET_KINDS["text"].name
NONE = "(none)"
TABLE_FILTER = "Tables (*.csv *.tsv *.parquet *.pq);;All files (*)"
TERM_SETS = [("Dixon et al., train terms (dixon_train)", "dixon_train"), ("Clinical gender terms", "gender"),
             ("Race and ethnicity terms", "race")]
HELD_OUT_SETS = [("Dixon et al., held-out terms (dixon_held_out)", "dixon_held_out")]
RECORDED = "__recorded__"  # the term set the model records (audit_ctf's default)
SPLIT_TITLE = {"train": "train terms", "held_out": "held-out terms"}
SUBSET_TITLE = {"all": "all texts", "label_0": "label-0 texts", "label_1": "label-1 texts"}
SUMMARY_CSS = ("p { margin: 0 0 6px 0; } ul { margin: 0 0 6px 0; } li { margin: 0 0 2px 0; } "
               ".note { color: #555555; } .finding { font-weight: bold; }")


# ================================================================================================================
# Result tables (pure functions of the stored document, so tests can check them)


def _num(value) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def _ci(low, high) -> str:
    lo, hi = _num(low), _num(high)
    return "—" if math.isnan(lo) or math.isnan(hi) else f"{lo:.3f} to {hi:.3f}"  # the tables' missing mark


def _verdict(verdict: str | None, margin: float) -> str:
    if not verdict:
        return "—"
    return f"equivalent within ±{margin:g}" if verdict.startswith("equivalent") else verdict


def gaps_table(doc: dict) -> pd.DataFrame:
    """The CTF gaps: one row per term split × text subset, with CI, control band, excess and verdict."""
    margin = _num((doc.get("settings") or {}).get("margin"))
    rows = [{"Terms": SPLIT_TITLE.get(r.get("terms"), r.get("terms")),
             "Texts": SUBSET_TITLE.get(r.get("subset"), r.get("subset")), "n": r.get("n"),
             "Pairs": r.get("n_pairs"), "CTF gap": _num(r.get("value")), "95% CI": _ci(r.get("ci_low"),
                                                                                         r.get("ci_high")),
             "Control band": _num(r.get("control")), "Control 95% CI": _ci(r.get("control_ci_low"),
                                                                           r.get("control_ci_high")),
             "Excess": _num(r.get("excess")), "Excess 95% CI": _ci(r.get("excess_ci_low"), r.get("excess_ci_high")),
             "Verdict": _verdict(r.get("verdict"), 0.02 if math.isnan(margin) else margin),
             "Why": r.get("reason") or ""} for r in doc.get("ctf_gap") or []]
    return pd.DataFrame(rows, columns=["Terms", "Texts", "n", "Pairs", "CTF gap", "95% CI", "Control band",
                                       "Control 95% CI", "Excess", "Excess 95% CI", "Verdict", "Why"])


def term_gaps_table(doc: dict) -> pd.DataFrame:
    """One row per identity term × term split × text subset: its gap, interval, change towards it, excess over the
    control band, corrected p and verdict (terms that differ first)."""
    margin = _num((doc.get("settings") or {}).get("margin"))
    recs = sorted(doc.get("term_gaps") or [], key=lambda t: (t.get("verdict") != "differs", t.get("terms", ""),
                                                             t.get("subset", ""), -_num(t.get("value"))))
    rows = [{"Terms": SPLIT_TITLE.get(t.get("terms"), t.get("terms")),
             "Texts": SUBSET_TITLE.get(t.get("subset"), t.get("subset")), "Term": t.get("term"), "n": t.get("n"),
             "Contexts": t.get("n_contexts"), "Gap": _num(t.get("value")), "95% CI": _ci(t.get("ci_low"),
                                                                                         t.get("ci_high")),
             "Towards": _num(t.get("mean_change_towards")), "Excess": _num(t.get("excess")),
             "q (differs)": _num(t.get("q_differs")), "q (equivalent)": _num(t.get("q_equivalence")),
             "Verdict": _verdict(t.get("verdict"), 0.02 if math.isnan(margin) else margin),
             "Why": t.get("reason") or ""} for t in recs]
    return pd.DataFrame(rows, columns=["Terms", "Texts", "Term", "n", "Contexts", "Gap", "95% CI", "Towards",
                                       "Excess", "q (differs)", "q (equivalent)", "Verdict", "Why"])


def pairs_table(doc: dict) -> pd.DataFrame:
    """Flip rates per term pair and direction (largest mean |change| first within each split)."""
    rows = [{"Terms": SPLIT_TITLE.get(p.get("terms"), p.get("terms")), "Term a": p.get("term"),
             "Term a′": p.get("counterfactual_term"), "n": p.get("n"), "Mean |Δ|": _num(p.get("mean_abs_change")),
             "Mean Δ": _num(p.get("mean_change")), "Flip a→a′": _num(p.get("flip_rate")),
             "95% CI": _ci(p.get("flip_ci_low"), p.get("flip_ci_high")), "Up (0→1)": _num(p.get("flip_up_rate")),
             "Down (1→0)": _num(p.get("flip_down_rate")), "n a′→a": p.get("reverse_n"),
             "Flip a′→a": _num(p.get("reverse_flip_rate"))} for p in doc.get("pairs") or []]
    return pd.DataFrame(rows, columns=["Terms", "Term a", "Term a′", "n", "Mean |Δ|", "Mean Δ", "Flip a→a′",
                                       "95% CI", "Up (0→1)", "Down (1→0)", "n a′→a", "Flip a′→a"])


def rate_gaps_table(doc: dict) -> pd.DataFrame:
    """The mean TPR and TNR gaps over term pairs per split (002 Table 3)."""
    gr = doc.get("group_rates") or {}
    rows = [{"Terms": SPLIT_TITLE.get(g.get("terms"), g.get("terms")), "Mean TPR gap": _num(g.get("tpr_gap")),
             "Term pairs (TPR)": g.get("n_pairs_tpr"), "Mean TNR gap": _num(g.get("tnr_gap")),
             "Term pairs (TNR)": g.get("n_pairs_tnr")} for g in gr.get("gaps") or []]
    return pd.DataFrame(rows, columns=["Terms", "Mean TPR gap", "Term pairs (TPR)", "Mean TNR gap",
                                       "Term pairs (TNR)"])


def term_rates_table(doc: dict) -> pd.DataFrame:
    """TPR and TNR per term over the texts mentioning it."""
    rows = [{"Terms": SPLIT_TITLE.get(r.get("terms"), r.get("terms")), "Term": r.get("term"), "n": r.get("n"),
             "n label 1": r.get("n_pos"), "TPR": _num(r.get("tpr")), "TPR 95% CI": _ci(r.get("tpr_ci_low"),
                                                                                     r.get("tpr_ci_high")),
             "n label 0": r.get("n_neg"), "TNR": _num(r.get("tnr")),
             "TNR 95% CI": _ci(r.get("tnr_ci_low"), r.get("tnr_ci_high"))}
            for r in (doc.get("group_rates") or {}).get("terms") or []]
    return pd.DataFrame(rows, columns=["Terms", "Term", "n", "n label 1", "TPR", "TPR 95% CI", "n label 0", "TNR",
                                       "TNR 95% CI"])


def unknown_table(doc: dict) -> pd.DataFrame:
    """The term forms outside the model's vocabulary, per split."""
    rows = [{"Terms": SPLIT_TITLE.get(split, split), "Term form": t}
            for split, terms in (doc.get("unknown_terms") or {}).items() if isinstance(terms, list) for t in terms]
    return pd.DataFrame(rows, columns=["Terms", "Term form"])


def unknown_text(doc: dict) -> str:
    """One sentence on the terms outside the model's vocabulary."""
    unknown = doc.get("unknown_terms")
    if not unknown:
        return ("Not checked: the scores were computed outside FairDesk, so the model's vocabulary is unknown."
                if (doc.get("model") or {}).get("kind") == "imported scores" else
                "Not recorded in this audit.")
    held = unknown.get("held_out") or []
    train = unknown.get("train") or []
    if not held and not train:
        return "Every term form of the audited term sets is in the model's vocabulary."
    parts = []
    if held:
        parts.append(f"The model's vocabulary misses {len(held)} held-out term form(s)")
    if train:
        parts.append(f"{len(train)} train term form(s)" if held else
                     f"The model's vocabulary misses {len(train)} train term form(s)")
    return (" and ".join(parts) + ": the model reads them as one unknown token, so swapping two of them cannot change "
            "its score — a CTF gap of 0 among them means nothing, not fairness.")


def summary_html(doc: dict, suppress_k: int) -> str:
    """The report's summary section (:func:`fairdesk.core.reports.ctf.report_tree`) as HTML: the same sentences
    as the PDF, escaped; bullets as a list, notes muted."""
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.ctf import report_tree

    tree = report_tree(doc, ReportSettings(suppress_k=int(suppress_k)))
    section = next((s for s in tree.sections if s.key == "summary"), None)
    out, bullets = [], []

    def flush() -> None:
        if bullets:
            out.append("<ul>" + "".join(f"<li>{b}</li>" for b in bullets) + "</ul>")
            bullets.clear()

    for block in (section.blocks if section is not None else []):
        text = getattr(block, "text", None)
        if text is None:
            continue
        text = html_text(str(text))
        style = getattr(block, "style", "body")
        if style == "bullet":
            bullets.append(text)
            continue
        flush()
        cls = {"note": "note", "finding": "finding"}.get(style, "")
        out.append(f'<p class="{cls}">{text}</p>' if cls else f"<p>{text}</p>")
    flush()
    return f"<html><head><style>{SUMMARY_CSS}</style></head><body>{''.join(out)}</body></html>"


# ================================================================================================================
# Reading a table's columns (GUI thread: cheap)


def table_columns(path: str | Path) -> tuple[list[str], pd.DataFrame]:
    """The columns and first rows of a CSV/TSV/Parquet file. Raises :class:`DataError`."""
    from fairdesk.core.data.loaders import load_table

    p = Path(path).expanduser()
    if not p.is_file():
        raise DataError(f"The file {p} does not exist. Choose a CSV or Parquet table with a text column.")
    head = load_table(p, nrows=200)
    return [str(c) for c in head.columns], head


def guess_columns(columns: list[str], roles: dict | None = None, head: pd.DataFrame | None = None) -> tuple:
    """``(text column, label column)`` guesses: the stored roles first, then the names of
    :mod:`fairdesk.core.data.roles`; a label guess must hold only 0/1 where rows are at hand."""
    roles = roles or {}
    text = roles.get("text") if roles.get("text") in columns else first_named(columns, TEXT_NAMES)
    label = roles.get("label") if roles.get("label") in columns else first_named(columns, LABEL_NAMES)
    if label is not None and head is not None and label in head.columns and not is_binary(head[label]):
        label = None
    if label == text:
        label = None
    return text, label


# ================================================================================================================


class CTFAuditPage(AuditPage):
    """Form on the left (model, texts, terms, statistics; export / import for models FairDesk cannot run), the
    stored CTF audits, their summary and result tabs on the right."""

    TITLE, ATTR = "Counterfactual text", "ctf_page"
    RUN_TEXT = "Run audit"
    STORED_TITLE = "Stored counterfactual audits"
    STATUS_LINES = 3
    FORM_WIDTH, SPLIT = 430, (450, 900)

    def __init__(self, window) -> None:
        self._model_folders: list[str] = []
        self._data_files: list[str] = []
        self._term_files: list[str] = []
        self._held_files: list[str] = []
        self._doc_cache: dict[int, dict] = {}
        super().__init__(window)

    # ---- form ----------------------------------------------------------------------------------------------
    def build_form(self) -> QWidget:
        inner = QWidget(self)
        iv = QVBoxLayout(inner)

        model_box = QGroupBox("Model", inner)
        mf = QFormLayout(model_box)
        self.model_combo = QComboBox(model_box)
        self.model_combo.setPlaceholderText("Train one on the Model tab or choose a folder")
        size_combos(self.model_combo, chars=20)
        self.model_button = push_button("Folder…", model_box, self.choose_model_folder,
                                        "A local folder: a FairDesk text CNN or a Hugging Face sequence-classification "
                                        "model (config.json, weights, tokenizer). Nothing is downloaded.")
        row = QHBoxLayout()
        row.addWidget(self.model_combo, 1)
        row.addWidget(self.model_button)
        mf.addRow("Text classifier", row)
        iv.addWidget(model_box)

        data_box = QGroupBox("Texts", inner)
        df = QFormLayout(data_box)
        self.data_combo = QComboBox(data_box)
        self.data_combo.setPlaceholderText("A stored text dataset or a file")
        size_combos(self.data_combo, chars=20, on_change=self._data_changed)
        self.data_button = push_button("File…", data_box, self.choose_data_file,
                                       "A CSV or Parquet table with one text per row (and optionally a 0/1 label).")
        row = QHBoxLayout()
        row.addWidget(self.data_combo, 1)
        row.addWidget(self.data_button)
        df.addRow("Data", row)
        self.text_combo = QComboBox(data_box)
        self.text_combo.setToolTip("The column holding the texts (notes).")
        size_combos(self.text_combo, chars=16)
        df.addRow("Text column", self.text_combo)
        self.label_combo = QComboBox(data_box)
        self.label_combo.setToolTip("Optional 0/1 labels: the CTF gap per label, AUROC and TPR/TNR by term.")
        size_combos(self.label_combo, chars=16)
        df.addRow("Label column", self.label_combo)
        iv.addWidget(data_box)

        terms_box = QGroupBox("Identity terms", inner)
        tf = QFormLayout(terms_box)
        self.terms_combo = QComboBox(terms_box)
        size_combos(self.terms_combo, chars=20)
        self.terms_button = push_button("File…", terms_box, self.choose_terms_file,
                                        "A text file with one term per line (multi-word terms allowed; terms of one "
                                        "group on one line, separated by commas).")
        row = QHBoxLayout()
        row.addWidget(self.terms_combo, 1)
        row.addWidget(self.terms_button)
        tf.addRow("Term set", row)
        self.held_combo = QComboBox(terms_box)
        self.held_combo.setToolTip("Terms the model's remedy never saw: does the remedy generalise to them?")
        size_combos(self.held_combo, chars=20)
        self.held_button = push_button("File…", terms_box, self.choose_held_out_file, "A held-out term file.")
        row = QHBoxLayout()
        row.addWidget(self.held_combo, 1)
        row.addWidget(self.held_button)
        tf.addRow("Held-out terms", row)
        iv.addWidget(terms_box)

        stats_box = QGroupBox("Statistics", inner)
        sf = QFormLayout(stats_box)
        self.margin_spin = QDoubleSpinBox(stats_box)
        self.margin_spin.setDecimals(3)
        self.margin_spin.setRange(0.001, 0.5)
        self.margin_spin.setSingleStep(0.005)
        self.margin_spin.setValue(0.02)
        self.margin_spin.setToolTip("A change in predicted probability this small counts as no change: gaps within "
                                    "±margin are 'equivalent'.")
        sf.addRow("Margin (probability)", self.margin_spin)
        self.nboot_spin = QSpinBox(stats_box)
        self.nboot_spin.setRange(100, 100_000)
        self.nboot_spin.setSingleStep(100)
        self.nboot_spin.setValue(max(100, self.window_.settings.n_boot))
        sf.addRow("Bootstrap replicates", self.nboot_spin)
        self.seed_spin = QSpinBox(stats_box)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(self.window_.settings.seed)
        sf.addRow("Seed", self.seed_spin)
        iv.addWidget(stats_box)

        other_box = QGroupBox("Models FairDesk cannot run", inner)
        ov = QVBoxLayout(other_box)
        other_box.setToolTip("Export the pairs of the texts and terms above, fill their score and "
                             "counterfactual_score columns with the model elsewhere, then import the table: it is "
                             "audited with the statistics above.")
        self.export_pairs_button = push_button("Export pairs for scoring elsewhere…", other_box, self.export_pairs,
                                               "Write the identity and control pairs as CSV (a job).")
        self.import_scores_button = push_button("Import scores…", other_box, self.import_scores,
                                                "Audit a scored pairs table (score and counterfactual_score filled; "
                                                "a job).")
        row = QHBoxLayout()
        row.addWidget(self.export_pairs_button)
        row.addWidget(self.import_scores_button)
        row.addStretch(1)
        ov.addLayout(row)
        iv.addWidget(other_box)
        iv.addStretch(1)
        return inner

    def build_results(self) -> QWidget:
        panel = QWidget(self)
        v = QVBoxLayout(panel)
        v.setContentsMargins(0, 0, 0, 0)
        self.stored_audits(v, max_height=74)
        split = QSplitter(Qt.Orientation.Vertical, panel)
        self.summary = QTextBrowser(split)
        self.summary.setOpenLinks(False)
        self.summary.setPlaceholderText("Run an audit or choose a stored one: the summary in words appears here.")
        split.addWidget(self.summary)
        self.result_tabs = QTabWidget(split)
        gaps = QWidget(self)
        gv = QVBoxLayout(gaps)
        gv.setContentsMargins(0, 0, 0, 0)
        self.gaps_warning = QLabel("", gaps)  # the unknown-terms sentence, where a gap of 0 would read as fair
        self.gaps_warning.setWordWrap(True)
        self.gaps_warning.setTextFormat(Qt.TextFormat.PlainText)
        self.gaps_warning.setStyleSheet("color: #B00020; font-weight: bold; padding: 4px;")
        self.gaps_warning.hide()
        gv.addWidget(self.gaps_warning)
        self.gaps_view = DataFrameView(gaps, filterable=False, placeholder="The CTF gaps per term set and label, "
                                                                           "with the control band and verdicts.")
        gv.addWidget(self.gaps_view, 1)
        self.result_tabs.addTab(gaps, "Gaps")
        self.term_gaps_view = DataFrameView(self, placeholder="The CTF gap of every identity term, with its own "
                                                              "verdict (terms that differ first).")
        self.result_tabs.addTab(self.term_gaps_view, "Gap by term")
        self.pairs_view = DataFrameView(self, placeholder="Flip rates per term pair and direction.")
        self.result_tabs.addTab(self.pairs_view, "Flips per pair")

        rates = QSplitter(Qt.Orientation.Vertical, self)
        self.rate_gaps_view = DataFrameView(rates, filterable=False,
                                            placeholder="Mean TPR/TNR gaps over term pairs (needs labels).")
        self.term_rates_view = DataFrameView(rates, placeholder="TPR and TNR per term (needs labels).")
        rates.addWidget(self.rate_gaps_view)
        rates.addWidget(self.term_rates_view)
        rates.setSizes([90, 260])
        self.result_tabs.addTab(rates, "TPR/TNR by term")

        unknown = QWidget(self)
        uv = QVBoxLayout(unknown)
        self.unknown_label = QLabel("", unknown)
        self.unknown_label.setWordWrap(True)
        self.unknown_label.setTextFormat(Qt.TextFormat.PlainText)
        uv.addWidget(self.unknown_label)
        self.unknown_view = DataFrameView(unknown, filterable=False, placeholder="No term outside the vocabulary.")
        uv.addWidget(self.unknown_view, 1)
        self.unknown_index = self.result_tabs.addTab(unknown, "Unknown terms")

        self.diff_viewer = TextDiffViewer(self)
        self.result_tabs.addTab(self.diff_viewer, "Example pairs")

        compare = QWidget(self)
        cv = QVBoxLayout(compare)
        cv.addWidget(note_label("One row per stored counterfactual audit of this project (002 Tables 1–5): the "
                                "model's training method and λ, AUROC on the audited texts, the CTF gap per term set "
                                "and label, and the mean TPR/TNR gaps over term pairs. Compare audits on the same "
                                "texts and terms.", compare))
        self.compare_view = DataFrameView(compare, filterable=False, placeholder="No stored counterfactual audits.")
        cv.addWidget(self.compare_view, 1)
        self.result_tabs.addTab(compare, "Compare methods")
        split.addWidget(self.result_tabs)
        split.setSizes([230, 420])
        v.addWidget(split, 1)
        return panel

    # ---- project and choices -------------------------------------------------------------------------------
    def model_items(self) -> list[tuple[str, object]]:
        project = self.window_.project
        items = []
        if project is not None:
            for m in project.models():
                if m.kind == MODEL_KIND:
                    method = m.info.get("method") or "?"
                    lam = m.info.get("lambda")
                    extra = f", λ {lam:g}" if str(method).startswith("clp") and isinstance(lam, (int, float)) else ""
                    items.append((f"#{m.id}  {m.name}  ({method}{extra})", m.id))
        items += [(f"{Path(p).name}  (folder)", p) for p in self._model_folders]
        return items

    def data_items(self) -> list[tuple[str, object]]:
        project = self.window_.project
        items = []
        if project is not None:
            items += [(f"#{d.id}  {d.name}  ({d.n_rows:,} rows)", d.id) for d in project.datasets()
                      if d.kind == TEXT_KIND]
        items += [(f"{Path(p).name}  (file)", p) for p in self._data_files]
        return items

    def refresh_form(self) -> None:
        models = self.model_items()
        fill_combo(self.model_combo, models, default=models[-1][1] if models else None)
        data = self.data_items()
        fill_combo(self.data_combo, data)
        self._fill_terms()
        self._data_changed()
        self._doc_cache.clear()

    def _fill_terms(self) -> None:
        fill_combo(self.terms_combo, [("the model's own term set (else dixon_train)", RECORDED)] + TERM_SETS
                   + [(f"{Path(p).name}  (file)", p) for p in self._term_files])
        fill_combo(self.held_combo, [(NONE, None)] + HELD_OUT_SETS
                   + [(f"{Path(p).name}  (file)", p) for p in self._held_files])

    def _data_changed(self, *args) -> None:
        choice = self.data_combo.currentData()
        columns, roles, head = [], None, None
        if isinstance(choice, int) and self.window_.project is not None:
            info = next((d for d in self.window_.project.datasets() if d.id == choice), None)
            if info is not None:
                columns, roles = list(info.columns), info.roles
        elif isinstance(choice, str):
            try:
                columns, head = table_columns(choice)
            except FairDeskError as err:
                self.say(str(err), error=True)
        text, label = guess_columns(columns, roles, head)
        fill_combo(self.text_combo, [(c, c) for c in columns], keep=False, default=text)
        if text is None:
            self.text_combo.setCurrentIndex(-1)
        fill_combo(self.label_combo, [(NONE, None)] + [(c, c) for c in columns], keep=False, default=label)
        if label is None:
            self.label_combo.setCurrentIndex(0)

    def _add_choice(self, store: list[str], path: str, combo: QComboBox, refill) -> None:
        path = str(Path(path).expanduser().resolve())
        if path not in store:
            store.append(path)
        refill()
        idx = combo.findData(path)
        if idx >= 0:
            combo.setCurrentIndex(idx)

    def add_model_folder(self, path: str | Path) -> None:
        """Offer a local model folder (and choose it)."""
        self._add_choice(self._model_folders, str(path), self.model_combo,
                         lambda: fill_combo(self.model_combo, self.model_items()))

    def add_data_file(self, path: str | Path) -> None:
        """Offer a CSV/Parquet file of texts (and choose it; its columns fill the column choices)."""
        self._add_choice(self._data_files, str(path), self.data_combo,
                         lambda: fill_combo(self.data_combo, self.data_items()))
        self._data_changed()

    def add_terms_file(self, path: str | Path, held_out: bool = False) -> None:
        """Offer a term file as the term set (or the held-out set) and choose it."""
        self._add_choice(self._held_files if held_out else self._term_files, str(path),
                         self.held_combo if held_out else self.terms_combo, self._fill_terms)

    def _ask_file(self, title: str, filter_: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(self, title, self.window_.settings.last_dir(), filter_)
        if path:
            self.window_.settings.set_last_dir(path)
        return path or None

    def choose_model_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose a text classifier folder",
                                                self.window_.settings.last_dir())
        if path:
            self.window_.settings.set_last_dir(path)
            self.add_model_folder(path)

    def choose_data_file(self) -> None:
        path = self._ask_file("Choose a table of texts", TABLE_FILTER)
        if path:
            self.add_data_file(path)

    def choose_terms_file(self) -> None:
        path = self._ask_file("Choose a term file", "Text files (*.txt);;All files (*)")
        if path:
            self.add_terms_file(path)

    def choose_held_out_file(self) -> None:
        path = self._ask_file("Choose a held-out term file", "Text files (*.txt);;All files (*)")
        if path:
            self.add_terms_file(path, held_out=True)

    # ---- the job inputs ------------------------------------------------------------------------------------
    def data_inputs(self) -> dict:
        """The texts' part of the form (shared by the audit and the pairs export); raises FairDeskError."""
        data = self.data_combo.currentData()
        if data is None:
            raise DataError("Choose the texts: a stored text dataset, or a CSV/Parquet file with File….")
        text_col = self.text_combo.currentData()
        if not text_col:
            raise DataError("Choose the text column: the column of the table that holds the texts.")
        label_col = self.label_combo.currentData()
        if label_col == text_col:
            raise DataError(f"'{text_col}' cannot be both the text and the label column; choose another label "
                            "column or (none).")
        terms = self.terms_combo.currentData()
        held = self.held_combo.currentData()
        if held is not None and held == terms:
            raise DataError("The held-out terms are the term set itself; choose another held-out set or (none).")
        return {"data": data, "text_col": text_col, "label_col": label_col,
                "terms": None if terms == RECORDED else terms, "held_out_terms": held}

    def audit_run(self) -> AuditRun:
        model = self.model_combo.currentData()
        if model is None:
            raise ModelError("Choose the text classifier: one trained in the project (Model tab) or a local folder "
                             "with Folder….")
        if isinstance(model, str) and not Path(model).is_dir():
            raise ModelError(f"The model folder {model} does not exist any more; choose it again with Folder….")
        d = self.data_inputs()
        if isinstance(d["data"], str) and not Path(d["data"]).is_file():
            raise DataError(f"The file {d['data']} does not exist any more; choose it again with File….")
        kwargs = {"label_col": d["label_col"], "terms": d["terms"], "held_out_terms": d["held_out_terms"],
                  "margin": float(self.margin_spin.value()), "n_boot": int(self.nboot_spin.value()),
                  "seed": int(self.seed_spin.value())}
        name = self.model_combo.currentText().strip()
        return AuditRun(f"Counterfactual audit: {name}", args=(model, d["data"], d["text_col"]), kwargs=kwargs,
                        running="Running the counterfactual audit…", torch_threads=self.window_.settings.threads)

    # ---- export / import -----------------------------------------------------------------------------------
    def export_pairs(self, path: str | Path | None = None):
        """Write the counterfactual pairs of the chosen texts and terms to score elsewhere (a job); returns it."""
        project = self.job_project()
        if project is None:
            return None
        try:
            d = self.data_inputs()
            if d["terms"] is None:
                raise DataError("Choose a term set for the export (the pairs do not depend on a model, so 'the "
                                "model's own term set' does not apply).")
        except FairDeskError as err:
            self.say(str(err), error=True)
            return None
        if path is None:
            suggested = Path(self.window_.settings.last_dir()) / "ctf-pairs.csv"
            path, _ = QFileDialog.getSaveFileName(self, "Export the counterfactual pairs", str(suggested),
                                                  "CSV (*.csv)")
            if not path:
                return None
            self.window_.settings.set_last_dir(path)
        path, project_path = Path(path), project.path

        def work(progress, cancel):
            from fairdesk.jobs.ctf import export_ctf_pairs

            return export_ctf_pairs(project_path, d["data"], d["text_col"], path, label_col=d["label_col"],
                                    terms=d["terms"], held_out_terms=d["held_out_terms"],
                                    seed=int(self.seed_spin.value()), progress=progress, cancel=cancel)

        def done(job) -> None:
            r = job.result
            self.say(f"{r['rows']:,} pairs ({r['identity']:,} identity, {r['control']:,} control) of "
                     f"{r['examples']:,} texts written to {path}. Fill score and counterfactual_score, then Import "
                     "scores….")
            self.refresh_form()

        return self.start_job("Export counterfactual pairs", work, running="Writing the pairs…", on_done=done)

    def import_scores(self, path: str | Path | None = None):
        """Audit a table of pairs scored elsewhere (a job storing a ``ctf`` audit); returns the job."""
        project = self.job_project()
        if project is None:
            return None
        if path is None:
            path = self._ask_file("Import scored pairs", TABLE_FILTER)
            if not path:
                return None
        path, project_path = Path(path), project.path
        margin, n_boot, seed = float(self.margin_spin.value()), int(self.nboot_spin.value()), \
            int(self.seed_spin.value())

        def work(progress, cancel):
            from fairdesk.jobs.ctf import audit_ctf_scores

            return audit_ctf_scores(project_path, path, margin=margin, n_boot=n_boot, seed=seed, progress=progress,
                                    cancel=cancel)

        return self.start_job(f"Counterfactual audit of imported scores: {path.name}", work,
                              running="Auditing the imported scores…",
                              on_done=lambda job: self.audit_stored(job.result))

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        ready = self.window_.project is not None and not self.busy
        self.export_pairs_button.setEnabled(ready)
        self.import_scores_button.setEnabled(ready)

    # ---- results -------------------------------------------------------------------------------------------
    def show_results(self, doc) -> None:
        if doc is None:
            self.summary.clear()
            for view in (self.gaps_view, self.term_gaps_view, self.pairs_view, self.rate_gaps_view,
                         self.term_rates_view, self.unknown_view):
                view.set_frame(None)
            self.unknown_label.setText("")
            self.gaps_warning.hide()
            self.result_tabs.setTabText(self.unknown_index, "Unknown terms")
            self.result_tabs.tabBar().setTabTextColor(self.unknown_index, QColor())
            self.diff_viewer.set_examples([])
        else:
            self.summary.setHtml(summary_html(doc, self.window_.settings.suppress_k))
            self.gaps_view.set_frame(gaps_table(doc))
            self.term_gaps_view.set_frame(term_gaps_table(doc))
            self.pairs_view.set_frame(pairs_table(doc))
            self.rate_gaps_view.set_frame(rate_gaps_table(doc))
            self.term_rates_view.set_frame(term_rates_table(doc))
            unknown = unknown_table(doc)
            self.unknown_view.set_frame(unknown)
            self.unknown_label.setText(unknown_text(doc))
            held = len((doc.get("unknown_terms") or {}).get("held_out") or [])
            self.unknown_label.setStyleSheet("color: #B00020; font-weight: bold;" if held else "")
            self.gaps_warning.setText(unknown_text(doc) if len(unknown) else "")
            self.gaps_warning.setVisible(bool(len(unknown)))
            self.result_tabs.setTabText(self.unknown_index, f"Unknown terms ({len(unknown)})" if len(unknown)
                                        else "Unknown terms")
            self.result_tabs.tabBar().setTabTextColor(self.unknown_index, QColor("#B00020") if held else QColor())
            examples = doc.get("examples") or []
            self.diff_viewer.set_examples(examples, note=(
                f"The audit stores the {len(examples)} pairs with the largest changes (train and held-out terms "
                f"together) out of {int((doc.get('counts') or {}).get('n_identity_pairs') or 0):,} identity pairs "
                "scored."))
        self.show_comparison()

    def stored_documents(self) -> list[tuple[int, str, dict]]:
        """``(id, name, document)`` of every stored ``ctf`` audit of the project (documents cached by id)."""
        project = self.window_.project
        if project is None:
            return []
        out = []
        kind = self.kind().name
        for a in project.audits():
            if a.kind != kind:
                continue
            if a.id not in self._doc_cache:
                try:
                    self._doc_cache[a.id] = project.load_audit(a.id)
                except (FairDeskError, ValueError, KeyError):
                    continue
            out.append((a.id, a.name, self._doc_cache[a.id]))
        return out

    def show_comparison(self) -> None:
        from fairdesk.core.audits.ctf_compare import ctf_comparison

        stored = self.stored_documents()
        if not stored:
            self.compare_view.set_frame(None)
            return
        self.compare_view.set_frame(ctf_comparison([d for _, _, d in stored],
                                                   names=[f"#{i}  {n}" for i, n, _ in stored]))
