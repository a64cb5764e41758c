"""Note-level downstream classifiers on frozen clinical-BERT features (001 §4.1, METHODS §1 and §7).

For a notes table (a text column, one or more 0/1 task label columns, a patient id, protected attribute columns and
optional numeric columns) and a local masked-LM folder:

1. **Windows.** Every note (PHI placeholders replaced as in pretraining) is tokenized without special tokens and
   cut into sliding windows of ``L = max_length − 2`` word pieces (room for [CLS] and [SEP]) starting every
   ``stride`` pieces (default ``L``: adjacent, non-overlapping windows). At most ``max_windows`` (10) windows are
   kept per note, so at most ``L + (max_windows − 1)·stride`` pieces (10 × the model's length without overlap);
   the rest is truncated and counted (notes and pieces) in the result.
2. **Features.** The encoder is frozen (eval mode, no gradients). A window's features are the concatenation of the
   [CLS] vectors of the last four layers (001 §4.1; fewer when the model has fewer layers — recorded), plus the
   chosen numeric columns of its note. Everything is standardised with the mean and SD of the training windows.
3. **Classifier.** Per task, an sklearn ``MLPClassifier`` grid (hidden sizes × L2 penalty ``alpha``) is fitted on
   the training windows, each window carrying its note's label (001: "we assign the outcome label for each
   subsequence to be the label from its derived note").
4. **Merging.** Window probabilities ``p_1 … p_n`` of a note become ``P = (max p + mean p · n/c) / (1 + n/c)``
   (001 eq. 1). ``c`` is chosen on the validation notes over :data:`MERGE_C_GRID` (METHODS §1), jointly with the
   MLP configuration: the pair with the best validation AUPRC wins (ties: the earlier configuration, then the
   ``c`` closest to the default 2 — with one window per note every ``c`` gives the same score).
5. **Threshold** by best F1 on the validation notes (:func:`fairdesk.core.stats.thresholds.best_f1_threshold`, as
   the group audit).
6. **Splits** are patient-disjoint (:func:`fairdesk.core.data.splits.patient_disjoint_split`, seeded); metrics
   are AUROC/AUPRC of the merged note scores on the test notes (sklearn.metrics).

The predictions come out in the long format the group audit reads (``sample_id, patient_id, task, label, score,
split, n_windows`` + attributes), see :func:`prediction_roles`.

The encoder comparison built on these classifiers (group gaps and the attribute probe per encoder, audit kind
``"note_classifiers"``) is an audit: :mod:`fairdesk.core.audits.encoders`.

torch, transformers and sklearn are imported inside functions only.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

#: The grid of the merge constant c (METHODS §1) and its default.
MERGE_C_GRID: tuple[float, ...] = (0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 0.7, 1, 1.2, 1.5, 2, 3, 5, 10, 20, 50,
                                   100, 1000)
DEFAULT_C = 2.0
#: Default MLP grid. 001 searches depth, width ratio and dropout of a batch-norm network; sklearn's MLP has no
#: dropout or batch norm, so depth (1 or 2 layers, the second half as wide) and the L2 penalty are searched.
DEFAULT_MLP_GRID: tuple[dict[str, Any], ...] = (
    {"hidden_layer_sizes": (64,), "alpha": 1e-4},
    {"hidden_layer_sizes": (64,), "alpha": 1e-2},
    {"hidden_layer_sizes": (64, 32), "alpha": 1e-4},
    {"hidden_layer_sizes": (64, 32), "alpha": 1e-2},
)
MODEL_KIND = "note_mlp"
N_LAYERS = 4
MIN_NOTES = 20
RESERVED = ("sample_id", "task", "label", "score", "split", "n_windows")


# ==============================================================================================================
# Specification and result


@dataclass
class NoteClassifierSpec:
    """What to train. ``tasks``: label columns (task name = column name) or {task name: label column}."""

    tasks: list[str] | dict[str, str]
    text_column: str = "text"
    patient_id: str | None = "patient_id"
    note_id: str | None = None  # a unique note id column; default: the row number ("note-<row>")
    attributes: list[str] = field(default_factory=list)  # protected attributes carried into the predictions
    continuous_attributes: list[str] = field(default_factory=list)  # e.g. age (error spread in the audit)
    numeric_columns: list[str] = field(default_factory=list)  # appended to the features (e.g. age, acuity scores)
    max_length: int | None = None  # window length in tokens incl. [CLS]/[SEP]; default: the model's maximum
    stride: int | None = None  # tokens between window starts; default: the window body (no overlap)
    max_windows: int = 10
    c_grid: tuple[float, ...] = MERGE_C_GRID
    mlp_grid: tuple[dict[str, Any], ...] = DEFAULT_MLP_GRID
    max_iter: int = 200
    val_size: float = 0.15
    test_size: float = 0.25
    seed: int = 0
    batch_size: int = 32  # windows per encoder forward pass
    device: str = "cpu"

    def resolved_tasks(self) -> dict[str, str]:
        if isinstance(self.tasks, dict):
            return {str(k): str(v) for k, v in self.tasks.items()}
        return {str(c): str(c) for c in self.tasks}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tasks"] = self.resolved_tasks()
        d["c_grid"] = [float(c) for c in self.c_grid]
        d["mlp_grid"] = [jsonable(g) for g in self.mlp_grid]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "NoteClassifierSpec":
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        if "c_grid" in d:
            d["c_grid"] = tuple(float(c) for c in d["c_grid"])
        if "mlp_grid" in d:
            d["mlp_grid"] = tuple({k: (tuple(v) if isinstance(v, list) else v) for k, v in g.items()}
                                  for g in d["mlp_grid"])
        return cls(**d)


@dataclass
class EncodedNotes:
    """Window features of every note for one encoder (cached across tasks)."""

    features: np.ndarray  # (n_windows_total, dim) float32, [CLS] of the last layers concatenated
    note_index: np.ndarray  # (n_windows_total,) row of the note each window belongs to
    n_windows: np.ndarray  # (n_notes,) windows per note
    info: dict[str, Any]  # encoder path, fingerprint, lengths, truncation counts, timing

    def note_means(self) -> np.ndarray:
        """Mean window feature per note (for the attribute probe)."""
        sums = np.zeros((len(self.n_windows), self.features.shape[1]))
        np.add.at(sums, self.note_index, self.features)
        return sums / np.maximum(self.n_windows, 1)[:, None]


@dataclass
class NoteClassifierResult:
    predictions: pd.DataFrame  # long format, see prediction_roles()
    metrics: list[dict[str, Any]]  # per task: test/val AUROC, AUPRC, chosen c, MLP params, threshold, sizes
    model_hashes: dict[str, str]  # task -> SHA-256 of the fitted pipeline
    encoder: dict[str, Any]  # path, fingerprint, windows, truncation, extraction speed
    spec: NoteClassifierSpec
    data_sha256: str
    split_sizes: dict[str, int]
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    elapsed_seconds: float = 0.0
    encoded: EncodedNotes | None = None  # the features (not serialised)

    def to_dict(self) -> dict:
        return jsonable({"kind": MODEL_KIND, "metrics": self.metrics, "model_hashes": self.model_hashes,
                          "encoder": self.encoder, "spec": self.spec.to_dict(), "data_sha256": self.data_sha256,
                          "seed": self.spec.seed, "split_sizes": self.split_sizes, "notes": self.notes,
                          "versions": self.versions, "elapsed_seconds": round(self.elapsed_seconds, 3)})


def prediction_roles(spec: NoteClassifierSpec):
    """The column roles of the predictions table (what the group audit and the Audit tab read)."""
    from fairdesk.core.data.schema import ColumnRoles

    return ColumnRoles(label="label", score="score", task="task", attributes=tuple(spec.attributes),
                       continuous_attributes=tuple(spec.continuous_attributes),
                       patient_id="patient_id" if spec.patient_id else None, sample_id="sample_id", split="split")


# ==============================================================================================================
# Merging window probabilities (001 eq. 1)


def merge_probabilities(p, c: float) -> float:
    """``(max p + mean p · n/c) / (1 + n/c)`` for the window probabilities ``p`` of one note."""
    p = np.asarray(p, dtype=float)
    if p.size == 0:
        raise ValueError("a note needs at least one window probability")
    if not c > 0:
        raise DataError(f"The merge constant c must be positive (got {c}).")
    r = p.size / float(c)
    return float((p.max() + p.mean() * r) / (1.0 + r))


def merge_by_note(window_p: np.ndarray, note_index: np.ndarray, n_notes: int, c: float) -> np.ndarray:
    """Vectorised :func:`merge_probabilities` over all notes (windows grouped by ``note_index``)."""
    window_p = np.asarray(window_p, dtype=float)
    n = np.bincount(note_index, minlength=n_notes).astype(float)
    mx = np.full(n_notes, -np.inf)
    np.maximum.at(mx, note_index, window_p)
    mean = np.bincount(note_index, weights=window_p, minlength=n_notes) / np.maximum(n, 1)
    r = n / float(c)
    out = (mx + mean * r) / (1.0 + r)
    return np.where(n > 0, out, np.nan)


def choose_c(window_p: np.ndarray, note_index: np.ndarray, y: np.ndarray, grid=MERGE_C_GRID,
             default: float = DEFAULT_C) -> tuple[float, float, dict[float, float]]:
    """The ``c`` of ``grid`` whose merged note scores have the best AUPRC against the note labels ``y``.

    ``note_index`` numbers the notes 0..len(y)-1. Ties go to the ``c`` closest to ``default`` (in log scale).
    Returns ``(c, auprc, {c: auprc})``.
    """
    from sklearn.metrics import average_precision_score

    y = np.asarray(y)
    if len(np.unique(y)) < 2:
        raise DataError("Choosing the merge constant c needs validation notes of both classes.")
    curve = {float(c): float(average_precision_score(y, merge_by_note(window_p, note_index, len(y), c)))
             for c in grid}
    best = max(curve.values())
    ties = [c for c, v in curve.items() if v >= best - 1e-12]
    chosen = min(ties, key=lambda c: (abs(math.log(c / default)), c))
    return chosen, curve[chosen], curve


# ==============================================================================================================
# Windows and features


def window_spans(n_tokens: int, body: int, stride: int, max_windows: int) -> tuple[list[tuple[int, int]], int]:
    """Start/end token offsets of a note's windows, and how many tokens are left out (beyond ``max_windows``).

    Windows of ``body`` tokens start at 0, ``stride``, 2·``stride`` … until the note is covered; an empty note gives
    one empty window. The last window may be shorter.
    """
    if body < 1 or stride < 1 or max_windows < 1:
        raise DataError("Window length, stride and the maximum number of windows must be positive.")
    if n_tokens <= body:
        return [(0, n_tokens)], 0
    needed = 1 + math.ceil((n_tokens - body) / stride)
    k = min(needed, max_windows)
    spans = [(i * stride, min(i * stride + body, n_tokens)) for i in range(k)]
    return spans, max(0, n_tokens - spans[-1][1])


def model_max_length(model, tokenizer) -> int:
    """The longest input the model takes (position embeddings, and the tokenizer's own limit when it sets one)."""
    cfg = model.config
    limit = int(getattr(cfg, "max_position_embeddings", 512) or 512)
    if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        limit -= 2  # RoBERTa's positions start after the padding index
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < 100_000:
        limit = min(limit, tok_limit)
    return limit


def encode_notes(encoder_dir: str | Path, texts, spec: NoteClassifierSpec, progress: ProgressFn | None = None,
                 cancel: CancelToken | None = None) -> EncodedNotes:
    """Frozen window features of ``texts`` (see the module docstring)."""
    import torch

    from fairdesk.core.models.mlm import load_masked_lm, model_fingerprint, replace_phi

    rep = Reporter(progress, cancel)
    rep(0.0, "Loading the encoder")
    model, tokenizer = load_masked_lm(encoder_dir, device=spec.device)
    limit = model_max_length(model, tokenizer)
    max_length = int(spec.max_length or limit)
    if max_length > limit:
        raise ModelError(f"The window length {max_length} is longer than the model accepts ({limit} tokens). "
                         f"Choose at most {limit}.")
    if max_length < 8:
        raise DataError(f"The window length {max_length} is too short; use at least 8 tokens.")
    body = max_length - 2
    stride = int(spec.stride or body)
    if stride > body:
        raise DataError(f"The stride ({stride}) is longer than a window ({body} tokens after [CLS] and [SEP]): "
                        "text between windows would be skipped. Choose a stride of at most the window length.")
    if spec.max_windows < 1:
        raise DataError("The maximum number of windows per note must be at least 1.")
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if cls_id is None or sep_id is None:
        raise ModelError(f"The tokenizer in {encoder_dir} has no [CLS]/[SEP] tokens; FairDesk reads the [CLS] vector "
                         "of BERT-family encoders.")

    t0 = time.perf_counter()
    windows: list[list[int]] = []
    note_index: list[int] = []
    n_windows = np.zeros(len(texts), dtype=np.int64)
    truncated_notes, truncated_tokens, total_tokens = 0, 0, 0
    texts = ["" if (t is None or (isinstance(t, float) and math.isnan(t))) else str(t) for t in texts]
    for start in range(0, len(texts), 256):
        rep(0.05 * start / max(len(texts), 1), "Tokenizing")
        chunk = [replace_phi(t) for t in texts[start:start + 256]]
        ids_list = tokenizer(chunk, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        for j, ids in enumerate(ids_list):
            spans, lost = window_spans(len(ids), body, stride, spec.max_windows)
            total_tokens += len(ids)
            if lost:
                truncated_notes += 1
                truncated_tokens += lost
            for a, b in spans:
                windows.append([cls_id] + list(ids[a:b]) + [sep_id])
                note_index.append(start + j)
            n_windows[start + j] = len(spans)
    note_idx = np.asarray(note_index, dtype=np.int64)

    # encode, longest windows first so that padding stays small
    torch.manual_seed(0)
    order = np.argsort([-len(w) for w in windows], kind="stable")
    n_hidden = int(getattr(model.config, "num_hidden_layers", N_LAYERS))
    layers = min(N_LAYERS, n_hidden + 1)  # hidden states include the embedding output
    dim = int(model.config.hidden_size) * layers
    feats = np.zeros((len(windows), dim), dtype=np.float32)
    dev = next(model.parameters()).device
    bs = max(1, int(spec.batch_size))
    t1 = time.perf_counter()
    with torch.inference_mode():
        for a in range(0, len(order), bs):
            rep(0.05 + 0.95 * a / max(len(order), 1), f"Encoding window {a:,} of {len(order):,}")
            idx = order[a:a + bs]
            width = max(len(windows[i]) for i in idx)
            ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                w = windows[i]
                ids[r, :len(w)] = torch.tensor(w, dtype=torch.long)
                mask[r, :len(w)] = 1
            out = model.base_model(input_ids=ids.to(dev), attention_mask=mask.to(dev), output_hidden_states=True)
            h = torch.cat([out.hidden_states[-i][:, 0] for i in range(1, layers + 1)], dim=1)
            feats[idx] = h.float().cpu().numpy()
    t_end = time.perf_counter()
    rep(1.0, f"Encoded {len(texts):,} notes in {len(windows):,} windows")
    info = {
        "path": str(Path(encoder_dir).resolve()), "fingerprint": model_fingerprint(encoder_dir),
        "model_type": getattr(model.config, "model_type", ""), "hidden_size": int(model.config.hidden_size),
        "num_hidden_layers": n_hidden, "layers_concatenated": layers, "feature_dim": dim,
        "max_length": max_length, "model_max_length": limit, "stride": stride, "max_windows": int(spec.max_windows),
        "n_notes": len(texts), "n_windows": int(len(windows)), "mean_windows_per_note":
            float(n_windows.mean()) if len(texts) else 0.0,
        "notes_at_window_cap": int((n_windows >= spec.max_windows).sum()),
        "truncated_notes": truncated_notes, "truncated_tokens": truncated_tokens, "total_tokens": total_tokens,
        "tokenize_seconds": round(t1 - t0, 4), "encode_seconds": round(t_end - t1, 4),
        "notes_per_second": round(len(texts) / max(t_end - t0, 1e-9), 2),
        "windows_per_second": round(len(windows) / max(t_end - t1, 1e-9), 2),
    }
    del model
    return EncodedNotes(feats, note_idx, n_windows, info)


# ==============================================================================================================
# Input checks


def check_notes(df: pd.DataFrame, spec: NoteClassifierSpec) -> dict[str, str]:
    """Raise :class:`DataError` for an unusable notes table; return the tasks {name: label column}."""
    if not isinstance(df, pd.DataFrame):
        raise DataError("The notes must be a table (CSV or Parquet) with a text column.")
    tasks = spec.resolved_tasks()
    if not tasks:
        raise DataError("No task was chosen. Give at least one 0/1 label column, e.g. --tasks mortality.")
    cols = set(map(str, df.columns))
    need = [("text", spec.text_column)] + [("label", c) for c in tasks.values()]
    need += [("patient id", spec.patient_id)] if spec.patient_id else []
    need += [("note id", spec.note_id)] if spec.note_id else []
    need += [("attribute", c) for c in spec.attributes] + [("continuous attribute", c)
                                                            for c in spec.continuous_attributes]
    need += [("numeric", c) for c in spec.numeric_columns]
    missing = [f"{kind} '{c}'" for kind, c in need if c not in cols]
    if missing:
        shown = ", ".join(map(repr, list(df.columns)[:15])) + (" …" if df.shape[1] > 15 else "")
        raise DataError("These columns are not in the notes table: " + "; ".join(missing) + f" (it has {shown}). "
                        "Check the spelling or choose other columns.")
    clash = sorted(set(RESERVED) & (set(spec.attributes) | set(spec.continuous_attributes)
                                    | ({spec.patient_id} if spec.patient_id else set())))
    if clash:
        raise DataError(f"Column name(s) {', '.join(clash)} are used by the predictions table itself "
                        f"({', '.join(RESERVED)}). Rename them in the notes table.")
    if "patient_id" in (set(spec.attributes) | set(spec.continuous_attributes)) and spec.patient_id != "patient_id":
        raise DataError("An attribute column is called 'patient_id', which the predictions use for the patient id. "
                        "Rename it.")
    if len(df) < MIN_NOTES:
        raise DataError(f"The notes table has only {len(df)} note(s); training needs at least {MIN_NOTES} (in "
                        "practice hundreds).")
    text = df[spec.text_column]
    if not (pd.api.types.is_string_dtype(text) or pd.api.types.is_object_dtype(text)):
        raise DataError(f"The text column '{spec.text_column}' holds {text.dtype} values, not text. Choose the "
                        "column with the notes.")
    empty = text.isna() | (text.astype(str).str.strip() == "")
    if empty.all():
        raise DataError(f"The text column '{spec.text_column}' is empty in every row.")
    if spec.patient_id and df[spec.patient_id].isna().any():
        raise DataError(f"The patient id column '{spec.patient_id}' is empty in {int(df[spec.patient_id].isna().sum())}"
                        " row(s). Fill in the patient of every note (notes of one patient stay in one split).")
    if spec.note_id and df[spec.note_id].astype(str).duplicated().any():
        raise DataError(f"The note id column '{spec.note_id}' repeats values; every note needs its own id.")
    for task, col in tasks.items():
        v = pd.to_numeric(df[col], errors="coerce")
        if (v.isna() & df[col].notna()).any() or not v.dropna().isin([0, 1]).all():
            examples = ", ".join(repr(x) for x in pd.unique(df[col].dropna())[:4])
            raise DataError(f"The label column '{col}' (task {task}) must hold 0/1 (found e.g. {examples}). Recode "
                            "it as 1 for the outcome and 0 for no outcome.")
        if v.notna().sum() == 0:
            raise DataError(f"The label column '{col}' (task {task}) is empty.")
    for c in spec.numeric_columns:
        v = pd.to_numeric(df[c], errors="coerce")
        if (v.isna() & df[c].notna()).any():
            raise DataError(f"The numeric column '{c}' has values that are not numbers. Clean it or leave it out.")
        if v.isna().any() or np.isinf(v).any():
            raise DataError(f"The numeric column '{c}' is missing or infinite in {int((v.isna() | np.isinf(v)).sum())} "
                            "row(s). Impute it (e.g. the training median plus a 0/1 'was missing' column) or leave "
                            "it out.")
    if not spec.mlp_grid:
        raise DataError("The MLP grid is empty; give at least one configuration.")
    if not spec.c_grid or any(not float(c) > 0 for c in spec.c_grid):
        raise DataError("The grid of merge constants c must hold positive numbers.")
    return tasks


# ==============================================================================================================
# Training


def _fit_mlp(X, y, params: dict, seed: int, max_iter: int):
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    clf = Pipeline([("scale", StandardScaler()),
                    ("mlp", MLPClassifier(hidden_layer_sizes=tuple(int(h) for h in params["hidden_layer_sizes"]),
                                          alpha=float(params.get("alpha", 1e-4)),
                                          learning_rate_init=float(params.get("learning_rate_init", 1e-3)),
                                          max_iter=int(params.get("max_iter", max_iter)), random_state=seed))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    return clf


def _auc_pair(y: np.ndarray, s: np.ndarray) -> tuple[float | None, float | None]:
    from sklearn.metrics import average_precision_score, roc_auc_score

    if len(y) == 0 or len(np.unique(y)) < 2:
        return None, None
    return float(roc_auc_score(y, s)), float(average_precision_score(y, s))


def train_note_classifiers(notes: pd.DataFrame, encoder_dir: str | Path, spec: NoteClassifierSpec, *,
                           data_sha256: str | None = None, encoded: EncodedNotes | None = None,
                           progress: ProgressFn | None = None,
                           cancel: CancelToken | None = None) -> NoteClassifierResult:
    """Encode the notes with the frozen encoder and train one classifier per task (module docstring).

    ``encoded`` reuses features computed earlier for the same notes and encoder. Raises :class:`DataError` /
    :class:`ModelError` for unusable input, ``Cancelled`` on cancel (nothing partial is returned).
    """
    from fairdesk.core.data.loaders import table_sha256
    from fairdesk.core.data.splits import patient_disjoint_split
    from fairdesk.core.models.tabular import model_hash
    from fairdesk.core.provenance import package_versions
    from fairdesk.core.stats.thresholds import best_f1_threshold

    t0 = time.perf_counter()
    rep = Reporter(progress, cancel)
    rep(0.0, "Checking the notes")
    tasks = check_notes(notes, spec)
    df = notes.reset_index(drop=True)
    data_sha256 = data_sha256 or table_sha256(df)
    try:
        split = patient_disjoint_split(df, spec.patient_id, spec.val_size, spec.test_size, spec.seed).to_numpy()
    except ModelError as err:
        raise DataError(str(err)) from err
    sizes = {s: int((split == s).sum()) for s in ("train", "val", "test")}
    if min(sizes.values()) == 0:
        raise DataError(f"Too few patients for training, validation and test notes (train {sizes['train']}, "
                        f"validation {sizes['val']}, test {sizes['test']}). Load more notes.")
    if encoded is None:
        encoded = encode_notes(encoder_dir, df[spec.text_column].tolist(), spec, rep.sub(0.0, 0.6), rep.cancel)
    elif len(encoded.n_windows) != len(df):
        raise DataError("The cached note features do not belong to this notes table.")
    X = encoded.features.astype(np.float64)
    if spec.numeric_columns:
        numeric = df[list(spec.numeric_columns)].apply(pd.to_numeric).to_numpy(dtype=np.float64)
        X = np.hstack([X, numeric[encoded.note_index]])  # standardised on the training windows by the pipeline
    feature_names = [f"cls_{i}" for i in range(encoded.features.shape[1])] + list(spec.numeric_columns)

    sample_ids = (df[spec.note_id].astype(str) if spec.note_id
                  else pd.Series([f"note-{i}" for i in range(len(df))]))
    base = pd.DataFrame({"sample_id": sample_ids.to_numpy()})
    if spec.patient_id:
        base["patient_id"] = df[spec.patient_id].to_numpy()
    for c in list(spec.attributes) + list(spec.continuous_attributes):
        if c not in base.columns:
            base[c] = df[c].to_numpy()

    frames, metrics, hashes, notes_out = [], [], {}, []
    n_tasks = len(tasks)
    for t_i, (task, col) in enumerate(tasks.items()):
        trep = rep.sub(0.6 + 0.39 * t_i / n_tasks, 0.6 + 0.39 * (t_i + 1) / n_tasks)
        trep(0.0, f"Task {t_i + 1}/{n_tasks} '{task}'")
        yall = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        has = ~np.isnan(yall)
        if not has.all():
            notes_out.append(f"Task '{task}': {int((~has).sum())} note(s) without a label were left out.")
        y = np.where(has, yall, 0).astype(np.int64)
        masks = {s: has & (split == s) for s in ("train", "val", "test")}
        for s in ("train", "val"):
            if len(np.unique(y[masks[s]])) < 2:
                raise DataError(f"Task '{task}': the {'training' if s == 'train' else 'validation'} notes hold only "
                                "one class, so a classifier cannot be trained and selected. Load more notes or "
                                "choose another task.")
        w_tr = masks["train"][encoded.note_index]
        w_va = masks["val"][encoded.note_index]
        va_notes = np.flatnonzero(masks["val"])
        va_pos = np.full(len(df), -1)
        va_pos[va_notes] = np.arange(len(va_notes))
        grid_rows, best = [], None
        for g_i, params in enumerate(spec.mlp_grid):
            trep(0.9 * g_i / len(spec.mlp_grid), f"Task '{task}': MLP {g_i + 1}/{len(spec.mlp_grid)}")
            clf = _fit_mlp(X[w_tr], y[encoded.note_index[w_tr]], params, spec.seed, spec.max_iter)
            trep.check()
            p_va = clf.predict_proba(X[w_va])[:, 1]
            c, auprc, curve = choose_c(p_va, va_pos[encoded.note_index[w_va]], y[va_notes], spec.c_grid)
            grid_rows.append({"params": jsonable(params), "val_auprc": auprc, "c": c})
            if best is None or auprc > best[0] + 1e-12:
                best = (auprc, g_i, clf, c, curve)
        _, g_best, clf, c, curve = best
        trep(0.92, f"Task '{task}': predicting")
        p_all = clf.predict_proba(X)[:, 1]
        note_scores = np.clip(merge_by_note(p_all, encoded.note_index, len(df), c), 0.0, 1.0)
        threshold = best_f1_threshold(y[masks["val"]], note_scores[masks["val"]])
        hashes[task] = model_hash(clf, MODEL_KIND, feature_names)
        out = base[has].reset_index(drop=True).copy()
        out["task"] = task
        out["label"] = y[has]
        out["score"] = note_scores[has]
        out["split"] = split[has]
        out["n_windows"] = encoded.n_windows[has]
        frames.append(out)
        row: dict[str, Any] = {"task": task, "label_column": col}
        for s in ("train", "val", "test"):
            row[f"n_{s}"] = int(masks[s].sum())
            row[f"prevalence_{s}"] = float(y[masks[s]].mean()) if masks[s].any() else None
        for s in ("val", "test"):
            row[f"{s}_auroc"], row[f"{s}_auprc"] = _auc_pair(y[masks[s]], note_scores[masks[s]])
        yhat = note_scores[masks["test"]] >= threshold
        yt = y[masks["test"]]
        row.update({"n_features": int(X.shape[1]), "c": c, "c_curve": curve,
                    "mlp": jsonable(spec.mlp_grid[g_best]), "mlp_grid": grid_rows,
                    "threshold": float(threshold),
                    "test_f1": (float(2 * np.sum(yhat & (yt == 1)) / max(np.sum(yhat) + np.sum(yt == 1), 1))
                                if masks["test"].any() else None),
                    "model_hash": hashes[task]})
        metrics.append(row)
        trep(1.0, f"Task '{task}': done")

    rep(0.995, "Assembling the predictions")
    predictions = pd.concat(frames, ignore_index=True)
    predictions["label"] = predictions["label"].astype(np.int64)
    predictions["score"] = predictions["score"].astype(np.float64)
    predictions["split"] = predictions["split"].astype(str)
    if encoded.info.get("truncated_notes"):
        notes_out.append(f"{encoded.info['truncated_notes']} note(s) were longer than {spec.max_windows} windows; "
                         f"{encoded.info['truncated_tokens']:,} word pieces beyond the last window were left out.")
    result = NoteClassifierResult(predictions=predictions, metrics=metrics, model_hashes=hashes,
                                  encoder=dict(encoded.info), spec=spec, data_sha256=data_sha256, split_sizes=sizes,
                                  notes=notes_out, versions=package_versions("transformers"),
                                  elapsed_seconds=time.perf_counter() - t0, encoded=encoded)
    rep(1.0, f"Trained {n_tasks} note classifier(s)")
    return result
